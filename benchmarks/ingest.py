"""Ingestion and estimate benchmark of the aggregator, against the real server over loopback.

    .venv/bin/python benchmarks/ingest.py [--quick] [--reports N] [--workers W] [--clients C]

What it measures, in one run on this machine:

1. **Raw open + verify rate** (one core, this process): ``Suite.decrypt`` of the same envelopes with a
   loaded key plus the Ed25519 verification of each envelope's proof of possession (wire format v2), the
   floor of the aggregator's CPU work per report; also ``open_envelope`` (length check, proof, decrypt,
   binding, unpadding, JSON parse) for reference.
2. **Ingestion rate**: ``deniable serve`` (gunicorn, W workers) in a subprocess; this process posts
   pre-encrypted, pre-serialized batches of 1,000 envelopes from C concurrent keep-alive connections
   (TCP_NODELAY: otherwise Nagle's algorithm and delayed ACKs add ~40 ms to every request whose headers and
   body are sent apart) and waits for every reply (each committed durably, synchronous=FULL). Goal: ≥ 50%
   of the raw open + verify rate.
3. **Estimate latency** with 1,000,000 stored reports (bulk-loaded through ``Store.ingest``, the
   ingestion path minus HTTP and decryption): median and p95 of ``GET .../estimate`` over HTTP, overall
   and grouped. Goal: < 50 ms. ``--quick`` loads 100,000 instead and says so.
4. **Database size per report**: growth of the SQLite file (after a WAL checkpoint) per stored report.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from deniable.aggregator.harness import ServerProcess
from deniable.aggregator.keyring import load_private_key
from deniable.aggregator.store import ReportRow, Store
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, hpke_info, open_envelope, signed_message

BATCH = 1000
K = 16
EPSILON = 1.0


class Server(ServerProcess):
    """``deniable serve`` through the product's harness (free loopback port, health wait, stop), with a raw
    ``http.client`` request helper."""

    def __init__(self, data_dir: Path, workers: int, threads: int) -> None:
        super().__init__(data_dir, workers=workers, threads=threads, log_path=data_dir.with_suffix(".log"))
        self.admin, self.analyst = self.admin_token, self.analyst_token
        self.start()

    def request(self, method: str, path: str, body: bytes | None = None, token: str | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = json.loads(response.read())
        conn.close()
        return response.status, data


def seal_envelopes(config: CampaignConfig, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    mechanism = config.build_mechanism()
    values = rng.integers(0, config.k, n)
    reports = mechanism.simulate(values, rng=rng)
    envelopes = []
    for report in np.asarray(reports).tolist():
        payload = config.make_payload(int(report), {"region": f"r{int(rng.integers(0, 8))}"})
        envelopes.append(config.seal(payload, device_secret=rng.bytes(32)).to_json())
    return envelopes


def raw_decrypt_rates(
    config: CampaignConfig, private_key: bytes, envelopes: list[dict[str, Any]]
) -> tuple[float, float]:
    """Reports per second of what one report needs at the least (bare HPKE decryption plus the Ed25519
    verification of its proof of possession) and of ``open_envelope``, on one core."""
    from cryptography.hazmat.primitives import hpke
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
    key = X25519PrivateKey.from_private_bytes(private_key)
    parsed = [Envelope.from_json(e) for e in envelopes]
    infos = [hpke_info(config.id, e.version, e.report_id, e.pseudonym) for e in parsed]
    messages = [signed_message(info, e.ciphertext) for e, info in zip(parsed, infos, strict=True)]
    start = time.perf_counter()
    for envelope, info, message in zip(parsed, infos, messages, strict=True):
        assert envelope.device_key is not None and envelope.signature is not None
        Ed25519PublicKey.from_public_bytes(envelope.device_key).verify(envelope.signature, message)
        suite.decrypt(envelope.ciphertext, key, info=info)
    raw = len(parsed) / (time.perf_counter() - start)
    start = time.perf_counter()
    for envelope in parsed:
        open_envelope(envelope, campaign_id=config.id, private_key=private_key, padded_length=config.padded_length)
    opened = len(parsed) / (time.perf_counter() - start)
    return raw, opened


def ingest_rate(
    servers: list[Server], campaign_id: str, envelopes: list[dict[str, Any]], clients: int
) -> tuple[float, int]:
    """Reports/s of uploading every envelope in batches of :data:`BATCH` from ``clients`` connections (client i
    posts to instance i mod len(servers)), and the number accepted."""
    bodies = [json.dumps({"reports": envelopes[i : i + BATCH]}).encode() for i in range(0, len(envelopes), BATCH)]
    accepted = 0
    lock = threading.Lock()
    queue = list(reversed(bodies))

    def client(index: int) -> None:
        nonlocal accepted
        server = servers[index % len(servers)]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # headers and body: no Nagle wait
        while True:
            with lock:
                if not queue:
                    break
                body = queue.pop()
            conn.request("POST", f"/api/v1/campaigns/{campaign_id}/reports", body=body,
                         headers={"Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            reply = json.loads(response.read())
            assert response.status == 200, reply
            with lock:
                accepted += reply["accepted"]
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    return len(envelopes) / elapsed, accepted


def bulk_load(store: Store, config: CampaignConfig, n: int, rng: np.random.Generator) -> float:
    """Store n simulated reports through ``Store.ingest`` in batches of 20,000; return seconds."""
    mechanism = config.build_mechanism()
    start = time.perf_counter()
    for offset in range(0, n, 20_000):
        size = min(20_000, n - offset)
        reports = np.asarray(mechanism.simulate(rng.integers(0, config.k, size), rng=rng)).tolist()
        regions = rng.integers(0, 8, size).tolist()
        ids = rng.bytes(16 * size).hex()
        devices = rng.bytes(32 * size).hex()
        rows = [
            ReportRow(
                report_id=ids[32 * i : 32 * i + 32],
                pseudonym=devices[64 * i : 64 * i + 64],
                groups={"region": f"r{regions[i]}"},
                report_json=str(report),
                support=(report,),
            )
            for i, report in enumerate(reports)
        ]
        outcomes = store.ingest(config.id, rows, k=config.k, group_fields=config.group_fields)
        assert all(status == "accepted" for status, _ in outcomes)
    return time.perf_counter() - start


def latency_ms(server: Server, path: str, repeats: int) -> tuple[float, float]:
    """Median and p95 (ms, wall) of ``GET path`` through the server over HTTP."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        status, _ = server.request("GET", path, token=server.analyst)
        times.append((time.perf_counter() - start) * 1000)
        assert status == 200
    return median_p95(times)


