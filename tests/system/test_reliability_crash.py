"""Crash durability of the aggregator: SIGKILL the real server mid-upload, restart it, count everything.

Scenario (seeded, bounded, about 20 s on 2 cores):

1. ``deniable serve`` (gunicorn, 2 workers) on a fresh data dir; one GRR campaign (k = 4) grouped by
   ``shard``.
2. :data:`UPLOADERS` client processes (``multiprocessing``, spawn; ``support.uploaders.upload_until_stopped``)
   each make sealed envelopes from their own seeded simulated devices (``support.reports.simulate_envelopes``,
   the shared wire-format code) and post them in small batches with the device client's HTTP transport,
   retrying a batch (same envelopes, same report ids) after any connection error or 5xx until every report
   in it is ``accepted`` or ``duplicate``.
   They record every reply of every attempt, and keep uploading until told to stop.
3. :data:`KILLS` times, at a seeded random moment, the whole process group (gunicorn master and workers)
   gets SIGKILL, like a power cut of the process tree, and is restarted on the same data dir and port.
   Uploads must have progressed between consecutive kills (the kills hit a busy server).
4. The uploaders stop, finish their last batch, no attempt was answered with a 5xx, and the checks of
   ``support.uploaders.check_runs`` run:

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
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.server import RunningServer
from support.uploaders import check_runs, upload_until_stopped, wait_for_progress

from deniable.shared.descriptor import CampaignConfig

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
            target=upload_until_stopped,
            args=(i, [server.url], config.to_json(), stop, acked, str(outputs[i]), SEED),
            kwargs={"batch": BATCH, "deadline_s": UPLOAD_DEADLINE},
        )
        for i in range(UPLOADERS)
    ]
    schedule = random.Random(SEED)
    started = time.monotonic()
    try:
        for process in uploaders:
            process.start()
        wait_for_progress(acked, 0, timeout=30.0)
        kills = 0
        for _ in range(KILLS):
            before = acked.value
            time.sleep(schedule.uniform(*KILL_AFTER))
            wait_for_progress(acked, before, timeout=15.0)
            server.kill()
            kills += 1
            time.sleep(schedule.uniform(0.0, 0.3))  # clients meet a closed port for a moment
            server.restart()
        wait_for_progress(acked, acked.value, timeout=15.0)
    finally:
        stop.set()
        for process in uploaders:
            process.join(UPLOAD_DEADLINE + 30)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in uploaders), [p.exitcode for p in uploaders]
    runs = [json.loads(path.read_text()) for path in outputs]
    # A kill only ever costs a connection: no attempt may be answered with a 5xx (check_runs allows them).
    assert not [key for run in runs for key in run["failures"] if key != "connection"], [r["failures"] for r in runs]
    n = check_runs(runs, server, config)

    replies: dict[str, list[str]] = {}
    for run in runs:
        replies.update(run["replies"])
    errors = sum(sum(run["failures"].values()) for run in runs)
    lost_replies = sum(Counter(statuses)["duplicate"] for statuses in replies.values())
    assert errors >= kills, "the kills never interrupted an upload"
    print(
        f"\ncrash durability: {kills} SIGKILLs survived, {n} reports acknowledged and stored once, "
        f"{errors} failed attempts retried, {lost_replies} duplicate answers to retries, 0 lost, "
        f"{time.monotonic() - started:.1f} s"
    )
