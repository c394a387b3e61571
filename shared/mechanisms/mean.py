"""Means of a bounded number under ε-LDP: Duchi et al., the Piecewise Mechanism, and their Hybrid.

A value v in a declared range [lo, hi] is first put on the declared grid of ``steps`` equal steps by
unbiased randomized rounding (:meth:`NumberRange.grid_index`), then mapped to x = −1 + 2j/steps in [−1, 1]
and randomized; every report t is an unbiased estimate of x, and the campaign's mean of v is
(hi+lo)/2 + (hi−lo)/2 · mean(t). Three mechanisms (Wang, Xiao, Yang et al., "Collecting and analyzing
multidimensional data with local differential privacy", ICDE 2019, §III; Duchi, Jordan, Wainwright, JASA
2018), each exact:

* ``duchi``: t = ±C with C = (e^ε+1)/(e^ε−1) and P(+C | x) = ½ + x(e^ε−1)/(2(e^ε+1));
  Var(t | x) = C² − x². Never below 1, however large ε.
* ``piecewise`` (PM): with s = e^(ε/2), C = (s+1)/(s−1), l(x) = (sx−1)/(s−1), r(x) = l(x) + C − 1, output
  density s(s−1)/(2(s+1)) on [l, r] and s⁻² times that elsewhere on [−C, C];
  Var(t | x) = x²/(s−1) + (s+3)/(3(s−1)²). Best at large ε.
* ``hybrid`` (HM): PM with probability α = 1 − e^(−ε/2), Duchi otherwise (both at the full ε), for
  ε > ε* = 0.6094, pure Duchi below; with this α the variance does not depend on x:
  Var = (s+3)/(3s(s−1)) + (s²+1)²/(s(s²−1)²). The lowest worst-case variance of the three at every ε.

Exactness (no float ever meets a probability that carries ε):

* e^(ε/2) is replaced by the rational s = :func:`~deniable.shared.sampling.exp_lower` (ε/2) ≤ e^(ε/2), and
  e^ε by s² (Duchi too), so every report is exactly ln(s²)-LDP, within 10⁻³⁸ of ε and never above it.
* PM's continuous output is rounded to a lattice of ``lattice`` cells over [−C, C] by *randomized
  rounding* (unbiased, and a post-processing, so the ratio stays ≤ s²; evaluating the density at lattice
  points instead would break ε). Its law is rational: P(k | j) = ∫ dens(u)·hat(u − k) du, in closed form
  from the three constant pieces (:meth:`Piecewise.pmf`). It adds at most h²/4 to the variance, h the
  lattice step (h²/6 on average).
* Each randomizer draws a fixed pattern, the same for every value: Duchi one ``randbelow(D_d)``, PM one
  ``randbelow(D_p)`` against the exact integer CDF (D_p a common denominator of every input's law), the
  Hybrid its branch coin and both of those, selected afterwards; the rounding to the grid one
  ``randbelow(2⁶⁴)``.

Input rounding: x_r = x_⌊⌋ + g·Bernoulli(u) with u the fraction of a step above the grid point below, so
E[x_r] = x exactly when u·2⁶⁴ is an integer (any value on a grid of at most 2⁶⁴ parts of a step, e.g.
integers) and otherwise within 2⁻⁶⁴ of a step; it adds g²u(1−u) ≤ g²/4 to PM's variance (scaled by
s/(s−1)) and nothing to Duchi's (its law is affine in x).

Tallies are histograms of the report values (additive integers): Duchi 2 values, PM lattice + 1, the
Hybrid lattice + 3, so estimates cost O(lattice) whatever n is.
"""

from __future__ import annotations

import bisect
import functools
import math
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal

from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.limits import MEAN_LATTICE, NUMBER_STEPS
from deniable.shared.mechanisms.base import check_epsilon
from deniable.shared.mechanisms.estimate import Tally, normal_quantile
from deniable.shared.mechanisms.registry import REGISTRY
from deniable.shared.sampling import RandBelow, exp_lower

