"""Survey-level estimates under both ε splits: bias, variance and interval coverage of every kind.

A fixed population of N respondents answers a three-question survey (a choice, a multi-select, a number)
R = 2,000 times with fresh randomness: under ``per_question`` each respondent answers every question at a
third of ε; under ``sampling`` each answers one question drawn uniformly, at the whole ε, and estimates
speak for all N. Tolerances (never widened): bias within 4 SE of the mean of R estimates; the variance of
the estimates within 10% of the exact variance (averaged over the runs' n_j: E[t̄ | n_j] is the truth for
every n_j, so Var(t̄) = E[Var(t̄ | n_j)]); the mean reported variance within 10% of the same; coverage of
the 95% interval in [0.93, 0.97] (4 binomial SE at R = 2,000).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import GRR, OUE, Tally
from deniable.shared.mechanisms.mean import Duchi, Hybrid, MeanMechanism, NumberRange, Piecewise
from deniable.shared.mechanisms.sets import BitVector, Padding
from deniable.shared.survey_estimate import estimate_mean, estimate_pure, estimate_question, sampling_variance

RUNS = 2000
N = 3000
QUESTIONS = 3


def population(seed: int = 7) -> dict[str, Any]:
    """The fixed answers of N respondents: a category of 4, a set of at most 2 of 5 options, a value index."""
    rng = np.random.default_rng(seed)
    choice = rng.choice(4, size=N, p=[0.5, 0.3, 0.15, 0.05])
    selections = np.zeros((N, 5), dtype=bool)
    for i in range(N):
        size = rng.choice(3, p=[0.2, 0.4, 0.4])
        selections[i, rng.choice(5, size=size, replace=False, p=[0.4, 0.3, 0.1, 0.1, 0.1])] = True
    steps = 10
    js = np.minimum(rng.binomial(steps, 0.3, size=N), steps)
    return {"choice": choice, "multi": selections, "number": js, "steps": steps}


def exact_report_variance(mechanism: MeanMechanism, j: int) -> float:
    """Var(t | j) from the exact law (lattice rounding included)."""
    law = mechanism.pmf(j)
    second = sum((p * mechanism.value_of_report(r) ** 2 for r, p in enumerate(law)), Fraction(0))
    return float(second - mechanism.x_of(j) ** 2)


def pure_variances(mechanism: Any) -> tuple[float, float]:
    """Var(t | holder), Var(t | not) of t = (b − q*)/(p* − q*)."""
    p, q, gap = mechanism.p_star, mechanism.q_star, mechanism.gap
    return p * (1 - p) / gap**2, q * (1 - q) / gap**2


def exact_variance(s2: float, vbar: float, answered: int, big_n: int) -> float:
    """(1 − f)·S²/n_j + V̄/n_j."""
    return (1 - answered / big_n) * s2 / answered + vbar / answered


def check(name: str, estimates: list[float], variances: list[float], exact: list[float], covered: list[bool],
          truth: float) -> None:
    est = np.asarray(estimates)
    empirical = float(est.var(ddof=1))
    predicted = float(np.mean(exact))
    se_of_mean = math.sqrt(empirical / len(est))
    assert abs(est.mean() - truth) <= 4 * se_of_mean, f"{name}: bias {est.mean() - truth:.5g} > 4 SE {se_of_mean:.3g}"
    assert abs(empirical / predicted - 1) <= 0.10, f"{name}: variance {empirical:.4g} vs exact {predicted:.4g}"
    reported = float(np.mean(variances))
    assert abs(reported / predicted - 1) <= 0.10, f"{name}: reported variance {reported:.4g} vs {predicted:.4g}"
    coverage = float(np.mean(covered))
    assert 0.93 <= coverage <= 0.97, f"{name}: coverage {coverage:.4f}"


def mechanisms(epsilon: float, steps: int, multi: str, number: str) -> tuple[Any, Any, MeanMechanism]:
    choice = GRR(epsilon, 4) if epsilon > 2 else OUE(epsilon, 4)
    multi_m = (Padding if multi == "padding" else BitVector)(epsilon, 5, 2)
    number_m = {"hybrid": Hybrid, "duchi": Duchi, "piecewise": Piecewise}[number](epsilon, steps, 32)
    return choice, multi_m, number_m


@pytest.mark.parametrize(
    ("split", "epsilon", "multi", "number"),
    [
        ("sampling", 1.0, "padding", "hybrid"),
        ("sampling", 4.0, "bitvector", "piecewise"),
        ("sampling", 0.5, "padding", "duchi"),
        ("per_question", 3.0, "padding", "hybrid"),
        ("per_question", 6.0, "bitvector", "piecewise"),
    ],
)
def test_survey_estimates_are_unbiased_with_exact_variance_and_calibrated_intervals(
    split: str, epsilon: float, multi: str, number: str
) -> None:
    pop = population()
    steps = pop["steps"]
    per_question = epsilon / QUESTIONS if split == "per_question" else epsilon
    choice_m, multi_m, number_m = mechanisms(per_question, steps, multi, number)
    number_range = NumberRange(18.0, 68.0, steps)
    # the quantities under test: category 1's proportion, option 0's count, the mean value
    truth_c = float(np.mean(pop["choice"] == 1))
    holders = pop["multi"][:, 0]
    truth_m = float(holders.sum())
    values = number_range.lo + pop["number"] * (number_range.hi - number_range.lo) / steps
    truth_v = float(values.mean())
    vh_c, vn_c = pure_variances(choice_m)
    vh_m, vn_m = pure_variances(multi_m)
    v_number = np.asarray([exact_report_variance(number_m, j) for j in range(steps + 1)]) * number_range.scale**2
    rng = np.random.default_rng(20261201)
    results: dict[str, tuple[list[float], list[float], list[float], list[bool]]] = {
        q: ([], [], [], []) for q in ("choice", "multi", "number")
    }
    for _ in range(RUNS):
        who = rng.integers(0, QUESTIONS, size=N) if split == "sampling" else None
        mask = [np.ones(N, dtype=bool) if who is None else who == q for q in range(QUESTIONS)]
        # choice
        sub = pop["choice"][mask[0]]
        tally = choice_m.tally(choice_m.simulate(sub, rng=rng))
        r = estimate_pure("smoke", "choice", choice_m, tally, labels=["a", "b", "c", "d"], split=split, population=N)
        low, high = r.ci()
        prop = r.counts[1] / N
        results["choice"][0].append(float(prop))
        results["choice"][1].append(float(r.variance[1]) / N**2)
        pi = truth_c
        s2 = N * pi * (1 - pi) / (N - 1)
        results["choice"][2].append(exact_variance(s2, pi * vh_c + (1 - pi) * vn_c, len(sub), N))
        results["choice"][3].append(bool(low[1] / N <= truth_c <= high[1] / N))
        # multi (the count of option 0's holders among all N)
        sel = pop["multi"][mask[1]]
        tally = multi_m.tally(multi_m.simulate(sel, rng=rng))
        r = estimate_pure("apps", "multi", multi_m, tally, labels=list("vwxyz"), split=split, population=N)
        low, high = r.ci()
        results["multi"][0].append(float(r.counts[0]))
        results["multi"][1].append(float(r.variance[0]))
        pi = truth_m / N
        s2 = N * pi * (1 - pi) / (N - 1)
        results["multi"][2].append(N**2 * exact_variance(s2, pi * vh_m + (1 - pi) * vn_m, len(sel), N))
        results["multi"][3].append(bool(low[0] <= truth_m <= high[0]))
        # number
        js = pop["number"][mask[2]]
        tally = number_m.tally(number_m.simulate(js, rng=rng))
        mean = estimate_mean("age", number_m, tally, number_range, split=split, population=N)
        low_v, high_v = mean.ci()
        results["number"][0].append(mean.mean)
        results["number"][1].append(mean.variance)
        s2 = float(values.var(ddof=1))
        results["number"][2].append(exact_variance(s2, float(v_number[pop["number"]].mean()), len(js), N))
        results["number"][3].append(low_v <= truth_v <= high_v)
    for name, truth in (("choice", truth_c), ("multi", truth_m), ("number", truth_v)):
        check(f"{split} ε={epsilon} {name}", *results[name], truth=truth)


def test_per_question_split_is_the_mechanisms_own_estimate() -> None:
    m = OUE(1.0, 3)
    tally = Tally(100, (40, 35, 30))
    r = estimate_pure("q", "choice", m, tally, labels=["a", "b", "c"], split="per_question", population=500)
    own = m.estimate_tally(tally)
    assert r.population == 100  # per question the population is the answers
    np.testing.assert_array_equal(r.counts, own.counts)
    np.testing.assert_array_equal(r.variance, own.variance)
    assert r.interval_method == "score-cc"
    body = r.to_dict()
    assert body["categories"][0]["ci"] == [float(x) for x in (own.ci()[0][0], own.ci()[1][0])]


def test_sampling_variance_reduces_to_the_randomizers_when_everyone_answered() -> None:
    assert sampling_variance(9.0, 4.0, 50, 50) == pytest.approx(4.0 / 50)
    assert sampling_variance(9.0, 4.0, 10, 50) == pytest.approx((0.8 * 9 + 0.2 * 4) / 10)


def test_sampling_counts_rescale_by_the_population_over_the_answers() -> None:
    m = GRR(3.0, 2)
    tally = Tally(200, (150, 50))
    r = estimate_pure("q", "choice", m, tally, labels=["y", "n"], split="sampling", population=600)
    own = m.estimate_tally(tally)
    np.testing.assert_allclose(r.counts, own.counts * 3)
    assert (r.sampling_variance > 0).all() and (r.variance > own.variance * 9).all()
    body = r.to_dict()
    assert body["n"] == 600 and body["answered"] == 200 and body["interval"]["method"] == "normal"
    assert body["categories"][0]["proportion"] == pytest.approx(own.counts[0] / 200)
    assert body["categories"][0]["sampling_stderr"] > 0


def test_an_unanswered_question_serves_nulls_not_nans() -> None:
    m = Padding(1.0, 3, 2)
    r = estimate_question("apps", "multi", m, Tally.zero(3), split="sampling", population=10, labels=["a", "b", "c"])
    body = r.to_dict()
    assert body["answered"] == 0
    assert all(row["count"] is None and row["ci"] == [None, None] for row in body["options"])
    mean = estimate_question("age", "number", Hybrid(1.0, 4, 16), Tally.zero(19), split="sampling", population=10,
                             number_range=NumberRange(0, 1, 4))
    assert mean.to_dict()["mean"]["mean"] is None


def test_bad_inputs_are_refused_with_a_message() -> None:
    m = GRR(1.0, 2)
    with pytest.raises(InvalidParameter, match="split"):
        estimate_pure("q", "choice", m, Tally(1, (1, 0)), labels=["a", "b"], split="both")
    with pytest.raises(InvalidParameter, match="more answers"):
        estimate_pure("q", "choice", m, Tally(5, (1, 4)), labels=["a", "b"], split="sampling", population=3)
    with pytest.raises(InvalidParameter, match="labels"):
        estimate_pure("q", "choice", m, Tally(5, (1, 4)), labels=["a"], split="sampling", population=9)
    with pytest.raises(InvalidParameter, match="mean mechanism"):
        estimate_question("q", "number", m, Tally(5, (1, 4)), split="sampling", population=9)
