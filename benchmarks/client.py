"""Device client benchmark: per-report cost on the device, and ``simulate_fleet`` throughput.

Run: ``.venv/bin/python benchmarks/client.py [--reports 2000] [--fleet 20000] [--workers 2] [--clock wall|cpu]``

1. Per-report device cost (goal < 1 ms), median over ``--reports`` answers, each step timed on its own:
   randomize (exact sampler over the OS CSPRNG), encrypt (HPKE seal of the payload), persist (one SQLite
   transaction recording the ε spend, the memo and the outbox entry, WAL), and the whole ``Client.submit``
   over an in-process transport; for both durability modes (``normal``: no fsync per answer, one per flush;
   ``full``: one fsync per answer). Each ``Client.submit`` answers a campaign of its own, so it does all a
   first answer does beyond the parts: the descriptor parsed and validated, its fingerprint and the pin
   written (a second SQLite transaction), the device's Ed25519 key for the campaign derived, the report
   drawn from the HMAC_DRBG of the device secret (not the OS CSPRNG) and its answer tag. ``Client.submit``
   is printed by the chosen clock and, beside it, by this process's CPU time (``time.process_time``),
   which a loaded machine inflates less. Measured at ``durability="normal"``, 500 answers: 0.77-0.98 ms
   wall (load 7.6 on 2 cores, CPU the same); in paired runs of the code before and after this work at
   once, one per core (load 5-12), 0.86-1.41 ms before and 0.89-1.29 ms after, by either clock: what is
   left is mostly a first answer's own work (four X25519/Ed25519 scalar multiplications, two SQLite
   commits), and the machine's noise is as large as the difference.
2. ``simulate_fleet`` against a real ``deniable serve`` this script starts on a free loopback port:
   reports per second end to end (randomize + encrypt + POST in batches of 500 + server decrypt/store).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from deniable.aggregator.harness import ServerProcess
from deniable.client import Client, Response
from deniable.client.fleet import simulate_fleet
from deniable.client.report import randomize_index, seal_answer
from deniable.client.state import DeviceState, SpendRow
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import encode_key, generate_keypair

#: The clock of the per-report figures: wall time (perf_counter), or this thread's CPU time (thread_time),
#: which a loaded machine does not inflate (at durability="normal" the device waits on no I/O).
_clock = time.perf_counter

MECHANISMS = (("binary-rr", 2, 1.0), ("grr", 4, 1.0), ("oue", 16, 1.0), ("olh", 16, 1.0))


def _config(cid: str, mechanism: str, k: int, epsilon: float, public_key: bytes) -> CampaignConfig:
    return CampaignConfig.create(
        id=cid, question="q?", categories=[f"c{i}" for i in range(k)], epsilon=epsilon,
        mechanism=mechanism, public_key=encode_key(public_key),
    )


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def per_report(reports: int, durability: str) -> list[dict[str, Any]]:
    """Median microseconds of each device step, per mechanism."""
    rows = []
    _, public = generate_keypair()
    for mechanism, k, epsilon in MECHANISMS:
        config = _config("bench", mechanism, k, epsilon, public)
        key = config.public_key_bytes
        with tempfile.TemporaryDirectory() as tmp:
            state = DeviceState(Path(tmp) / "state", durability=durability)
            t_rand, t_seal, t_store = [], [], []
            for i in range(reports):
                t0 = _clock()
                report = randomize_index(config, i % k)
                t1 = _clock()
                envelope = seal_answer(config, state.secret, report, None, public_key=key)
                t2 = _clock()
                text = json.dumps(envelope.to_json(), separators=(",", ":"))
                row = SpendRow(
                    report_id=envelope.report_id, campaign_id=f"bench-{i}", recurring=False, trust_model="local",
                    epsilon=config.epsilon, envelope=text
                )
                with state.transaction() as db:
                    DeviceState.record_spend(db, row)
                    DeviceState.enqueue(db, row.report_id, row.campaign_id, text)
                t3 = _clock()
                t_rand.append(t1 - t0)
                t_seal.append(t2 - t1)
                t_store.append(t3 - t2)
            state.close()
            t_submit, c_submit = _client_submit(
                mechanism, k, epsilon, public, min(reports, 1000), Path(tmp) / "client", durability
            )
        total = [a + b + c for a, b, c in zip(t_rand, t_seal, t_store, strict=True)]
        rows.append(
            {
                "mechanism": f"{mechanism} k={k} ε={epsilon:g}",
                "randomize_us": _median_us(t_rand),
                "encrypt_us": _median_us(t_seal),
                "persist_us": _median_us(t_store),
                "randomize+encrypt+persist_us": _median_us(total),
                "p95_total_us": sorted(total)[int(0.95 * len(total))] * 1e6,
                "client_submit_us": _median_us(t_submit),
                "client_submit_cpu_us": _median_us(c_submit),
            }
        )
    return rows


def _client_submit(
    mechanism: str, k: int, epsilon: float, public: bytes, n: int, state: Path, durability: str
) -> tuple[list[float], list[float]]:
    """``Client.submit`` to ``n`` distinct campaigns served by an in-process transport (no network): the
    times by the chosen clock, and this process's CPU times.

    The transport answers each config GET by parsing that campaign's stored JSON bytes and hands them over
    with the parsed body, as the HTTP transport does with the aggregator's answer (the descriptors are built
    before the clock starts: serving them is the aggregator's work, not the device's)."""
    served = {
        f"bench-{i}": json.dumps(_config(f"bench-{i}", mechanism, k, epsilon, public).to_json()).encode()
        for i in range(n)
    }

    def configs(method: str, path: str, body: Any = None) -> Response:
        raw = served[path.rsplit("/", 1)[-1]]
        return Response(200, json.loads(raw), raw=raw)

    class Configs:
        request = staticmethod(configs)

    client = Client(
        "http://127.0.0.1:9", state, transport=Configs(), lifetime_budget=1000.0, durability=durability
    )
    times, cpu = [], []
    for i in range(n):
        t0, c0 = _clock(), time.process_time()
        client.submit(f"bench-{i}", f"c{i % k}")
        times.append(_clock() - t0)
        cpu.append(time.process_time() - c0)
    client.close()
    return times, cpu


def fleet(devices: int, workers: int) -> list[dict[str, Any]]:
    """``simulate_fleet`` throughput against a ``deniable serve`` started here."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", workers=workers, log_path=Path(tmp) / "serve.log")
        server.start()
        url, admin = server.url, server.admin_token
        try:
            for mechanism, k, epsilon in MECHANISMS:
                cid = f"fleet-{mechanism}"
                body = {"id": cid, "question": "q?", "categories": [f"c{i}" for i in range(k)],
                        "epsilon": epsilon, "mechanism": mechanism}
                request = urllib.request.Request(
                    url + "/api/v1/campaigns", data=json.dumps(body).encode(), method="POST",
                    headers={"Content-Type": "application/json", "Authorization": f"Bearer {admin}"},
                )
                urllib.request.urlopen(request, timeout=30).close()
                values = [f"c{i % k}" for i in range(devices)]
                result = simulate_fleet(url, cid, values, batch_size=500)
                assert result.accepted == devices, result
                rows.append(
                    {
                        "mechanism": f"{mechanism} k={k} ε={epsilon:g}",
                        "devices": devices,
                        "seconds": result.seconds,
                        "reports_per_second": result.reports_per_second,
                    }
                )
        finally:
            server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=2000, help="answers timed per mechanism (2000)")
    parser.add_argument("--fleet", type=int, default=20000, help="simulated devices per mechanism (20000; 0: skip)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the server (2)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time the per-report steps by the wall clock (default) or by this thread's CPU time, "
                             "which a loaded machine does not inflate")  # fmt: skip
    args = parser.parse_args()
    global _clock
    _clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min): {load} on {os.cpu_count()} cores")
    for durability in ("normal", "full"):
        print(f"per-report device cost, durability={durability!r}, median of {args.reports} "
              f"({args.clock} microseconds):")
        for row in per_report(args.reports, durability):
            parts = row["randomize+encrypt+persist_us"]
            print(
                f"  {row['mechanism']:<20} randomize {row['randomize_us']:7.1f}  "
                f"encrypt {row['encrypt_us']:7.1f}  persist {row['persist_us']:7.1f}  "
                f"= parts {parts:7.1f} (p95 {row['p95_total_us']:7.1f});  "
                f"Client.submit {row['client_submit_us']:7.1f} = {row['client_submit_us'] / parts:.2f} x parts "
                f"(CPU {row['client_submit_cpu_us']:7.1f}; goal: submit < 1000 at durability='normal')"
            )
    if args.fleet <= 0:
        return
    print(f"simulate_fleet against deniable serve ({args.workers} workers), {args.fleet} devices:")
    for row in fleet(args.fleet, args.workers):
        print(f"  {row['mechanism']:<18} {row['seconds']:6.2f} s  {row['reports_per_second']:8.0f} reports/s")


if __name__ == "__main__":
    main()
