"""Every failure of the device's own storage is a DeviceStateError that says what to do (issue 11 item 6).

Concurrent first open of a new state dir (20 processes at once), a lock SQLite reports without waiting, a
read-only state dir, a full disk (SQLite's own page limit, and a real tiny tmpfs where the test may mount
one), a damaged device secret and a damaged database: each is a ``DeviceStateError`` subclass with a
message that says what happened and what to do, the CLI shows it without a traceback, and nothing queued
is lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from support.cli import deniable
from support.server import RunningServer

from deniable.client import Client, RetryPolicy
from deniable.client.state import DB_FILE, SECRET_FILE
from deniable.shared.errors import (
    DeviceSecretDamaged,
    DeviceStateError,
    StateCorrupt,
    StateDiskFull,
    StateReadOnly,
)

_ids = count()
NO_SLEEP = RetryPolicy(attempts=2, base=0.0, sleep=lambda s: None)
PROCESSES = 20


def _campaign(aggregator: RunningServer) -> str:
    cid = f"state-{next(_ids)}"
    aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b"], epsilon=0.1)
    return cid


# ------------------------------------------------------------------------------------ concurrent first open


def _open_in_child(state_dir: str, barrier: Any, results: Any) -> None:
    try:
        barrier.wait(30)
        client = Client("http://127.0.0.1:9", state_dir)
        spent = client.ledger().spent
        client.close()
        secret = hashlib.sha256((Path(state_dir) / SECRET_FILE).read_bytes()).hexdigest()
        results.put(("ok", spent, secret))
    except BaseException as exc:
        results.put(("error", type(exc).__name__, str(exc)))


def test_twenty_processes_open_a_new_state_dir_at_once(tmp_path: Path) -> None:
    """Released together by a barrier, 20 processes each open one new state dir; 3 rounds."""
    ctx = multiprocessing.get_context("fork")
    for round_ in range(3):
        state_dir = str(tmp_path / f"new-{round_}")
        barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
        children = [ctx.Process(target=_open_in_child, args=(state_dir, barrier, results)) for _ in range(PROCESSES)]
        for child in children:
            child.start()
        outcomes = [results.get(timeout=120) for _ in children]
        for child in children:
            child.join(30)
        assert [o for o in outcomes if o[0] != "ok"] == []
        assert len({o[2] for o in outcomes}) == 1  # all agree on one device secret


def test_a_lock_sqlite_reports_at_once_is_retried_under_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite answers 'database is locked' to the switch to WAL without waiting when two new connections
    race; the open retries (what made 3 of 20 processes die before)."""
    real_connect = sqlite3.connect
    failures = {"left": 3}

    class RacingConnection(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            if sql.startswith("PRAGMA journal_mode") and failures["left"] > 0:
                failures["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return super().execute(sql, *args)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real_connect(*a, factory=RacingConnection, **k))
    client = Client("http://127.0.0.1:9", tmp_path / "racing")
    assert failures["left"] == 0 and client.ledger().spent == 0
    client.close()


# ------------------------------------------------------------------------------------ read-only, full disk


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as probe:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], capture_output=True)
        if ok.returncode != 0:
            return False
        subprocess.run(["umount", probe], check=True)
    return True


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """Make ``path`` (a mount point when root, a plain dir otherwise) read-only for this user, then restore."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(path)], check=True)
        return
    modes = {p: p.stat().st_mode for p in [path, *path.iterdir()]}
    for p in modes:
        p.chmod(0o500 if p.is_dir() else 0o400)
    try:
        yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


#: Under CI=true a machine that cannot run these is a failure, not a skip (CI runs as root and can mount).
_ON_CI = os.environ.get("CI") == "true"

needs_a_writable_root = pytest.mark.skipif(
    os.geteuid() == 0 and not _can_mount() and not _ON_CI,
    reason="root ignores file modes, and this root may not mount a tmpfs to make a read-only or full disk",
)


@needs_a_writable_root
def test_a_read_only_state_dir_is_a_clear_error_and_loses_nothing(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    cid = _campaign(aggregator)
    mount = tmp_path / "ro"
    with _tmpfs(mount, "4m") if os.geteuid() == 0 else contextlib.nullcontext(mount.mkdir() or mount):
        state_dir = mount / "state" if os.geteuid() != 0 else mount
        client = Client(aggregator.url, state_dir, retry=NO_SLEEP)
        receipt = client.submit(cid, "a")
        client.close()
        with _read_only(state_dir):
            with pytest.raises(StateReadOnly, match=r"cannot be written.*give this user write access") as info:
                Client(aggregator.url, state_dir, retry=NO_SLEEP)
            assert str(state_dir) in str(info.value) and "--state-dir" in str(info.value)
        client = Client(aggregator.url, state_dir, retry=NO_SLEEP)
        assert [p.report_id for p in client.pending()] == [receipt.report_id]  # nothing queued was lost
        assert client.flush() == 1
        client.close()
    assert aggregator.estimate(cid)["n"] == 1


def _fill_until_full(client: Client, aggregator: RunningServer, limit: int = 60) -> tuple[list[str], Exception]:
    """Submit to new campaigns until the state's disk is full; the report ids queued and the error."""
    queued = []
    for _ in range(limit):
        cid = _campaign(aggregator)
        before = (client.ledger(), [p.report_id for p in client.pending()])
        try:
            queued.append(client.submit(cid, "b").report_id)
        except DeviceStateError as exc:
            assert (client.ledger(), [p.report_id for p in client.pending()]) == before  # rolled back whole
            return queued, exc
    raise AssertionError(f"the disk never filled in {limit} answers")


