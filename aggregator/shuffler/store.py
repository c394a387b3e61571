"""The shuffler's SQLite database (WAL, ``synchronous=FULL``): what it acknowledged survives a crash.

Tables:

* ``campaigns``: the descriptor of each shuffled campaign, as fetched from the aggregator and checked
  (it must name this shuffler), with the time it was fetched (re-fetched after a minute).
* ``received``: (campaign, report id, dedup token) of every report taken, so that a device's retry is a
  ``duplicate`` (same report id and token) and a second report of the same device is one too (the token
  is UNIQUE per campaign); ``spent_tokens``: admission-token nonces already spent.
* ``pending``: the inner ciphertexts waiting for a batch, under a random 16-byte key and in a table without
  rowid, so the file keeps no arrival order or time of a report; nothing links a pending row to a
  ``received`` row but the moment both were written.
* ``batches``: batches formed and not yet stored by the aggregator: the signed body as it will be sent
  (so a retry sends the identical batch id and content), the attempt count, when to try next and a lease
  so that two worker processes do not send the same batch at once (the aggregator would keep it once
  anyway).

Forming a batch takes its reports out of ``pending`` and writes the batch in ONE transaction, so a report
is in exactly one of the two; a batch is deleted only after the aggregator answered that it stored it.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deniable.shared.contract import SAME_REPORT_REASON, SPENT_TOKEN_REASON
from deniable.shared.limits import DATABASE_BUSY_TIMEOUT_MS

__all__ = ["DueBatch", "ShufflerStore", "Taken"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS campaigns (
        id TEXT PRIMARY KEY, config_json TEXT NOT NULL, fetched_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS received (
        campaign_id TEXT NOT NULL, report_id BLOB NOT NULL, dedup BLOB NOT NULL,
        PRIMARY KEY (campaign_id, report_id, dedup), UNIQUE (campaign_id, dedup)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS spent_tokens (
        campaign_id TEXT NOT NULL, nonce BLOB NOT NULL, PRIMARY KEY (campaign_id, nonce)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS pending (
        key BLOB PRIMARY KEY, campaign_id TEXT NOT NULL, inner BLOB NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS pending_campaign ON pending (campaign_id)",
    """CREATE TABLE IF NOT EXISTS batches (
        batch_id TEXT PRIMARY KEY, campaign_id TEXT NOT NULL, n INTEGER NOT NULL, body TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, next_attempt REAL NOT NULL DEFAULT 0,
        lease_until REAL NOT NULL DEFAULT 0, last_error TEXT)""",
    """CREATE TABLE IF NOT EXISTS forwarded (
        campaign_id TEXT NOT NULL, batches INTEGER NOT NULL, reports INTEGER NOT NULL,
        PRIMARY KEY (campaign_id))""",
)

_SAME_DEVICE = "this device already reported to this campaign; it counts once"


@dataclass(frozen=True, slots=True)
class Taken:
    """One checked upload to store: its report id and dedup token (hex), inner ciphertext, token nonce."""

    report_id: str
    dedup: str
    inner: bytes
    token_nonce: bytes | None = None


@dataclass(frozen=True, slots=True)
class DueBatch:
    """A batch to send now: its id, campaign, size, JSON body and how many times it was tried."""

    batch_id: str
    campaign_id: str
    n: int
    body: dict[str, Any]
    attempts: int


class ShufflerStore:
    """The shuffler's database at ``path``; one connection per thread, safe across processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._pid = os.getpid()
        with self.transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def connection(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._local, self._pid = threading.local(), os.getpid()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=DATABASE_BUSY_TIMEOUT_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout = {DATABASE_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (fsync'd: ``synchronous=FULL``), rolled back on any exception."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- descriptors --------------------------------------------------------------------------------

    def cached_config(self, campaign_id: str) -> tuple[dict[str, Any], float] | None:
        row = (
            self.connection()
            .execute("SELECT config_json, fetched_at FROM campaigns WHERE id = ?", (campaign_id,))
            .fetchone()
        )
        return None if row is None else (json.loads(row[0]), float(row[1]))

    def cache_config(self, campaign_id: str, config: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO campaigns (id, config_json, fetched_at) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE"
                " SET config_json = excluded.config_json, fetched_at = excluded.fetched_at",
                (campaign_id, json.dumps(config, sort_keys=True), time.time()),
            )

    def campaign_ids(self) -> list[str]:
        return [row[0] for row in self.connection().execute("SELECT id FROM campaigns ORDER BY id")]

    # -- uploads ------------------------------------------------------------------------------------

    def take(self, campaign_id: str, reports: Sequence[Taken]) -> list[tuple[str, str | None]]:
        """Store the new reports in ONE transaction, committed before this returns; per report, in order,
        ``("accepted", None)``, ``("duplicate", reason)`` (a retry, or the device already reported) or
        ``("rejected", reason)`` (its admission token was spent)."""
        outcomes: list[tuple[str, str | None]] = []
        with self.transaction() as conn:
            for report in reports:
                rid, dedup = bytes.fromhex(report.report_id), bytes.fromhex(report.dedup)
                if conn.execute(
                    "SELECT 1 FROM received WHERE campaign_id = ? AND report_id = ? AND dedup = ?",
                    (campaign_id, rid, dedup),
                ).fetchone():  # fmt: skip
                    outcomes.append(("duplicate", SAME_REPORT_REASON))
                    continue
                if conn.execute(
                    "SELECT 1 FROM received WHERE campaign_id = ? AND dedup = ?", (campaign_id, dedup)
                ).fetchone():
                    outcomes.append(("duplicate", _SAME_DEVICE))
                    continue
                if report.token_nonce is not None:
                    if conn.execute(
                        "SELECT 1 FROM spent_tokens WHERE campaign_id = ? AND nonce = ?",
                        (campaign_id, report.token_nonce),
                    ).fetchone():  # fmt: skip
                        outcomes.append(("rejected", SPENT_TOKEN_REASON))
                        continue
                    conn.execute(
                        "INSERT INTO spent_tokens (campaign_id, nonce) VALUES (?, ?)", (campaign_id, report.token_nonce)
                    )
                conn.execute(
                    "INSERT INTO received (campaign_id, report_id, dedup) VALUES (?, ?, ?)", (campaign_id, rid, dedup)
                )
                conn.execute(
                    "INSERT INTO pending (key, campaign_id, inner) VALUES (?, ?, ?)",
                    (secrets.token_bytes(16), campaign_id, report.inner),
                )
                outcomes.append(("accepted", None))
        return outcomes

    def pending_count(self, campaign_id: str) -> int:
        row = self.connection().execute("SELECT COUNT(*) FROM pending WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return int(row[0])

    # -- batches ------------------------------------------------------------------------------------

    def form_batch(
        self,
        campaign_id: str,
        *,
        threshold: int,
        max_size: int,
        permute: Callable[[list[bytes]], None],
        sign: Callable[[str, list[bytes]], dict[str, Any]],
    ) -> int:
        """If at least ``threshold`` reports of the campaign wait, move a uniformly random ``min(pending,
        max_size)`` of them, in a uniformly random order (``permute``, in place), into a new signed batch, in
        ONE transaction; return its size (0: not enough pending, nothing changed)."""
        with self.transaction() as conn:
            rows = conn.execute("SELECT key, inner FROM pending WHERE campaign_id = ?", (campaign_id,)).fetchall()
            if len(rows) < threshold:
                return 0
            permute(rows)  # a uniform permutation of all pending; its first max_size are a uniform subset
            chosen = rows[:max_size]
            batch_id = secrets.token_hex(16)
            body = sign(batch_id, [inner for _, inner in chosen])
            conn.executemany("DELETE FROM pending WHERE key = ?", [(key,) for key, _ in chosen])
            conn.execute(
                "INSERT INTO batches (batch_id, campaign_id, n, body) VALUES (?, ?, ?, ?)",
                (batch_id, campaign_id, len(chosen), json.dumps(body, separators=(",", ":"))),
            )
            return len(chosen)

    def claim_due(self, now: float, lease: float) -> DueBatch | None:
        """The next batch due for sending (lease taken for ``lease`` seconds), or None."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT batch_id, campaign_id, n, body, attempts FROM batches WHERE next_attempt <= ? AND lease_until"
                " <= ? ORDER BY next_attempt LIMIT 1",
                (now, now),
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE batches SET lease_until = ? WHERE batch_id = ?", (now + lease, row[0]))
        return DueBatch(row[0], row[1], int(row[2]), json.loads(row[3]), int(row[4]))

    def release_leases(self) -> int:
        """Forget every lease (at start, before any worker sends): a batch whose sender was killed mid-request
        is due again at once, not after its lease; the aggregator keeps a batch sent twice once."""
        with self.transaction() as conn:
            return conn.execute("UPDATE batches SET lease_until = 0 WHERE lease_until > 0").rowcount

    def delivered(self, batch: DueBatch) -> None:
        """The aggregator stored the batch: forget it (its reports are the aggregator's now)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM batches WHERE batch_id = ?", (batch.batch_id,))
            conn.execute(
                "INSERT INTO forwarded (campaign_id, batches, reports) VALUES (?, 1, ?) ON CONFLICT (campaign_id)"
                " DO UPDATE SET batches = batches + 1, reports = reports + excluded.reports",
                (batch.campaign_id, batch.n),
            )

    def retry_later(self, batch: DueBatch, when: float, error: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET attempts = attempts + 1, next_attempt = ?, lease_until = 0, last_error = ?"
                " WHERE batch_id = ?",
                (when, error[:500], batch.batch_id),
            )

    def status(self) -> dict[str, Any]:
        """Counts only (pending reports, batches waiting, forwarded so far) per campaign."""
        conn = self.connection()
        out: dict[str, Any] = {}
        for cid, n in conn.execute("SELECT campaign_id, COUNT(*) FROM pending GROUP BY campaign_id"):
            out.setdefault(cid, {})["pending_reports"] = int(n)
        for cid, n, reports, error in conn.execute(
            "SELECT campaign_id, COUNT(*), SUM(n), MAX(last_error) FROM batches GROUP BY campaign_id"
        ):
            out.setdefault(cid, {}).update(waiting_batches=int(n), waiting_reports=int(reports), last_error=error)
        for cid, batches, reports in conn.execute("SELECT campaign_id, batches, reports FROM forwarded"):
            out.setdefault(cid, {}).update(forwarded_batches=int(batches), forwarded_reports=int(reports))
        return out
