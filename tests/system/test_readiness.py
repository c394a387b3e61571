"""Health that tells the truth (issue 11 item 4): ``/healthz`` stays liveness, ``/readyz`` says whether the
service can take reports now and answers 503 with the reason.

Before: ``/healthz`` answered 200 with a corrupted database (while ``GET /campaigns/k1`` was a 500) and
on a full disk, and there was no readiness route. Faults are real where the machine allows: a database
file overwritten on disk, a free-disk floor above what the disk has, a damaged key file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from support.server import RunningServer

from deniable.aggregator.api.app import create_app
from deniable.aggregator.service import Service


def _campaign(server: RunningServer, cid: str) -> None:
    server.create_campaign(id=cid, question="q", categories=["a", "b"], epsilon=1.0)


def test_a_healthy_service_is_ready_and_each_probe_writes(aggregator: RunningServer) -> None:
    _campaign(aggregator, "ready-ok")
    response = aggregator.get("/readyz")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ready" and all(check["ok"] for check in body["checks"].values())
    assert set(body["checks"]) == {"database", "keys", "disk"}
    conn = sqlite3.connect(aggregator.data_dir / "deniable.sqlite3")
    try:
        first = conn.execute("SELECT probed_at FROM health_probe").fetchone()[0]
        assert aggregator.get("/readyz").status_code == 200
        assert conn.execute("SELECT probed_at FROM health_probe").fetchone()[0] >= first
    finally:
        conn.close()


def test_a_corrupted_database_is_live_but_not_ready(server_factory: Callable[..., RunningServer]) -> None:
    server = server_factory(name="corrupt", workers=1)
    _campaign(server, "k1")
    server.stop()
    database = server.data_dir / "deniable.sqlite3"
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'campaigns'").fetchone()[0]
    conn.close()
    with open(database, "r+b") as handle:  # overwrite the campaigns table's root page with garbage
        handle.seek((root - 1) * page_size)
        handle.write(b"\xa5" * page_size)
    server.restart()
    assert server.get("/healthz").status_code == 200  # liveness: the process serves, the file opens
    assert server.get("/api/v1/campaigns/k1").status_code == 500  # what the issue saw
    response = server.get("/readyz")
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["status"] == "not_ready" and body["checks"]["database"]["ok"] is False
    assert "malformed" in body["error"]["message"] and body["error"]["code"] == "not_ready"
    assert response.headers["Retry-After"] == "5"


def test_free_disk_below_the_floor_is_not_ready(server_factory: Callable[..., RunningServer]) -> None:
    server = server_factory(name="floor", workers=1, extra_args=("--min-free-disk", str(2**62)))
    assert server.get("/healthz").status_code == 200
    response = server.get("/readyz")
    assert response.status_code == 503
    disk = response.json()["checks"]["disk"]
    assert disk["ok"] is False and disk["min_free_bytes"] == 2**62 and disk["free_bytes"] < 2**62
    assert "below the floor" in response.json()["error"]["message"]


def test_an_unusable_key_is_not_ready_and_recovers(aggregator: RunningServer) -> None:
    _campaign(aggregator, "ready-key")
    path = aggregator.data_dir / "keys" / "ready-key.key"
    saved = path.read_bytes()
    path.write_bytes(saved[:7])
    try:
        response = aggregator.get("/readyz")
        assert response.status_code == 503
        assert "campaign key unavailable for 'ready-key'" in response.json()["error"]["message"]
        assert str(path) not in response.text
    finally:
        path.write_bytes(saved)
    assert aggregator.get("/readyz").status_code == 200


def test_a_database_that_takes_no_write_is_not_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app({"DATA_DIR": str(tmp_path), "ADMIN_TOKEN": "a" * 20, "ANALYST_TOKEN": "b" * 20})
    service: Service = app.extensions["deniable"]

    def failing() -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(service.store, "write_probe", failing)
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "does not take a write: database or disk is full" in response.get_json()["error"]["message"]
