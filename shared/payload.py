"""The payload codec: the plaintext a device seals in an envelope, built and checked against a descriptor.

Local campaigns: ``{"report": <wire report>, "groups": {...}}`` (the report encoded by the campaign's
mechanism); central: ``{"value": <category index>, "groups": {...}}``. A recurring campaign's payload also
carries ``"round"`` (required there, forbidden elsewhere), a campaign with ``admission`` a ``"token"``.
A shuffled campaign's (inner) payload is ``{"report": <wire report>}`` alone (``docs/wire-format.md`` §12).
A survey (format 3) carries ``"answers"`` (local) or ``"values"`` (central) instead of the report or value:
one entry per asked question (:mod:`deniable.shared.survey`).
Every payload of a version-2 campaign is padded to :func:`padded_length`, the canonical JSON length of the
widest payload the descriptor allows, so that an envelope's size says nothing about its content.
JSON layout: ``docs/wire-format.md``. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deniable.shared.base64url import b64url_encode
from deniable.shared.canonical_json import canonical_json
from deniable.shared.envelope import Envelope, seal
from deniable.shared.errors import DeniableError, InvalidParameter, InvalidReport
from deniable.shared.fields import check_round, check_unicode
from deniable.shared.limits import MAX_GROUP_VALUE_CHARS, MAX_ROUND_CHARS
from deniable.shared.messages import show
from deniable.shared.questions import LEGACY_QUESTION_ID
from deniable.shared.survey import decode_answers, widest_answers
from deniable.shared.tokens import TOKEN_BYTES, Token

if TYPE_CHECKING:
    from deniable.shared.descriptor import CampaignConfig

__all__ = ["Payload", "check_groups", "decode_payload", "make_payload", "padded_length", "seal_payload"]



@dataclass(frozen=True)
class Payload:
    """A validated payload: the decoded report (local) or category index (central), the groups, the
    round label (recurring campaigns only, else None) and the admission token (campaigns with admission
    only; parsed, not yet verified).

    ``answers`` maps each answered question id to its decoded report (local) or value (central), None for
    a skipped optional question; a question a sampling survey did not ask is absent. A format 1 or 2
    payload answers its one question ``"answer"`` (``LEGACY_QUESTION_ID``); ``value`` is then that report
    or index (for a survey it is ``answers`` again).
    """

    value: Any
    groups: dict[str, str]
    round: str | None
    token: Token | None = None
    answers: Mapping[str, Any] = field(default_factory=dict)


def answers_key(config: CampaignConfig) -> str:
    """The payload key of a survey's reports: ``answers`` (local) or ``values`` (central)."""
    return "values" if config.trust_model == "central" else "answers"


def padded_length(config: CampaignConfig) -> int | None:
    """The byte length every version-2 plaintext of this campaign is padded to (None in version 1).

    The canonical JSON of the widest payload the descriptor allows: the widest report of the mechanism
    (local) or the largest index (central), for each group field its longest declared value or, when
    none is declared, a value of the maximum length in the characters whose JSON escape is longest
    (``\\u0001``: 6 bytes), the longest round label (recurring) and the admission token (which has one
    length). Canonical JSON of an object is the
    sum of its parts, so no payload of this campaign is longer, and every envelope of the campaign
    has ``48 + padded_length`` bytes of ciphertext (``docs/wire-format.md`` §7.1).
    """
    if config.format_version < 2:
        return None
    groups = {}
    for name in config.group_fields:
        declared = config.group_values.get(name)
        if declared:
            groups[name] = max(declared, key=lambda v: len(canonical_json(v)))
        else:
            groups[name] = "\x01" * MAX_GROUP_VALUE_CHARS
    widest: dict[str, Any]
    if config.trust_model == "shuffled":  # the inner payload: the report alone (the token travels outside)
        mechanism = config.build_mechanism()
        return len(canonical_json({"report": mechanism.encode_report(mechanism.widest_report())}))
    if config.is_survey:
        widest = {answers_key(config): widest_answers(config.questions, config.split.mode), "groups": groups}
        if config.recurring:
            widest["round"] = "a" * MAX_ROUND_CHARS
    elif config.trust_model == "central":
        widest = {"value": config.k - 1, "groups": groups}
    else:
        mechanism = config.build_mechanism()
        widest = {"report": mechanism.encode_report(mechanism.widest_report()), "groups": groups}
        if config.recurring:
            widest["round"] = "a" * MAX_ROUND_CHARS
    if config.admission is not None:  # every token has the same length
        widest["token"] = "A" * len(b64url_encode(bytes(TOKEN_BYTES)))
    return len(canonical_json(widest))


