"""Local against central differential privacy: how much accuracy does distrust of the curator cost?

Dwork (2006) compares randomized response on each device (no trusted party; the count's error grows like
√n·e^(ε/2)/(e^ε−1)) with a trusted curator adding Laplace noise to the exact count (error √2/ε, whatever
n is). This script simulates both on the same populations with ``deniable.aggregator.tools.compare`` (seeded
numpy simulation; devices themselves use exact samplers) and prints, for several n and ε, the analytic and
measured standard deviations and their ratio. ``--plot FILE.png`` also draws error against n.

    .venv/bin/python examples/local_vs_central.py --trials 200 --plot /tmp/local-vs-central.png
"""

from __future__ import annotations

import argparse

import numpy as np

from deniable.aggregator.tools.compare import compare, error_curves
from deniable.aggregator.tools.plots import plot_error_curves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=float, default=0.3, help="true share answering yes (default 0.3)")
    parser.add_argument("--trials", type=int, default=200, help="simulated runs per setting (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="numpy seed (default 0)")
    parser.add_argument("--plot", help="write the error-against-n figure to this file")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    print(f"{'n':>9}{'ε':>6}{'local sd':>11}{'(measured)':>12}{'central sd':>12}{'(measured)':>12}{'ratio':>9}")
    for epsilon in (0.5, 1.0, 2.0):
        for n in (1_000, 100_000, 10_000_000):
            result = compare(n=n, p=args.p, epsilon=epsilon, k=2, trials=args.trials, rng=rng)
            print(
                f"{n:>9}{epsilon:>6g}{result.local.analytic_sd:>11.1f}{result.local.measured_sd:>12.1f}"
                f"{result.laplace.analytic_sd:>12.3f}{result.laplace.measured_sd:>12.3f}"
                f"{result.ratio_analytic:>9.0f}"
            )
    paper = compare(n=100_000, p=args.p, epsilon=1.0, k=2, trials=args.trials, rng=rng)
    print(
        f"\nDwork 2006 at n = 100000, ε = 1: local sd {paper.local.analytic_sd:.0f}, central "
        f"{paper.laplace.analytic_sd:.2f}, a factor of {paper.ratio_analytic:.0f} (measured "
        f"{paper.ratio_measured:.0f} ± {paper.ratio_stderr:.0f})"
    )
    print("the price of the central model is trust: its server holds every raw answer")
    if args.plot:
        curves = error_curves(epsilons=[0.5, 1.0, 2.0], p=args.p, k=2, trials=args.trials, rng=rng)
        print(f"plot written to {plot_error_curves(curves, args.plot, title='local vs central count error')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
