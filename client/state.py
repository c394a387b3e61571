"""The device's persistent state: secret, pinned configs, ε spends with their memoized reports, outbox.

Storage choice: one SQLite database (standard library) rather than JSON files replaced atomically. A
submission must *atomically* spend ε, memoize the randomized report and queue its envelope: if the device
crashed between two file replacements it could spend without queueing (a report silently lost) or queue
without spending (ε unaccounted). One SQLite transaction makes the three one step; ``BEGIN IMMEDIATE`` also
serializes two processes sharing a state dir (the CLI next to an app) so the ledger cannot be overspent by a
race. ``state_dir=None`` uses an in-memory database with the same code path.

Durability (WAL journal): with ``durability="full"`` every commit is fsynced (durable across power loss, one
fsync per answer: milliseconds on a disk). The default ``"normal"`` (SQLite ``synchronous=NORMAL``) commits
without fsync, which survives any crash of the process and keeps the database consistent across a power
cut; and :meth:`DeviceState.make_durable` (one fsync) runs before any envelope is sent. So a power cut can
only lose answers that never left the device, each together with its ε spend and memo (one transaction):
no report that reached the aggregator is ever forgotten, and the ledger never under-counts what was sent.

What is stored: randomized, HPKE-encrypted envelopes (never the raw value), ε spends as exact fractions,
the fingerprints of pinned campaign configs with a label-free summary, and the device secret (32 bytes
from :mod:`secrets`, file mode 0600 in a 0700 directory). The secret is the root of the device's
pseudonyms and of its permanent randomized responses; keep the state dir private.

A lost ledger is refused: when the secret survives but the database is gone (deleted, or restored without
it), the ε spent under that secret is unknown, and a device that simply started a new ledger would hand
its owner a fresh budget. Opening such a state dir raises :class:`~deniable.shared.errors.LedgerLost`
unless ``reset_ledger=True``; then the new ledger starts at zero and records when (``ledger_reset_at``).
What a reset costs: one-shot answers and permanent responses are derived from the secret, so re-answering
with the same value re-sends the identical report under the same report id (the aggregator sees a retry,
nothing new is learnt); but the new ledger does not know the old spends, so it under-counts by them, and
an answer with a *different* value is a new ε-LDP report under the same pseudonym that the aggregator
decrypts (an honest one then drops it as the device's second answer).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from deniable.client.secret_file import write_secret_file
from deniable.shared.errors import (
    DeviceSecretDamaged,
    DeviceStateError,
    InvalidParameter,
    LedgerLost,
    StateBusy,
    StateCorrupt,
    StateDiskFull,
    StateReadOnly,
)
from deniable.shared.limits import STATE_BUSY_TIMEOUT

from .tokens import WALLET_SCHEMA

__all__ = [
    "DB_FILE",
    "SECRET_FILE",
    "DeviceState",
    "ExpiredReport",
    "OutboxEntry",
    "PendingReport",
    "Rejection",
    "RoundRow",
    "SpendRow",
    "default_state_dir",
    "state_errors",
]

SECRET_FILE = "device_secret"  # noqa: S105 (a file name, not a password)
DB_FILE = "state.sqlite3"
_SECRET_BYTES = 32

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pins (
    campaign_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    pinned_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
    report_id TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL,
    recurring INTEGER NOT NULL,
    trust_model TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    envelope TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_campaign ON reports (campaign_id);
CREATE TABLE IF NOT EXISTS spent (
    campaign_id TEXT PRIMARY KEY,
    epsilon TEXT NOT NULL,
    reports INTEGER NOT NULL,
    recurring INTEGER NOT NULL,
    trust_model TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    campaign_id TEXT NOT NULL,
    round TEXT NOT NULL,
    report_id TEXT NOT NULL UNIQUE,
    answer_id TEXT NOT NULL,
    envelope TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (campaign_id, round)
);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    report_id TEXT NOT NULL UNIQUE,
    campaign_id TEXT NOT NULL,
    envelope TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE TABLE IF NOT EXISTS expired (
    report_id TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL,
    queued_at REAL NOT NULL,
    expired_at REAL NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT
);
CREATE TABLE IF NOT EXISTS rejections (
    report_id TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL,
    code TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL
);
"""

