"""Set-valued answers ("select all that apply"): any subset of k options with at most m of them, ε-LDP for
the whole set (any two allowed sets are neighbours).

Both mechanisms are *pure protocols*: a respondent who selected option v supports v with probability p*,
one who did not with q*, so ĉ_v = (S_v − n·q*)/(p* − q*) is unbiased for n_v, the number of respondents who
selected v, with Var = [n_v p*(1−p*) + (n − n_v) q*(1−q*)]/(p* − q*)² (the estimator, variance and score
interval of :func:`~deniable.shared.mechanisms.estimate.pure_estimate`, shared with the single-choice
mechanisms).

* ``bitvector``: one bit per option (OUE-style): bit v is 1 with probability ½ if v was selected, with
  q = 1/(e^(ε/m)+1) otherwise. A selected bit weighs a report by at most 1/(2q), an unselected one by at
  most 2(1−q), so between two sets of at most m options the likelihood ratio is at most
  (1/(2q))^m·(2(1−q))^m = (e^(ε/m))^m = e^ε (exactly e^ε when k ≥ 2m: m selected bits against m others).
  The symmetric per-bit flip needs ε/min(2m, k) per bit, not ε/m (which gives 2ε): this asymmetric form
  is exact at ε/m and has the lower variance. Its cost grows like m².
* ``padding`` (padding-and-sampling, Wang, Li and Jha, IEEE S&P 2018; Qin et al., CCS 2016): pad the set
  to exactly ℓ = m items with m − |A| *distinct* dummy symbols k, k+1, …, pick one of the m items
  uniformly and report it by randomized response over the D = k + m symbols. With distinct dummies
  P(y | A) ∈ {q, q + (p−q)/m}, so the worst ratio is 1 + (e^ε′ − 1)/m: running the randomized response at
  e^ε′ = 1 + m(e^ε − 1) makes the whole set exactly ε-LDP (an amplification that holds for GRR, not for
  OLH or OUE, nor with one merged dummy). p* = q + (p−q)/m, q* = q. The better choice for m ≥ 2.

Exactness and the draw pattern: e^ε is the rational r = :func:`~deniable.shared.sampling.exp_lower` (ε)
≤ e^ε (r_m = exp_lower(ε/m) for the bit vector, whose worst ratio is r_m^m ≤ e^ε); the bit vector draws k
uniform integers with one bound (:func:`~deniable.shared.sampling.unary_set_bits`), padding one
``randbelow(m)`` and one randomized-response draw, whatever the set.
"""

from __future__ import annotations

import functools
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal

from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.mechanisms.base import check_epsilon, check_k
from deniable.shared.mechanisms.estimate import Estimate, Tally, pure_estimate
from deniable.shared.mechanisms.registry import REGISTRY
from deniable.shared.sampling import RandBelow, exp_lower, randomized_response, unary_set_bits

