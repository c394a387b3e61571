"""Mean mechanisms for number questions (Duchi, Piecewise, Hybrid): exact laws, exact privacy at the
boundary, fixed draw patterns, exact samplers, and the statistics of the estimates they ship.

Tolerances: bias within 4 SE of the mean of R estimates; variance of the estimates within 10% of the
variance reported (4.5 SE of a variance at R = 1,000... R = 2,000 here); interval coverage in [0.93, 0.97]
(3.5 binomial SE at R = 2,000).
"""

from __future__ import annotations

import decimal
import math
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.mechanisms.mean import (
    Duchi,
    Hybrid,
    MeanMechanism,
    NumberRange,
    Piecewise,
    choose_mean_mechanism,
    mean_mechanism_from_name,
)
from deniable.shared.sampling import seeded_randbelow

MECHANISMS = (Duchi, Piecewise, Hybrid)


def worst_ratio(mechanism: MeanMechanism) -> Fraction:
    laws = [mechanism.pmf(j) for j in range(mechanism.steps + 1)]
    return max(p / q for a in laws for b in laws for p, q in zip(a, b, strict=True) if q)


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize(("epsilon", "steps", "lattice"), [(0.5, 3, 8), (1.0, 4, 16), (4.0, 7, 32)])
def test_exact_law_is_a_law_unbiased_and_exactly_epsilon_ldp(
    cls: type[MeanMechanism], epsilon: float, steps: int, lattice: int
) -> None:
    mechanism = cls(epsilon, steps, lattice)
    for j in range(steps + 1):
        law = mechanism.pmf(j)
        assert sum(law) == 1 and min(law) >= 0
        assert sum(p * mechanism.value_of_report(r) for r, p in enumerate(law)) == mechanism.x_of(j)
    ratio = worst_ratio(mechanism)
    assert ratio == mechanism.s**2  # the bound holds exactly at the worst pair...
    assert math.log(ratio) <= epsilon  # ...and never above ε
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        ln_ratio = (decimal.Decimal(ratio.numerator) / decimal.Decimal(ratio.denominator)).ln()
        assert 0 <= decimal.Decimal(epsilon) - ln_ratio < decimal.Decimal("1e-36")


@pytest.mark.parametrize(
    ("epsilon", "steps", "lattice"), [(0.01, 100, 32), (0.5, 3, 8), (1.0, 81, 256), (5.0, 7, 64), (20.0, 1, 2)]
)
def test_piecewise_sampler_cdf_is_the_exact_law_times_its_denominator(epsilon: float, steps: int, lattice: int) -> None:
    """The sampler's integer CDF (computed without rationals) is the cumulative exact law times D, for every
    grid index: the sampler draws from the law that the ratio test above proves ε-LDP."""
    mechanism = Piecewise(epsilon, steps, lattice)
    for j in range(steps + 1):
        running, expected = Fraction(0), []
        for p in mechanism.pmf(j):
            running += p * mechanism._denominator
            assert running.denominator == 1
            expected.append(int(running))
        assert mechanism._cdf(j) == tuple(expected)


@pytest.mark.parametrize("cls", MECHANISMS)
def test_a_mechanism_built_ten_percent_too_generous_fails_the_ratio_test(cls: type[MeanMechanism]) -> None:
    generous = cls(1.1, 4, 16)
    assert math.log(worst_ratio(generous)) > 1.0


def test_hybrid_variance_does_not_depend_on_the_value() -> None:
    """With α = 1 − 1/s the x² terms cancel: the exact variance is the same at every grid point (up to the
    lattice's own term, which the shipped variance bounds)."""
    mechanism = Hybrid(2.0, 8, 1024)
    variances = []
    for j in range(mechanism.steps + 1):
        law = mechanism.pmf(j)
        x = mechanism.x_of(j)
        variances.append(float(sum(p * (mechanism.value_of_report(r) - x) ** 2 for r, p in enumerate(law))))
    assert max(variances) - min(variances) < float(mechanism.piecewise.h) ** 2 / 4
    assert max(variances) <= mechanism.worst_variance


class Recorder:
    """An instrumented randbelow: the bounds of every call, drawn from a seeded source."""

    def __init__(self, seed: int) -> None:
        self.inner = seeded_randbelow(np.random.default_rng(seed))
        self.bounds: list[int] = []

    def __call__(self, n: int) -> int:
        self.bounds.append(n)
        return self.inner(n)


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 6.0])
def test_every_randomizer_draws_one_fixed_pattern_whatever_the_value(cls: type[MeanMechanism], epsilon: float) -> None:
    mechanism = cls(epsilon, 5, 16)
    patterns = set()
    for j in range(mechanism.steps + 1):
        for seed in range(20):
            recorder = Recorder(seed)
            mechanism.randomize(j, randbelow=recorder)
            patterns.add(tuple(recorder.bounds))
    assert len(patterns) == 1


def test_rounding_to_the_grid_draws_once_and_is_unbiased() -> None:
    grid = NumberRange(0, 100, 4)  # grid points 0, 25, 50, 75, 100
    calls: list[int] = []

    def fixed(u: int):  # type: ignore[no-untyped-def]
        def randbelow(n: int) -> int:
            calls.append(n)
            return u
        return randbelow

    # 30 is 1/5 of a step above 25: up with probability exactly ceil(2^64/5)/2^64
    threshold = math.ceil(Fraction(1, 5) * 2**64)
    assert grid.grid_index(30, randbelow=fixed(threshold - 1)) == 2
    assert grid.grid_index(30, randbelow=fixed(threshold)) == 1
    assert grid.grid_index(50, randbelow=fixed(0)) == 2  # on the grid: never moved, still one draw
    assert grid.grid_index(100, randbelow=fixed(0)) == 4
    assert set(calls) == {2**64} and len(calls) == 4
    # a quarter step is exact: the expectation of the rounded value is the value itself
    quarter = Fraction(math.ceil(Fraction(1, 4) * 2**64), 2**64)
    assert quarter == Fraction(1, 4)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "37", None, -1, 101])
