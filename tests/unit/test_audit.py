"""The privacy auditor: valid lower bounds, tight on shipped mechanisms, and it catches broken ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from deniable.aggregator.cli import main
from deniable.aggregator.tools.audit import (
    audit,
    audit_neighbours,
    clopper_pearson,
    local_neighbours,
    number_neighbours,
    set_neighbours,
    subsample_neighbours,
    worst_set_pair,
)
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import GRR, BinaryRR
from deniable.shared.mechanisms.mean import mean_mechanism_from_name
from deniable.shared.mechanisms.sets import set_mechanism_from_name

TRIALS = 100_000


@pytest.mark.parametrize(
    ("mechanism", "k"),
    [("binary-rr", 2), ("grr", 4), ("grr", 16), ("oue", 4), ("olh", 8), ("discrete-laplace", 2), ("laplace", 2)],
)
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_shipped_mechanisms_stay_within_their_epsilon(mechanism: str, k: int, epsilon: float) -> None:
    result = audit(mechanism, epsilon=epsilon, k=k, trials=TRIALS, confidence=0.95, seed=11)
    assert not result.violated
    assert result.epsilon_lower_bound <= epsilon
    # The auditor is not vacuous: the event it finds nearly attains ε (all these are tight at ε).
    assert result.epsilon_lower_bound > 0.75 * epsilon, result.summary()


@pytest.mark.parametrize("mechanism", [GRR(2.0, 4), BinaryRR(2.0), GRR(1.3, 8)])
def test_a_mechanism_spending_more_than_it_claims_is_caught(mechanism: GRR) -> None:
    target = local_neighbours(mechanism, claimed_epsilon=mechanism.epsilon / 1.3 if mechanism.k == 8 else 1.0)
    result = audit_neighbours(target, trials=TRIALS, confidence=0.95, seed=3)
    assert result.violated, result.summary()
    assert result.epsilon_lower_bound > target.claimed_epsilon


@pytest.mark.parametrize(
    ("mechanism", "k", "m", "floor"),
    [("duchi", 2, 2, 0.95), ("piecewise", 2, 2, 0.85), ("hybrid", 2, 2, 0.9), ("bitvector", 4, 2, 0.8),
     ("padding", 4, 2, 0.9)],
)  # fmt: skip
def test_the_new_question_kinds_stay_within_their_epsilon(mechanism: str, k: int, m: int, floor: float) -> None:
    """Number questions (Duchi, Piecewise, Hybrid on the range's ends) and multi-select questions
    (BitVector, Padding on their worst pair of answers): valid, and not vacuous (the floors sit below the
    bounds measured at 200,000 runs, docs/central.md)."""
    result = audit(mechanism, epsilon=1.0, k=k, m=m, steps=8, trials=TRIALS, confidence=0.95, seed=11)
    assert not result.violated, result.summary()
    assert floor < result.epsilon_lower_bound <= 1.0, result.summary()


@pytest.mark.parametrize("mechanism", ["duchi", "piecewise", "hybrid", "bitvector", "padding"])
def test_a_new_kind_spending_twice_its_claim_is_caught(mechanism: str) -> None:
    if mechanism in ("bitvector", "padding"):
        target = set_neighbours(set_mechanism_from_name(mechanism, epsilon=2.0, k=4, m=2), claimed_epsilon=1.0)
    else:
        target = number_neighbours(mean_mechanism_from_name(mechanism, epsilon=2.0, steps=8), claimed_epsilon=1.0)
    result = audit_neighbours(target, trials=TRIALS, confidence=0.95, seed=4)
    assert result.violated and result.epsilon_lower_bound > 1.5, result.summary()


def test_the_worst_set_pair_attains_epsilon_exactly() -> None:
    """BitVector's worst pair is two disjoint m-sets (each of the m options only one side selects carries a
    ratio (r+1)/2 or 2r/(r+1), r = e^(ε/m), and a pair of them r), Padding's the empty answer against a full
    one; either way the exact loss of the pair is the mechanism's ε (to the 10⁻³⁸ of exp_lower)."""
    for name in ("bitvector", "padding"):
        sets = set_mechanism_from_name(name, epsilon=1.0, k=4, m=2)
        a, b = worst_set_pair(sets)
        losses = (math.log(sets.output_probability(a, r) / sets.output_probability(b, r)) for r in sets.reports())
        worst = max(abs(loss) for loss in losses)
        assert 0.999999 < worst <= 1.0 + 1e-12, (name, worst)


def test_example_3_is_not_dp_for_any_finite_epsilon() -> None:
    p, alpha = 0.1, 0.05
    bounds = []
    for trials in (20_000, 200_000):
        result = audit_neighbours(subsample_neighbours(p, claimed_epsilon=5.0), trials=trials, seed=5)
        assert math.isinf(result.epsilon_point)
        assert result.hits[1] == 0
        half = trials // 2
        # ε_LB = ln(CP_lower(k0)/(1 − (α/2)^(1/N))) ≈ ln(p·N/ln(2/α)): it grows like ln N, without limit.
        predicted = math.log(p * half / math.log(2 / alpha))
        assert abs(result.epsilon_lower_bound - predicted) < 0.1, (result.epsilon_lower_bound, predicted)
        # Its statistical distance is only p: the CP interval of the target's release rate contains it.
        _, high = result.probability_intervals[0]
        assert result.statistical_distance_lower <= p <= high
        assert abs(result.statistical_distance - p) < 5 * math.sqrt(p * (1 - p) / half)
        bounds.append(result.epsilon_lower_bound)
    assert bounds[1] - bounds[0] == pytest.approx(math.log(10), abs=0.1)
    assert bounds[1] > 5.0  # refutes even ε = 5


