"""One device answer, from category index to sealed envelope: randomize (local) and encrypt.

Shared by :class:`~deniable.client.Client` and :func:`~deniable.client.simulate_fleet` so that a simulated
device does exactly what a real one does. Local campaigns: the payload holds only the randomized report,
drawn by the campaign mechanism's exact sampler (OS CSPRNG unless a ``randbelow`` is passed, e.g. the
permanent-response DRBG). Central campaigns: the payload holds the category index itself (the user opted into
trusting the curator); it is still HPKE-encrypted to the campaign key, so only the curator can read it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope
from deniable.shared.errors import InvalidConfig
from deniable.shared.sampling import RandBelow
from deniable.shared.shuffle import ShuffledEnvelope, seal_shuffled
from deniable.shared.survey import check_answers, draw_question, randomize_answers
from deniable.shared.tokens import Token

__all__ = ["central_refusal", "normalize_answers", "privacy_cost", "randomize_index", "randomize_survey", "seal_answer"]


def privacy_cost(config: CampaignConfig) -> Fraction:
    """The ε one answer spends on the device ledger, exactly.

    Local: the campaign's ε (ε-LDP of the randomized report). Central: the campaign's total ``budget``, the
    most ε the curator promises to spend over all releases computed from the raw answers (sequential
    composition); the device has no local guarantee in that case, only the curator's promise.
    """
    if config.trust_model == "central":
        assert config.budget is not None  # validated by CampaignConfig
        return Fraction(config.budget)
    return Fraction(config.epsilon)


def central_refusal(config: CampaignConfig) -> InvalidConfig:
    """The error raised for a central campaign when the device did not opt in."""
    return InvalidConfig(
        f"campaign {config.id!r} uses the central trust model: the raw answer would be sent (encrypted) to "
        f"the curator, who promises ε={config.epsilon:g} per release and ε={config.budget:g} in total. Pass "
        "allow_central=True (CLI: --allow-central) only if the user agreed to trust that curator"
    )


def randomize_index(config: CampaignConfig, index: int, randbelow: RandBelow = secrets.randbelow) -> Any:
    """The device report of category ``index``: randomized for local campaigns, the index for central."""
    if config.trust_model == "central":
        return index
    return config.build_mechanism().randomize(index, randbelow=randbelow)


def normalize_answers(config: CampaignConfig, value: Any) -> dict[str, Any]:
    """A survey's answers checked and normalized per question (:func:`deniable.shared.survey.check_answers`).

    A one-question survey also takes its answer bare (``"yes"``, ``37``, ``["mail"]``) instead of a dict.
    Raises :class:`~deniable.shared.errors.InvalidAnswer` naming the question.
    """
    if len(config.questions) == 1 and not isinstance(value, Mapping):
        value = {config.questions[0].id: value}
    return check_answers(config.questions, value)


def randomize_survey(
    config: CampaignConfig,
    normalized: Mapping[str, Any],
    randbelow: RandBelow = secrets.randbelow,
    *,
    drawn: int | None = None,
) -> dict[str, Any]:
    """The reports (local) or values (central) of a survey's normalized answers, ready for ``make_payload``.

    A sampling survey asks the question ``drawn`` (one ``randbelow(Q)`` from ``randbelow`` first when None,
    before anything depends on an answer); a per-question survey asks all. Fixed pattern of draws.
    """
    if config.split.mode == "sampling" and drawn is None:
        drawn = draw_question(len(config.questions), randbelow)
    return randomize_answers(config.questions, config.split.mode, normalized, drawn=drawn, randbelow=randbelow)


def seal_answer(
    config: CampaignConfig,
    device_secret: bytes,
    report: Any,
    groups: Mapping[str, str] | None,
    *,
    public_key: bytes | None = None,
    report_id: str | None = None,
    round: str | None = None,
    token: Token | None = None,
) -> Envelope | ShuffledEnvelope:
    """Seal the payload to the campaign key in the descriptor's format version: bound to campaign id,
    version, report id and the device's pseudonym, padded to the campaign's fixed length and signed with
    the device's campaign key (version 2) (``round``: the round label, for recurring campaigns only;
    ``token``: the admission token the report spends, for campaigns that require one: inside the
    ciphertext, so bound to this envelope).

    A shuffled campaign's report is sealed twice (:func:`deniable.shared.shuffle.seal_shuffled`): the padded
    ``{"report": ...}`` to the campaign key with nothing that names the device, then that with the device's
    dedup token (and the admission token) to the shuffler's key, under ``report_id``."""
    if config.trust_model == "shuffled":
        assert config.shuffler is not None and config.padded_length is not None
        return seal_shuffled(
            config.make_payload(report, groups, round),
            campaign_id=config.id,
            aggregator_key=config.public_key_bytes if public_key is None else public_key,
            padded_length=config.padded_length,
            shuffler_key=config.shuffler.public_key_bytes,
            device_secret=device_secret,
            report_id=report_id,
            token=None if token is None else token.text,
        )
    return config.seal(
        config.make_payload(report, groups, round, token),
        device_secret=device_secret,
        report_id=report_id,
        public_key=public_key,
    )
