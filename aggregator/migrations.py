"""The aggregator's schema (SQLite and PostgreSQL), as an ordered list of migrations.

The schema version lives in ``PRAGMA user_version`` (PostgreSQL: the table ``deniable_schema``).
:func:`migrate` applies, in one ``BEGIN IMMEDIATE`` transaction, every migration whose number is above the
stored version, so that several gunicorn workers starting at once upgrade the file exactly once. Migrations
are append-only: never edit a released one.

What the store holds, and what it deliberately does not:

* ``campaigns``: the public campaign descriptor (JSON) and its mutable state (status, report count, and
  for central campaigns the trust model, budget, adjacency and ε spent).
* ``reports``: one row per accepted report: its random report id (16 bytes) and the device's
  per-campaign pseudonym (32 bytes), as the raw bytes of their hex wire form; the group key; the decoded
  *randomized* report as compact JSON; the UTC day it arrived. No IP address, user agent, ciphertext or
  timestamp finer than a day is ever stored.
* ``tallies``: the sufficient statistic ``Tally(n, support)`` per campaign and group, updated in the same
  transaction as the reports, so that it always equals a recount (``deniable verify``).
* ``central_releases``: noisy releases of central campaigns, kept so that the same release asked twice
  spends its ε once.

Version 2 adds *rounds* (recurring campaigns): ``reports.round`` and ``tallies.round`` (``''`` for
non-recurring campaigns and for every row written before), a device counting once per (campaign, round,
pseudonym) and each round tallied on its own. SQLite cannot alter a UNIQUE constraint or a primary key, so
both tables are rebuilt and their rows copied, all within the one migration transaction.

Version 3 stores ``campaigns.epsilon_spent`` **exactly**, as the decimal string of the exact sum of the
releases' ε (each ε taken as the decimal it is written as), instead of a float. The float lost the last
digits of the sum, so comparing it with the budget could allow one release too many (or one too few). The
column is rebuilt as TEXT (a REAL column would coerce numeric text back to a float); each stored float is
converted to the shortest decimal that reads back as it (``repr``), which is the value the old
accountant compared with the budget.

Version 4 adds the central *release policy* and *release log* (``docs/central.md``):

* ``release_policies``: per central campaign, the admin's rules (minimum number of reports before any
  release, minimum interval between refreshes) and who set them when. A campaign without a row follows
  the defaults of :mod:`deniable.shared.limits`.
* ``release_log``: one row per release that spent privacy budget: when, which role asked, its ε, the
  request's parameters (JSON) and its ``cost_json``, the privacy cost in the accountant's form (pure ε:
  ``{"epsilon": ε, "delta": 0}``; other accountants add their own keys, e.g. ρ). Releases made before
  version 4 are not in it (their ε is in ``campaigns.epsilon_spent``) until version 5 summarises them.

Version 5 makes the release log the central accountant's ledger (see ``_V5``): costs in natural form, and
one ``before-release-log`` row per campaign for the ε spent before the log existed.

Version 7 adds ``report_arrivals``: per campaign, round and UTC hour, the number of accepted reports,
counted in the ingest transaction (served by the timeline route). It holds counts only, no report id and
no pseudonym. Reports stored before version 7 carry only their day; they are counted in that day's first
hour (00:00 UTC).

Version 8 adds ``dashboard_sessions``: the browser sessions of the dashboard. A row holds the SHA-256 of
the session cookie (never the cookie), the role, the SHA-256 of the token signed in with (a rotated token
ends its sessions), the CSRF token of the session's forms and its expiry. Signing out deletes the row.

Version 9 adds *admission tokens* (``docs/admission-tokens.md``):

* ``spent_tokens``: the nonce of every admission token spent by a stored report, written in the report's
  own transaction (so a token counts at most once, and never for a report that was not stored), with the
  UTC day only. Nothing links it to the report row or to an account.
* ``token_accounts``: per campaign and account of the app's backend (stored as an HMAC, never the name),
  how many tokens the issuer granted, so that no account gets more than ``tokens_per_account``.

Version 10 makes a report id a retry only *of the same device*: the primary key of ``reports`` becomes
(campaign, report id, pseudonym). Under version 9 a report id already stored under another pseudonym
made the device's own envelope a "duplicate": an observer who saw an undelivered envelope could post its
own signed answer under that report id first, and the device's report was settled as delivered while
never counted. The table is rebuilt (SQLite cannot alter a primary key) and its rows copied.

Version 11 adds ``shuffled_batches`` (the shuffled trust model, ``docs/trust-models.md``): one row per
batch a campaign's shuffler forwarded, keyed by its batch id so that a batch sent again (the shuffler
retrying after a lost answer) is recognised and stored once, with the number of inner ciphertexts it held
and how many were accepted; the central (ε, δ) of the campaign is computed from these sizes. No time finer
than a day is kept, as for reports.

Version 12 makes the schema fit several aggregator instances over one PostgreSQL database (issue 17):

* ``tally_shards`` replaces ``tallies``: a tally is the *sum* of its shard rows (``shard`` in the key).
  On PostgreSQL each connection adds to its own shard (:data:`deniable.aggregator.database.PG_TALLY_SHARDS`),
  so concurrent batches of one campaign never queue on one hot row (the lesson of Janus issue 2654);
  SQLite has one writer and keeps one shard (``0``). The table is renamed so that a query still reading
  one row per group from ``tallies`` fails loudly instead of reading one shard.
* ``report_arrivals`` gets a ``shard`` in its key for the same reason (readers sum).
* ``campaigns.n_reports`` is dropped: every batch updated it, the hottest row of all. The report count
  is the sum of the campaign's overall tally shards (every round), read in the same query.
* ``campaign_keys``: the campaign's private keys sealed under the key-encryption key of the configuration
  (AES-256-GCM, :mod:`deniable.aggregator.sealed_keys`), so that every instance over the database has them
  without copying files. Used on PostgreSQL; a SQLite data dir keeps its key files.

Dialects: the list below is SQLite's, and every migration from version 11 on is *portable*: it runs on
PostgreSQL through :func:`deniable.aggregator.database.pg_ddl` (BLOB → BYTEA, REAL → DOUBLE PRECISION,
INTEGER → BIGINT, no ``WITHOUT ROWID``, ``INTEGER PRIMARY KEY AUTOINCREMENT`` → an identity column). A new
migration therefore uses plain DDL, ``INSERT ... SELECT``, ``ALTER TABLE ... ADD/DROP/RENAME``, and table
rebuilds (create, copy, drop, rename); no PRAGMA, no SQLite functions. A PostgreSQL database starts from
:data:`PG_BASELINE`, the schema of version 10 in one step (versions 1 to 10 rebuilt SQLite tables and
converted SQLite values that PostgreSQL never held), and applies versions 11 and later like SQLite.
PostgreSQL keeps its version in the table ``deniable_schema``, and :func:`migrate` holds a transaction-level
advisory lock while it upgrades, so that instances starting together upgrade exactly once (DDL is
transactional there too: a failed migration leaves nothing behind).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Context, Decimal, Inexact, InvalidOperation, Rounded
from typing import Any

from deniable.aggregator.database import PostgresConnection, pg_ddl

__all__ = ["MIGRATIONS", "PG_BASELINE", "SCHEMA_VERSION", "migrate", "schema_version"]

_V1: tuple[str, ...] = (
    """
    CREATE TABLE campaigns (
        id            TEXT PRIMARY KEY,
        config_json   TEXT NOT NULL,
        status        TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
        trust_model   TEXT NOT NULL DEFAULT 'local' CHECK (trust_model IN ('local', 'central')),
        budget        REAL,
        adjacency     TEXT,
        epsilon_spent REAL NOT NULL DEFAULT 0,
        n_reports     INTEGER NOT NULL DEFAULT 0,
        created_at    TEXT NOT NULL,
        closed_at     TEXT
    )
    """,
    """
    CREATE TABLE reports (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        report_id    BLOB NOT NULL,
        pseudonym    BLOB NOT NULL,
        groups_json  TEXT NOT NULL,
        report_json  TEXT NOT NULL,
        received_day TEXT NOT NULL,
        PRIMARY KEY (campaign_id, report_id),
        UNIQUE (campaign_id, pseudonym)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE tallies (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        group_field  TEXT NOT NULL,
        group_value  TEXT NOT NULL,
        n            INTEGER NOT NULL,
        support_json TEXT NOT NULL,
        PRIMARY KEY (campaign_id, group_field, group_value)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE central_releases (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        release_key TEXT NOT NULL,
        epsilon     REAL NOT NULL,
        result_json TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (campaign_id, release_key)
    )
    """,
)

_V2: tuple[str, ...] = (
    """
    CREATE TABLE reports_v2 (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        report_id    BLOB NOT NULL,
        round        TEXT NOT NULL DEFAULT '',
        pseudonym    BLOB NOT NULL,
        groups_json  TEXT NOT NULL,
        report_json  TEXT NOT NULL,
        received_day TEXT NOT NULL,
        PRIMARY KEY (campaign_id, report_id),
        UNIQUE (campaign_id, round, pseudonym)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO reports_v2 (campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day)
    SELECT campaign_id, report_id, '', pseudonym, groups_json, report_json, received_day FROM reports
    """,
    "DROP TABLE reports",
    "ALTER TABLE reports_v2 RENAME TO reports",
    """
    CREATE TABLE tallies_v2 (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        round        TEXT NOT NULL DEFAULT '',
        group_field  TEXT NOT NULL,
        group_value  TEXT NOT NULL,
        n            INTEGER NOT NULL,
        support_json TEXT NOT NULL,
        PRIMARY KEY (campaign_id, round, group_field, group_value)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO tallies_v2 (campaign_id, round, group_field, group_value, n, support_json)
    SELECT campaign_id, '', group_field, group_value, n, support_json FROM tallies
    """,
    "DROP TABLE tallies",
    "ALTER TABLE tallies_v2 RENAME TO tallies",
)

_V3: tuple[str, ...] = (
    "ALTER TABLE campaigns ADD COLUMN epsilon_spent_exact TEXT NOT NULL DEFAULT '0'",
    "UPDATE campaigns SET epsilon_spent_exact = deniable_float_decimal(epsilon_spent)",
    "ALTER TABLE campaigns DROP COLUMN epsilon_spent",
    "ALTER TABLE campaigns RENAME COLUMN epsilon_spent_exact TO epsilon_spent",
)

_V4: tuple[str, ...] = (
    """
    CREATE TABLE release_policies (
        campaign_id            TEXT PRIMARY KEY REFERENCES campaigns(id),
        min_reports            INTEGER NOT NULL CHECK (min_reports >= 0),
        min_refresh_interval_s INTEGER NOT NULL CHECK (min_refresh_interval_s >= 0),
        updated_at             TEXT NOT NULL,
        updated_by             TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE release_log (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        campaign_id     TEXT NOT NULL REFERENCES campaigns(id),
        released_at     TEXT NOT NULL,
        role            TEXT NOT NULL,
        epsilon         REAL NOT NULL,
        release_key     TEXT NOT NULL,
        parameters_json TEXT NOT NULL,
        cost_json       TEXT
    )
    """,
    "CREATE INDEX release_log_by_campaign ON release_log (campaign_id, seq)",
)

#: Version 5: the release log becomes the central accountant's ledger. Every row's ``cost_json`` holds the
#: release's cost in its natural form (:class:`deniable.shared.accounting.Cost` as exact JSON: pure ε, ρ with
#: its calibrated (ε, δ), or (ε, δ)); rows of version 4 (``{"epsilon": ε, "delta": 0}``) become pure ε at the
#: decimal of their ε. What a campaign spent before the log existed (``epsilon_spent`` minus the logged ε,
#: exactly) becomes one logged pure-ε row of role ``before-release-log``: a valid, conservative summary, so
#: the accountant composes the whole log by the best rule (zCDP, KOV) and never forgets a spend.
_V5: tuple[str, ...] = (
    "UPDATE release_log SET cost_json = json_object('kind', 'pure', 'count', 1, 'epsilon',"
    " deniable_float_decimal(epsilon)) WHERE cost_json IS NULL OR json_extract(cost_json, '$.kind') IS NULL",
    "INSERT INTO release_log (campaign_id, released_at, role, epsilon, release_key, parameters_json, cost_json)"
    " SELECT id, last_at, 'before-release-log', CAST(unlogged AS REAL), 'spent-before-release-log', '{}',"
    " json_object('kind', 'pure', 'count', 1, 'epsilon', unlogged) FROM (SELECT id,"
    " COALESCE((SELECT MAX(created_at) FROM central_releases s WHERE s.campaign_id = campaigns.id), created_at)"
    " AS last_at,"
    " deniable_decimal_sub(epsilon_spent, (SELECT deniable_decimal_sum(deniable_float_decimal(r.epsilon))"
    " FROM release_log r WHERE r.campaign_id = campaigns.id)) AS unlogged FROM campaigns"
    " WHERE trust_model = 'central') WHERE unlogged != '0'",
)

_V6: tuple[str, ...] = (
    # The readiness route's write probe: one row, rewritten in a transaction by every GET /readyz.
    "CREATE TABLE health_probe (id INTEGER PRIMARY KEY CHECK (id = 1), probed_at TEXT NOT NULL, pid INTEGER NOT NULL)",
)

_V7: tuple[str, ...] = (
    """
    CREATE TABLE report_arrivals (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        round       TEXT NOT NULL DEFAULT '',
        hour        TEXT NOT NULL,
        n           INTEGER NOT NULL CHECK (n >= 0),
        PRIMARY KEY (campaign_id, round, hour)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO report_arrivals (campaign_id, round, hour, n)
    SELECT campaign_id, round, received_day || 'T00:00:00Z', COUNT(*) FROM reports
    GROUP BY campaign_id, round, received_day
    """,
)

_V8: tuple[str, ...] = (
    """
    CREATE TABLE dashboard_sessions (
        id_hash    BLOB PRIMARY KEY,
        role       TEXT NOT NULL CHECK (role IN ('analyst', 'admin')),
        token_hash BLOB NOT NULL,
        csrf       TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
)

_V9: tuple[str, ...] = (
    """
    CREATE TABLE spent_tokens (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        nonce       BLOB NOT NULL,
        spent_day   TEXT NOT NULL,
        PRIMARY KEY (campaign_id, nonce)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE token_accounts (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        account     BLOB NOT NULL,
        issued      INTEGER NOT NULL CHECK (issued >= 0),
        PRIMARY KEY (campaign_id, account)
    ) WITHOUT ROWID
    """,
)

_V10: tuple[str, ...] = (
    """
    CREATE TABLE reports_v10 (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        report_id    BLOB NOT NULL,
        round        TEXT NOT NULL DEFAULT '',
        pseudonym    BLOB NOT NULL,
        groups_json  TEXT NOT NULL,
        report_json  TEXT NOT NULL,
        received_day TEXT NOT NULL,
        PRIMARY KEY (campaign_id, report_id, pseudonym),
        UNIQUE (campaign_id, round, pseudonym)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO reports_v10 (campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day)
    SELECT campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day FROM reports
    """,
    "DROP TABLE reports",
    "ALTER TABLE reports_v10 RENAME TO reports",
)

_V11: tuple[str, ...] = (
    """
    CREATE TABLE shuffled_batches (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        batch_id     BLOB NOT NULL,
        n            INTEGER NOT NULL,
        accepted     INTEGER NOT NULL,
        received_day TEXT NOT NULL,
        PRIMARY KEY (campaign_id, batch_id)
    ) WITHOUT ROWID
    """,
)

_V12: tuple[str, ...] = (
    """
    CREATE TABLE tally_shards (
        campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
        round        TEXT NOT NULL DEFAULT '',
        group_field  TEXT NOT NULL,
        group_value  TEXT NOT NULL,
        shard        INTEGER NOT NULL DEFAULT 0 CHECK (shard >= 0),
        n            INTEGER NOT NULL,
        support_json TEXT NOT NULL,
        PRIMARY KEY (campaign_id, round, group_field, group_value, shard)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO tally_shards (campaign_id, round, group_field, group_value, shard, n, support_json)
    SELECT campaign_id, round, group_field, group_value, 0, n, support_json FROM tallies
    """,
    "DROP TABLE tallies",
    # the campaign's report count sums the overall shards of every round: a seek, not a scan of its groups
    "CREATE INDEX tally_shards_overall ON tally_shards (campaign_id, group_field, group_value)",
    """
    CREATE TABLE report_arrivals_v12 (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        round       TEXT NOT NULL DEFAULT '',
        hour        TEXT NOT NULL,
        shard       INTEGER NOT NULL DEFAULT 0 CHECK (shard >= 0),
        n           INTEGER NOT NULL CHECK (n >= 0),
        PRIMARY KEY (campaign_id, round, hour, shard)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO report_arrivals_v12 (campaign_id, round, hour, shard, n)
    SELECT campaign_id, round, hour, 0, n FROM report_arrivals
    """,
    "DROP TABLE report_arrivals",
    "ALTER TABLE report_arrivals_v12 RENAME TO report_arrivals",
    "ALTER TABLE campaigns DROP COLUMN n_reports",
    """
    CREATE TABLE campaign_keys (
        campaign_id TEXT NOT NULL REFERENCES campaigns(id),
        kind        TEXT NOT NULL CHECK (kind IN ('hpke', 'issuer')),
        kek_id      TEXT NOT NULL,
        nonce       BLOB NOT NULL,
        sealed      BLOB NOT NULL,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (campaign_id, kind)
    ) WITHOUT ROWID
    """,
)

#: Ordered migrations: ``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12)

#: The version :data:`PG_BASELINE` creates on an empty PostgreSQL database.
PG_BASELINE_VERSION = 10

#: The schema of version 10 in one step, for PostgreSQL (in SQLite's DDL, translated by ``pg_ddl``; a test
#: checks that it has the tables, columns and keys that versions 1 to 10 leave in a SQLite file).
PG_BASELINE: tuple[str, ...] = (
    """
    CREATE TABLE campaigns (
        id            TEXT PRIMARY KEY,
        config_json   TEXT NOT NULL,
        status        TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
        trust_model   TEXT NOT NULL DEFAULT 'local' CHECK (trust_model IN ('local', 'central')),
        budget        REAL,
        adjacency     TEXT,
        n_reports     INTEGER NOT NULL DEFAULT 0,
        created_at    TEXT NOT NULL,
        closed_at     TEXT,
        epsilon_spent TEXT NOT NULL DEFAULT '0'
    )
    """,
    _V10[0].replace("reports_v10", "reports"),
    _V2[4].replace("tallies_v2", "tallies"),
    _V1[3],
    *_V4,
    *_V6,
    _V7[0],
    *_V8,
    *_V9,
)

#: The version a fully migrated database reports in ``PRAGMA user_version``.
SCHEMA_VERSION = len(MIGRATIONS)


def _float_decimal(value: float | int | str | None) -> str:
    """The shortest decimal that reads back as the float ``value``, in fixed-point notation."""
    number = float(value or 0)
    return format(Decimal(repr(number)), "f") if number else "0"


class _DecimalSum:
    """SQL aggregate ``deniable_decimal_sum(x)``: the exact sum of decimal strings (``'0'`` for none)."""

    def __init__(self) -> None:
        self.total = Decimal(0)

    def step(self, value: Any) -> None:
        if value is not None:
            self.total = _EXACT_SUM.add(self.total, Decimal(value))

    def finalize(self) -> str:
        return format(self.total, "f")


#: Exact decimal arithmetic for migrations (a dropped digit raises instead of rounding).
_EXACT_SUM = Context(prec=2000, Emin=-10_000, Emax=10_000, traps=[Inexact, Rounded, InvalidOperation])


def _decimal_sub(a: str, b: str | None) -> str:
    """``a − b`` of two decimal strings, exactly, never below 0, as a fixed-point string (``'0'`` if none)."""
    left = max(_EXACT_SUM.subtract(Decimal(a or "0"), Decimal(b or "0")), Decimal(0))
    return "0" if left == 0 else format(left, "f")


def migrate(conn: Any, migrations: Sequence[Sequence[str]] = MIGRATIONS) -> int:
    """Bring the database behind ``conn`` (a ``sqlite3`` connection in autocommit mode, or a
    :class:`~deniable.aggregator.database.PostgresConnection`) to the latest version; return that version.

    Raises ``RuntimeError`` when the database is newer than this code, rather than guessing at its layout.
    SQLite migrations may call ``deniable_float_decimal(x)``: the fixed-point decimal string of
    ``repr(float(x))``, ``deniable_decimal_sub(a, b)`` and the aggregate ``deniable_decimal_sum(x)``
    (exact, on decimal strings); those of version 11 on may not (they run on PostgreSQL too).
    """
    if isinstance(conn, PostgresConnection):
        return _migrate_postgres(conn, migrations)
    conn.create_function("deniable_float_decimal", 1, _float_decimal, deterministic=True)
    conn.create_function("deniable_decimal_sub", 2, _decimal_sub, deterministic=True)
    conn.create_aggregate("deniable_decimal_sum", 1, _DecimalSum)
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        _refuse_newer(current, migrations)
        for version in range(current, len(migrations)):
            for statement in migrations[version]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(migrations)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(migrations)


def _refuse_newer(current: int, migrations: Sequence[Sequence[str]]) -> None:
    if current > len(migrations):
        raise RuntimeError(
            f"the database schema is version {current}, newer than this deniable "
            f"(which knows up to {len(migrations)}); upgrade deniable before serving this database"
        )


#: The advisory lock key PostgreSQL migrations hold (any constant: 'deniable' in ASCII).
_MIGRATION_LOCK = 0x64656E6961626C65


def _migrate_postgres(conn: PostgresConnection, migrations: Sequence[Sequence[str]]) -> int:
    """:func:`migrate` on PostgreSQL: the version in ``deniable_schema``, under an advisory lock."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS deniable_schema"
            " (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        row = conn.execute("SELECT version FROM deniable_schema WHERE id = 1").fetchone()
        current = 0 if row is None else int(row[0])
        _refuse_newer(current, migrations)
        if current == 0 and tuple(map(tuple, migrations[:PG_BASELINE_VERSION])) == MIGRATIONS[:PG_BASELINE_VERSION]:
            for statement in PG_BASELINE:
                conn.execute(pg_ddl(statement))
            current = PG_BASELINE_VERSION
        for version in range(current, len(migrations)):
            for statement in migrations[version]:
                conn.execute(pg_ddl(statement))
        conn.execute(
            "INSERT INTO deniable_schema (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET"
            " version = excluded.version",
            (len(migrations),),
        )
        conn.execute("COMMIT")
    except BaseException:
        if not conn.broken:
            conn.execute("ROLLBACK")
        raise
    return len(migrations)


def schema_version(conn: Any) -> int:
    """The schema version stored in the database behind ``conn`` (0 for an empty one)."""
    if isinstance(conn, PostgresConnection):
        found = conn.execute("SELECT to_regclass('deniable_schema')").fetchone()[0]
        if found is None:
            return 0
        row = conn.execute("SELECT version FROM deniable_schema WHERE id = 1").fetchone()
        return 0 if row is None else int(row[0])
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
