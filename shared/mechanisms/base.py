"""The common shape of every local randomizer: a pure protocol with its tally and unbiased estimator.

A mechanism is an immutable value (a frozen dataclass whose repr shows ε). It owns, in one place, the
randomizer (secure :meth:`randomize` for devices, vectorized :meth:`simulate` for experiments), the exact
output probabilities, the report encoding, the tally and the estimator with its variance, so that client and
aggregator never derive p or q twice.
"""

from __future__ import annotations

import functools
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from ..errors import InvalidParameter
from ..limits import MECHANISM_EPSILON, check_range
from ..sampling import RandBelow, exp_lower
from .estimate import Estimate, Tally, pure_estimate

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "MAX_EPSILON",
    "MAX_K",
    "MIN_EPSILON",
    "REPORT_LAYOUTS",
    "Mechanism",
    "Report",
    "ReportLayout",
    "check_epsilon",
    "check_k",
]

#: The type of one device report of a mechanism (``int`` for GRR and OUE's bitmask, ``OLHReport``...).
Report = TypeVar("Report")

#: Smallest and largest ε a mechanism accepts (``deniable.shared.limits.MECHANISM_EPSILON``, which says why).
MIN_EPSILON, MAX_EPSILON = MECHANISM_EPSILON
#: Largest domain size (bounded by the OLH hash's prime 2^31 − 1 and by unary reports' size).
MAX_K = 1 << 20
#: The column layouts of a report (:attr:`Mechanism.report_layout`).
ReportLayout = Literal["index", "bitmask", "seeded-bucket"]
REPORT_LAYOUTS: tuple[ReportLayout, ...] = ("index", "bitmask", "seeded-bucket")


def check_epsilon(epsilon: object) -> float:
    """Validate ε: a finite real number in [MIN_EPSILON, MAX_EPSILON] (1e-06 to 20)."""
    return check_range("epsilon", epsilon, MECHANISM_EPSILON, InvalidParameter)


def check_k(k: object, minimum: int = 2) -> int:
    """Validate the domain size k: an integer in [minimum, MAX_K]."""
    if isinstance(k, bool) or not isinstance(k, Integral) or not minimum <= int(k) <= MAX_K:
        raise InvalidParameter(f"'k' must be an integer in [{minimum}, {MAX_K}], got {k!r}")
    return int(k)


