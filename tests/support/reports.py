"""Simulated devices: true values → randomized reports (seeded) → sealed envelopes, as on a real device.

The randomization uses the mechanism's vectorized ``simulate(values, rng=...)`` (same distribution as the
secure ``randomize``, tested in the mechanism suite), so statistical tests are reproducible; sealing uses the
shared wire-format code (``deniable.shared.envelope.seal``) with the campaign's public key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.mechanisms import Mechanism
from deniable.shared.tokens import Token

__all__ = ["device_reports", "seal_reports", "simulate_envelopes", "upload"]


def device_reports(mechanism: Mechanism[Any], simulated: Any) -> list[Any]:
    """Split ``mechanism.simulate`` output into per-device reports that ``encode_report`` accepts."""
    return mechanism.split_simulated(simulated)


def simulate_envelopes(
    config: Mapping[str, Any] | CampaignConfig,
    values: Sequence[int],
    *,
    rng: np.random.Generator,
    groups: Sequence[Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """One sealed envelope (wire JSON) per true value, each from a distinct simulated device.

    Local campaigns randomize with the campaign's mechanism (``simulate`` with ``rng``); central campaigns
    send the value itself. Device secrets and report ids also come from ``rng``.
    """
    cfg = _config(config)
    values = [int(v) for v in values]
    if cfg.trust_model == "central":
        return seal_reports(cfg, values, rng=rng, groups=groups)
    mechanism = cfg.build_mechanism()
    reports = device_reports(mechanism, mechanism.simulate(np.asarray(values), rng=rng))
    return seal_reports(cfg, reports, rng=rng, groups=groups)


def seal_reports(
    config: Mapping[str, Any] | CampaignConfig,
    reports: Sequence[Any],
    *,
    rng: np.random.Generator,
    groups: Sequence[Mapping[str, str]] | None = None,
    tokens: Sequence[Token] | None = None,
) -> list[dict[str, Any]]:
    """Seal already randomized device reports (central: values), one fresh device each (``tokens``: the
    admission token each report spends, for campaigns that require one)."""
    cfg = _config(config)
    public_key = cfg.public_key_bytes
    envelopes = []
    for i, report in enumerate(reports):
        group = dict(groups[i]) if groups is not None else {field: "all" for field in cfg.group_fields}
        payload = cfg.make_payload(report, group, token=None if tokens is None else tokens[i])
        secret = rng.bytes(32)
        report_id = rng.bytes(16).hex()
        envelope = cfg.seal(payload, device_secret=secret, report_id=report_id, public_key=public_key)
        envelopes.append(envelope.to_json())
    return envelopes


def _config(config: Mapping[str, Any] | CampaignConfig) -> CampaignConfig:
    return config if isinstance(config, CampaignConfig) else CampaignConfig.from_json(dict(config))


def upload(
    server: Any, campaign_id: str, envelopes: Sequence[Any], *, batch_size: int = 1000
) -> dict[str, int]:
    """Post ``envelopes`` in batches; return the summed ``accepted``/``duplicate``/``rejected`` counts."""
    totals = {"accepted": 0, "duplicate": 0, "rejected": 0}
    for start in range(0, len(envelopes), batch_size):
        batch = list(envelopes[start : start + batch_size])
        response = server.post(f"/api/v1/campaigns/{campaign_id}/reports", json={"reports": batch})
        assert response.status_code == 200, response.text
        body = response.json()
        for key in totals:
            totals[key] += body[key]
    return totals
