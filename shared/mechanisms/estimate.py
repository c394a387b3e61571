"""Tallies (sufficient statistics) and estimates with calibrated standard errors.

Tallying turns reports into ``Tally(n, support)`` with ``support[v] = #{i : v ∈ Support(y_i)}``; estimating
turns a tally into an :class:`Estimate` in O(k), whatever n is. For a pure protocol (Wang, Blocki, Li and Jha,
"Locally Differentially Private Protocols for Frequency Estimation", USENIX Security 2017, §3) with
p* = P(v ∈ Support(y) | x = v) and q* = P(v ∈ Support(y) | x ≠ v):

    ĉ_v = (S_v − n·q*)/(p* − q*)                                   (unbiased)
    Var(ĉ_v) = n·q*(1−q*)/(p*−q*)² + n_v·(1−p*−q*)/(p*−q*)          (exact, given the true counts)

``Estimate.variance`` is the exact formula at n_v = ĉ_v; it is linear in n_v, hence an unbiased plug-in, and
it is never negative (at S_v = 0 it equals n·p*·q*/(p*−q*)²).

**Intervals** (:func:`score_interval`). The plug-in normal interval ĉ ± z·stderr under-covers badly when
few reports support a category (GRR k = 1,000, ε = 5, n = 50: 0.17 for a category held by one person; OUE
ε = 10, n = 50: 0.50), because S_v then takes a handful of values and the plug-in variance is far below
one count. ``ci()`` therefore serves the *score interval with continuity correction* on the exact law of
the support count: S_v ~ Bin(n_v, p*) + Bin(n − n_v, q*), with E S_v = n·q* + n_v·d and
Var S_v = n·q*(1−q*) + n_v·c, d = p* − q*, c = p*(1−p*) − q*(1−q*) = d(1 − p* − q*). With t = S_v − n·q*,

    L = inf{m : (t − ½) − m·d ≤ z·√(n·q*(1−q*) + m·c)},   U = sup{m : m·d − (t + ½) ≤ z·√(…)},

each the root of d²m² − (2d·t′ + z²c)·m + t′² − z²·n·q*(1−q*) = 0 with t′ = t ∓ ½ (the smaller root for L,
the larger for U), clipped to [0, n] since a count lies there (post-processing). This is Wilson's score
interval (JASA 1927) for a two-group Poisson-binomial, with Yates's ½ correction; the choice was made by
measurement: over 360 settings (BinaryRR; GRR k = 2, 16, 1,000; OUE and OLH k = 16, 1,000; ε ∈ {0.1, 1, 3,
5, 10}; n ∈ {50, 1,000, 10⁵}; uniform, Zipf and point-mass data) its exact per-category coverage never
fell below 0.945, where Wald fell to 0.17, the mapped Wilson interval to 0.83, the uncorrected score
interval to 0.83 and mid-p to 0.92 (``benchmarks/intervals.py`` prints the grid). Its price: where S_v takes
very few values the mean coverage exceeds 0.975 (up to 0.9997 at ε = 10, n = 50); in most of those cells no
interval with endpoints monotone in S_v can do better (the grid prints that bound), since the shortest run
of S values holding 93% of the mass already holds more than 97.5%. The point estimate ĉ stays unbiased and
its ``stderr`` stays the plug-in one; the interval is not ĉ ± z·stderr and need not contain ĉ (ĉ < 0 is
possible, the interval is not). Proportions divide both ends by n.

numpy is imported here only: estimating is an aggregator/analyst task, never a device one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from ..errors import InvalidParameter

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "INTERVAL_METHODS",
    "UNBIASED_NOTE",
    "Estimate",
    "Tally",
    "normal_quantile",
    "project_to_simplex",
    "pure_estimate",
    "score_interval",
]

#: What an estimate's JSON says next to its numbers (``unbiased.note``) and the CLI prints when one leaves
#: its range: at n = 2 binary randomized response can estimate proportions 1.58 and −0.58, which is what an
#: unbiased estimator must do for its average over collections to equal the truth.
UNBIASED_NOTE = (
    "count and proportion are unbiased (their average over repeated collections is the truth), so at small n "
    "they may fall below 0 or above n (proportions outside [0, 1]); consistent_count is the biased variant "
    "that stays in [0, n] and sums to n"
)

#: The interval each kind of estimate serves: LDP counts the score interval, anything without the
#: support probabilities (central releases) the normal one.
INTERVAL_METHODS = {
    "score-cc": "score interval on the exact law of S_v with a 1/2 continuity correction (Wilson 1927)",
    "noise-exact": "count ± the exact quantiles of the central noise's law (deniable.shared.noise)",
    "normal": "count ± z·stderr",
}


def normal_quantile(level: float) -> float:
    """z such that a two-sided normal interval ±z·sd has coverage ``level`` (e.g. 1.95996 at 0.95)."""
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise InvalidParameter(f"'level' must be a number in (0, 1), got {level!r}")
    return NormalDist().inv_cdf((1 + level) / 2)


def score_interval(
    support: Any, n: int, p: float, q: float, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Score interval with ½ continuity correction for the true count n_v, from support counts S_v.

    S_v ~ Bin(n_v, p) + Bin(n − n_v, q) (see the module docstring for the formula and its source); the
    bounds are clipped to [0, n]. Vectorized over ``support``.
    """
    import numpy as np

    z = normal_quantile(level)
    s = np.asarray(support, dtype=np.float64)
    d = p - q
    c = d * (1.0 - p - q)
    v0 = n * q * (1.0 - q)
    t = s - n * q

    def roots(shifted: FloatArray) -> tuple[FloatArray, FloatArray, Any]:
        b = 2.0 * d * shifted + z * z * c
        disc = b * b - 4.0 * d * d * (shifted * shifted - z * z * v0)
        real = disc >= 0
        root = np.sqrt(np.where(real, disc, 0.0))
        return (b - root) / (2.0 * d * d), (b + root) / (2.0 * d * d), real

    low_t, high_t = t - 0.5, t + 0.5
    smaller, _, real = roots(low_t)
    # every m ≥ t′/d passes the one-sided test; below it, the quadratic's smaller root is the bound
    low = np.where(real, np.minimum(smaller, low_t / d), low_t / d)
    _, larger, real = roots(high_t)
    high = np.where(real, np.maximum(larger, high_t / d), high_t / d)
    result: tuple[FloatArray, FloatArray] = (np.clip(low, 0.0, n), np.clip(high, 0.0, n))
    return result


