"""App telemetry with k categories and a group field: which feature do people use most, per platform?

Every device reports its most-used feature (one of k) under ε-local differential privacy, with its
platform as a public group field. ``"mechanism": "auto"`` lets the campaign pick the lowest-variance
mechanism for (k, ε): generalized randomized response for small k, optimized local hashing or unary
encoding for large k (Wang et al. 2017). The aggregator estimates the count of every feature, overall
and per platform, each with a standard error and a confidence interval.

    .venv/bin/python examples/app_telemetry.py --n 6000 --k 8 --epsilon 2
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from deniable.aggregator.harness import running_server
from deniable.client.fleet import simulate_fleet

CAMPAIGN = "top-feature-2026"
PLATFORMS = ["android", "ios", "web"]


def _table(title: str, body: dict, truth: dict[str, int]) -> None:
    print(f"\n{title} (n = {body['n']}, mechanism {body['mechanism']})")
    print(f"{'feature':<12}{'true':>7}{'estimate':>10}{'± stderr':>10}{'95% CI':>22}")
    for row in body["categories"]:
        low, high = row["ci"]
        print(
            f"{row['category']:<12}{truth.get(row['category'], 0):>7}{row['count']:>10.1f}"
            f"{row['stderr']:>10.1f}{f'[{low:.0f}, {high:.0f}]':>22}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000, help="devices (default 6000)")
    parser.add_argument("--k", type=int, default=8, help="number of features (default 8)")
    parser.add_argument("--epsilon", type=float, default=2.0, help="privacy parameter (default 2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated population")
    args = parser.parse_args(argv)

    features = [f"feature-{j}" for j in range(args.k)]
    rng = np.random.default_rng(args.seed)
    popularity = 1.0 / np.arange(1, args.k + 1)  # Zipf-like: a few features dominate
    chosen = rng.choice(args.k, size=args.n, p=popularity / popularity.sum())
    platform = rng.choice(len(PLATFORMS), size=args.n, p=[0.5, 0.3, 0.2])
    values = [features[j] for j in chosen]
    groups = [{"platform": PLATFORMS[g]} for g in platform]

    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp) / "data", workers=1) as server:
        config = server.call(
            "POST",
            "/api/v1/campaigns",
            role="admin",
            body={
                "id": CAMPAIGN,
                "question": "Which feature did you use most this week?",
                "categories": features,
                "epsilon": args.epsilon,
                "mechanism": "auto",
                "group_fields": ["platform"],
            },
        )
        print(f"k = {args.k}, ε = {args.epsilon:g}: the campaign chose {config['mechanism']}")
        fleet = simulate_fleet(server.url, CAMPAIGN, values, groups)
        print(f"{fleet.accepted} devices reported in {fleet.seconds:.1f}s")
        overall = server.call("GET", f"/api/v1/campaigns/{CAMPAIGN}/estimate", role="analyst")
        by_platform = server.call("GET", f"/api/v1/campaigns/{CAMPAIGN}/estimate?group_by=platform", role="analyst")

    _table("all platforms", overall, {f: values.count(f) for f in features})
    for name, body in sorted(by_platform["groups"].items()):
        truth = {
            f: sum(1 for v, g in zip(values, groups, strict=True) if v == f and g["platform"] == name) for f in features
        }
        _table(f"platform = {name}", body, truth)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
