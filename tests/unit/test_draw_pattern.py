"""The pattern of CSPRNG draws of every device randomizer is independent of the true value (issue 10, item 1).

An observer of the device (its timing, its power draw, a co-resident process watching the entropy pool)
sees how many uniform integers a report takes and of which bounds. If that pattern depended on the true
value, even given the report, it would leak more than ε: the old rejection samplers accepted a proposal
equal to the value without a coin, so for BinaryRR at ε = 1 about half the (report, draw count) outcomes
were impossible under the other value (an infinite likelihood ratio).

Every registered mechanism now draws a *fixed* pattern, checked exactly: over seeded runs for several
values, ε and k, the recorded sequence of bounds is one and the same sequence. A mechanism whose pattern
varies (none today) must be listed in ``VARIABLE_PATTERN`` and passes only the χ² test on the law of the
pattern, unconditionally and given the report, for two values; that test itself is checked here on a leaky
sampler (the old rejection GRR, which it must flag) and on a variable but value-independent one.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from deniable.shared.mechanisms import MECHANISMS, OLH, Mechanism, mechanism_from_name
from deniable.shared.sampling import RandBelow, bernoulli_exp, randomized_response, seeded_randbelow

ALPHA = 1e-6
#: Mechanisms allowed a pattern that varies (χ²-tested instead of the exact check). Empty: all are fixed.
VARIABLE_PATTERN: frozenset[str] = frozenset()

GRID: list[tuple[str, float, int]] = [
    (name, eps, k)
    for name in MECHANISMS
    for eps in (0.5, 1.0, 5.0, 10.0, 20.0)
    for k in ((2,) if name == "binary-rr" else (2, 16, 1000))
]


class Recorder:
    """A seeded ``randbelow`` that records the bound of every call."""

    def __init__(self, seed: int) -> None:
        self._draw = seeded_randbelow(np.random.default_rng(seed))
        self.bounds: list[int] = []

    def __call__(self, n: int) -> int:
        self.bounds.append(n)
        return self._draw(n)

    def take(self) -> tuple[int, ...]:
        pattern, self.bounds = tuple(self.bounds), []
        return pattern


Randomizer = Callable[[int, RandBelow], Any]


def _runs(randomize: Randomizer, value: int, runs: int, seed: int) -> list[tuple[str, tuple[int, ...]]]:
    recorder = Recorder(seed)
    out = []
    for _ in range(runs):
        report = randomize(value, recorder)
        out.append((json.dumps(report, default=str), recorder.take()))
    return out


def _chi2_independent(table: dict[tuple[int, Any], int], values: tuple[int, int]) -> tuple[float, int]:
    """χ² statistic and degrees of freedom of value × pattern-class independence, rare classes pooled."""
    totals = Counter[Any]()
    for (_, pattern), count in table.items():
        totals[pattern] += count
    keep = {p for p, c in totals.items() if c >= 10}
    rows = []
    for value in values:
        row = Counter[Any]()
        for (v, pattern), count in table.items():
            if v == value:
                row[pattern if pattern in keep else "rare"] += count
        rows.append(row)
    classes = sorted(set(rows[0]) | set(rows[1]), key=str)
    if len(classes) < 2:
        return 0.0, 0
    observed = np.array([[row[c] for c in classes] for row in rows], dtype=float)
    statistic, _, dof, _ = stats.chi2_contingency(observed, correction=False)
    return float(statistic), int(dof)


def pattern_law_p_values(randomize: Randomizer, values: tuple[int, int], runs: int, seed: int) -> tuple[float, float]:
    """p-values of "the pattern's law is the same for both values": unconditionally, and given the report
    (a χ² per report seen at least 20 times under each value, summed over reports)."""
    samples = {value: _runs(randomize, value, runs, seed + value) for value in values}
    overall: Counter[tuple[int, Any]] = Counter()
    by_report: dict[str, Counter[tuple[int, Any]]] = {}
    for value, rows in samples.items():
        for report, pattern in rows:
            overall[(value, pattern)] += 1
            by_report.setdefault(report, Counter())[(value, pattern)] += 1
    statistic, dof = _chi2_independent(overall, values)
    p_overall = float(stats.chi2.sf(statistic, dof)) if dof else 1.0
    total, total_dof = 0.0, 0
    for table in by_report.values():
        if all(sum(c for (v, _), c in table.items() if v == value) >= 20 for value in values):
            statistic, dof = _chi2_independent(table, values)
            total, total_dof = total + statistic, total_dof + dof
    p_given = float(stats.chi2.sf(total, total_dof)) if total_dof else 1.0
    return p_overall, p_given


def _mechanism(name: str, eps: float, k: int) -> Mechanism:
    return mechanism_from_name(name, epsilon=eps, k=k)


@pytest.mark.parametrize(("name", "eps", "k"), GRID)
def test_every_randomizer_draws_one_fixed_pattern_whatever_the_value(name: str, eps: float, k: int) -> None:
    mechanism = _mechanism(name, eps, k)
    runs = 10 if k >= 1000 and name == "oue" else 150

    def randomize(value: int, randbelow: RandBelow) -> Any:
        return mechanism.encode_report(mechanism.randomize(value, randbelow=randbelow))

    values = sorted({0, 1, k - 1})
    patterns = {value: {pattern for _, pattern in _runs(randomize, value, runs, seed=11 + value)} for value in values}
    if name in VARIABLE_PATTERN:
        p_overall, p_given = pattern_law_p_values(randomize, (0, k - 1), runs=4000, seed=5)
        assert min(p_overall, p_given) > ALPHA
        return
    every = set().union(*patterns.values())
    assert len(every) == 1, f"{name} ε={eps} k={k}: the draws depend on the value or vary: {len(every)} patterns"
    (pattern,) = every
    assert 1 <= len(pattern) <= max(2, k)  # O(1) draws (O(k) for unary encoding, one per bit)


def test_the_fixed_patterns_are_the_documented_ones() -> None:
    recorder = Recorder(1)
    grr = _mechanism("grr", 1.0, 16)
    grr.randomize(3, randbelow=recorder)
    r = grr.weight
    assert recorder.take() == (r.numerator + 15 * r.denominator,)
    olh = OLH(10.0, 1000)
    olh.randomize(7, randbelow=recorder)
    w = olh.weight
    assert recorder.take() == (1 << 64, w.numerator + (olh.g - 1) * w.denominator)
    oue = _mechanism("oue", 5.0, 16)
    oue.randomize(2, randbelow=recorder)
    assert recorder.take() == (2 * (oue.weight.numerator + oue.weight.denominator),) * 16


# -- the χ² fallback can fail ----------------------------------------------------------------------


def _old_rejection_grr(k: int, epsilon: float) -> Randomizer:
    """The sampler before the fix: a proposal equal to x is accepted without a coin."""

    def randomize(value: int, randbelow: RandBelow) -> int:
        while True:
            y = randbelow(k)
            if y == value or bernoulli_exp(Fraction(epsilon), randbelow):
                return y

    return randomize


def _padded_grr(k: int, epsilon: float) -> Randomizer:
    """A fixed-draw GRR plus a geometric number of dummy draws independent of everything else."""
    weight = _mechanism("grr", epsilon, k).weight

    def randomize(value: int, randbelow: RandBelow) -> int:
        report = randomized_response(value, k, weight, randbelow)
        while randbelow(2):
            pass
        return report

    return randomize


@pytest.mark.slow
@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (16, 2.0)])
def test_the_chi2_check_flags_the_old_rejection_sampler(k: int, eps: float) -> None:
    _, p_given = pattern_law_p_values(_old_rejection_grr(k, eps), (0, k - 1), runs=3000, seed=3)
    assert p_given < ALPHA


def test_the_chi2_check_passes_a_variable_but_value_independent_pattern() -> None:
    p_overall, p_given = pattern_law_p_values(_padded_grr(2, 1.0), (0, 1), runs=3000, seed=4)
    assert min(p_overall, p_given) > ALPHA


def test_randomizers_still_default_to_secrets() -> None:
    import inspect

    for cls in MECHANISMS.values():
        assert inspect.signature(cls.randomize).parameters["randbelow"].default is secrets.randbelow


class Budget:
    """A ``randbelow`` that fails the test as soon as a report takes more than ``limit`` draws."""

    def __init__(self, limit: int) -> None:
        self.limit, self.count = limit, 0

    def __call__(self, n: int) -> int:
        self.count += 1
        assert self.count <= self.limit, f"more than {self.limit} draws for one report"
        return secrets.randbelow(n)


@pytest.mark.parametrize("name", list(MECHANISMS))
@pytest.mark.parametrize("eps", [1e-6, 1.0, 10.0, 13.0, 20.0])
def test_every_randomizer_takes_a_bounded_number_of_draws_at_every_accepted_epsilon(name: str, eps: float) -> None:
    """Issue 10, item 2: exact sampling in O(1) draws (O(k) for unary encoding's k bits) at every ε the
    mechanisms accept. The rejection samplers needed about e^ε proposals for OLH: 0.37 s per report at
    ε = 10, 2.4·10⁸ proposals at ε = 20; this check fails on them at the first report instead of hanging."""
    k = 2 if name == "binary-rr" else 16
    mechanism = _mechanism(name, eps, k)
    for value in range(k):
        budget = Budget(max(2, k))
        mechanism.randomize(value, randbelow=budget)
        assert budget.count >= 1
