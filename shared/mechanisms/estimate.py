"""Tallies (sufficient statistics) and estimates with calibrated standard errors.

Tallying turns reports into ``Tally(n, support)`` with ``support[v] = #{i : v ∈ Support(y_i)}``; estimating
turns a tally into an :class:`Estimate` in O(k), whatever n is. For a pure protocol (Wang, Blocki, Li and Jha,
"Locally Differentially Private Protocols for Frequency Estimation", USENIX Security 2017, §3) with
p* = P(v ∈ Support(y) | x = v) and q* = P(v ∈ Support(y) | x ≠ v):

    ĉ_v = (S_v − n·q*)/(p* − q*)                                   (unbiased)
    Var(ĉ_v) = n·q*(1−q*)/(p*−q*)² + n_v·(1−p*−q*)/(p*−q*)          (exact, given the true counts)

``Estimate.variance`` is the exact formula at n_v = ĉ_v; it is linear in n_v, hence an unbiased plug-in, and
it is never negative (at S_v = 0 it equals n·p*·q*/(p*−q*)²).

**Intervals** (:func:`count_interval`). The plug-in normal interval ĉ ± z·stderr under-covers badly when
few reports support a category (GRR k = 1,000, ε = 5, n = 50: 0.17 for a category held by one person; OUE
ε = 10, n = 50: 0.50), because S_v then takes a handful of values and the plug-in variance is far below
one count. ``ci()`` serves an interval built on the exact law of the support count,
S_v ~ Bin(n_v, p*) + Bin(n − n_v, q*), with E S_v = n·q* + n_v·d and Var S_v = n·q*(1−q*) + n_v·c,
d = p* − q*, c = d(1 − p* − q*), in three parts chosen by measurement (``benchmarks/intervals.py``):

1. the *score interval with continuity correction* (:func:`score_interval`): with t = S_v − n·q*,
   L = inf{m : (t − ½) − m·d ≤ z·√(n·q*(1−q*) + m·c)}, U = sup{m : m·d − (t + ½) ≤ z·√(…)}, each the root
   of d²m² − (2d·t′ + z²c)·m + t′² − z²·n·q*(1−q*) = 0 with t′ = t ∓ ½, clipped to [0, n]: Wilson's
   score interval (JASA 1927) for a two-group Poisson-binomial with Yates's ½ correction (FORMULAS part 2,
   §3.2); it alone keeps every category ≥ 0.945 on the grid, where Wald fell to 0.17, the mapped Wilson
   interval to 0.83, the uncorrected score interval to 0.83 and mid-p to 0.92;
2. *adapted to the boundary* (Feldman and Cousins, Phys. Rev. D 57, 1998, make the same point for a
   physical boundary): a count cannot leave [0, n], so only one tail can refute m = 0 (or m = n), and it is
   tested one-sided and exactly, from S_v ~ Bin(n, q*) (Bin(n, p*)), by :func:`boundary_tests`; refuted,
   the interval starts at 1 (ends at n − 1). The two-sided test covered a category nobody holds 97.5% of
   the time or more, which is why every point-mass cell's mean exceeded 0.975;
3. *exact where S_v is discrete* (:func:`exact_interval`, used for the support counts whose fitted law
   has sd ≤ :data:`EXACT_MAX_SD` and moves by at least 1/:data:`EXACT_MAX_SPREAD` sd per respondent): the
   Neyman construction inverted from the exact law, each count's acceptance region a run of consecutive
   S values grown from the most probable one (Sterne 1954; one-sided at 0 and n). The ½ correction
   over-covers there (GRR k = 16, ε = 10, n = 1,000: S_v takes 3 values and the score interval covered
   0.998).

Where S_v is discrete no acceptance region holds exactly the level: the smallest run holding ≥ 0.95 can
hold 0.985. The exact parts (2 and 3) then keep the run just short of the level when it is nearer to it
and holds at least :func:`guaranteed_level` (1 − 1.4·(1 − level): 0.93 at 0.95), the mid-p idea applied to
the last value added (:func:`_window`): each acceptance region holds ≥ 0.93 exactly, and coverage is near
the level on average instead of above it everywhere.

On the issue-10 grid (``benchmarks/intervals.py``, 450 cells) every category stays ≥ 0.93 (worst 0.9317)
and the mean exceeds 0.975 only in the 40 cells where S_v takes so few values that the grid's bounds
show it forced: in 30 no deterministic confidence procedure keeping every count ≥ 0.93 can have a mean ≤
0.975, in 10 (GRR k = 1,000, n = 1,000, ε ≤ 3 and ε = 5 uniform: S_v ≈ Poisson(1)) no interval whose
endpoints are monotone in S_v can. The mean is below 0.95 in 68 cells (lowest 0.940), the price of not
over-covering elsewhere. The point estimate ĉ stays unbiased and its ``stderr`` the plug-in one; the
interval is not ĉ ± z·stderr and need not contain ĉ (ĉ < 0 is possible, the interval is not).
Proportions divide both ends by n, so they cover n_v/n exactly as often.

numpy is imported here only: estimating is an aggregator/analyst task, never a device one.
"""

