"""Optimized local hashing (Wang, Blocki, Li and Jha, USENIX Security 2017, §4.4).

Each report draws a fresh 64-bit seed, hashes its value into g = round(e^ε)+1 buckets (the authors'
``int(round(e^ε))+1``) and sends (seed, GRR_g(H_seed(x))). Given the seed the report is g-ary randomized
response, so it is ε-LDP whatever the hash. With p* = e^ε/(e^ε+g−1), q* = 1/g:

    ĉ_v = (S_v − n/g)/(p* − 1/g),  S_v = #{i : H_i(v) = y_i}
    Var(ĉ_v) = n·q*(1−q*)/(p*−q*)² + n_v·(1−p*−q*)/(p*−q*)

The hash is the Carter–Wegman universal family over the Mersenne prime P = 2^31 − 1, keyed by the seed:

    a = 1 + ((seed >> 32) mod (P − 1)),  b = (seed & 0xFFFFFFFF) mod P,
    H_seed(v) = ((a·v + b) mod P) mod g.

It is exactly reproducible in any language with 64-bit integers (a·v + b < 2^63 for v < P) and vectorizes in
numpy, so tallying costs O(k) per report. For x ≠ v, P_seed[H(x) = H(v)] = 1/g + O(g/P): the estimator's bias
from hash non-uniformity is below 10⁻⁸ of n for any g here.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ..errors import InvalidReport
from ..sampling import RandBelow, randomized_response
from .base import Mechanism, ReportLayout
from .estimate import Tally

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OLH", "OLHReport", "OLHReports", "olh_hash"]

PRIME = (1 << 31) - 1
_SEED_BITS = 64
_HEX = frozenset("0123456789abcdef")


class OLHReport(NamedTuple):
    """One OLH report: the hash seed (0 ≤ seed < 2^64) and the randomized bucket (0 ≤ y < g)."""

    seed: int
    y: int


class OLHReports(NamedTuple):
    """Many simulated OLH reports: ``seeds`` (uint64 array) and ``y`` (int64 array)."""

    seeds: np.ndarray
    y: np.ndarray


def _coefficients(seed: int) -> tuple[int, int]:
    return 1 + ((seed >> 32) % (PRIME - 1)), (seed & 0xFFFFFFFF) % PRIME


def _coefficients_many(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_coefficients` of every seed (a uint64 array), vectorized: ``a``, ``b`` as uint64 arrays."""
    import numpy as np

    a = np.uint64(1) + (seeds >> np.uint64(32)) % np.uint64(PRIME - 1)
    b = (seeds & np.uint64(0xFFFFFFFF)) % np.uint64(PRIME)
    return a, b


def _wire(seed: int, y: int) -> dict[str, Any]:
    """A report's wire JSON: the seed as 16 hex digits, the bucket."""
    return {"seed": format(seed, "016x"), "y": y}


def olh_hash(seed: int, value: int, g: int) -> int:
    """H_seed(value) = ((a·value + b) mod P) mod g with (a, b) derived from the seed as documented above."""
    a, b = _coefficients(seed)
    return ((a * value + b) % PRIME) % g