__all__ = [
    "HYBRID_THRESHOLD",
    "MEAN_MECHANISMS",
    "Duchi",
    "Hybrid",
    "MeanEstimate",
    "MeanMechanism",
    "NumberRange",
    "Piecewise",
    "choose_mean_mechanism",
    "mean_mechanism_from_name",
]

#: Below this ε the Hybrid is pure Duchi (α = 0); above it α = 1 − e^(−ε/2) (Wang et al. 2019: ε* ≈ 0.61).
HYBRID_THRESHOLD = 0.6094

#: Lattice cells of PM's output over [−C, C] (the variance grows by at most (2C/lattice)²/4).
DEFAULT_LATTICE = 256

#: Bits of the one uniform draw that rounds a value to the grid.
_ROUNDING_BITS = 64


def _check_int(name: str, value: object, bounds: tuple[int, int]) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise InvalidParameter(f"{name!r} must be an integer in [{bounds[0]}, {bounds[1]}], got {value!r}")


def _hat_cdf(t: Fraction) -> Fraction:
    """H(t) = ∫_{−∞}^t max(0, 1 − |w|) dw: the integral of the randomized-rounding kernel."""
    if t <= -1:
        return Fraction(0)
    if t <= 0:
        return (t + 1) ** 2 / 2
    if t <= 1:
        return 1 - (1 - t) ** 2 / 2
    return Fraction(1)


def _lattice_moments(counts: Any, c: Fraction, h: Fraction) -> tuple[Fraction, Fraction]:
    """Σt and Σt² over lattice reports t_k = −C + k·h with ``counts[k]`` of each, from the integer sums
    m = Σc_k, Σk·c_k and Σk²·c_k: Σt = −mC + hΣk·c_k, Σt² = mC² − 2ChΣk·c_k + h²Σk²·c_k."""
    m = s1 = s2 = 0
    for k, count in enumerate(counts):
        if count:
            m += count
            s1 += k * count
            s2 += k * k * count
    return -m * c + h * s1, m * c * c - 2 * c * h * s1 + h * h * s2


