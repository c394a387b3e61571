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

from deniable.aggregator.app import create_app
from deniable.aggregator.auth import PUBLIC, ROUTE_ACCESS, SESSION_ACCESS
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
