"""The central accountant against Google's dp-accounting: how much tighter is a well-kept PLD accountant?

    .venv/bin/python benchmarks/accounting.py [--delta 1e-6]

For sequences of Laplace, Gaussian and Poisson-subsampled releases, prints our total ε at δ (the best of
sequential, zCDP and KOV/DRV advanced composition, ``deniable.shared.accounting``), dp-accounting's (the
tighter of its PLD and RDP accountants), and the ratio ours/theirs. The tests assert ratio ≥ 1 (we are never
more optimistic); the ratio says what running dp-accounting at run time would buy (docs/central.md).
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import dp_accounting
from dp_accounting import pld, rdp

from deniable.shared.accounting import Cost, compose, subsampled_epsilon

E = dp_accounting


def theirs(event: dp_accounting.DpEvent, delta: float) -> float:
    found = []
    for accountant in (pld.PLDAccountant(), rdp.RdpAccountant()):
        if accountant.supports(event):
            accountant.compose(event)
            found.append(accountant.get_epsilon(delta))
    return min(found)


def cases() -> list[tuple[str, list[Cost], dp_accounting.DpEvent]]:
    lap = E.LaplaceDpEvent
    return [
        ("10 × Laplace ε=1", [Cost.pure(1)] * 10, E.SelfComposedDpEvent(lap(1.0), 10)),
        ("50 × Laplace ε=0.1", [Cost.pure(0.1)] * 50, E.SelfComposedDpEvent(lap(10.0), 50)),
        ("1000 × Laplace ε=0.01", [Cost.pure(0.01)] * 1000, E.SelfComposedDpEvent(lap(100.0), 1000)),
        ("1 × Gaussian σ=3", [Cost.zcdp(Fraction(1, 18))], E.GaussianDpEvent(3.0)),
        ("20 × Gaussian σ=10", [Cost.zcdp(Fraction(1, 200))] * 20, E.SelfComposedDpEvent(E.GaussianDpEvent(10.0), 20)),
        ("30 × Laplace ε=1, q=0.05", [Cost.pure(subsampled_epsilon(1, 0.05))] * 30,
         E.SelfComposedDpEvent(E.PoissonSampledDpEvent(0.05, lap(1.0)), 30)),
        ("Laplace ε=0.5 + Gaussian σ=4", [Cost.pure(0.5), Cost.zcdp(Fraction(1, 32))],
         E.ComposedDpEvent([lap(2.0), E.GaussianDpEvent(4.0)])),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    print(f"total ε at δ = {args.delta:g}")
    print(f"{'sequence':34} {'ours':>9} {'rule':>10} {'dp-acct':>9} {'ratio':>7} {'ours ms':>8} {'theirs ms':>9}")
    for name, costs, event in cases():
        t0 = time.perf_counter()
        totals = compose(costs)
        ours = totals.epsilon_at(args.delta)
        rules = totals.rules_at(args.delta)
        t1 = time.perf_counter()
        reference = theirs(event, args.delta)
        t2 = time.perf_counter()
        assert ours is not None
        rule = min((v, k) for k, v in rules.items() if v is not None)[1]
        print(
            f"{name:34} {ours:9.4f} {rule:>10} {reference:9.4f} {ours / reference:7.3f}"
            f" {1e3 * (t1 - t0):8.1f} {1e3 * (t2 - t1):9.1f}"
        )


if __name__ == "__main__":
    main()
