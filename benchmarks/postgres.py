"""Several aggregator instances over PostgreSQL against one over SQLite, in one run on this machine.

    .venv/bin/python benchmarks/postgres.py [--quick] [--reports N] [--stored N] [--clients C]

The PostgreSQL server is ``DENIABLE_BENCH_POSTGRES`` (a superuser URL) or the one on 127.0.0.1:5432 (user
``postgres``, trust); the benchmark creates a database of its own and drops it at the end.

What it prints, side by side:

1. **Ingestion** over HTTP (pre-sealed batches of 1,000 envelopes, C keep-alive connections spread over the
   instances, every batch committed durably) for: SQLite with 1 instance, PostgreSQL with 1 instance, and
   PostgreSQL with 2 instances. Each instance is one ``deniable serve`` with 1 worker process (one core's
   worth of decryption) and 2 threads. Each figure is given in reports/s and as a ratio to the raw decrypt
   rate (HPKE open + Ed25519 proof check, measured in this process before and after) times the cores the
   instances use. Goal: 2 instances ≥ 1.6× one when the client runs elsewhere. Here the client, the
   database server and the instances share the machine's 2 cores (and other work: the load average is
   printed), so the honest figure is what this run measures, and the ratio says how much of the cores the
   instances got.
2. **Estimate latency** at 10⁷ stored reports on PostgreSQL: the reports are written in bulk by SQL
   (``generate_series``: random-looking 16-byte ids and 32-byte pseudonyms, 8 regions, GRR values), with
   the tallies written as 16 shards per group the way instances leave them; median and p95 of
   ``GET .../estimate`` over HTTP, overall and grouped by region. Goal: < 50 ms (it reads tally rows only).
3. **Database bytes per report** on PostgreSQL: the growth of every relation of the schema (tables,
   indexes, TOAST) per stored report, after the bulk load.

``--quick`` uses fewer reports (10⁵ stored) and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ingest import BATCH, EPSILON, K, Server, raw_decrypt_rates, seal_envelopes

from deniable.aggregator.database import PG_TALLY_SHARDS
from deniable.aggregator.harness import ServerProcess
from deniable.aggregator.keyring import load_private_key
from deniable.shared.descriptor import CampaignConfig

ADMIN_URL = os.environ.get("DENIABLE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
FIELDS = {"question": "benchmark", "categories": [f"c{i}" for i in range(K)], "epsilon": EPSILON,
          "mechanism": "grr", "group_fields": ["region"]}  # fmt: skip


class PgServer(Server):
    """:class:`ingest.Server` over a PostgreSQL database (one key-encryption key and tokens per aggregator)."""

    def __init__(self, data_dir: Path, database: str, shared: dict[str, str]) -> None:
        ServerProcess.__init__(
            self, data_dir, workers=1, threads=2, log_path=data_dir.with_suffix(".log"), database=database, **shared
        )
        self.admin, self.analyst = self.admin_token, self.analyst_token
        self.start()


def create(server: Server, campaign_id: str) -> CampaignConfig:
    status, body = server.request(
        "POST", "/api/v1/campaigns", json.dumps({"id": campaign_id, **FIELDS}).encode(), token=server.admin
    )
    assert status == 201, body
    return CampaignConfig.from_json(body)


def ingest_rate(servers: list[Server], campaign_id: str, envelopes: list[dict[str, Any]], clients: int) -> float:
    """Reports/s of uploading every envelope in batches from ``clients`` connections, client i posting to
    instance i mod len(servers)."""
    import http.client

    bodies = [json.dumps({"reports": envelopes[i : i + BATCH]}).encode() for i in range(0, len(envelopes), BATCH)]
    lock = threading.Lock()
    queue = list(reversed(bodies))
    accepted = [0]

    def client(index: int) -> None:
        server = servers[index % len(servers)]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
                accepted[0] += reply["accepted"]
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    assert accepted[0] == len(envelopes), accepted
    return len(envelopes) / elapsed


def schema_bytes(conn: Any) -> int:
    conn.execute("CHECKPOINT")
    row = conn.execute(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')"
    ).fetchone()
    return int(row[0])


def bulk_load(conn: Any, campaign_id: str, n: int) -> float:
    """``n`` reports of ``campaign_id`` written by SQL, and their tallies as 16 shards per group; seconds."""
    start = time.perf_counter()
    conn.execute(
        "INSERT INTO reports (campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day)"
        " SELECT %s, decode(md5('id' || i::text), 'hex'), '', sha256(('device' || i::text)::bytea),"
        " '{\"region\":\"r' || mod(i, 8)::text || '\"}', mod(hashtext(i::text) & 2147483647, %s)::text,"
        " '2026-12-01'"
        " FROM generate_series(1, %s) AS i",
        (campaign_id, K, n),
    )
    counts = conn.execute(
        "SELECT groups_json, report_json::int, COUNT(*) FROM reports WHERE campaign_id = %s GROUP BY 1, 2",
        (campaign_id,),
    ).fetchall()
    tallies: dict[tuple[str, str], list[int]] = {}
    for groups_json, value, count in counts:
        region = json.loads(groups_json)["region"]
        for key in (("", ""), ("region", region)):
            tallies.setdefault(key, [0] * K)[value] += int(count)
    rows = []
    for (field, value), support in tallies.items():
        for shard in range(PG_TALLY_SHARDS):  # the shard rows the instances' connections leave behind
            part = [s // PG_TALLY_SHARDS + (1 if shard < s % PG_TALLY_SHARDS else 0) for s in support]
            rows.append((campaign_id, "", field, value, shard, sum(part), json.dumps(part)))
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO tally_shards (campaign_id, round, group_field, group_value, shard, n, support_json)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    conn.execute("ANALYZE")
    return time.perf_counter() - start


def latency_ms(server: Server, path: str, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        status, _ = server.request("GET", path, token=server.analyst)
        times.append((time.perf_counter() - start) * 1000)
        assert status == 200
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main(argv: list[str] | None = None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer reports (a smoke run, not the figures)")
    parser.add_argument("--reports", type=int, help="envelopes uploaded per configuration (default 20,000)")
    parser.add_argument("--stored", type=int, help="reports stored for the estimate (default 10,000,000)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent upload connections (default 4)")
    args = parser.parse_args(argv)
    n_upload = args.reports or (3_000 if args.quick else 20_000)
    n_stored = args.stored or (100_000 if args.quick else 10_000_000)
    rng = np.random.default_rng(2026)
    name = f"deniable_bench_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    database = ADMIN_URL.rpartition("/")[0] + "/" + name
    shared = {"kek": secrets.token_urlsafe(32), "admin_token": "admin-" + secrets.token_urlsafe(24),
              "analyst_token": "analyst-" + secrets.token_urlsafe(24),
              "issuer_token": "issuer-" + secrets.token_urlsafe(24)}  # fmt: skip
    servers: list[Server] = []
    try:
        with tempfile.TemporaryDirectory(prefix="deniable-bench-pg-") as tmp:
            sqlite_dir = Path(tmp) / "sqlite"
            sqlite_dir.mkdir()
            lite = Server(sqlite_dir, 1, 2)
            servers.append(lite)
            pg = [PgServer(Path(tmp) / f"pg-{i}", database, shared) for i in range(2)]
            servers.extend(pg)
            configs = {"sqlite": create(lite, "bench-sqlite"), "pg1": create(pg[0], "bench-pg1"),
                       "pg2": create(pg[0], "bench-pg2")}  # fmt: skip
            print(f"sealing 3 x {n_upload:,} envelopes (GRR, k={K}) ...", flush=True)
            envelopes = {key: seal_envelopes(config, n_upload, rng) for key, config in configs.items()}
            private_key = load_private_key(sqlite_dir, "bench-sqlite")
            sample = envelopes["sqlite"][: min(3_000, n_upload)]
            load_before = os.getloadavg()
            raw_before, _ = raw_decrypt_rates(configs["sqlite"], private_key, sample)
            rates = {
                "sqlite": ingest_rate([lite], "bench-sqlite", envelopes["sqlite"], args.clients),
                "pg1": ingest_rate([pg[0]], "bench-pg1", envelopes["pg1"], args.clients),
                "pg2": ingest_rate(pg, "bench-pg2", envelopes["pg2"], args.clients),
            }
            raw_after, _ = raw_decrypt_rates(configs["sqlite"], private_key, sample)
            load_after = os.getloadavg()
            raw = (raw_before + raw_after) / 2
            print(f"\nload average before {load_before[0]:.1f}, after {load_after[0]:.1f} "
                  f"({os.cpu_count()} cores, shared with the client, PostgreSQL and other work)")  # fmt: skip
            print(f"raw decrypt (HPKE open + Ed25519 check, 1 core, this process): {raw:,.0f} reports/s "
                  f"(before {raw_before:,.0f}, after {raw_after:,.0f})")  # fmt: skip
            head = f"{'ingestion, batches of 1,000, durable':42} {'reports/s':>10} {'/ raw x cores':>14}"
            print(f"\n{head} {'/ PG x1':>8}")
            for key, label, cores in (("sqlite", "SQLite, 1 instance (1 worker)", 1),
                                      ("pg1", "PostgreSQL, 1 instance (1 worker)", 1),
                                      ("pg2", "PostgreSQL, 2 instances (1 worker each)", 2)):  # fmt: skip
                print(f"{label:42} {rates[key]:>10,.0f} {rates[key] / (raw * cores):>14.0%} "
                      f"{rates[key] / rates['pg1']:>8.2f}")  # fmt: skip
            print("goal: 2 instances >= 1.6 x one when the client runs elsewhere (here it shares the cores)")

            big = create(pg[0], "bench-big")
            with psycopg.connect(database, autocommit=True) as conn:
                before = schema_bytes(conn)
                print(f"\nbulk-loading {n_stored:,} reports by SQL into PostgreSQL ...", flush=True)
                seconds = bulk_load(conn, big.id, n_stored)
                size = schema_bytes(conn) - before
            status, body = pg[1].request("GET", "/api/v1/campaigns/bench-big/estimate", token=pg[1].analyst)
            assert status == 200 and body["n"] == n_stored, body
            median, p95 = latency_ms(pg[1], "/api/v1/campaigns/bench-big/estimate", 50)
            gmedian, gp95 = latency_ms(pg[1], "/api/v1/campaigns/bench-big/estimate?group_by=region", 50)
            print(f"bulk load: {seconds:.0f} s")
            print(f"estimate latency on PostgreSQL with {n_stored:,} stored reports ({PG_TALLY_SHARDS} tally shards): "
                  f"median {median:.1f} ms, p95 {p95:.1f} ms (goal < 50 ms); grouped by region (8 groups): "
                  f"median {gmedian:.1f} ms, p95 {gp95:.1f} ms")  # fmt: skip
            print(f"PostgreSQL database size: {size / n_stored:.0f} bytes per report (tables, indexes, TOAST; "
                  f"{size / 1e9:,.2f} GB for {n_stored:,})")  # fmt: skip
            if args.quick:
                print("(--quick: fewer reports than the stated goals assume; run without it for the figures)")
    finally:
        for server in servers:
            server.stop()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
