"""Amplification-by-shuffling bounds: their values and how long each takes.

    .venv/bin/python benchmarks/amplification.py

Prints, for a grid of (n, ε₀, δ), the closed form of FMT 2021 Thm 3.1 (authors' form), the numerical bound
(FMT 2021 App. E) and, up to n = 10⁶, the ε of shuffled binary randomized response from its exact law,
with the time of each. Goal: the numerical bound for n = 10⁷ under 1 s (median of 5, after scipy is loaded).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from deniable.shared.amplification import binary_rr_epsilon, closed_form_epsilon, closed_form_valid, numerical_epsilon


def timed(fn: Callable[..., float], *args: Any, repeats: int = 1) -> tuple[float, float]:
    times, value = [], 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - t0)
    return value, statistics.median(times)


def main() -> None:
    numerical_epsilon(1000, 1.0, 1e-6)  # load scipy.special before timing
    print(f"{'n':>10} {'ε₀':>4} {'δ':>6}  {'closed form':>12}  {'numerical':>10} {'time':>8}  "
          f"{'binary RR':>10} {'time':>8}")
    for n in (10**4, 10**5, 10**6, 10**7):
        for e0 in (1.0, 2.0, 4.0):
            delta = 1e-6
            closed = f"{closed_form_epsilon(n, e0, delta):.4f}" if closed_form_valid(n, e0, delta) else "invalid"
            num, t_num = timed(numerical_epsilon, n, e0, delta, repeats=5 if n == 10**7 else 1)
            if n <= 10**6:
                rr, t_rr = timed(binary_rr_epsilon, n, e0, delta)
                rr_text = f"{rr:10.4f} {t_rr * 1e3:6.0f} ms"
            else:
                rr_text = f"{'-':>10} {'':>9}"
            print(f"{n:>10,} {e0:>4g} {delta:>6g}  {closed:>12}  {num:10.4f} {t_num * 1e3:6.0f} ms  {rr_text}")


if __name__ == "__main__":
    main()
