"""The top-answers route over the real server (the selection math is tests/unit/test_selection.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest


def test_the_top_route_over_the_real_server(aggregator) -> None:
    from support.reports import simulate_envelopes, upload

    config = aggregator.create_campaign(
        id="top-central", question="Favourite?", categories=["tea", "coffee", "water"], epsilon=1.0,
        trust_model="central", budget=2.5,
    )  # fmt: skip
    answers = [1] * 60 + [0] * 20 + [2] * 10
    upload(aggregator, "top-central", simulate_envelopes(config, answers, rng=np.random.default_rng(4)))
    first = aggregator.get("/api/v1/campaigns/top-central/top", role="analyst").json()
    assert first["answers"] == ["coffee"]  # P(another) ≤ 2·e^(−40): certain here
    assert first["cost"]["kind"] == "pure" and first["cost"]["epsilon"] == "1"
    assert first["utility"]["gap"] == pytest.approx(math.log(3 / 0.05))
    assert "within" in first["utility"]["statement"] and first["cached"] is False
    again = aggregator.get("/api/v1/campaigns/top-central/top", role="analyst").json()
    assert again["cached"] is True and again["accountant"]["epsilon_sum"] == 1.0
    two = aggregator.get("/api/v1/campaigns/top-central/top?j=2", role="analyst").json()
    assert two["answers"][0] == "coffee" and len(two["answers"]) == 2 and two["accountant"]["epsilon_sum"] == 2.0
    refused = aggregator.get("/api/v1/campaigns/top-central/top?j=3", role="analyst")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "budget_exceeded"
    assert aggregator.get("/api/v1/campaigns/top-central/top?j=0", role="analyst").status_code == 400
    releases = aggregator.get("/api/v1/campaigns/top-central/releases", role="analyst").json()["releases"]
    assert [r["parameters"]["top"] for r in releases] == [1, 2]
