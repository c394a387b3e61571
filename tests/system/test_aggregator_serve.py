"""The operator commands: ``serve`` configured by environment, bad flags, ``verify``, ``tokens``,
``campaigns``; and a SIGKILL after acknowledged uploads loses nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import requests
from support.reports import simulate_envelopes, upload
from support.server import RunningServer, free_port

CLI = [sys.executable, "-m", "deniable.aggregator.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_serve_takes_its_configuration_from_deniable_env_vars(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DENIABLE_DATA_DIR": str(tmp_path / "env-data"),
        "DENIABLE_HOST": "127.0.0.1",
        "DENIABLE_PORT": str(port),
        "DENIABLE_WORKERS": "1",
        "DENIABLE_ADMIN_TOKEN": "env-admin-token-0123456789",
        "DENIABLE_ANALYST_TOKEN": "env-analyst-token-0123456789",
    }
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen([*CLI, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    try:
        deadline, status = time.monotonic() + 30, None
        while time.monotonic() < deadline and status != 200:
            try:
                status = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code
            except requests.RequestException:
                time.sleep(0.05)
        assert status == 200, (tmp_path / "serve.log").read_text()
        listed = requests.get(f"http://127.0.0.1:{port}/api/v1/campaigns", timeout=5,
                              headers={"Authorization": "Bearer env-analyst-token-0123456789"})  # fmt: skip
        assert listed.status_code == 200
        assert (tmp_path / "env-data" / "deniable.sqlite3").exists()
        assert not (tmp_path / "env-data" / "tokens" / "admin.token").exists()  # given tokens are not stored
    finally:
        process.terminate()
        assert process.wait(30) == 0
    log_text = (tmp_path / "serve.log").read_text()
    assert "admin token: from DENIABLE_ADMIN_TOKEN" in log_text and "env-admin-token" not in log_text


def test_bad_serve_flags_are_refused_with_a_message(tmp_path: Path) -> None:
    for args, fragment in [
        (["--port", "0"], "--port must be in 1..65535"),
        (["--workers", "0"], "--workers and --threads must be in 1..64"),
        (["--max-body-bytes", "10"], "--max-body-bytes must be at least 1024"),
    ]:
        result = run("serve", "--data-dir", str(tmp_path / "d"), *args)
        assert result.returncode != 0 and fragment in result.stderr
    result = run("serve", "--data-dir", str(tmp_path / "d"), env={"DENIABLE_PORT": "eighty"})
    assert result.returncode != 0 and "DENIABLE_PORT must be an integer" in result.stderr


def test_admin_commands_on_a_data_dir(fresh_aggregator: RunningServer, tmp_path: Path) -> None:
    server = fresh_aggregator
    server.create_campaign(id="cmd-a", question="q", categories=["a", "b"], epsilon=1.0)
    listing = run("campaigns", "--data-dir", str(server.data_dir))
    assert listing.returncode == 0 and "cmd-a" in listing.stdout and "local" in listing.stdout
    tokens = run("tokens", "--data-dir", str(server.data_dir))
    assert tokens.returncode == 0 and "admin.token" in tokens.stdout and server.admin_token not in tokens.stdout
    missing = run("verify", "--data-dir", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and "no aggregator database" in missing.stderr


def test_acknowledged_reports_survive_sigkill(fresh_aggregator: RunningServer) -> None:
    server = fresh_aggregator
    config = server.create_campaign(id="crash-1", question="q", categories=["a", "b", "c"], epsilon=1.0)
    rng = np.random.default_rng(5)
    envelopes = simulate_envelopes(config, rng.integers(0, 3, 1500), rng=rng)
    assert upload(server, "crash-1", envelopes[:1000], batch_size=250)["accepted"] == 1000
    server.kill()  # no graceful shutdown: master and workers die at once
    server.restart()
    retried = upload(server, "crash-1", envelopes, batch_size=500)  # the client retries everything
    assert retried == {"accepted": 500, "duplicate": 1000, "rejected": 0}
    assert server.estimate("crash-1")["n"] == 1500
    server.stop()
    verify = run("verify", "--data-dir", str(server.data_dir))
    assert verify.returncode == 0 and "crash-1: 1500 reports" in verify.stdout
