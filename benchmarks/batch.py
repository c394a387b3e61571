"""Batch analysis benchmark: ``deniable batch`` over N exported reports on a Dask LocalCluster.

    .venv/bin/python benchmarks/batch.py [--reports N] [--mechanism grr|oue|olh|binary-rr] [--k K]

Writes N simulated randomized reports (default 10,000,000, GRR k = 16, two group fields) in the export
layout of ``deniable export`` (same schema, same writer, 1,000,000 rows per file), then times
:func:`deniable.aggregator.batch.run.run_batch` (the full recount with the service check, plus a
cross-tabulation of both group fields) with 1 worker and with 2 workers, and prints reports/s per worker
and the ratio 2 workers / 1. The machine may be shared: ``uptime`` is printed at the start and the end, the
load average after each run, and the CPU time the worker processes used (``time.process_time`` in each,
through ``client.run``) beside the wall time, so that reports per worker CPU second, which load does not
inflate, can be read next to the wall-clock rate, which it does. The cluster is started before the clock
starts (its start-up is printed apart). Export from a real store is exercised by the tests; this generator
skips ingestion, which would take hours at N = 10⁷ and measure something else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from ingest import uptime

from deniable.aggregator.batch.export import EXPORT_FORMAT, group_column, schema_of
from deniable.aggregator.batch.run import close_client, local_client, run_batch
from deniable.shared.descriptor import CampaignConfig

ROWS_PER_FILE = 1_000_000


def _write_export(directory: Path, config: CampaignConfig, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mechanism = config.build_mechanism()
    schema = schema_of(config)
    (directory / "reports").mkdir(parents=True)
    files = []
    for start in range(0, n, ROWS_PER_FILE):
        size = min(ROWS_PER_FILE, n - start)
        simulated = mechanism.simulate(rng.integers(0, config.k, size=size), rng=rng)
        if mechanism.name == "olh":
            columns = {"seed": pa.array(simulated.seeds, pa.uint64()), "y": pa.array(simulated.y, pa.int64())}
        elif mechanism.name == "oue":
            packed = np.packbits(simulated, axis=1, bitorder="little")
            columns = {"report": pa.array([bytes(row) for row in packed], pa.binary(packed.shape[1]))}
        else:
            columns = {"report": pa.array(np.asarray(simulated, dtype=np.int64))}
        arrays = {
            "round": pa.array(np.full(size, "", dtype=object), pa.string()),
            "day": pa.array(np.full(size, 20_000, dtype=np.int32), pa.date32()),
            group_column("country"): pa.array(rng.choice(["de", "fr", "nl", "us"], size=size), pa.string()),
            group_column("device"): pa.array(rng.choice(["ios", "android"], size=size), pa.string()),
            **columns,
        }
        name = f"reports/part-{len(files):05d}.parquet"
        pq.write_table(pa.table([arrays[c] for c in schema.names], schema=schema), directory / name,
                       compression="zstd", row_group_size=131_072)
        files.append(name)
    manifest = {"format": EXPORT_FORMAT, "campaign_id": config.id, "mechanism": mechanism.name, "k": config.k,
                "group_fields": list(config.group_fields), "columns": schema.names, "n_reports": n,
                "files": files, "tallies": []}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    (directory / "descriptor.json").write_text(json.dumps(config.to_json()))


def _worker_cpu(client: Any) -> float:
    """CPU seconds (user + system) every worker process of ``client`` has used so far, summed."""
    return float(sum(client.run(time.process_time).values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000_000)
    parser.add_argument("--mechanism", default="grr")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = CampaignConfig.create(
        id="bench-batch", question="q", categories=[f"c{i}" for i in range(args.k)], epsilon=1.0,
        mechanism=args.mechanism, group_fields=["country", "device"], public_key=bytes(range(1, 33)),
    )
    print(f"uptime: {uptime()} ({os.cpu_count()} cores)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "export"
        t0 = time.perf_counter()
        _write_export(directory, config, args.reports, seed=1)
        print(f"wrote {args.reports:,} {args.mechanism} reports (k = {args.k}) in "
              f"{time.perf_counter() - t0:.1f} s")
        rates: dict[tuple[int, str], float] = {}
        cpu_rates: dict[tuple[int, str], float] = {}
        for workers in (1, 2):
            t0 = time.perf_counter()
            client = local_client(workers)
            print(f"{workers} worker{'s' if workers > 1 else ''}: cluster up in {time.perf_counter() - t0:.1f} s")
            for label, by in (("recount + check", ()), ("cross-tab country × device", ("country", "device"))):
                times, cpus, here, loads = [], [], [], []
                for _ in range(args.repeats):
                    cpu0, own0, t0 = _worker_cpu(client), time.process_time(), time.perf_counter()
                    run_batch(directory, by=by, client=client)
                    times.append(time.perf_counter() - t0)
                    here.append(time.process_time() - own0)
                    cpus.append(_worker_cpu(client) - cpu0)
                    loads.append(os.getloadavg()[0])
                wall, cpu = float(np.median(times)), float(np.median(cpus))
                rate = args.reports / wall
                rates[(workers, label)] = rate
                cpu_rates[(workers, label)] = args.reports / cpu
                print(f"  {label:28} median {wall:6.2f} s wall  {rate:12,.0f} reports/s  "
                      f"{rate / workers:12,.0f} reports/s per worker")
                print(f"  {'':28} workers' CPU {cpu:6.2f} s ({cpu / wall / workers:.0%} of {workers} core"
                      f"{'s' if workers > 1 else ''} during the run)  {args.reports / cpu:12,.0f} reports per "
                      f"worker CPU second; client + scheduler CPU {float(np.median(here)):.2f} s; load "
                      f"{min(loads):.1f}-{max(loads):.1f}")  # fmt: skip
            close_client(client)
        for label in ("recount + check", "cross-tab country × device"):
            print(f"2 workers / 1 ({label}): {rates[(2, label)] / rates[(1, label)]:.2f}× wall; per worker CPU "
                  f"second {cpu_rates[(2, label)] / cpu_rates[(1, label)]:.2f}× (1.00: no work lost to splitting)")
    print(f"uptime: {uptime()}")


if __name__ == "__main__":
    main()
