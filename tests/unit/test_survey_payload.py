"""The survey payload codec (format 3): properties over random surveys and answers, the one envelope size of
a campaign over every kind, skip and drawn question, and the fixed pattern of draws of a survey answer.

* codec: for any survey and any valid answers, the payload the device makes decodes (as the aggregator
  decodes it) to exactly the reports it randomized, and every payload fits the campaign's padded length;
* size: every envelope of a campaign has one ciphertext length, whatever the answers, which were skipped,
  and which question a sampling survey drew (issue 13: padding applies to every kind);
* draw pattern: the sequence of ``randbelow`` bounds a survey answer draws is the same for every answer,
  skipped or not (skipped questions randomize a dummy), and under sampling it depends on the drawn
  question only, which the device derives from its secret and the campaign, never from an answer.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from support.surveys import FIVE, HEALTH

from deniable.client.drbg import HmacDrbg
from deniable.client.memo import drawn_question, survey_one_shot
from deniable.client.report import normalize_answers, randomize_survey
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import ENC_BYTES, TAG_BYTES, open_envelope
from deniable.shared.errors import InvalidConfig
from deniable.shared.keys import generate_keypair
from deniable.shared.limits import MAX_QUESTIONS
from deniable.shared.questions import ChoiceQuestion, MultiQuestion, NumberQuestion, Question
from deniable.shared.sampling import seeded_randbelow

PRIVATE, PUBLIC = generate_keypair()

CHOICE_MECHANISMS = ["auto", "grr", "oue", "olh"]
NUMBER_MECHANISMS = ["auto", "duchi", "piecewise", "hybrid"]
MULTI_MECHANISMS = ["auto", "bitvector", "padding"]


@st.composite
def question_specs(draw: st.DrawFn, index: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["choice", "multi", "number", "bins"]))
    spec: dict[str, Any] = {"id": f"q{index}", "text": f"Question {index}?", "optional": draw(st.booleans())}
    if kind == "choice":
        k = draw(st.integers(2, 20))
        mechanism = "binary-rr" if k == 2 and draw(st.booleans()) else draw(st.sampled_from(CHOICE_MECHANISMS))
        spec.update(kind="choice", categories=[f"c{i}" for i in range(k)], mechanism=mechanism)
    elif kind == "bins":
        edges = sorted(set(draw(st.lists(st.integers(-1000, 1000), min_size=3, max_size=8))))
        if len(edges) < 3:
            edges = [0, 1, 2]
        spec.update(kind="choice", bins=edges, clip=draw(st.booleans()))
    elif kind == "multi":
        k = draw(st.integers(2, 12))
        spec.update(kind="multi", options=[f"o{i}" for i in range(k)], max_selected=draw(st.integers(1, k)),
                    mechanism=draw(st.sampled_from(MULTI_MECHANISMS)))  # fmt: skip
    else:
        lo = draw(st.integers(-100, 100))
        hi = lo + draw(st.integers(1, 300))
        spec.update(kind="number", range=[lo, hi], steps=draw(st.integers(1, 64)),
                    mechanism=draw(st.sampled_from(NUMBER_MECHANISMS)), clip=draw(st.booleans()))  # fmt: skip
    return spec


@st.composite
def surveys(draw: st.DrawFn) -> CampaignConfig:
    count = draw(st.integers(1, 6))
    specs = [draw(question_specs(i)) for i in range(count)]
    split = draw(st.sampled_from(["per_question", "sampling", "auto"]))
    if split == "per_question":
        for spec in specs:
            spec["share"] = draw(st.integers(1, 5))
    return CampaignConfig.create_survey(
        id="prop", title="Property survey", questions=specs, epsilon=draw(st.sampled_from([0.5, 1.0, 4.0])),
        public_key=PUBLIC, split=split, recurring=draw(st.booleans()),
    )  # fmt: skip


def answer_for(draw: st.DrawFn, question: Question) -> Any:
    if question.optional and draw(st.booleans()):
        return None
    if isinstance(question, ChoiceQuestion):
        if question.bins is not None and draw(st.booleans()):
            lo, hi = question.bins[0], question.bins[-1]
            if question.clip:
                return draw(st.floats(lo - 100, hi + 100, allow_nan=False))
            return draw(st.floats(lo, hi, allow_nan=False))
        return draw(st.sampled_from(question.categories))
    if isinstance(question, MultiQuestion):
        return draw(st.lists(st.sampled_from(question.options), unique=True, max_size=question.max_selected))
    assert isinstance(question, NumberQuestion)
    lo, hi = question.lo, question.hi
    if question.clip:
        return draw(st.one_of(st.integers(lo - 50, hi + 50), st.floats(lo - 50, hi + 50, allow_nan=False)))
    return draw(st.one_of(st.integers(lo, hi), st.floats(lo, hi, allow_nan=False)))


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_every_payload_decodes_to_the_reports_the_device_drew_and_fits_the_padding(data: st.DataObject) -> None:
    config = data.draw(surveys())
    answers = {q.id: a for q in config.questions if (a := answer_for(data.draw, q)) is not None}
    normalized = normalize_answers(config, answers)
    seed = data.draw(st.integers(0, 2**32))
    reports = randomize_survey(config, normalized, seeded_randbelow(np.random.default_rng(seed)))
    payload = config.make_payload(reports, {}, "r1" if config.recurring else None)
    assert config.padded_length is not None and len(canonical_json(payload)) <= config.padded_length
    decoded = config.decode(payload)
    assert decoded.answers == reports
    for qid, report in reports.items():
        assert (report is None) == (normalized[qid] is None)  # None exactly for the skipped
    asked = 1 if config.split.mode == "sampling" else len(config.questions)
    assert len(decoded.answers) == asked
    assert CampaignConfig.from_json(config.to_json()) == config


def _sizes(config: CampaignConfig, answer_sets: list[dict[str, Any]], devices: int) -> set[int]:
    sizes = set()
    for answers in answer_sets:
        for _ in range(devices):
            secret = secrets.token_bytes(32)
            report_id, reports = survey_one_shot(config, secret, normalize_answers(config, answers))
            envelope = config.seal(config.make_payload(reports, {"country": "NL"}), device_secret=secret,
                                   report_id=report_id)  # fmt: skip
            sizes.add(len(envelope.ciphertext))
            assert config.decode(open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE,
                                               padded_length=config.padded_length)).answers  # fmt: skip
    return sizes


@pytest.mark.parametrize("split", ["per_question", "sampling"])
def test_every_envelope_of_a_survey_has_one_size_whatever_the_kinds_answers_skips_and_draw(split: str) -> None:
    config = CampaignConfig.create_survey(id="sizes", title="Sizes", questions=[*FIVE, *EXTRA, *MORE], epsilon=1.0,
                                          public_key=PUBLIC, split=split, group_fields=["country"],
                                          group_values={"country": ["NL", "BE"]})  # fmt: skip
    assert {q.mechanism for q in config.questions} == {
        "binary-rr", "oue", "piecewise", "grr", "bitvector", "padding", "hybrid", "olh", "duchi"
    }  # fmt: skip
    smallest = {"smoke": "no", "age": 18, "income": 0, "emoji": "e0", "rating": 1}  # optional ones skipped
    widest = {"smoke": "yes", "mode": "train", "age": 99, "income": 10**9, "apps": ["chat", "maps"],
              "apps2": ["mail", "news", "music"], "age2": 99, "emoji": "e11", "rating": 5}  # fmt: skip
    middle = {"smoke": "no", "mode": "bike", "age": 57.25, "income": 41000.5, "apps": [], "apps2": [],
              "age2": 18.5, "emoji": "e5", "rating": 2.5}  # fmt: skip
    assert config.padded_length is not None
    assert _sizes(config, [smallest, widest, middle], devices=12) == {ENC_BYTES + config.padded_length + TAG_BYTES}


class Recorder:
    """A seeded ``randbelow`` that records the bound of every call."""

    def __init__(self, seed: int) -> None:
        self._draw = seeded_randbelow(np.random.default_rng(seed))
        self.bounds: list[int] = []

    def __call__(self, n: int) -> int:
        self.bounds.append(n)
        return self._draw(n)


#: A padding multi and a hybrid number beside FIVE's mechanisms (optional: skipped in most answer sets).
EXTRA = [dict(HEALTH[2], id="apps2"), dict(HEALTH[1], id="age2", optional=True)]
#: An olh choice and a duchi number, so that the size test covers every mechanism.
MORE = [
    {"id": "emoji", "text": "Emoji?", "kind": "choice", "categories": [f"e{i}" for i in range(12)], "mechanism": "olh"},
    {"id": "rating", "text": "Rating?", "kind": "number", "range": [1, 5], "mechanism": "duchi"},
]
ANSWER_SETS: list[dict[str, Any]] = [
    {"smoke": "no", "age": 18, "income": 0},
    {"smoke": "yes", "mode": "train", "age": 99, "income": 10**9, "apps": ["chat", "maps"]},
    {"smoke": "no", "mode": "walk", "age": 57.25, "income": 41000.5, "apps": []},
    {"smoke": "yes", "mode": "bus", "age": 33, "income": -5, "apps": ["mail"]},
    {"smoke": "yes", "age": 20, "income": 7, "apps2": ["news", "chat", "music"], "age2": 90.5},
]


@pytest.mark.parametrize("split", ["per_question", "sampling"])
def test_the_pattern_of_draws_is_the_same_for_every_answer_and_skip(split: str) -> None:
    config = CampaignConfig.create_survey(id="pattern", title="Pattern", questions=[*FIVE, *EXTRA],
                                          epsilon=1.5, public_key=PUBLIC, split=split)  # fmt: skip
    for drawn in range(len(config.questions)) if split == "sampling" else (None,):
        patterns = set()
        for seed in range(8):
            for answers in ANSWER_SETS:
                recorder = Recorder(seed)
                randomize_survey(config, normalize_answers(config, answers), recorder, drawn=drawn)
                patterns.add(tuple(recorder.bounds))
        assert len(patterns) == 1, f"the draws depend on the answers (drawn question {drawn})"


def test_the_drbg_takes_the_same_calls_for_every_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device path itself (HMAC_DRBG from the device secret): the same randbelow bounds for every answer."""
    config = CampaignConfig.create_survey(id="drbg", title="DRBG", questions=[*FIVE, *EXTRA], epsilon=1.0,
                                          public_key=PUBLIC, split="per_question")  # fmt: skip
    calls: list[int] = []
    original = HmacDrbg.randbelow

    def recording(self: HmacDrbg, n: int) -> int:
        calls.append(n)
        return original(self, n)

    monkeypatch.setattr(HmacDrbg, "randbelow", recording)
    patterns = set()
    secret = secrets.token_bytes(32)
    for answers in ANSWER_SETS:
        calls.clear()
        survey_one_shot(config, secret, normalize_answers(config, answers))
        patterns.add(tuple(calls))
    assert len(patterns) == 1


