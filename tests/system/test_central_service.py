"""Central campaigns over the real server (`deniable serve` subprocess on a loopback port)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator import estimation
from deniable.aggregator.store import Store
from deniable.client import InvalidConfig
from deniable.client.fleet import simulate_fleet
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.keys import generate_keypair

CATEGORIES = ["no", "yes"]
#: The declared regions: "west" is declared but nobody in the tests' data lives there.
REGIONS = ["north", "south", "west"]


def _central(server: RunningServer, campaign_id: str, **fields: object) -> dict:
    body: dict[str, object] = {
        "question": "Have you ever used an illegal drug?",
        "categories": CATEGORIES,
        "epsilon": 0.5,
        "trust_model": "central",
        "budget": 1.0,
        "group_fields": ["region"],
        "group_values": {"region": REGIONS},
    }
    return server.create_campaign(id=campaign_id, **{**body, **fields})


def _close(server: RunningServer, campaign_id: str) -> None:
    """Close the campaign: its data is final, so its releases may be served again (module docstring)."""
    response = server.post(f"/api/v1/campaigns/{campaign_id}/close", role="admin")
    assert response.status_code == 200, response.text


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
    _close(aggregator, "drugs-central")

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
    assert list(grouped["groups"]) == ["north", "south", "west"]  # every declared region, "west" empty
    assert grouped["epsilon_spent"] == 1.0  # one ε for both disjoint groups

    refused = aggregator.get("/api/v1/campaigns/drugs-central/estimate", role="analyst", params={"noise": "laplace"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert (error["spent"], error["remaining"], error["requested"]) == (1.0, 0.0, 0.5)
    assert "spent ε = 1 of its budget ε = 1 (ε = 0 left); this release costs ε = 0.5" in error["message"]
    # Releases already made remain available for free.
    assert aggregator.estimate("drugs-central")["cached"] is True


def test_central_and_local_estimates_share_one_shape(aggregator: RunningServer) -> None:
    central_config = _central(aggregator, "shape-central", adjacency="replace")
    local_config = aggregator.create_campaign(
        id="shape-local",
        question="Same?",
        categories=CATEGORIES,
        epsilon=0.5,
        group_fields=["region"],
        group_values={"region": REGIONS},
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
    assert list(central_groups) == list(local_groups) == REGIONS  # declared values, in one order
    assert set(central_groups["north"]) >= set(local_groups["north"])
    assert local_groups["west"]["n"] == 0  # an empty declared group: n = 0 and its (uninformative) estimate


def test_bad_release_requests_get_clear_errors(aggregator: RunningServer) -> None:
    _central(aggregator, "errors-central")
    bad_noise = aggregator.get(
        "/api/v1/campaigns/errors-central/estimate", role="analyst", params={"noise": "uniform"}
    )
    assert bad_noise.status_code == 422
    assert "'noise' must be one of discrete-laplace, laplace, gaussian" in bad_noise.json()["error"]["message"]
    empty = aggregator.get("/api/v1/campaigns/errors-central/estimate", role="analyst")
    assert empty.status_code == 409  # an empty campaign: the default release policy spends nothing on it
    assert empty.json()["error"]["rule"] == "min_reports"
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
    _close(fresh_aggregator, "crash-central")
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


# -- declared groups and the private participant count ---------------------------------------------------


def test_a_grouped_release_lists_exactly_the_declared_groups(aggregator: RunningServer) -> None:
    config = _central(
        aggregator, "declared-central", budget=2.0, group_values={"region": ["west", "north", "east"]},
        release_policy={"min_reports": 7, "min_refresh_interval_seconds": 86_400},
    )  # fmt: skip
    assert config["group_values"] == {"region": ["west", "north", "east"]}
    envelopes = simulate_envelopes(config, [1] * 7, rng=np.random.default_rng(5), groups=[{"region": "north"}] * 7)
    assert upload(aggregator, "declared-central", envelopes)["accepted"] == 7
    grouped = aggregator.estimate("declared-central", group_by="region")
    assert list(grouped["groups"]) == ["east", "north", "west"]  # present or not, sorted
    b = grouped["scale"]
    bound = math.log(2 / 1e-9) * b  # P(|Z| >= t) <= 2·e^(−t/b): each bin within the bound but with p 1e-9
    for region in ("east", "west"):  # nobody there: released with noise around 0, never left out
        assert all(abs(row["count"]) <= bound for row in grouped["groups"][region]["categories"])
    assert abs(grouped["groups"]["north"]["categories"][1]["count"] - 7) <= bound
    assert grouped["epsilon_spent"] == 0.5  # one ε for the disjoint groups, empty ones included


def test_a_central_campaign_with_groups_must_declare_their_values(aggregator: RunningServer) -> None:
    body = {
        "id": "undeclared-central", "question": "?", "categories": CATEGORIES, "epsilon": 0.5,
        "trust_model": "central", "budget": 1.0, "group_fields": ["region"],
    }  # fmt: skip
    refused = aggregator.post("/api/v1/campaigns", role="admin", json=body)
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "must declare 'group_values' for every group field, missing 'region'" in message
    assert "which groups exist reveals nothing" in message
    bad = aggregator.post("/api/v1/campaigns", role="admin", json={**body, "group_values": {"city": ["x"]}})
    assert bad.status_code == 422 and "'group_values' keys must be group fields" in bad.json()["error"]["message"]
    assert aggregator.get("/api/v1/campaigns/undeclared-central").status_code == 404  # nothing was created


def test_a_report_with_an_undeclared_group_value_is_rejected(aggregator: RunningServer) -> None:
    config = CampaignConfig.from_json(_central(aggregator, "reject-central"))
    rng = np.random.default_rng(6)
    envelopes = [
        config.seal(  # sealed by hand: make_payload refuses it on the device
            {"value": 1, "groups": {"region": region}}, device_secret=rng.bytes(32)
        ).to_json()
        for region in ("north", "mars")  # no wider than a declared value: refused for its content, not size
    ]
    response = aggregator.post("/api/v1/campaigns/reject-central/reports", json={"reports": envelopes})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["rejected"]) == (1, 1)
    reason = body["results"][1]["reason"]
    assert "group 'region' has the value 'mars'" in reason and "does not declare" in reason


def test_analysts_never_see_the_exact_count_of_an_add_remove_campaign(aggregator: RunningServer) -> None:
    no_wait = {"min_reports": 20, "min_refresh_interval_seconds": 0}
    config = _central(aggregator, "count-central", budget=3.0, release_policy=no_wait)
    replace = _central(aggregator, "count-replace", adjacency="replace")
    _fill(aggregator, config, 37, seed=7)
    _fill(aggregator, replace, 37, seed=8)

    def listed(role: str) -> dict[str, object]:
        response = aggregator.get("/api/v1/campaigns", role=role)
        assert response.status_code == 200, response.text
        return {c["id"]: c["n_reports"] for c in response.json()["campaigns"]}

    assert listed("analyst")["count-central"] is None  # a private count: released only with noise
    assert listed("admin")["count-central"] == 37  # the curator's operator holds the raw data anyway
    assert listed("analyst")["count-replace"] == 37  # under replace-one n is public
    first = aggregator.estimate("count-central")
    _fill(aggregator, config, 5, seed=9)  # someone takes part: nothing an analyst sees changes for free
    again = aggregator.estimate("count-central")
    assert first["n_public"] is False and again["n_public"] is False  # n: the sum of the noisy bins
    assert (first["cached"], again["cached"]) == (False, True)
    assert (first["epsilon_spent"], again["epsilon_spent"]) == (0.5, 0.5)
    assert [r["count"] for r in again["categories"]] == [r["count"] for r in first["categories"]]
    refreshed = aggregator.estimate("count-central", refresh="true")  # the new reports, at a price
    assert (refreshed["cached"], refreshed["epsilon_spent"]) == (False, 1.0)
    # The key names the request, not the data: it is no hash of any count.
    assert first["release_key"] == again["release_key"] == refreshed["release_key"]

    def key(n: int) -> str:
        canonical = json.dumps({"group_by": "", "noise": "discrete-laplace", "snapshot": n}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    assert first["release_key"] not in {key(n) for n in range(1000)}


def test_a_grouped_release_of_a_legacy_central_campaign_is_refused(tmp_path: Path) -> None:
    """A descriptor made before group_values existed has no public domain: only ungrouped releases."""
    _, public = generate_keypair()
    legacy = CampaignConfig.create(
        id="legacy", question="?", categories=CATEGORIES, epsilon=0.5, public_key=public, trust_model="central",
        budget=1.0,
    ).to_json()  # fmt: skip
    legacy["group_fields"] = ["region"]
    config = CampaignConfig.from_json(legacy)
    store = Store(tmp_path / "deniable.sqlite3")
    with store.transaction() as conn:
        store.insert_campaign(conn, "legacy", legacy, trust_model="central", budget=1.0, adjacency="add-remove")
        store.set_release_policy(conn, "legacy", min_reports=0, min_refresh_interval_s=0, updated_by="admin")
    with pytest.raises(InvalidParameter, match=r"declares no group_values for 'region' \(it predates them\)"):
        estimation.estimate(store, config, group_by="region", level=0.95, noise=None)
    assert store.get_campaign("legacy").epsilon_spent == 0.0  # refused before anything was spent
    assert estimation.estimate(store, config, group_by=None, level=0.95, noise=None)["epsilon_spent"] == 0.5


def test_a_declared_domain_too_large_to_release_is_refused(aggregator: RunningServer) -> None:
    """1000 groups × 101 categories would need 101,000 exact noise draws per grouped release."""
    response = aggregator.post(
        "/api/v1/campaigns",
        role="admin",
        json={
            "id": "huge-central", "question": "?", "categories": [f"c{i}" for i in range(101)], "epsilon": 0.5,
            "trust_model": "central", "budget": 1.0, "group_fields": ["region"],
            "group_values": {"region": [f"r{i}" for i in range(1000)]},
        },
    )  # fmt: skip
    assert response.status_code == 422, response.text
    assert "would hold 101000 cells, at most 100000" in response.json()["error"]["message"]
