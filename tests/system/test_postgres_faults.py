"""Faults of several aggregator instances over one PostgreSQL database, with the real server processes.

* SIGKILL one instance under load while another goes on: clients fail over to the live instance; the
  killed one's open transactions are rolled back by PostgreSQL; after its restart both serve again.
* Stop and restart PostgreSQL under load (a throwaway cluster of this test's own, from initdb/pg_ctl: the
  machine's shared server is never restarted): while it is down the instances answer ``503
  store_unavailable`` with ``Retry-After`` (never a 500), and they reconnect by themselves after it is back;
  once with a fast shutdown, once with an immediate one (a crash: recovery from the WAL at the start).
* A TCP proxy between an instance and the database drops the connection mid-transaction: just before the
  COMMIT reaches the server (nothing is stored: the retry is accepted), and just after the server
  committed but before the instance heard (the retry is a duplicate: counted once).

Every scenario ends with the checks of :func:`support.uploaders.check_runs`: every report acknowledged,
none accepted twice, the stored reports exactly the generated ones, ``deniable verify`` equal, and the
client-side recount equal to the served estimate. The campaign is created on one instance and served by
all: its key is sealed in the database, no file is copied.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pytest
from support.faulty import FaultyTcpProxy
from support.postgres import Cluster, find_binaries
from support.reports import simulate_envelopes
from support.server import RunningServer, start_server
from support.uploaders import check_runs, upload_until_stopped, wait_for_progress

from deniable.shared.descriptor import CampaignConfig

pytestmark = pytest.mark.slow

SEED = 20261201
UPLOADERS = 2


def _instances(tmp_path: Path, database: str, count: int, **options: Any) -> list[RunningServer]:
    shared = {"kek": os.urandom(32).hex()}
    shared.update({f"{role}_token": f"{role}-{os.urandom(18).hex()}" for role in ("admin", "analyst", "issuer")})
    return [
        start_server(tmp_path / f"instance-{i}", database=database, workers=1, threads=4, **shared, **options)
        for i in range(count)
    ]


def _campaign(server: RunningServer, campaign_id: str) -> CampaignConfig:
    return CampaignConfig.from_json(
        server.create_campaign(
            id=campaign_id, question="Which one?", categories=["a", "b", "c", "d"], epsilon=1.5, mechanism="grr",
            group_fields=["shard"],
        )
    )  # fmt: skip


class _Load:
    """:data:`UPLOADERS` client processes posting to ``urls`` until :meth:`finish`."""

    def __init__(self, tmp_path: Path, urls: list[str], config: CampaignConfig) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.acked = context.Value("q", 0)
        self.outputs = [tmp_path / f"uploader-{i}.json" for i in range(UPLOADERS)]
        self.processes = [
            context.Process(
                target=upload_until_stopped,
                args=(i, urls, config.to_json(), self.stop, self.acked, str(self.outputs[i]), SEED),
            )
            for i in range(UPLOADERS)
        ]
        for process in self.processes:
            process.start()

    def finish(self) -> list[dict[str, Any]]:
        self.stop.set()
        for process in self.processes:
            process.join(180)
            if process.is_alive():
                process.kill()
        assert all(process.exitcode == 0 for process in self.processes), [p.exitcode for p in self.processes]
        return [json.loads(path.read_text()) for path in self.outputs]


def test_sigkill_of_one_instance_while_another_goes_on(tmp_path: Path, pg_url: str) -> None:
    a, b = _instances(tmp_path, pg_url, 2)
    try:
        config = _campaign(a, "kill-one")
        load = _Load(tmp_path, [a.url, b.url], config)
        try:
            wait_for_progress(load.acked, 0, timeout=60)
            schedule = random.Random(SEED)
            for _ in range(3):
                time.sleep(schedule.uniform(0.3, 1.0))
                a.kill()
                down = load.acked.value
                wait_for_progress(load.acked, down)  # the other instance goes on alone
                a.restart()
            wait_for_progress(load.acked, load.acked.value)
        finally:
            runs = load.finish()
        n = check_runs(runs, b, config)
        failures = sum(sum(run["failures"].values()) for run in runs)
        assert failures >= 3, "the kills never interrupted an upload"
        print(f"\nSIGKILL of one of two instances, 3 times: {n} reports stored once, {failures} attempts retried")
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def cluster() -> Any:
    """A throwaway PostgreSQL cluster this test may stop and start (never the machine's shared server)."""
    bindir = find_binaries()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the PostgreSQL binaries (initdb, pg_ctl) are required under CI=true")
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) to start a throwaway cluster")
    server = Cluster(bindir).start()
    try:
        yield server
    finally:
        server.destroy()


