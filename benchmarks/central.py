"""Central releases: one discrete Gaussian draw, and a Gaussian release over 10⁶ stored reports.

    .venv/bin/python benchmarks/central.py [--reports 1000000] [--k 16] [--draws 5000] [--repeat 20]

Goals (issue 14): one exact discrete Gaussian draw (``secrets``, CKS 2020 Alg. 3) under 200 µs median at
σ = 10; a Gaussian release (calibration, accountant, one draw per bin, the stored body) over 10⁶ stored
reports under 50 ms. A release reads the campaign's tallies (O(k), whatever n), so n enters only through
the counts; the tally row is written straight into a fresh store to skip ingesting 10⁶ envelopes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from deniable.aggregator import central
from deniable.shared.accounting import Budget
from deniable.shared.sampling import discrete_gaussian


def draws(count: int, sigma2: Fraction) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        discrete_gaussian(sigma2)
        times.append(time.perf_counter() - start)
    return times


def release_times(reports: int, k: int, repeat: int) -> list[float]:
    from deniable.aggregator.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "deniable.sqlite3")
        with store.transaction() as conn:
            store.insert_campaign(conn, "c", {"id": "c"}, trust_model="central", budget=None, adjacency="add-remove")
            support = [reports // k + (1 if i < reports % k else 0) for i in range(k)]
            conn.execute(
                "INSERT INTO tallies (campaign_id, round, group_field, group_value, n, support_json)"
                " VALUES ('c', '', '', '', ?, ?)",
                (reports, json.dumps(support)),
            )
        budget = Budget.zcdp(1000)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            with store.transaction() as conn:
                central.release(
                    conn, "c", epsilon=1.0, k=k, noise="gaussian", delta=1e-6, budget=budget, refresh=True
                )
            times.append(time.perf_counter() - start)
        store.close()
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    one = draws(args.draws, Fraction(100))
    print(
        f"discrete Gaussian σ = 10: median {1e6 * statistics.median(one):.1f} µs, mean {1e6 * statistics.mean(one):.1f}"
        f" µs over {args.draws} draws (goal < 200 µs median)"
    )
    times = release_times(args.reports, args.k, args.repeat)
    print(
        f"Gaussian release over {args.reports:,} stored reports, k = {args.k}: median "
        f"{1e3 * statistics.median(times):.1f} ms, max {1e3 * max(times):.1f} ms over {args.repeat} (goal < 50 ms)"
    )


if __name__ == "__main__":
    main()