def test_the_drawn_question_depends_on_the_device_only_and_is_uniform() -> None:
    config = CampaignConfig.create_survey(id="draw", title="Draw", questions=[*FIVE, *EXTRA], epsilon=1.0,
                                          public_key=PUBLIC, split="sampling")  # fmt: skip
    rng = np.random.default_rng(20261201)
    secrets_ = [bytes(rng.integers(0, 256, 32, dtype=np.uint8)) for _ in range(3000)]
    counts = Counter(drawn_question(config, secret) for secret in secrets_)
    assert sorted(counts) == list(range(len(config.questions)))
    observed = [counts[i] for i in range(len(config.questions))]
    assert stats.chisquare(observed).pvalue > 1e-6
    # the same device always answers the same question, whatever it answers
    secret = secrets_[0]
    for answers in ANSWER_SETS:
        _, reports = survey_one_shot(config, secret, normalize_answers(config, answers))
        assert list(reports) == [config.questions[drawn_question(config, secret)].id]  # type: ignore[index]


def test_the_survey_limit_is_enforced() -> None:
    specs = [{"id": f"q{i}", "text": "?", "kind": "choice", "categories": ["a", "b"]} for i in range(MAX_QUESTIONS)]
    assert len(CampaignConfig.create_survey(id="long", title="Long", questions=specs, epsilon=1.0,
                                            public_key=PUBLIC).questions) == MAX_QUESTIONS  # fmt: skip
    with pytest.raises(InvalidConfig, match=r"1\.\.20"):
        CampaignConfig.create_survey(id="long", title="Long", epsilon=1.0, public_key=PUBLIC,
                                     questions=[*specs, dict(specs[0], id="extra")])  # fmt: skip
