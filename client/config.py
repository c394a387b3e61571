"""Fetch a campaign's public config, validate it, and pin it at first use (trust on first use).

The device refuses to randomize under anything it has not validated (``CampaignConfig.from_json``: known
mechanism, ε in range, categories, key, params consistent with them). At first use it stores the config's
fingerprint (SHA-256 of the canonical JSON of every field but ``status``); afterwards a config with another
fingerprint under the same id is refused with :class:`InvalidConfig`, so a compromised or misconfigured
server cannot quietly raise ε, swap the mechanism, reorder the categories or substitute its own key.
Closing a campaign (``status``) is its normal life and is not a change.

What is pinned on disk: the fingerprint and a summary of the privacy-relevant fields (ε, mechanism, params,
key, trust model, budget, and a SHA-256 of the category list) used to say *what* changed. The category
labels themselves are not written: the state dir then holds no answer-like string at all, and a scan of it
for the labels finds nothing. The validated config is kept in memory by the :class:`~deniable.client.Client`
so a device that goes offline after fetching can still answer (the outbox delivers later).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from deniable.shared.canonical_json import canonical_json
from deniable.shared.contract import campaign_path
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import (
    CampaignClosed,
    InvalidConfig,
    TransportError,
    UnknownCampaign,
)
from deniable.shared.messages import show

from .state import DeviceState
from .transport import Transport, error_message

__all__ = ["ValidatedConfigs", "fetch_config", "resolve_config"]

#: What a validated descriptor was parsed from: the bytes received, or the JSON text of the parsed body.
Source = bytes | str

_SUMMARY_FIELDS = ("epsilon", "mechanism", "params", "public_key", "trust_model", "budget", "adjacency")


class ValidatedConfigs:
    """The configs this process validated and found pinned, per campaign id, each with what it was parsed
    from (the bytes received, or the body's JSON text).

    A descriptor is immutable, and the device fetches it before every answer: when the aggregator answers
    with the same bytes again (the transport's :attr:`Response.raw`; where a transport has no bytes, the
    same JSON text of the body, every key and type alike), the config validated from it is reused instead
    of parsed and validated again. Anything else (another status, a changed field, even the same values
    re-ordered) is validated from scratch; the pin check runs on every answer either way, so a changed
    descriptor under the same id is refused as before. Only a config that passed the pin check is kept (it
    decides where the outbox delivers, and what an offline device answers under).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Source | None, CampaignConfig]] = {}

    def get(self, campaign_id: str) -> CampaignConfig | None:
        """The config last validated and pinned for ``campaign_id`` (answering offline), or None."""
        entry = self._entries.get(campaign_id)
        return None if entry is None else entry[1]

    def pop(self, campaign_id: str) -> None:
        """Forget ``campaign_id`` (the next answer fetches and validates it from scratch)."""
        self._entries.pop(campaign_id, None)

    def parse(self, campaign_id: str, body: object, raw: bytes | None = None) -> tuple[CampaignConfig, Source | None]:
        """``CampaignConfig.from_json(body)`` and what it was parsed from: ``raw`` (the bytes received), else
        the JSON text of ``body`` (None if it has none); the config kept for ``campaign_id`` is reused when
        that is the same."""
        text: Source | None = raw
        if text is None:
            try:
                text = json.dumps(body)
            except (TypeError, ValueError, RecursionError):  # not a JSON value: from_json says what is wrong
                text = None
        entry = self._entries.get(campaign_id)
        if entry is not None and text is not None and entry[0] == text:
            return entry[1], text
        return CampaignConfig.from_json(body), text

    def keep(self, config: CampaignConfig, text: Source | None) -> None:
        """Keep ``config`` (pinned) with what it was parsed from (None: never reused)."""
        self._entries[config.id] = (text, config)


def fetch_config(transport: Transport, campaign_id: str) -> CampaignConfig:
    """GET and validate the public config of ``campaign_id``.

    Raises :class:`UnknownCampaign` (404), :class:`TransportError` (unreachable, 5xx, 429),
    :class:`InvalidConfig` (any other answer, an invalid config, or a config for another campaign).
    """
    return _fetch(transport, campaign_id, None)[0]