def seal_payload(
    config: CampaignConfig,
    payload: Mapping[str, Any],
    *,
    device_secret: bytes,
    report_id: str | None = None,
    public_key: bytes | None = None,
) -> Envelope:
    """Seal ``payload`` (from :func:`make_payload`) for ``config``'s campaign in its format version.

    Padded to :func:`padded_length` and signed with the device's campaign key (version 2), under the
    descriptor's public key unless ``public_key`` is given. Raises ``InvalidParameter``.
    """
    return seal(
        payload,
        campaign_id=config.id,
        public_key=config.public_key_bytes if public_key is None else public_key,
        device_secret=device_secret,
        padded_length=config.padded_length,
        report_id=report_id,
        version=config.envelope_version,
    )


def check_groups(config: CampaignConfig, groups: Mapping[str, str] | None) -> dict[str, str]:
    """``groups`` (None: no groups) checked against the campaign's group fields and declared values;
    raises ``InvalidParameter``."""
    return _check_groups(config, {} if groups is None else groups, InvalidParameter)


def make_payload(
    config: CampaignConfig,
    report_or_value: Any,
    groups: Mapping[str, str] | None = None,
    round: str | None = None,
    token: Token | None = None,
) -> dict[str, Any]:
    """The plaintext of one envelope.

    Local: ``report_or_value`` is the device report from ``build_mechanism().randomize(index)`` and the
    payload is ``{"report": encode_report(report), "groups": groups}``, plus ``"round": round`` for a
    recurring campaign (required there, forbidden elsewhere). Central: it is the category index and the
    payload is ``{"value": index, "groups": groups}``. A campaign with ``admission`` needs ``token`` (one
    admission token, spent by this report): ``"token": token.text``. Raises ``InvalidParameter``.
    """
    checked = _check_groups(config, {} if groups is None else groups, InvalidParameter)
    _check_round_presence(config, round is not None, InvalidParameter)
    if config.trust_model == "shuffled":  # the inner payload; an admission token goes in the outer layer
        return {"report": config.build_mechanism().encode_report(report_or_value)}
    if (token is None) != (config.admission is None):
        raise InvalidParameter(
            f"campaign '{config.id}' requires an admission token with every report: obtain tokens first"
            if token is None
            else f"campaign '{config.id}' takes no admission token"
        )
    payload: dict[str, Any]
    if config.is_survey:
        payload = {answers_key(config): _encode_answers(config, report_or_value), "groups": checked}
    elif config.trust_model == "central":
        _check_index(config, report_or_value, InvalidParameter)
        payload = {"value": report_or_value, "groups": checked}
    else:
        payload = {"report": config.build_mechanism().encode_report(report_or_value), "groups": checked}
    if round is not None:
        payload["round"] = check_round(round, InvalidParameter)
    if token is not None:
        payload["token"] = token.text
    return payload