@dataclass(frozen=True)
class Tally:
    """Sufficient statistic of a batch of reports: ``n`` reports and the support count of each category.

    Tallies add (``t1 + t2``), so the aggregator keeps them incrementally per campaign and group.
    """

    n: int
    support: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.n < 0 or any(s < 0 for s in self.support):
            raise InvalidParameter(f"a tally's counts must be non-negative, got n={self.n}")

    @classmethod
    def zero(cls, k: int) -> Tally:
        """The tally of no reports over k categories."""
        return cls(0, (0,) * k)

    @property
    def k(self) -> int:
        return len(self.support)

    def __add__(self, other: Tally) -> Tally:
        if not isinstance(other, Tally):
            return NotImplemented
        if other.k != self.k:
            raise InvalidParameter(f"cannot add tallies over {self.k} and {other.k} categories")
        return Tally(self.n + other.n, tuple(a + b for a, b in zip(self.support, other.support, strict=True)))


def project_to_simplex(counts: FloatArray, total: float) -> FloatArray:
    """Euclidean projection of ``counts`` onto {x ≥ 0, Σx = total} (Duchi et al. 2008).

    Sort u descending; ρ = max{j : u_j − (Σ_{r≤j} u_r − total)/j > 0}; θ = (Σ_{r≤ρ} u_r − total)/ρ;
    x = max(c − θ, 0). Post-processing: free in privacy, but biased (large counts pulled down, zeros pushed
    up; Wang et al., NDSS 2020).
    """
    import numpy as np

    c = np.asarray(counts, dtype=np.float64)
    if total <= 0 or c.size == 0:
        return np.zeros_like(c)
    u = np.sort(c)[::-1]
    cumulative = np.cumsum(u) - total
    j = np.arange(1, c.size + 1)
    rho = int(np.nonzero(u - cumulative / j > 0)[0][-1]) + 1
    theta = cumulative[rho - 1] / rho
    projected: FloatArray = np.maximum(c - theta, 0.0)
    return projected


