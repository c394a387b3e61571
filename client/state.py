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
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from deniable.shared.errors import InvalidParameter

__all__ = [
    "DB_FILE",
    "SECRET_FILE",
    "DeviceState",
    "OutboxEntry",
    "Rejection",
    "ReportRow",
    "RoundRow",
    "default_state_dir",
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
CREATE TABLE IF NOT EXISTS rejections (
    report_id TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL,
    code TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL
);
"""


def default_state_dir() -> Path:
    """``$DENIABLE_STATE_DIR`` if set, else ``~/.local/share/deniable``."""
    env = os.environ.get("DENIABLE_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "deniable"


@dataclass(frozen=True)
class ReportRow:
    """One ε spend and the randomized, encrypted report it paid for (the memo)."""

    report_id: str
    campaign_id: str
    recurring: bool
    trust_model: str
    epsilon: Fraction
    envelope: str


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

    def __init__(self, state_dir: str | os.PathLike[str] | None, *, durability: str = "normal") -> None:
        if durability not in ("normal", "full"):
            raise InvalidParameter(f"'durability' must be 'normal' or 'full', got {durability!r}")
        self.durability = durability
        self.path: Path | None = None
        if state_dir is None:
            self._secret = secrets.token_bytes(_SECRET_BYTES)
            target = ":memory:"
        else:
            self.path = Path(state_dir).expanduser()
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.path, 0o700)
            self._secret = _load_or_create_secret(self.path / SECRET_FILE)
            db = self.path / DB_FILE
            os.close(os.open(db, os.O_CREAT | os.O_WRONLY, 0o600))
            os.chmod(db, 0o600)
            target = str(db)
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30.0)
        if self.path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={durability.upper()}")
        self._db.executescript(_SCHEMA)

    @property
    def secret(self) -> bytes:
        """The 32-byte device secret."""
        return self._secret

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An ``IMMEDIATE`` transaction: committed on success, rolled back on any exception."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

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
        """Pin at first use; an existing pin is never overwritten."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO pins VALUES (?, ?, ?, ?)",
                (campaign_id, fingerprint, summary_json, time.time()),
            )

    # -- ε spends and memo ----------------------------------------------------------------------------
    def reports(self, campaign_id: str | None = None) -> list[ReportRow]:
        """Every spend (optionally of one campaign), oldest first."""
        sql = "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports"
        args: tuple[str, ...] = ()
        if campaign_id is not None:
            sql += " WHERE campaign_id = ?"
            args = (campaign_id,)
        rows = self._db.execute(sql + " ORDER BY created, rowid", args).fetchall()
        return [ReportRow(r[0], r[1], bool(r[2]), r[3], Fraction(r[4]), r[5]) for r in rows]

    def report(self, report_id: str) -> ReportRow | None:
        """The spend that paid for ``report_id``, if any."""
        row = self._db.execute(
            "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports "
            "WHERE report_id = ?",
            (report_id,),
        ).fetchone()
        if row is None:
            return None
        return ReportRow(row[0], row[1], bool(row[2]), row[3], Fraction(row[4]), row[5])

    def first_report(self, campaign_id: str) -> ReportRow | None:
        """The oldest spend of ``campaign_id`` (the memo of a one-shot campaign), if any."""
        row = self._db.execute(
            "SELECT report_id, campaign_id, recurring, trust_model, epsilon, envelope FROM reports "
            "WHERE campaign_id = ? ORDER BY created, rowid LIMIT 1",
            (campaign_id,),
        ).fetchone()
        if row is None:
            return None
        return ReportRow(row[0], row[1], bool(row[2]), row[3], Fraction(row[4]), row[5])

    def spent(self) -> list[tuple[str, Fraction, int, bool, str]]:
        """``(campaign_id, ε spent, reports, recurring, trust_model)`` per campaign, exact."""
        rows = self._db.execute(
            "SELECT campaign_id, epsilon, reports, recurring, trust_model FROM spent ORDER BY rowid"
        ).fetchall()
        return [(r[0], Fraction(r[1]), r[2], bool(r[3]), r[4]) for r in rows]

    def spent_on(self, campaign_id: str) -> Fraction:
        """ε spent on ``campaign_id``, exact (0 if never answered)."""
        row = self._db.execute("SELECT epsilon FROM spent WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return Fraction(0) if row is None else Fraction(row[0])

    def total_spent(self) -> Fraction:
        """ε spent over all campaigns, exact (kept as a running sum, O(1) to read)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'total_spent'").fetchone()
        return Fraction(0) if row is None else Fraction(row[0])

    @staticmethod
    def record_spend(db: sqlite3.Connection, row: ReportRow) -> None:
        """Inside a transaction: record the spend, memoize its envelope and update the running sums."""
        found = db.execute("SELECT epsilon FROM spent WHERE campaign_id = ?", (row.campaign_id,)).fetchone()
        if found is None:
            db.execute(
                "INSERT INTO spent VALUES (?, ?, 1, ?, ?)",
                (row.campaign_id, str(row.epsilon), int(row.recurring), row.trust_model),
            )
        else:
            db.execute(
                "UPDATE spent SET epsilon = ?, reports = reports + 1 WHERE campaign_id = ?",
                (str(Fraction(found[0]) + row.epsilon), row.campaign_id),
            )
        total = db.execute("SELECT value FROM meta WHERE key = 'total_spent'").fetchone()
        new_total = (Fraction(0) if total is None else Fraction(total[0])) + row.epsilon
        db.execute("INSERT OR REPLACE INTO meta VALUES ('total_spent', ?)", (str(new_total),))
        db.execute(
            "INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                row.report_id,
                row.campaign_id,
                int(row.recurring),
                row.trust_model,
                str(row.epsilon),
                row.envelope,
                time.time(),
            ),
        )

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
            "INSERT OR IGNORE INTO outbox (report_id, campaign_id, envelope) VALUES (?, ?, ?)",
            (report_id, campaign_id, envelope),
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
    ) -> None:
        """One transaction: drop delivered ids, move rejected ``(id, campaign, code, reason)`` out of the
        outbox into the rejections, and count an attempt (with ``error``) on ``failed`` ids."""
        now = time.time()
        with self.transaction() as db:
            db.executemany("DELETE FROM outbox WHERE report_id = ?", [(r,) for r in delivered])
            for report_id, campaign_id, code, reason in rejected:
                db.execute("DELETE FROM outbox WHERE report_id = ?", (report_id,))
                db.execute(
                    "INSERT OR REPLACE INTO rejections VALUES (?, ?, ?, ?, ?)",
                    (report_id, campaign_id, code, reason, now),
                )
            db.executemany(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE report_id = ?",
                [(error, r) for r in failed],
            )

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


def _load_or_create_secret(path: Path) -> bytes:
    """Read the device secret, or create it once: 32 bytes from :mod:`secrets`, mode 0600, fsynced.

    Written to a private temporary file first and hard-linked into place, so a crash never leaves a
    truncated secret and two processes starting together agree on one secret (the loser reads the winner's).
    """
    if path.exists():
        return _read_secret(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, secrets.token_bytes(_SECRET_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    data = path.read_bytes()
    if len(data) != _SECRET_BYTES:
        raise OSError(
            f"device secret {path} holds {len(data)} bytes, expected {_SECRET_BYTES}; it is damaged - "
            "restore it from a backup (deleting it gives the device a new identity and new pseudonyms)"
        )
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)
    return data