__all__ = [
    "SET_MECHANISMS",
    "BitVector",
    "Padding",
    "SetMechanism",
    "choose_set_mechanism",
    "set_mechanism_from_name",
]

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class SetMechanism(ABC):
    """An ε-LDP randomizer of a set of at most ``m`` of ``k`` options, a pure protocol over the options."""

    epsilon: float
    k: int
    m: int
    name: ClassVar[str]
    #: Registry facts (:mod:`deniable.shared.mechanisms.registry`): a set of options.
    kind: ClassVar[Literal["multi"]] = "multi"
    wire_type: ClassVar[type]
    wire_description: ClassVar[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_k(self.k, minimum=1))
        if isinstance(self.m, bool) or not isinstance(self.m, int) or not 1 <= self.m <= self.k:
            raise InvalidParameter(f"'m' (most options one answer may select) must be an integer in [1, {self.k}], "
                                   f"got {self.m!r}")

    def check_set(self, selected: object) -> frozenset[int]:
        """The selected option indices as a set: distinct integers in [0, k), at most m of them."""
        if isinstance(selected, str | bytes) or not isinstance(selected, Iterable):
            raise InvalidParameter(f"a set answer must be a list of option indices, got {selected!r}")
        items = list(selected)
        for v in items:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < self.k:
                raise InvalidParameter(f"an option index must be an integer in [0, {self.k}), got {v!r}")
        if len(set(items)) != len(items):
            raise InvalidParameter(f"a set answer names an option twice: {sorted(items)}")
        if len(items) > self.m:
            raise InvalidParameter(f"at most {self.m} options may be selected, got {len(items)}")
        return frozenset(items)

    # -- the pure protocol's parameters (exact, then rounded once) -----------------------------------
    @property
    @abstractmethod
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) exactly: the probability that a report supports v if v was selected, and if not."""

    @property
    def p_star(self) -> float:
        return float(self.support_probabilities[0])

    @property
    def q_star(self) -> float:
        return float(self.support_probabilities[1])

    @property
    def gap(self) -> float:
        p, q = self.support_probabilities
        return float(p - q)

    def per_user_variance(self, fraction: float) -> float:
        """Var(ĉ_v)/n when a ``fraction`` of the respondents selected v."""
        p, q, gap = self.p_star, self.q_star, self.gap
        return (fraction * p * (1 - p) + (1 - fraction) * q * (1 - q)) / gap**2

    @property
    def worst_variance(self) -> float:
        """max over the share of selectors of Var(ĉ_v)/n (at share 0 or 1)."""
        return max(self.per_user_variance(0.0), self.per_user_variance(1.0))

    # -- randomizer, reports, law -------------------------------------------------------------------
    @abstractmethod
    def randomize(self, selected: Iterable[int], *, randbelow: RandBelow = secrets.randbelow) -> int:
        """One report of the set (a fixed pattern of draws whatever the set)."""

    @abstractmethod
    def output_probability(self, selected: Iterable[int], report: int) -> Fraction:
        """P(report | selected), exactly."""

    @abstractmethod
    def reports(self) -> Iterable[int]:
        """Every possible report (for exact enumeration in tests and audits)."""

    @abstractmethod
    def support(self, report: int) -> list[int]:
        """The options the report supports."""

    @abstractmethod
    def encode_report(self, report: int) -> Any: ...

    @abstractmethod
    def decode_report(self, obj: object) -> int: ...

    @abstractmethod
    def simulate(self, selections: Any, *, rng: Any) -> Any:
        """Vectorized reports of an (n, k) boolean matrix of selections (simulation only: floats, seeded)."""

    @abstractmethod
    def _tally_simulated(self, reports: Any) -> Tally: ...

    def tally(self, reports: Any) -> Tally:
        """Support counts of the options: over device reports (an iterable of ints) or simulate's output."""
        try:
            import numpy as np

            if isinstance(reports, np.ndarray):
                return self._tally_simulated(reports)
        except ImportError:  # pragma: no cover - devices never tally
            pass
        counts = [0] * self.k
        n = 0
        for report in reports:
            n += 1
            for v in self.support(report):
                counts[v] += 1
        return Tally(n, tuple(counts))

    def estimate_tally(self, tally: Tally) -> Estimate:
        """Unbiased numbers of respondents selecting each option, with variance and score interval."""
        if tally.k != self.k:
            raise InvalidParameter(f"tally has {tally.k} options, mechanism has k={self.k}")
        return pure_estimate(self.name, self.epsilon, tally, self.p_star, self.q_star, self.gap)

    def _check_selections(self, selections: Any) -> Any:
        import numpy as np

        matrix = np.asarray(selections, dtype=bool)
        if matrix.ndim != 2 or matrix.shape[1] != self.k:
            raise InvalidParameter(f"'selections' must be an (n, {self.k}) boolean matrix")
        if matrix.size and matrix.sum(axis=1).max() > self.m:
            raise InvalidParameter(f"every row of 'selections' may select at most {self.m} options")
        return matrix


@dataclass(frozen=True)
class BitVector(SetMechanism):
    """One bit per option: ½ if selected, q = 1/(r_m + 1) if not, r_m = exp_lower(ε/m)."""

    name: ClassVar[str] = "bitvector"
    wire_type: ClassVar[type] = str
    wire_description: ClassVar[str] = "string of hex digits"

    @functools.cached_property
    def weight(self) -> Fraction:
        return exp_lower(Fraction(self.epsilon) / self.m)

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(1, 2), 1 / (self.weight + 1)

    def randomize(self, selected: Iterable[int], *, randbelow: RandBelow = secrets.randbelow) -> int:
        mask = sum(1 << v for v in self.check_set(selected))
        return unary_set_bits(mask, self.k, self.weight, randbelow)

    def output_probability(self, selected: Iterable[int], report: int) -> Fraction:
        chosen = self.check_set(selected)
        report = self.decode_report(report)
        _, q = self.support_probabilities
        result = Fraction(1)
        for v in range(self.k):
            bit = (report >> v) & 1
            result *= Fraction(1, 2) if v in chosen else (q if bit else 1 - q)
        return result

    def reports(self) -> Iterable[int]:
        return range(1 << self.k)

    def support(self, report: int) -> list[int]:
        mask = self.decode_report(report)
        return [v for v in range(self.k) if (mask >> v) & 1]

    @property
    def hex_digits(self) -> int:
        return (self.k + 3) // 4

    def encode_report(self, report: int) -> str:
        return format(self.decode_report(report), f"0{self.hex_digits}x")

    def decode_report(self, obj: object) -> int:
        if isinstance(obj, int) and not isinstance(obj, bool):
            mask = obj
        elif isinstance(obj, str) and len(obj) == self.hex_digits and set(obj) <= _HEX:
            mask = int(obj, 16)
        else:
            raise InvalidReport(f"a bitvector report must be {self.hex_digits} lowercase hex digits, got {obj!r}")
        if mask < 0 or mask >> self.k:
            raise InvalidReport(f"a bitvector report sets a bit at or above k={self.k}")
        return mask

    def simulate(self, selections: Any, *, rng: Any) -> Any:
        matrix = self._check_selections(selections)
        bits = rng.random(matrix.shape) < self.q_star
        fair = rng.random(matrix.shape) < 0.5
        bits[matrix] = fair[matrix]
        return bits

    def _tally_simulated(self, reports: Any) -> Tally:
        import numpy as np

        if reports.ndim != 2 or reports.shape[1] != self.k:
            raise InvalidReport(f"simulated bitvector reports must be an (n, {self.k}) array")
        return Tally(int(reports.shape[0]), tuple(int(c) for c in np.count_nonzero(reports, axis=0)))