def test_postgres_stopped_and_restarted_under_load(tmp_path: Path, cluster: Cluster) -> None:
    a, b = _instances(tmp_path, cluster.url, 2)
    try:
        config = _campaign(a, "pg-restart")
        load = _Load(tmp_path, [a.url, b.url], config)
        try:
            wait_for_progress(load.acked, 0, timeout=60)
            for mode in ("fast", "immediate"):
                time.sleep(0.5)
                cluster.stop(mode)
                time.sleep(1.5)  # clients meet 503s
                cluster.start()
                wait_for_progress(load.acked, load.acked.value, timeout=60)  # the instances reconnect by themselves
        finally:
            runs = load.finish()
        n = check_runs(runs, a, config)
        failures: dict[str, int] = {}
        for run in runs:
            for key, count in run["failures"].items():
                failures[key] = failures.get(key, 0) + count
        assert failures.get("503 store_unavailable", 0) > 0, failures
        assert not any(key.startswith("500") for key in failures), failures
        for server in (a, b):
            assert "Traceback" not in server.logs(), server.logs()[-3000:]
        print(f"\nPostgreSQL stopped twice under load: {n} reports stored once; failed attempts {failures}")
    finally:
        a.stop()
        b.stop()


def _through(proxy: FaultyTcpProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_a_connection_dropped_mid_transaction_loses_nothing_and_counts_once(tmp_path: Path, pg_url: str) -> None:
    parts = urlsplit(pg_url)
    with FaultyTcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432)) as proxy:
        (server,) = _instances(tmp_path, _through(proxy, pg_url), 1)
        try:
            config = _campaign(server, "dropped")
            rng = np.random.default_rng(SEED)
            path = f"/api/v1/campaigns/{config.id}/reports"
            stored = 0
            for attempt, before in enumerate((True, False, True, False)):
                batch = simulate_envelopes(
                    config, rng.integers(0, 4, size=20).tolist(), rng=rng, groups=[{"shard": "s0"}] * 20
                )
                proxy.drop_on(b"COMMIT\x00", before=before)
                cut = server.post(path, json={"reports": batch})
                assert proxy.armed() == 0, "the batch's COMMIT never went through the proxy"
                assert cut.status_code == 503, cut.text
                assert cut.json()["error"]["code"] == "store_unavailable" and cut.headers["Retry-After"]
                again = server.post(path, json={"reports": batch}).json()
                # cut before the COMMIT: nothing was stored and the retry is accepted; cut after it: the
                # reports were stored though the instance never heard, and the retry finds them
                expected = {"accepted": 0 if not before else 20, "duplicate": 20 if not before else 0, "rejected": 0}
                assert {key: again[key] for key in expected} == expected, (attempt, again)
                stored += 20
                assert server.estimate(config.id)["n"] == stored
            assert proxy.drops == 4
            store = server.open_store()
            assert store.count_reports(config.id) == stored
            store.close()
            verify = subprocess.run(
                [sys.executable, "-m", "deniable.aggregator.cli", "verify", *server.cli_args()],
                capture_output=True, text=True, timeout=300, env=server.cli_env(),
            )  # fmt: skip
            assert verify.returncode == 0, verify.stdout + verify.stderr
        finally:
            server.stop()
