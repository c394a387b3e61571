"""The two databases the store runs on, behind one thin adapter: SQLite (embedded, the default) and PostgreSQL.

There is ONE store (:mod:`deniable.aggregator.store`) and ONE list of migrations
(:mod:`deniable.aggregator.migrations`), written in the SQL both databases share; this module holds the few
things that differ, so that a new query written for one runs on the other:

=========================  ==============================================  =====================================
                           SQLite (a file, ``Path``)                       PostgreSQL (``postgresql://...``)
=========================  ==============================================  =====================================
driver / connection        ``sqlite3``, the raw connection                 psycopg 3 behind
                                                                           :class:`PostgresConnection`
placeholders               ``?`` (qmark)                                   ``?`` rewritten to ``%s`` once per
                                                                           statement (cached); ``%`` escaped
write transaction          ``BEGIN IMMEDIATE`` (the one write lock)        ``SERIALIZABLE`` (any outcome is a
                                                                           serial order; failures retried)
hot-path transaction       ``BEGIN IMMEDIATE``                             ``READ COMMITTED`` with unique
(:data:`CONCURRENT`)                                                       constraints, ``ON CONFLICT`` and
                                                                           row locks
read snapshot              ``BEGIN DEFERRED`` (WAL)                        ``REPEATABLE READ READ ONLY``
row locks                  none needed (one writer)                        ``FOR UPDATE`` / ``FOR SHARE``
                                                                           (:meth:`Database.lock`)
DDL types                  BLOB, REAL, INTEGER, ``WITHOUT ROWID``,         BYTEA, DOUBLE PRECISION, BIGINT,
                           ``INTEGER PRIMARY KEY AUTOINCREMENT``           identity column (:func:`pg_ddl`)
schema version             ``PRAGMA user_version``                         table ``deniable_schema``
tally shards               1 (one writer: no hot row to spread)            :data:`PG_TALLY_SHARDS`
retryable failures         ``SQLITE_BUSY`` past ``busy_timeout``           serialization failure (40001),
                                                                           deadlock (40P01), lost connection,
                                                                           server shutting down or starting
=========================  ==============================================  =====================================

Portable SQL (both accept it; SQLite ≥ 3.35): ``INSERT ... ON CONFLICT (...) DO NOTHING | DO UPDATE SET
c = excluded.c``, ``RETURNING``, ``LIMIT ? OFFSET ?``, sub-selects with an alias, ``COALESCE``. Not
portable, and therefore not used: ``INSERT OR REPLACE`` / ``OR IGNORE``, ``lastrowid`` (use ``RETURNING``),
``PRAGMA``, SQLite's JSON functions in queries (JSON is decoded in Python), a bare ``n`` inside ``DO UPDATE``
(write ``table.n``), ``SUM`` results used without ``int()`` (PostgreSQL sums BIGINT to NUMERIC).

Errors: a failure of the database itself (locked past the timeout, a lost connection, a server that shuts
down, a serialization failure) becomes :class:`~deniable.shared.errors.StoreUnavailable` (HTTP 503 with
``Retry-After``; devices keep their reports and send them again, which is idempotent). Its ``retry`` flag
says the transaction was certainly rolled back and may be run again at once (:meth:`Store.retrying`).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from deniable.shared.errors import StoreUnavailable

__all__ = [
    "CONCURRENT",
    "PG_TALLY_SHARDS",
    "SERIAL",
    "Connection",
    "Cursor",
    "Database",
    "PostgresConnection",
    "driver_errors",
    "is_postgres_url",
    "member_of",
    "pg_ddl",
    "unavailable",
]

#: Isolation of a read-modify-write transaction: equivalent to running alone (SQLite's write lock, or
#: PostgreSQL's SERIALIZABLE, whose failures :meth:`Store.retrying` runs again).
SERIAL = "serial"
#: Isolation of the ingest path on PostgreSQL: READ COMMITTED, correct by unique constraints, conflict
#: handling and row locks rather than by predicate locks (which would make concurrent batches abort each
#: other). On SQLite the same ``BEGIN IMMEDIATE``.
CONCURRENT = "concurrent"

#: Rows each tally (and arrival counter) is spread over on PostgreSQL: each connection adds to its own
#: shard, so concurrent batches of one campaign never wait on one row; readers sum the shards.
PG_TALLY_SHARDS = 16


class Cursor(Protocol):
    """What the store uses of a DB-API cursor."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the store uses of a connection: ``sqlite3.Connection`` as it is, or :class:`PostgresConnection`."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Any = (), /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """The URL without its password (for logs and messages)."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


@lru_cache(maxsize=1024)
def pg_sql(sql: str) -> str:
    """A qmark statement as psycopg takes it: each ``?`` outside a string literal becomes ``%s``, ``%`` is
    doubled. Cached: the store's statements are constants."""
    out: list[str] = []
    quoted = False
    for char in sql:
        if char == "'":
            quoted = not quoted
            out.append(char)
        elif char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


