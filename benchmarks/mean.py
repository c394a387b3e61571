"""Number questions: simulate + estimate of a mean at n = 1,000,000, against a bare numpy implementation.

    .venv/bin/python benchmarks/mean.py [--n N] [--epsilon E]

For each mechanism (Duchi, Piecewise on its lattice, Hybrid) prints the median of 3 runs of
``simulate`` + ``tally`` + ``estimate`` (the product's path: exact tallies, the shipped variance) beside the
same mechanism written directly in numpy (continuous output, float mean only), and their ratio (goal ≤ 2×),
then the secure ``randomize`` of one answer (median µs; the first call of a grid point computes its exact
law and is printed apart), and the survey-level estimate of the same tally under the sampling split (the
answerers' mean with the sampling variance, :mod:`deniable.shared.survey_estimate`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from deniable.shared.mechanisms.mean import Duchi, Hybrid, NumberRange, Piecewise
from deniable.shared.survey_estimate import estimate_mean


def bare(name: str, x: np.ndarray, epsilon: float, rng: np.random.Generator) -> float:
    """The mechanism in plain numpy floats (no exact law, no lattice): the floor of what it can cost."""
    if name == "duchi":
        c = (math.exp(epsilon) + 1) / (math.exp(epsilon) - 1)
        up = rng.random(x.size) < 0.5 + x * (math.exp(epsilon) - 1) / (2 * (math.exp(epsilon) + 1))
        return float(np.where(up, c, -c).mean())
    s = math.exp(epsilon / 2)
    c = (s + 1) / (s - 1)
    left = (s * x - 1) / (s - 1)
    right = left + c - 1
    centre = rng.random(x.size) < s / (s + 1)
    w = rng.random(x.size)
    inner = left + w * (right - left)
    outer = -c + w * (c + 1)
    outer = np.where(outer < left, outer, outer + (right - left))
    pm = np.where(centre, inner, outer)
    if name == "piecewise":
        return float(pm.mean())
    c_d = (math.exp(epsilon) + 1) / (math.exp(epsilon) - 1)
    du = np.where(rng.random(x.size) < 0.5 + x * (math.exp(epsilon) - 1) / (2 * (math.exp(epsilon) + 1)), c_d, -c_d)
    return float(np.where(rng.random(x.size) < 1 - 1 / s, pm, du).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    steps = 100
    grid = NumberRange(0, 100, steps)
    rng = np.random.default_rng(1)
    js = rng.integers(0, steps + 1, size=args.n)
    x = js * (2 / steps) - 1
    print(f"n = {args.n:,}, ε = {args.epsilon:g}, grid of {steps} steps")
    for cls in (Duchi, Piecewise, Hybrid):
        mechanism = cls(args.epsilon, steps)
        ours, floor = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            estimate = mechanism.estimate(mechanism.tally(mechanism.simulate(js, rng=rng)), grid)
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            bare(mechanism.name, x, args.epsilon, rng)
            floor.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        mechanism.randomize(37)
        first = time.perf_counter() - t0
        secure = []
        for _ in range(200):
            t0 = time.perf_counter()
            mechanism.randomize(37)
            secure.append(time.perf_counter() - t0)
        tally = mechanism.tally(mechanism.simulate(js, rng=rng))
        t0 = time.perf_counter()
        survey = estimate_mean("age", mechanism, tally, grid, split="sampling", population=3 * args.n)
        survey_ms = (time.perf_counter() - t0) * 1e3
        a, b = statistics.median(ours), statistics.median(floor)
        print(f"  {mechanism.name:10} deniable {a:6.3f} s  bare numpy {b:6.3f} s  ratio {a / b:4.2f}×  "
              f"(mean {estimate.mean:.2f} ± {estimate.stderr:.3f})  randomize {statistics.median(secure) * 1e6:6.1f} µs"
              f" (first call at a grid point {first * 1e3:.0f} ms)")
        print(f"  {'':10} survey estimate of the same tally under the sampling split (1 of 3 questions): "
              f"{survey_ms:.2f} ms (mean {survey.mean:.2f} ± {survey.stderr:.3f})")


if __name__ == "__main__":
    main()
