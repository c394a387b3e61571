"""Slow-client attack beside a normal load, against the real ``deniable serve`` over loopback.

    .venv/bin/python benchmarks/slowclients.py [--seconds S] [--idle 1000] [--slow 200] [--workers W]

Issue 12 item 1: on the old front (gunicorn gthread, 2 workers × 2 threads) three connections sending one
header line every 2 s made 4 of 4 ``/healthz`` probes time out, and 200 idle sockets did the same. The
goal now: with 1,000 idle and 200 slowloris connections (half trickling headers, half trickling a body)
held open for the whole run, a normal request's p99 stays under 100 ms and none fails.

Two phases of ``--seconds`` each over the same server: **baseline** (normal load only) and **attack**
(the same load while the attack runs). The normal load is ``--clients`` threads, each on its own
keep-alive connection, alternating ``GET /healthz`` and ``POST`` of a pre-sealed batch of ``--batch``
envelopes. The attack runs on an asyncio loop of its own: it opens every connection, trickles one header
line (or one body byte) per connection every second, and reopens each connection the server closes (at
its header or body deadline: 10 s by default), so that the attack stays at full strength for the whole
phase. Printed per phase: requests/s, reports accepted/s, p50/p99/max latency of the normal requests,
failures; for the attack: connections held at the end, 408 answers seen, reopenings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from ingest import Server, seal_envelopes  # benchmarks/ingest.py: the server subprocess and the sealer

from deniable.shared.descriptor import CampaignConfig

CAMPAIGN = "slow-bench"


class Attack:
    """Idle and slowloris connections on an asyncio loop, kept at full count (run in a process of its own by
    :class:`AttackProcess`, so that its thousand timers do not slow the measuring clients)."""

    def __init__(self, port: int, *, idle: int, slow_headers: int, slow_bodies: int, stop: Any) -> None:
        self.port = port
        self.plan = {"idle": idle, "headers": slow_headers, "body": slow_bodies}
        self.open = {kind: 0 for kind in self.plan}
        self.timeouts = 0
        self.reopened = 0
        self.refused = 0
        self._stop = stop

    async def _one(self, kind: str) -> None:
        first = True
        while not self._stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                self.refused += 1
                await asyncio.sleep(0.5)
                continue
            if not first:
                self.reopened += 1
            first = False
            self.open[kind] += 1
            try:
                if kind == "headers":
                    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                elif kind == "body":
                    writer.write(b"POST /api/v1/campaigns/" + CAMPAIGN.encode() + b"/reports HTTP/1.1\r\nHost: x\r\n"
                                 b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")  # fmt: skip
                step = 0
                while not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        data = await asyncio.wait_for(reader.read(4096), timeout=1.0)
                        if data.startswith(b"HTTP/1.1 408"):
                            self.timeouts += 1
                        if not data or data.startswith(b"HTTP/"):
                            break  # answered or closed: reopen
                    step += 1
                    if kind == "headers":
                        writer.write(b"X-Slow-%d: 1\r\n" % step)
                    elif kind == "body":
                        writer.write(b" ")
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
            except ConnectionError:
                pass
            finally:
                self.open[kind] -= 1
                writer.close()

    async def _run(self) -> None:
        tasks = []
        for kind, count in self.plan.items():
            for _ in range(count):
                tasks.append(asyncio.create_task(self._one(kind)))
                if len(tasks) % 100 == 0:
                    await asyncio.sleep(0.01)  # do not overflow the listen backlog at once
        while not self._stop.is_set():
            await asyncio.sleep(0.1)
        await asyncio.gather(*tasks, return_exceptions=True)

    def stats(self) -> dict[str, Any]:
        return {"open": dict(self.open), "timeouts": self.timeouts, "reopened": self.reopened,
                "refused": self.refused}  # fmt: skip


def _attack_main(port: int, plan: dict[str, int], stop: Any, pipe: Any) -> None:
    attack = Attack(port, idle=plan["idle"], slow_headers=plan["headers"], slow_bodies=plan["body"], stop=stop)

    async def report() -> None:
        while not stop.is_set():
            if pipe.poll():
                pipe.recv()
                pipe.send(attack.stats())
            await asyncio.sleep(0.05)

    async def both() -> None:
        await asyncio.gather(attack._run(), report())

    asyncio.run(both())
    pipe.send(attack.stats())


class AttackProcess:
    """:class:`Attack` in a child process; :meth:`stats` asks it for its counters."""

    def __init__(self, port: int, *, idle: int, slow_headers: int, slow_bodies: int) -> None:
        self.plan = {"idle": idle, "headers": slow_headers, "body": slow_bodies}
        self._stop = multiprocessing.Event()
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.Process(target=_attack_main, args=(port, self.plan, self._stop, child))

    def stats(self) -> dict[str, Any]:
        self._pipe.send("stats")
        stats: dict[str, Any] = self._pipe.recv()
        return stats

    def start(self) -> AttackProcess:
        self._process.start()
        deadline = time.monotonic() + 30
        while sum(self.stats()["open"].values()) < sum(self.plan.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        stats: dict[str, Any] = self._pipe.recv()
        self._process.join(30)
        return stats


def normal_load(port: int, bodies: list[bytes], *, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` keep-alive clients alternating a health probe and a batch upload for ``seconds``."""
    latencies: list[float] = []
    kinds: dict[str, list[float]] = {"probe": [], "upload": []}
    failures: list[str] = []
    accepted = 0
    lock = threading.Lock()
    queue = list(reversed(bodies))
    stop_at = time.monotonic() + seconds

    def client() -> None:
        nonlocal accepted
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        i = 0
        while time.monotonic() < stop_at:
            i += 1
            with lock:
                body = queue.pop() if i % 2 == 0 and queue else None
            started = time.perf_counter()
            try:
                if conn.sock is None:
                    conn.connect()
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if body is None:
                    conn.request("GET", "/healthz")
                else:
                    conn.request("POST", f"/api/v1/campaigns/{CAMPAIGN}/reports", body=body,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
                response = conn.getresponse()
                reply = json.loads(response.read())
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    kinds["probe" if body is None else "upload"].append(elapsed)
                    if response.status != 200:
                        failures.append(f"status {response.status}")
                    elif body is not None:
                        accepted += reply["accepted"]
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    failures.append(type(exc).__name__)
                conn.close()
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    for values in kinds.values():
        values.sort()
    return {
        "kinds": {kind: _quantiles(values) for kind, values in kinds.items()},
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "accepted_per_s": accepted / elapsed,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan"),
        "max_ms": 1000 * latencies[-1] if latencies else float("nan"),
        "failures": len(failures),
        "failure_kinds": sorted(set(failures)),
    }


def _quantiles(sorted_seconds: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds of sorted durations."""
    if not sorted_seconds:
        return float("nan"), float("nan")
    return 1000 * statistics.median(sorted_seconds), 1000 * sorted_seconds[int(0.99 * (len(sorted_seconds) - 1))]


def _row(name: str, figures: dict[str, Any]) -> str:
    return (
        f"{name:9} {figures['requests']:>8} {figures['requests_per_s']:>8.1f} {figures['accepted_per_s']:>10.1f}"
        f" {figures['p50_ms']:>8.1f} {figures['p99_ms']:>8.1f} {figures['max_ms']:>8.1f} {figures['failures']:>8}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    parser.add_argument("--idle", type=int, default=1000, help="idle connections (default 1,000)")
    parser.add_argument("--slow", type=int, default=200, help="slowloris connections, half headers, half body")
    parser.add_argument("--clients", type=int, default=4, help="normal keep-alive clients (default 4)")
    parser.add_argument("--batch", type=int, default=20, help="envelopes per normal upload (default 20)")
    parser.add_argument("--supply", type=int, default=1500,
                        help="envelopes sealed per second of a phase (default 1,500; more than the load sends)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2, as deniable serve)")
    parser.add_argument("--threads", type=int, default=2, help="threads per worker (default 2, as deniable serve)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(2026)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        server = Server(data_dir, args.workers, args.threads)
        try:
            status, created = server.request(
                "POST", "/api/v1/campaigns", token=server.admin,
                body=json.dumps({"id": CAMPAIGN, "question": "q", "categories": [f"c{i}" for i in range(8)],
                                 "epsilon": 1.0, "group_fields": ["region"]}).encode(),
            )  # fmt: skip
            assert status == 201, created
            config = CampaignConfig.from_json(created)
            per_phase = int(args.seconds * args.supply / args.batch) + 10  # more than a phase can send
            envelopes = seal_envelopes(config, 2 * per_phase * args.batch, rng)
            bodies = [json.dumps({"reports": envelopes[i : i + args.batch]}).encode()
                      for i in range(0, len(envelopes), args.batch)]  # fmt: skip
            baseline = normal_load(server.port, bodies[:per_phase], clients=args.clients, seconds=args.seconds)
            attack = AttackProcess(server.port, idle=args.idle, slow_headers=args.slow // 2,
                                   slow_bodies=args.slow - args.slow // 2).start()  # fmt: skip
            held_at_start = attack.stats()["open"]
            try:
                under = normal_load(server.port, bodies[per_phase:], clients=args.clients, seconds=args.seconds)
                held_at_end = attack.stats()["open"]
            finally:
                final = attack.stop()
        finally:
            server.stop()
    print(f"deniable serve ({args.workers} workers × {args.threads} threads), {args.clients} normal clients, "
          f"batches of {args.batch}, {args.seconds:g} s per phase")  # fmt: skip
    print(f"{'phase':9} {'requests':>8} {'req/s':>8} {'accepted/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
          f" {'failed':>8}")  # fmt: skip
    print(_row("baseline", baseline))
    print(_row("attack", under))
    for name, figures in (("baseline", baseline), ("attack", under)):
        print(f"  {name}: " + ", ".join(f"{kind} p50 {p50:.1f} ms p99 {p99:.1f} ms"
                                        for kind, (p50, p99) in figures["kinds"].items()))  # fmt: skip
    print(f"attack: {args.idle} idle + {args.slow // 2} slow-header + {args.slow - args.slow // 2} slow-body "
          f"connections; held at start {held_at_start}, at end {held_at_end}; {final['timeouts']} answered 408 "
          f"at their deadline ({final['reopened']} reopenings), {final['refused']} connects refused")  # fmt: skip
    ok = under["failures"] == 0 and under["p99_ms"] < 100
    print(f"goal (attack phase: no failure, p99 < 100 ms): {'met' if ok else 'NOT met'}"
          + (f"; failures {under['failure_kinds']}" if under["failures"] else ""))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
