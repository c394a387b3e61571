"""Client processes that keep uploading through faults, and the checks that nothing was lost or doubled.

:func:`upload_until_stopped` is one client (run it in a ``spawn`` process): seeded envelopes in batches,
each batch posted until every report in it is ``accepted`` or ``duplicate``, to the client's own instance
(``urls[index % len(urls)]``) and, after a connection error or a 5xx, to the next one (a client-side load
balancer over several instances).
It records every reply of every attempt and the status and error code of every failed attempt.

:func:`check_runs` then asserts, over all clients and the server's store: every generated report was
acknowledged; none was answered ``accepted`` twice (that would mean an acknowledged report lost or one
stored twice); nothing was rejected; the stored report ids are exactly the generated ones; each group's
``n`` is what its client generated; ``deniable verify`` finds every tally equal to a recount; a recount
from the client side (each envelope decrypted with the campaign key) equals the served estimate.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deniable.client import HTTPTransport, TransportError
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, open_envelope
from support.reports import simulate_envelopes
from support.server import RunningServer

__all__ = ["check_runs", "upload_until_stopped"]


def upload_until_stopped(
    index: int,
    urls: list[str],
    config_json: dict[str, Any],
    stop: Any,
    acked: Any,
    out_path: str,
    seed: int,
    batch: int = 12,
    deadline_s: float = 120.0,
) -> None:
    """One client process; writes ``{"envelopes", "replies", "errors", "failures", "bad"}`` to ``out_path``.

    ``failures`` counts failed attempts by ``"<status> <code>"`` (``"connection"`` for no answer); ``bad``
    lists answers that are neither 200 nor a 5xx (a client error would be a bug here). ``acked`` (a shared
    counter) counts acknowledged reports, for the parent's progress checks.
    """
    config = CampaignConfig.from_json(config_json)
    rng = np.random.default_rng([seed, index])
    transports = [HTTPTransport(url, timeout=10.0) for url in urls]
    path = f"/api/v1/campaigns/{config.id}/reports"
    sent: list[dict[str, Any]] = []
    replies: dict[str, list[str]] = {}
    failures: dict[str, int] = {}
    bad: list[str] = []
    turn = index % len(transports)
    deadline = time.monotonic() + deadline_s
    while not stop.is_set() and time.monotonic() < deadline:
        values = rng.integers(0, config.k, size=batch).tolist()
        envelopes = simulate_envelopes(config, values, rng=rng, groups=[{"shard": f"s{index}"}] * batch)
        sent.extend(envelopes)
        pending = envelopes
        turn = index % len(transports)  # each batch starts at the client's own instance (back after a restart)
        while pending and time.monotonic() < deadline:
            try:
                response = transports[turn].request("POST", path, {"reports": pending})
            except TransportError:
                failures["connection"] = failures.get("connection", 0) + 1
                turn = (turn + 1) % len(transports)
                time.sleep(0.02)
                continue
            if response.status >= 500:
                code = (response.body or {}).get("error", {}).get("code") if isinstance(response.body, dict) else None
                key = f"{response.status} {code}"
                failures[key] = failures.get(key, 0) + 1
                turn = (turn + 1) % len(transports)
                time.sleep(0.05)
                continue
            if response.status != 200:
                bad.append(f"HTTP {response.status}: {str(response.body)[:300]}")
                break
            for result in response.body["results"]:
                replies.setdefault(result["report_id"], []).append(result["status"])
            settled = {r["report_id"] for r in response.body["results"] if r["status"] in ("accepted", "duplicate")}
            with acked.get_lock():
                acked.value += sum(e["report_id"] in settled for e in pending)
            pending = [e for e in pending if e["report_id"] not in settled]
    Path(out_path).write_text(
        json.dumps({"envelopes": sent, "replies": replies, "failures": failures, "bad": bad})
    )


def wait_for_progress(acked: Any, since: int, timeout: float = 30.0) -> None:
    """Wait until more than ``since`` reports are acknowledged."""
    deadline = time.monotonic() + timeout
    while acked.value <= since:
        assert time.monotonic() < deadline, "the uploaders made no progress"
        time.sleep(0.02)


def check_runs(runs: list[dict[str, Any]], server: RunningServer, config: CampaignConfig) -> int:
    """The checks of the module docstring; returns the number of reports."""
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

    estimate = server.estimate(config.id)
    by_shard = server.estimate(config.id, group_by="shard")
    store = server.open_store()
    stored = [report_id for report_id, _, _ in store.iter_reports(config.id)]
    store.close()
    assert len(stored) == len(set(stored)), "a report id is stored twice"
    assert set(stored) == set(generated), "stored reports differ from the acknowledged ones"
    assert estimate["n"] == len(generated)
    shard_n = {value: group["n"] for value, group in by_shard["groups"].items()}
    assert shard_n == {f"s{i}": len(run["envelopes"]) for i, run in enumerate(runs) if run["envelopes"]}

    verify = subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", "verify", *server.cli_args()],
        capture_output=True, text=True, timeout=300, env=server.cli_env(),
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"ok        {config.id}: {len(generated)} reports" in verify.stdout

    private_key = server.private_key(config.id)
    reports = [
        config.decode_payload(open_envelope(Envelope.from_json(e), campaign_id=config.id, private_key=private_key))[0]
        for e in envelopes
    ]
    recount = config.build_mechanism().estimate(reports)
    assert [c["count"] for c in estimate["categories"]] == pytest.approx(list(recount.counts), rel=1e-12, abs=1e-9)
    return len(generated)
