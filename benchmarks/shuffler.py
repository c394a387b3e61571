"""The shuffler's throughput through one batch of 10⁵ reports, and the latency it adds, over loopback.

    .venv/bin/python benchmarks/shuffler.py [--reports N] [--quick]

A real ``deniable serve`` (2 workers) and a real ``deniable shuffle`` (1 worker, forwarding every 0.2 s),
both with 16 MiB bodies (a batch of 10⁵ binary reports is 8.3 MB), on free loopback ports; a binary-rr
shuffled campaign whose threshold is N (default 10⁵), so exactly one batch of N forms. This process
pre-seals N devices' nested envelopes (not timed), then:

1. **Uploads**: posts them to the shuffler in requests of 1,000 from 2 keep-alive connections and waits for
   every reply (each committed, fsync'd): acknowledged reports per second.
2. **Forwarding**: from the last acknowledgement to the aggregator's estimate showing n = N: the shuffle
   of N (Fisher–Yates from ``secrets``), the signature, one POST, the aggregator's N decryptions and one
   insert transaction. End-to-end reports/s = N / (upload time + forwarding time).
3. **Added latency**: a device's request to the shuffler against the same-size request to the aggregator
   (median of 200 single-envelope POSTs each, local campaigns of the same question), and the delay from
   the threshold being reached to the batch being stored (the forwarding time above, at N). A report also
   waits for its batch to fill: N / (arrival rate) seconds, which no implementation can shorten.

Prints the figures with the machine's load average. No goal is asserted (benchmarks print, tests test).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from deniable.aggregator.harness import ServerProcess, ShufflerProcess
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.shuffle import seal_shuffled

BODY = 16 * 1024 * 1024


def _conn(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=600)


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> dict[str, Any]:
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"POST {path} answered {response.status}: {data[:300]!r}")
    result: dict[str, Any] = json.loads(data)
    return result


def _seal_all(config: CampaignConfig, n: int) -> list[bytes]:
    assert config.shuffler is not None and config.padded_length is not None
    mechanism = config.build_mechanism()
    envelopes = [
        seal_shuffled(
            config.make_payload(mechanism.randomize(i % 2)), campaign_id=config.id,
            aggregator_key=config.public_key_bytes, padded_length=config.padded_length,
            shuffler_key=config.shuffler.public_key_bytes, device_secret=secrets.token_bytes(32),
        ).to_json()
        for i in range(n)
    ]  # fmt: skip
    return [json.dumps({"reports": envelopes[i : i + 1000]}).encode() for i in range(0, n, 1000)]


def _upload(url: str, path: str, bodies: list[bytes]) -> None:
    conn = _conn(url)
    for body in bodies:
        result = _post(conn, path, body)
        assert result["accepted"] == len(json.loads(body)["reports"]), result
    conn.close()


def _median_ms(url: str, path: str, envelopes: list[dict[str, Any]]) -> float:
    """Median milliseconds of one POST per envelope (each a new report) on one keep-alive connection."""
    conn = _conn(url)
    times = []
    for envelope in envelopes:
        t0 = time.perf_counter()
        _post(conn, path, json.dumps({"reports": [envelope]}).encode())
        times.append(time.perf_counter() - t0)
    conn.close()
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="20,000 reports")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.reports
    with tempfile.TemporaryDirectory() as tmp:
        aggregator = ServerProcess(Path(tmp) / "agg", workers=2, extra_args=("--max-body-bytes", str(BODY)))
        aggregator.start()
        shuffler = ShufflerProcess(Path(tmp) / "shuf", upstream=aggregator.url, interval=0.2,
                                   extra_args=("--upstream-max-body", str(BODY)))  # fmt: skip
        shuffler.start()
        try:
            body = aggregator.call("POST", "/api/v1/campaigns", role="admin", body={
                "id": "bench", "question": "Q?", "categories": ["no", "yes"], "epsilon": 4.0, "trust_model": "shuffled",
                "delta": 1e-6, "shuffler": shuffler.shuffler_object(n),
            })  # fmt: skip
            config = CampaignConfig.from_json(body)
            print(f"sealing {n:,} nested envelopes (not timed) ...", flush=True)
            bodies = _seal_all(config, n)
            path = "/api/v1/campaigns/bench/reports"
            t0 = time.perf_counter()
            threads = [threading.Thread(target=_upload, args=(shuffler.url, path, bodies[i::2])) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            t_upload = time.perf_counter() - t0
            t1 = time.perf_counter()
            while True:
                estimate = aggregator.call("GET", "/api/v1/campaigns/bench/estimate", role="analyst")
                if estimate["n"] >= n:
                    break
                time.sleep(0.05)
            t_forward = time.perf_counter() - t1
            privacy = estimate["privacy"]
            # added request latency: one envelope to the shuffler against one to the aggregator
            local = aggregator.call("POST", "/api/v1/campaigns", role="admin", body={
                "id": "bench-local", "question": "Q?", "categories": ["no", "yes"], "epsilon": 4.0})  # fmt: skip
            local_config = CampaignConfig.from_json(local)
            local_envelopes = [
                local_config.seal(local_config.make_payload(1), device_secret=secrets.token_bytes(32)).to_json()
                for _ in range(200)
            ]
            shuffled_envelopes = json.loads(_seal_all(config, 200)[0])["reports"]
            shuffler_ms = _median_ms(shuffler.url, path, shuffled_envelopes)
            aggregator_ms = _median_ms(aggregator.url, "/api/v1/campaigns/bench-local/reports", local_envelopes)
        finally:
            shuffler.stop()
            aggregator.stop()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)")
    print(f"one batch of {n:,} binary-rr reports (ε₀ = 4, δ = 1e-6) through deniable shuffle:")
    print(f"  uploads acknowledged by the shuffler : {n / t_upload:10,.0f} reports/s ({t_upload:.1f} s, 2 connections, 1,000 per request)")  # noqa: E501
    print(f"  forwarding (shuffle, sign, POST, the aggregator's decrypt + store): {t_forward:.2f} s = {n / t_forward:,.0f} reports/s")  # noqa: E501
    print(f"  end to end                          : {n / (t_upload + t_forward):10,.0f} reports/s")
    print(f"  central ε of the batch at the aggregator: {privacy['epsilon']:.4f} ({privacy['method']}), ε₀ = 4")
    print("added latency:")
    print(f"  one-envelope POST of a new report: shuffler {shuffler_ms:.1f} ms vs aggregator {aggregator_ms:.1f} ms "
          f"(local campaign), median of 200: +{shuffler_ms - aggregator_ms:.1f} ms per request")
    print(f"  threshold reached -> batch stored at the aggregator: {t_forward:.2f} s at n = {n:,} "
          "(plus the forwarder's interval, 0.2 s here)")
    print("  and the wait for the batch to fill: n / arrival rate (the price of hiding among n)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
