"""Exact coverage of a count interval from the law of the support count (the issue-10 grid, in one place).

For GRR, OUE, OLH and binary RR with independent respondents, the support count of category v is
S_v ~ Bin(n_v, p*) + Bin(n − n_v, q*) (FORMULAS part 2, §3.1), so the coverage of an interval rule
[L(s), U(s)] for a category holding n_v respondents is Σ_s P(S_v = s)·1[L(s) ≤ n_v ≤ U(s)]: no
simulation needed (it is the limit of the 4,000 seeded runs per cell the issue asks for). This module
computes that sum for any vectorized rule (:func:`category_coverage`), over the data sets of the grid
(:func:`counts_of`: uniform, Zipf(1.1), point mass, by largest-remainder rounding), and two bounds on the
coverage a rule keeping every count ≥ 0.93 must have: :func:`least_coverage`, which no deterministic
confidence procedure at all can beat, and :func:`lightest_window`, which no interval whose endpoints are
monotone in S_v can beat. ``benchmarks/intervals.py``
prints the grid with it and ``tests/unit/test_intervals.py`` checks the worst cells with it.

numpy only (binomial pmfs from ``math.lgamma``, each truncated below 10⁻¹⁶ of mass): an analyst/aggregator
tool, never a device one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

__all__ = [
    "DISTRIBUTIONS",
    "FLOOR",
    "MEAN_GOAL",
    "CellCoverage",
    "IntervalRule",
    "binomial_pmf",
    "category_coverage",
    "cell_coverage",
    "counts_of",
    "least_coverage",
    "lightest_window",
    "support_law",
    "wald_interval",
]

#: The grid's goal (issue 10, item 5): every category at least FLOOR, the mean at most MEAN_GOAL.
FLOOR, MEAN_GOAL = 0.93, 0.975

#: The data sets of the grid.
DISTRIBUTIONS: tuple[str, ...] = ("uniform", "zipf", "point")

#: An interval rule: (support counts, n, p*, q*, level) → (lower, upper), vectorized over the counts.
IntervalRule = Callable[[Any, int, float, float, float], "tuple[FloatArray, FloatArray]"]


def binomial_pmf(m: int, p: float) -> tuple[int, FloatArray]:
    """(first value, probabilities) of Bin(m, p) on the values holding all but ~10⁻¹⁶ of its mass."""
    import numpy as np

    if m == 0 or p <= 0.0:
        return 0, np.array([1.0])
    if p >= 1.0:
        return m, np.array([1.0])
    mean, sd = m * p, math.sqrt(m * p * (1 - p))
    low = max(int(mean - 10 * sd) - 40, 0)
    high = min(int(mean + 10 * sd) + 40, m)
    x = np.arange(low, high + 1)
    whole = math.lgamma(m + 1)
    log_choose = np.array([whole - math.lgamma(j + 1) - math.lgamma(m - j + 1) for j in range(low, high + 1)])
    pmf = np.exp(log_choose + x * math.log(p) + (m - x) * math.log1p(-p))
    keep = np.nonzero(pmf > 1e-18 * pmf.max())[0]
    return low + int(keep[0]), pmf[keep[0] : keep[-1] + 1]


def support_law(n: int, nv: int, p: float, q: float) -> tuple[IntArray, FloatArray]:
    """(values, probabilities) of S_v = Bin(n_v, p) + Bin(n − n_v, q)."""
    import numpy as np

    a0, a = binomial_pmf(nv, p)
    b0, b = binomial_pmf(n - nv, q)
    pmf = np.maximum(np.convolve(a, b), 0.0)
    values: IntArray = a0 + b0 + np.arange(pmf.size, dtype=np.int64)
    return values, pmf


def counts_of(dist: str, n: int, k: int) -> IntArray:
    """The true counts of a data set: largest-remainder rounding of n times the distribution."""
    import numpy as np

    if dist == "point":
        weights = np.eye(k)[0]
    elif dist == "uniform":
        weights = np.ones(k)
    elif dist == "zipf":
        weights = 1 / np.arange(1, k + 1) ** 1.1
    else:
        raise ValueError(f"the grid's data sets are {', '.join(DISTRIBUTIONS)}, got {dist!r}")
    exact = weights / weights.sum() * n
    counts: IntArray = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: n - int(counts.sum())]] += 1
    return counts


def lightest_window(pmf: Any, mass: float = FLOOR) -> float:
    """The least total probability of a run of consecutive values holding at least ``mass``.

    An interval [L(s), U(s)] whose endpoints are nondecreasing in s accepts a count m on a run of
    consecutive values ({s : L(s) ≤ m} is a prefix and {s : U(s) ≥ m} a suffix), so if it covers this
    category ≥ ``mass`` it covers it at least this often."""
    best, total, start = 1.0, 0.0, 0
    for end, p in enumerate(pmf):
        total += p
        while start <= end and total - pmf[start] >= mass:
            total -= pmf[start]
            start += 1
        if total >= mass:
            best = min(best, total)
    return best


#: :func:`least_coverage` solves the subset problem exactly over this many of the most probable values
#: (two halves of 2¹² sums) and bounds the rest by their total.
EXACT_ITEMS = 24


def least_coverage(pmf: Any, mass: float = FLOOR) -> float:
    """A lower bound on min{P(A) : P(A) ≥ ``mass``} over *every* set A of values (not only runs).

    Any deterministic confidence procedure C(s) covers a count m with probability P_m(A), A = {s : m ∈
    C(s)}, so one covering m ≥ ``mass`` covers it at least this often, monotone or not, interval or not.
    Computed as 1 − (the most mass a set can leave out while leaving out ≤ 1 − ``mass``): exactly, by
    meeting in the middle, over the :data:`EXACT_ITEMS` most probable values that fit, and bounded by adding
    the total of the others (so the result is a valid bound, and exact when they weigh nothing)."""
    import numpy as np

    cap = 1.0 - mass
    p = np.asarray(pmf, dtype=np.float64)
    p = np.sort(p[p > 0] / p.sum())[::-1]
    fitting = p[p <= cap * (1 + 1e-12)]
    exact, rest = fitting[:EXACT_ITEMS], float(fitting[EXACT_ITEMS:].sum())

    def subset_sums(items: Any) -> Any:
        sums = np.zeros(1)
        for x in items:
            sums = np.concatenate([sums, sums + x])
        return np.sort(sums)

    half = exact.size // 2
    left, right = subset_sums(exact[:half]), subset_sums(exact[half:])
    index = np.searchsorted(right, cap * (1 + 1e-12) - left, side="right") - 1
    fits = index >= 0
    most = float(np.max(left[fits] + right[index[fits]]))
    return 1.0 - min(cap, most + rest)


def category_coverage(rule: IntervalRule, n: int, nv: int, p: float, q: float, level: float = 0.95) -> float:
    """P(L(S_v) ≤ n_v ≤ U(S_v)) exactly, for a category held by ``nv`` of ``n`` respondents."""
    values, pmf = support_law(n, nv, p, q)
    low, high = rule(values, n, p, q, level)
    return float(pmf[(low <= nv) & (nv <= high)].sum())


@dataclass(frozen=True)
class CellCoverage:
    """One cell of the grid: per-category coverage of a rule, and the two bounds per category."""

    counts: Any  # the true counts n_v
    coverage: Any  # per category
    bound: Any  # per category: least_coverage of its law (any deterministic procedure)
    window_bound: Any  # per category: lightest_window of its law (intervals monotone in S_v)

    @property
    def mean(self) -> float:
        return float(self.coverage.mean())

    @property
    def min(self) -> float:
        return float(self.coverage.min())

    @property
    def mean_bound(self) -> float:
        """The least mean any deterministic procedure keeping every count ≥ FLOOR can have here."""
        return float(self.bound.mean())

    @property
    def mean_window_bound(self) -> float:
        """The least mean any interval monotone in S_v keeping every count ≥ FLOOR can have here."""
        return float(self.window_bound.mean())

    @property
    def forced(self) -> bool:
        """Whether no deterministic procedure with every count's coverage ≥ FLOOR can reach a mean ≤
        MEAN_GOAL here (S_v takes too few values): only a randomized interval could."""
        return self.mean_bound > MEAN_GOAL

    @property
    def forced_monotone(self) -> bool:
        """Whether no interval with endpoints monotone in S_v (more support never lowers an end) and every
        count's coverage ≥ FLOOR can reach a mean ≤ MEAN_GOAL here."""
        return self.mean_window_bound > MEAN_GOAL