def uptime() -> str:
    """What ``uptime`` prints (the load average beside a figure: the benchmarks may share the machine)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def median_p95(times: list[float]) -> tuple[float, float]:
    """The median and the 95th percentile (nearest rank below) of ``times``."""
    times = sorted(times)
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def call_ms(call: Any, repeats: int) -> tuple[float, float, float]:
    """Median and p95 wall ms of ``call()`` in this process, and its median CPU ms (this process only: a
    database server's work is in the wall time, not here)."""
    walls, cpus = [], []
    for _ in range(repeats):
        cpu, start = time.process_time(), time.perf_counter()
        call()
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    median, p95 = median_p95(walls)
    return median, p95, statistics.median(cpus)


def database_bytes(store: Store) -> int:
    store.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store.path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer reports (a smoke run, not the figures)")
    parser.add_argument("--reports", type=int, help="envelopes to upload (default 30,000; quick 5,000)")
    parser.add_argument("--stored", type=int, help="reports bulk-loaded for the estimate (default 1,000,000)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--threads", type=int, default=1, help="threads per worker (default 1: decryption is CPU-bound, the GIL)"
    )
    parser.add_argument("--clients", type=int, default=3, help="concurrent upload connections (default 3)")
    args = parser.parse_args(argv)
    n_upload = args.reports or (5_000 if args.quick else 30_000)
    n_stored = args.stored or (100_000 if args.quick else 1_000_000)
    rng = np.random.default_rng(2026)

    with tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        server = Server(data_dir, args.workers, args.threads)
        try:
            fields = {"question": "benchmark", "categories": [f"c{i}" for i in range(K)], "epsilon": EPSILON,
                      "mechanism": "grr", "group_fields": ["region"]}  # fmt: skip
            _, created = server.request("POST", "/api/v1/campaigns", json.dumps({"id": "bench", **fields}).encode(),
                                        token=server.admin)  # fmt: skip
            config = CampaignConfig.from_json(created)
            print(f"sealing {n_upload:,} envelopes (GRR, k={K}, eps={EPSILON}) ...", flush=True)
            envelopes = seal_envelopes(config, n_upload, rng)
            private_key = load_private_key(data_dir, "bench")
            sample = envelopes[: min(5_000, n_upload)]
            raw_before, opened = raw_decrypt_rates(config, private_key, sample)
            rate, accepted = ingest_rate([server], "bench", envelopes, args.clients)
            raw_after, _ = raw_decrypt_rates(config, private_key, sample)
            assert accepted == n_upload, accepted
            raw = (raw_before + raw_after) / 2  # bracket the upload: the machine's load may drift
            print(f"raw HPKE decrypt + Ed25519 verify (1 core, this process):  {raw:10,.0f} reports/s "
                  f"(before {raw_before:,.0f}, after {raw_after:,.0f})")  # fmt: skip
            print(f"open_envelope (size+proof+decrypt+bind+unpad+parse, 1 core): {opened:8,.0f} reports/s")
            print(f"ingestion over HTTP ({args.workers} workers x {args.threads} threads, {args.clients} clients, "
                  f"batches of {BATCH}, durable): {rate:,.0f} reports/s = {rate / raw:.0%} of raw open + verify "
                  f"(goal >= 50%), on {os.cpu_count()} cores shared with this client")  # fmt: skip

            _, created = server.request("POST", "/api/v1/campaigns", json.dumps({"id": "bench-big", **fields}).encode(),
                                        token=server.admin)  # fmt: skip
            big = CampaignConfig.from_json(created)
            store = Store(data_dir / "deniable.sqlite3")
            before = database_bytes(store)
            print(f"bulk-loading {n_stored:,} reports through Store.ingest ...", flush=True)
            seconds = bulk_load(store, big, n_stored, rng)
            size = database_bytes(store) - before
            status, body = server.request("GET", "/api/v1/campaigns/bench-big/estimate", token=server.analyst)
            assert status == 200 and body["n"] == n_stored, body
            median, p95 = latency_ms(server, "/api/v1/campaigns/bench-big/estimate", 50)
            gmedian, gp95 = latency_ms(server, "/api/v1/campaigns/bench-big/estimate?group_by=region", 50)
            print(f"bulk load: {n_stored / seconds:,.0f} reports/s through Store.ingest (no HTTP, no decryption)")
            print(
                f"estimate latency with {n_stored:,} stored reports: median {median:.1f} ms, p95 {p95:.1f} ms "
                f"(goal < 50 ms); grouped by region (8 groups): median {gmedian:.1f} ms, p95 {gp95:.1f} ms"
            )
            print(f"database size: {size / n_stored:.0f} bytes per report ({size / 1e6:,.1f} MB for {n_stored:,})")
            if args.quick:
                print("(--quick: fewer reports than the stated goals assume; run without it for the figures)")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