def test_the_bound_is_valid_at_its_confidence() -> None:
    """Over many independent audits of a tight ε-DP mechanism, ε_LB > ε happens at most α of the time.

    Choosing the event on the same samples it is measured on would break this; the split keeps it.
    """
    runs, confidence = 300, 0.9
    rng = np.random.default_rng(2024)
    target = local_neighbours(BinaryRR(1.0))
    exceed = sum(
        audit_neighbours(target, trials=4_000, confidence=confidence, seed=int(s)).violated
        for s in rng.integers(0, 2**32, runs)
    )
    # Under the worst allowed rate α = 0.1, exceeding this count has probability < 1e-6.
    assert exceed <= binom.ppf(1 - 1e-6, runs, 1 - confidence)


def test_clopper_pearson_matches_scipy_exact_interval() -> None:
    for k, n in [(0, 50), (3, 50), (50, 50), (4_000, 10_000)]:
        low, high = clopper_pearson(k, n, 0.95)
        expected = binomtest(k, n).proportion_ci(0.95, method="exact")
        assert float(low) == pytest.approx(expected.low, abs=1e-12)
        assert float(high) == pytest.approx(expected.high, abs=1e-12)
    assert float(clopper_pearson(0, 1000, 0.95)[1]) == pytest.approx(1 - 0.025 ** (1 / 1000))


def test_bad_parameters_are_refused_with_a_clear_message() -> None:
    with pytest.raises(InvalidParameter, match="'trials' must be an integer >= 100"):
        audit("grr", epsilon=1.0, k=4, trials=10)
    with pytest.raises(InvalidParameter, match="'mechanism' must be one of"):
        audit("exponential", epsilon=1.0)
    with pytest.raises(InvalidParameter, match=r"'epsilon' must be a number in \[1e-06, 20\], got 0"):
        audit("grr", epsilon=0.0, k=4)


def test_cli_reports_and_exits_nonzero_on_a_violation(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["audit", "--mechanism", "grr", "--epsilon", "1", "--k", "4", "--trials", "20000", "--seed", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ε lower bound (95% confidence)" in out
    assert "consistent with the claim" in out
    assert main(["audit", "--mechanism", "subsample", "--epsilon", "3", "--trials", "20000", "--seed", "0"]) == 1
    assert "VIOLATION" in capsys.readouterr().out
    assert main(["audit", "--mechanism", "grr", "--trials", "5"]) == 2
    assert "'trials' must be" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "k"),
    [("grr", 4), ("oue", 3), ("discrete-laplace", 2), ("laplace", 2), ("duchi", 2), ("hybrid", 2), ("padding", 4)],
)
def test_the_exact_samplers_the_product_runs_stay_within_epsilon(mechanism: str, k: int) -> None:
    """``exact=True`` audits ``randomize`` / ``deniable.shared.noise.sample_noise`` (fed from the seed): ε_LB ≤ ε fails
    with probability ≤ 1 − confidence = 1e-6 if the samplers are right; a loose floor keeps it non-vacuous."""
    result = audit(mechanism, epsilon=1.0, k=k, trials=16_000, confidence=1 - 1e-6, seed=5, exact=True)
    assert not result.violated, result.summary()
    assert result.epsilon_lower_bound > 0.5, result.summary()


def _exact_distance(mechanism: str, epsilon: float, k: int) -> float:
    """The total-variation distance of the two laws the audit compares, from their formulas."""
    e, a = math.exp(epsilon), math.exp(-epsilon)
    return {
        "binary-rr": (e - 1) / (e + 1),  # p − q of randomized response
        "grr": (e - 1) / (e + k - 1),  # p − q: the supports of 0 and 1 differ in two outcomes
        "discrete-laplace": (1 - a) / (1 + a),  # P(Z = 0): Σ max(p0 − p1, 0) telescopes to it
        "laplace": 1 - math.exp(-epsilon / 2),  # a shift by 1 of Laplace(1/ε) (lattice 2^−20: exact too)
        "subsample": 0.1,  # P(target released) = p
    }[mechanism]


@pytest.mark.parametrize(
    ("mechanism", "epsilon"),
    [("laplace", 1.0), ("laplace", 0.3), ("discrete-laplace", 1.0), ("binary-rr", 1.0), ("grr", 2.0),
     ("subsample", 1.0)],
)  # fmt: skip
def test_the_statistical_distance_is_the_exact_total_variation(mechanism: str, epsilon: float) -> None:
    """The measured distance agrees with the exact one within Z standard errors of a difference of two
    held-out proportions (sd ≤ √(1/(2N))), and its lower bound holds."""
    k, trials = 4, 200_000
    result = audit(mechanism, epsilon=epsilon, k=k, trials=trials, seed=11)
    exact = _exact_distance(mechanism, epsilon, k)
    n0, n1 = result.runs
    sd = math.sqrt(0.25 / n0 + 0.25 / n1)
    assert abs(result.statistical_distance - exact) <= 4.89 * sd, (result.statistical_distance, exact)
    assert result.statistical_distance_lower <= exact
    # One event's gap is itself a lower bound on the distance: the reported distance is never below it.
    (k0, k1), gap = result.hits, abs(result.hits[0] / n0 - result.hits[1] / n1)
    assert result.statistical_distance >= gap - 4.89 * sd, (k0, k1)