_DDL_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.I),
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    ),
    (re.compile(r"\)\s*WITHOUT\s+ROWID\b", re.I), ")"),
    (re.compile(r"\bBLOB\b", re.I), "BYTEA"),
    (re.compile(r"\bREAL\b", re.I), "DOUBLE PRECISION"),
    (re.compile(r"\bINTEGER\b", re.I), "BIGINT"),
)


def pg_ddl(statement: str) -> str:
    """A migration statement in SQLite's dialect as PostgreSQL takes it (types and table options; see the
    table in the module docstring). Statements other than CREATE/ALTER pass through unchanged."""
    if not re.match(r"\s*(CREATE|ALTER)\b", statement, re.I):
        return statement
    for pattern, replacement in _DDL_RULES:
        statement = pattern.sub(replacement, statement)
    return statement


def driver_errors() -> tuple[type[Exception], ...]:
    """The driver exception classes that mean the database failed (not a bug in a query)."""
    errors: list[type[Exception]] = [sqlite3.OperationalError]
    try:
        import psycopg
    except ModuleNotFoundError:  # a SQLite-only install
        return tuple(errors)
    errors += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(errors)


#: Transaction control statements, sent as they are.
_CONTROL = frozenset({"COMMIT", "ROLLBACK"})

#: SQLSTATEs after which the transaction was certainly rolled back and may run again at once.
_RETRY_STATES = frozenset({"40001", "40P01", "55P03"})  # serialization failure, deadlock, lock timeout


