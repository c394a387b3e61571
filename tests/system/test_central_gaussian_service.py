"""Gaussian and accountant-backed central campaigns over the real server (the unit side:
tests/unit/test_central_gaussian.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest


def test_a_gaussian_campaign_over_the_real_server(aggregator) -> None:
    from support.reports import simulate_envelopes, upload

    config = aggregator.create_campaign(
        id="gauss-central", question="Smoker?", categories=["no", "yes"], epsilon=1.0, trust_model="central",
        budget=3.0, budget_delta=1e-5, delta=1e-6, group_size=2,
    )  # fmt: skip
    assert (config["delta"], config["budget_delta"], config["group_size"]) == (1e-6, 1e-5, 2)
    upload(aggregator, "gauss-central", simulate_envelopes(config, [0, 1] * 50, rng=np.random.default_rng(3)))
    body = aggregator.estimate("gauss-central", noise="gaussian")
    assert body["noise"] == "gaussian" and body["cost"]["kind"] == "zcdp"
    assert body["cost"]["epsilon"] == "2"  # group privacy: g·ε with g = 2
    assert body["accountant"]["budget"] == {"form": "approx", "epsilon": 3.0, "delta": 1e-5}
    refused = aggregator.get(
        "/api/v1/campaigns/gauss-central/estimate", role="analyst", params={"noise": "laplace", "sample": "0.2"}
    )
    assert refused.status_code == 200, refused.text  # ε′ = 2·ln(1 + 0.2(e − 1)) ≈ 0.59 more: 2.59 ≤ 3 fits
    again = aggregator.get(
        "/api/v1/campaigns/gauss-central/estimate", role="analyst", params={"noise": "laplace", "refresh": "true"}
    )
    assert again.status_code == 409 and "at δ = 1e-05" in again.json()["error"]["message"]
    bad = aggregator.post("/api/v1/campaigns", role="admin", json={
        "id": "bad-central", "question": "q", "categories": ["a", "b"], "epsilon": 1.0, "trust_model": "central",
        "budget": 2.0, "budget_rho": 1.0,
    })  # fmt: skip
    assert bad.status_code == 422 and "state one budget" in bad.json()["error"]["message"]



def test_the_release_log_shows_the_accountants_totals(aggregator) -> None:
    from support.reports import simulate_envelopes, upload

    config = aggregator.create_campaign(
        id="rho-central", question="Smoker?", categories=["no", "yes"], epsilon=0.5, trust_model="central",
        budget_rho=1.0, delta=1e-6,
    )  # fmt: skip
    upload(aggregator, "rho-central", simulate_envelopes(config, [0, 1] * 20, rng=np.random.default_rng(5)))
    aggregator.estimate("rho-central")
    aggregator.estimate("rho-central", noise="gaussian")
    log = aggregator.get("/api/v1/campaigns/rho-central/releases", role="analyst").json()
    books = log["accountant"]
    assert books["budget"] == {"form": "zcdp", "rho": 1.0} and books["releases"] == 2
    (cost_laplace, cost_gauss) = (row["cost"] for row in log["releases"])
    assert cost_laplace == {"kind": "pure", "count": 1, "epsilon": "1/2"} and cost_gauss["kind"] == "zcdp"
    assert books["rho"] == pytest.approx(0.125 + float(Fraction(cost_gauss["rho"])))
    assert books["left"] == pytest.approx(1.0 - books["rho"])