from __future__ import annotations

import functools
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
    "boundary_tests",
    "count_interval",
    "exact_interval",
    "guaranteed_level",
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
    "score-cc": "score interval on the exact law of S_v with a 1/2 continuity correction (Wilson 1927), exact "
    "one-sided tests at the boundaries 0 and n; where S_v takes few values, the Neyman interval inverted from its "
    "exact law (Sterne 1954 acceptance runs, each holding >= 1 - 1.4*(1 - level), nearest to the level)",
    "noise-exact": "count ± the exact quantiles of the central noise's law (deniable.shared.noise)",
    "normal": "count ± z·stderr",
}


def normal_quantile(level: float) -> float:
    """z such that a two-sided normal interval ±z·sd has coverage ``level`` (e.g. 1.95996 at 0.95)."""
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise InvalidParameter(f"'level' must be a number in (0, 1), got {level!r}")
    return NormalDist().inv_cdf((1 + level) / 2)


def score_interval(
    support: Any, n: int, p: float, q: float, level: float = 0.95, *, boundary: bool = True
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
    low, high = np.clip(low, 0.0, n), np.clip(high, 0.0, n)
    if boundary:
        # A count cannot leave [0, n], so at m = 0 (m = n) only one tail can refute it: test it one-sided,
        # exactly, from Bin(n, q) (Bin(n, p)). Refuted, the interval starts at the next count (ends at the
        # one before), if that count is in it. The tests cost O(n) (a log-factorial table), so they run only
        # when an interval reaches a boundary (a live campaign's counts are mostly far from both).
        at_zero = (low <= 0.0) & (high >= 1.0)
        at_n = (high >= n) & (low <= n - 1.0)
        if at_zero.any() or at_n.any():
            b0, an = boundary_tests(n, p, q, level)
            low = np.where(at_zero & (s > b0), 1.0, low)
            high = np.where((high >= n) & (low <= n - 1.0) & (s < an), n - 1.0, high)
    result: tuple[FloatArray, FloatArray] = (low, high)
    return result


#: The exact construction serves the interval where S_v's sd is at most this (its law then has few values
#: and the score interval over-covers); above it the boundary-adapted score interval.
EXACT_MAX_SD = 6.0

#: … and where one more respondent moves S_v by at least 1/EXACT_MAX_SPREAD of its sd: below that the
#: windows of neighbouring counts nearly coincide and their hull over-covers more than the score interval.
EXACT_MAX_SPREAD = 4.0


#: How far below ``level`` an acceptance region of the exact parts of :func:`count_interval` may hold, as a
#: factor of the miss rate: each holds at least 1 − MISS_FACTOR·(1 − level) (0.93 at level 0.95). See
#: :func:`guaranteed_level`.
MISS_FACTOR = 1.4


def guaranteed_level(level: float) -> float:
    """The coverage every count is guaranteed at ``level``: 1 − MISS_FACTOR·(1 − level) (0.93 at 0.95).

    Where S_v is discrete an acceptance set holding exactly ``level`` rarely exists: the one holding the
    least above it can hold 0.98 or more. The exact parts of :func:`count_interval` then take the set just
    below ``level`` instead, when it is nearer to ``level`` and holds at least this (the mid-p idea applied
    to the last value added: coverage near the level on average rather than above it everywhere)."""
    return max(1.0 - MISS_FACTOR * (1.0 - level), 0.0)


def _window(start: int, pmf: FloatArray, level: float, side: str) -> tuple[int, int]:
    """The acceptance window [a, b] of one count m, from its law (values ``start`` + 0, 1, …).

    Sterne's construction (T. E. Sterne, "Some remarks on confidence or fiducial limits", Biometrika 41,
    1954) kept contiguous: grow a run of consecutive values from the most probable one, each step adding
    the more probable of its two neighbours, until it holds ``level``; for ``side`` "low" (m = 0) the run
    grows from the law's first value to the right and for "high" (m = n) from its last to the left, since
    only one tail can refute a count at the boundary. The last value added is a lump where S_v is discrete:
    the run before it is kept instead when it holds at least :func:`guaranteed_level` and is nearer to
    ``level`` (0.935 rather than 0.985 at level 0.95)."""
    import numpy as np

    probabilities = np.asarray(pmf, dtype=np.float64)
    probabilities = probabilities / probabilities.sum()
    size = probabilities.size
    floor = guaranteed_level(level) - 1e-12
    if side == "low":
        a = b = 0
    elif side == "high":
        a = b = size - 1
    else:
        a = b = int(np.argmax(probabilities))
    mass = float(probabilities[a])
    previous: tuple[int, int, float] | None = None
    while mass < level - 1e-12 and (a > 0 or b < size - 1):
        previous = (a, b, mass)
        left = float(probabilities[a - 1]) if a > 0 and side != "low" else -1.0
        right = float(probabilities[b + 1]) if b < size - 1 and side != "high" else -1.0
        if right >= left:
            b += 1
            mass += right
        else:
            a -= 1
            mass += left
    if previous is not None and previous[2] >= floor and level - previous[2] < mass - level:
        a, b = previous[0], previous[1]
    return start + a, start + b


def _binomial(m: int, r: float, log_fact: FloatArray) -> tuple[int, FloatArray]:
    """(first value, probabilities) of Bin(m, r) on m·r ± (10 sd + 20), from a table of log factorials."""
    import math

    import numpy as np

    if m == 0 or r <= 0.0:
        return 0, np.ones(1)
    if r >= 1.0:
        return m, np.ones(1)
    spread = 10.0 * math.sqrt(m * r * (1 - r)) + 20.0
    lo, hi = max(int(m * r - spread), 0), min(int(m * r + spread) + 1, m)
    x = np.arange(lo, hi + 1)
    logs = log_fact[m] - log_fact[x] - log_fact[m - x] + x * math.log(r) + (m - x) * math.log1p(-r)
    return lo, np.exp(logs)


def _log_factorials(n: int) -> FloatArray:
    import numpy as np

    result: FloatArray = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])
    return result


