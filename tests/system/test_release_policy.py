"""Central budgets are spent only by policy (issue 12 item 6): minimum reports, minimum refresh interval,
and the release log that records every ε-spending release (who, when, ε, parameters)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator.migrations import MIGRATIONS, migrate
from deniable.aggregator.release_policy import DEFAULT_POLICY, ReleasePolicy, check_release, parse_policy
from deniable.aggregator.store import Store
from deniable.shared.errors import InvalidConfig, ReleaseRefused
from deniable.shared.limits import DEFAULT_MIN_REFRESH_INTERVAL_SECONDS, DEFAULT_MIN_REPORTS_BEFORE_RELEASE

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def _central(server: RunningServer, campaign_id: str, **fields: object) -> dict:
    body: dict[str, object] = {
        "question": "Have you ever cheated on a test?",
        "categories": ["no", "yes"],
        "epsilon": 0.5,
        "trust_model": "central",
        "budget": 2.0,
        "group_fields": ["region"],
        "group_values": {"region": ["north", "south"]},
    }
    return server.create_campaign(id=campaign_id, **{**body, **fields})


def _fill(server: RunningServer, config: dict, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = (rng.random(n) < 0.3).astype(int).tolist()
    groups = [{"region": "north" if i % 2 else "south"} for i in range(n)]
    assert upload(server, config["id"], simulate_envelopes(config, values, rng=rng, groups=groups))["accepted"] == n


def _releases(server: RunningServer, campaign_id: str, role: str = "analyst", **params: object) -> dict:
    response = server.get(f"/api/v1/campaigns/{campaign_id}/releases", role=role, params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


# -- the rules, without a server ---------------------------------------------------------------------------


def test_the_defaults_refuse_an_empty_campaign_and_a_refresh_within_a_day() -> None:
    assert ReleasePolicy(DEFAULT_MIN_REPORTS_BEFORE_RELEASE, DEFAULT_MIN_REFRESH_INTERVAL_SECONDS) == DEFAULT_POLICY
    assert DEFAULT_POLICY.min_reports >= 1 and DEFAULT_POLICY.min_refresh_interval_seconds == 86_400
    with pytest.raises(ReleaseRefused) as refused:
        check_release(DEFAULT_POLICY, campaign_id="c", n_reports=0, refresh=False, last_release_at=None, now=NOW)
    assert refused.value.rule == "min_reports" and refused.value.next_release_at is None
    assert f"minimum of {DEFAULT_MIN_REPORTS_BEFORE_RELEASE}" in str(refused.value)


def test_the_refresh_interval_counts_from_the_last_spending_release() -> None:
    policy = ReleasePolicy(min_reports=10, min_refresh_interval_seconds=3600)
    last = (NOW - dt.timedelta(seconds=3599)).isoformat()
    with pytest.raises(ReleaseRefused) as refused:
        check_release(policy, campaign_id="c", n_reports=10, refresh=True, last_release_at=last, now=NOW)
    assert refused.value.rule == "min_refresh_interval"
    assert refused.value.next_release_at == (NOW + dt.timedelta(seconds=1)).isoformat()
    assert refused.value.retry_after == 1
    assert "next refresh is possible at 2026-12-01T09:00:01+00:00 (in 1 s)" in str(refused.value)
    exactly = (NOW - dt.timedelta(seconds=3600)).isoformat()
    check_release(policy, campaign_id="c", n_reports=10, refresh=True, last_release_at=exactly, now=NOW)
    # A first draw of another slot is no refresh; the minimum of reports still binds it.
    check_release(policy, campaign_id="c", n_reports=10, refresh=False, last_release_at=last, now=NOW)
    with pytest.raises(ReleaseRefused, match="rule min_reports"):
        check_release(policy, campaign_id="c", n_reports=9, refresh=False, last_release_at=None, now=NOW)
    off = ReleasePolicy(min_reports=0, min_refresh_interval_seconds=0)
    check_release(off, campaign_id="c", n_reports=0, refresh=True, last_release_at=NOW.isoformat(), now=NOW)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "must be a JSON object"),
        ({"min_reports": 5}, "missing ['min_refresh_interval_seconds']"),
        ({"min_reports": 5, "min_refresh_interval_seconds": 0, "x": 1}, "unknown ['x']"),
        ({"min_reports": -1, "min_refresh_interval_seconds": 0}, "'release_policy.min_reports' must be a whole"),
        ({"min_reports": 1.5, "min_refresh_interval_seconds": 0}, "got 1.5"),
        ({"min_reports": True, "min_refresh_interval_seconds": 0}, "got True"),
        ({"min_reports": 1, "min_refresh_interval_seconds": 10**12}, "from 0 to 31622400"),
    ],
)
def test_bad_policies_are_refused_with_the_key_named(body: object, message: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        parse_policy(body)
    assert message in str(refused.value)


# -- the attack and the policy over the real server -------------------------------------------------


def test_four_refreshes_of_an_empty_campaign_spend_nothing(aggregator: RunningServer) -> None:
    """Budget 2 at ε 0.5: four ``?refresh=true`` on an empty campaign spent the whole budget before."""
    _central(aggregator, "attack-empty")
    for _ in range(4):
        response = aggregator.get("/api/v1/campaigns/attack-empty/estimate?refresh=true", role="analyst")
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "release_refused" and error["rule"] == "min_reports"
        assert error["next_release_at"] is None and "Retry-After" not in response.headers
        assert f"minimum of {DEFAULT_MIN_REPORTS_BEFORE_RELEASE}" in error["message"]
    log = _releases(aggregator, "attack-empty")
    assert (log["epsilon_spent"], log["epsilon_remaining"], log["releases"]) == (0.0, 2.0, [])
    assert log["policy"]["default"] is True


def test_refreshes_wait_for_the_interval_and_every_release_is_logged(aggregator: RunningServer) -> None:
    config = _central(aggregator, "attack-refresh")
    _fill(aggregator, config, DEFAULT_MIN_REPORTS_BEFORE_RELEASE + 5, seed=11)
    first = aggregator.estimate("attack-refresh")
    assert (first["cached"], first["epsilon_spent"]) == (False, 0.5)
    released = dt.datetime.fromisoformat(first["released_at"])
    for _ in range(3):  # the rest of the attack: refresh again and again
        response = aggregator.get("/api/v1/campaigns/attack-refresh/estimate?refresh=true", role="analyst")
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["rule"] == "min_refresh_interval"
        next_at = dt.datetime.fromisoformat(error["next_release_at"])
        assert next_at == released + dt.timedelta(seconds=DEFAULT_MIN_REFRESH_INTERVAL_SECONDS)
        assert 0 < int(response.headers["Retry-After"]) == error["retry_after"] <= DEFAULT_MIN_REFRESH_INTERVAL_SECONDS
    assert aggregator.estimate("attack-refresh")["cached"] is True  # the stored release stays free
    # Another slot is another question: its first draw is no refresh (here asked by the admin).
    response = aggregator.get("/api/v1/campaigns/attack-refresh/estimate?group_by=region", role="admin")
    assert response.status_code == 200 and response.json()["epsilon_spent"] == 1.0

    for role in ("analyst", "admin"):
        log = _releases(aggregator, "attack-refresh", role=role)
        assert (log["budget"], log["epsilon_spent"], log["epsilon_remaining"]) == (2.0, 1.0, 1.0)
        rows = log["releases"]
        assert [(r["role"], r["epsilon"], r["parameters"]["group_by"]) for r in rows] == [
            ("analyst", 0.5, None),
            ("admin", 0.5, "region"),
        ]
        assert rows[0]["released_at"] == first["released_at"] and rows[0]["release_key"] == first["release_key"]
        assert rows[0]["parameters"] == {"group_by": None, "noise": "discrete-laplace", "refresh": False, "level": 0.95}
        assert rows[0]["cost"] == {"kind": "pure", "count": 1, "epsilon": "1/2"}  # natural form, exact
        assert log["policy"]["next_refresh_at"] == (
            dt.datetime.fromisoformat(rows[1]["released_at"]) + dt.timedelta(days=1)
        ).isoformat()
    page = _releases(aggregator, "attack-refresh", limit=1)
    assert [r["seq"] for r in page["releases"]] == [log["releases"][0]["seq"]] and page["next_after"] is not None
    rest = _releases(aggregator, "attack-refresh", after=page["next_after"])
    assert [r["seq"] for r in rest["releases"]] == [log["releases"][1]["seq"]] and rest["next_after"] is None
    assert aggregator.get("/api/v1/campaigns/attack-refresh/releases").status_code == 401

    # The admin may loosen the policy; the analyst may read it, not change it.
    loose = {"min_reports": 0, "min_refresh_interval_seconds": 0}
    path = "/api/v1/campaigns/attack-refresh/release-policy"
    assert aggregator.request("PUT", path, role="analyst", json=loose).status_code == 403
    put = aggregator.request("PUT", path, role="admin", json=loose)
    assert put.status_code == 200, put.text
    assert put.json() | {"updated_at": None} == {
        "campaign_id": "attack-refresh", **loose, "default": False, "updated_at": None, "updated_by": "admin",
        "next_refresh_at": None,
    }  # fmt: skip
    assert aggregator.get(path, role="analyst").json() == put.json()
    refreshed = aggregator.estimate("attack-refresh", refresh="true")
    assert (refreshed["cached"], refreshed["epsilon_spent"]) == (False, 1.5)
    last = _releases(aggregator, "attack-refresh")["releases"][-1]
    assert (last["role"], last["parameters"]["refresh"]) == ("analyst", True)


def test_a_policy_set_at_creation_and_the_central_only_routes(aggregator: RunningServer) -> None:
    policy = {"min_reports": 3, "min_refresh_interval_seconds": 60}
    config = _central(aggregator, "policy-create", release_policy=policy)
    got = aggregator.get("/api/v1/campaigns/policy-create/release-policy", role="analyst").json()
    assert {k: got[k] for k in policy} == policy and got["default"] is False and got["updated_by"] == "admin"
    _fill(aggregator, config, 2, seed=12)
    assert aggregator.get("/api/v1/campaigns/policy-create/estimate", role="analyst").status_code == 409
    _fill(aggregator, config, 1, seed=13)
    assert aggregator.estimate("policy-create")["epsilon_spent"] == 0.5

    local = {"id": "policy-local", "question": "?", "categories": ["a", "b"], "epsilon": 1.0}
    refused = aggregator.post("/api/v1/campaigns", role="admin", json={**local, "release_policy": policy})
    assert refused.status_code == 422 and "central campaigns only" in refused.json()["error"]["message"]
    aggregator.create_campaign(**local)
    for route in ("releases", "release-policy"):
        response = aggregator.get(f"/api/v1/campaigns/policy-local/{route}", role="analyst")
        assert response.status_code == 422 and "central campaigns only" in response.json()["error"]["message"]
    bad = aggregator.request(
        "PUT", "/api/v1/campaigns/policy-create/release-policy", role="admin", json={"min_reports": 1}
    )
    assert bad.status_code == 422 and "missing ['min_refresh_interval_seconds']" in bad.json()["error"]["message"]
    for query in ("limit=0", "limit=1001", "after=-1", "after=x"):
        response = aggregator.get(f"/api/v1/campaigns/policy-create/releases?{query}", role="analyst")
        assert response.status_code == 400, query


def test_a_release_made_before_the_log_still_starts_the_interval(tmp_path: Path) -> None:
    """Migrating a version-2 database: its stored release is no log row, but its time counts for refreshes."""
    path = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, MIGRATIONS[:2]) == 2
    conn.execute(
        "INSERT INTO campaigns (id, config_json, trust_model, budget, adjacency, epsilon_spent, created_at)"
        " VALUES ('old', '{}', 'central', 2.0, 'add-remove', 0.5, 'then')"
    )
    conn.execute(
        "INSERT INTO central_releases VALUES ('old', 'k', 0.5, '{}', ?)", ((NOW - dt.timedelta(hours=1)).isoformat(),)
    )
    conn.close()
    store = Store(path)
    conn = store.connection()
    assert store.release_policy(conn, "old") is None
    # migration 5 logs what was spent before the log, as one pure-ε cost, at the stored release's time
    (before,) = store.releases("old")
    summary = {"kind": "pure", "count": 1, "epsilon": "0.5"}
    assert (before.role, before.epsilon, before.cost) == ("before-release-log", 0.5, summary)
    assert store.has_release(conn, "old", "k") and not store.has_release(conn, "old", "other")
    last = store.last_release_at(conn, "old")
    assert last == (NOW - dt.timedelta(hours=1)).isoformat()
    with pytest.raises(ReleaseRefused, match="rule min_refresh_interval"):
        check_release(DEFAULT_POLICY, campaign_id="old", n_reports=100, refresh=True, last_release_at=last, now=NOW)
    with store.transaction() as tx:
        store.log_release(
            tx, "old", released_at=NOW.isoformat(), role="analyst", epsilon=0.5, release_key="k",
            parameters={"group_by": None}, cost=None,
        )  # fmt: skip
    assert store.last_release_at(conn, "old") == NOW.isoformat()
    assert [(r.role, r.cost) for r in store.releases("old")][1:] == [("analyst", None)]