@dataclass(frozen=True)
class OLH(Mechanism[OLHReport]):
    """Optimized local hashing with g = round(e^ε)+1 buckets; reports are :class:`OLHReport`."""

    name: ClassVar[str] = "olh"
    wire_type: ClassVar[type] = dict
    wire_description: ClassVar[str] = "object"
    report_layout: ClassVar[ReportLayout] = "seeded-bucket"
    param_rules: ClassVar[dict[str, str]] = {"g": "round(e^epsilon) + 1"}

    @property
    def g(self) -> int:
        """Number of hash buckets, round(e^ε)+1 (at least 2)."""
        return max(2, round(math.exp(self.epsilon)) + 1)

    def public_params(self) -> dict[str, int]:
        """``{"g": g}``: the descriptor pins the number of buckets, so devices and aggregator hash alike."""
        return {"g": self.g}

    @property
    def p_star(self) -> float:
        """r/(r+g−1) with r ≤ e^ε the rational weight (:attr:`weight`), rounded once."""
        r = self.weight
        return float(r / (r + self.g - 1))

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    @property
    def gap(self) -> float:
        """p* − 1/g = (g−1)(r−1)/(g(r+g−1)), exact before its one rounding."""
        g, r = self.g, self.weight
        return float((g - 1) * (r - 1) / (g * (r + g - 1)))

    def randomize(self, value: int, *, randbelow: RandBelow = secrets.randbelow) -> OLHReport:
        """Fresh seed, then g-ary randomized response on the hashed value: two draws, of bounds 2^64 and
        a + (g−1)·b, whatever the value (:func:`deniable.shared.sampling.randomized_response`)."""
        x = self.check_value(value)
        seed = randbelow(1 << _SEED_BITS)
        y = randomized_response(olh_hash(seed, x, self.g), self.g, self.weight, randbelow)
        return OLHReport(seed, y)

    def simulate(self, values: Any, *, rng: np.random.Generator) -> OLHReports:
        """Seeds uniform on [0, 2^64) and GRR_g of the hashed values, vectorized."""
        import numpy as np

        x = self._check_values(values).astype(np.uint64)
        seeds = rng.integers(0, np.iinfo(np.uint64).max, size=x.size, dtype=np.uint64, endpoint=True)
        h = self._hash_many(seeds, x)
        keep = rng.random(x.size) < self.p_star
        other = (h + 1 + rng.integers(0, self.g - 1, size=x.size)) % self.g
        return OLHReports(seeds, np.where(keep, h, other).astype(np.int64))

    def _hash_many(self, seeds: np.ndarray, values: Any) -> np.ndarray:
        import numpy as np

        a, b = _coefficients_many(seeds)
        hashed = (a * np.asarray(values, dtype=np.uint64) + b) % np.uint64(PRIME) % np.uint64(self.g)
        result: np.ndarray = hashed.astype(np.int64)
        return result

    def output_probability(self, value: int, report: Any) -> float:
        x = self.check_value(value)
        seed, y = self.decode_report(report)
        if olh_hash(seed, x, self.g) == y:
            return self.p_star
        return (1.0 - self.p_star) / (self.g - 1)

    def encode_report(self, report: Any) -> dict[str, Any]:
        return _wire(*self.decode_report(report))

    def widest_report(self) -> OLHReport:
        return OLHReport(0, self.g - 1)  # the seed has a fixed width; the bucket the most digits

    def decode_report(self, obj: Any) -> OLHReport:
        if isinstance(obj, tuple) and len(obj) == 2:
            seed, y = obj
            if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < (1 << _SEED_BITS):
                return OLHReport(seed, self._check_bucket(y))
            raise InvalidReport(f"an olh seed must be an integer in [0, 2^64), got {seed!r}")
        if not isinstance(obj, dict) or set(obj) != {"seed", "y"}:
            raise InvalidReport('an olh report must be an object {"seed": "<16 hex digits>", "y": <int>}')
        seed_hex = obj["seed"]
        if not isinstance(seed_hex, str) or len(seed_hex) != 16 or not set(seed_hex) <= _HEX:
            raise InvalidReport(f"an olh seed must be 16 lowercase hex digits, got {str(seed_hex)[:40]!r}")
        return OLHReport(int(seed_hex, 16), self._check_bucket(obj["y"]))

    def _check_bucket(self, y: Any) -> int:
        if isinstance(y, bool) or not isinstance(y, Integral) or not 0 <= int(y) < self.g:
            raise InvalidReport(f"an olh bucket 'y' must be an integer in [0, {self.g}), got {y!r}")
        return int(y)

    def support(self, report: Any) -> list[int]:
        return self._support(*self.decode_report(report))

    def _support(self, seed: int, y: int) -> list[int]:
        """The v in [0, k) with H_seed(v) = y."""
        a, b = _coefficients(seed)
        g = self.g
        return [v for v in range(self.k) if ((a * v + b) % PRIME) % g == y]

    def stored_form(self, report: OLHReport) -> tuple[Any, list[int]]:
        return _wire(*report), self._support(*report)

    def split_simulated(self, simulated: Any) -> list[OLHReport]:
        return [OLHReport(int(s), int(y)) for s, y in zip(simulated.seeds, simulated.y, strict=True)]

    def support_pattern(self, simulated: Any) -> np.ndarray:
        """2·[H(0) = y] + [H(1) = y] for each simulated (seed, y)."""
        import numpy as np

        g, seeds, y = self.g, simulated.seeds.tolist(), simulated.y
        in0 = np.fromiter((olh_hash(s, 0, g) for s in seeds), dtype=np.int64, count=len(seeds)) == y
        in1 = np.fromiter((olh_hash(s, 1, g) for s in seeds), dtype=np.int64, count=len(seeds)) == y
        result: np.ndarray = 2 * in0.astype(np.int64) + in1.astype(np.int64)
        return result

    def _columns(self, simulated: OLHReports) -> Iterator[np.ndarray]:
        """[H_seed(v) = y] over the simulated reports, for v = 0, 1, ..., k − 1 in turn: O(n) memory, with
        (a·v + b) mod P updated incrementally in v."""
        import numpy as np

        a, hashed = _coefficients_many(np.asarray(simulated.seeds, dtype=np.uint64))
        yu = np.asarray(simulated.y, dtype=np.int64).astype(np.uint64)
        prime, g = np.uint64(PRIME), np.uint64(self.g)
        for _ in range(self.k):
            yield hashed % g == yu
            hashed += a
            hashed %= prime

    def support_matrix(self, simulated: Any) -> np.ndarray:
        """[H_seed(v) = y] for every report and v, vectorized as in the tally."""
        import numpy as np

        matrix = np.empty((int(np.size(simulated.y)), self.k), dtype=bool)
        for v, column in enumerate(self._columns(simulated)):
            matrix[:, v] = column
        return matrix

    def _tally_simulated(self, reports: Any) -> Tally | None:
        import numpy as np

        if not isinstance(reports, OLHReports):
            return None
        counts = tuple(int(np.count_nonzero(column)) for column in self._columns(reports))
        return Tally(int(np.size(reports.y)), counts)
