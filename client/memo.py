"""Memoized randomized responses: one report per one-shot campaign, one per (campaign, value) in rounds.

One-shot campaigns (the default): the first ``submit`` draws the answer from an HMAC_DRBG (SP 800-90A,
SHA-256) instantiated with the device secret as entropy input and (campaign id, config fingerprint, value)
as nonce (:func:`one_shot_answer`), and the sealed envelope is stored with its ε spend; every later
``submit`` to the campaign re-sends that identical envelope (same report id, so the aggregator counts it
once) and spends nothing. Because the report *and* its report id are a function of (secret, campaign,
fingerprint, value), a device whose database was deleted re-derives the identical report under the same
report id: the aggregator sees a retry, not a fresh randomization (with fresh CSPRNG noise, 200 resets
would let a majority vote recover the value). The fingerprint (:meth:`CampaignConfig.pinned_fingerprint`)
is in the nonce so that a campaign re-created with another ε, mechanism or key under the same id gets an
independent draw rather than a correlated one. A reset device still needs ``reset_ledger=True`` to start
(:mod:`deniable.client.state` says what a reset costs).

Recurring campaigns (descriptor ``"recurring": true``) collect in *rounds* (``submit(..., recurring=True,
round="2026-11-29")``), in the manner of RAPPOR's *permanent randomized response* (Erlingsson, Pihur,
Korolova, CCS 2014): the randomness for value ``v`` in campaign ``c`` is drawn from an HMAC_DRBG
(SP 800-90A, SHA-256) instantiated with the device secret as entropy input and ``(c, v)`` as nonce. So the
randomized report of ``v`` is a fixed function of (secret, c, v), identical in every round, and the device
never needs a table keyed by raw values to stay consistent. Each round's envelope has a report id of its
own (:func:`round_report_id`, a function of (secret, c, v, round)), so a retry of the same round is
idempotent; the aggregator counts a device once per round and estimates each round from that round's
reports only. A round takes one answer: submitting the same round again re-queues the same envelope and
spends nothing; another value in the same round is refused. One-shot campaigns refuse ``recurring=True``
(they count one answer per device, so a second value would spend ε on a report nobody counts).

Guarantee and its limits (document these to users):

* Each distinct true value a device ever reports in a campaign costs ε once, for the life of the campaign
  and over all its rounds (composition over the distinct values: k distinct values cost k·ε, capped by the
  ledger). An unchanged value reported in round after round costs nothing more: the report is the same.
* A change of value is visible: a new value brings a new report and a new report id under the same
  pseudonym, so an observer learns *that* the value changed (not to what, beyond the ε-LDP report).
* A stable report is a tracking risk: the same report id and report recur, which links submissions. The
  aggregator sees the pseudonym anyway, but a network observer without the campaign key sees only the
  report id. In a recurring campaign the stable report (and the pseudonym) links a device across rounds,
  as in RAPPOR without its instantaneous layer.
* RAPPOR adds an *instantaneous* randomized response layer on top of the permanent one to blunt both
  effects (each transmission re-randomized, at the price of more noise per report). deniable does not add
  it: within a round the aggregator counts one report per device, so repeated transmissions are
  duplicates, and across rounds an IRR layer would only widen every round's estimate while the pseudonym
  links the rounds anyway.
* On disk, the ledger keeps the report ids of recurring reports (it must, to charge ε per distinct value
  only). Whoever reads both the device secret and the state database can recompute them per category and
  learn which values were reported; the state dir is therefore created 0700 and the secret 0600.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.mechanisms import Mechanism

from .drbg import HmacDrbg
from .report import randomize_index, randomize_survey

__all__ = [
    "answer_tag",
    "drawn_question",
    "one_shot_answer",
    "permanent_response",
    "round_report_id",
    "survey_answer_id",
    "survey_one_shot",
    "survey_permanent",
    "survey_round_report_id",
]

#: Personalization string of the permanent-response DRBG (domain separation from any other use). v2: the
#: fixed-pattern samplers draw a different report from the same DRBG stream than v1's rejection samplers;
#: a new personalization gives each new permanent response a new report id, so the ledger charges it as
#: the new report it is instead of taking it for the v1 report it already paid for.
PERSONALIZATION = b"deniable/permanent-rr/v2"
#: Personalization string of the DRBG deriving a one-shot answer and its report id.
ONE_SHOT_PERSONALIZATION = b"deniable/one-shot/v1"
#: Personalization string of the DRBG deriving a round's report id.
ROUND_PERSONALIZATION = b"deniable/round-report-id/v1"
#: Domain separation of the answer tag (HMAC key prefix).
ANSWER_TAG_KEY = b"deniable/answer-tag/v1"


def answer_tag(device_secret: bytes, campaign_id: str, value_index: Any, groups: Mapping[str, str]) -> str:
    """A keyed fingerprint of one answer (value and groups) to a campaign, so that a second ``submit``
    can tell a repeat from a changed answer without the raw value ever reaching the disk. ``value_index``
    is the category index, or a survey's normalized answers (a mapping of question ids).

    ``HMAC-SHA256(ANSWER_TAG_KEY ‖ secret, canonical JSON of [campaign id, index, groups])``, hex. Without
    the device secret it reveals nothing about the value; whoever holds both the secret and the state
    database can recompute it per category (the same limit as the report ids of recurring campaigns).
    """
    message = canonical_json([campaign_id, dict(value_index) if isinstance(value_index, Mapping) else value_index,
                              dict(groups)])
    return hmac.new(ANSWER_TAG_KEY + device_secret, message, hashlib.sha256).hexdigest()


def permanent_response(
    mechanism: Mechanism[Any], device_secret: bytes, campaign_id: str, value_index: int
) -> tuple[str, Any]:
    """``(report_id, report)`` of the permanent randomized response of ``value_index`` in ``campaign_id``.

    Deterministic in (device secret, campaign id, value); the report is drawn by the mechanism's exact
    sampler driven by the HMAC_DRBG, so its law is the mechanism's ε-LDP law (computationally, given a
    secret the observer does not hold).
    """
    nonce = campaign_id.encode("utf-8") + b"\x00" + value_index.to_bytes(4, "big")
    drbg = HmacDrbg(device_secret, nonce, PERSONALIZATION)
    report_id = drbg.generate(16).hex()
    report = mechanism.randomize(value_index, randbelow=drbg.randbelow)
    return report_id, report


def round_report_id(device_secret: bytes, campaign_id: str, value_index: int, round: str) -> str:
    """The report id (32 hex) of the answer ``value_index`` in ``round`` of a recurring campaign.

    Deterministic in (device secret, campaign id, value, round), from an HMAC_DRBG separate from the
    permanent response's: a retry of the same round resends the same id (idempotent at the aggregator),
    each round has its own, and without the secret the id reveals nothing about the value.
    """
    nonce = (
        campaign_id.encode("utf-8") + b"\x00" + value_index.to_bytes(4, "big") + b"\x00" + round.encode("utf-8")
    )
    return str(HmacDrbg(device_secret, nonce, ROUND_PERSONALIZATION).generate(16).hex())


def one_shot_answer(config: CampaignConfig, device_secret: bytes, value_index: Any) -> tuple[str, Any]:
    """``(report_id, report)`` of the one-shot answer ``value_index`` to the campaign ``config`` (a survey:
    ``value_index`` is its normalized answers, see :func:`survey_one_shot`).

    Deterministic in (device secret, campaign id, config fingerprint, value). The DRBG nonce is
    ``len(id) (2 bytes, big endian) ‖ id (UTF-8) ‖ fingerprint (32 bytes) ‖ value (4 bytes, big endian)``;
    the first 16 bytes generated are the report id, the rest drive the mechanism's exact sampler, so the
    report has the mechanism's ε-LDP law (computationally, to anyone without the secret). Central
    campaigns: the report is the value itself (the user opted into the curator), the id is derived alike.
    """
    if config.is_survey:
        return survey_one_shot(config, device_secret, value_index)
    campaign = config.id.encode("utf-8")
    nonce = (
        len(campaign).to_bytes(2, "big") + campaign + bytes.fromhex(config.pinned_fingerprint())
        + value_index.to_bytes(4, "big")
    )  # fmt: skip
    drbg = HmacDrbg(device_secret, nonce, ONE_SHOT_PERSONALIZATION)
    report_id = drbg.generate(16).hex()
    return report_id, randomize_index(config, value_index, drbg.randbelow)


# ---------------------------------------------------------------------------------------------- surveys
#: Personalization strings of a survey's (format 3) DRBGs: the question a sampling survey asks, the
#: one-shot answer and its report id, the answer id of a round, each question's permanent response.
SURVEY_QUESTION_PERSONALIZATION = b"deniable/survey-question/v1"
SURVEY_ONE_SHOT_PERSONALIZATION = b"deniable/survey-one-shot/v1"
SURVEY_ANSWER_ID_PERSONALIZATION = b"deniable/survey-answer-id/v1"
SURVEY_PERMANENT_PERSONALIZATION = b"deniable/survey-permanent/v1"


def survey_nonce(config: CampaignConfig) -> bytes:
    """``I2OSP(len(id), 2) ‖ id ‖ fingerprint (32 bytes)``: the campaign part of every survey DRBG nonce."""
    campaign = config.id.encode("utf-8")
    return len(campaign).to_bytes(2, "big") + campaign + bytes.fromhex(config.pinned_fingerprint())


def answers_digest(normalized: Mapping[str, Any]) -> bytes:
    """SHA-256 of the canonical JSON of the normalized answers (``{"age": 37, "apps": [0, 2], "smoke": 1}``;
    a skipped question is ``null``): what the answer DRBGs are seeded with besides the campaign."""
    return hashlib.sha256(canonical_json(dict(normalized))).digest()


def drawn_question(config: CampaignConfig, device_secret: bytes) -> int | None:
    """The index of the question a sampling survey asks this device (None under ``per_question``).

    ``HMAC_DRBG(secret, survey_nonce, "deniable/survey-question/v1").randbelow(Q)``: a function of the
    device and the campaign only, drawn before any answer is looked at, so which question is answered
    carries no information about any answer (and a device asked again, or reset, answers the same question).
    """
    if config.split.mode != "sampling":
        return None
    drbg = HmacDrbg(device_secret, survey_nonce(config), SURVEY_QUESTION_PERSONALIZATION)
    return drbg.randbelow(len(config.questions))


def survey_one_shot(config: CampaignConfig, device_secret: bytes, normalized: Mapping[str, Any]) -> tuple[str, Any]:
    """``(report_id, reports)`` of the one-shot answer to a survey: deterministic in (secret, campaign,
    fingerprint, answers).

    ``HMAC_DRBG(secret, survey_nonce ‖ answers_digest, "deniable/survey-one-shot/v1")``: the first 16 bytes
    are the report id; then each asked question draws, in descriptor order, with its mechanism's fixed
    pattern (:func:`deniable.client.report.randomize_survey` with the question of :func:`drawn_question`).
    """
    drbg = HmacDrbg(device_secret, survey_nonce(config) + answers_digest(normalized), SURVEY_ONE_SHOT_PERSONALIZATION)
    report_id = drbg.generate(16).hex()
    return report_id, randomize_survey(config, normalized, drbg.randbelow, drawn=drawn_question(config, device_secret))


def survey_answer_id(config: CampaignConfig, device_secret: bytes, normalized: Mapping[str, Any]) -> str:
    """A keyed id (32 hex) of a recurring survey's answers, the same in every round: a round answered again
    with other answers is told apart by it (the round's ``answer_id``)."""
    nonce = survey_nonce(config) + answers_digest(normalized)
    return str(HmacDrbg(device_secret, nonce, SURVEY_ANSWER_ID_PERSONALIZATION).generate(16).hex())


def survey_permanent(
    config: CampaignConfig, device_secret: bytes, question_index: int, answer: Any
) -> tuple[str, Any]:
    """``(permanent_id, report)`` of the permanent randomized response of one question's answer (recurring
    surveys): ``HMAC_DRBG(secret, survey_nonce ‖ I2OSP(len(qid), 1) ‖ qid ‖ SHA-256(canonical_json(answer)),
    "deniable/survey-permanent/v1")``, first 16 bytes the id the ledger pays ε_q for once, then the question's
    randomizer. ``answer`` None (skipped) randomizes the question's dummy, whose report is discarded."""
    question = config.questions[question_index]
    qid = question.id.encode("utf-8")
    nonce = survey_nonce(config) + len(qid).to_bytes(1, "big") + qid + hashlib.sha256(canonical_json(answer)).digest()
    drbg = HmacDrbg(device_secret, nonce, SURVEY_PERMANENT_PERSONALIZATION)
    permanent_id = drbg.generate(16).hex()
    value = question.dummy if answer is None else answer
    return permanent_id, question.randomize(value, randbelow=drbg.randbelow)


def survey_round_report_id(
    config: CampaignConfig, device_secret: bytes, normalized: Mapping[str, Any], round: str
) -> str:
    """The report id of a recurring survey's answers in ``round`` (deterministic, one per round)."""
    nonce = survey_nonce(config) + answers_digest(normalized) + round.encode("utf-8")
    return str(HmacDrbg(device_secret, nonce, ROUND_PERSONALIZATION).generate(16).hex())
