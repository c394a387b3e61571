"""Estimates from the real server on simulated data (fixed seeds; tolerances from the reported stderr)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from support.reports import device_reports, seal_reports, simulate_envelopes, upload
from support.server import RunningServer

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.mechanisms.estimate import count_interval

N = 3000
TRUE_P = {2: [0.7, 0.3], 5: [0.4, 0.25, 0.2, 0.1, 0.05]}


def population(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice(k, size=N, p=TRUE_P[k])


@pytest.mark.parametrize(("mechanism", "k", "epsilon"), [("binary-rr", 2, 1.0), ("grr", 5, 1.0),
                                                         ("oue", 5, 2.0), ("olh", 5, 2.0)])  # fmt: skip
def test_estimates_equal_the_mechanism_on_the_same_reports_and_cover_the_truth(
    aggregator: RunningServer, mechanism: str, k: int, epsilon: float
) -> None:
    categories = [f"c{i}" for i in range(k)]
    created = aggregator.create_campaign(
        id=f"est-{mechanism}", question="q", categories=categories, epsilon=epsilon, mechanism=mechanism
    )
    config = CampaignConfig.from_json(created)
    values = population(k, seed=11)
    rng = np.random.default_rng(12)
    mech = config.build_mechanism()
    reports = device_reports(mech, mech.simulate(values, rng=rng))
    assert upload(aggregator, config.id, seal_reports(config, reports, rng=rng))["accepted"] == N

    body = aggregator.estimate(config.id)
    assert (body["n"], body["epsilon"], body["mechanism"], body["level"]) == (N, epsilon, mechanism, 0.95)
    local = mech.estimate(reports)  # the same reports, estimated directly: the tallies lose nothing
    truth = np.bincount(values, minlength=k)
    for v, row in enumerate(body["categories"]):
        assert row["category"] == categories[v]
        assert row["count"] == pytest.approx(local.counts[v], rel=1e-12, abs=1e-9)
        assert row["stderr"] == pytest.approx(local.stderr[v], rel=1e-12)
        assert abs(row["count"] - truth[v]) <= 4 * row["stderr"]
        served = count_interval([local.tally.support[v]], N, mech.p_star, mech.q_star, 0.95)  # type: ignore[union-attr]
        assert row["ci"] == pytest.approx([float(served[0][0]), float(served[1][0])], rel=1e-12)
        assert row["ci"][0] <= truth[v] <= row["ci"][1]
        assert row["proportion"] == pytest.approx(row["count"] / N)
        assert row["proportion_stderr"] == pytest.approx(row["stderr"] / N)
        assert row["proportion_ci"] == pytest.approx([c / N for c in row["ci"]])
    consistent = [row["consistent_count"] for row in body["categories"]]
    assert min(consistent) >= 0 and sum(consistent) == pytest.approx(N)
    assert body["consistent"]["biased"] is True
    assert body["interval"]["method"] == "score-cc"


def test_level_changes_only_the_interval_width(aggregator: RunningServer) -> None:
    created = aggregator.create_campaign(id="est-level", question="q", categories=["no", "yes"], epsilon=1.0)
    rng = np.random.default_rng(21)
    upload(aggregator, "est-level", simulate_envelopes(created, population(2, seed=20), rng=rng))
    at95, at80 = aggregator.estimate("est-level"), aggregator.estimate("est-level", level=0.8)
    assert at80["level"] == 0.8
    for a, b in zip(at95["categories"], at80["categories"], strict=True):
        assert a["count"] == b["count"] and a["stderr"] == b["stderr"]
        assert a["ci"][0] < b["ci"][0] < b["ci"][1] < a["ci"][1]  # the 80% interval nests in the 95% one
        ratio = (b["ci"][1] - b["ci"][0]) / (a["ci"][1] - a["ci"][0])
        # far from the boundary the score interval's width scales with z like the normal one's
        assert ratio == pytest.approx(NormalDist().inv_cdf(0.9) / NormalDist().inv_cdf(0.975), rel=0.02)


def test_grouped_estimates_use_each_groups_reports_only(aggregator: RunningServer) -> None:
    created = aggregator.create_campaign(
        id="est-groups", question="q", categories=["no", "yes"], epsilon=1.5, group_fields=["country", "age"]
    )
    rng = np.random.default_rng(31)
    countries = rng.choice(["NL", "DE", "FR"], size=N, p=[0.5, 0.3, 0.2])
    # the true proportion of "yes" differs by country: 0.2 / 0.5 / 0.8
    p_yes = np.select([countries == "NL", countries == "DE"], [0.2, 0.5], 0.8)
    values = (rng.random(N) < p_yes).astype(int)
    groups = [{"country": str(c), "age": "adult"} for c in countries]
    upload(aggregator, "est-groups", simulate_envelopes(created, values, rng=rng, groups=groups))

    body = aggregator.estimate("est-groups", group_by="country")
    assert body["group_by"] == "country" and body["n"] == N
    assert set(body["groups"]) == {"NL", "DE", "FR"}
    assert sum(g["n"] for g in body["groups"].values()) == N
    for country, group in body["groups"].items():
        mask = countries == country
        assert group["n"] == int(mask.sum())
        yes = group["categories"][1]
        truth = int(values[mask].sum())
        assert abs(yes["count"] - truth) <= 4 * yes["stderr"], country
    overall = aggregator.estimate("est-groups")
    assert overall["n"] == N and "groups" not in overall
    one_group = aggregator.estimate("est-groups", group_by="age")
    assert list(one_group["groups"]) == ["adult"]
    assert one_group["groups"]["adult"]["categories"] == overall["categories"]


def test_an_empty_campaign_has_a_zero_estimate_without_nan(aggregator: RunningServer) -> None:
    aggregator.create_campaign(id="est-empty", question="q", categories=["a", "b", "c"], epsilon=1.0)
    response = aggregator.get("/api/v1/campaigns/est-empty/estimate", role="analyst")
    assert response.status_code == 200 and "NaN" not in response.text
    body = response.json()
    assert body["n"] == 0 and all(row["count"] == 0 and row["proportion"] is None for row in body["categories"])


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("group_by=nope", 422, "invalid_parameter"),
        ("level=1.5", 400, "bad_request"),
        ("level=0", 400, "bad_request"),
        ("level=nan", 400, "bad_request"),
        ("level=abc", 400, "bad_request"),
        ("noise=laplace", 422, "invalid_parameter"),
        ("group_by=" + "x" * 200, 400, "bad_request"),
    ],
)
def test_bad_estimate_queries(aggregator: RunningServer, query: str, status: int, code: str) -> None:
    if aggregator.get("/api/v1/campaigns/est-query").status_code == 404:
        aggregator.create_campaign(id="est-query", question="q", categories=["a", "b"], epsilon=1.0)
    response = aggregator.get(f"/api/v1/campaigns/est-query/estimate?{query}", role="analyst")
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_central_releases_spend_the_budget_once_each(aggregator: RunningServer) -> None:
    created = aggregator.create_campaign(
        id="est-central", question="q", categories=["a", "b", "c"], epsilon=0.5, trust_model="central",
        budget=1.0, group_fields=["g"], group_values={"g": ["x", "y"]},
    )  # fmt: skip
    rng = np.random.default_rng(41)
    values = rng.integers(0, 3, 600)
    groups = [{"g": "x" if v else "y"} for v in values]
    assert upload(aggregator, "est-central", simulate_envelopes(created, values, rng=rng, groups=groups))[
        "accepted"
    ] == 600
    closed = aggregator.post("/api/v1/campaigns/est-central/close", role="admin")  # final data: reusable
    assert closed.status_code == 200, closed.text
    first = aggregator.estimate("est-central")
    assert first["trust_model"] == "central" and first["epsilon_spent"] == 0.5
    truth = np.bincount(values, minlength=3)
    # Laplace tails are heavier than normal ones: bound each bin by P(|Z| >= t) = 2a^t/(1+a) <= 1e-6.
    a = math.exp(-1 / first["scale"])
    bound = math.log(2 / (1 + a) / 1e-6) / -math.log(a)
    for v, row in enumerate(first["categories"]):
        assert abs(row["count"] - truth[v]) <= bound
    again = aggregator.estimate("est-central")
    assert again["cached"] is True and again["epsilon_spent"] == 0.5
    assert [r["count"] for r in again["categories"]] == [r["count"] for r in first["categories"]]
    grouped = aggregator.estimate("est-central", group_by="g")
    assert set(grouped["groups"]) == {"x", "y"} and grouped["epsilon_spent"] == 1.0
    refused = aggregator.get("/api/v1/campaigns/est-central/estimate?noise=laplace", role="analyst")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert (error["spent"], error["remaining"], error["requested"]) == (1.0, 0.0, 0.5)
    assert aggregator.estimate("est-central")["cached"] is True  # served again for free


def test_tiny_n_keeps_the_unbiased_numbers_and_says_they_may_leave_the_unit_range(aggregator: RunningServer) -> None:
    """n = 2, both reports 'yes' (binary RR, ε = 1): the unbiased proportions are 1.58 and −0.58. They stay,
    and the body says next to them that they are unbiased, left [0, 1] here, and where the consistent ones are."""
    created = aggregator.create_campaign(id="est-tiny", question="q", categories=["no", "yes"], epsilon=1.0,
                                         group_fields=["country"])  # fmt: skip
    config = CampaignConfig.from_json(created)
    upload(aggregator, config.id, seal_reports(config, [1, 1], rng=np.random.default_rng(5)))
    body = aggregator.estimate(config.id)
    e = math.e
    expected_yes = (2 - 2 / (e + 1)) / ((e - 1) / (e + 1)) / 2  # (S − n·q)/(p − q) / n
    assert body["categories"][1]["proportion"] == pytest.approx(expected_yes) == pytest.approx(1.5820, abs=1e-4)
    assert body["categories"][0]["proportion"] == pytest.approx(1 - expected_yes)
    assert body["unbiased"]["outside_range"] is True
    assert "unbiased" in body["unbiased"]["note"] and "outside [0, 1]" in body["unbiased"]["note"]
    assert "consistent_count is the biased variant" in body["unbiased"]["note"]
    assert [row["consistent_count"] for row in body["categories"]] == pytest.approx([0.0, 2.0])
    grouped = aggregator.estimate(config.id, group_by="country")
    assert grouped["groups"]["all"]["unbiased"]["outside_range"] is True
