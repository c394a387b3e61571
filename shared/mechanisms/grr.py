"""Generalized (k-ary) randomized response and Warner's binary randomized response.

GRR (direct encoding; Wang et al. 2017, "DE"): report the true value with p = e^ε/(e^ε+k−1), each other
value with q = 1/(e^ε+k−1). p/q = e^ε, so it is ε-LDP. Support(y) = {y}, p* = p, q* = q, and

    Var(ĉ_v) = n·q(1−q)/(p−q)² + n_v·(1−p−q)/(p−q).

BinaryRR (Warner 1965): GRR with k = 2, keep probability e^ε/(e^ε+1). p + q = 1, so the variance is the
constant n·e^ε/(e^ε−1)² whatever the true count (≈ 303² at n = 10⁵, ε = 1).

e^ε stands for the mechanism's rational weight r ≤ e^ε (within 10⁻³⁸, :attr:`Mechanism.weight`): it lets one
draw of fixed bound decide the report, so the draws never depend on the value (``deniable.shared.sampling``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from numbers import Integral
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InvalidParameter, InvalidReport
from ..sampling import RandBelow, randomized_response
from .base import Mechanism, ReportLayout
from .estimate import Tally

if TYPE_CHECKING:
    import numpy as np

__all__ = ["GRR", "BinaryRR"]


@dataclass(frozen=True)
class GRR(Mechanism[int]):
    """Generalized randomized response over k categories; a report is the category index it names."""

    name: ClassVar[str] = "grr"
    wire_type: ClassVar[type] = int
    wire_description: ClassVar[str] = "integer"
    report_layout: ClassVar[ReportLayout] = "index"

    @property
    def p_star(self) -> float:
        """r/(r+k−1) with r ≤ e^ε the rational weight (:attr:`weight`), rounded once."""
        r = self.weight
        return float(r / (r + self.k - 1))

    @property
    def gap(self) -> float:
        """p − q = (r − 1)/(r + k − 1), exact before its one rounding (no cancellation at small ε)."""
        r = self.weight
        return float((r - 1) / (r + self.k - 1))

    @property
    def q_star(self) -> float:
        r = self.weight
        return float(1 / (r + self.k - 1))

    def randomize(self, value: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        """Exact GRR in one draw of fixed bound: :func:`deniable.shared.sampling.randomized_response`."""
        return randomized_response(self.check_value(value), self.k, self.weight, randbelow)

    def simulate(self, values: Any, *, rng: np.random.Generator) -> np.ndarray:
        """Keep each value with probability p, else move it to a uniform one of the other k−1 values."""
        import numpy as np

        x = self._check_values(values)
        keep = rng.random(x.size) < self.p_star
        other = (x + 1 + rng.integers(0, self.k - 1, size=x.size)) % self.k
        result: np.ndarray = np.where(keep, x, other)
        return result

    def output_probability(self, value: int, report: int) -> float:
        value = self.check_value(value)
        y = self.decode_report(report)
        return self.p_star if y == value else self.q_star

    def encode_report(self, report: int) -> int:
        return self.decode_report(report)

    def widest_report(self) -> int:
        return self.k - 1  # the most decimal digits

    def decode_report(self, obj: Any) -> int:
        if isinstance(obj, bool) or not isinstance(obj, Integral) or not 0 <= int(obj) < self.k:
            raise InvalidReport(f"a {self.name} report must be an integer in [0, {self.k}), got {obj!r}")
        return int(obj)

    def support(self, report: int) -> list[int]:
        return [self.decode_report(report)]

    def stored_form(self, report: int) -> tuple[Any, list[int]]:
        return report, [report]

    def split_simulated(self, simulated: Any) -> list[int]:
        import numpy as np

        return [int(x) for x in np.asarray(simulated).tolist()]

    def support_pattern_law(self) -> tuple[float, float, float, float]:
        """One category per report: 0 ∈ S and 1 ∈ S exclude each other (codes 0, 1, 2; never 3)."""
        p, q = self.p_star, self.q_star
        return (1 - p - q, q, p, 0.0)

    def support_pattern(self, simulated: Any) -> np.ndarray:
        """2·[y = 0] + [y = 1], vectorized."""
        import numpy as np

        y = np.asarray(simulated)
        result: np.ndarray = 2 * (y == 0).astype(np.int64) + (y == 1).astype(np.int64)
        return result

    def support_matrix(self, simulated: Any) -> np.ndarray:
        """[yᵢ = v], vectorized."""
        import numpy as np

        y = self._check_values(np.asarray(simulated))
        result: np.ndarray = y[:, None] == np.arange(self.k)[None, :]
        return result

    def _tally_simulated(self, reports: Any) -> Tally | None:
        import numpy as np

        if not isinstance(reports, np.ndarray):
            return None
        y = self._check_values(reports)
        counts = np.bincount(y, minlength=self.k)
        return Tally(int(y.size), tuple(int(c) for c in counts))


@dataclass(frozen=True)
class BinaryRR(GRR):
    """Warner's randomized response on one bit: keep it with probability e^ε/(e^ε+1).

    ``estimate(reports).counts[1]`` is the unbiased number of ones. Values may be 0/1 or False/True.
    """

    name: ClassVar[str] = "binary-rr"
    fixed_k: ClassVar[int | None] = 2
    k: int = field(default=2, init=False)

    @classmethod
    def build(cls, epsilon: float, k: int) -> Mechanism[Any]:
        if k != 2:
            raise InvalidParameter(f"'k' must be 2 for binary-rr, got {k!r}")
        return cls(epsilon)

    def check_value(self, value: object) -> int:
        if isinstance(value, bool):
            return int(value)
        return super().check_value(value)