#: Columns added after the first release of the schema, as ``(table, column, declaration)``: an existing
#: state database gets them on open (``ALTER TABLE ... ADD COLUMN``, in the same transaction as the rest).
_ADDED_COLUMNS = (
    ("outbox", "queued_at", "REAL"),
    ("outbox", "last_attempt", "REAL"),
    ("outbox", "last_error_code", "TEXT"),
    ("reports", "answer_tag", "TEXT"),
)


def default_state_dir() -> Path:
    """``$DENIABLE_STATE_DIR`` if set, else ``~/.local/share/deniable``."""
    env = os.environ.get("DENIABLE_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "deniable"


@dataclass(frozen=True, kw_only=True)
class SpendRow:
    """One ε spend and the randomized, encrypted report it paid for (the memo)."""

    report_id: str
    campaign_id: str
    recurring: bool
    trust_model: str
    epsilon: Fraction
    envelope: str
    answer_tag: str | None = None
    created: float = 0.0


def _spend_row(row: Sequence[Any]) -> SpendRow:
    """A ``reports`` row (report_id, campaign_id, recurring, trust_model, epsilon, envelope) as a SpendRow."""
    return SpendRow(
        report_id=row[0], campaign_id=row[1], recurring=bool(row[2]), trust_model=row[3], epsilon=Fraction(row[4]),
        envelope=row[5],
    )


@dataclass(frozen=True)
class RoundRow:
    """The answer of one round of a recurring campaign: its envelope (own report id) and ``answer_id``,
    the report id of the permanent response (the spend in ``reports``) that it re-sends."""

    campaign_id: str
    round: str
    report_id: str
    answer_id: str
    envelope: str


@dataclass(frozen=True)
class OutboxEntry:
    """An encrypted envelope waiting for delivery."""

    seq: int
    report_id: str
    campaign_id: str
    envelope: str
    attempts: int


@dataclass(frozen=True)
class PendingReport:
    """A report waiting in the outbox, and why: ``last_error`` (None while never tried) with its
    ``last_error_code`` (the ``code`` of the typed error, e.g. ``campaign_not_found``), ``attempts``
    so far, and when it expires (``expires_at``, seconds since the epoch)."""

    report_id: str
    campaign_id: str
    queued_at: float
    attempts: int
    last_attempt: float | None
    last_error: str | None
    last_error_code: str | None
    expires_at: float

    @property
    def why(self) -> str:
        """One line: why the report still waits."""
        if self.last_error is None:
            return "not sent yet"
        return self.last_error


@dataclass(frozen=True)
class ExpiredReport:
    """A report that waited longer than the outbox's maximum age and left it undelivered (ε stays spent)."""

    report_id: str
    campaign_id: str
    queued_at: float
    expired_at: float
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class Rejection:
    """A report the aggregator refused (4xx or a per-report ``rejected`` result); it is not retried."""

    report_id: str
    campaign_id: str
    code: str
    reason: str
    at: float


class DeviceState:
    """SQLite-backed state in ``state_dir`` (created 0700), or in memory when ``state_dir`` is None.

    Not thread-safe by itself: :class:`~deniable.client.Client` serializes calls with one lock. The
    connection is opened with ``check_same_thread=False`` for that reason.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None,
        *,
        durability: str = "normal",
        busy_timeout: float = STATE_BUSY_TIMEOUT,
        reset_ledger: bool = False,
    ) -> None:
        if durability not in ("normal", "full"):
            raise InvalidParameter(f"'durability' must be 'normal' or 'full', got {durability!r}")
        self.durability = durability
        self.path: Path | None = None
        self._busy_timeout = busy_timeout
        with state_errors(None if state_dir is None else Path(state_dir).expanduser()):
            secret_file: Path | None = None
            secret: bytes | None = None
            if state_dir is None:
                target = ":memory:"
            else:
                self.path = Path(state_dir).expanduser()
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
                if stat.S_IMODE(self.path.stat().st_mode) != 0o700:
                    os.chmod(self.path, 0o700)
                secret_file = self.path / SECRET_FILE
                if secret_file.exists():  # read first: a damaged secret is reported as such
                    secret = _load_or_create_secret(secret_file)
                db = self.path / DB_FILE
                os.close(os.open(db, os.O_CREAT | os.O_WRONLY, 0o600))
                if stat.S_IMODE(db.stat().st_mode) != 0o600:
                    os.chmod(db, 0o600)
                target = str(db)
            self._db = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
            try:
                self._setup(durability, secret_survives=secret is not None, reset_ledger=reset_ledger)
            except BaseException:
                self._db.close()
                raise
            # a new secret is created after the schema: a crash in between leaves a schema without a
            # secret (a fresh device next time), never a secret without a ledger (which is refused)
            if secret is None and secret_file is not None:
                secret = _load_or_create_secret(secret_file)
            self._secret = secrets.token_bytes(_SECRET_BYTES) if secret is None else secret

    def _setup(self, durability: str, *, secret_survives: bool, reset_ledger: bool) -> None:
        """WAL mode and the schema (with its added columns), retried while another process holds the
        database: SQLite answers ``database is locked`` at once, without waiting for the busy timeout, when
        two connections race to switch a new database to WAL (the first open of a new state dir).

        A surviving secret over a database without the schema is a lost ledger: :class:`LedgerLost`
        (nothing created) unless ``reset_ledger``, which starts the new ledger and records when."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.005
        while True:
            try:
                if self.path is not None:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute(f"PRAGMA synchronous={durability.upper()}")
                with self.transaction() as db:
                    found = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'spent'").fetchone()
                    lost = secret_survives and found is None
                    if lost and not reset_ledger:
                        raise LedgerLost(_ledger_lost_message(self.path))
                    for statement in (_SCHEMA + WALLET_SCHEMA).split(";"):
                        if statement.strip():
                            db.execute(statement)
                    for table, column, declaration in _ADDED_COLUMNS:
                        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                        if column not in columns:
                            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    db.execute("UPDATE outbox SET queued_at = ? WHERE queued_at IS NULL", (time.time(),))
                    if lost:
                        db.execute("INSERT OR REPLACE INTO meta VALUES ('ledger_reset_at', ?)", (repr(time.time()),))
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay * (0.5 + secrets.randbelow(1001) / 2000))
            delay = min(delay * 2, 0.25)

    @property
    def secret(self) -> bytes:
        """The 32-byte device secret."""
        return self._secret

    def ledger_reset_at(self) -> float | None:
        """When this ledger was started over a surviving secret (``reset_ledger=True``), or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'ledger_reset_at'").fetchone()
        return None if row is None else float(row[0])

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An ``IMMEDIATE`` transaction: committed on success, rolled back on any exception (SQLite may
        have rolled back already, e.g. after ``SQLITE_FULL``; the original error is raised either way)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise

    def make_durable(self) -> None:
        """Fsync every committed transaction (a no-op cost when ``durability="full"`` or in memory).

        A commit under ``synchronous=FULL`` in WAL mode syncs the whole write-ahead log, and with it every
        earlier commit; the outbox calls this before sending anything.
        """
        if self.path is None or self.durability == "full":
            return
        self._db.execute("PRAGMA synchronous=FULL")
        try:
            with self.transaction() as db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('last_sync', ?)", (repr(time.time()),))
        finally:
            self._db.execute("PRAGMA synchronous=NORMAL")

    # -- pins ---------------------------------------------------------------------------------------
    def pinned(self, campaign_id: str) -> tuple[str, str] | None:
        """``(fingerprint, summary_json)`` pinned for ``campaign_id``, or None."""
        row = self._db.execute(
            "SELECT fingerprint, summary_json FROM pins WHERE campaign_id = ?", (campaign_id,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def pin(self, campaign_id: str, fingerprint: str, summary_json: str) -> None:
        """Pin at first use; an existing pin is never overwritten. One statement, so its own transaction
        (the connection is in autocommit mode): no BEGIN/COMMIT round trips around it."""
        self._db.execute(
            "INSERT OR IGNORE INTO pins VALUES (?, ?, ?, ?)",
            (campaign_id, fingerprint, summary_json, time.time()),
        )

    # -- ε spends and memo ----------------------------------------------------------------------------
    def reports(self, campaign_id: str | None = None) -> list[SpendRow]:
        """Every spend (optionally of one campaign), oldest first."""
        sql = "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports"
        args: tuple[str, ...] = ()
        if campaign_id is not None:
            sql += " WHERE campaign_id = ?"
            args = (campaign_id,)
        rows = self._db.execute(sql + " ORDER BY created, rowid", args).fetchall()
        return [_spend_row(r) for r in rows]

    def report(self, report_id: str) -> SpendRow | None:
        """The spend that paid for ``report_id``, if any."""
        row = self._db.execute(
            "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports "
            "WHERE report_id = ?",
            (report_id,),
        ).fetchone()
        if row is None:
            return None
        return _spend_row(row)

    def first_report(self, campaign_id: str) -> SpendRow | None:
        """The oldest spend of ``campaign_id`` (the memo of a one-shot campaign), if any."""
        row = self._db.execute(
            "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports "
            "WHERE campaign_id = ? ORDER BY created, rowid LIMIT 1",
            (campaign_id,),
        ).fetchone()
        if row is None:
            return None
        return _spend_row(row)

    def latest_report(self, campaign_id: str) -> SpendRow | None:
        """The newest spend of ``campaign_id`` (the answer that stands in a one-shot campaign), with its
        ``answer_tag`` and time, if any."""
        row = self._db.execute(
            "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope, answer_tag, created "
            "FROM reports WHERE campaign_id = ? ORDER BY created DESC, rowid DESC LIMIT 1",
            (campaign_id,),
        ).fetchone()
        if row is None:
            return None
        return SpendRow(
            report_id=row[0], campaign_id=row[1], recurring=bool(row[2]), trust_model=row[3], epsilon=Fraction(row[4]),
            envelope=row[5], answer_tag=row[6], created=row[7]
        )

    def report_status(self, report_id: str) -> str:
        """Where a report is: ``queued`` (in the outbox), ``rejected``, ``expired``, or ``delivered``
        (none of these: the aggregator answered accepted or duplicate for it)."""
        for status, table in (("queued", "outbox"), ("rejected", "rejections"), ("expired", "expired")):
            found = self._db.execute(f"SELECT 1 FROM {table} WHERE report_id = ?", (report_id,)).fetchone()  # noqa: S608
            if found is not None:
                return status
        return "delivered"

    @staticmethod
    def reuse_report(db: sqlite3.Connection, report_id: str, envelope: str, answer_tag: str) -> None:
        """Inside a transaction: make a report paid for earlier the answer that stands again (a re-answer
        back to its value), with its envelope sealed anew."""
        db.execute(
            "UPDATE reports SET envelope = ?, answer_tag = ?, created = ? WHERE report_id = ?",
            (envelope, answer_tag, time.time(), report_id),
        )

    @staticmethod
    def withdraw(db: sqlite3.Connection, report_id: str) -> None:
        """Inside a transaction: take a report out of the outbox (it is replaced by a re-answer)."""
        db.execute("DELETE FROM outbox WHERE report_id = ?", (report_id,))

    def round_created(self, campaign_id: str, round: str) -> float | None:
        """When the answer of ``round`` was given, if any."""
        row = self._db.execute(
            "SELECT created FROM rounds WHERE campaign_id = ? AND round = ?", (campaign_id, round)
        ).fetchone()
        return None if row is None else float(row[0])

    @staticmethod
    def forget_round(db: sqlite3.Connection, campaign_id: str, round: str) -> None:
        """Inside a transaction: drop the answer of a round (it is replaced by a re-answer)."""
        db.execute("DELETE FROM rounds WHERE campaign_id = ? AND round = ?", (campaign_id, round))

    def spent(self) -> list[tuple[str, Fraction, int, bool, str]]:
        """``(campaign_id, ε spent, reports, recurring, trust_model)`` per campaign, exact."""
        rows = self._db.execute(
            "SELECT campaign_id, epsilon, reports, recurring, trust_model FROM spent ORDER BY rowid"
        ).fetchall()
        return [(r[0], Fraction(r[1]), r[2], bool(r[3]), r[4]) for r in rows]

    def spent_on(self, campaign_id: str) -> Fraction:
        """ε spent on ``campaign_id``, exact (0 if never answered)."""
        return self.balances(campaign_id)[0]

    def total_spent(self) -> Fraction:
        """ε spent over all campaigns, exact (kept as a running sum, O(1) to read)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'total_spent'").fetchone()
        return Fraction(0) if row is None else Fraction(row[0])

    def balances(self, campaign_id: str) -> tuple[Fraction, Fraction]:
        """``(ε spent on campaign_id, ε spent over all campaigns)``, exact, read in one statement."""
        return _balances(self._db, campaign_id)

    @staticmethod
    def record_spend(
        db: sqlite3.Connection, row: SpendRow, balances: tuple[Fraction, Fraction] | None = None
    ) -> tuple[Fraction, Fraction]:
        """Inside a transaction: record the spend, memoize its envelope and update the running sums; the
        balances after it. ``balances``: ``(ε spent on the campaign, ε spent in all)`` as read in this
        transaction (by the budget check, or returned by the spend before), else read here."""
        spent, total = _balances(db, row.campaign_id) if balances is None else balances
        db.execute(
            "INSERT INTO spent VALUES (?, ?, 1, ?, ?) "
            "ON CONFLICT (campaign_id) DO UPDATE SET epsilon = excluded.epsilon, reports = reports + 1",
            (row.campaign_id, str(spent + row.epsilon), int(row.recurring), row.trust_model),
        )
        db.execute("INSERT OR REPLACE INTO meta VALUES ('total_spent', ?)", (str(total + row.epsilon),))
        db.execute(
            "INSERT INTO reports (report_id, campaign_id, recurring, trust_model, epsilon, envelope, created, "
            "answer_tag) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.report_id,
                row.campaign_id,
                int(row.recurring),
                row.trust_model,
                str(row.epsilon),
                row.envelope,
                time.time(),
                row.answer_tag,
            ),
        )
        return spent + row.epsilon, total + row.epsilon

    def forget(self, campaign_id: str) -> tuple[bool, int]:
        """Drop what the device holds about ``campaign_id`` in one transaction: its pinned config, its memoized
        answers (one-shot reports, permanent responses, round answers), its queued and expired envelopes and
        its rejections. The ε spent on it stays in the ledger (``spent``, the lifetime total): a privacy loss
        cannot be taken back. Returns (whether a config was pinned, how many queued envelopes were dropped).
        """
        with self.transaction() as db:
            pinned = db.execute("DELETE FROM pins WHERE campaign_id = ?", (campaign_id,)).rowcount > 0
            dropped = db.execute("DELETE FROM outbox WHERE campaign_id = ?", (campaign_id,)).rowcount
            for table in ("reports", "rounds", "expired", "rejections"):
                db.execute(f"DELETE FROM {table} WHERE campaign_id = ?", (campaign_id,))  # noqa: S608 - fixed names
        return pinned, int(dropped)

    # -- rounds of recurring campaigns ---------------------------------------------------------------
    def round_answer(self, campaign_id: str, round: str) -> RoundRow | None:
        """The answer already given in ``round`` of ``campaign_id``, if any."""
        row = self._db.execute(
            "SELECT campaign_id, round, report_id, answer_id, envelope FROM rounds "
            "WHERE campaign_id = ? AND round = ?",
            (campaign_id, round),
        ).fetchone()
        return None if row is None else RoundRow(row[0], row[1], row[2], row[3], row[4])

    @staticmethod
    def record_round(db: sqlite3.Connection, row: RoundRow) -> None:
        """Inside a transaction: remember the answer of a round (one per campaign and round)."""
        db.execute(
            "INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?)",
            (row.campaign_id, row.round, row.report_id, row.answer_id, row.envelope, time.time()),
        )

    # -- outbox ---------------------------------------------------------------------------------------
    @staticmethod
    def enqueue(db: sqlite3.Connection, report_id: str, campaign_id: str, envelope: str) -> bool:
        """Inside a transaction: queue an envelope unless it is queued already; True if it was added."""
        cur = db.execute(
            "INSERT OR IGNORE INTO outbox (report_id, campaign_id, envelope, queued_at) VALUES (?, ?, ?, ?)",
            (report_id, campaign_id, envelope, time.time()),
        )
        return cur.rowcount == 1

    def pending(self) -> int:
        """How many envelopes wait in the outbox."""
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def outbox_campaigns(self) -> list[str]:
        """Campaigns with queued envelopes, in queue order of their oldest entry."""
        rows = self._db.execute(
            "SELECT campaign_id FROM outbox GROUP BY campaign_id ORDER BY MIN(seq)"
        ).fetchall()
        return [r[0] for r in rows]

    def next_batch(self, campaign_id: str, limit: int, after_seq: int = 0) -> list[OutboxEntry]:
        """Up to ``limit`` queued envelopes of one campaign queued after ``after_seq``, oldest first."""
        rows = self._db.execute(
            "SELECT seq, report_id, campaign_id, envelope, attempts FROM outbox "
            "WHERE campaign_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (campaign_id, after_seq, limit),
        ).fetchall()
        return [OutboxEntry(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def settle(
        self,
        delivered: list[str],
        rejected: list[tuple[str, str, str, str]],
        failed: list[str],
        error: str | None,
        error_code: str | None = None,
        now: float | None = None,
    ) -> None:
        """One transaction: drop delivered ids, move rejected ``(id, campaign, code, reason)`` out of the
        outbox into the rejections, and count an attempt (with ``error`` and its ``error_code``) on
        ``failed`` ids, which stay queued."""
        now = time.time() if now is None else now
        with self.transaction() as db:
            db.executemany("DELETE FROM outbox WHERE report_id = ?", [(r,) for r in delivered])
            for report_id, campaign_id, code, reason in rejected:
                db.execute("DELETE FROM outbox WHERE report_id = ?", (report_id,))
                db.execute(
                    "INSERT OR REPLACE INTO rejections VALUES (?, ?, ?, ?, ?)",
                    (report_id, campaign_id, code, reason, now),
                )
            db.executemany(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, last_error_code = ?, "
                "last_attempt = ? WHERE report_id = ?",
                [(error, error_code, now, r) for r in failed],
            )

    def pending_reports(self, max_age: float) -> list[PendingReport]:
        """Every queued report, oldest first, with why it waits and when it expires."""
        rows = self._db.execute(
            "SELECT report_id, campaign_id, queued_at, attempts, last_attempt, last_error, last_error_code "
            "FROM outbox ORDER BY seq"
        ).fetchall()
        return [PendingReport(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[2] + max_age) for r in rows]

    def expire(self, queued_before: float, now: float) -> int:
        """Move every report queued before ``queued_before`` out of the outbox into ``expired``; how many."""
        with self.transaction() as db:
            cur = db.execute(
                "INSERT OR REPLACE INTO expired "
                "SELECT report_id, campaign_id, queued_at, ?, attempts, last_error FROM outbox "
                "WHERE queued_at < ?",
                (now, queued_before),
            )
            count = cur.rowcount
            if count:
                db.execute("DELETE FROM outbox WHERE queued_at < ?", (queued_before,))
        return max(count, 0)

    def expired(self) -> list[ExpiredReport]:
        """Every report that expired in the outbox, oldest first."""
        rows = self._db.execute(
            "SELECT report_id, campaign_id, queued_at, expired_at, attempts, last_error FROM expired "
            "ORDER BY expired_at, rowid"
        ).fetchall()
        return [ExpiredReport(*r) for r in rows]

    def expired_counts(self) -> dict[str, int]:
        """How many reports expired per campaign."""
        rows = self._db.execute("SELECT campaign_id, COUNT(*) FROM expired GROUP BY campaign_id").fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def aggregator_url(self) -> str | None:
        """The aggregator URL the last :class:`~deniable.client.Client` on this state used, if any."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'aggregator_url'").fetchone()
        return None if row is None else str(row[0])

    def remember_aggregator(self, url: str) -> None:
        """Record the aggregator URL (``deniable flush`` uses it when no ``--aggregator`` is given)."""
        if self.aggregator_url() != url:
            with self.transaction() as db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('aggregator_url', ?)", (url,))

    def not_before(self) -> float:
        """The time before which no report may be posted (a 429's Retry-After), or 0."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'not_before'").fetchone()
        return 0.0 if row is None else float(row[0])

    def set_not_before(self, when: float) -> None:
        """Record a 429's Retry-After for every process sharing this state dir."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('not_before', ?)", (repr(float(when)),))

    def rejections(self) -> list[Rejection]:
        """Every report the aggregator refused, oldest first."""
        rows = self._db.execute(
            "SELECT report_id, campaign_id, code, reason, at FROM rejections ORDER BY at, rowid"
        ).fetchall()
        return [Rejection(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def rejected(self, report_id: str) -> bool:
        """Whether the aggregator refused ``report_id``."""
        return (
            self._db.execute("SELECT 1 FROM rejections WHERE report_id = ?", (report_id,)).fetchone()
            is not None
        )


def _balances(db: sqlite3.Connection, campaign_id: str | None) -> tuple[Fraction, Fraction]:
    """``(ε spent on campaign_id, ε spent in all)`` in one statement (0 where nothing was spent)."""
    spent, total = db.execute(
        "SELECT (SELECT epsilon FROM spent WHERE campaign_id = ?), (SELECT value FROM meta WHERE key = 'total_spent')",
        (campaign_id,),
    ).fetchone()
    return Fraction(spent or 0), Fraction(total or 0)


def _load_or_create_secret(path: Path) -> bytes:
    """Read the device secret, or create it once: 32 bytes from :mod:`secrets`, mode 0600, fsynced.

    Written by :func:`~deniable.client.secret_file.write_secret_file` (private temporary file, fsync,
    hard link into place, fsync of the directory), so a crash never leaves a truncated secret and two
    processes starting together agree on one secret (the loser reads the winner's).
    """
    if path.exists() or path.is_symlink():
        return _read_secret(path)
    write_secret_file(path, secrets.token_bytes(_SECRET_BYTES), exclusive=True)  # the loser reads the winner's
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    restore = (
        "restore it from a backup of the state dir; deleting the state dir instead gives the device a new "
        "identity and new pseudonyms, so campaigns it answered would count it twice"
    )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DeviceSecretDamaged(
            f"the device secret {path} cannot be read ({exc.strerror or exc}); {restore}"
        ) from exc
    if len(data) != _SECRET_BYTES:
        raise DeviceSecretDamaged(
            f"the device secret {path} holds {len(data)} bytes, expected {_SECRET_BYTES}: it is damaged; {restore}"
        )
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)
    return data


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _ledger_lost_message(path: Path | None) -> str:
    return (
        f"the device secret in {path} survives but its ledger ({DB_FILE}) is gone: the ε this device spent "
        f"is unknown, and starting a new ledger would let it spend its budget again. Restore {DB_FILE} from "
        "a backup, or pass reset_ledger=True (CLI: --reset-ledger) to start a new ledger at zero: answers "
        "already given are then re-sent identically (one-shot answers are derived from the secret), but an "
        "answer with another value costs ε the new ledger does not show"
    )


#: What to do about a state dir that cannot be used (SDK argument, CLI flag).
_ANOTHER_DIR = "choose another state dir (state_dir=..., CLI: --state-dir DIR)"


def _disk_full(where: str, reason: str) -> StateDiskFull:
    return StateDiskFull(
        f"{where} is on a full disk ({reason}); nothing was changed by this call and nothing queued was lost. "
        "Free some space and try again"
    )


def _read_only(where: str, reason: str) -> StateReadOnly:
    return StateReadOnly(f"{where} cannot be written ({reason}); give this user write access to it, or {_ANOTHER_DIR}")


@contextlib.contextmanager
def state_errors(path: Path | None) -> Iterator[None]:
    """Turn the storage errors of the state (``sqlite3.Error``, ``OSError``) into :class:`DeviceStateError`
    subclasses whose message says what happened and what to do. A transaction that failed was rolled
    back, so the state is as it was before the call: nothing queued is lost."""
    where = "the in-memory device state" if path is None else f"the device state dir {path}"
    try:
        yield
    except DeviceStateError:
        raise
    except (sqlite3.ProgrammingError, sqlite3.IntegrityError, sqlite3.InterfaceError):
        raise  # a bug of the SDK, not a state of the disk
    except sqlite3.Error as exc:
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        text = str(exc)
        if code == sqlite3.SQLITE_FULL or "disk is full" in text:
            raise _disk_full(where, text) from exc
        if code == sqlite3.SQLITE_READONLY or "readonly" in text or "read-only" in text:
            raise _read_only(where, text) from exc
        if _is_busy(exc):
            raise StateBusy(
                f"{where} is held by another process for longer than {STATE_BUSY_TIMEOUT:g} s ({text}); "
                "try again when it has finished"
            ) from exc
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "not a database" in text or "malformed" in text:
            raise StateCorrupt(
                f"the state database of {where} is damaged ({text}); restore the state dir from a backup"
            ) from exc
        if code == sqlite3.SQLITE_CANTOPEN or "unable to open" in text:
            raise StateReadOnly(
                f"{where} cannot be opened ({text}); check that it exists and is writable, or {_ANOTHER_DIR}"
            ) from exc
        raise DeviceStateError(f"{where} failed: {text}") from exc
    except OSError as exc:
        reason = f"{exc.strerror or exc}: {exc.filename or path}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(where, reason) from exc
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise _read_only(where, reason) from exc
        raise DeviceStateError(f"{where} cannot be used ({reason}); check the path, or {_ANOTHER_DIR}") from exc
