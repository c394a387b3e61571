"""Optimized unary encoding (Wang, Blocki, Li and Jha, USENIX Security 2017, §4.3).

One-hot encode x; report the true bit as 1 with probability p = 1/2 and every other bit as 1 with
q = 1/(e^ε+1). Changing x changes two bits, and ln[p(1−q)/((1−p)q)] = ε, so it is ε-LDP. Support(y) is
the set of ones, p* = 1/2, q* = 1/(e^ε+1), and since (1−p*−q*)/(p*−q*) = 1:

    Var(ĉ_v) = n·4e^ε/(e^ε−1)² + n_v.

Bits are independent, so Cov(ĉ_j, ĉ_l) = 0. A report is k bits: as an integer bitmask on the device,
as ⌈k/4⌉ lowercase hex digits on the wire.

e^ε stands for the rational weight r ≤ e^ε (within 10⁻³⁸, :attr:`Mechanism.weight`): each bit draws both of
its candidate coins from one draw of fixed bound, so the draws never depend on the value.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InvalidReport
from ..sampling import RandBelow, unary_bits
from .base import Mechanism, ReportLayout
from .estimate import Tally

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OUE"]

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class OUE(Mechanism[int]):
    """Optimized unary encoding; a device report is an int bitmask with bit v for category v."""

    name: ClassVar[str] = "oue"
    wire_type: ClassVar[type] = str
    wire_description: ClassVar[str] = "string of hex digits"
    report_layout: ClassVar[ReportLayout] = "bitmask"

    @property
    def p_star(self) -> float:
        return 0.5

    @property
    def q_star(self) -> float:
        """1/(r+1) with r ≤ e^ε the rational weight (:attr:`weight`), rounded once."""
        return float(1 / (self.weight + 1))

    @property
    def gap(self) -> float:
        """1/2 − 1/(r+1) = (r−1)/(2(r+1)), exact before its one rounding."""
        r = self.weight
        return float((r - 1) / (2 * (r + 1)))

    @property
    def hex_digits(self) -> int:
        """Length of the wire encoding: ⌈k/4⌉ hex digits."""
        return (self.k + 3) // 4

    def randomize(self, value: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        """Bit x a fair coin, every other bit an exact Bernoulli(1/(r+1)): k draws of one fixed bound
        (:func:`deniable.shared.sampling.unary_bits`)."""
        return unary_bits(self.check_value(value), self.k, self.weight, randbelow)

    def simulate(self, values: Any, *, rng: np.random.Generator) -> np.ndarray:
        """A boolean (n, k) matrix: Bernoulli(q) everywhere, Bernoulli(1/2) on each true bit."""
        import numpy as np

        x = self._check_values(values)
        bits = rng.random((x.size, self.k)) < self.q_star
        bits[np.arange(x.size), x] = rng.random(x.size) < 0.5
        return bits

    def output_probability(self, value: int, report: Any) -> float:
        x = self.check_value(value)
        mask = self._check_mask(report)
        q = self.q_star
        ones = bin(mask).count("1")
        true_bit = (mask >> x) & 1
        other_ones = ones - true_bit
        other_zeros = (self.k - 1) - other_ones
        return 0.5 * q**other_ones * (1 - q) ** other_zeros

    def _check_mask(self, report: Any) -> int:
        if isinstance(report, bool) or not isinstance(report, int) or not 0 <= report < (1 << self.k):
            raise InvalidReport(f"an oue report must be a bitmask in [0, 2^{self.k}), got {report!r}")
        return report

    def encode_report(self, report: Any) -> str:
        return self._hex(self._check_mask(report))

    def _hex(self, mask: int) -> str:
        """A checked mask's wire form: exactly :attr:`hex_digits` lowercase hex digits."""
        return format(mask, f"0{self.hex_digits}x")

    def widest_report(self) -> int:
        return (1 << self.k) - 1  # every mask has the same width; this one is in the space for every k

    def decode_report(self, obj: Any) -> int:
        if isinstance(obj, int) and not isinstance(obj, bool):
            return self._check_mask(obj)
        if not isinstance(obj, str) or len(obj) != self.hex_digits or not set(obj) <= _HEX:
            raise InvalidReport(
                f"an oue report must be a string of exactly {self.hex_digits} lowercase hex digits "
                f"(k={self.k} bits), got {str(obj)[:80]!r}"
            )
        mask = int(obj, 16)
        if mask >> self.k:
            raise InvalidReport(f"an oue report sets a bit at or above k={self.k}")
        return mask

    def support(self, report: Any) -> list[int]:
        return self._bits(self.decode_report(report))

    def _bits(self, mask: int) -> list[int]:
        """The v in [0, k) whose bit the (checked) mask sets."""
        return [v for v in range(self.k) if (mask >> v) & 1]

    def stored_form(self, report: int) -> tuple[Any, list[int]]:
        return self._hex(report), self._bits(report)

    def split_simulated(self, simulated: Any) -> list[int]:
        """One bitmask per row of bits."""
        import numpy as np

        weights = [1 << v for v in range(self.k)]
        rows = np.asarray(simulated).tolist()
        return [sum(w for w, bit in zip(weights, row, strict=True) if bit) for row in rows]

    def support_pattern(self, simulated: Any) -> np.ndarray:
        """2·bit 0 + bit 1 of each row, vectorized."""
        import numpy as np

        bits = np.asarray(simulated)
        result: np.ndarray = 2 * bits[:, 0].astype(np.int64) + bits[:, 1].astype(np.int64)
        return result

    def support_matrix(self, simulated: Any) -> np.ndarray:
        """The bits themselves."""
        import numpy as np

        bits = np.asarray(simulated, dtype=bool)
        if bits.ndim != 2 or bits.shape[1] != self.k:
            raise InvalidReport(f"simulated oue reports must be an (n, {self.k}) array")
        return bits

    def _tally_simulated(self, reports: Any) -> Tally | None:
        import numpy as np

        if not isinstance(reports, np.ndarray):
            return None
        if reports.ndim != 2 or reports.shape[1] != self.k:
            raise InvalidReport(f"simulated oue reports must be an (n, {self.k}) array")
        counts = np.count_nonzero(reports, axis=0)
        return Tally(int(reports.shape[0]), tuple(int(c) for c in counts))