@dataclass(frozen=True, slots=True)
class NumberRange:
    """A declared range [lo, hi] with a grid of ``steps`` equal steps (steps + 1 points)."""

    lo: float
    hi: float
    steps: int

    def __post_init__(self) -> None:
        for name in ("lo", "hi"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InvalidParameter(f"{name!r} must be a finite number, got {value!r}")
        if not self.lo < self.hi:
            raise InvalidParameter(f"the range needs lo < hi, got [{self.lo!r}, {self.hi!r}]")
        _check_int("steps", self.steps, NUMBER_STEPS)

    @property
    def scale(self) -> float:
        """(hi − lo)/2: the factor from x in [−1, 1] to the value's units."""
        return (self.hi - self.lo) / 2

    def grid_index(self, value: object, *, clip: bool = False, randbelow: RandBelow = secrets.randbelow) -> int:
        """The grid index j of ``value`` by unbiased randomized rounding (one ``randbelow(2^64)`` always).

        Values outside [lo, hi] are refused unless ``clip`` (then they become the nearest end: biased, and
        the caller asked for it); NaN, infinities, bools and non-numbers are refused.
        """
        if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
            raise InvalidParameter(f"the answer must be a number in [{self.lo:g}, {self.hi:g}], got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidParameter(f"the answer must be a finite number, got {value!r}")
        v = Fraction(value)
        lo, hi = Fraction(self.lo), Fraction(self.hi)
        if not lo <= v <= hi:
            if not clip:
                raise InvalidParameter(
                    f"the answer must lie in [{self.lo:g}, {self.hi:g}], got {value!r} (values are not "
                    "clipped silently; pass clip=True to move it to the nearest end)"
                )
            v = min(max(v, lo), hi)
        position = (v - lo) * self.steps / (hi - lo)
        below = math.floor(position)
        fraction = position - below
        threshold = math.ceil(fraction * (1 << _ROUNDING_BITS))
        up = randbelow(1 << _ROUNDING_BITS) < threshold
        return min(below + int(up), self.steps)

    def value_of(self, x: float) -> float:
        """The value in [lo, hi] units of a mean x in [−1, 1] units."""
        return (self.hi + self.lo) / 2 + self.scale * x


@dataclass(frozen=True, slots=True)
class MeanEstimate:
    """The unbiased mean of the answers (in the range's units), its variance and standard error.

    ``variance`` is the estimator's: for Duchi the plug-in (C² − x̄²)/n, which is at least the true
    (C² − mean x²)/n; for PM the sum of unbiased per-report variances plus the lattice and grid bounds;
    for the Hybrid its constant per-report variance plus the same bounds.
    """

    mechanism: str
    epsilon: float
    n: int
    mean: float
    variance: float
    range: NumberRange

    @property
    def stderr(self) -> float:
        return math.sqrt(max(self.variance, 0.0))

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """The normal interval mean ± z·SE (coverage checked by the tests)."""
        z = normal_quantile(level)
        return self.mean - z * self.stderr, self.mean + z * self.stderr

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        low, high = self.ci(level) if self.n else (None, None)
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "n": self.n,
            "level": level,
            "mean": self.mean if self.n else None,
            "stderr": self.stderr if self.n else None,
            "ci": [low, high],
            "range": [self.range.lo, self.range.hi],
            "note": "unbiased: the mean of randomized answers may fall outside the range at small n",
        }


@dataclass(frozen=True)
class MeanMechanism(ABC):
    """An ε-LDP randomizer of a grid index j ∈ [0, steps] whose report's value t is unbiased for x_j."""

    epsilon: float
    steps: int
    lattice: int = DEFAULT_LATTICE
    name: ClassVar[str]
    #: Registry facts (:mod:`deniable.shared.mechanisms.registry`): a number answer, reported as the
    #: index of the output value (a JSON integer).
    kind: ClassVar[Literal["number"]] = "number"
    wire_type: ClassVar[type] = int
    wire_description: ClassVar[str] = "integer"
    #: Whether the output lattice (``lattice``, a public parameter of the descriptor) shapes the reports.
    takes_lattice: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        _check_int("steps", self.steps, NUMBER_STEPS)
        _check_int("lattice", self.lattice, MEAN_LATTICE)

    # -- exact constants ------------------------------------------------------------------------------
    @functools.cached_property
    def s(self) -> Fraction:
        """The rational s ≤ e^(ε/2) every probability is built from (s² ≤ e^ε)."""
        return exp_lower(Fraction(self.epsilon) / 2)  # a float's exact binary value

    @property
    def epsilon_effective(self) -> float:
        """2·ln s ≤ ε: the exact privacy of one report."""
        return 2 * math.log(self.s)

    def x_of(self, j: int) -> Fraction:
        """The grid point x_j = −1 + 2j/steps."""
        return Fraction(2 * j, self.steps) - 1

    def check_index(self, j: object) -> int:
        if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j <= self.steps:
            raise InvalidParameter(f"a grid index must be an integer in [0, {self.steps}], got {j!r}")
        return j

    # -- the law, the randomizer and its reports ------------------------------------------------------
    @property
    @abstractmethod
    def outputs(self) -> int:
        """Number of report values 0..outputs−1."""

    @abstractmethod
    def value_of_report(self, report: int) -> Fraction:
        """t(report): the report's unbiased estimate of x."""

    @abstractmethod
    def pmf(self, j: int) -> tuple[Fraction, ...]:
        """P(report = r | j) for r = 0..outputs−1, exactly."""

    @abstractmethod
    def randomize(self, j: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        """One report of grid index j (a fixed pattern of draws whatever j is)."""

    @abstractmethod
    def simulate(self, js: Any, *, rng: Any) -> Any:
        """Vectorized reports (numpy int64) of many grid indices, for simulation only (floats, seeded)."""

    def decode_report(self, obj: object) -> int:
        if isinstance(obj, bool) or not isinstance(obj, int) or not 0 <= obj < self.outputs:
            raise InvalidReport(f"a {self.name} report must be an integer in [0, {self.outputs}), got {obj!r}")
        return obj

    # -- tallies and estimates -------------------------------------------------------------------------
    def tally(self, reports: Any) -> Tally:
        """The histogram of report values (additive): works on a list of reports or simulate's array."""
        try:
            import numpy as np

            if isinstance(reports, np.ndarray):
                counts = np.bincount(reports.astype(np.int64), minlength=self.outputs)
                if len(counts) > self.outputs or (reports.size and reports.min() < 0):
                    raise InvalidReport(f"{self.name} reports must lie in [0, {self.outputs})")
                return Tally(int(reports.size), tuple(int(c) for c in counts))
        except ImportError:  # pragma: no cover - numpy is absent only on devices, which never tally
            pass
        histogram = [0] * self.outputs
        n = 0
        for report in reports:
            histogram[self.decode_report(report)] += 1
            n += 1
        return Tally(n, tuple(histogram))

    def moments(self, tally: Tally) -> tuple[Fraction, Fraction]:
        """Σt and Σt² of the tallied reports, exactly (x units): the sums a survey's sampling-split variance
        needs (:mod:`deniable.shared.survey_estimate`)."""
        if len(tally.support) != self.outputs:
            raise InvalidReport(f"a {self.name} tally must have {self.outputs} counts, got {len(tally.support)}")
        return self._moments(tally)

    def _moments(self, tally: Tally) -> tuple[Fraction, Fraction]:
        """Σt and Σt² of the tallied reports, exactly."""
        total = sum((c * self.value_of_report(r) for r, c in enumerate(tally.support) if c), Fraction(0))
        squares = sum((c * self.value_of_report(r) ** 2 for r, c in enumerate(tally.support) if c), Fraction(0))
        return total, squares


    @abstractmethod
    def _variance_sum(self, tally: Tally, mean_x: float, squares: Fraction) -> float:
        """An estimate of Σ_i Var(t_i | x_i) (see :class:`MeanEstimate`)."""

    @property
    @abstractmethod
    def worst_variance(self) -> float:
        """max_x Var(t | x) of one report (x units), lattice and grid excess included."""

    def grid_excess(self) -> float:
        """Upper bound of what rounding to the grid adds to one report's variance (x units)."""
        return 0.0

    def estimate(self, tally: Tally, number_range: NumberRange) -> MeanEstimate:
        """The unbiased mean in the range's units, with its variance."""
        if len(tally.support) != self.outputs:
            raise InvalidReport(f"a {self.name} tally must have {self.outputs} counts, got {len(tally.support)}")
        if tally.n == 0:
            return MeanEstimate(self.name, self.epsilon, 0, math.nan, math.nan, number_range)
        total, squares = self._moments(tally)
        mean_x = float(total / tally.n)
        variance_x = self._variance_sum(tally, mean_x, squares) / tally.n**2
        return MeanEstimate(
            self.name,
            self.epsilon,
            tally.n,
            number_range.value_of(mean_x),
            variance_x * number_range.scale**2,
            number_range,
        )


def _cdf_sample(cdf: tuple[int, ...], denominator: int, randbelow: RandBelow) -> int:
    """The index r with cdf[r−1] ≤ u < cdf[r] for one u = randbelow(denominator)."""
    return bisect.bisect_right(cdf, randbelow(denominator))


@dataclass(frozen=True)
class Duchi(MeanMechanism):
    """Duchi et al.: report 1 (t = +C) or 0 (t = −C), C = (s²+1)/(s²−1)."""

    name: ClassVar[str] = "duchi"
    takes_lattice: ClassVar[bool] = False  # two outputs, ±C: no lattice

    @property
    def outputs(self) -> int:
        return 2

    @functools.cached_property
    def c(self) -> Fraction:
        e = self.s**2
        return (e + 1) / (e - 1)

    def value_of_report(self, report: int) -> Fraction:
        return self.c if report else -self.c

    @functools.cached_property
    def _denominator(self) -> int:
        a, b = self.s.numerator, self.s.denominator
        return 2 * self.steps * (a * a + b * b)

    def _numerator(self, j: int) -> int:
        """D·P(report = 1 | j) = J(a²+b²) + (2j − J)(a² − b²)."""
        a, b = self.s.numerator, self.s.denominator
        return self.steps * (a * a + b * b) + (2 * j - self.steps) * (a * a - b * b)

    def pmf(self, j: int) -> tuple[Fraction, ...]:
        up = Fraction(self._numerator(self.check_index(j)), self._denominator)
        return (1 - up, up)

    def randomize(self, j: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        return int(randbelow(self._denominator) < self._numerator(self.check_index(j)))

    def simulate(self, js: Any, *, rng: Any) -> Any:
        import numpy as np

        js = np.asarray(js, dtype=np.int64)
        up = np.asarray([self._numerator(int(j)) / self._denominator for j in range(self.steps + 1)])[js]
        return (rng.random(js.size) < up).astype(np.int64)

    def _variance_sum(self, tally: Tally, mean_x: float, squares: Fraction) -> float:
        c2 = float(self.c**2)
        return tally.n * (c2 - min(mean_x * mean_x, 1.0))

    @property
    def worst_variance(self) -> float:
        return float(self.c**2)


@dataclass(frozen=True)
class Piecewise(MeanMechanism):
    """The Piecewise Mechanism on a lattice: report k ∈ [0, lattice], t = −C + 2Ck/lattice."""

    name: ClassVar[str] = "piecewise"

    @property
    def outputs(self) -> int:
        return self.lattice + 1

    @functools.cached_property
    def c(self) -> Fraction:
        return (self.s + 1) / (self.s - 1)

    @property
    def h(self) -> Fraction:
        """The lattice step 2C/lattice."""
        return 2 * self.c / self.lattice

    def value_of_report(self, report: int) -> Fraction:
        return -self.c + report * self.h

    @functools.cached_property
    def _denominator(self) -> int:
        """A common denominator of every P(k | j): 2·N·a·b·J²·(a+b)² for s = a/b (checked per law)."""
        a, b = self.s.numerator, self.s.denominator
        return 2 * self.lattice * a * b * self.steps**2 * (a + b) ** 2

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (frozen instances, bounded cache)
    def pmf(self, j: int) -> tuple[Fraction, ...]:
        """P(k | j) = (s/N)[H(r−k) − H(l−k)] + (1/(sN))[H(l−k) − H(−k) + H(N−k) − H(r−k)] in lattice units,
        with l = N·s·j/(J(s+1)) and r = N(sj/J + 1)/(s+1) (the centre piece [l, r] of length N/(s+1))."""
        j = self.check_index(j)
        s, n_cells, steps = self.s, self.lattice, self.steps
        left = Fraction(n_cells) * s * j / (steps * (s + 1))
        right = Fraction(n_cells) * (s * j / steps + 1) / (s + 1)
        inner, outer = s / n_cells, 1 / (s * n_cells)
        law = []
        for k in range(n_cells + 1):
            h_left, h_right = _hat_cdf(left - k), _hat_cdf(right - k)
            law.append(inner * (h_right - h_left) + outer * (h_left - _hat_cdf(Fraction(-k)) + _hat_cdf(
                Fraction(n_cells - k)) - h_right))
        return tuple(law)

    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def _cdf(self, j: int) -> tuple[int, ...]:
        """D·P(report ≤ k | j) for k = 0..N, in integers: the law of :meth:`pmf` times D, term by term.

        With s = a/b and M = J(a+b), every argument of H in :meth:`pmf` is x/M for an integer x, and
        D·(s/N)·H(x/M) = a²·Ĥ(x), D·(1/(sN))·H(x/M) = b²·Ĥ(x) for the integer Ĥ(x) = 2M²·H(x/M) (0, (x+M)²,
        2M² − (M−x)², 2M² on the four pieces), so D·P(k | j) = a²[Ĥ(x_r) − Ĥ(x_l)] + b²[Ĥ(x_l) − Ĥ(−kM) +
        Ĥ((N−k)M) − Ĥ(x_r)] with x_l = N·a·j − kM, x_r = N(a·j + b·J) − kM: exact integers, no rational
        arithmetic (``tests/unit/test_mean_mechanisms.py`` checks them against :meth:`pmf`)."""
        j = self.check_index(j)
        a, b = self.s.numerator, self.s.denominator
        n_cells, m = self.lattice, self.steps * (a + b)
        a2, b2, top = a * a, b * b, 2 * m * m

        def hat(x: int) -> int:
            if x <= -m:
                return 0
            if x <= 0:
                return (x + m) ** 2
            if x <= m:
                return top - (m - x) ** 2
            return top

        left, right = n_cells * a * j, n_cells * (a * j + b * self.steps)
        cdf, running = [], 0
        for k in range(n_cells + 1):
            shift = k * m
            h_left, h_right = hat(left - shift), hat(right - shift)
            running += a2 * (h_right - h_left) + b2 * (h_left - hat(-shift) + hat(n_cells * m - shift) - h_right)
            cdf.append(running)
        if running != self._denominator:
            raise AssertionError(f"piecewise: the law of index {j} does not sum to 1")
        return tuple(cdf)

    def randomize(self, j: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        return _cdf_sample(self._cdf(self.check_index(j)), self._denominator, randbelow)

    def simulate(self, js: Any, *, rng: Any) -> Any:
        import numpy as np

        js = np.asarray(js, dtype=np.int64)
        s, n_cells = float(self.s), self.lattice
        left = js * (n_cells * s / (self.steps * (s + 1)))
        width = n_cells / (s + 1)
        # one uniform on [0, N) placed by the law: the centre piece holds mass s/(s+1) over length N/(s+1)
        u = rng.random(js.size) * n_cells
        centre_mass = n_cells * s / (s + 1)
        inner = u < centre_mass
        # centre: uniform on [l, l + N/(s+1)); outer: uniform on the rest, of length N·s/(s+1)
        position = np.where(inner, left + u / s, (u - centre_mass) * s)
        position = np.where(inner | (position < left), position, position + width)
        # randomized rounding to the lattice: ⌊u + U⌋ is ⌈u⌉ with probability frac(u)
        k = np.floor(position + rng.random(js.size)).astype(np.int64)
        return np.minimum(k, n_cells)

    def _moments(self, tally: Tally) -> tuple[Fraction, Fraction]:
        return _lattice_moments(tally.support, self.c, self.h)

    @property
    def _a(self) -> float:
        return 1 / (float(self.s) - 1)

    @property
    def _b0(self) -> float:
        s = float(self.s)
        return (s + 3) / (3 * (s - 1) ** 2)

    def grid_excess(self) -> float:
        """(1 + a)·g²/4 with g = 2/steps: rounding the input to the grid, at its worst (u = ½)."""
        return (1 + self._a) * (2 / self.steps) ** 2 / 4

    def _variance_sum(self, tally: Tally, mean_x: float, squares: Fraction) -> float:
        """Σ V̂_i with V̂ = (a·t² + b₀ + h²/6)/(1 + a) + g²/4 + h²/12, unbiased for Var(t | x) up to the lattice
        term (which it bounds) and the grid term (which it bounds by its worst case)."""
        a, h2 = self._a, float(self.h) ** 2
        per_report = (self._b0 + h2 / 6) / (1 + a) + (2 / self.steps) ** 2 / 4 + h2 / 12
        return (a * float(squares)) / (1 + a) + tally.n * per_report

    @property
    def worst_variance(self) -> float:
        return self._a + self._b0 + float(self.h) ** 2 / 4 + self.grid_excess()


@dataclass(frozen=True)
class Hybrid(MeanMechanism):
    """The Hybrid: PM with probability α = 1 − 1/s (ε > ε*), Duchi otherwise; reports 0..N are PM's lattice
    indices, N+1 and N+2 Duchi's −C and +C."""

    name: ClassVar[str] = "hybrid"

    @functools.cached_property
    def piecewise(self) -> Piecewise:
        return Piecewise(self.epsilon, self.steps, self.lattice)

    @functools.cached_property
    def duchi(self) -> Duchi:
        return Duchi(self.epsilon, self.steps, self.lattice)

    @functools.cached_property
    def alpha(self) -> Fraction:
        """P(PM branch) = 1 − 1/s = (a − b)/a for s = a/b, or 0 at ε ≤ ε*."""
        return 1 - 1 / self.s if self.epsilon > HYBRID_THRESHOLD else Fraction(0)

    @property
    def outputs(self) -> int:
        return self.lattice + 3

    def value_of_report(self, report: int) -> Fraction:
        if report <= self.lattice:
            return self.piecewise.value_of_report(report)
        return self.duchi.value_of_report(report - self.lattice - 1)

    def pmf(self, j: int) -> tuple[Fraction, ...]:
        pm, du = self.piecewise.pmf(j), self.duchi.pmf(j)
        return tuple(self.alpha * p for p in pm) + tuple((1 - self.alpha) * p for p in du)

    def randomize(self, j: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        j = self.check_index(j)
        alpha = self.alpha
        branch = randbelow(alpha.denominator) < alpha.numerator
        pm = self.piecewise.randomize(j, randbelow=randbelow)
        du = self.duchi.randomize(j, randbelow=randbelow)
        return pm if branch else self.lattice + 1 + du

    def simulate(self, js: Any, *, rng: Any) -> Any:
        import numpy as np

        js = np.asarray(js, dtype=np.int64)
        pm = self.piecewise.simulate(js, rng=rng)
        du = self.duchi.simulate(js, rng=rng)
        branch = rng.random(js.size) < float(self.alpha)
        return np.where(branch, pm, self.lattice + 1 + du)

    def _moments(self, tally: Tally) -> tuple[Fraction, Fraction]:
        total, squares = _lattice_moments(tally.support[: self.lattice + 1], self.piecewise.c, self.piecewise.h)
        minus, plus = tally.support[self.lattice + 1 :]
        c = self.duchi.c
        return total + (plus - minus) * c, squares + (plus + minus) * c * c

    def _per_report(self) -> float:
        """α·(b₀ + h²/4 + (1+a)g²/4) + (1−α)·C_D²: the x-free variance of one report, bounded above (the
        x² terms cancel when α = 1 − 1/s; at α = 0 this is Duchi's worst case)."""
        alpha = float(self.alpha)
        pm = self.piecewise
        return alpha * (pm._b0 + float(pm.h) ** 2 / 4 + pm.grid_excess()) + (1 - alpha) * float(self.duchi.c**2)

    def _variance_sum(self, tally: Tally, mean_x: float, squares: Fraction) -> float:
        if self.alpha == 0:
            return self.duchi._variance_sum(tally, mean_x, squares)
        return tally.n * self._per_report()

    @property
    def worst_variance(self) -> float:
        return self._per_report()


#: Wire name → class.
MEAN_MECHANISMS: dict[str, type[MeanMechanism]] = REGISTRY["number"]


def mean_mechanism_from_name(name: str, *, epsilon: float, steps: int, lattice: int = DEFAULT_LATTICE) -> MeanMechanism:
    """Build a mean mechanism from its wire name (``duchi``, ``piecewise``, ``hybrid``)."""
    cls = MEAN_MECHANISMS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidParameter(f"a number question's mechanism must be one of auto, {', '.join(MEAN_MECHANISMS)}, "
                               f"got {name!r}")
    return cls(epsilon, steps, lattice)


def choose_mean_mechanism(epsilon: float, steps: int, lattice: int = DEFAULT_LATTICE) -> MeanMechanism:
    """``auto``: the mechanism with the lowest worst-case variance at this ε (the Hybrid at every ε, which
    equals Duchi below ε*; PM is better only for data near the centre, chosen explicitly)."""
    candidates = [cls(epsilon, steps, lattice) for cls in (Hybrid, Duchi, Piecewise)]
    return min(candidates, key=lambda m: m.worst_variance)
