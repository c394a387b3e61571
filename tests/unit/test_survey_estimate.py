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
from deniable.shared.survey_estimate import (
    ProportionResult,
    estimate_mean,
    estimate_pure,
    estimate_question,
    sampling_variance,
)

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
        # make test-fast keeps one sampling run (per_question is the mechanism's own estimate, exactly:
        # test_per_question_split_is_the_mechanisms_own_estimate); the others (seconds each) are slow, and
        # make test runs them
        pytest.param("sampling", 1.0, "padding", "hybrid", marks=pytest.mark.slow),
        pytest.param("sampling", 4.0, "bitvector", "piecewise", marks=pytest.mark.slow),
        ("sampling", 0.5, "padding", "duchi"),
        pytest.param("per_question", 3.0, "padding", "hybrid", marks=pytest.mark.slow),
        pytest.param("per_question", 6.0, "bitvector", "piecewise", marks=pytest.mark.slow),
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


def skippers(pop: dict[str, Any], rate: float, seed: int = 11) -> dict[str, np.ndarray]:
    """Who skips each (optional) question: a fixed trait of the respondent, related to the answer, so the
    answerers are not a random part of the population (the hard case for counts)."""
    rng = np.random.default_rng(seed)
    by_category = np.array([0.5, 1.0, 1.5, 2.0]) * rate  # holders of later categories skip more
    choice = rng.random(N) < by_category[pop["choice"]]
    multi = rng.random(N) < np.where(pop["multi"][:, 0], 1.6 * rate, 0.6 * rate)
    number = rng.random(N) < rate * (0.4 + 1.2 * pop["number"] / pop["steps"])
    return {"choice": choice, "multi": multi, "number": number}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("epsilon", "rate", "multi", "number"),
    [
        (1.0, 0.1, "padding", "hybrid"),
        (4.0, 0.4, "bitvector", "piecewise"),
        (0.5, 0.25, "padding", "duchi"),
        # where the estimate served before (the answerers' count scaled by N·a/(a + s) rounded, its variance
        # blind to that factor's) reported 0.87 of the choice count's variance and covered it 0.926
        (8.0, 0.45, "bitvector", "hybrid"),
    ],
)
def test_sampling_estimates_with_skipped_questions_are_unbiased_with_calibrated_intervals(
    epsilon: float, rate: float, multi: str, number: str
) -> None:
    """Sampling split, each question optional and skipped by a fixed 5% to 90% of the respondents of each
    answer (a tenth to a half overall), 2,000 runs: the Horvitz–Thompson count of holders among
    those who answer and the answerers' proportion and mean, each with bias within 4 SE, variance within
    10% of the exact one (averaged over the runs' draws), reported variance within 10% of it, and
    coverage of the 95% interval in [0.93, 0.97]."""
    pop = population()
    skip = skippers(pop, rate)
    steps = pop["steps"]
    choice_m, multi_m, number_m = mechanisms(epsilon, steps, multi, number)
    number_range = NumberRange(18.0, 68.0, steps)
    values = number_range.lo + pop["number"] * (number_range.hi - number_range.lo) / steps
    answers = {q: ~skip[q] for q in ("choice", "multi", "number")}
    # the targets: among those who answer each question
    c_holder = (pop["choice"] == 1) & answers["choice"]
    m_answering, c_answering = int(answers["multi"].sum()), int(answers["choice"].sum())
    truth_c_prop = float(c_holder.sum() / c_answering)
    truth_c_count = float(c_holder.sum())
    m_holder = pop["multi"][:, 0] & answers["multi"]
    truth_m_count, truth_m_prop = float(m_holder.sum()), float(m_holder.sum() / m_answering)
    truth_v = float(values[answers["number"]].mean())
    vh_c, vn_c = pure_variances(choice_m)
    vh_m, vn_m = pure_variances(multi_m)
    v_number = np.asarray([exact_report_variance(number_m, j) for j in range(steps + 1)]) * number_range.scale**2

    def count_variance(holders: np.ndarray, answering: np.ndarray, vh: float, vn: float, drawn: int) -> float:
        """Var(N̂ | d) = N²[(1 − d/N)·S_y²/d + V̄_y/d], y = holds and answers, V̄_y over all N (0 for skippers)."""
        rho = holders.sum() / N
        s2 = N * rho * (1 - rho) / (N - 1)
        vbar = (holders.sum() * vh + (answering.sum() - holders.sum()) * vn) / N
        return N**2 * exact_variance(s2, vbar, drawn, N)

    def share_variance(holders: np.ndarray, answering: np.ndarray, vh: float, vn: float, answered: int) -> float:
        """Var(t̄ | a) = (1 − a/M)·S²/a + V̄/a over the M who answer."""
        m = int(answering.sum())
        pi = holders.sum() / m
        return exact_variance(m * pi * (1 - pi) / (m - 1), pi * vh + (1 - pi) * vn, answered, m)

    rng = np.random.default_rng(20261202)
    names = ("choice count", "choice proportion", "multi count", "multi proportion", "number mean")
    results: dict[str, tuple[list[float], list[float], list[float], list[bool]]] = {
        name: ([], [], [], []) for name in names
    }

    def record(name: str, estimate: float, variance: float, exact: float, low: float, high: float,
               truth: float) -> None:
        out = results[name]
        out[0].append(estimate)
        out[1].append(variance)
        out[2].append(exact)
        out[3].append(bool(low <= truth <= high))

    # the two pure questions: (id, mechanism, labels, holders, variances, the cell followed, its truths)
    pure = {
        "choice": ("smoke", choice_m, ["a", "b", "c", "d"], c_holder, (vh_c, vn_c), 1, truth_c_count, truth_c_prop),
        "multi": ("apps", multi_m, list("vwxyz"), m_holder, (vh_m, vn_m), 0, truth_m_count, truth_m_prop),
    }

    def record_pure(q: str, answered_mask: np.ndarray, answered: int, skipped: int) -> None:
        qid, mech, labels, holder, (vh, vn), cell, truth_count, truth_prop = pure[q]
        tally = mech.tally(mech.simulate(pop[q][answered_mask], rng=rng))
        r = estimate_question(qid, q, mech, tally, split="sampling", population=N, skipped=skipped, labels=labels)
        assert isinstance(r, ProportionResult)
        low, high = r.ci()
        plow, phigh = r.proportion_ci()
        exact = count_variance(holder, answers[q], vh, vn, answered + skipped)
        record(f"{q} count", float(r.counts[cell]), float(r.variance[cell]), exact, low[cell], high[cell],
               truth_count)  # fmt: skip
        exact = share_variance(holder, answers[q], vh, vn, answered)
        record(f"{q} proportion", float(r.proportions[cell]), float(r.proportion_variance[cell]), exact,
               plow[cell], phigh[cell], truth_prop)  # fmt: skip

    for _ in range(RUNS):
        who = rng.integers(0, QUESTIONS, size=N)
        for index, q in enumerate(("choice", "multi", "number")):
            drawn = who == index
            answered_mask = drawn & answers[q]
            answered, skipped = int(answered_mask.sum()), int((drawn & skip[q]).sum())
            if q in ("choice", "multi"):
                record_pure(q, answered_mask, answered, skipped)
            else:
                tally = number_m.tally(number_m.simulate(pop["number"][answered_mask], rng=rng))
                mean = estimate_mean("age", number_m, tally, number_range, split="sampling", population=N,
                                     skipped=skipped)
                low_v, high_v = mean.ci()
                m = int(answers[q].sum())
                s2 = float(values[answers[q]].var(ddof=1))
                exact = exact_variance(s2, float(v_number[pop["number"][answers[q]]].mean()), answered, m)
                record("number mean", mean.mean, mean.variance, exact, low_v, high_v, truth_v)
    truths = dict(zip(names, (truth_c_count, truth_c_prop, truth_m_count, truth_m_prop, truth_v), strict=True))
    for name in names:
        check(f"skips {rate} ε={epsilon} {name}", *results[name], truth=truths[name])