@dataclass(frozen=True)
class Mechanism(ABC, Generic[Report]):
    """An ε-LDP frequency oracle over the categories {0, …, k−1} (a pure protocol, Wang et al. 2017).

    Subclasses define p* = P(v ∈ Support(y) | x = v) and q* = P(v ∈ Support(y) | x ≠ v), the randomizer,
    the report encoding and the support of a report; estimation is shared. Each concrete class also knows
    its wire facts (``name``, ``wire_type``, ``wire_description``, ``fixed_k``, :meth:`public_params`) and is
    listed once, by ``@register``, in :mod:`deniable.shared.mechanisms.registry`.
    """

    epsilon: float
    k: int

    #: The wire name (the descriptor's ``mechanism``).
    name: ClassVar[str]
    #: The kind of answer (registry): one of k categories.
    kind: ClassVar[Literal["choice"]] = "choice"
    #: The Python type of the JSON wire report (``int``, ``str`` or ``dict``) and how messages name it.
    wire_type: ClassVar[type]
    wire_description: ClassVar[str]
    #: The one k the mechanism runs at (binary randomized response: 2), or None for any k.
    fixed_k: ClassVar[int | None] = None
    #: Each public parameter of :meth:`public_params` with the rule that fixes it (for messages and docs).
    param_rules: ClassVar[dict[str, str]] = {}
    #: How a decoded report is laid out in typed columns (the batch pipeline's Parquet files,
    #: ``aggregator/batch/columns.py``), one of :data:`REPORT_LAYOUTS`: ``"index"``, one category index (an
    #: ``int``; :meth:`simulate` returns an integer array); ``"bitmask"``, a k-bit mask (an ``int``; simulate
    #: returns an n × k boolean matrix); ``"seeded-bucket"``, a 64-bit hash seed and a bucket (``.seed``, ``.y``;
    #: simulate returns ``OLHReports``).
    report_layout: ClassVar[ReportLayout]

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_k(self.k))

    @classmethod
    def build(cls, epsilon: float, k: int) -> Mechanism[Any]:
        """The mechanism at (ε, k); ``InvalidParameter`` if it cannot run there (e.g. binary-rr at k ≠ 2)."""
        if cls.fixed_k is not None and k != cls.fixed_k:
            raise InvalidParameter(f"'k' must be {cls.fixed_k} for {cls.name}, got {k!r}")
        return cls(epsilon, k)

    def public_params(self) -> dict[str, int]:
        """The descriptor's ``params`` beyond ``k``: derived from (ε, k), public, checked by every device."""
        return {}

    # -- parameters -------------------------------------------------------------------------------------
    @property
    def epsilon_exact(self) -> Fraction:
        """ε as the exact rational value of its float: what the exact samplers use."""
        return Fraction(self.epsilon)

    @functools.cached_property
    def weight(self) -> Fraction:
        """The rational r ≤ e^ε that randomized response weighs the true value by (exactly ln(r)-LDP).

        e^ε·(1 − 10⁻³⁸) < r ≤ e^ε (:func:`deniable.shared.sampling.exp_lower`): a fixed pattern of uniform
        draws can only produce rational probabilities. p* and q* are computed from r, exactly, then rounded
        once to a float, so the estimator matches the sampler to the last bit.
        """
        return exp_lower(self.epsilon_exact)

    @property
    @abstractmethod
    def p_star(self) -> float:
        """P(v ∈ Support(y) | x = v)."""

    @property
    @abstractmethod
    def q_star(self) -> float:
        """P(v ∈ Support(y) | x ≠ v)."""

    @property
    def gap(self) -> float:
        """p* − q*; subclasses compute it with expm1 so that it keeps full precision at small ε."""
        return self.p_star - self.q_star

    def per_user_variance(self) -> float:
        """Approximate variance of one count per respondent, q*(1−q*)/(p*−q*)² (the n_v → 0 term)."""
        q = self.q_star
        return q * (1 - q) / self.gap**2

    # -- values ----------------------------------------------------------------------------------------
    def check_value(self, value: object) -> int:
        """Validate a true value: an integer category index in [0, k)."""
        if isinstance(value, bool) or not isinstance(value, Integral) or not 0 <= int(value) < self.k:
            raise InvalidParameter(
                f"'value' must be an integer category index in [0, {self.k}), got {value!r}"
            )
        return int(value)

    def _check_values(self, values: Any) -> npt.NDArray[np.int64]:
        import numpy as np

        array = np.asarray(values)
        if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
            raise InvalidParameter("'values' must be a one-dimensional sequence of integer category indices")
        array = array.astype(np.int64, copy=False)
        if array.size and (array.min() < 0 or array.max() >= self.k):
            raise InvalidParameter(f"'values' must lie in [0, {self.k}), got values in "
                                   f"[{array.min()}, {array.max()}]")
        return array

    # -- randomizers -----------------------------------------------------------------------------------
    @abstractmethod
    def randomize(self, value: int, *, randbelow: RandBelow = secrets.randbelow) -> Report:
        """One ε-LDP report of ``value``, sampled exactly from ``randbelow`` (default: the OS CSPRNG)."""

    @abstractmethod
    def simulate(self, values: Any, *, rng: np.random.Generator) -> Any:
        """Reports for many values at once, drawn from the numpy generator ``rng`` (simulation only).

        Same distribution as :meth:`randomize`, but the generator is not a CSPRNG and floats are compared
        with probabilities: never use this on a device.
        """

    @abstractmethod
    def output_probability(self, value: int, report: Report) -> float:
        """P(report | value), exactly as the randomizer draws it (for OLH, conditional on the seed)."""

    # -- reports ---------------------------------------------------------------------------------------
    @abstractmethod
    def encode_report(self, report: Report) -> Any:
        """The report as a JSON value of type :attr:`wire_type` (docs/wire-format.md)."""

    @abstractmethod
    def decode_report(self, obj: Any) -> Report:
        """Parse and validate a JSON report; raises InvalidReport if it is outside the report space."""

    @abstractmethod
    def widest_report(self) -> Report:
        """A report whose canonical-JSON wire encoding is the longest of the report space.

        The envelope pads every payload to the length of the widest one (docs/wire-format.md §7.1), so the
        ciphertext's size says nothing about the report.
        """

    @abstractmethod
    def support(self, report: Report) -> list[int]:
        """The categories v with v ∈ Support(report)."""

    @abstractmethod
    def _tally_simulated(self, reports: Any) -> Tally | None:
        """Vectorized tally of :meth:`simulate` output, or None if ``reports`` is not such output."""

    @abstractmethod
    def split_simulated(self, simulated: Any) -> list[Report]:
        """:meth:`simulate` output as one device report per value (what :meth:`encode_report` takes)."""

    def stored_form(self, report: Report) -> tuple[Any, list[int]]:
        """The wire JSON and the support of a report already decoded by :meth:`decode_report`: what the
        aggregator stores and tallies, without decoding the report again. Subclasses compute both directly."""
        return self.encode_report(report), self.support(report)

    def support_pattern_law(self) -> tuple[float, float, float, float]:
        """P(code | x = 0) of the codes 0..3 of :meth:`support_pattern` (the law with x = 1 swaps codes 1, 2).

        This default holds where the events 0 ∈ S and 1 ∈ S are independent given the value (OUE's bits,
        OLH's hash matches): (1−p*)(1−q*), (1−p*)q*, p*(1−q*), p*q*. GRR overrides it (one category per
        report: the events exclude each other). The privacy-loss view (``deniable audit --tradeoff``,
        ``aggregator/tools/tradeoff.py``) takes it as the mechanism's exact law on the neighbours 0 and 1;
        ``tests/unit/test_registry.py`` checks it against simulated reports for every registered mechanism.
        """
        p, q = self.p_star, self.q_star
        return ((1 - p) * (1 - q), (1 - p) * q, p * (1 - q), p * q)

    def support_pattern(self, simulated: Any) -> npt.NDArray[np.int64]:
        """2·[0 ∈ Support(y)] + [1 ∈ Support(y)] for each report of :meth:`simulate` output: what the
        auditor (``deniable audit``) compares between the neighbouring inputs 0 and 1. Subclasses vectorize
        it; this generic form goes through :meth:`split_simulated` and :meth:`support`."""
        import numpy as np

        reports = self.split_simulated(simulated)
        codes = (2 * (0 in s) + (1 in s) for s in (set(self.support(r)) for r in reports))
        result: npt.NDArray[np.int64] = np.fromiter(codes, dtype=np.int64, count=len(reports))
        return result

    def support_matrix(self, simulated: Any) -> npt.NDArray[np.bool_]:
        """The n × k matrix [v ∈ Support(yᵢ)] of :meth:`simulate` output (the rows of the tally before they
        are summed). Subclasses vectorize it; this generic form goes through :meth:`split_simulated`."""
        import numpy as np

        reports = self.split_simulated(simulated)
        matrix = np.zeros((len(reports), self.k), dtype=bool)
        for i, report in enumerate(reports):
            matrix[i, self.support(report)] = True
        return matrix

    def indicators(self, simulated: Any) -> npt.NDArray[np.float64]:
        """φ(yᵢ)_v = ([v ∈ Support(yᵢ)] − q*)/(p* − q*): per report, an unbiased estimate of [xᵢ = v].

        E[φ(y)_v | x] = ([x = v]·p* + [x ≠ v]·q* − q*)/(p* − q*) = [x = v], for every pure protocol (GRR and
        binary: (1[y = v] − q)/(p − q); OUE: (bit_v − q)/(1/2 − q); OLH: (1[H_seed(v) = y] − 1/g)/(p − 1/g)).
        Summed over reports it is the count estimate of :meth:`estimate_tally`; the product of two
        independently randomized questions' φ estimates their joint indicator (``deniable batch --cross``).
        """
        import numpy as np

        result: npt.NDArray[np.float64] = (self.support_matrix(simulated).astype(np.float64) - self.q_star) / self.gap
        return result

    def tally(self, reports: Iterable[Report] | Any) -> Tally:
        """Sufficient statistic of ``reports``: device reports (an iterable) or :meth:`simulate` output."""
        fast = self._tally_simulated(reports)
        if fast is not None:
            return fast
        n = 0
        counts = [0] * self.k
        for report in reports:
            n += 1
            for v in self.support(report):
                counts[v] += 1
        return Tally(n, tuple(counts))

    # -- estimation ------------------------------------------------------------------------------------
    def estimate(self, reports: Iterable[Report] | Any) -> Estimate:
        """Unbiased counts with standard errors from reports (see :meth:`estimate_tally`)."""
        return self.estimate_tally(self.tally(reports))

    def estimate_tally(self, tally: Tally) -> Estimate:
        """ĉ_v = (S_v − n·q*)/(p*−q*), Var̂(ĉ_v) = n·q*(1−q*)/(p*−q*)² + ĉ_v·(1−p*−q*)/(p*−q*).

        O(k) whatever n. The plug-in variance is unbiased (linear in the count) and non-negative.
        """
        if tally.k != self.k:
            raise InvalidParameter(f"tally has {tally.k} categories, mechanism has k={self.k}")
        return pure_estimate(self.name, self.epsilon, tally, self.p_star, self.q_star, self.gap)

    def count_variance(self, true_counts: Sequence[int] | Iterable[int]) -> npt.NDArray[np.float64]:
        """Exact Var(ĉ_v) given the true counts n_v (n = Σ n_v), including the n_v term:

        Var(ĉ_v) = n·q*(1−q*)/(p*−q*)² + n_v·(1−p*−q*)/(p*−q*)   (Wang et al. 2017, Thm. 2).
        """
        import numpy as np

        counts = np.asarray(list(true_counts), dtype=np.float64)
        if counts.shape != (self.k,) or (counts < 0).any():
            raise InvalidParameter(f"'true_counts' must be {self.k} non-negative counts")
        n = counts.sum()
        p, q, gap = self.p_star, self.q_star, self.gap
        result: npt.NDArray[np.float64] = n * q * (1 - q) / gap**2 + counts * (1 - p - q) / gap
        return result
