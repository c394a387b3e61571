"""Durable storage of campaigns, reports and their tallies, in SQLite or PostgreSQL (one implementation).

The SQL here is the dialect both databases share; :mod:`deniable.aggregator.database` holds the few
differences (placeholders, isolation, row locks, DDL types). Which database is used follows from the target
given to :class:`Store`: a path is a SQLite file, a ``postgresql://`` URL a PostgreSQL database.

SQLite runs in WAL mode with ``synchronous=FULL``: once :meth:`Store.ingest` returns, the accepted
reports survive a crash or a power loss. Every write happens in a ``BEGIN IMMEDIATE`` transaction, which
takes SQLite's single write lock up front, so several gunicorn workers (processes) and their threads can
share one file: writers queue on ``busy_timeout`` and readers never block.

PostgreSQL serves several aggregator instances at once, each with its own connections (commits are durable
with the server's default ``synchronous_commit = on``). Read-modify-write transactions run SERIALIZABLE
and are run again after a serialization failure (:meth:`Store.retrying`); the hot path, ingestion, runs
READ COMMITTED and is exactly-once by construction: reports, devices and admission tokens are inserted
with ``ON CONFLICT DO NOTHING`` against their unique keys, and a batch that finds a row inserted by a
concurrent batch after its lookups is rolled back and classified again (never check-then-insert); a
campaign's status is read ``FOR SHARE`` (a concurrent close waits for the batches in flight); a new value
of a capped group field is decided under an advisory lock of the campaign; tallies and arrival counters
are spread over shard rows (each connection adds to its own, ``FOR UPDATE``) and summed on read, so no
row is hot.

Invariant kept by :meth:`Store.ingest`: for every campaign, round, group field and group value, the sum of
the ``tally_shards`` rows equals the tally of the stored reports (the campaign's report count is the sum of
its overall tallies; checked by ``deniable verify``), and the ``report_arrivals`` of each round add up to
its number of reports.
Each report id counts at most once per campaign, and each device
(pseudonym) at most once per campaign and round. Non-recurring campaigns have the single round ``''``;
a recurring campaign's rounds are the labels its devices send, each tallied (and estimated) on its own.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from deniable.aggregator.database import (
    CONCURRENT,
    SERIAL,
    Connection,
    Database,
    driver_errors,
    member_of,
    unavailable,
)
from deniable.aggregator.migrations import migrate
from deniable.aggregator.sealed_keys import Sealed
from deniable.shared.contract import SAME_REPORT_REASON, SPENT_TOKEN_REASON
from deniable.shared.errors import CampaignClosed, StoreUnavailable, TokenQuotaExceeded, UnknownCampaign
from deniable.shared.limits import CONFLICT_RETRY_ATTEMPTS, DATABASE_BUSY_TIMEOUT_MS
from deniable.shared.mechanisms.estimate import Tally

T = TypeVar("T")

__all__ = ["DATABASE_NAME", "OVERALL", "CampaignRecord", "ReportRow", "Store"]

#: The ``(group_field, group_value)`` key of a campaign's overall tally.
OVERALL: tuple[str, str] = ("", "")

#: The SQLite file of a data dir (``deniable serve``, ``backup``, ``verify`` and the tests open this one name).
DATABASE_NAME = "deniable.sqlite3"

_SAME_DEVICE = "this device (pseudonym) already reported to this campaign; it counts once"
_SAME_DEVICE_IN_ROUND = "this device (pseudonym) already reported in this round; it counts once per round"


def _over_cap(what: str, cap: int) -> str:
    return (
        f"{what} already holds its maximum of {cap} distinct values on this aggregator and this report "
        "brings a new one; it is not stored (declare the field's group_values in a new campaign, or ask the "
        "operator to raise the cap)"
    )

#: Largest number of ``?`` parameters put in one ``IN (...)`` clause.
_IN_CHUNK = 500

#: The columns of a stored report and of a spent token, and their SQL types (for PostgreSQL's array insert).
_REPORT_COLUMNS = ("campaign_id", "report_id", "round", "pseudonym", "groups_json", "report_json", "received_day")
_REPORT_TYPES = ("text", "bytea", "text", "bytea", "text", "text", "text")
_TOKEN_COLUMNS = ("campaign_id", "nonce", "spent_day")
_TOKEN_TYPES = ("text", "bytea", "text")


class _Raced(StoreUnavailable):
    """A row this transaction meant to insert was inserted by a concurrent one after this transaction looked
    (PostgreSQL, READ COMMITTED): roll back and classify the batch again, now seeing that row."""

    def __init__(self, what: str) -> None:
        super().__init__(f"a concurrent transaction stored {what} first; retry", retry=True)


@dataclass(frozen=True, slots=True)
class CampaignRecord:
    """A campaign as stored: its public descriptor and its mutable state."""

    id: str
    #: The stored descriptor as its JSON text (immutable: only ``status`` changes); :attr:`config` parses it.
    config_json: str
    status: str
    trust_model: str
    budget: float | None
    adjacency: str | None
    epsilon_spent: Decimal
    n_reports: int
    created_at: str
    closed_at: str | None

    @property
    def config(self) -> dict[str, Any]:
        """The stored descriptor as a JSON object."""
        config: dict[str, Any] = json.loads(self.config_json)
        return config


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One decoded, validated report ready to store.

    ``report_id`` and ``pseudonym`` are the envelope's hex strings (32 and 64 hex digits; stored as raw
    bytes). ``report_json`` is the compact JSON of the *randomized* report (never the raw value in local mode);
    ``support`` lists the categories whose support contains it (for central campaigns: the one value).
    ``round`` is the round label of a recurring campaign's report, ``''`` otherwise. ``token_nonce`` is
    the nonce of the (verified) admission token the report spends, for campaigns that require one.
    """

    report_id: str
    pseudonym: str
    groups: dict[str, str]
    report_json: str
    support: tuple[int, ...]
    round: str = ""
    token_nonce: bytes | None = None


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """A central campaign's stored release policy and who set it when (UTC, ISO 8601)."""

    min_reports: int
    min_refresh_interval_s: int
    updated_at: str
    updated_by: str


