"""Survey descriptors (format 3): the questions of three kinds, the split of ε and its exact arithmetic, the
``auto`` split and its recorded reason, strict parsing, and old descriptors read as one-question surveys."""

from __future__ import annotations

import copy
import hashlib
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.surveys import FIVE, HEALTH

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidConfig
from deniable.shared.keys import generate_keypair
from deniable.shared.limits import MAX_QUESTIONS
from deniable.shared.planner import DraftQuestion, plan_survey
from deniable.shared.questions import LEGACY_QUESTION_ID, ChoiceQuestion, MultiQuestion, NumberQuestion
from deniable.shared.survey import split_epsilons

PUBLIC = generate_keypair()[1]


def survey(questions: list[dict[str, Any]] = HEALTH, **kwargs: Any) -> CampaignConfig:
    options: dict[str, Any] = {"id": "health", "title": "Health 2026", "epsilon": 1.0, "public_key": PUBLIC}
    options.update(kwargs)
    return CampaignConfig.create_survey(questions=questions, **options)


def test_a_question_object_seen_before_is_not_validated_again_but_another_type_is() -> None:
    """question_from_json keeps the questions it validated by the repr of their JSON object: the same object
    again gives the same (immutable) question; a value equal to == but of another JSON type is parsed
    afresh (and refused where it is invalid); the fingerprint embeds each question's canonical JSON."""
    from deniable.shared.canonical_json import canonical_json
    from deniable.shared.questions import question_from_json

    wire = survey(FIVE).to_json()
    first = [question_from_json(copy.deepcopy(q), i) for i, q in enumerate(wire["questions"])]
    again = [question_from_json(copy.deepcopy(q), i) for i, q in enumerate(wire["questions"])]
    assert all(a is b for a, b in zip(first, again, strict=True))
    optional = next(q for q in wire["questions"] if q.get("optional"))
    with pytest.raises(InvalidConfig, match="optional"):
        question_from_json({**optional, "optional": 1}, 0)  # 1 == True, but not a JSON boolean
    for question in first:
        assert question.canonical.text.encode() == canonical_json(question.to_json())
    config = survey(FIVE)
    pinned = {key: value for key, value in config.to_json().items() if key != "status"}
    assert config.pinned_fingerprint() == hashlib.sha256(canonical_json(pinned)).hexdigest()


@pytest.mark.parametrize("split", ["per_question", "sampling", "auto"])
def test_a_survey_round_trips_through_its_json_with_the_same_fingerprint(split: str) -> None:
    config = survey(FIVE, split=split, group_fields=["country"], group_values={"country": ["NL", "DE"]})
    wire = config.to_json()
    assert wire["format_version"] == 3 and "question" not in wire and "categories" not in wire
    again = CampaignConfig.from_json(copy.deepcopy(wire))
    assert again == config and again.to_json() == wire
    assert again.pinned_fingerprint() == config.pinned_fingerprint()
    assert [q.id for q in again.questions] == [q["id"] for q in FIVE]
    assert {type(q) for q in again.questions} == {ChoiceQuestion, MultiQuestion, NumberQuestion}


def test_the_kinds_resolve_auto_to_their_lowest_variance_mechanism() -> None:
    config = survey(split="sampling")
    smoke, age, apps = config.questions
    assert smoke.mechanism == "binary-rr" and smoke.build_mechanism().epsilon == 1.0
    assert age.mechanism == "hybrid" and age.range.steps == 81  # one step per year by default
    assert apps.mechanism == "padding" and apps.build_mechanism().m == 3  # padding beats the bit vector at m ≥ 2
    assert apps.optional and not smoke.optional


def test_per_question_shares_split_epsilon_exactly_and_never_above_it() -> None:
    questions = [dict(q, share=s) for q, s in zip(HEALTH, (1, 2, 4), strict=True)]
    config = survey(questions, split="per_question", epsilon=0.7)
    total = sum(Fraction(q.epsilon) for q in config.questions)
    assert total <= Fraction(0.7) and float(total) == pytest.approx(0.7, rel=1e-15)
    assert [q.share for q in config.questions] == [1, 2, 4]
    assert config.questions[2].epsilon == pytest.approx(0.4)


