"""Soak test: a steady upload rate against the real server for minutes, clients retrying, nothing lost.

    .venv/bin/python benchmarks/soak.py [--seconds 180] [--rate 200] [--clients 2] [--batch 20]
                                        [--workers 2] [--kills 0] [--seed 1]

Starts ``deniable serve`` (gunicorn) itself on a free loopback port over a temporary data dir, creates one
GRR campaign (k = 4) and runs ``--clients`` device processes. Each makes its reports exactly as a device
does (secure randomization with the campaign mechanism, HPKE seal, via ``deniable.client``), and posts
them in batches of ``--batch`` on a fixed schedule so that together they hold ``--rate`` reports per
second. A batch is retried (same envelopes, same report ids) with the client's exponential backoff after a
connection error, a timeout or a 5xx, until every report in it is settled. ``--kills N`` also SIGKILLs the
server's process group N times at seeded moments and restarts it on the same data dir and port.

At the end it prints accepted, duplicate (retries of reports whose answer was lost), rejected and lost
(generated but not stored: must be 0, checked against the stored report ids, the estimate's ``n`` and
``deniable verify``), the achieved rate and the p50/p99/max latency of the batch POSTs that succeeded.
Exit status 0 only when nothing was lost or rejected and verify agrees.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from deniable.aggregator.api.app import DATABASE_NAME
from deniable.aggregator.harness import ServerProcess
from deniable.aggregator.store import Store
from deniable.client import HTTPTransport, RetryPolicy, TransportError
from deniable.client.report import randomize_index, seal_answer
from deniable.shared.descriptor import CampaignConfig

CAMPAIGN = "soak"
CATEGORIES = ["a", "b", "c", "d"]


class Server(ServerProcess):
    """``deniable serve`` through the product's harness, restartable on the same data dir and port (``start``,
    ``kill``, ``stop``), with an ``api`` call that returns the status beside the body."""

    def __init__(self, data_dir: Path, *, workers: int) -> None:
        super().__init__(data_dir, workers=workers, log_path=data_dir.with_suffix(".log"))
        self.admin, self.analyst = self.admin_token, self.analyst_token

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def device_process(
    index: int, url: str, config_json: dict[str, Any], rate: float, batch: int, seconds: float, out: str
) -> None:
    """One client process: ``rate`` reports/s in batches on a fixed schedule, each batch retried until settled."""
    config = CampaignConfig.from_json(config_json)
    transport = HTTPTransport(url, timeout=30.0)
    policy = RetryPolicy(attempts=20, base=0.05, cap=2.0)
    path = f"/api/v1/campaigns/{CAMPAIGN}/reports"
    generated: list[str] = []
    counts = {"accepted": 0, "duplicate": 0, "rejected": 0}
    latencies: list[float] = []
    failures = 0
    start = time.monotonic()
    interval = batch / rate
    sent_batches = 0
    while time.monotonic() - start < seconds:
        due = start + sent_batches * interval
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        sent_batches += 1
        envelopes = []
        for _ in range(batch):
            value = secrets.randbelow(len(CATEGORIES))
            envelope = seal_answer(config, secrets.token_bytes(32), randomize_index(config, value), None)
            envelopes.append(envelope.to_json())
        generated.extend(e["report_id"] for e in envelopes)
        pending, attempt = envelopes, 0
        while pending:
            sent = time.perf_counter()
            try:
                response = transport.request("POST", path, {"reports": pending})
            except TransportError:
                response = None
            if response is None or response.status >= 500:
                failures += 1
                time.sleep(policy.delay(min(attempt, 10)))
                attempt += 1
                continue
            latencies.append(time.perf_counter() - sent)
            if response.status != 200:
                counts["rejected"] += len(pending)  # a 4xx for the whole batch: not retried
                break
            settled = set()
            for result in response.body["results"]:
                counts[result["status"]] += 1
                if result["status"] in ("accepted", "duplicate", "rejected"):
                    settled.add(result["report_id"])
            pending = [e for e in pending if e["report_id"] not in settled]
    elapsed = time.monotonic() - start
    Path(out).write_text(
        json.dumps(
            {"generated": generated, "counts": counts, "latencies": latencies, "failures": failures, "elapsed": elapsed}
        )
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="how long to hold the rate (180)")
    parser.add_argument("--rate", type=float, default=200.0, help="reports per second, all clients (200)")
    parser.add_argument("--clients", type=int, default=2, help="client processes (2)")
    parser.add_argument("--batch", type=int, default=20, help="envelopes per POST (20)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (2)")
    parser.add_argument("--kills", type=int, default=0, help="SIGKILL + restart the server this many times (0)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill schedule (1)")
    args = parser.parse_args(argv)
    if not (args.seconds > 0 and args.rate > 0 and args.clients >= 1 and 1 <= args.batch <= 1000):
        parser.error("--seconds and --rate must be positive, --clients >= 1, --batch in 1..1000")

    with tempfile.TemporaryDirectory(prefix="deniable-soak-") as tmp:
        data_dir = Path(tmp) / "data"
        server = Server(data_dir, workers=args.workers)
        server.start()
        try:
            status, config = server.api(
                "POST", "/api/v1/campaigns",
                {"id": CAMPAIGN, "question": "Soak?", "categories": CATEGORIES, "epsilon": 1.0, "mechanism": "grr"},
                token=server.admin,
            )  # fmt: skip
            assert status == 201, config
            context = multiprocessing.get_context("spawn")
            outputs = [Path(tmp) / f"client-{i}.json" for i in range(args.clients)]
            clients = [
                context.Process(
                    target=device_process,
                    args=(i, server.url, config, args.rate / args.clients, args.batch, args.seconds, str(outputs[i])),
                )
                for i in range(args.clients)
            ]
            print(
                f"soak: {args.rate:g} reports/s for {args.seconds:g} s from {args.clients} client processes "
                f"(batches of {args.batch}) against {server.url} ({args.workers} workers), {args.kills} SIGKILLs",
                flush=True,
            )
            for process in clients:
                process.start()
            schedule = random.Random(args.seed)
            kill_times = sorted(schedule.uniform(0.1, 0.9) * args.seconds for _ in range(args.kills))
            started = time.monotonic()
            for moment in kill_times:
                time.sleep(max(0.0, started + moment - time.monotonic()))
                server.kill()
                time.sleep(schedule.uniform(0.0, 0.5))
                server.start()
                print(f"  killed and restarted the server at t = {time.monotonic() - started:.1f} s", flush=True)
            for process in clients:
                process.join()
            runs = [json.loads(path.read_text()) for path in outputs]

            generated = [rid for run in runs for rid in run["generated"]]
            status, estimate = server.api("GET", f"/api/v1/campaigns/{CAMPAIGN}/estimate", token=server.analyst)
            assert status == 200, estimate
        finally:
            server.stop()
        verify = subprocess.run(
            [sys.executable, "-m", "deniable.aggregator.cli", "verify", "--data-dir", str(data_dir)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        store = Store(data_dir / DATABASE_NAME)
        stored_ids = [report_id for report_id, _, _ in store.iter_reports(CAMPAIGN)]
        store.close()
    stored = set(stored_ids)

    assert len(stored) == len(stored_ids), "a report id is stored twice"
    counts = {key: sum(run["counts"][key] for run in runs) for key in ("accepted", "duplicate", "rejected")}
    latencies = [lat for run in runs for lat in run["latencies"]]
    lost = len(set(generated) - stored)
    elapsed = max(run["elapsed"] for run in runs)
    summary = {
        "seconds": round(elapsed, 1),
        "target_rate": args.rate,
        "achieved_rate": round(len(generated) / elapsed, 1),
        "generated": len(generated),
        "accepted": counts["accepted"],
        "duplicate": counts["duplicate"],
        "rejected": counts["rejected"],
        "lost": lost,
        "stored": len(stored),
        "estimate_n": estimate["n"],
        "kills": args.kills,
        "failed_attempts_retried": sum(run["failures"] for run in runs),
        "requests": len(latencies),
        "latency_ms": {
            "p50": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "p99": round(1000 * percentile(latencies, 0.99), 1),
            "max": round(1000 * max(latencies), 1) if latencies else None,
        },
        "verify": verify.stdout.strip().splitlines()[-1] if verify.stdout.strip() else verify.stderr.strip(),
    }
    print(json.dumps(summary, indent=2))
    ok = (
        lost == 0
        and counts["rejected"] == 0
        and estimate["n"] == len(generated) == len(stored) == counts["accepted"]
        and verify.returncode == 0
    )
    print(
        f"accepted {counts['accepted']}, duplicate {counts['duplicate']}, rejected {counts['rejected']}, lost {lost}; "
        f"p50 {summary['latency_ms']['p50']} ms, p99 {summary['latency_ms']['p99']} ms; "
        + ("OK" if ok else "FAILED: reports lost, rejected or miscounted")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