def test_skipped_answers_count_as_zeros_in_the_horvitz_thompson_total() -> None:
    """A question drawn for 300 of 600 respondents, answered by 200 and skipped by 100: the count is
    (600/300)·ĉ (not (600·200/300)/200·ĉ rounded), its variance that of a total over the 300 drawn with
    the skippers' zeros, and the proportion the answerers' ĉ/200."""
    m = GRR(3.0, 2)
    tally = Tally(200, (150, 50))
    r = estimate_pure("q", "choice", m, tally, labels=["y", "n"], split="sampling", population=600, skipped=100)
    own = m.estimate_tally(tally)
    np.testing.assert_allclose(r.counts, own.counts * 2)
    np.testing.assert_allclose(r.proportions, own.counts / 200)
    gap, q = m.gap, m.q_star
    t = np.concatenate([np.full(150, (1 - q) / gap), np.full(50, -q / gap), np.zeros(100)])  # category 0
    expected = 600**2 * ((1 - 0.5) * t.var(ddof=1) + 0.5 * own.variance[0] / 300) / 300
    assert r.variance[0] == pytest.approx(expected)
    assert r.population == 400 and r.to_dict()["n"] == 400
    with pytest.raises(InvalidParameter, match="skipped 100"):
        estimate_pure("q", "choice", m, tally, labels=["y", "n"], split="sampling", population=250, skipped=100)
    per_question = estimate_pure("q", "choice", m, tally, labels=["y", "n"], split="per_question", population=600,
                                 skipped=100)
    assert per_question.population == 200 and per_question.interval_method == "score-cc"