def test_bad_answers_are_refused_on_the_device(bad: object) -> None:
    with pytest.raises(InvalidParameter):
        NumberRange(0, 100, 100).grid_index(bad)


def test_clip_is_explicit() -> None:
    grid = NumberRange(0, 100, 100)
    assert grid.grid_index(140, clip=True) == 100 and grid.grid_index(-3, clip=True) == 0
    with pytest.raises(InvalidParameter, match="clip=True"):
        grid.grid_index(140)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [Piecewise, Hybrid])
def test_the_exact_sampler_follows_the_exact_law(cls: type[MeanMechanism]) -> None:
    mechanism = cls(1.0, 4, 8)
    randbelow = seeded_randbelow(np.random.default_rng(7))
    draws = 20_000
    for j in (0, 3):
        counts = np.bincount([mechanism.randomize(j, randbelow=randbelow) for _ in range(draws)],
                             minlength=mechanism.outputs)
        probs = np.array([float(p) for p in mechanism.pmf(j)])
        keep = probs * draws >= 5
        observed = np.append(counts[keep], counts[~keep].sum())
        expected = np.append(probs[keep], probs[~keep].sum()) * draws
        if expected[-1] < 5:
            observed, expected = observed[:-1], expected[:-1]
            expected = expected / expected.sum() * observed.sum()
        assert stats.chisquare(observed, expected).pvalue > 1e-6


@pytest.mark.parametrize("cls", MECHANISMS)
def test_simulate_follows_the_exact_law(cls: type[MeanMechanism]) -> None:
    mechanism = cls(2.0, 4, 8)
    rng = np.random.default_rng(3)
    draws = 200_000
    for j in (1, 4):
        counts = np.bincount(mechanism.simulate(np.full(draws, j), rng=rng), minlength=mechanism.outputs)
        probs = np.array([float(p) for p in mechanism.pmf(j)])
        keep = probs * draws >= 5
        assert counts[~keep].sum() <= 50
        expected = probs[keep] / probs[keep].sum() * counts[keep].sum()
        assert stats.chisquare(counts[keep], expected).pvalue > 1e-6


def population(n: int, steps: int, seed: int) -> np.ndarray:
    """A fixed population: clip(N(0.3, 0.4)) on [−1, 1], as grid indices."""
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(0.3, 0.4, n), -1, 1)
    return np.rint((x + 1) / 2 * steps).astype(np.int64)


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "epsilon"), [(Duchi, 1.0), (Piecewise, 1.0), (Piecewise, 4.0), (Hybrid, 1.0),
                                              (Hybrid, 4.0), (Hybrid, 0.5)])
def test_estimates_are_unbiased_with_honest_variance_and_coverage(cls: type[MeanMechanism], epsilon: float) -> None:
    steps, n, runs = 100, 1_000, 2_000
    grid = NumberRange(0.0, 100.0, steps)
    mechanism = cls(epsilon, steps)
    js = population(n, steps, seed=1)
    truth = grid.value_of(float(np.mean([float(mechanism.x_of(int(j))) for j in js])))
    rng = np.random.default_rng(int(epsilon * 10) + len(cls.name))
    means, variances, covered = [], [], 0
    for _ in range(runs):
        est = mechanism.estimate(mechanism.tally(mechanism.simulate(js, rng=rng)), grid)
        means.append(est.mean)
        variances.append(est.variance)
        low, high = est.ci(0.95)
        covered += low <= truth <= high
    means_a = np.asarray(means)
    se_of_mean = means_a.std(ddof=1) / math.sqrt(runs)
    assert abs(means_a.mean() - truth) <= 4 * se_of_mean
    assert means_a.var(ddof=1) == pytest.approx(np.mean(variances), rel=0.10)
    assert 0.93 <= covered / runs <= 0.97


def test_auto_picks_the_lowest_worst_case_variance() -> None:
    for epsilon in (0.3, 1.0, 2.0, 6.0):
        chosen = choose_mean_mechanism(epsilon, 100)
        others = [cls(epsilon, 100) for cls in MECHANISMS]
        assert chosen.worst_variance == min(m.worst_variance for m in others)
    # Duchi's worst case never drops below 1, PM's does: they cross near ε = 1.29
    fine = 1 << 12
    assert Piecewise(1.2, 1 << 10, fine).worst_variance > Duchi(1.2, 1 << 10, fine).worst_variance
    assert Piecewise(1.4, 1 << 10, fine).worst_variance < Duchi(1.4, 1 << 10, fine).worst_variance
    assert Duchi(20.0, 10).worst_variance > 1


def test_names_reports_and_tallies() -> None:
    mechanism = mean_mechanism_from_name("hybrid", epsilon=1.0, steps=10, lattice=8)
    assert isinstance(mechanism, Hybrid) and mechanism.outputs == 11
    with pytest.raises(InvalidParameter, match="auto, duchi, piecewise, hybrid"):
        mean_mechanism_from_name("laplace", epsilon=1.0, steps=10)
    with pytest.raises(InvalidReport):
        mechanism.decode_report(11)
    reports = [mechanism.randomize(3, randbelow=secrets.randbelow) for _ in range(50)]
    assert mechanism.tally(reports) == mechanism.tally(np.asarray(reports))
    empty = mechanism.estimate(mechanism.tally([]), NumberRange(0, 1, 10))
    assert empty.n == 0 and empty.to_dict()["mean"] is None
