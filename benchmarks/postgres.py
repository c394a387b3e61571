"""Several aggregator instances over PostgreSQL against one over SQLite, in one run on this machine.

    .venv/bin/python benchmarks/postgres.py [--quick] [--reports N] [--stored N] [--clients C]
        [--parts ingest,estimate] [--repeats R] [--verify]

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
2. **Estimate latency** at 10⁷ stored reports on PostgreSQL: the reports are written in bulk by SQL, rows
   of the shape the service stores (see :func:`bulk_load` for how they are made and why the load drops and
   re-adds the table's constraints), with the tallies written as 16 shards per group the way instances
   leave them; median and p95 of ``GET .../estimate`` over HTTP (overall, and grouped by region), and of
   the same estimate in this process (``estimation.estimate`` on a :class:`Store`: the store reads and the
   arithmetic without HTTP), and of the store reads alone, with their CPU time; the EXPLAIN ANALYZE of the
   estimate's reads. Goal: < 50 ms (it reads tally rows only: O(k) rows per shard and group).
3. **Database bytes per report** on PostgreSQL: the growth of the schema's tables (with TOAST) and indexes
   per stored report, after the bulk load.

``--quick`` uses fewer reports (10⁵ stored), recounts them as ``deniable verify`` does (``--verify`` on a
full run), and says so. ``--parts estimate`` takes the estimate figures alone. ``uptime`` is printed at the
start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ingest import EPSILON, K, Server, call_ms, ingest_rate, latency_ms, raw_decrypt_rates, seal_envelopes, uptime

from deniable.aggregator import estimation
from deniable.aggregator.database import PG_TALLY_SHARDS
from deniable.aggregator.harness import ServerProcess, ThrowawayDatabase
from deniable.aggregator.keyring import load_private_key
from deniable.aggregator.store import Store
from deniable.aggregator.verify import verify_store
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


def ingest_all(servers: list[Server], campaign_id: str, envelopes: list[dict[str, Any]], clients: int) -> float:
    """Reports/s of uploading every envelope (:func:`ingest.ingest_rate`), each of them accepted."""
    rate, accepted = ingest_rate(servers, campaign_id, envelopes, clients)
    assert accepted == len(envelopes), accepted
    return rate


def reports_constraints(conn: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """The constraints of ``reports`` (name, definition; primary key first, foreign key last) and the
    definitions of its other indexes, as the migrations left them."""
    constraints = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'reports'::regclass"
        " ORDER BY CASE contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 WHEN 'f' THEN 3 ELSE 2 END, conname"
    ).fetchall()
    indexes = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'reports'"
        " AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'reports'::regclass)"
    ).fetchall()
    return [(str(name), str(definition)) for name, definition in constraints], [str(d) for (d,) in indexes]


def bulk_load(conn: Any, campaign_id: str, n: int, chunk: int = 1_000_000) -> dict[str, float]:
    """``n`` reports of ``campaign_id`` written by SQL as the service would store them, with the tally shard
    rows and arrival counters :meth:`Store.ingest` keeps beside them; the seconds of each step.

    The rows: a 16-byte report id (``md5``) and a 32-byte pseudonym (``sha256``) of the row number, random-
    looking and distinct as the devices' are; round ``''``; groups ``{"region":"r0"}`` .. ``r7`` (the compact
    sorted JSON the store writes); a GRR report (the integer, as ``encode_report`` gives it) in [0, k); one
    received day. The tallies are a recount of these stored rows (``GROUP BY``), spread over the
    ``PG_TALLY_SHARDS`` shards of each key the way instances' connections leave them, and the arrivals one
    hour's shard rows: ``deniable verify`` finds them equal (checked below on a quick run).

    Why it finishes: inserting 10⁷ rows into two unique B-tree indexes on random keys (and a foreign-key
    check per row) took longer than 25 minutes here. So the load drops the table's constraints and indexes
    (read from the catalog, see :func:`reports_constraints`), inserts the rows with ``INSERT ... SELECT FROM
    generate_series`` in chunks, and adds them back with their exact definitions (each index built by one
    sort, the foreign key validated by one join). The schema afterwards is the migrated one, constraint for
    constraint. A B-tree built by a sort is packed tighter (90% leaf fill) than one grown by random inserts
    (about 70%), so the bytes per report printed from this load are a lower bound; the ingestion figure
    (``--stored`` through ingestion-sized loads) is the other side.
    """
    steps: dict[str, float] = {}
    start = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '512MB'")
    conn.execute("SET synchronous_commit = off")  # this session's commits only; the data is checkpointed below
    constraints, indexes = reports_constraints(conn)
    for name, _ in reversed(constraints):
        conn.execute(f'ALTER TABLE reports DROP CONSTRAINT "{name}"')
    for definition in indexes:
        conn.execute("DROP INDEX " + definition.split(" INDEX ", 1)[1].split(" ON ", 1)[0])
    t0 = time.perf_counter()
    for first in range(1, n + 1, chunk):
        last = min(n, first + chunk - 1)
        conn.execute(
            "INSERT INTO reports (campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day)"
            " SELECT %s, decode(md5('id' || i::text), 'hex'), '', sha256(('device' || i::text)::bytea),"
            " '{\"region\":\"r' || mod(i, 8)::text || '\"}', mod(hashtext(i::text) & 2147483647, %s)::text,"
            " '2026-12-01'"
            " FROM generate_series(%s::bigint, %s::bigint) AS i",
            (campaign_id, K, first, last),
        )
        print(f"  {last:,} rows inserted ({time.perf_counter() - t0:.0f} s)", flush=True)
    steps["insert rows"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for name, definition in constraints:
        conn.execute(f'ALTER TABLE reports ADD CONSTRAINT "{name}" {definition}')
    for definition in indexes:
        conn.execute(definition)
    steps["constraints and indexes"] = time.perf_counter() - t0
    print(f"  constraints and indexes back ({steps['constraints and indexes']:.0f} s): "
          + ", ".join(name for name, _ in constraints), flush=True)  # fmt: skip
    t0 = time.perf_counter()
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
            rows.append((campaign_id, "", field, value, shard, sum(part), json.dumps(part, separators=(",", ":"))))
    total = sum(tallies[("", "")])
    arrivals = [(campaign_id, "", "2026-12-01T08:00:00Z", shard,
                 total // PG_TALLY_SHARDS + (1 if shard < total % PG_TALLY_SHARDS else 0))
                for shard in range(PG_TALLY_SHARDS)]  # fmt: skip
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO tally_shards (campaign_id, round, group_field, group_value, shard, n, support_json)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        cursor.executemany(
            "INSERT INTO report_arrivals (campaign_id, round, hour, shard, n) VALUES (%s, %s, %s, %s, %s)", arrivals
        )
    steps["tallies (recount)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute("ANALYZE")
    steps["analyze"] = time.perf_counter() - t0
    steps["total"] = time.perf_counter() - start
    return steps


def relation_bytes(conn: Any) -> dict[str, int]:
    """Bytes of the schema's tables (heap and TOAST) and of their indexes, after a checkpoint."""
    conn.execute("CHECKPOINT")
    row = conn.execute(
        "SELECT COALESCE(SUM(pg_table_size(c.oid)), 0), COALESCE(SUM(pg_indexes_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')"
    ).fetchone()
    return {"tables": int(row[0]), "indexes": int(row[1])}