@functools.lru_cache(maxsize=256)
def boundary_tests(n: int, p: float, q: float, level: float = 0.95) -> tuple[int, int]:
    """(b₀, aₙ): the exact one-sided tests of the boundary counts. m = 0 is refuted iff S_v > b₀ and m = n
    iff S_v < aₙ, the acceptance runs {…, b₀} of Bin(n, q) and {aₙ, …} of Bin(n, p) chosen by
    :func:`_window` (holding ``level``, or the run just short of it when nearer and ≥ the guaranteed level)."""
    log_fact = _log_factorials(n)
    start, pmf = _binomial(n, q, log_fact)
    _, b0 = _window(start, pmf, level, "low")
    start, pmf = _binomial(n, p, log_fact)
    an, _ = _window(start, pmf, level, "high")
    return b0, an


def exact_interval(
    support: Any, n: int, p: float, q: float, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """The Neyman interval inverted from the exact law of S_v, for support counts where it applies.

    For each integer m its acceptance window A(m) is the run of consecutive values of
    S ~ Bin(m, p) + Bin(n − m, q) that :func:`_window` grows from the most probable value (Sterne's
    ordering) until it holds ``level``, or the run just short of that when nearer to ``level`` and holding at
    least :func:`guaranteed_level` (at m = 0 the run starts at the lowest value and at m = n it ends at the
    highest, since only one side can refute a count at the boundary); the interval for s is [min, max] of
    {m : s ∈ A(m)} over the counts m within (5·sd + 3)/d of the fitted count (A(m) cannot reach s from
    farther). Every count is covered with probability ≥ :func:`guaranteed_level` (the hull only adds). A
    function of (s, n, p, q, level) alone; windows are computed once per m per call. Meant for support
    counts whose fitted law is discrete (see :func:`count_interval`); NaN where no m accepts s.
    """
    import math

    import numpy as np

    s = np.asarray(support, dtype=np.int64)
    d = p - q
    log_fact = _log_factorials(n)
    windows: dict[int, tuple[int, int]] = {}

    def window(m: int) -> tuple[int, int]:
        if m not in windows:
            a0, a = _binomial(m, p, log_fact)
            b0, b = _binomial(n - m, q, log_fact)
            side = "low" if m == 0 else "high" if m == n else "inner"
            windows[m] = _window(a0 + b0, np.convolve(a, b), level, side)
        return windows[m]

    low = np.full(s.size, np.nan)
    high = np.full(s.size, np.nan)
    for j, value in enumerate(s.tolist()):
        fitted = min(max((value - n * q) / d, 0.0), float(n))
        sd = math.sqrt(max(n * q * (1 - q) + fitted * d * (1 - p - q), 0.0))
        reach = (5.0 * sd + 3.0) / d
        inside = [m for m in range(max(int(fitted - reach), 0), min(int(fitted + reach) + 1, n) + 1)
                  if window(m)[0] <= value <= window(m)[1]]  # fmt: skip
        if inside:
            low[j], high[j] = float(inside[0]), float(inside[-1])
    return low, high


def count_interval(support: Any, n: int, p: float, q: float, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """The interval ``Estimate.ci`` serves: :func:`exact_interval` where the law of S_v is discrete, else
    :func:`score_interval` (with the exact boundary tests). Computed once per distinct support count."""
    import numpy as np

    values = np.asarray(support, dtype=np.int64)
    unique, inverse = np.unique(values, return_inverse=True)
    low, high = score_interval(unique, n, p, q, level)
    d = p - q
    fitted = np.clip((unique - n * q) / d, 0.0, n) if d > 0 else np.zeros(unique.size)
    local_sd = np.sqrt(np.maximum(n * q * (1 - q) + fitted * d * (1 - p - q), 0.0))
    discrete = local_sd <= min(EXACT_MAX_SD, EXACT_MAX_SPREAD * d)
    if discrete.any():
        exact_low, exact_high = exact_interval(unique[discrete], n, p, q, level)
        found = ~np.isnan(exact_low)
        low[np.flatnonzero(discrete)[found]] = exact_low[found]
        high[np.flatnonzero(discrete)[found]] = exact_high[found]
    result: tuple[FloatArray, FloatArray] = (low[inverse], high[inverse])
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
        """Two-sided interval for each count at ``level``: :func:`count_interval` (the boundary-adapted
        score interval, exact where S_v is discrete) for LDP estimates, the normal ĉ ± z_{(1+level)/2}·stderr
        otherwise."""
        if self.interval_method == "score-cc":
            assert self.tally is not None and self.p_star is not None and self.q_star is not None
            return count_interval(self.tally.support, self.n, self.p_star, self.q_star, level)
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