@dataclass(frozen=True, slots=True)
class ReleaseLogRow:
    """One logged release: sequence number, time, role, ε, slot, request parameters and privacy cost."""

    seq: int
    released_at: str
    role: str
    epsilon: float
    release_key: str
    parameters: dict[str, Any]
    cost: dict[str, Any] | None


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def hour_of(moment: dt.datetime) -> str:
    """The UTC hour ``moment`` falls in, as stored in ``report_arrivals``: ``2026-12-01T08:00:00Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:00:00Z")


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _chunks(items: Sequence[bytes], size: int = _IN_CHUNK) -> Iterator[Sequence[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _summed(rows: Iterable[Sequence[Any]]) -> dict[Any, Tally]:
    """Tally shard rows ``(key, n, support_json)`` or ``(key1, key2, n, support_json)`` summed per key, in
    the order the keys first appear: a tally is the sum of its shards."""
    sums: dict[Any, tuple[int, list[int]]] = {}
    for row in rows:
        key = row[0] if len(row) == 3 else tuple(row[:-2])
        n, support = int(row[-2]), json.loads(row[-1])
        found = sums.get(key)
        if found is None:
            sums[key] = (n, support)
        else:
            sums[key] = (found[0] + n, [a + b for a, b in zip(found[1], support, strict=True)])
    return {key: Tally(n, tuple(support)) for key, (n, support) in sums.items()}


class Store:
    """The aggregator's database: a SQLite file at ``target`` (a path), or the PostgreSQL database a
    ``postgresql://`` URL names; created and migrated on first use.

    One connection per thread (connections are not shared across threads or forked processes); the
    store is safe to use from many threads of many processes, and on PostgreSQL of many instances, at once.
    """

    def __init__(self, target: str | Path) -> None:
        self.db = Database(target)
        self.path = self.db.path if self.db.path is not None else Path(os.devnull)
        self._local = threading.local()
        self._pid = os.getpid()
        conn = self.connection()
        try:
            migrate(conn)
        except driver_errors() as exc:
            raise unavailable(exc) from exc

    @property
    def postgres(self) -> bool:
        """Whether the store is a PostgreSQL database (else a SQLite file)."""
        return self.db.postgres

    # -- connections and transactions ------------------------------------------------------------

    def connection(self) -> Any:
        """This thread's connection (autocommit mode; use :meth:`transaction` to write). A PostgreSQL
        connection that failed (the server restarted, the network dropped it) is replaced by a new one."""
        if self._pid != os.getpid():  # a forked child must never reuse its parent's connections
            self._local, self._pid = threading.local(), os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(conn, "broken", False):
            self.close()
            conn = None
        if conn is None:
            conn = self.db.connect(DATABASE_BUSY_TIMEOUT_MS)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their thread's store is collected)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except driver_errors():
                pass
            self._local.conn = None

    @contextmanager
    def transaction(self, isolation: str = SERIAL) -> Iterator[Connection]:
        """A write transaction: commit on success, roll back on any exception.

        SQLite: ``BEGIN IMMEDIATE``, the write lock held from the start, so a read-modify-write inside (e.g.
        a central accountant checking and spending ε) is atomic across processes. PostgreSQL: SERIALIZABLE
        (``isolation=SERIAL``), so the same code is atomic across instances too, or it fails with
        :class:`StoreUnavailable` (``retry=True``: run it again, :meth:`retrying`); ``CONCURRENT`` is READ
        COMMITTED, for code that is correct by constraints and row locks (ingestion).
        """
        conn = self.connection()
        try:
            conn.execute(self.db.begin(isolation))
        except driver_errors() as exc:
            raise unavailable(exc) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if not getattr(conn, "broken", False):
                try:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                except Exception:  # noqa: S110 - the rollback of a failed transaction; the failure is raised
                    pass
            if isinstance(exc, driver_errors()):
                raise unavailable(exc) from exc
            raise

    def retrying(self, work: Callable[[Connection], T], *, isolation: str = SERIAL) -> T:
        """``work(conn)`` in a :meth:`transaction`, run again (up to
        :data:`~deniable.shared.limits.CONFLICT_RETRY_ATTEMPTS` times in all, after a short random pause) when
        a conflict rolled it back; ``work`` must have no effect outside the database. Other failures, and a
        conflict on the last attempt, raise :class:`StoreUnavailable`."""
        for attempt in range(CONFLICT_RETRY_ATTEMPTS):
            try:
                with self.transaction(isolation) as conn:
                    return work(conn)
            except StoreUnavailable as exc:
                if not exc.retry or attempt == CONFLICT_RETRY_ATTEMPTS - 1:
                    raise
                time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))  # noqa: S311 - retry jitter, no secret
        raise AssertionError("unreachable")  # pragma: no cover

    def write_probe(self) -> None:
        """One write transaction, committed (and fsynced, ``synchronous=FULL``) like a report batch: the
        readiness check that the database takes writes. Raises :class:`StoreUnavailable` or
        ``sqlite3.Error`` if it does not."""

        def probe(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO health_probe (id, probed_at, pid) VALUES (1, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at, pid = excluded.pid",
                (_utc_now().isoformat(), os.getpid()),
            )

        self.retrying(probe, isolation=CONCURRENT)

    # -- campaigns -------------------------------------------------------------------------------

    #: The report count is the sum of the overall tally shards of every round (no counter row to update).
    _SELECT_CAMPAIGNS = (
        "SELECT id, config_json, status, trust_model, budget, adjacency, epsilon_spent,"
        " (SELECT COALESCE(SUM(t.n), 0) FROM tally_shards t WHERE t.campaign_id = campaigns.id"
        " AND t.group_field = '' AND t.group_value = ''), created_at, closed_at FROM campaigns"
    )

    @staticmethod
    def _record(row: tuple[Any, ...]) -> CampaignRecord:
        return CampaignRecord(
            id=row[0],
            config_json=row[1],
            status=row[2],
            trust_model=row[3],
            budget=row[4],
            adjacency=row[5],
            epsilon_spent=Decimal(row[6]),
            n_reports=int(row[7]),
            created_at=row[8],
            closed_at=row[9],
        )

    def campaign_exists(self, conn: Connection, campaign_id: str) -> bool:
        """Whether a campaign with this id is stored (use inside a transaction to decide atomically)."""
        return conn.execute("SELECT 1 FROM campaigns WHERE id = ?", (campaign_id,)).fetchone() is not None

    def insert_campaign(
        self,
        conn: Connection,
        campaign_id: str,
        config: dict[str, Any],
        *,
        trust_model: str = "local",
        budget: float | None = None,
        adjacency: str | None = None,
    ) -> CampaignRecord:
        """Insert a new open campaign within the caller's transaction ``conn``."""
        conn.execute(
            "INSERT INTO campaigns (id, config_json, status, trust_model, budget, adjacency, created_at)"
            " VALUES (?, ?, 'open', ?, ?, ?, ?)",
            (campaign_id, _compact(config), trust_model, budget, adjacency, _utc_now().isoformat()),
        )
        return self.get_campaign(campaign_id, conn=conn)

    def get_campaign(self, campaign_id: str, *, conn: Connection | None = None) -> CampaignRecord:
        """The stored campaign; raises :class:`UnknownCampaign` when there is none with this id."""
        conn = conn or self.connection()
        row = conn.execute(self._SELECT_CAMPAIGNS + " WHERE id = ?", (campaign_id,)).fetchone()
        if row is None:
            raise UnknownCampaign(
                f"no campaign has the id {campaign_id!r}; list them with GET /api/v1/campaigns"
            )
        return self._record(row)

    def list_campaigns(
        self, *, status: str | None = None, limit: int | None = None, offset: int = 0
    ) -> list[CampaignRecord]:
        """The campaigns (of one ``status`` if given), oldest first; ``limit`` of them from ``offset``."""
        where, args = ("", ()) if status is None else (" WHERE status = ?", (status,))
        page: tuple[int, ...] = () if limit is None else (limit, offset)
        rows = self.connection().execute(
            self._SELECT_CAMPAIGNS + where + " ORDER BY created_at, id" + (" LIMIT ? OFFSET ?" if page else ""),
            (*args, *page),
        ).fetchall()
        return [self._record(row) for row in rows]

    def count_campaigns(self, *, status: str | None = None) -> int:
        """How many campaigns there are (of one ``status`` if given)."""
        where, args = ("", ()) if status is None else (" WHERE status = ?", (status,))
        row = self.connection().execute("SELECT COUNT(*) FROM campaigns" + where, args).fetchone()  # noqa: S608
        return int(row[0])

    def close_campaign(self, campaign_id: str) -> CampaignRecord:
        """Mark the campaign closed (idempotent); later report batches are refused with 409 (on PostgreSQL
        the update waits for the batches in flight, which read the status ``FOR SHARE``)."""

        def close(conn: Connection) -> CampaignRecord:
            record = self.get_campaign(campaign_id, conn=conn)
            if record.status == "open":
                conn.execute(
                    "UPDATE campaigns SET status = 'closed', closed_at = ? WHERE id = ?",
                    (_utc_now().isoformat(), campaign_id),
                )
            return self.get_campaign(campaign_id, conn=conn)

        return self.retrying(close)

    # -- sealed campaign keys (PostgreSQL: every instance reads them; see sealed_keys.py) ---------

    @staticmethod
    def save_sealed_key(conn: Connection, campaign_id: str, kind: str, sealed: Sealed) -> None:
        """Store a campaign's sealed private key within the caller's transaction (the campaign's insert)."""
        conn.execute(
            "INSERT INTO campaign_keys (campaign_id, kind, kek_id, nonce, sealed, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (campaign_id, kind, sealed.kek_id, sealed.nonce, sealed.sealed, _utc_now().isoformat()),
        )

    def sealed_key(self, campaign_id: str, kind: str) -> Sealed | None:
        """The sealed private key of ``kind`` (``hpke`` or ``issuer``) of a campaign, or None."""
        row = self.connection().execute(
            "SELECT kek_id, nonce, sealed FROM campaign_keys WHERE campaign_id = ? AND kind = ?", (campaign_id, kind)
        ).fetchone()
        return None if row is None else Sealed(str(row[0]), bytes(row[1]), bytes(row[2]))

    # -- central release policy and log ----------------------------------------------------------

    @staticmethod
    def release_policy(conn: Connection, campaign_id: str) -> PolicyRow | None:
        """The policy the admin set for the campaign, or ``None`` (the defaults apply)."""
        row = conn.execute(
            "SELECT min_reports, min_refresh_interval_s, updated_at, updated_by FROM release_policies"
            " WHERE campaign_id = ?",
            (campaign_id,),
        ).fetchone()
        return None if row is None else PolicyRow(int(row[0]), int(row[1]), row[2], row[3])

    @staticmethod
    def set_release_policy(
        conn: Connection, campaign_id: str, *, min_reports: int, min_refresh_interval_s: int, updated_by: str
    ) -> PolicyRow:
        """Store (replace) the campaign's policy within the caller's transaction; return it."""
        updated_at = _utc_now().isoformat()
        conn.execute(
            "INSERT INTO release_policies (campaign_id, min_reports, min_refresh_interval_s, updated_at, updated_by)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (campaign_id) DO UPDATE SET min_reports = excluded.min_reports,"
            " min_refresh_interval_s = excluded.min_refresh_interval_s, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (campaign_id, min_reports, min_refresh_interval_s, updated_at, updated_by),
        )
        return PolicyRow(min_reports, min_refresh_interval_s, updated_at, updated_by)

    @staticmethod
    def central_books(conn: Connection, campaign_id: str) -> tuple[str, float | None, str | None, str] | None:
        """``(trust_model, budget, adjacency, epsilon_spent)`` of a campaign (``None`` if unknown), read
        inside the caller's spending transaction; ``epsilon_spent`` is the exact decimal string."""
        row = conn.execute(
            "SELECT trust_model, budget, adjacency, epsilon_spent FROM campaigns WHERE id = ?", (campaign_id,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], str(row[3]))

    @staticmethod
    def set_epsilon_spent(conn: Connection, campaign_id: str, spent: str) -> None:
        """Store the campaign's spent ε, an exact decimal string, within the caller's spending transaction."""
        conn.execute("UPDATE campaigns SET epsilon_spent = ? WHERE id = ?", (spent, campaign_id))

    @staticmethod
    def has_release(conn: Connection, campaign_id: str, release_key: str) -> bool:
        """Whether a release is stored in this slot (asking for it again is then free)."""
        row = conn.execute(
            "SELECT 1 FROM central_releases WHERE campaign_id = ? AND release_key = ?", (campaign_id, release_key)
        ).fetchone()
        return row is not None

    @staticmethod
    def last_release_at(conn: Connection, campaign_id: str) -> str | None:
        """When the campaign last spent ε on a release (UTC, ISO 8601), logged or (before the log) stored."""
        row = conn.execute(
            "SELECT MAX(t) FROM (SELECT MAX(released_at) AS t FROM release_log WHERE campaign_id = ?"
            " UNION ALL SELECT MAX(created_at) AS t FROM central_releases WHERE campaign_id = ?) AS spends",
            (campaign_id, campaign_id),
        ).fetchone()
        return None if row is None else row[0]

    @staticmethod
    def log_release(
        conn: Connection,
        campaign_id: str,
        *,
        released_at: str,
        role: str,
        epsilon: float,
        release_key: str,
        parameters: dict[str, Any],
        cost: dict[str, Any] | None,
    ) -> int:
        """Append a release to the log within the caller's transaction (the one that spent its ε)."""
        row = conn.execute(
            "INSERT INTO release_log (campaign_id, released_at, role, epsilon, release_key, parameters_json,"
            " cost_json) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            (
                campaign_id, released_at, role, float(epsilon), release_key, _compact(parameters),
                None if cost is None else _compact(cost),
            ),
        ).fetchone()  # fmt: skip
        return int(row[0])

    @staticmethod
    def stored_release(
        conn: Connection, campaign_id: str, release_key: str
    ) -> tuple[dict[str, Any], str] | None:
        """The release kept in a slot (its stored JSON and when it was drawn), or ``None``."""
        row = conn.execute(
            "SELECT result_json, created_at FROM central_releases WHERE campaign_id = ? AND release_key = ?",
            (campaign_id, release_key),
        ).fetchone()
        return None if row is None else (json.loads(row[0]), row[1])

    @staticmethod
    def keep_release(
        conn: Connection, campaign_id: str, release_key: str, *, epsilon: float, result: Any, at: str
    ) -> None:
        """Store (replace) the release kept in a slot, within the caller's spending transaction."""
        conn.execute(
            "INSERT INTO central_releases (campaign_id, release_key, epsilon, result_json, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (campaign_id, release_key) DO UPDATE SET"
            " epsilon = excluded.epsilon, result_json = excluded.result_json, created_at = excluded.created_at",
            (campaign_id, release_key, float(epsilon), json.dumps(result), at),
        )

    @staticmethod
    def overall_support(conn: Connection, campaign_id: str, k: int) -> list[int]:
        """The raw per-category counts of a (non-recurring) campaign's overall tally (zeros if empty)."""
        rows = conn.execute(
            "SELECT '', n, support_json FROM tally_shards WHERE campaign_id = ? AND round = '' AND group_field = ''"
            " AND group_value = ''",
            (campaign_id,),
        )
        tally = _summed(rows).get("")
        return list(tally.support) if tally is not None else [0] * k

    @staticmethod
    def release_costs(conn: Connection, campaign_id: str) -> list[dict[str, Any]]:
        """Every logged release's cost (exact JSON of :class:`deniable.shared.accounting.Cost`), oldest first:
        the central accountant's ledger, read inside the spending transaction."""
        rows = conn.execute(
            "SELECT cost_json FROM release_log WHERE campaign_id = ? AND cost_json IS NOT NULL ORDER BY seq",
            (campaign_id,),
        )
        return [json.loads(cost) for (cost,) in rows]

    def releases(self, campaign_id: str, *, after: int = 0, limit: int = 100) -> list[ReleaseLogRow]:
        """The campaign's logged releases with ``seq > after``, oldest first, at most ``limit``."""
        rows = self.connection().execute(
            "SELECT seq, released_at, role, epsilon, release_key, parameters_json, cost_json FROM release_log"
            " WHERE campaign_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (campaign_id, after, limit),
        )
        return [
            ReleaseLogRow(seq, at, role, eps, key, json.loads(params), None if cost is None else json.loads(cost))
            for seq, at, role, eps, key, params, cost in rows
        ]

    # -- reports ---------------------------------------------------------------------------------

    @staticmethod
    def _existing_reports(conn: Connection, campaign_id: str, ids: Sequence[bytes]) -> set[tuple[bytes, bytes]]:
        """The ``(report_id, pseudonym)`` pairs stored under any of ``ids``: a report id is a retry only of
        the device that stored it (schema version 10)."""
        found: set[tuple[bytes, bytes]] = set()
        for chunk in _chunks(ids):
            test, args = member_of(conn, chunk, "bytea")
            rows = conn.execute(
                f"SELECT report_id, pseudonym FROM reports WHERE campaign_id = ? AND report_id {test}",  # noqa: S608
                (campaign_id, *args),
            )
            found.update((row[0], row[1]) for row in rows)
        return found

    @staticmethod
    def _spent_tokens(conn: Connection, campaign_id: str, nonces: Sequence[bytes]) -> set[bytes]:
        """The admission-token nonces among ``nonces`` already spent in this campaign."""
        found: set[bytes] = set()
        for chunk in _chunks(nonces):
            test, args = member_of(conn, chunk, "bytea")
            rows = conn.execute(
                f"SELECT nonce FROM spent_tokens WHERE campaign_id = ? AND nonce {test}",  # noqa: S608
                (campaign_id, *args),
            )
            found.update(row[0] for row in rows)
        return found

    def spent_token_count(self, campaign_id: str) -> int:
        """How many admission tokens the campaign's stored reports spent."""
        row = self.connection().execute(
            "SELECT COUNT(*) FROM spent_tokens WHERE campaign_id = ?", (campaign_id,)
        ).fetchone()
        return int(row[0])

    # -- admission-token issuance ----------------------------------------------------------------

    def grant_tokens(self, campaign_id: str, account: bytes, count: int, *, limit: int) -> int:
        """Count ``count`` more tokens against ``account`` (an HMAC of the backend's account name), in one
        write transaction; return the account's total. Raises :class:`TokenQuotaExceeded` (nothing
        counted) when the total would pass ``limit``, and ``CampaignClosed`` for a closed campaign."""

        def grant(conn: Connection) -> int:
            status = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
            if status is None:
                raise UnknownCampaign(f"no campaign has the id {campaign_id!r}")
            if status[0] != "open":
                raise CampaignClosed(f"campaign {campaign_id!r} is closed; it issues no more admission tokens")
            row = conn.execute(
                "SELECT issued FROM token_accounts WHERE campaign_id = ? AND account = ?", (campaign_id, account)
            ).fetchone()
            issued = 0 if row is None else int(row[0])
            if issued + count > limit:
                raise TokenQuotaExceeded(
                    f"this account has {issued} of the {limit} admission tokens it may get for campaign "
                    f"{campaign_id!r}; {count} more would pass the limit",
                    issued=issued,
                    limit=limit,
                    requested=count,
                )
            conn.execute(
                "INSERT INTO token_accounts (campaign_id, account, issued) VALUES (?, ?, ?) ON CONFLICT"
                " (campaign_id, account) DO UPDATE SET issued = excluded.issued",
                (campaign_id, account, issued + count),
            )
            return issued + count

        return self.retrying(grant)

    def tokens_issued(self, campaign_id: str) -> tuple[int, int]:
        """``(accounts, tokens)``: how many accounts got tokens of the campaign, and how many in all."""
        row = self.connection().execute(
            "SELECT COUNT(*), COALESCE(SUM(issued), 0) FROM token_accounts WHERE campaign_id = ?", (campaign_id,)
        ).fetchone()
        return int(row[0]), int(row[1])

    @staticmethod
    def _existing_devices(
        conn: Connection, campaign_id: str, pairs: Sequence[tuple[str, bytes]]
    ) -> set[tuple[str, bytes]]:
        """The ``(round, pseudonym)`` pairs among ``pairs`` already stored.

        Queried round by round, so that each lookup is a seek in the UNIQUE (campaign_id, round, pseudonym)
        index: a lookup by pseudonym alone cannot use it and scans the campaign's reports on every batch.
        """
        by_round: dict[str, list[bytes]] = {}
        for round_, device in pairs:
            by_round.setdefault(round_, []).append(device)
        found: set[tuple[str, bytes]] = set()
        for round_, devices in by_round.items():
            for chunk in _chunks(devices):
                test, args = member_of(conn, chunk, "bytea")
                rows = conn.execute(
                    f"SELECT pseudonym FROM reports WHERE campaign_id = ? AND round = ? AND pseudonym {test}",  # noqa: S608
                    (campaign_id, round_, *args),
                )
                found.update((round_, row[0]) for row in rows)
        return found

    @staticmethod
    def _stored_values(conn: Connection, campaign_id: str, field: str) -> set[str]:
        """The distinct values of one group field (``''``: the rounds) stored for the campaign, any round."""
        if field == "":
            sql = "SELECT DISTINCT round FROM tally_shards WHERE campaign_id = ? AND group_field = ''"
            return {row[0] for row in conn.execute(sql, (campaign_id,))}
        sql = "SELECT DISTINCT group_value FROM tally_shards WHERE campaign_id = ? AND group_field = ?"
        return {row[0] for row in conn.execute(sql, (campaign_id, field))}

    def ingest(
        self,
        campaign_id: str,
        reports: Sequence[ReportRow],
        *,
        k: int,
        group_fields: Sequence[str],
        capped_fields: Mapping[str, int] | None = None,
        max_rounds: int | None = None,
    ) -> list[tuple[str, str | None]]:
        """Store the new reports and update the tallies and counters in ONE transaction.

        Returns, for each report in order, ``("accepted", None)``, ``("duplicate", reason)``: a report id
        already stored (an idempotent retry) or a pseudonym that already reported to this campaign in the
        report's round (one device counts once per round; ``''`` is the one round of a non-recurring
        campaign), or ``("rejected", reason)``: its admission token was already spent (by a stored report
        or earlier in the batch). The nonce of each accepted report's token is recorded as spent in the
        same transaction. Raises :class:`UnknownCampaign` or :class:`CampaignClosed` for the whole
        batch, checked inside the transaction so that a concurrent close cannot let reports slip in.

        Bounded domains: ``capped_fields`` maps group fields without declared values to the most distinct
        values each may take, and ``max_rounds`` bounds the distinct rounds. A report that would bring a new
        value past its cap is ``("rejected", reason)`` and changes nothing; the check runs in the same
        transaction as the insert, so concurrent batches cannot pass the cap together.
        """
        now = _utc_now()
        day, hour = now.date().isoformat(), hour_of(now)
        caps = {**(capped_fields or {}), **({"": max_rounds} if max_rounds is not None else {})}

        def store(conn: Connection) -> list[tuple[str, str | None]]:
            return self._ingest(conn, campaign_id, reports, k, group_fields, caps, day, hour)

        return self.retrying(store, isolation=CONCURRENT)

    def ingest_batch(
        self, campaign_id: str, batch_id: str, n: int, reports: Sequence[ReportRow], *, k: int
    ) -> tuple[str, int]:
        """Store one shuffled batch (``n`` inner ciphertexts, ``reports`` the ones that decoded) exactly once.

        In ONE transaction: a ``batch_id`` already stored changes nothing and gives ``("duplicate", its
        accepted count)``; otherwise the reports are ingested as :meth:`ingest` does (each keyed by the hash
        of its ciphertext, so the same ciphertext in two batches counts once) and the batch is recorded
        with its size, giving ``("accepted", reports newly stored)``. On PostgreSQL the batch row is inserted
        with ``ON CONFLICT DO NOTHING``: a concurrent copy of the batch that won makes this one run again,
        and then find it.
        """
        raw_id = bytes.fromhex(batch_id)
        now = _utc_now()
        day, hour = now.date().isoformat(), hour_of(now)

        def store(conn: Connection) -> tuple[str, int]:
            row = conn.execute(
                "SELECT accepted FROM shuffled_batches WHERE campaign_id = ? AND batch_id = ?", (campaign_id, raw_id)
            ).fetchone()
            if row is not None:
                return "duplicate", int(row[0])
            outcomes = self._ingest(conn, campaign_id, reports, k, (), {}, day, hour)
            accepted = sum(status == "accepted" for status, _ in outcomes)
            added = conn.execute(
                "INSERT INTO shuffled_batches (campaign_id, batch_id, n, accepted, received_day)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (campaign_id, raw_id, n, accepted, day),
            ).rowcount
            if added != 1:
                raise _Raced("this batch")
            return "accepted", accepted

        return self.retrying(store, isolation=CONCURRENT)

    def shuffled_batches(self, campaign_id: str) -> list[tuple[int, int]]:
        """``(n, accepted)`` of every batch the campaign's shuffler forwarded (in no particular order)."""
        rows = self.connection().execute(
            "SELECT n, accepted FROM shuffled_batches WHERE campaign_id = ?", (campaign_id,)
        ).fetchall()
        return [(int(n), int(accepted)) for n, accepted in rows]

    def _ingest(
        self,
        conn: Connection,
        campaign_id: str,
        reports: Sequence[ReportRow],
        k: int,
        group_fields: Sequence[str],
        caps: Mapping[str, int],
        day: str,
        hour: str,
    ) -> list[tuple[str, str | None]]:
        """One attempt of :meth:`ingest` in the caller's transaction (raises :class:`_Raced` to be run again)."""
        status = conn.execute(
            "SELECT status FROM campaigns WHERE id = ?" + self.db.lock("share"),  # noqa: S608 - a constant
            (campaign_id,),
        ).fetchone()
        if status is None:
            raise UnknownCampaign(f"no campaign has the id {campaign_id!r}")
        if status[0] != "open":
            raise CampaignClosed(f"campaign {campaign_id!r} is closed; no more reports are accepted")
        ids = [bytes.fromhex(r.report_id) for r in reports]
        devices = [bytes.fromhex(r.pseudonym) for r in reports]
        known_ids = self._existing_reports(conn, campaign_id, ids)
        known_devices = self._existing_devices(
            conn, campaign_id, [(r.round, d) for r, d in zip(reports, devices, strict=True)]
        )
        spent = self._spent_tokens(conn, campaign_id, [r.token_nonce for r in reports if r.token_nonce])
        new_tokens: list[tuple[str, bytes, str]] = []
        outcomes: list[tuple[str, str | None]] = []
        rows: list[tuple[str | bytes, ...]] = []
        supports: dict[tuple[str, str, str], list[int]] = {}  # the support counts added to each tally
        added: dict[tuple[str, str, str], int] = {}  # and the reports
        group_keys: dict[tuple[tuple[str, str], ...], str] = {}
        domains: dict[str, set[str]] = {}
        locked = [False]
        for report, report_id, device in zip(reports, ids, devices, strict=True):
            if (report_id, device) in known_ids:  # a retry of this device's report, not another's id
                outcomes.append(("duplicate", SAME_REPORT_REASON))
                continue
            if (report.round, device) in known_devices:
                outcomes.append(("duplicate", _SAME_DEVICE_IN_ROUND if report.round else _SAME_DEVICE))
                continue
            refusal = self._domain_refusal(conn, campaign_id, report, caps, domains, locked)
            if refusal is not None:
                outcomes.append(("rejected", refusal))
                continue
            if report.token_nonce is not None:
                if report.token_nonce in spent:
                    outcomes.append(("rejected", SPENT_TOKEN_REASON))
                    continue
                spent.add(report.token_nonce)
                new_tokens.append((campaign_id, report.token_nonce, day))
            known_ids.add((report_id, device))
            known_devices.add((report.round, device))
            outcomes.append(("accepted", None))
            items = tuple(report.groups.items())
            groups_json = group_keys.get(items)
            if groups_json is None:
                groups_json = group_keys[items] = _compact(report.groups)
            rows.append((campaign_id, report_id, report.round, device, groups_json, report.report_json, day))
            keys = [(report.round, *OVERALL)] + [
                (report.round, f, report.groups[f]) for f in group_fields if f in report.groups
            ]
            for key in keys:
                support = supports.get(key)
                if support is None:
                    support = supports[key] = [0] * k
                added[key] = added.get(key, 0) + 1
                for v in report.support:
                    support[v] += 1
        if rows:
            if self.db.insert_new(conn, "reports", _REPORT_COLUMNS, _REPORT_TYPES, rows) != len(rows):
                raise _Raced("some of these reports (or reports of these devices)")
            if self.db.insert_new(conn, "spent_tokens", _TOKEN_COLUMNS, _TOKEN_TYPES, new_tokens) != len(new_tokens):
                raise _Raced("a report spending one of these admission tokens")
            deltas = {key: Tally(added[key], tuple(support)) for key, support in supports.items()}
            self._add_tallies(conn, campaign_id, deltas)
            arrivals: dict[str, int] = {}
            for row in rows:
                arrivals[str(row[2])] = arrivals.get(str(row[2]), 0) + 1
            shard = self.db.shard_of(conn)
            conn.executemany(
                "INSERT INTO report_arrivals (campaign_id, round, hour, shard, n) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (campaign_id, round, hour, shard) DO UPDATE SET n = report_arrivals.n + excluded.n",
                [(campaign_id, round_, hour, shard, n) for round_, n in sorted(arrivals.items())],
            )
        return outcomes

    def _domain_refusal(
        self,
        conn: Connection,
        campaign_id: str,
        report: ReportRow,
        caps: Mapping[str, int],
        domains: dict[str, set[str]],
        locked: list[bool],
    ) -> str | None:
        """Why ``report`` would take a capped field (or the rounds, field ``''``) past its cap, else None
        (and its new values are added to ``domains``, the stored values plus this batch's accepted ones).

        On PostgreSQL the first new value of a batch takes the campaign's advisory lock (held to commit) and
        reads the stored values again: under READ COMMITTED that read sees every value a concurrent batch
        added and committed, so two batches cannot both pass a cap. (No value of this batch was added to
        ``domains`` before the lock: adding one takes it first.)"""
        if self.postgres and not locked[0]:
            for field in caps:
                value = report.round if field == "" else report.groups.get(field)
                if value is None:
                    continue
                known = domains.get(field)
                if known is None:
                    known = domains[field] = self._stored_values(conn, campaign_id, field)
                if value not in known:
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"domains:{campaign_id}",))
                    locked[0] = True
                    domains.clear()
                    break
        new: list[tuple[str, str]] = []
        for field, cap in caps.items():
            value = report.round if field == "" else report.groups.get(field)
            if value is None:
                continue
            known = domains.get(field)
            if known is None:
                known = domains[field] = self._stored_values(conn, campaign_id, field)
            if value in known:
                continue
            if len(known) >= cap:
                return _over_cap("the campaign's rounds" if field == "" else f"group field {field!r}", cap)
            new.append((field, value))
        for field, value in new:
            domains[field].add(value)
        return None

    def _add_tallies(
        self, conn: Connection, campaign_id: str, deltas: dict[tuple[str, str, str], Tally]
    ) -> None:
        """Add ``deltas`` to this connection's shard of each tally, in key order (so that two transactions on
        one shard never lock rows in opposite orders). The shard row is read ``FOR UPDATE``; a missing one
        is inserted with ``ON CONFLICT DO NOTHING`` and, if a concurrent batch inserted it first, read again."""
        shard = self.db.shard_of(conn)
        lock = self.db.lock("update")
        for (round_, field, value), delta in sorted(deltas.items()):
            key = (campaign_id, round_, field, value, shard)
            for _ in range(3):
                row = conn.execute(
                    "SELECT n, support_json FROM tally_shards WHERE campaign_id = ? AND round = ? AND group_field = ?"  # noqa: S608 - a constant lock suffix
                    " AND group_value = ? AND shard = ?" + lock,
                    key,
                ).fetchone()
                if row is not None:
                    support = [s + d for s, d in zip(json.loads(row[1]), delta.support, strict=True)]
                    conn.execute(
                        "UPDATE tally_shards SET n = ?, support_json = ? WHERE campaign_id = ? AND round = ?"
                        " AND group_field = ? AND group_value = ? AND shard = ?",
                        (int(row[0]) + delta.n, _compact(support), *key),
                    )
                    break
                added = conn.execute(
                    "INSERT INTO tally_shards (campaign_id, round, group_field, group_value, shard, n, support_json)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (*key, delta.n, _compact(list(delta.support))),
                ).rowcount
                if added == 1:
                    break
            else:
                raise _Raced("this tally shard")

    def tallies(self, campaign_id: str, group_field: str = "", *, round: str = "") -> dict[str, Tally]:
        """The stored tallies of one grouping in one round: ``{group_value: Tally}`` (``{"": overall}``
        by default; ``round=''`` is the one round of a non-recurring campaign).

        Costs O(k · number of group values), whatever the number of reports.
        """
        return self.group_tallies(self.connection(), campaign_id, group_field, round=round)

    @staticmethod
    def group_tallies(
        conn: Connection, campaign_id: str, group_field: str = "", *, round: str = ""
    ) -> dict[str, Tally]:
        """:meth:`tallies` on the caller's connection (inside a central release's spending transaction).

        One round only (``''``, the round of a non-recurring campaign, by default): every round has its
        own rows, so a read over all of them would keep one arbitrary round's counts per group value.
        The shard rows of each group value are summed.
        """
        rows = conn.execute(
            "SELECT group_value, n, support_json FROM tally_shards WHERE campaign_id = ? AND round = ?"
            " AND group_field = ? ORDER BY group_value",
            (campaign_id, round, group_field),
        )
        return _summed(rows)

    def all_tallies(self, campaign_id: str, *, round: str = "") -> dict[tuple[str, str], Tally]:
        """Every stored tally of the campaign in one round, keyed by ``(group_field, group_value)``."""
        rows = self.connection().execute(
            "SELECT group_field, group_value, n, support_json FROM tally_shards WHERE campaign_id = ? AND round = ?",
            (campaign_id, round),
        )
        return _summed(rows)

    def rounds(self, campaign_id: str) -> list[tuple[str, int]]:
        """``(round, n)`` of every round with reports, in label order (``''`` for a non-recurring campaign).

        Read from the overall tallies: O(number of rounds).
        """
        rows = self.connection().execute(
            "SELECT round, SUM(n) FROM tally_shards WHERE campaign_id = ? AND group_field = '' AND group_value = ''"
            " GROUP BY round HAVING SUM(n) > 0 ORDER BY round",
            (campaign_id,),
        )
        return [(round_, int(n)) for round_, n in rows]

    def arrivals(self, campaign_id: str, *, round: str | None = None) -> list[tuple[str, int]]:
        """``(hour, n)``: the accepted reports of each UTC hour that has any, oldest first; of one ``round``,
        or summed over every round when ``round`` is None. Costs O(hours), whatever the number of reports."""
        if round is None:
            rows = self.connection().execute(
                "SELECT hour, SUM(n) FROM report_arrivals WHERE campaign_id = ? GROUP BY hour ORDER BY hour",
                (campaign_id,),
            )
        else:
            rows = self.connection().execute(
                "SELECT hour, SUM(n) FROM report_arrivals WHERE campaign_id = ? AND round = ? GROUP BY hour"
                " ORDER BY hour",
                (campaign_id, round),
            )
        return [(hour, int(n)) for hour, n in rows if n]

    def arrivals_per_round(self, campaign_id: str) -> dict[str, int]:
        """The sum of ``report_arrivals`` of each round (for recounts: it must equal the round's reports)."""
        rows = self.connection().execute(
            "SELECT round, SUM(n) FROM report_arrivals WHERE campaign_id = ? GROUP BY round", (campaign_id,)
        )
        return {round_: int(n) for round_, n in rows}

    def reports_per_round(self, campaign_id: str) -> dict[str, int]:
        """The number of stored reports of each round (a full count, for recounts)."""
        rows = self.connection().execute(
            "SELECT round, COUNT(*) FROM reports WHERE campaign_id = ? GROUP BY round", (campaign_id,)
        )
        return {round_: int(n) for round_, n in rows}

    def release_exists(self, campaign_id: str, release_key: str) -> bool:
        """Whether a central release is kept in this slot (slots are replaced by a refresh, never removed)."""
        row = self.connection().execute(
            "SELECT 1 FROM central_releases WHERE campaign_id = ? AND release_key = ?", (campaign_id, release_key)
        ).fetchone()
        return row is not None

    # -- dashboard sessions ------------------------------------------------------------------------

    def add_session(
        self, id_hash: bytes, *, role: str, token_hash: bytes, csrf: str, expires_at: dt.datetime
    ) -> None:
        """Store a new dashboard session (and drop every expired one)."""
        now = _utc_now()
        with self.transaction() as conn:
            conn.execute("DELETE FROM dashboard_sessions WHERE expires_at <= ?", (now.isoformat(),))
            conn.execute(
                "INSERT INTO dashboard_sessions (id_hash, role, token_hash, csrf, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (id_hash, role, token_hash, csrf, now.isoformat(), expires_at.isoformat()),
            )

    def session(self, id_hash: bytes) -> tuple[str, bytes, str] | None:
        """``(role, token_hash, csrf)`` of the unexpired session with this cookie hash, or None."""
        row = self.connection().execute(
            "SELECT role, token_hash, csrf FROM dashboard_sessions WHERE id_hash = ? AND expires_at > ?",
            (id_hash, _utc_now().isoformat()),
        ).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]), str(row[2]))

    def delete_session(self, id_hash: bytes) -> None:
        """End a dashboard session (sign-out); nothing happens when there is none."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM dashboard_sessions WHERE id_hash = ?", (id_hash,))

    def stored_rounds(self, campaign_id: str) -> set[str]:
        """Every round label found in the stored reports or tallies (a full scan, for recounts)."""
        conn = self.connection()
        rows = conn.execute(
            "SELECT round FROM reports WHERE campaign_id = ?"
            " UNION SELECT round FROM tally_shards WHERE campaign_id = ?",
            (campaign_id, campaign_id),
        )
        return {row[0] for row in rows}

    def iter_reports(self, campaign_id: str, *, round: str | None = None) -> Iterable[tuple[str, dict[str, str], str]]:
        """Yield ``(report_id, groups, report_json)`` of every stored report (for recounts), of one round
        when ``round`` is given."""
        sql = "SELECT report_id, groups_json, report_json FROM reports WHERE campaign_id = ?"
        args: tuple[str, ...] = (campaign_id,)
        if round is not None:
            sql, args = sql + " AND round = ?", (campaign_id, round)
        for report_id, groups_json, report_json in self.connection().execute(sql, args):
            yield report_id.hex(), json.loads(groups_json), report_json

    @contextmanager
    def read_snapshot(self) -> Iterator[Connection]:
        """A read transaction: every read of this thread's connection inside sees one consistent state.

        In WAL mode a reader never blocks writers (nor they it): an export can run beside live ingestion
        and still pair the reports it reads with the tallies of exactly those reports. PostgreSQL: a
        REPEATABLE READ READ ONLY transaction, the same guarantee.
        """
        conn = self.connection()
        try:
            conn.execute(self.db.begin_snapshot())
        except driver_errors() as exc:
            raise unavailable(exc) from exc
        try:
            yield conn
        finally:
            if not getattr(conn, "broken", False) and conn.in_transaction:
                conn.execute("ROLLBACK")

    def iter_export_rows(self, campaign_id: str) -> Iterator[tuple[str, str, dict[str, str], str]]:
        """Yield ``(round, received_day, groups, report_json)`` of every stored report of the campaign.

        The public fields and the randomized report only: no report id, pseudonym or finer time leaves the
        store this way. Use inside :meth:`read_snapshot` to pair the rows with :meth:`all_tallies`.
        """
        rows = self.connection().execute(
            "SELECT round, received_day, groups_json, report_json FROM reports WHERE campaign_id = ?",
            (campaign_id,),
        )
        for round_, day, groups_json, report_json in rows:
            yield round_, day, json.loads(groups_json), report_json

    def count_reports(self, campaign_id: str) -> int:
        """The number of stored reports of the campaign (a full count, not the counter)."""
        row = self.connection().execute("SELECT COUNT(*) FROM reports WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return int(row[0])

