"""Estimates of a 20-question survey with 10⁶ stored reports: goal under 50 ms (issue 13).

    .venv/bin/python benchmarks/survey.py [--n 1000000] [--split sampling|per_question]

Builds a real store (SQLite, a temporary data dir) holding n reports of a 20-question local survey (7
choice, 7 multi-select, 6 number questions), ingested through ``Store.ingest`` in batches, each report's
tally cells from :func:`deniable.aggregator.survey_tally.report_support` of a real randomized answer (one
question per report under ``sampling``; the answers drawn with a seeded generator, randomized by the
mechanisms' exact device randomizers from a seeded ``randbelow``, one per distinct answer pattern cached,
since ingest, not randomization, is not what is measured). Then prints the median and the maximum of 50
estimates of every question, in process (``survey_local_estimate``) and over the Flask route (the JSON the
API serves), beside the goal, and the time the store took to build. The estimate reads one tally row and
costs O(questions · k): its time does not grow with n.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from deniable.aggregator import survey_tally
from deniable.aggregator.api.app import DATABASE_NAME, create_app
from deniable.aggregator.store import ReportRow, Store
from deniable.aggregator.survey_estimates import survey_local_estimate
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.sampling import seeded_randbelow
from deniable.shared.survey import randomize_answers

GOAL_MS = 50.0


def questions() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(7):
        out.append({"id": f"c{i}", "text": f"choice {i}?", "kind": "choice",
                    "categories": [f"a{j}" for j in range(2 + i)]})  # fmt: skip
    for i in range(7):
        out.append({"id": f"m{i}", "text": f"multi {i}?", "kind": "multi", "options": [f"o{j}" for j in range(8)],
                    "max_selected": 3})  # fmt: skip
    for i in range(6):
        out.append({"id": f"v{i}", "text": f"number {i}?", "kind": "number", "range": [0, 100]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--split", choices=("sampling", "per_question"), default="sampling")
    parser.add_argument("--batch", type=int, default=20_000)
    args = parser.parse_args()
    token = "bench-admin-token-" + os.urandom(8).hex()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"DATA_DIR": tmp, "ADMIN_TOKEN": token, "ANALYST_TOKEN": token + "-analyst"})
        client = app.test_client()
        auth = {"Authorization": f"Bearer {token}"}
        created = client.post("/api/v1/campaigns", headers=auth, json={
            "id": "bench", "title": "Benchmark", "questions": questions(), "epsilon": 2.0, "split": args.split})
        assert created.status_code == 201, created.json
        config = CampaignConfig.from_json(created.json)
        qs = config.questions
        width = survey_tally.width(config)
        print(f"{len(qs)} questions ({args.split}), tally width {width} cells; building a store of {args.n:,} "
              "reports …", flush=True)  # fmt: skip
        rng = np.random.default_rng(1)
        randbelow = seeded_randbelow(rng)
        supports: list[tuple[int, ...]] = []
        for _ in range(512):  # a pool of real randomized reports, reused (ingest is not what is measured)
            answers = {q.id: q.dummy for q in qs}
            drawn = int(rng.integers(0, len(qs))) if args.split == "sampling" else None
            reports = randomize_answers(qs, config.split.mode, answers, drawn=drawn, randbelow=randbelow)
            supports.append(survey_tally.report_support(config, reports))
        store = Store(Path(tmp) / DATABASE_NAME)
        started = time.perf_counter()
        done = 0
        while done < args.n:
            size = min(args.batch, args.n - done)
            rows = [
                ReportRow(os.urandom(16).hex(), os.urandom(32).hex(), {}, "{}", supports[(done + i) % len(supports)])
                for i in range(size)
            ]
            store.ingest("bench", rows, k=width, group_fields=())
            done += size
        built = time.perf_counter() - started
        print(f"store built in {built:.1f} s ({args.n / built:,.0f} reports/s)", flush=True)
        timings, route = [], []
        for _ in range(50):
            t0 = time.perf_counter()
            body = survey_local_estimate(store, config, question=None, group_by=None, level=0.95, round_="")
            timings.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            served = client.get("/api/v1/campaigns/bench/estimate", headers=auth)
            route.append((time.perf_counter() - t0) * 1e3)
        assert body["n"] == args.n and len(body["questions"]) == len(qs)
        assert served.status_code == 200 and served.json["n"] == args.n
        median, worst = statistics.median(timings), max(timings)
        print(f"estimate of all {len(qs)} questions at n = {args.n:,}: median {median:.1f} ms, max {worst:.1f} ms "
              f"(goal < {GOAL_MS:g} ms: {'met' if median < GOAL_MS else 'NOT met'}, {median / GOAL_MS:.2f}× the goal)")
        print(f"the same over the API route (Flask test client, auth, JSON): median {statistics.median(route):.1f} ms, "
              f"max {max(route):.1f} ms")
        store.close()
    print(f"machine load average: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores")


if __name__ == "__main__":
    sys.exit(main())
