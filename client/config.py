"""Fetch a campaign's public config, validate it, and pin it at first use (trust on first use).

The device refuses to randomize under anything it has not validated (``CampaignConfig.from_json``: known
mechanism, ε in range, categories, key, params consistent with them). At first use it stores the config and
its fingerprint (SHA-256 of the canonical JSON of every field but ``status``); afterwards a config with
another fingerprint under the same id is refused with :class:`InvalidConfig`, so a compromised or
misconfigured server cannot quietly raise ε, swap the mechanism, reorder the categories or substitute its
own key. Closing a campaign (``status``) is its normal life and is not a change.
"""

from __future__ import annotations

import json
import urllib.parse

from deniable.shared.campaign import CampaignConfig
from deniable.shared.errors import (
    CampaignClosed,
    InvalidConfig,
    TransportError,
    UnknownCampaign,
)

from .state import DeviceState
from .transport import Transport, error_message

__all__ = ["CONFIG_PATH", "check_pin", "fetch_config", "load_pinned", "resolve_config"]

CONFIG_PATH = "/api/v1/campaigns/{}"
_WATCHED = ("epsilon", "mechanism", "categories", "public_key", "params", "trust_model", "budget", "question")


def fetch_config(transport: Transport, campaign_id: str) -> CampaignConfig:
    """GET and validate the public config of ``campaign_id``.

    Raises :class:`UnknownCampaign` (404), :class:`TransportError` (unreachable, 5xx, 429),
    :class:`InvalidConfig` (any other answer, an invalid config, or a config for another campaign).
    """
    path = CONFIG_PATH.format(urllib.parse.quote(campaign_id, safe=""))
    response = transport.request("GET", path)
    if response.status == 404:
        raise UnknownCampaign(
            f"the aggregator has no campaign {campaign_id!r} ({error_message(response)}); check the id"
        )
    if response.status >= 500 or response.status == 429:
        raise TransportError(
            f"the aggregator answered {response.status} for the config of {campaign_id!r} "
            f"({error_message(response)}); try again later"
        )
    if response.status != 200:
        raise InvalidConfig(
            f"the aggregator answered {response.status} for the config of {campaign_id!r}: "
            f"{error_message(response)}"
        )
    config = CampaignConfig.from_json(response.body)
    if config.id != campaign_id:
        raise InvalidConfig(
            f"asked for the config of campaign {campaign_id!r} but the aggregator answered one for "
            f"{config.id!r}; refusing it (a misrouted or tampered answer)"
        )
    return config


def load_pinned(state: DeviceState, campaign_id: str) -> CampaignConfig | None:
    """The config pinned for ``campaign_id``, or None if the device never used it."""
    pinned = state.pinned(campaign_id)
    return None if pinned is None else CampaignConfig.from_json(json.loads(pinned[1]))


def check_pin(state: DeviceState, config: CampaignConfig) -> None:
    """Pin ``config`` at first use; afterwards refuse any config whose fingerprint differs."""
    fingerprint = config.pinned_fingerprint()
    pinned = state.pinned(config.id)
    if pinned is None:
        state.pin(config.id, fingerprint, json.dumps(config.to_json(), sort_keys=True))
        return
    if pinned[0] == fingerprint:
        return
    old = json.loads(pinned[1])
    new = config.to_json()
    changes = [
        f"{key} {_short(old.get(key))} -> {_short(new.get(key))}"
        for key in _WATCHED
        if old.get(key) != new.get(key)
    ]
    raise InvalidConfig(
        f"campaign {config.id!r} changed since this device pinned it at first use "
        f"({'; '.join(changes) or 'fields outside the usual ones'}); refusing it, since a changed campaign "
        "under the same id could weaken the privacy the user agreed to. The operator must publish the "
        "change as a new campaign id"
    )


def resolve_config(state: DeviceState, transport: Transport, campaign_id: str) -> CampaignConfig:
    """The config to answer under: fetched, validated and checked against the pin (pinned at first use).

    When the aggregator cannot be reached but the campaign is pinned, the pinned copy is used, so a device
    offline can still randomize and queue its answer (the outbox delivers later). A closed campaign raises
    :class:`CampaignClosed`.
    """
    try:
        config = fetch_config(transport, campaign_id)
    except TransportError:
        pinned = load_pinned(state, campaign_id)
        if pinned is None:
            raise
        config = pinned
    check_pin(state, config)
    if config.status == "closed":
        raise CampaignClosed(f"campaign {campaign_id!r} is closed; it accepts no more reports")
    return config


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