@settings(max_examples=300, deadline=None)
@given(
    epsilon=st.floats(0.001, 10.0),
    shares=st.lists(st.integers(1, 100), min_size=1, max_size=MAX_QUESTIONS),
)
def test_split_epsilons_never_sum_above_epsilon(epsilon: float, shares: list[int]) -> None:
    parts = split_epsilons(epsilon, shares)
    assert sum(map(Fraction, parts)) <= Fraction(epsilon)
    for part, share in zip(parts, shares, strict=True):
        exact = Fraction(epsilon) * share / sum(shares)
        assert Fraction(part) <= exact  # rounded down, by less than one unit in the last place
        assert exact - Fraction(part) <= Fraction(part) * Fraction(1, 2**52)


def test_sampling_runs_every_question_at_the_whole_epsilon() -> None:
    config = survey(split="sampling", epsilon=2.0)
    assert {q.epsilon for q in config.questions} == {2.0}
    assert all(q.share is None for q in config.questions)
    assert config.split.mode == "sampling" and config.split.requested == "sampling"


def test_auto_records_the_planners_choice_and_its_figures() -> None:
    config = survey(FIVE, split="auto", epsilon=1.0)
    drafts = [
        DraftQuestion("smoke", "choice", k=2, mechanism="binary-rr"),
        DraftQuestion("mode", "choice", k=5, mechanism="oue"),
        DraftQuestion("age", "number", lo=18, hi=99, steps=81, mechanism="piecewise"),
        DraftQuestion("income", "choice", k=4),
        DraftQuestion("apps", "multi", k=4, m=2, mechanism="bitvector"),
    ]
    plan = plan_survey(drafts, epsilon=1.0, n=1000)
    expected = {"split": "per_question", "sample": "sampling"}[plan.recommended]
    assert config.split.mode == expected and config.split.requested == "auto"
    assert config.split.reason.startswith("auto: the planner predicts") and expected in config.split.reason
    one = survey(HEALTH[:1], split="auto")
    assert one.split.mode == "per_question" and one.questions[0].epsilon == 1.0


def test_a_number_histogram_is_a_choice_question_over_bins() -> None:
    config = survey([{"id": "income", "text": "Income?", "kind": "choice", "bins": [0, 1000, 2500.5, 10000]}])
    (income,) = config.questions
    assert income.categories == ("[0, 1000)", "[1000, 2500.5)", "[2500.5, 10000]")
    assert [income.check_answer(v) for v in (0, 999.99, 1000, 2500.5, 10000)] == [0, 0, 1, 2, 2]
    assert income.check_answer("[1000, 2500.5)") == 1  # a label is an answer too
    assert CampaignConfig.from_json(config.to_json()) == config


def test_legacy_descriptors_are_one_question_surveys() -> None:
    legacy = CampaignConfig.create(id="smoking", question="Smoke?", categories=["no", "yes"], epsilon=1.0,
                                   public_key=PUBLIC)  # fmt: skip
    assert legacy.format_version == 2 and not legacy.is_survey
    (question,) = legacy.questions
    assert question.id == LEGACY_QUESTION_ID and question.text == "Smoke?" and question.epsilon == 1.0
    assert question.build_mechanism() == legacy.build_mechanism()
    assert "questions" not in legacy.to_json() and "split" not in legacy.to_json()
    assert legacy.question_ids == ("answer",) and legacy.question_by_id("answer") is question


def test_one_question_properties_name_the_questions_of_a_survey() -> None:
    config = survey()
    for read in (lambda: config.k, config.build_mechanism, lambda: config.category_index("yes")):
        with pytest.raises(InvalidConfig, match="is a survey of 3 question"):
            read()


