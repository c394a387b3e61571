"""The OpenAPI document is true: it lists exactly the app's routes, with the access table's security, and
the responses the app really gives conform to it (a bounded schemathesis run, in process)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from deniable.aggregator.api.app import create_app
from deniable.aggregator.api.auth import PUBLIC, ROUTE_ACCESS, SESSION_ACCESS
from deniable.aggregator.openapi_document import document

ADMIN = "openapi-admin-token"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    data_dir = tmp_path_factory.mktemp("openapi")
    return create_app({"DATA_DIR": data_dir, "ADMIN_TOKEN": ADMIN, "ANALYST_TOKEN": "openapi-analyst"})


def app_operations(app: Flask) -> dict[tuple[str, str], str]:
    """``{(path in OpenAPI form, method): endpoint}`` for every route of the app."""
    operations = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint in SESSION_ACCESS:  # the dashboard's HTML pages are not the API
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            operations[(path, method.lower())] = rule.endpoint
    return operations


def test_every_route_is_documented_and_nothing_else(app: Flask) -> None:
    documented = {(path, method) for path, item in document()["paths"].items() for method in item}
    assert documented == set(app_operations(app))


def test_every_route_is_classified_and_its_security_matches_the_table(app: Flask) -> None:
    operations = app_operations(app)
    assert set(operations.values()) == set(ROUTE_ACCESS)  # one table, complete, nothing stale
    paths = document()["paths"]
    for (path, method), endpoint in operations.items():
        security = paths[path][method]["security"]
        expected = [] if ROUTE_ACCESS[endpoint] == PUBLIC else [{"bearerAuth": []}]
        assert security == expected, (path, method)


def test_every_operation_documents_its_errors_with_the_error_schema() -> None:
    doc = document()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            assert operation["operationId"] and operation["summary"]
            for status, response in operation["responses"].items():
                schema = response["content"]["application/json"]["schema"]
                if status.startswith("4"):
                    assert schema == {"$ref": "#/components/schemas/Error"}, (path, method, status)
            if operation["security"]:
                assert {"401", "403"} <= set(operation["responses"]), (path, method)


def test_the_served_document_is_the_module_document(app: Flask) -> None:
    response = app.test_client().get("/api/v1/openapi.json")
    assert response.status_code == 200 and response.json == document()


@pytest.fixture(scope="module")
def seeded_app(app: Flask) -> Iterator[Flask]:
    client = app.test_client()
    client.post(
        "/api/v1/campaigns",
        json={"id": "fuzz", "question": "q", "categories": ["a", "b"], "epsilon": 1.0},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    client.post(  # a survey, so that its estimates are checked against the document too
        "/api/v1/campaigns",
        json={"id": "fuzz-survey", "title": "t", "epsilon": 1.0, "split": "sampling", "questions": [
            {"id": "c", "text": "c?", "kind": "choice", "categories": ["a", "b"]},
            {"id": "m", "text": "m?", "kind": "multi", "options": ["x", "y", "z"], "max_selected": 2},
            {"id": "v", "text": "v?", "kind": "number", "range": [0, 10]},
        ]},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )  # fmt: skip
    yield app


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.slow
def test_responses_conform_to_the_document(seeded_app: Flask) -> None:
    loaded = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", seeded_app)
    operations = [result.ok() for result in loaded.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert len(labels) >= len(app_operations(seeded_app)) - 1  # schemathesis skips the document itself
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def call(case: schemathesis.Case) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {ADMIN}"}, checks=CHECKS)

        call()


def _json_schema(node: object) -> object:
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable`` as a null alternative, boolean exclusive bounds
    as numeric ones."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if out.get(exclusive) is True:
            out[exclusive] = out.pop(bound)
        elif out.get(exclusive) is False:
            del out[exclusive]
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def test_survey_estimates_the_app_serves_validate_against_the_document(seeded_app: Flask) -> None:
    """Real estimate bodies of a survey with reports (every question, one question) against the 200 schema."""
    import jsonschema_rs

    from deniable.client.report import normalize_answers, randomize_survey, seal_answer
    from deniable.shared.descriptor import CampaignConfig

    client = seeded_app.test_client()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    config = CampaignConfig.from_json(client.get("/api/v1/campaigns/fuzz-survey", headers=auth).json)
    envelopes = [
        seal_answer(config, bytes([i]) * 32, randomize_survey(config, normalize_answers(
            config, {"c": "ab"[i % 2], "m": ["x", "z"][: i % 3], "v": i % 11})), None).to_json()
        for i in range(40)
    ]  # fmt: skip
    posted = client.post("/api/v1/campaigns/fuzz-survey/reports", json={"reports": envelopes}, headers=auth)
    assert posted.status_code == 200 and posted.json["accepted"] == 40
    doc = document()
    response = doc["paths"]["/api/v1/campaigns/{campaign_id}/estimate"]["get"]["responses"]["200"]
    schema = {**_json_schema(response["content"]["application/json"]["schema"]),  # type: ignore[dict-item]
              "components": _json_schema(doc["components"])}  # fmt: skip
    validator = jsonschema_rs.validator_for(schema)
    for query in ("", "?question=m", "?question=v&level=0.9"):
        body = client.get(f"/api/v1/campaigns/fuzz-survey/estimate{query}", headers=auth).json
        assert body["questions"], body
        errors = [error.message for error in validator.iter_errors(body)]
        assert not errors, (query, errors[:3])
    legacy = client.get("/api/v1/campaigns/fuzz/estimate", headers=auth).json
    assert not [error.message for error in validator.iter_errors(legacy)]


def test_every_reference_names_a_schema_of_the_document() -> None:
    """Each ``$ref`` resolves to a schema under components/schemas (a schema nested by a misplaced brace
    inside another one left the token and release routes pointing at nothing)."""
    doc = document()
    schemas = doc["components"]["schemas"]
    refs: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    prefix = "#/components/schemas/"
    assert refs and all(ref.startswith(prefix) for ref in refs)
    assert sorted(ref.removeprefix(prefix) for ref in refs if ref.removeprefix(prefix) not in schemas) == []
