"""Survey batch kernel benchmark: one partition of a survey export, recounted and cross-tabulated.

    .venv/bin/python benchmarks/batch_survey.py [--rows N] [--repeat R]

Builds one partition (default 1,000,000 rows, the export's file size) of a per_question survey in the
export layout (``schema_of``): ``smoke`` (choice, GRR, k = 16), ``diet`` (choice, OUE, k = 8, optional,
a fifth skipped) and ``age`` (number), one group field; then times the per-partition kernel that every
Dask worker runs (:func:`deniable.aggregator.batch.kernel.tally_table`, in this process, no cluster): the
recount with the service check (overall and per group, every question), and the same plus the
cross-tabulation ``--cross smoke,diet`` per group. Prints wall and CPU time (``time.process_time``) per run,
the median of ``--repeat`` runs, rows per CPU second, and ``uptime`` at the start and the end (the machine
may be shared: CPU time is the figure load inflates least). The per-worker throughput of ``deniable batch``
is this rate; the cluster adds one task per file (``benchmarks/batch.py`` measures it for one question).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from ingest import call_ms, uptime

from deniable.aggregator.batch.export import group_column, schema_of
from deniable.aggregator.batch.kernel import Plan, tally_table
from deniable.shared.descriptor import CampaignConfig

QUESTIONS = [
    {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": [f"s{i}" for i in range(16)], "mechanism": "grr"},
    {"id": "diet", "text": "Diet?", "kind": "choice", "categories": [f"d{i}" for i in range(8)], "mechanism": "oue",
     "optional": True},
    {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


def partition(config: CampaignConfig, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    smoke, diet, age = (q.build_mechanism() for q in config.questions)
    arrays: dict[str, pa.Array] = {
        "round": pa.array(np.full(n, "", dtype=object), pa.string()),
        "day": pa.array(np.full(n, 20_000, dtype=np.int32), pa.date32()),
        group_column("region"): pa.array(rng.choice(["north", "south", "east", "west"], size=n), pa.string()),
    }
    arrays["q_smoke__state"] = pa.array(np.full(n, "answered", dtype=object), pa.string())
    arrays["q_smoke__report"] = pa.array(np.asarray(smoke.simulate(rng.integers(0, 16, size=n), rng=rng)), pa.int64())
    skipped = rng.random(n) < 0.2
    arrays["q_diet__state"] = pa.array(np.where(skipped, "skipped", "answered").astype(object), pa.string())
    packed = np.packbits(diet.simulate(rng.integers(0, 8, size=n), rng=rng), axis=1, bitorder="little")
    masks = pa.FixedSizeBinaryArray.from_buffers(pa.binary(1), n, [None, pa.py_buffer(packed.tobytes())])
    arrays["q_diet__report"] = pc_where(skipped, masks)
    arrays["q_age__state"] = pa.array(np.full(n, "answered", dtype=object), pa.string())
    arrays["q_age__report"] = pa.array(rng.integers(0, age.outputs, size=n), pa.int64())
    schema = schema_of(config)
    return pa.table([arrays[name] for name in schema.names], schema=schema)


def pc_where(skipped: np.ndarray, values: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.if_else(pa.array(skipped), pa.scalar(None, values.type), values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("uptime:", uptime())
    config = CampaignConfig.create_survey(
        id="bench-survey", title="Bench", questions=QUESTIONS, epsilon=6.0, split="per_question",
        group_fields=["region"], public_key=bytes(range(1, 33)),
    )  # fmt: skip
    table = partition(config, args.rows, seed=1)
    print(f"partition: {args.rows:,} rows, {table.nbytes / 1e6:.0f} MB in memory")
    runs = {
        "recount + check (every question, overall and 4 groups)": Plan(descriptor=config.to_json()),
        "recount + check + cross smoke × diet by region": Plan(descriptor=config.to_json(), by=("region",),
                                                               cross=("smoke", "diet")),
    }  # fmt: skip
    for name, plan in runs.items():
        wall_ms, _, cpu_ms = call_ms(lambda plan=plan: tally_table(table, plan), args.repeat)
        wall, cpu = wall_ms / 1000, cpu_ms / 1000
        print(f"{name}: median of {args.repeat}: wall {wall:.2f} s, CPU {cpu:.2f} s: "
              f"{args.rows / cpu / 1e6:.2f} M rows per CPU second ({args.rows / wall / 1e6:.2f} M per wall second); "
              f"load {os.getloadavg()[0]:.2f}")
    print("uptime:", uptime())


if __name__ == "__main__":
    main()