def explain_estimate(conn: Any, campaign_id: str) -> list[str]:
    """EXPLAIN ANALYZE of the two reads an estimate makes (the campaign with its report count, and the
    tally rows): each must be index scans of ``campaigns`` and ``tally_shards``, never of ``reports``."""
    plans = []
    for sql in (Store._SELECT_CAMPAIGNS + " WHERE id = %s",
                "SELECT group_value, n, support_json FROM tally_shards WHERE campaign_id = %s AND round = ''"
                " AND group_field = 'region' ORDER BY group_value"):  # fmt: skip
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, (campaign_id,)).fetchall()
        plans.append("\n".join("    " + str(r[0]) for r in rows))
    # tally_shards holds a few pages here, so the planner reads it whole; with many campaigns in it, the
    # estimate's reads are these index scans (the plan when sequential scans are ruled out):
    conn.execute("SET enable_seqscan = off")
    for sql in (Store._SELECT_CAMPAIGNS + " WHERE id = %s",
                "SELECT group_value, n, support_json FROM tally_shards WHERE campaign_id = %s AND round = ''"
                " AND group_field = 'region' ORDER BY group_value"):  # fmt: skip
        rows = conn.execute("EXPLAIN " + sql, (campaign_id,)).fetchall()
        plans.append("\n".join("    (no seq scan) " + str(r[0]) for r in rows if "Scan" in str(r[0])))
    conn.execute("RESET enable_seqscan")
    return plans


def ingestion(tmp: Path, database: str, shared: dict[str, str], servers: list[Server], args: Any,
              n_upload: int, rng: np.random.Generator) -> list[Server]:  # fmt: skip
    """Part 1: the ingestion figures; returns the two PostgreSQL instances."""
    sqlite_dir = tmp / "sqlite"
    sqlite_dir.mkdir()
    lite = Server(sqlite_dir, 1, 2)
    servers.append(lite)
    pg = [PgServer(tmp / f"pg-{i}", database, shared) for i in range(2)]
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
        "sqlite": ingest_all([lite], "bench-sqlite", envelopes["sqlite"], args.clients),
        "pg1": ingest_all([pg[0]], "bench-pg1", envelopes["pg1"], args.clients),
        "pg2": ingest_all(pg, "bench-pg2", envelopes["pg2"], args.clients),
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
    return pg


