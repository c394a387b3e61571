"""Client durability: a device killed with SIGKILL mid-flush delivers every queued report exactly once.

One device (``deniable.client.Client`` over a state dir) answers :data:`CAMPAIGNS` campaigns of the real
server (ε = 0.5 each, within the default lifetime budget of 10); the reports wait in its outbox. A real
subprocess then opens the same state dir and flushes, and is SIGKILLed by the test at seeded points during
the flush: right after the aggregator has answered a batch (the report is stored on the server) and before
the client could settle it in its outbox, the worst moment, since the client must then resend a report the
server already holds. The process is restarted on the same state dir until a flush completes. Afterwards
every campaign holds exactly the one report the device sealed for it (same report id, ``n`` = 1), the
outbox is empty, nothing was rejected, and at least one resend was answered ``duplicate`` (the
killed-before-settle case really happened).
"""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path
from typing import Any

import pytest
from support.faulty import FaultyTransport, Request
from support.server import RunningServer

from deniable.aggregator.api.app import DATABASE_NAME
from deniable.aggregator.store import Store
from deniable.client import Client, HTTPTransport, Response

SEED = 4242
CAMPAIGNS = 16
#: How many batches each killed run gets answered before its SIGKILL (seeded, in this range).
KILL_AFTER_BATCHES = (1, 4)
KILLED_RUNS = 3
#: Seconds the child lingers between the aggregator's answer and settling it (the kill lands here).
LINGER = 0.3

pytestmark = pytest.mark.slow


def flush_in_child(url: str, state_dir: str, conn: Any, linger: float) -> None:
    """A device process: open the state dir, flush the outbox (batch size 1), report the result."""
    def report_then_linger(request: Request, response: Response) -> None:  # the kill lands in the linger
        conn.send(("answered", request.path, response.status))
        time.sleep(linger)

    link = FaultyTransport(HTTPTransport(url, timeout=10.0), after_post=report_then_linger)
    client = Client(url, state_dir, transport=link, batch_size=1)
    result = client.deliver()
    conn.send(("done", result.delivered, result.accepted, result.duplicate, result.rejected, result.pending))
    client.close()


def _run_child(url: str, state_dir: Path, *, kill_after: int | None, linger: float) -> tuple[Any, ...] | None:
    """Run one flush in a subprocess; SIGKILL it after ``kill_after`` answered batches (None: let it end)."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=flush_in_child, args=(url, str(state_dir), child, linger))
    process.start()
    answered = 0
    done: tuple[Any, ...] | None = None
    try:
        while done is None:
            assert parent.poll(30), "the flushing client went silent"
            message = parent.recv()
            if message[0] == "done":
                done = message
            else:
                assert message[2] == 200, message
                answered += 1
                if kill_after is not None and answered >= kill_after:
                    process.kill()  # SIGKILL: no cleanup, no atexit, mid-flush
                    break
    finally:
        process.join(30)
    if kill_after is not None:
        assert process.exitcode == -9, f"the client was not killed mid-flush (exit {process.exitcode})"
    else:
        assert process.exitcode == 0
    return done


def test_a_client_killed_mid_flush_delivers_every_report_exactly_once(
    fresh_aggregator: RunningServer, tmp_path: Path
) -> None:
    server = fresh_aggregator
    ids = [f"durable-{i:02d}" for i in range(CAMPAIGNS)]
    for campaign_id in ids:
        server.create_campaign(id=campaign_id, question="Durable?", categories=["no", "yes"], epsilon=0.5)
    state_dir = tmp_path / "device"
    with Client(server.url, state_dir) as device:
        receipts = {campaign_id: device.submit(campaign_id, "yes").report_id for campaign_id in ids}
        assert len(device.pending()) == CAMPAIGNS

    schedule = random.Random(SEED)
    for _ in range(KILLED_RUNS):
        _run_child(server.url, state_dir, kill_after=schedule.randint(*KILL_AFTER_BATCHES), linger=LINGER)
    done = _run_child(server.url, state_dir, kill_after=None, linger=0.0)
    assert done is not None
    _, delivered, _accepted, duplicate, rejected, pending = done
    assert pending == 0 and rejected == 0
    assert duplicate >= 1, "no resend of an already stored report happened: the kill missed the window"

    with Client(server.url, state_dir) as device:
        assert len(device.pending()) == 0
        assert device.rejections() == []
        assert device.flush() == 0  # nothing left to send
    store = Store(server.data_dir / DATABASE_NAME)
    try:
        for campaign_id in ids:
            stored = [report_id for report_id, _, _ in store.iter_reports(campaign_id)]
            assert stored == [receipts[campaign_id]], campaign_id
            assert server.estimate(campaign_id)["n"] == 1
    finally:
        store.close()
    stored_total = sum(server.estimate(campaign_id)["n"] for campaign_id in ids)
    print(
        f"\nclient durability: {KILLED_RUNS} SIGKILLs mid-flush, {CAMPAIGNS} queued reports, "
        f"{stored_total} stored once each; the last run delivered {delivered} ({duplicate} as duplicates)"
    )
