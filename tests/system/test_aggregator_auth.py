"""Token rules, walked over the app's whole URL map against the real server.

Every non-public route refuses a missing token, a malformed header and a wrong token (401, with a
``WWW-Authenticate: Bearer`` challenge) and a token of a lower role (403); public routes need none.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from flask import Flask
from support.server import RunningServer

from deniable.aggregator.api.app import create_app
from deniable.aggregator.api.auth import ADMIN, ANALYST, ISSUER, PUBLIC, ROUTE_ACCESS, SESSION_ACCESS, role_of_token


def make_app(data_dir: str) -> Flask:
    return create_app({"DATA_DIR": data_dir, "ADMIN_TOKEN": "x" * 20, "ANALYST_TOKEN": "y" * 20})


with tempfile.TemporaryDirectory(prefix="deniable-auth-") as _collect_dir:
    ROUTES = sorted(
        (rule.rule, method, rule.endpoint)
        for rule in make_app(_collect_dir).url_map.iter_rules()
        if rule.endpoint not in SESSION_ACCESS  # the dashboard's pages: tests/system/test_dashboard.py
        for method in rule.methods - {"HEAD", "OPTIONS"}
    )


def concrete(rule: str) -> str:
    return re.sub(r"<[^>]+>", "auth-target", rule)


@pytest.fixture(scope="module")
def server(aggregator: RunningServer) -> RunningServer:
    aggregator.create_campaign(id="auth-target", question="q", categories=["a", "b"], epsilon=1.0)
    return aggregator


def test_the_table_classifies_every_route() -> None:
    assert {endpoint for _, _, endpoint in ROUTES} == set(ROUTE_ACCESS)
    assert set(ROUTE_ACCESS.values()) <= {PUBLIC, ANALYST, ADMIN, ISSUER}
    assert ROUTE_ACCESS["tokens.issue"] == ISSUER  # the app's backend only
    assert ROUTE_ACCESS["health.healthz"] == PUBLIC
    assert ROUTE_ACCESS["reports.submit"] == PUBLIC  # devices are anonymous
    assert ROUTE_ACCESS["campaigns.create"] == ROUTE_ACCESS["campaigns.close"] == ADMIN
    assert ROUTE_ACCESS["estimates.estimate"] == ROUTE_ACCESS["campaigns.list_all"] == ANALYST


@pytest.mark.parametrize(("rule", "method", "endpoint"), ROUTES)
def test_route_refuses_what_it_should(server: RunningServer, rule: str, method: str, endpoint: str) -> None:
    path = concrete(rule)
    needed = ROUTE_ACCESS[endpoint]
    if needed == PUBLIC:
        response = server.request(method, path, json={"reports": [{}]} if method == "POST" else None)
        assert response.status_code not in (401, 403), response.text
        return
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic " + server.admin_token},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Bearer " + server.admin_token + "x"},
        {"Authorization": "Bearer " + server.admin_token[:-1]},
    ):
        response = server.request(method, path, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["WWW-Authenticate"].lower().startswith("bearer")
    if needed == ADMIN:
        lower = server.request(method, path, role="analyst")
        assert lower.status_code == 403
        assert lower.json()["error"]["code"] == "forbidden" and "admin" in lower.json()["error"]["message"]
    if needed == ISSUER:
        for role in ("admin", "analyst"):
            other = server.request(method, path, role=role)
            assert other.status_code == 403 and "issuer" in other.json()["error"]["message"], role
    else:
        assert server.request(method, path, role="issuer").status_code == 403  # it opens its route only
    for role in {ANALYST: ("admin", "analyst"), ADMIN: ("admin",), ISSUER: ("issuer",)}[needed]:
        allowed = server.request(method, path, role=role, json={})
        assert allowed.status_code not in (401, 403), (role, allowed.text)


def test_tokens_compare_by_value_only() -> None:
    assert role_of_token("a" * 10, admin="a" * 10, analyst="b" * 10) == ADMIN
    assert role_of_token("b" * 10, admin="a" * 10, analyst="b" * 10) == ANALYST
    assert role_of_token("c" * 10, admin="a" * 10, analyst="b" * 10) is None
    assert role_of_token("ä", admin="a" * 10, analyst="b" * 10) is None


def test_a_route_missing_from_the_table_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delitem(ROUTE_ACCESS, "health.healthz")
    response = make_app(str(tmp_path)).test_client().get("/healthz")
    assert response.status_code == 403
    assert "ROUTE_ACCESS" in response.json["error"]["message"]