def _fetch(
    transport: Transport, campaign_id: str, validated: ValidatedConfigs | None
) -> tuple[CampaignConfig, Source | None]:
    """:func:`fetch_config`, reusing a config of ``validated`` parsed from the same text; also the text."""
    path = campaign_path(campaign_id)
    try:
        response = transport.request("GET", path)
    except TransportError as exc:
        raise TransportError(f"{exc}; nothing was spent or queued, try again later") from exc
    if response.status == 200 and response.content_error is not None:
        raise TransportError(
            f"the aggregator answered 200 for the config of {campaign_id!r} with {response.content_error}; "
            "nothing was spent or queued (is the URL the aggregator's?)"
        )
    if response.status == 404:
        raise UnknownCampaign(
            f"the aggregator has no campaign {campaign_id!r} ({error_message(response)}); check the id"
        )
    if response.status >= 500 or response.status == 429:
        raise TransportError(
            f"the aggregator answered {response.status} for the config of {campaign_id!r} "
            f"({error_message(response)}); nothing was spent or queued, try again later"
        )
    if response.status != 200:
        raise InvalidConfig(
            f"the aggregator answered {response.status} for the config of {campaign_id!r}: "
            f"{error_message(response)}"
        )
    if validated is None:
        config, text = CampaignConfig.from_json(response.body), None
    else:
        config, text = validated.parse(campaign_id, response.body, response.raw)
    if config.id != campaign_id:
        raise InvalidConfig(
            f"asked for the config of campaign {campaign_id!r} but the aggregator answered one for "
            f"{config.id!r}; refusing it (a misrouted or tampered answer)"
        )
    return config, text


def pin_summary(config: CampaignConfig) -> dict[str, Any]:
    """The privacy-relevant fields stored with a pin; categories only as a SHA-256 of their list."""
    full = config.to_json()
    if config.is_survey:  # a survey: ε, key and trust model as they are, each question's fields as a hash
        summary = {key: full[key] for key in _SUMMARY_FIELDS if key in full}
        summary["split"] = full["split"]["mode"]
        for question in config.questions:
            # a local change detector, never sent: the SHA-256 of the question's canonical JSON (as the JS client)
            digest = hashlib.sha256(question.canonical.text.encode("utf-8")).hexdigest()
            summary[f"question {question.id}_sha256"] = digest
        summary["title_sha256"] = hashlib.sha256(canonical_json(full["title"])).hexdigest()
        summary["group_fields"] = full["group_fields"]
        return summary
    summary = {key: full[key] for key in _SUMMARY_FIELDS}
    summary["categories_sha256"] = hashlib.sha256(canonical_json(full["categories"])).hexdigest()
    summary["question_sha256"] = hashlib.sha256(canonical_json(full["question"])).hexdigest()
    summary["group_fields"] = full["group_fields"]
    if config.shuffler is not None:  # where the outbox delivers, also after a restart while offline
        summary["shuffler_url"] = config.shuffler.url
    return summary


def check_pin(state: DeviceState, config: CampaignConfig) -> None:
    """Pin ``config`` at first use; afterwards refuse any config whose fingerprint differs."""
    fingerprint = config.pinned_fingerprint()
    pinned = state.pinned(config.id)
    if pinned is None:
        state.pin(config.id, fingerprint, json.dumps(pin_summary(config), sort_keys=True))
        return
    if pinned[0] == fingerprint:
        return
    old = json.loads(pinned[1])
    new = pin_summary(config)
    changes = [
        f"{key.removesuffix('_sha256')} {show(old.get(key), containers=True)} -> {show(new.get(key), containers=True)}"
        if not key.endswith("_sha256")
        else f"{key.removesuffix('_sha256')} changed"
        for key in new
        if old.get(key) != new.get(key)
    ]
    raise InvalidConfig(
        f"campaign {config.id!r} changed since this device pinned it at first use "
        f"({'; '.join(changes) or 'other fields changed'}); refusing it, since a changed campaign under "
        "the same id could weaken the privacy the user agreed to. The operator must publish the change "
        "under a new campaign id. If you recreated the aggregator yourself (development), forget the "
        f"campaign on this device: `deniable forget {config.id}` or client.forget({config.id!r}); "
        "answering it again then spends its ε again"
    )


def resolve_config(
    state: DeviceState, transport: Transport, campaign_id: str, cache: ValidatedConfigs
) -> CampaignConfig:
    """The config to answer under: fetched, validated and checked against the pin (pinned at first use).

    When the aggregator cannot be reached, a config this process already validated (``cache``) is used,
    so a device that goes offline can still answer. A closed campaign raises :class:`CampaignClosed`.
    """
    try:
        config, text = _fetch(transport, campaign_id, cache)
    except TransportError:
        cached = cache.get(campaign_id)
        if cached is None:
            raise
        config = cached  # offline: the copy validated and kept before
        check_pin(state, config)
    else:
        check_pin(state, config)
        cache.keep(config, text)
    if config.status == "closed":
        raise CampaignClosed(f"campaign {campaign_id!r} is closed; it accepts no more reports")
    return config
