"""Mechanism registry and the rule that picks the lowest-variance mechanism for k and ε.

Approximate variance of one count per respondent (Wang et al. 2017, §5):
GRR (e^ε+k−2)/(e^ε−1)², OUE 4e^ε/(e^ε−1)², OLH (e^ε−1+g)²/((e^ε−1)²(g−1)) ≥ OUE's with integer g.
GRR wins iff k < 3e^ε + 2; otherwise OUE (ties with OLH, whose report is only O(log g) bits, go to OLH).
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import InvalidParameter
from .base import Mechanism, check_epsilon, check_k
from .grr import GRR, BinaryRR
from .olh import OLH
from .oue import OUE
from .registry import REGISTRY

__all__ = ["MECHANISMS", "choose_mechanism", "mechanism_from_name"]

#: Wire name → class of the one-choice mechanisms: the registry's live ``choice`` table
#: (:mod:`.registry`; a mechanism registered later appears here too).
MECHANISMS: dict[str, type[Mechanism[Any]]] = REGISTRY["choice"]


def mechanism_from_name(name: str, *, epsilon: float, k: int) -> Mechanism[Any]:
    """Build a one-choice mechanism from its wire name (``binary-rr``, ``grr``, ``oue``, ``olh``, or any
    registered one) at (ε, k).

    A mechanism is an immutable value of (class, ε, k), so one built before with arguments of the same
    values and types is returned again (with its exact weights computed): every descriptor and question of
    a process that runs, say, OUE at ε = 1 over 16 categories shares one instance."""
    cls = MECHANISMS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidParameter(f"'mechanism' must be one of {', '.join(MECHANISMS)}, got {name!r}")
    if type(epsilon) in (float, int) and type(k) is int:
        return _built(cls, epsilon, k)
    return cls.build(epsilon, k)


@functools.lru_cache(maxsize=256, typed=True)
def _built(cls: type[Mechanism[Any]], epsilon: float, k: int) -> Mechanism[Any]:
    return cls.build(epsilon, k)  # an InvalidParameter is raised, not cached


def choose_mechanism(k: int, epsilon: float) -> Mechanism[Any]:
    """The mechanism with the lowest analytic variance for k categories at ε.

    k = 2 gives :class:`BinaryRR` (GRR at k = 2). Otherwise GRR when k < 3e^ε + 2, else OUE, or OLH when
    its variance ties OUE's (then OLH's shorter report decides).
    """
    k = check_k(k)
    epsilon = check_epsilon(epsilon)
    if k == 2:
        return BinaryRR(epsilon)
    candidates: list[Mechanism[Any]] = [GRR(epsilon, k), OLH(epsilon, k), OUE(epsilon, k)]
    best = min(c.per_user_variance() for c in candidates)
    for candidate in candidates:  # first within rounding of the best, in order of report size
        if candidate.per_user_variance() <= best * (1 + 1e-12):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover
