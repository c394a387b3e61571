"""The survey planner: its predictions against simulation, its recommendation, and `deniable plan`."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import BinaryRR
from deniable.shared.mechanisms.mean import Hybrid
from deniable.shared.planner import DraftQuestion, parse_question, plan_survey


def row(plan, question: str, split: str):  # type: ignore[no-untyped-def]
    return next(r for r in plan.rows if r.question == question and r.split == split)


def test_the_split_prediction_is_the_mechanism_at_its_share_of_epsilon() -> None:
    plan = plan_survey([DraftQuestion("a", "choice", k=2), DraftQuestion("b", "choice", k=2)], epsilon=2.0, n=1000)
    mechanism = BinaryRR(1.0)
    p, q, gap = mechanism.p_star, mechanism.q_star, mechanism.gap
    expected = (0.5 * p * (1 - p) + 0.5 * q * (1 - q)) / gap**2 / 1000
    assert row(plan, "a", "split").stderr ** 2 == pytest.approx(expected, rel=1e-12)
    assert row(plan, "a", "split").mechanism == "binary-rr" and row(plan, "a", "split").epsilon == 1.0


@pytest.mark.slow
def test_the_sampling_prediction_matches_a_simulated_survey() -> None:
    """Three questions, each respondent answers one drawn uniformly at the whole ε; the proportion among the
    answerers of question 'a' has the variance the plan predicts (within 10%, 2,000 seeded runs)."""
    n, questions, runs, epsilon = 3_000, 3, 2_000, 1.0
    truth = np.zeros(n, dtype=np.int64)
    truth[: n // 2] = 1  # a share 1/2 holds category 1: the plan's assumption for k = 2
    plan = plan_survey([DraftQuestion(x, "choice", k=2) for x in "abc"], epsilon=epsilon, n=n)
    mechanism = BinaryRR(epsilon)
    rng = np.random.default_rng(4)
    estimates = []
    for _ in range(runs):
        answering = truth[rng.integers(0, questions, size=n) == 0]
        estimate = mechanism.estimate_tally(mechanism.tally(mechanism.simulate(answering, rng=rng)))
        estimates.append(estimate.counts[1] / estimate.n)
    assert np.mean(estimates) == pytest.approx(0.5, abs=4 * np.std(estimates) / np.sqrt(runs))
    assert np.var(estimates, ddof=1) == pytest.approx(row(plan, "a", "sample").stderr ** 2, rel=0.10)


@pytest.mark.slow
def test_the_number_prediction_bounds_a_simulated_mean() -> None:
    """A number question alone (Q = 1): the predicted SE is the Hybrid's worst case, never below the truth."""
    n, runs, steps = 2_000, 1_000, 100
    plan = plan_survey([DraftQuestion("age", "number", lo=0, hi=100, steps=steps)], epsilon=2.0, n=n)
    mechanism = Hybrid(2.0, steps)
    from deniable.shared.mechanisms.mean import NumberRange

    grid = NumberRange(0, 100, steps)
    js = np.random.default_rng(1).integers(0, steps + 1, size=n)
    rng = np.random.default_rng(2)
    means = [mechanism.estimate(mechanism.tally(mechanism.simulate(js, rng=rng)), grid).mean for _ in range(runs)]
    predicted = row(plan, "age", "split").stderr
    assert np.std(means, ddof=1) <= predicted * 1.05
    assert np.std(means, ddof=1) >= predicted * 0.9  # the Hybrid's variance hardly depends on the values


def test_the_recommendation_follows_epsilon_and_the_number_of_questions() -> None:
    many = [DraftQuestion(f"q{i}", "choice", k=4) for i in range(8)]
    assert plan_survey(many, epsilon=1.0, n=10_000).recommended == "sample"
    assert plan_survey(many[:2], epsilon=8.0, n=10_000).recommended == "split"
    one = plan_survey(many[:1], epsilon=1.0, n=10_000)
    assert row(one, "q0", "split").stderr == pytest.approx(row(one, "q0", "sample").stderr)
    assert "inflation" in one.reason


def test_parse_and_errors() -> None:
    q = parse_question("number:age:lo=18,hi=99,steps=81,mechanism=piecewise")
    assert (q.kind, q.lo, q.hi, q.steps, q.mechanism) == ("number", 18.0, 99.0, 81, "piecewise")
    for bad, match in [("choice:k=2", "KIND:ID"), ("choice:x:k=two", "integer"), ("poll:x:k=2", "kind"),
                       ("multi:x:k=3,m=4", "1 ≤ m ≤ k"), ("choice:x:size=3", "unknown key")]:
        with pytest.raises(InvalidParameter, match=match):
            parse_question(bad)
    with pytest.raises(InvalidParameter, match="unique"):
        plan_survey([DraftQuestion("a", "choice", k=2)] * 2, epsilon=1.0, n=10)
    with pytest.raises(InvalidParameter, match="shares"):
        plan_survey([DraftQuestion("a", "choice", k=2)], epsilon=1.0, n=10, shares=[0.5])


