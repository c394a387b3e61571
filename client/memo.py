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
from .report import randomize_index

__all__ = [
    "ANSWER_TAG_KEY",
    "ONE_SHOT_PERSONALIZATION",
    "PERSONALIZATION",
    "ROUND_PERSONALIZATION",
    "answer_tag",
    "one_shot_answer",
    "permanent_response",
    "round_report_id",
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


def answer_tag(device_secret: bytes, campaign_id: str, value_index: int, groups: Mapping[str, str]) -> str:
    """A keyed fingerprint of one answer (value and groups) to a campaign, so that a second ``submit``
    can tell a repeat from a changed answer without the raw value ever reaching the disk.

    ``HMAC-SHA256(ANSWER_TAG_KEY ‖ secret, canonical JSON of [campaign id, index, groups])``, hex. Without
    the device secret it reveals nothing about the value; whoever holds both the secret and the state
    database can recompute it per category (the same limit as the report ids of recurring campaigns).
    """
    message = canonical_json([campaign_id, value_index, dict(groups)])
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


def one_shot_answer(config: CampaignConfig, device_secret: bytes, value_index: int) -> tuple[str, Any]:
    """``(report_id, report)`` of the one-shot answer ``value_index`` to the campaign ``config``.

    Deterministic in (device secret, campaign id, config fingerprint, value). The DRBG nonce is
    ``len(id) (2 bytes, big endian) ‖ id (UTF-8) ‖ fingerprint (32 bytes) ‖ value (4 bytes, big endian)``;
    the first 16 bytes generated are the report id, the rest drive the mechanism's exact sampler, so the
    report has the mechanism's ε-LDP law (computationally, to anyone without the secret). Central
    campaigns: the report is the value itself (the user opted into the curator), the id is derived alike.
    """
    campaign = config.id.encode("utf-8")
    nonce = (
        len(campaign).to_bytes(2, "big") + campaign + bytes.fromhex(config.pinned_fingerprint())
        + value_index.to_bytes(4, "big")
    )  # fmt: skip
    drbg = HmacDrbg(device_secret, nonce, ONE_SHOT_PERSONALIZATION)
    report_id = drbg.generate(16).hex()
    return report_id, randomize_index(config, value_index, drbg.randbelow)
