"""Crash durability of the aggregator: SIGKILL the real server mid-upload, restart it, count everything.

Scenario (seeded, bounded, about 20 s on 2 cores):

1. ``deniable serve`` (gunicorn, 2 workers) on a fresh data dir; one GRR campaign (k = 4) grouped by
   ``shard``.
2. :data:`UPLOADERS` client processes (``multiprocessing``, spawn) each make sealed envelopes from their own
   seeded simulated devices (``support.reports.simulate_envelopes``, the shared wire-format code) and post
   them in small batches with the device client's HTTP transport, retrying a batch (same envelopes, same
   report ids) after any connection error or 5xx until every report in it is ``accepted`` or ``duplicate``.
   They record every reply of every attempt, and keep uploading until told to stop.
3. :data:`KILLS` times, at a seeded random moment, the whole process group (gunicorn master and workers)
   gets SIGKILL, like a power cut of the process tree, and is restarted on the same data dir and port.
   Uploads must have progressed between consecutive kills (the kills hit a busy server).
4. The uploaders stop, finish their last batch, and the checks run:

   * every generated report was acknowledged (all were eventually delivered), and no report id was ever
     answered ``accepted`` twice (a second ``accepted`` would mean an acknowledged report was lost, or a
     report was stored twice);
   * the stored report ids are exactly the generated ones (nothing lost, nothing extra), the estimate's
     ``n`` equals their number, and each shard's ``n`` equals what that uploader generated;
   * ``deniable verify`` recounts every tally from the stored reports and finds them equal;
   * an independent recount from the client side (decrypting every generated envelope with the campaign
     key and tallying with the mechanism) gives exactly the server's estimate.

It runs over SQLite and over PostgreSQL (``backend_server_factory``; the kill takes down the instance, the
database server keeps running, and the killed instance's open transactions are rolled back by it).
"""

from __future__ import annotations

import json
import multiprocessing
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.reports import simulate_envelopes
from support.server import RunningServer

from deniable.client import HTTPTransport, TransportError
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, open_envelope

SEED = 20261129
KILLS = 6
UPLOADERS = 3
BATCH = 12
CAMPAIGN = "crash"
#: Seconds between a (re)start becoming healthy and the next SIGKILL: uniform in this range.
KILL_AFTER = (0.3, 1.2)
#: No uploader may run past this many seconds (a hang fails the test instead of blocking CI).
UPLOAD_DEADLINE = 90.0

pytestmark = pytest.mark.slow


def upload_until_stopped(
    index: int, url: str, config_json: dict[str, Any], stop: Any, acked: Any, out_path: str
) -> None:
    """One client process: seeded envelopes in batches, each batch retried until fully acknowledged.

    Writes ``{"envelopes": [...], "replies": {report_id: [status, ...]}, "errors": n, "bad": [...]}`` to
    ``out_path``. ``acked`` (a shared counter) counts acknowledged reports, for the parent's progress checks.
    """
    config = CampaignConfig.from_json(config_json)
    rng = np.random.default_rng([SEED, index])
    transport = HTTPTransport(url, timeout=10.0)
    path = f"/api/v1/campaigns/{config.id}/reports"
    sent: list[dict[str, Any]] = []
    replies: dict[str, list[str]] = {}
    errors = 0
    bad: list[str] = []
    deadline = time.monotonic() + UPLOAD_DEADLINE
    while not stop.is_set() and time.monotonic() < deadline:
        values = rng.integers(0, config.k, size=BATCH).tolist()
        batch = simulate_envelopes(config, values, rng=rng, groups=[{"shard": f"s{index}"}] * BATCH)
        sent.extend(batch)
        pending = batch
        while pending and time.monotonic() < deadline:
            try:
                response = transport.request("POST", path, {"reports": pending})
            except TransportError:
                errors += 1
                time.sleep(0.02)
                continue
            if response.status >= 500:
                errors += 1
                bad.append(f"HTTP {response.status}: {response.body}")
                time.sleep(0.02)
                continue
            if response.status != 200:
                bad.append(f"HTTP {response.status}: {response.body}")
                break
            for result in response.body["results"]:
                replies.setdefault(result["report_id"], []).append(result["status"])
            settled = {r["report_id"] for r in response.body["results"] if r["status"] in ("accepted", "duplicate")}
            with acked.get_lock():
                acked.value += sum(e["report_id"] in settled for e in pending)
            pending = [e for e in pending if e["report_id"] not in settled]
    Path(out_path).write_text(json.dumps({"envelopes": sent, "replies": replies, "errors": errors, "bad": bad}))