def test_a_full_disk_is_a_clear_error_and_loses_nothing(aggregator: RunningServer, tmp_path: Path) -> None:
    """SQLite's page limit gives the real SQLITE_FULL ('database or disk is full') on the state database."""
    client = Client(aggregator.url, tmp_path / "full", retry=NO_SLEEP, lifetime_budget=100.0)
    client.submit(_campaign(aggregator), "a")
    pages = client._state._db.execute("PRAGMA page_count").fetchone()[0]
    client._state._db.execute(f"PRAGMA max_page_count={pages}")
    queued, error = _fill_until_full(client, aggregator)
    assert isinstance(error, StateDiskFull), error
    assert "full disk" in str(error) and "nothing queued was lost" in str(error) and "Free some space" in str(error)
    assert len(client.pending()) == len(queued) + 1
    client._state._db.execute("PRAGMA max_page_count=1073741823")  # space freed
    result = client.deliver()
    assert (result.delivered, result.pending) == (len(queued) + 1, 0)
    client.close()


@pytest.mark.skipif(not _can_mount() and not _ON_CI, reason="a real full disk needs a tmpfs, which only root may mount")
def test_a_really_full_disk_loses_nothing(aggregator: RunningServer, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "tiny", "1m") as mount:
        client = Client(aggregator.url, mount / "state", retry=NO_SLEEP, lifetime_budget=100.0)
        client.submit(_campaign(aggregator), "a")
        filler = mount / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        queued, error = _fill_until_full(client, aggregator)
        assert isinstance(error, StateDiskFull), error
        delivered = 0
        with contextlib.suppress(StateDiskFull):  # a flush on the full disk: delivers, or changes nothing
            delivered = client.deliver().delivered
        assert delivered + len(client.pending()) == len(queued) + 1
        filler.unlink()
        result = client.deliver()
        assert (result.delivered + delivered, result.pending) == (len(queued) + 1, 0)
        client.close()


# ------------------------------------------------------------------------------------ damaged files, CLI


@pytest.mark.parametrize("damage", ["truncated", "unreadable"])
def test_a_damaged_device_secret_is_a_clear_error_without_a_traceback(
    aggregator: RunningServer, tmp_path: Path, damage: str
) -> None:
    cid = _campaign(aggregator)
    state_dir = tmp_path / "device"
    Client(aggregator.url, state_dir).close()
    secret = state_dir / SECRET_FILE
    if damage == "truncated":
        secret.write_bytes(b"short")
    else:
        secret.unlink()
        secret.mkdir()  # the read fails with an OSError (IsADirectoryError)
    with pytest.raises(DeviceSecretDamaged, match="restore it from a backup"):
        Client(aggregator.url, state_dir)
    done = deniable("submit", "--aggregator", aggregator.url, "--campaign", cid, "--value", "a",
                "--state-dir", str(state_dir))
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr and "device secret" in done.stderr and "restore it" in done.stderr


def test_a_damaged_state_database_is_a_clear_error_without_a_traceback(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    state_dir = tmp_path / "device"
    Client(aggregator.url, state_dir).close()
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / (DB_FILE + suffix)).unlink()
    (state_dir / DB_FILE).write_bytes(b"this is not an SQLite database, it was overwritten" * 100)
    with pytest.raises(StateCorrupt, match="restore the state dir from a backup"):
        Client(aggregator.url, state_dir)
    for command in (["submit", "--aggregator", aggregator.url, "--campaign", "x", "--value", "a"], ["ledger"]):
        done = deniable(*command, "--state-dir", str(state_dir))
        assert done.returncode == 1, done
        assert "Traceback" not in done.stderr and "damaged" in done.stderr