def cell_coverage(
    rules: Sequence[IntervalRule], n: int, k: int, p: float, q: float, dist: str, level: float = 0.95
) -> list[CellCoverage]:
    """Each rule's :class:`CellCoverage` over the categories of one data set (one law per distinct n_v)."""
    import numpy as np

    counts = counts_of(dist, n, k)
    by_count: dict[int, tuple[list[float], float, float]] = {}
    for nv in sorted({int(c) for c in counts}):
        values, pmf = support_law(n, nv, p, q)
        covered = []
        for rule in rules:
            low, high = rule(values, n, p, q, level)
            covered.append(float(pmf[(low <= nv) & (nv <= high)].sum()))
        by_count[nv] = (covered, least_coverage(pmf), lightest_window(pmf))
    bound = np.array([by_count[int(c)][1] for c in counts])
    window = np.array([by_count[int(c)][2] for c in counts])
    return [
        CellCoverage(counts, np.array([by_count[int(c)][0][i] for c in counts]), bound, window)
        for i in range(len(rules))
    ]


def wald_interval(support: Any, n: int, p: float, q: float, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """The plug-in normal interval ĉ ± z·stderr that ``ci()`` served before issue 10 (for comparison)."""
    import numpy as np

    from .estimate import normal_quantile

    z = normal_quantile(level)
    gap = p - q
    s = np.asarray(support, dtype=np.float64)
    estimate = (s - n * q) / gap
    sd = np.sqrt(np.maximum(n * q * (1 - q) / gap**2 + estimate * (1 - p - q) / gap, 0.0))
    return estimate - z * sd, estimate + z * sd