def unavailable(exc: BaseException) -> StoreUnavailable:
    """The :class:`StoreUnavailable` of a driver error (``retry`` when it is safe to run the transaction again)."""
    state = getattr(exc, "sqlstate", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if state in _RETRY_STATES:
        return StoreUnavailable(f"the database asked to retry a conflicting transaction ({text})", retry=True)
    if isinstance(exc, sqlite3.OperationalError):
        return StoreUnavailable(f"the database is unavailable right now ({text}); retry shortly")
    return StoreUnavailable(f"the database is unreachable right now ({text[:200]}); retry shortly")


#: Session settings of every PostgreSQL connection: a lock wait ends like SQLite's busy timeout (30 s), and a
#: session idle inside a transaction (a client that vanished mid-transaction) is ended after 60 s.
SESSION_OPTIONS = "-c lock_timeout=30000 -c idle_in_transaction_session_timeout=60000"


class PostgresConnection:
    """A psycopg 3 connection (autocommit; the store sends ``BEGIN`` itself) taking the store's qmark SQL.

    ``shard`` is the tally shard this connection adds to (chosen at random when it opens). Driver failures
    are raised as :class:`StoreUnavailable`; a connection that failed is ``broken`` and is replaced.
    """

    def __init__(self, url: str, *, shard: int) -> None:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        self._psycopg = psycopg
        try:
            given = conninfo_to_dict(url)
            conninfo = make_conninfo(
                url,
                options=f"{given.get('options') or ''} {SESSION_OPTIONS}".strip(),
                connect_timeout=given.get("connect_timeout") or 5,
            )
            self.raw = psycopg.connect(
                conninfo, autocommit=True, keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3
            )
        except psycopg.Error as exc:
            raise unavailable(exc) from exc
        self.shard = shard
        self.broken = False

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        try:
            if sql in _CONTROL or sql.startswith("BEGIN"):  # never prepared: their text stays on the wire
                return self.raw.execute(sql, prepare=False)
            return self.raw.execute(pg_sql(sql), tuple(parameters) if parameters else None)
        except driver_errors() as exc:
            self._failed(exc)
            raise unavailable(exc) from exc

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        rows = [tuple(p) for p in parameters]
        cursor = self.raw.cursor()
        if not rows:
            return cursor
        try:
            cursor.executemany(pg_sql(sql), rows)
        except driver_errors() as exc:
            self._failed(exc)
            raise unavailable(exc) from exc
        return cursor

    def _failed(self, exc: BaseException) -> None:
        if self.raw.closed or self.raw.broken or getattr(exc, "sqlstate", None) is None:
            self.broken = True

    def close(self) -> None:
        self.raw.close()

    def __del__(self) -> None:  # a store dropped with its thread-local connections closes them quietly
        raw = getattr(self, "raw", None)
        if raw is not None and not raw.closed:
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
                raw.close()


class Database:
    """Where the store's data lives: a SQLite file or a PostgreSQL URL, and how to talk to it."""

    def __init__(self, target: str | Path) -> None:
        if is_postgres_url(target):
            self.dialect = "postgresql"
            self.url = str(target)
            self.path: Path | None = None
            self.tally_shards = PG_TALLY_SHARDS
        else:
            self.dialect = "sqlite"
            self.path = Path(target)
            self.url = str(self.path)
            self.tally_shards = 1
        self._next_shard = 0
        self._lock = threading.Lock()

    @property
    def postgres(self) -> bool:
        return self.dialect == "postgresql"

    def describe(self) -> str:
        """The database for messages: the file, or the URL without its password."""
        return redact_url(self.url) if self.postgres else str(self.path)

    def connect(self, busy_timeout_ms: int) -> Any:
        """A new connection, set up for the store (SQLite: WAL, synchronous=FULL, foreign keys)."""
        if self.postgres:
            import secrets

            return PostgresConnection(self.url, shard=secrets.randbelow(self.tally_shards))
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def begin(self, isolation: str) -> str:
        """The statement that opens a write transaction of ``isolation`` (:data:`SERIAL` or :data:`CONCURRENT`)."""
        if not self.postgres:
            return "BEGIN IMMEDIATE"
        return "BEGIN ISOLATION LEVEL " + ("SERIALIZABLE" if isolation == SERIAL else "READ COMMITTED")

    def begin_snapshot(self) -> str:
        """The statement that opens a read-only transaction seeing one consistent state."""
        return "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if self.postgres else "BEGIN DEFERRED"

    def lock(self, mode: str) -> str:
        """The suffix of a SELECT that locks the rows it reads until commit: ``mode`` is ``update`` (writers
        queue) or ``share`` (writers wait for the readers). Empty on SQLite, whose write lock covers it."""
        if not self.postgres:
            return ""
        return {"update": " FOR UPDATE", "share": " FOR SHARE"}[mode]

    def insert_new(
        self, conn: Any, table: str, columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> int:
        """``INSERT ... ON CONFLICT DO NOTHING`` of ``rows`` into ``table``; the number of rows inserted.

        SQLite: ``executemany``. PostgreSQL: ONE statement over ``unnest`` of one array per column (``types``
        are the columns' SQL types), a single round trip and plan instead of one per row: a batch of 1,000
        reports costs the instance and the server a fraction of what 1,000 pipelined inserts do.
        """
        if not rows:
            return 0
        names = ", ".join(columns)
        if not self.postgres:
            marks = ", ".join("?" * len(columns))
            sql = f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"  # noqa: S608 - constants
            return int(conn.executemany(sql, rows).rowcount)
        arrays = [list(column) for column in zip(*rows, strict=True)]
        unnest = ", ".join(f"?::{kind}[]" for kind in types)
        sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({unnest}) ON CONFLICT DO NOTHING"  # noqa: S608
        return int(conn.execute(sql, arrays).rowcount)

    @staticmethod
    def shard_of(conn: Any) -> int:
        """The tally shard ``conn`` adds to (0 on SQLite)."""
        return int(getattr(conn, "shard", 0))


def member_of(conn: Any, values: Sequence[object], kind: str) -> tuple[str, tuple[object, ...]]:
    """``(sql, parameters)`` testing a column against ``values``: ``IN (?, ...)`` on SQLite, ``= ANY(?)`` of
    one array of SQL type ``kind`` on PostgreSQL (one statement text whatever the count, so it is prepared
    once and planned once)."""
    if isinstance(conn, PostgresConnection):
        return f"= ANY(?::{kind}[])", (list(values),)
    return f"IN ({','.join('?' * len(values))})", tuple(values)


