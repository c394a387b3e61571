"""The device answers a survey in one envelope: ``Client.submit(cid, {"smoke": "yes", "age": 37, ...})``.

Against :class:`support.surveys.Desk`, an in-memory aggregator that opens every envelope as ingest does.
Checked here: one envelope per survey answer with every (or the drawn) question, skipped optional answers
sent as a padded ``null``, bad answers refused on the device naming the question (typed, nothing spent),
the survey's ε charged once, memoization and changed answers as for one question, rounds of a recurring
survey paying each question's ε once per distinct answer, central surveys, and the one-question API kept.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from support.surveys import FIVE, HEALTH, Desk, ciphertext_bytes

from deniable.client import Client
from deniable.shared.errors import AnswerChanged, BudgetExceeded, InvalidAnswer, InvalidConfig, InvalidParameter
from deniable.shared.questions import LEGACY_QUESTION_ID

ANSWER = {"smoke": "yes", "age": 37, "apps": ["mail", "maps"]}


@pytest.fixture
def desk() -> Desk:
    desk = Desk()
    desk.create(id="health", title="Health 2026", questions=HEALTH, epsilon=1.0, split="per_question")
    desk.create(id="five", title="Five", questions=FIVE, epsilon=2.0, split="sampling")
    return desk


@pytest.fixture
def client(desk: Desk) -> Client:
    return Client("http://desk.invalid", None, transport=desk)


def test_a_survey_is_answered_in_one_envelope_with_every_question(desk: Desk, client: Client) -> None:
    receipt = client.submit("health", ANSWER)
    assert receipt.epsilon_spent == 1.0 and not receipt.memoized
    assert client.flush() == 1
    (payload,) = desk.payloads("health")
    config = desk.configs["health"]
    assert set(payload.answers) == {"smoke", "age", "apps"} and all(v is not None for v in payload.answers.values())
    assert config.question_by_id("apps").build_mechanism().decode_report(payload.answers["apps"]) >= 0
    assert desk.sizes["health"] == {ciphertext_bytes(config)}


def test_a_skipped_optional_question_is_a_padded_null(desk: Desk, client: Client) -> None:
    client.submit("health", {"smoke": "no", "age": 18})
    other = Client("http://desk.invalid", None, transport=desk)
    other.submit("health", {"smoke": "no", "age": 18, "apps": None})  # None is skipping too
    client.flush(), other.flush()
    assert [p.answers["apps"] for p in desk.payloads("health")] == [None, None]
    assert desk.sizes["health"] == {ciphertext_bytes(desk.configs["health"])}


@pytest.mark.parametrize(
    ("answers", "question", "match"),
    [
        ({"smoke": "maybe", "age": 30}, "smoke", "not one of its categories"),
        ({"smoke": 1, "age": 30}, "smoke", "a category label"),
        ({"smoke": "no", "age": 120}, "age", r"must lie in \[18, 99\]"),
        ({"smoke": "no", "age": -math.inf}, "age", "finite number"),
        ({"smoke": "no", "age": math.nan}, "age", "finite number"),
        ({"smoke": "no", "age": "37"}, "age", "must be a number"),
        ({"smoke": "no", "age": True}, "age", "must be a number"),
        ({"smoke": "no", "age": 30, "apps": ["mail", "maps", "news", "chat"]}, "apps", "at most 3 options"),
        ({"smoke": "no", "age": 30, "apps": ["mail", "fax"]}, "apps", "'fax' is not one of its options"),
        ({"smoke": "no", "age": 30, "apps": ["mail", "mail"]}, "apps", "names an option twice"),
        ({"smoke": "no", "age": 30, "apps": "mail"}, "apps", "a list of option labels"),
        ({"age": 30}, "smoke", "needs an answer"),
        ({"smoke": "no", "age": 30, "height": 180}, "height", "not a question of this survey"),
    ],
)
def test_bad_answers_are_refused_on_the_device_naming_the_question(
    desk: Desk, client: Client, answers: dict[str, Any], question: str, match: str
) -> None:
    with pytest.raises(InvalidAnswer, match=match) as caught:
        client.submit("health", answers)
    assert caught.value.question == question and isinstance(caught.value, InvalidParameter)
    if question != "height":
        assert f"question {question!r}" in str(caught.value)
    assert client.ledger().spent == 0 and client.pending() == []


def test_not_a_dict_is_refused_with_what_to_send(client: Client) -> None:
    with pytest.raises(InvalidAnswer, match="must be a dict mapping question ids"):
        client.submit("health", "yes")


def test_the_survey_epsilon_is_charged_once_and_the_same_answers_resend_the_same_report(
    desk: Desk, client: Client
) -> None:
    first = client.submit("health", ANSWER, groups=None)
    again = client.submit("health", dict(ANSWER, apps=["maps", "mail"]))  # the same set
    assert again.memoized and again.report_id == first.report_id and again.epsilon_spent == 0
    (spend,) = client.ledger().campaigns
    assert Fraction(spend.epsilon) == Fraction(1.0) and spend.reports == 1
    with pytest.raises(AnswerChanged):
        client.submit("health", dict(ANSWER, age=38))
    changed = client.submit("health", dict(ANSWER, age=38), reanswer=True)  # undelivered: may be replaced
    assert changed.epsilon_spent == 1.0 and changed.report_id != first.report_id


def test_a_device_that_lost_its_state_derives_the_identical_report(desk: Desk, tmp_path: Any) -> None:
    state = tmp_path / "device"
    with Client("http://desk.invalid", state, transport=desk) as device:
        first = device.submit("five", {"smoke": "no", "age": 44, "income": 30000})
        device.flush()
    (state / "state.sqlite3").unlink()
    with Client("http://desk.invalid", state, transport=desk, reset_ledger=True) as device:
        again = device.submit("five", {"smoke": "no", "age": 44, "income": 30000})
        device.flush()
    assert again.report_id == first.report_id
    assert [p.answers for p in desk.payloads("five")] == [desk.payloads("five")[0].answers]  # a duplicate


def test_a_sampling_survey_sends_the_drawn_question_only(desk: Desk) -> None:
    drawn: dict[str, int] = {}
    for _ in range(60):
        client = Client("http://desk.invalid", None, transport=desk)
        client.submit("five", {"smoke": "yes", "mode": "car", "age": 50, "income": 10**7, "apps": ["news"]})
        client.flush()
    for payload in desk.payloads("five"):
        (qid,) = payload.answers
        drawn[qid] = drawn.get(qid, 0) + 1
    assert set(drawn) == {q["id"] for q in FIVE}  # 60 devices draw every one of 5 questions (P(miss) < 1e-4)
    assert desk.sizes["five"] == {ciphertext_bytes(desk.configs["five"])}


def test_a_one_question_survey_takes_its_answer_bare(desk: Desk, client: Client) -> None:
    desk.create(id="minutes", title="Commute", questions=[{"id": "minutes", "text": "Minutes?", "kind": "number",
                                                           "range": [0, 120], "clip": True}], epsilon=1.0)  # fmt: skip
    client.submit("minutes", 500)  # clipped to 120 on the device, as the question declares
    client.flush()
    (payload,) = desk.payloads("minutes")
    assert set(payload.answers) == {"minutes"}


def test_the_one_question_api_is_unchanged_for_old_campaigns(desk: Desk) -> None:
    from deniable.shared.descriptor import CampaignConfig
    from deniable.shared.keys import generate_keypair

    private, public = generate_keypair()
    config = CampaignConfig.create(id="smoking", question="Smoke?", categories=["no", "yes"], epsilon=1.0,
                                   public_key=public)  # fmt: skip
    desk.add(config, private)
    client = Client("http://desk.invalid", None, transport=desk)
    receipt = client.submit("smoking", "yes")
    again = client.submit("smoking", {LEGACY_QUESTION_ID: "yes"})  # the same answer, survey-style
    assert again.report_id == receipt.report_id and again.memoized
    client.flush()
    (payload,) = desk.payloads("smoking")
    assert payload.answers == {LEGACY_QUESTION_ID: payload.value}


def test_a_recurring_survey_pays_each_question_once_per_distinct_answer(desk: Desk) -> None:
    config = desk.create(id="weekly", title="Weekly", questions=HEALTH, epsilon=1.5, split="per_question",
                         recurring=True)  # fmt: skip
    eps = {q.id: Fraction(q.epsilon) for q in config.questions}
    client = Client("http://desk.invalid", None, transport=desk)
    week1 = client.submit("weekly", ANSWER, recurring=True, round="w1")
    assert Fraction(week1.epsilon_spent) == pytest.approx(float(sum(eps.values())))
    week2 = client.submit("weekly", ANSWER, recurring=True, round="w2")
    assert week2.epsilon_spent == 0 and week2.report_id != week1.report_id
    week3 = client.submit("weekly", dict(ANSWER, age=38), recurring=True, round="w3")
    assert week3.epsilon_spent == float(eps["age"])  # only the changed question's ε
    week4 = client.submit("weekly", {"smoke": "yes", "age": 37}, recurring=True, round="w4")  # apps skipped
    assert week4.epsilon_spent == 0
    client.flush()
    payloads = desk.payloads("weekly")
    assert [p.round for p in payloads] == ["w1", "w2", "w3", "w4"]
    assert payloads[0].answers == payloads[1].answers  # the permanent responses
    assert payloads[2].answers["smoke"] == payloads[0].answers["smoke"]
    assert payloads[3].answers["apps"] is None
    total = Fraction(client.ledger().campaigns[0].epsilon)
    assert total == pytest.approx(float(sum(eps.values()) + eps["age"]))


def test_central_surveys_need_the_opt_in_and_send_checked_values(desk: Desk) -> None:
    desk.create(id="salary", title="Salary", questions=HEALTH, epsilon=0.5, trust_model="central", budget=2.0)
    with pytest.raises(InvalidConfig, match="central trust model"):
        Client("http://desk.invalid", None, transport=desk).submit("salary", ANSWER)
    client = Client("http://desk.invalid", None, transport=desk, allow_central=True)
    receipt = client.submit("salary", ANSWER)
    assert receipt.epsilon_spent == 2.0  # the curator's total budget, as for one question
    client.flush()
    (payload,) = desk.payloads("salary")
    age = desk.configs["salary"].question_by_id("age")
    assert payload.answers["smoke"] == 1 and payload.answers["apps"] == (0, 1)
    assert age.range.lo + payload.answers["age"] * (age.range.hi - age.range.lo) / age.range.steps == 37


def test_the_budget_is_checked_against_the_whole_survey(desk: Desk) -> None:
    desk.create(id="big", title="Big", questions=HEALTH, epsilon=5.0)
    client = Client("http://desk.invalid", None, transport=desk, max_epsilon_per_campaign=4.0)
    with pytest.raises(BudgetExceeded):
        client.submit("big", ANSWER)
    assert client.pending() == []


def test_a_simulated_fleet_answers_a_survey_as_devices_do(desk: Desk) -> None:
    from deniable.client.fleet import simulate_fleet

    answers = [ANSWER, {"smoke": "no", "age": 64.5}, dict(ANSWER, apps=[])] * 10
    result = simulate_fleet("http://desk.invalid", "health", answers, transport=desk, batch_size=7)
    assert result.accepted == 30 and result.rejected == 0
    payloads = desk.payloads("health")
    assert [p.answers["apps"] is None for p in payloads].count(True) == 10
    sampled = simulate_fleet("http://desk.invalid", "five", [{"smoke": "no", "age": 20, "income": 5}] * 20,
                             transport=desk)  # fmt: skip
    assert sampled.accepted == 20 and all(len(p.answers) == 1 for p in desk.payloads("five"))
    with pytest.raises(InvalidAnswer, match="question 'age'"):
        simulate_fleet("http://desk.invalid", "health", [ANSWER, {"smoke": "no", "age": 0}], transport=desk)


def test_the_command_line_reads_answers_as_json_or_text() -> None:
    import argparse

    from deniable.client.cli import _answer

    assert _answer("age=37") == ("age", 37)
    assert _answer("age=37.5") == ("age", 37.5)
    assert _answer('apps=["mail", "maps"]') == ("apps", ["mail", "maps"])
    assert _answer("smoke=yes") == ("smoke", "yes")
    assert _answer('band="30"') == ("band", "30")  # a label that looks like a number, quoted
    assert _answer("age=NaN") == ("age", "NaN")  # not a number: refused by the question, naming it
    with pytest.raises(argparse.ArgumentTypeError, match="QUESTION=VALUE"):
        _answer("age")


def test_a_survey_with_admission_spends_one_token_per_envelope(desk: Desk) -> None:
    from deniable.aggregator.issuer import Issuer
    from deniable.shared import blindrsa
    from deniable.shared.errors import AdmissionTokenRequired
    from deniable.shared.tokens import Admission, public_key_text

    key = blindrsa.generate_key()
    admission = Admission(public_key_text(key.public_key()), 10)
    config = desk.create(id="gated", title="Gated", questions=HEALTH, epsilon=1.0, admission=admission,
                         split="per_question")
    client = Client("http://desk.invalid", None, transport=desk)
    with pytest.raises(AdmissionTokenRequired):
        client.submit("gated", ANSWER)
    assert client.obtain_tokens("gated", 1, Issuer(key, admission).sign) == 1
    client.submit("gated", ANSWER)
    assert client.tokens("gated") == 0 and client.flush() == 1
    (payload,) = desk.payloads("gated")
    assert payload.token is not None and set(payload.answers) == {"smoke", "age", "apps"}
    assert desk.sizes["gated"] == {ciphertext_bytes(config)}


def test_the_pin_summary_hashes_each_question_and_the_title_as_canonical_json() -> None:
    """The device's pin summary (which names what changed when a pin refuses a descriptor) hashes a
    survey's questions and title as RFC 8785 JSON, as it did before and as the JS client does: a Python
    ``json.dumps`` text (a question's ε 1.0 as ``1.0``, canonically ``1``; the title without its quotes)
    made every question of a device pinned earlier read as changed."""
    import hashlib

    from deniable.client.config import pin_summary
    from deniable.shared.canonical_json import canonical_json
    from deniable.shared.descriptor import CampaignConfig
    from deniable.shared.keys import generate_keypair

    questions = [{"id": "rare", "text": "Rare?", "kind": "choice", "categories": ["no", "yes"]},
                 {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]}]  # fmt: skip
    config = CampaignConfig.create_survey(id="pins", title="A \"quoted\" survey", questions=questions, epsilon=2.0,
                                          split="per_question", public_key=generate_keypair()[1])  # fmt: skip
    summary = pin_summary(config)
    full = config.to_json()
    for question in full["questions"]:
        assert summary[f"question {question['id']}_sha256"] == hashlib.sha256(canonical_json(question)).hexdigest()
    assert summary["title_sha256"] == hashlib.sha256(canonical_json(full["title"])).hexdigest()
