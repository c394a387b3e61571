"""Central campaigns over the real server (`deniable serve` subprocess on a loopback port)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.client import InvalidConfig, simulate_fleet

CATEGORIES = ["no", "yes"]


def _central(server: RunningServer, campaign_id: str, **fields: object) -> dict:
    return server.create_campaign(
        id=campaign_id,
        question="Have you ever used an illegal drug?",
        categories=CATEGORIES,
        epsilon=0.5,
        trust_model="central",
        budget=1.0,
        group_fields=["region"],
        **fields,
    )


def _fill(server: RunningServer, config: dict, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    values = (rng.random(n) < 0.3).astype(int).tolist()
    groups = [{"region": "north" if i % 2 else "south"} for i in range(n)]
    totals = upload(server, config["id"], simulate_envelopes(config, values, rng=rng, groups=groups))
    assert totals["accepted"] == n
    return values


def test_a_central_release_spends_its_budget_and_is_refused_past_it(aggregator: RunningServer) -> None:
    config = _central(aggregator, "drugs-central")
    assert config["trust_model"] == "central" and config["adjacency"] == "add-remove"
    values = _fill(aggregator, config, 400, seed=1)
    truth = sum(values)

    first = aggregator.estimate("drugs-central")
    assert first["trust_model"] == "central" and first["noise"] == "discrete-laplace"
    assert (first["epsilon_spent"], first["epsilon_remaining"]) == (0.5, 0.5)
    yes = first["categories"][1]
    a = math.exp(-0.5)
    assert yes["stderr"] == pytest.approx(math.sqrt(2 * a) / (1 - a), rel=1e-12)
    # |noise| > 60 at scale 2 has probability e^-30: a looser check would hide a wrong scale.
    assert abs(yes["count"] - truth) < 60
    assert yes["ci"][0] < yes["count"] < yes["ci"][1]

    again = aggregator.estimate("drugs-central", level=0.99)
    assert again["cached"] is True and again["epsilon_spent"] == 0.5
    assert [r["count"] for r in again["categories"]] == [r["count"] for r in first["categories"]]

    grouped = aggregator.estimate("drugs-central", group_by="region")
    assert set(grouped["groups"]) == {"north", "south"}
    assert grouped["epsilon_spent"] == 1.0  # one ε for both disjoint groups

    refused = aggregator.get("/api/v1/campaigns/drugs-central/estimate", role="analyst", params={"noise": "laplace"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert (error["spent"], error["remaining"], error["requested"]) == (1.0, 0.0, 0.5)
    assert "spent epsilon 1.0 of its budget 1.0 (0.0 left)" in error["message"]
    # Releases already made remain available for free.
    assert aggregator.estimate("drugs-central")["cached"] is True


def test_central_and_local_estimates_share_one_shape(aggregator: RunningServer) -> None:
    central_config = _central(aggregator, "shape-central", adjacency="replace")
    local_config = aggregator.create_campaign(
        id="shape-local", question="Same?", categories=CATEGORIES, epsilon=0.5, group_fields=["region"]
    )
    _fill(aggregator, central_config, 200, seed=2)
    _fill(aggregator, local_config, 200, seed=3)
    central_body = aggregator.estimate("shape-central", noise="laplace")
    local_body = aggregator.estimate("shape-local")
    assert set(local_body) <= set(central_body)
    assert set(local_body["categories"][0]) == set(central_body["categories"][0])
    assert central_body["sensitivity"] == 2 and central_body["scale"] == 4.0
    assert central_body["n"] == 200  # under replace-one the number of respondents is public
    central_groups = aggregator.estimate("shape-central", group_by="region")["groups"]
    local_groups = aggregator.estimate("shape-local", group_by="region")["groups"]
    assert set(central_groups) == set(local_groups) == {"north", "south"}
    assert set(central_groups["north"]) >= set(local_groups["north"])


def test_bad_release_requests_get_clear_errors(aggregator: RunningServer) -> None:
    _central(aggregator, "errors-central")
    bad_noise = aggregator.get(
        "/api/v1/campaigns/errors-central/estimate", role="analyst", params={"noise": "gaussian"}
    )
    assert bad_noise.status_code == 422
    assert "'noise' must be one of discrete-laplace, laplace" in bad_noise.json()["error"]["message"]
    assert aggregator.estimate("errors-central")["epsilon_spent"] == 0.5  # an empty campaign: a release
    over = aggregator.post(
        "/api/v1/campaigns",
        role="admin",
        json={
            "id": "errors-budget",
            "question": "?",
            "categories": CATEGORIES,
            "epsilon": 2.0,
            "trust_model": "central",
            "budget": 1.0,
        },
    )
    assert over.status_code == 422 and "budget" in over.json()["error"]["message"]


def test_the_client_sends_raw_values_only_after_opting_in(aggregator: RunningServer) -> None:
    _central(aggregator, "optin-central")
    with pytest.raises(InvalidConfig, match="uses the central trust model"):
        simulate_fleet(aggregator.url, "optin-central", ["yes", "no"], [{"region": "north"}] * 2)
    answers = ["yes"] * 30 + ["no"] * 70
    groups = [{"region": "north"}] * 100
    result = simulate_fleet(aggregator.url, "optin-central", answers, groups, allow_central=True)
    assert result.accepted == 100
    body = aggregator.estimate("optin-central")
    assert abs(body["categories"][1]["count"] - 30) < 60


def test_the_accountant_survives_a_crash(fresh_aggregator: RunningServer) -> None:
    """ε spent and stored releases are in the database: a SIGKILLed server restarts with both."""
    config = _central(fresh_aggregator, "crash-central")
    _fill(fresh_aggregator, config, 100, seed=4)
    first = fresh_aggregator.estimate("crash-central")
    fresh_aggregator.kill()
    fresh_aggregator.restart()
    again = fresh_aggregator.estimate("crash-central")
    assert again["cached"] is True and again["epsilon_spent"] == 0.5
    assert [r["count"] for r in again["categories"]] == [r["count"] for r in first["categories"]]
    assert fresh_aggregator.estimate("crash-central", noise="laplace")["epsilon_spent"] == 1.0
    refused = fresh_aggregator.get(
        "/api/v1/campaigns/crash-central/estimate", role="analyst", params={"level": 0.9, "group_by": "region"}
    )
    assert refused.status_code == 409