def _broken(change: Any) -> dict[str, Any]:
    wire = survey(split="per_question").to_json()
    change(wire)
    return wire


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda w: w.pop("split"), "missing 'split'"),
        (lambda w: w.update(question="old key"), "unknown 'question'"),
        (lambda w: w.update(questions=[]), "1..20 questions"),
        (lambda w: w["questions"].append(dict(w["questions"][0])), "appears twice"),
        (lambda w: w["questions"][0].update(epsilon=0.5), "its ε must be"),
        (lambda w: w["questions"][0].update(share=0), "share"),
        (lambda w: w["questions"][0].pop("share"), "needs an integer 'share'"),
        (lambda w: w["questions"][0].update(kind="scale"), "kind"),
        (lambda w: w["questions"][0].update(mechanism="padding"), "mechanism"),
        (lambda w: w["questions"][0].update(params={"k": 3}), "params"),
        (lambda w: w["questions"][0].update(optional=False), "only when true"),
        (lambda w: w["questions"][1].update(range=[99, 18]), "lo < hi"),
        (lambda w: w["questions"][1].update(steps=0), "steps"),
        (lambda w: w["questions"][1].update(params={"lattice": 1}), "lattice"),
        (lambda w: w["questions"][2].update(max_selected=6), "max_selected"),
        (lambda w: w["questions"][2].update(options=["a", "a"]), "unique"),
        (lambda w: w["questions"][2].update(colour="red"), "unknown 'colour'"),
        (lambda w: w["split"].update(mode="sampling"), "but 'per_question' was requested"),
        (lambda w: w["split"].update(mode="sampling", requested="sampling"), "per_question split only"),
        (lambda w: w["split"].update(mode="both"), "split.mode"),
        (lambda w: w.update(format_version=4), "format_version"),
    ],
)
def test_a_malformed_survey_descriptor_is_refused_naming_the_field(change: Any, match: str) -> None:
    with pytest.raises(InvalidConfig, match=match):
        CampaignConfig.from_json(_broken(change))


@pytest.mark.parametrize(
    ("questions", "kwargs", "match"),
    [
        ([], {}, "1..20"),
        ([HEALTH[0]] * 2, {}, "appears twice"),
        ([dict(HEALTH[0], categories=["no", "yes "])], {}, "whitespace"),
        ([dict(HEALTH[1], range=[0, 1])], {"split": "per_question"}, None),
        ([dict(HEALTH[1], range=[0.5, 1])], {}, "give 'steps'"),
        ([HEALTH[0]], {"trust_model": "central", "budget": 2.0, "split": "sampling"}, "per_question"),
        ([dict(HEALTH[0], share=3)], {"split": "sampling"}, "per_question split only"),
        ([dict(HEALTH[0], colour="red")], {}, "unknown keys 'colour'"),
        ([{"id": "q", "text": "?", "kind": "choice"}], {}, "needs 'categories'"),
        ([{"id": "Q", "text": "?", "kind": "choice", "categories": ["a", "b"]}], {}, "slug"),
    ],
)
def test_create_survey_refuses_what_cannot_be_a_survey(questions: Any, kwargs: Any, match: str | None) -> None:
    if match is None:
        assert survey(questions, **kwargs).questions[0].range.steps == 1
        return
    with pytest.raises(InvalidConfig, match=match):
        survey(questions, **kwargs)


def test_a_central_survey_sends_values_and_splits_each_release() -> None:
    config = survey(HEALTH, trust_model="central", budget=3.0, epsilon=1.0)
    assert config.split.mode == "per_question" and config.mechanism == "none"
    assert all(q.central for q in config.questions)
    assert sum(Fraction(q.epsilon) for q in config.questions) <= 1
    assert CampaignConfig.from_json(config.to_json()) == config
    with pytest.raises(InvalidConfig, match="central campaign"):
        config.questions[0].build_mechanism()