def decode_payload(config: CampaignConfig, payload: object) -> Payload:
    """Validate a decrypted payload against this campaign: its report or value, groups and round.

    Local: the report is decoded with the mechanism (outside its report space → ``InvalidReport``).
    Central: the value must be an integer index in ``[0, k)``. Groups must be exactly the campaign's
    group fields with string values of 1..64 characters, among the field's declared ``group_values``
    when it has them. ``round`` is required for a recurring campaign and forbidden otherwise. Raises
    ``InvalidReport`` and nothing else.
    """
    legacy_key = "value" if config.trust_model == "central" else "report"
    key = answers_key(config) if config.is_survey else legacy_key
    keys = {key, "groups", "round"} if config.recurring else {key, "groups"}
    expected = f"{key!r}, 'groups' and 'round'" if config.recurring else f"{key!r} and 'groups'"
    if config.trust_model == "shuffled":
        keys, expected = {"report"}, "'report' (the inner payload)"
    elif config.admission is not None:
        keys.add("token")
        expected = expected.replace(" and ", ", ") + " and 'token'"
    if isinstance(payload, dict) and set(payload) - {"round"} == keys - {"round"}:
        _check_round_presence(config, "round" in payload, InvalidReport)
    if not isinstance(payload, dict) or set(payload) != keys:
        shown = sorted(map(str, payload)) if isinstance(payload, dict) else show(payload)
        raise InvalidReport(
            f"the payload of a {config.trust_model} campaign must be an object with exactly the keys "
            f"{expected}, got {shown}"
        )
    groups = _check_groups(config, payload.get("groups", {}), InvalidReport)
    round_ = check_round(payload["round"], InvalidReport) if config.recurring else None
    token = Token.parse(payload["token"]) if "token" in keys else None
    if config.is_survey:
        answers = decode_answers(config.questions, config.split.mode, payload[key], key)
        return Payload(answers, groups, round_, token, answers)
    if config.trust_model == "central":
        value = _check_index(config, payload["value"], InvalidReport)
        return Payload(value, groups, None, token, {LEGACY_QUESTION_ID: value})
    wire = payload["report"]
    mechanism = config.build_mechanism()
    if isinstance(wire, bool) or not isinstance(wire, mechanism.wire_type):
        raise InvalidReport(
            f"a {config.mechanism} report must be a JSON {mechanism.wire_description}, got {show(wire)}"
        )
    try:
        report = mechanism.decode_report(wire)
    except InvalidReport:
        raise
    except (DeniableError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise InvalidReport(f"the report is not a valid {config.mechanism} report: {exc}") from exc
    return Payload(report, groups, round_, token, {LEGACY_QUESTION_ID: report})


def _encode_answers(config: CampaignConfig, reports: object) -> dict[str, Any]:
    """The ``answers``/``values`` object of a survey payload from the reports of
    :func:`~deniable.shared.survey.randomize_answers`, checked as a receiver checks it."""
    if not isinstance(reports, Mapping):
        raise InvalidParameter(f"a survey's payload takes a mapping of question ids to reports, got {show(reports)}")
    encoded = {}
    for qid, report in reports.items():
        question = config.question_by_id(qid)
        encoded[qid] = None if report is None else question.encode_report(report)
    try:
        decode_answers(config.questions, config.split.mode, encoded, answers_key(config))
    except InvalidReport as exc:
        raise InvalidParameter(str(exc)) from None
    return encoded


def _check_round_presence(config: CampaignConfig, present: bool, error: type[ValueError]) -> None:
    if config.recurring and not present:
        raise error(
            f"campaign '{config.id}' is recurring: 'round' is required, a label such as '2026-11-29' "
            "naming the collection round the answer belongs to"
        )
    if present and not config.recurring:
        raise error(f"campaign '{config.id}' is not recurring: 'round' is not allowed in its payload")


def _check_index(config: CampaignConfig, value: object, error: type[ValueError]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < config.k:
        raise error(f"'value' must be a category index in [0, {config.k}), got {show(value)}")
    return value


def _check_groups(config: CampaignConfig, groups: object, error: type[ValueError]) -> dict[str, str]:
    if not isinstance(groups, Mapping):
        raise error(f"'groups' must be an object mapping group fields to strings, got {show(groups)}")
    expected = set(config.group_fields)
    if set(groups) != expected:
        missing = sorted(expected - set(groups))
        extra = sorted(show(k) for k in set(groups) - expected)
        raise error(
            f"'groups' must have exactly the group fields of campaign '{config.id}' "
            f"({', '.join(map(repr, config.group_fields)) or 'none'}): "
            + "; ".join(
                ([f"missing {', '.join(map(repr, missing))}"] if missing else [])
                + ([f"unexpected {', '.join(extra[:5])}"] if extra else [])
            )
        )
    for name, value in groups.items():
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_GROUP_VALUE_CHARS:
            raise error(
                f"group '{name}' must be a string of 1..{MAX_GROUP_VALUE_CHARS} characters, "
                f"got {show(value)}"
            )
        check_unicode(f"group '{name}'", value, error)
        declared = config.declared_group_values.get(name)
        if declared is not None and value not in declared:
            raise error(
                f"group '{name}' has the value {show(value)}, which campaign '{config.id}' does not "
                f"declare; its group_values for '{name}' are "
                + ", ".join(repr(v) for v in config.group_values[name][:10])
                + (f", ... ({len(declared)} values)" if len(declared) > 10 else "")
            )
    return dict(groups)