@dataclass(frozen=True)
class Padding(SetMechanism):
    """Padding-and-sampling to m items with distinct dummies, then randomized response over k + m symbols
    at weight r′ = 1 + m(r − 1), r = exp_lower(ε) (reports ≥ k are dummies and support nothing)."""

    name: ClassVar[str] = "padding"
    wire_type: ClassVar[type] = int
    wire_description: ClassVar[str] = "integer"

    @property
    def symbols(self) -> int:
        return self.k + self.m

    @functools.cached_property
    def weight(self) -> Fraction:
        """r′ = 1 + m(r − 1): the randomized response's weight that makes the padded set exactly ln r-LDP."""
        return 1 + self.m * (exp_lower(Fraction(self.epsilon)) - 1)

    @functools.cached_property
    def _grr(self) -> tuple[Fraction, Fraction]:
        """(p, q) of the randomized response over the D symbols."""
        total = self.weight + self.symbols - 1
        return self.weight / total, 1 / total

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        p, q = self._grr
        return q + (p - q) / self.m, q

    def _items(self, chosen: frozenset[int]) -> list[int]:
        """The set padded to m distinct items with the dummies k, k+1, …"""
        return sorted(chosen) + [self.k + i for i in range(self.m - len(chosen))]

    def randomize(self, selected: Iterable[int], *, randbelow: RandBelow = secrets.randbelow) -> int:
        items = self._items(self.check_set(selected))
        item = items[randbelow(self.m)]
        return randomized_response(item, self.symbols, self.weight, randbelow)

    def output_probability(self, selected: Iterable[int], report: int) -> Fraction:
        items = self._items(self.check_set(selected))
        p, q = self._grr
        return q + (p - q) * Fraction(items.count(self.decode_report(report)), self.m)

    def reports(self) -> Iterable[int]:
        return range(self.symbols)

    def support(self, report: int) -> list[int]:
        y = self.decode_report(report)
        return [y] if y < self.k else []

    def encode_report(self, report: int) -> int:
        return self.decode_report(report)

    def decode_report(self, obj: object) -> int:
        if isinstance(obj, bool) or not isinstance(obj, int) or not 0 <= obj < self.symbols:
            raise InvalidReport(f"a padding report must be an integer in [0, {self.symbols}), got {obj!r}")
        return obj

    def simulate(self, selections: Any, *, rng: Any) -> Any:
        import numpy as np

        matrix = self._check_selections(selections)
        n = matrix.shape[0]
        sizes = matrix.sum(axis=1)
        first = np.argsort(~matrix, axis=1, kind="stable")[:, : self.m]  # selected options first, in order
        pick = rng.integers(0, self.m, size=n)
        chosen = first[np.arange(n), np.minimum(pick, self.m - 1)]
        item = np.where(pick < sizes, chosen, self.k + pick)  # a dummy: distinct, and never supports an option
        p, _ = self._grr
        keep = rng.random(n) < float(p)
        other = (item + 1 + rng.integers(0, self.symbols - 1, size=n)) % self.symbols
        return np.where(keep, item, other).astype(np.int64)

    def _tally_simulated(self, reports: Any) -> Tally:
        import numpy as np

        reports = np.asarray(reports, dtype=np.int64)
        if reports.ndim != 1 or (reports.size and (reports.min() < 0 or reports.max() >= self.symbols)):
            raise InvalidReport(f"simulated padding reports must be integers in [0, {self.symbols})")
        counts = np.bincount(reports, minlength=self.symbols)[: self.k]
        return Tally(int(reports.size), tuple(int(c) for c in counts))


#: Wire name → class.
SET_MECHANISMS: dict[str, type[SetMechanism]] = REGISTRY["multi"]


def set_mechanism_from_name(name: str, *, epsilon: float, k: int, m: int) -> SetMechanism:
    """Build a set mechanism from its wire name (``bitvector``, ``padding``)."""
    cls = SET_MECHANISMS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidParameter(
            f"a multi question's mechanism must be one of auto, {', '.join(SET_MECHANISMS)}, got {name!r}"
        )
    return cls(epsilon, k, m)


def choose_set_mechanism(
    epsilon: float, k: int, m: int, candidates: Sequence[str] = ("padding", "bitvector")
) -> SetMechanism:
    """``auto``: the mechanism with the lower worst-case variance per option (padding for m ≥ 2 in every
    case of the formula sheet's table; at m = 1 either may win)."""
    built = [set_mechanism_from_name(name, epsilon=epsilon, k=k, m=m) for name in candidates]
    return min(built, key=lambda mechanism: mechanism.worst_variance)
