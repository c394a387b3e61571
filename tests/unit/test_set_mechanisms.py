"""Set-valued answers (bit vector, padding-and-sampling): exact privacy over every pair of allowed sets,
fixed draw patterns, exact samplers, and unbiased counts with honest variance and interval coverage."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.mechanisms.sets import (
    BitVector,
    Padding,
    SetMechanism,
    choose_set_mechanism,
    set_mechanism_from_name,
)
from deniable.shared.sampling import exp_lower, seeded_randbelow

MECHANISMS = (BitVector, Padding)


def allowed_sets(k: int, m: int) -> list[tuple[int, ...]]:
    return [c for size in range(m + 1) for c in itertools.combinations(range(k), size)]


def worst_ratio(mechanism: SetMechanism) -> Fraction:
    sets = allowed_sets(mechanism.k, mechanism.m)
    worst = Fraction(0)
    for y in mechanism.reports():
        probs = [mechanism.output_probability(a, y) for a in sets]
        worst = max(worst, max(probs) / min(probs))
    return worst


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize(("epsilon", "k", "m"), [(1.0, 3, 2), (1.0, 5, 2), (2.0, 5, 1), (0.5, 4, 4), (3.0, 6, 3)])
def test_every_pair_of_allowed_sets_is_exactly_within_e_epsilon(
    cls: type[SetMechanism], epsilon: float, k: int, m: int
) -> None:
    mechanism = cls(epsilon, k, m)
    for a in allowed_sets(k, m):
        assert sum(mechanism.output_probability(a, y) for y in mechanism.reports()) == 1
    ratio = worst_ratio(mechanism)
    assert math.log(ratio) <= epsilon
    if cls is Padding:
        assert ratio == exp_lower(Fraction(epsilon))  # exactly r ≤ e^ε: 1 + (r′ − 1)/m with r′ = 1 + m(r − 1)
    elif k >= 2 * m:
        assert ratio == mechanism.weight**m  # the worst pair flips m selected bits against m others


@pytest.mark.parametrize("cls", MECHANISMS)
def test_a_mechanism_built_ten_percent_too_generous_fails(cls: type[SetMechanism]) -> None:
    assert math.log(worst_ratio(cls(1.1, 5, 2))) > 1.0


def test_padding_at_the_plain_weight_would_waste_most_of_epsilon() -> None:
    """Randomized response at e^ε itself over the padded symbols is only ln(1 + (e^ε − 1)/m)-LDP (0.6201 at
    m = 2, ε = 1, formula sheet part 2 §2b): the amplified weight is what spends exactly ε."""

    class Plain(Padding):
        @property
        def weight(self) -> Fraction:  # type: ignore[override]
            return exp_lower(Fraction(self.epsilon))

    assert math.log(worst_ratio(Plain(1.0, 6, 2))) == pytest.approx(0.6201, abs=1e-4)
    assert math.log(worst_ratio(Padding(1.0, 6, 2))) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("cls", MECHANISMS)
def test_every_randomizer_draws_one_fixed_pattern_whatever_the_set(cls: type[SetMechanism]) -> None:
    mechanism = cls(2.0, 5, 3)
    patterns = set()
    for a in allowed_sets(5, 3):
        for seed in range(3):
            inner = seeded_randbelow(np.random.default_rng(seed))
            bounds: list[int] = []

            def recorder(n: int, inner=inner, bounds=bounds) -> int:  # type: ignore[no-untyped-def]
                bounds.append(n)
                return inner(n)

            mechanism.randomize(a, randbelow=recorder)
            patterns.add(tuple(bounds))
    assert len(patterns) == 1


@pytest.mark.slow
def test_the_exact_samplers_follow_their_laws() -> None:
    padding = Padding(1.0, 6, 2)
    randbelow = seeded_randbelow(np.random.default_rng(11))
    draws = 20_000
    for chosen in [(), (1,), (0, 4)]:
        counts = np.bincount([padding.randomize(chosen, randbelow=randbelow) for _ in range(draws)],
                             minlength=padding.symbols)
        expected = np.array([float(padding.output_probability(chosen, y)) for y in padding.reports()]) * draws
        assert stats.chisquare(counts, expected).pvalue > 1e-6
    bits = BitVector(1.0, 6, 2)
    reports = [bits.randomize((1, 4), randbelow=randbelow) for _ in range(draws)]
    p, q = bits.support_probabilities
    for v in range(6):
        ones = sum((r >> v) & 1 for r in reports)
        assert stats.binomtest(ones, draws, float(p if v in (1, 4) else q)).pvalue > 1e-6


@pytest.mark.parametrize("cls", MECHANISMS)
def test_simulate_follows_the_exact_law(cls: type[SetMechanism]) -> None:
    mechanism = cls(2.0, 5, 2)
    rng = np.random.default_rng(5)
    n = 100_000
    selections = np.zeros((n, 5), dtype=bool)
    selections[:, [1, 3]] = True
    tally = mechanism.tally(mechanism.simulate(selections, rng=rng))
    p, q = mechanism.support_probabilities
    for v in range(5):
        assert stats.binomtest(tally.support[v], n, float(p if v in (1, 3) else q)).pvalue > 1e-6
    reports = [mechanism.randomize((1, 3)) for _ in range(200)]
    assert mechanism.tally(reports).n == 200


def population(n: int, k: int, m: int, seed: int) -> np.ndarray:
    """A fixed population: each respondent selects 0..m options, favouring the low ones."""
    rng = np.random.default_rng(seed)
    weights = np.arange(k, 0, -1, dtype=float)
    weights /= weights.sum()
    matrix = np.zeros((n, k), dtype=bool)
    for i in range(n):
        size = int(rng.integers(0, m + 1))
        matrix[i, rng.choice(k, size=size, replace=False, p=weights)] = True
    return matrix


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "epsilon", "m"), [(BitVector, 1.0, 2), (BitVector, 3.0, 3), (Padding, 1.0, 2),
                                                   (Padding, 2.0, 4)])
def test_counts_are_unbiased_with_honest_variance_and_coverage(cls: type[SetMechanism], epsilon: float, m: int) -> None:
    k, n, runs = 8, 2_000, 1_500
    selections = population(n, k, m, seed=3)
    truth = selections.sum(axis=0)
    mechanism = cls(epsilon, k, m)
    rng = np.random.default_rng(int(epsilon * 10) + m)
    counts, variances, covered = [], [], np.zeros(k)
    for _ in range(runs):
        est = mechanism.estimate_tally(mechanism.tally(mechanism.simulate(selections, rng=rng)))
        counts.append(est.counts)
        variances.append(est.variance)
        low, high = est.ci(0.95)
        covered += (low <= truth) & (truth <= high)
    counts_a = np.asarray(counts)
    se = counts_a.std(axis=0, ddof=1) / math.sqrt(runs)
    assert np.all(np.abs(counts_a.mean(axis=0) - truth) <= 4 * se)
    np.testing.assert_allclose(counts_a.var(axis=0, ddof=1), np.mean(variances, axis=0), rtol=0.10)
    coverage = covered / runs
    assert coverage.min() >= 0.93 and coverage.mean() <= 0.97


def test_auto_picks_the_lower_worst_case_variance() -> None:
    for epsilon, k, m in [(1.0, 8, 2), (2.0, 8, 4), (1.0, 32, 4), (4.0, 8, 1)]:
        chosen = choose_set_mechanism(epsilon, k, m)
        assert chosen.worst_variance == min(cls(epsilon, k, m).worst_variance for cls in MECHANISMS)
    # the formula sheet's table (Var/n at n_v = 0 and at n_v = n·m/k): padding wins every m ≥ 2 row
    assert choose_set_mechanism(1.0, 8, 4).name == "padding"
    for cls, k, m, eps, at_zero, at_share in [(Padding, 8, 4, 1.0, 6.05, 10.5), (BitVector, 8, 4, 1.0, 63.7, 64.2),
                                              (Padding, 32, 2, 2.0, 1.12, 1.50), (BitVector, 32, 2, 2.0, 3.68, 3.75)]:
        mechanism = cls(eps, k, m)
        assert mechanism.per_user_variance(0.0) == pytest.approx(at_zero, rel=0.01)
        assert mechanism.per_user_variance(m / k) == pytest.approx(at_share, rel=0.01)


@pytest.mark.parametrize(
    "bad", [[0, 0], [0, 1, 2], [9], [-1], ["a"], "01", 3, [True]],
)
def test_bad_sets_are_refused_with_a_clear_error(bad: object) -> None:
    with pytest.raises(InvalidParameter):
        Padding(1.0, 8, 2).randomize(bad)  # type: ignore[arg-type]


def test_names_and_reports() -> None:
    assert isinstance(set_mechanism_from_name("padding", epsilon=1.0, k=4, m=2), Padding)
    with pytest.raises(InvalidParameter, match="auto, bitvector, padding"):
        set_mechanism_from_name("oue", epsilon=1.0, k=4, m=2)
    bits = BitVector(1.0, 6, 2)
    assert bits.decode_report(bits.encode_report(0b100101)) == 0b100101
    with pytest.raises(InvalidReport):
        bits.decode_report("zz")
    with pytest.raises(InvalidReport):
        Padding(1.0, 4, 2).decode_report(6)
    with pytest.raises(InvalidParameter):
        BitVector(1.0, 4, 5)
