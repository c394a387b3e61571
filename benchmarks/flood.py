"""Forged-device flood beside honest devices, against the real ``deniable serve`` with its default limits.

    .venv/bin/python benchmarks/flood.py [--seconds S] [--honest 4]

Issue 12 item 2: one client posted 1,000 forged devices, all answering "yes" unrandomized, in 0.2 s. Here a
flooder posts batches of 100 freshly sealed forged devices as fast as it can from one address, while
``--honest`` devices (each its own address, given to the server as X-Forwarded-For from loopback, which it
trusts) post batches of 20 at 40 reports/s each, below the per-address limit. Printed per role: reports
sent, accepted, answers 429, accepted/s, and the honest requests' p50/p99 latency; then the flood's
accepted reports m against what the token buckets allow (burst + rate × seconds) and the bound it puts on
the estimate: m·(1−q)/(p−q) for this campaign's mechanism (docs/admission-tokens.md). A campaign with
admission tokens admits none of them (tests/system/test_admission_service.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from deniable.aggregator.harness import ServerProcess
from deniable.shared import limits
from deniable.shared.descriptor import CampaignConfig


def post(port: int, path: str, body: bytes, address: str, token: str | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "X-Forwarded-For": address}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


def sealed(config: CampaignConfig, reports: list[int], rng: np.random.Generator) -> list[dict[str, Any]]:
    return [config.seal(config.make_payload(r, {}), device_secret=rng.bytes(32)).to_json() for r in reports]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--honest", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        # the default limits (no simulation env): they are what this benchmark measures
        server = ServerProcess(data, simulation=False, extra_args=("--trusted-proxies", "127.0.0.1"),
                               log_path=Path(tmp) / "serve.log")  # fmt: skip
        server.start()
        port, admin = server.port, server.admin_token
        try:
            status, created = post(port, "/api/v1/campaigns", json.dumps(
                {"id": "flood", "question": "yes?", "categories": ["no", "yes"], "epsilon": 1.0}).encode(),
                "127.0.0.1", admin)  # fmt: skip
            assert status == 201, created
            config = CampaignConfig.from_json(created)
            mechanism = config.build_mechanism()
            honest_rate, batch = 40.0, 20
            per_honest = int(honest_rate * args.seconds) + batch
            print(f"sealing {per_honest * args.honest:,} honest and 8,000 forged envelopes ...")
            honest = [sealed(config, [int(x) for x in mechanism.simulate(rng.integers(0, 2, per_honest), rng=rng)],
                             rng) for _ in range(args.honest)]
            forged = sealed(config, [1] * 8_000, rng)  # every forged device says "yes", unrandomized
            stats: dict[str, dict[str, Any]] = {}
            stop = time.monotonic() + args.seconds

            def run(role: str, address: str, envelopes: list[dict[str, Any]], size: int, pace: float) -> None:
                record = stats[role] = {"sent": 0, "accepted": 0, "429": 0, "failed": 0, "latency": []}
                for start in range(0, len(envelopes), size):
                    if time.monotonic() >= stop:
                        break
                    body = json.dumps({"reports": envelopes[start : start + size]}).encode()
                    began = time.perf_counter()
                    code, reply = post(port, "/api/v1/campaigns/flood/reports", body, address)
                    record["latency"].append(time.perf_counter() - began)
                    record["sent"] += size
                    if code == 200:
                        record["accepted"] += reply["accepted"]
                    elif code == 429:
                        record["429"] += 1
                    else:
                        record["failed"] += 1
                    if pace:
                        time.sleep(max(0.0, pace - (time.perf_counter() - began)))

            threads = [threading.Thread(target=run, args=("flood", "198.51.100.7", forged, 100, 0.0))]
            threads += [threading.Thread(target=run, args=(f"honest {i}", f"198.51.100.{20 + i}", honest[i], batch,
                                                           batch / honest_rate)) for i in range(args.honest)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            server.stop()
    print(f"{'role':10} {'sent':>7} {'accepted':>9} {'429s':>5} {'failed':>6} {'accepted/s':>10} {'p50 ms':>7} "
          f"{'p99 ms':>7}")
    for role, record in stats.items():
        lat = sorted(record["latency"]) or [0.0]
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(f"{role:10} {record['sent']:>7,} {record['accepted']:>9,} {record['429']:>5} {record['failed']:>6} "
              f"{record['accepted'] / args.seconds:>10,.0f} {statistics.median(lat) * 1e3:>7.1f} {p99 * 1e3:>7.1f}")
    m = stats["flood"]["accepted"]
    allowed = limits.INGEST_BURST_DEFAULT + limits.INGEST_RATE_DEFAULT * args.seconds
    shift = m * (1 - mechanism.q_star) / mechanism.gap
    print(f"flood: {m:,} forged reports accepted in {args.seconds:g} s (the buckets allow at most {allowed:,.0f}: "
          f"burst {limits.INGEST_BURST_DEFAULT:,} + {limits.INGEST_RATE_DEFAULT:g}/s); they can move the 'yes' "
          f"count by at most m·(1−q)/(p−q) = {shift:,.0f}; honest devices: "
          f"{sum(r['failed'] + r['429'] for k, r in stats.items() if k != 'flood')} refused or failed requests")


if __name__ == "__main__":
    main()