def _wait_for_progress(acked: Any, since: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while acked.value <= since:
        assert time.monotonic() < deadline, "the uploaders made no progress after a restart"
        time.sleep(0.02)


def test_acknowledged_reports_survive_repeated_sigkill(backend_server_factory: Any, tmp_path: Path) -> None:
    server: RunningServer = backend_server_factory(name="crash", workers=2, threads=4)
    config = CampaignConfig.from_json(
        server.create_campaign(
            id=CAMPAIGN, question="Which one?", categories=["a", "b", "c", "d"], epsilon=1.5, mechanism="grr",
            group_fields=["shard"],
        )
    )  # fmt: skip
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    acked = context.Value("q", 0)
    outputs = [tmp_path / f"uploader-{i}.json" for i in range(UPLOADERS)]
    uploaders = [
        context.Process(
            target=upload_until_stopped, args=(i, server.url, config.to_json(), stop, acked, str(outputs[i]))
        )
        for i in range(UPLOADERS)
    ]
    schedule = random.Random(SEED)
    started = time.monotonic()
    try:
        for process in uploaders:
            process.start()
        _wait_for_progress(acked, 0, timeout=30.0)
        kills = 0
        for _ in range(KILLS):
            before = acked.value
            time.sleep(schedule.uniform(*KILL_AFTER))
            _wait_for_progress(acked, before)
            server.kill()
            kills += 1
            time.sleep(schedule.uniform(0.0, 0.3))  # clients meet a closed port for a moment
            server.restart()
        _wait_for_progress(acked, acked.value)
    finally:
        stop.set()
        for process in uploaders:
            process.join(UPLOAD_DEADLINE + 30)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in uploaders), [p.exitcode for p in uploaders]
    runs = [json.loads(path.read_text()) for path in outputs]
    assert all(run["bad"] == [] for run in runs), [run["bad"][:3] for run in runs]

    envelopes = [e for run in runs for e in run["envelopes"]]
    generated = [e["report_id"] for e in envelopes]
    assert len(set(generated)) == len(generated)
    replies: dict[str, list[str]] = {}
    for run in runs:
        replies.update(run["replies"])
    acknowledged = {rid for rid, statuses in replies.items() if {"accepted", "duplicate"} & set(statuses)}
    assert acknowledged == set(generated), "some report was never acknowledged"
    accepted_twice = [rid for rid, statuses in replies.items() if statuses.count("accepted") > 1]
    assert accepted_twice == [], "a report was accepted twice: an acknowledged report was lost or doubled"
    assert not any("rejected" in statuses for statuses in replies.values())

    estimate = server.estimate(CAMPAIGN)
    by_shard = server.estimate(CAMPAIGN, group_by="shard")
    store = server.open_store()
    stored = [report_id for report_id, _, _ in store.iter_reports(CAMPAIGN)]
    store.close()
    assert len(stored) == len(set(stored)), "a report id is stored twice"
    assert set(stored) == set(generated), "stored reports differ from the acknowledged ones"
    assert estimate["n"] == len(generated)
    shard_n = {value: group["n"] for value, group in by_shard["groups"].items()}
    assert shard_n == {f"s{i}": len(run["envelopes"]) for i, run in enumerate(runs)}

    verify = subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", "verify", *server.cli_args()],
        capture_output=True, text=True, timeout=120, env=server.cli_env(),
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"ok        {CAMPAIGN}: {len(generated)} reports" in verify.stdout

    private_key = server.private_key(CAMPAIGN)
    mechanism = config.build_mechanism()
    reports = [
        config.decode_payload(open_envelope(Envelope.from_json(e), campaign_id=CAMPAIGN, private_key=private_key))[0]
        for e in envelopes
    ]
    recount = mechanism.estimate(reports)
    assert [c["count"] for c in estimate["categories"]] == pytest.approx(list(recount.counts), rel=1e-12, abs=1e-9)

    errors = sum(run["errors"] for run in runs)
    lost_replies = sum(Counter(statuses)["duplicate"] for statuses in replies.values())
    assert errors >= kills, "the kills never interrupted an upload"
    print(
        f"\ncrash durability: {kills} SIGKILLs survived, {len(generated)} reports acknowledged and stored once, "
        f"{errors} failed attempts retried, {lost_replies} duplicate answers to retries, 0 lost, "
        f"{time.monotonic() - started:.1f} s"
    )