def estimates(server: Server, database: str, n_stored: int, repeats: int, check: bool) -> None:
    """Part 2 and 3: bulk-load ``n_stored`` reports, then the estimate latencies and the bytes per report."""
    import psycopg

    big = create(server, "bench-big")
    with psycopg.connect(database, autocommit=True) as conn:
        before = relation_bytes(conn)
        print(f"\nbulk-loading {n_stored:,} reports by SQL into PostgreSQL (load {os.getloadavg()[0]:.1f}) ...",
              flush=True)  # fmt: skip
        steps = bulk_load(conn, big.id, n_stored)
        after = relation_bytes(conn)
        plans = explain_estimate(conn, big.id)
    print("bulk load: " + ", ".join(f"{step} {seconds:.0f} s" for step, seconds in steps.items()))
    store = Store(database)
    try:
        if check:
            checks = [c for c in verify_store(store) if c.campaign_id == big.id]
            assert checks and checks[0].ok and checks[0].reports == n_stored, checks
            print(f"deniable verify's recount of the loaded campaign: {n_stored:,} reports, tallies equal")
        path = "/api/v1/campaigns/bench-big/estimate"
        status, body = server.request("GET", path, token=server.analyst)
        assert status == 200 and body["n"] == n_stored, body
        config = big
        overall = lambda: estimation.estimate(store, config, group_by=None, level=0.95, noise=None)  # noqa: E731
        grouped = lambda: estimation.estimate(store, config, group_by="region", level=0.95, noise=None)  # noqa: E731
        reads = lambda: (store.get_campaign(big.id), store.tallies(big.id))  # noqa: E731
        assert overall()["n"] == n_stored
        load = os.getloadavg()
        print(f"\nestimate latency on PostgreSQL, {n_stored:,} stored reports, {PG_TALLY_SHARDS} tally shards, "
              f"{repeats} requests each (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; goal < 50 ms):")  # fmt: skip
        by_region = path + "?group_by=region"
        for label, median, p95, cpu in (
            ("HTTP GET .../estimate", *latency_ms(server, path, repeats), None),
            ("HTTP GET .../estimate?group_by=region (8)", *latency_ms(server, by_region, repeats), None),
            ("in process: estimation.estimate, overall", *call_ms(overall, repeats)),
            ("in process: estimation.estimate, grouped", *call_ms(grouped, repeats)),
            ("in process: the store reads alone", *call_ms(reads, repeats)),
        ):
            cpu_text = "" if cpu is None else f", CPU {cpu:.1f} ms"
            print(f"  {label:44} median {median:6.1f} ms, p95 {p95:6.1f} ms{cpu_text}")
    finally:
        store.close()
    print("  EXPLAIN ANALYZE of the estimate's two reads (the campaign with its count; the tally rows):")
    for plan in plans:
        print(plan)
    grown = {part: after[part] - before[part] for part in after}
    total = sum(grown.values())
    print(f"\nPostgreSQL database size: {total / n_stored:.0f} bytes per report ({grown['tables'] / n_stored:.0f} "
          f"tables and TOAST, {grown['indexes'] / n_stored:.0f} indexes built by one sort each, packed tighter than "
          f"indexes grown by inserts; {total / 1e9:,.2f} GB for {n_stored:,})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer reports (a smoke run, not the figures)")
    parser.add_argument("--reports", type=int, help="envelopes uploaded per configuration (default 20,000)")
    parser.add_argument("--stored", type=int, help="reports stored for the estimate (default 10,000,000)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent upload connections (default 4)")
    parser.add_argument("--repeats", type=int, default=50, help="estimate requests timed per figure (default 50)")
    parser.add_argument("--parts", default="ingest,estimate",
                        help="which figures: ingest, estimate or both (default ingest,estimate)")  # fmt: skip
    parser.add_argument("--verify", action="store_true",
                        help="recount the loaded campaign as deniable verify does (on --quick runs always)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    n_upload = args.reports or (3_000 if args.quick else 20_000)
    n_stored = args.stored or (100_000 if args.quick else 10_000_000)
    rng = np.random.default_rng(2026)
    throwaway = ThrowawayDatabase(ADMIN_URL, prefix="deniable_bench")
    database = throwaway.url
    shared = {"kek": secrets.token_urlsafe(32), "admin_token": "admin-" + secrets.token_urlsafe(24),
              "analyst_token": "analyst-" + secrets.token_urlsafe(24),
              "issuer_token": "issuer-" + secrets.token_urlsafe(24)}  # fmt: skip
    servers: list[Server] = []
    print(f"uptime: {uptime()}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="deniable-bench-pg-") as tmp:
            if "ingest" in parts:
                pg = ingestion(Path(tmp), database, shared, servers, args, n_upload, rng)
            else:
                pg = [PgServer(Path(tmp) / f"pg-{i}", database, shared) for i in range(2)]
                servers.extend(pg)
            if "estimate" in parts:
                estimates(pg[1], database, n_stored, args.repeats, args.verify or args.quick)
            if args.quick:
                print("(--quick: fewer reports than the stated goals assume; run without it for the figures)")
    finally:
        for server in servers:
            server.stop()
        throwaway.drop()
        print(f"uptime: {uptime()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