@dataclass(frozen=True)
class Estimate:
    """Unbiased counts with their exact plug-in variance, for one mechanism run over n reports.

    ``counts[v]`` estimates the number of respondents holding category v; ``variance[v]`` is the unbiased
    plug-in of its exact variance; ``ci(level)`` is the score interval of :func:`score_interval` when the
    estimate knows its tally and support probabilities ``p_star``/``q_star`` (every LDP estimate), else the
    normal interval counts ± z·stderr (``interval_method`` says which). Proportions are counts/n with
    stderr/n and the interval divided by n. :meth:`consistent` gives non-negative counts summing to n
    (post-processed, **biased**; use the raw counts for sums and variances).
    """

    mechanism: str
    epsilon: float
    n: int
    counts: FloatArray
    variance: FloatArray
    tally: Tally | None = field(default=None, compare=False, repr=False)
    p_star: float | None = field(default=None, compare=False, repr=False)
    q_star: float | None = field(default=None, compare=False, repr=False)

    @property
    def k(self) -> int:
        return int(self.counts.shape[0])

    @property
    def stderr(self) -> FloatArray:
        """√variance of each count."""
        import numpy as np

        result: FloatArray = np.sqrt(np.maximum(self.variance, 0.0))
        return result

    @property
    def interval_method(self) -> str:
        """``"score-cc"`` (LDP counts with their tally) or ``"normal"``: the interval :meth:`ci` serves."""
        known = self.tally is not None and self.p_star is not None and self.q_star is not None
        return "score-cc" if known else "normal"

    def ci(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Two-sided interval for each count at ``level``: the score interval (:func:`score_interval`) for
        LDP estimates, the normal ĉ ± z_{(1+level)/2}·stderr otherwise."""
        if self.interval_method == "score-cc":
            assert self.tally is not None and self.p_star is not None and self.q_star is not None
            return score_interval(self.tally.support, self.n, self.p_star, self.q_star, level)
        z = normal_quantile(level)
        half = z * self.stderr
        return self.counts - half, self.counts + half

    @property
    def proportions(self) -> FloatArray:
        """ĉ_v/n (NaN when n = 0)."""
        import numpy as np

        if self.n == 0:
            return np.full(self.k, np.nan)
        result: FloatArray = self.counts / self.n
        return result

    @property
    def proportion_stderr(self) -> FloatArray:
        """stderr/n: the standard error of each proportion (NaN when n = 0)."""
        import numpy as np

        if self.n == 0:
            return np.full(self.k, np.nan)
        result: FloatArray = self.stderr / self.n
        return result

    def proportion_ci(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """ci(level) divided by n."""
        low, high = self.ci(level)
        if self.n == 0:
            return self.proportions, self.proportions
        return low / self.n, high / self.n

    def consistent(self) -> FloatArray:
        """Counts projected onto {x ≥ 0, Σx = n}: consistent but **biased** (post-processing)."""
        return project_to_simplex(self.counts, float(self.n))

    def to_dict(self, level: float = 0.95, categories: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON-ready summary: per category the count, stderr, CI, proportion with stderr and CI, and the
        consistent (biased) count. Undefined proportions (n = 0) are ``None``, never NaN. ``unbiased`` says
        next to the numbers that they are unbiased and may leave [0, n] (``outside_range``: whether one does
        here), pointing to the consistent variant (:data:`UNBIASED_NOTE`)."""
        if categories is None:
            categories = [str(v) for v in range(self.k)]
        if len(categories) != self.k:
            raise InvalidParameter(f"'categories' must have {self.k} labels, got {len(categories)}")
        low, high = self.ci(level)
        plow, phigh = self.proportion_ci(level)
        consistent = self.consistent()

        def num(x: Any) -> float | None:
            value = float(x)
            return None if value != value else value

        rows = []
        for v, label in enumerate(categories):
            rows.append(
                {
                    "category": label,
                    "count": num(self.counts[v]),
                    "stderr": num(self.stderr[v]),
                    "ci": [num(low[v]), num(high[v])],
                    "proportion": num(self.proportions[v]),
                    "proportion_stderr": num(self.proportion_stderr[v]),
                    "proportion_ci": [num(plow[v]), num(phigh[v])],
                    "consistent_count": num(consistent[v]),
                }
            )
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "n": self.n,
            "level": level,
            "interval": {"method": self.interval_method, "description": INTERVAL_METHODS[self.interval_method]},
            "categories": rows,
            "unbiased": {
                "outside_range": any(not 0 <= float(c) <= self.n for c in self.counts),
                "note": UNBIASED_NOTE,
            },
            "consistent": {
                "biased": True,
                "method": "euclidean projection onto {x >= 0, sum x = n}",
            },
        }


def pure_estimate(name: str, epsilon: float, tally: Tally, p: float, q: float, gap: float | None = None) -> Estimate:
    """The estimate of a pure protocol (holders of v support v with probability p, others with q):
    ĉ_v = (S_v − n·q)/(p−q), Var̂(ĉ_v) = n·q(1−q)/(p−q)² + ĉ_v·(1−p−q)/(p−q) (Wang et al. 2017, Thm. 2).

    O(k) whatever n. The plug-in variance is unbiased (linear in the count) and clipped at 0. ``gap``: p − q
    computed exactly before its one rounding, when the caller has it (else p − q of the floats).
    """
    import numpy as np

    gap = p - q if gap is None else gap
    support = np.asarray(tally.support, dtype=np.float64)
    counts = (support - tally.n * q) / gap
    variance = tally.n * q * (1 - q) / gap**2 + counts * (1 - p - q) / gap
    return Estimate(name, epsilon, tally.n, counts, np.maximum(variance, 0.0), tally, p, q)
