"""Authorization: every route of the app is classified in ONE table, and the real server enforces it.

The table is :data:`deniable.aggregator.api.auth.ROUTE_ACCESS` (endpoint → least role). These tests walk
``app.url_map`` of a freshly built app (so a new route cannot escape them) and, against the real server
(``deniable serve`` as a subprocess), check for every method of every non-public rule that

* no token, a malformed ``Authorization`` header and a wrong token get 401 with a JSON error body and a
  ``WWW-Authenticate: Bearer`` challenge;
* the token of the role just below the required one gets 403 (analyst on admin routes; the analyst
  routes' lower role is "no token", covered above);
* the refusal happens before the view runs: nothing is created or closed, whatever the body.

Public routes answer without a token, and the OpenAPI document declares the same security as the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.server import RunningServer
from werkzeug.routing import Rule

from deniable.aggregator import create_app
from deniable.aggregator.api.auth import ADMIN, ANALYST, ISSUER, PUBLIC, ROUTE_ACCESS, SESSION_ACCESS

CAMPAIGN = "auth-target"
IGNORED_METHODS = {"HEAD", "OPTIONS"}
#: Tokens that must get 403 on a route of each role (the issuer role stands apart: it opens its route only).
REFUSED_ROLES = {ADMIN: (ANALYST, ISSUER), ANALYST: (ISSUER,), ISSUER: (ADMIN, ANALYST)}


def _rules(tmp_path: Path) -> list[Rule]:
    app = create_app({"DATA_DIR": tmp_path / "walk", "ADMIN_TOKEN": "a" * 40, "ANALYST_TOKEN": "b" * 40})
    # the dashboard's pages take a session, not a bearer token: tests/system/test_dashboard.py walks them
    return [rule for rule in app.url_map.iter_rules() if rule.endpoint not in SESSION_ACCESS]


def _url(rule: Rule) -> str:
    """The rule's path with every variable filled in with the existing campaign's id."""
    values = {argument: CAMPAIGN for argument in rule.arguments}
    _, path = rule.build(values)
    return path


def _cases(tmp_path: Path) -> Iterator[tuple[str, str, str, str]]:
    """``(endpoint, method, path, needed role)`` of every method of every rule."""
    for rule in _rules(tmp_path):
        for method in sorted((rule.methods or set()) - IGNORED_METHODS):
            yield rule.endpoint, method, _url(rule), ROUTE_ACCESS[rule.endpoint]


@pytest.fixture(scope="module")
def campaign(aggregator: RunningServer) -> dict[str, Any]:
    return aggregator.create_campaign(
        id=CAMPAIGN, question="Is access enforced?", categories=["no", "yes"], epsilon=1.0
    )


def test_every_rule_of_the_url_map_is_in_the_one_table(tmp_path: Path) -> None:
    endpoints = {rule.endpoint for rule in _rules(tmp_path)}
    assert endpoints - set(ROUTE_ACCESS) == set(), "routes without an access rule"
    assert set(ROUTE_ACCESS) - endpoints == set(), "access rules naming no route (stale entries)"
    assert set(ROUTE_ACCESS.values()) <= {PUBLIC, ANALYST, ADMIN, ISSUER}
    assert {ADMIN, ANALYST, PUBLIC, ISSUER} <= set(ROUTE_ACCESS.values()), "the walk must cover all four classes"


def _assert_json_error(response: Any, status: int) -> None:
    assert response.status_code == status, (response.request.method, response.request.url, response.text)
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]


def test_non_public_routes_refuse_missing_wrong_and_lower_role_tokens(
    aggregator: RunningServer, campaign: dict[str, Any], tmp_path: Path
) -> None:
    checked = 0
    for endpoint, method, path, needed in _cases(tmp_path):
        if needed == PUBLIC:
            continue
        body = {"id": "auth-created", "question": "?", "categories": ["a", "b"], "epsilon": 1.0}
        refusals: list[tuple[dict[str, str], int]] = [
            ({}, 401),
            ({"Authorization": "Bearer"}, 401),
            ({"Authorization": f"Basic {aggregator.admin_token}"}, 401),
            ({"Authorization": "Bearer wrong-" + aggregator.admin_token}, 401),
            ({"Authorization": "Bearer " + aggregator.admin_token[:-1]}, 401),
        ]
        refusals += [(aggregator.auth(role), 403) for role in REFUSED_ROLES[needed]]
        for headers, status in refusals:
            response = aggregator.request(method, path, headers=headers, json=body)
            _assert_json_error(response, status)
            if status == 401:
                assert response.headers.get("WWW-Authenticate", "").lower().startswith("bearer"), endpoint
            checked += 1
    assert checked >= 5 * 4  # four non-public endpoints, at least five refusals each
    # Nothing the refused requests carried took effect.
    assert aggregator.get("/api/v1/campaigns/auth-created").status_code == 404
    assert aggregator.get(f"/api/v1/campaigns/{CAMPAIGN}").json()["status"] == "open"


def test_the_right_role_passes_and_admin_passes_analyst_routes(
    aggregator: RunningServer, campaign: dict[str, Any], tmp_path: Path
) -> None:
    for endpoint, method, path, needed in _cases(tmp_path):
        if needed == PUBLIC or endpoint == "campaigns.close":
            continue
        roles = {ADMIN: [ADMIN], ANALYST: [ANALYST, ADMIN], ISSUER: [ISSUER]}[needed]
        for role in roles:
            response = aggregator.request(method, path, role=role, json={"not": "a valid body"})
            assert response.status_code not in (401, 403), (endpoint, role, response.text)
            assert response.status_code < 500, (endpoint, role, response.text)


def test_public_routes_answer_without_a_token(
    aggregator: RunningServer, campaign: dict[str, Any], tmp_path: Path
) -> None:
    for endpoint, method, path, needed in _cases(tmp_path):
        if needed != PUBLIC:
            continue
        response = aggregator.request(method, path, json={"reports": []})
        assert response.status_code not in (401, 403), (endpoint, response.text)
        assert response.status_code < 500, (endpoint, response.text)


def test_the_openapi_document_declares_the_same_security_as_the_table(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    document = aggregator.get("/api/v1/openapi.json").json()
    for rule in _rules(tmp_path):
        path = rule.rule.replace("<", "{").replace(">", "}")
        for method in (rule.methods or set()) - IGNORED_METHODS:
            operation = document["paths"][path][method.lower()]
            public = ROUTE_ACCESS[rule.endpoint] == PUBLIC
            assert (operation["security"] == []) is public, (rule.endpoint, operation["security"])


@settings(max_examples=60, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(header=st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=80))
def test_arbitrary_authorization_headers_grant_nothing(aggregator: RunningServer, header: str) -> None:
    valid = {f"Bearer {aggregator.admin_token}", f"Bearer {aggregator.analyst_token}"}
    if header.strip() in valid or header.partition(" ")[2].strip() in (
        aggregator.admin_token,
        aggregator.analyst_token,
    ):
        return
    response = aggregator.get("/api/v1/campaigns", headers={"Authorization": header.encode("latin-1")})
    _assert_json_error(response, 401)
