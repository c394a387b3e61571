"""Every error path a client can reach: its status and its JSON error body; never a 500, never a crash."""

from __future__ import annotations

import contextlib
import logging
import socket
import tempfile
import time
from pathlib import Path

import pytest
from support.server import RunningServer

from deniable.aggregator.api.app import create_app
from deniable.aggregator.api.errors import STATUS_OF
from deniable.aggregator.service import Service
from deniable.shared import errors

VALID = {"id": "err-ok", "question": "q", "categories": ["a", "b"], "epsilon": 1.0}


def assert_error(response: object, status: int, code: str, fragment: str = "") -> dict:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    assert response.headers["Content-Type"] == "application/json"  # type: ignore[attr-defined]
    error = response.json()["error"]  # type: ignore[attr-defined]
    assert error["code"] == code and isinstance(error["message"], str) and error["message"]
    assert fragment in error["message"], error["message"]
    return error


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"epsilon": 0}, "'epsilon' must be a number in [0.001, 10], got 0"),
        ({"epsilon": 10.5}, "'epsilon' must be a number in [0.001, 10], got 10.5"),
        ({"epsilon": 0.0005}, "'epsilon' must be a number in [0.001, 10], got 0.0005"),
        ({"epsilon": "1"}, "got '1' (a string is not a number; send the number without quotes)"),
        ({"epsilon": True}, "got True (a boolean is not a number"),
        ({"epsilon": 1e-300}, "'epsilon' must be a number in [0.001, 10], got 1e-300"),
        ({"mechanism": "grr2"}, "'mechanism' must be one of 'auto', 'binary-rr', 'grr', 'oue', 'olh'"),
        ({"id": "Not A Slug"}, "'id' must be a slug"),
        ({"id": "x" * 65}, "'id' must be a slug"),
        ({"id": 5}, "'id' must be a slug"),
        ({"categories": ["a"]}, "'categories' must be a list of 2.."),
        ({"categories": ["a", "a"]}, "unique"),
        ({"categories": "ab"}, "'categories'"),
        ({"categories": ["a", 3]}, "'categories[1]'"),
        ({"question": ""}, "'question'"),
        ({"question": "x" * 5000}, "'question'"),
        ({"mechanism": "laplace"}, "'mechanism'"),
        ({"mechanism": "binary-rr", "categories": ["a", "b", "c"]}, "exactly 2 categories"),
        ({"mechanism": ["grr"]}, "'mechanism'"),
        ({"group_fields": ["Bad Field"]}, "group_fields[0]"),
        ({"group_fields": "country"}, "'group_fields'"),
        ({"trust_model": "trusted"}, "'trust_model'"),
        ({"budget": 3.0}, "central campaigns only"),
        ({"trust_model": "central"}, "'budget'"),
        ({"trust_model": "central", "budget": 0.5}, "at least 'epsilon'"),
        ({"trust_model": "central", "budget": 2, "adjacency": "swap"}, "'adjacency'"),
        ({"colour": "red"}, "unknown ['colour']"),
        ({"id": None, "question": None}, "'id'"),
    ],
)
def test_invalid_campaigns_are_422_with_a_message_naming_the_field(
    aggregator: RunningServer, changes: dict, fragment: str
) -> None:
    body = {**VALID, **changes}
    response = aggregator.post("/api/v1/campaigns", role="admin", json=body)
    assert_error(response, 422, "invalid_config", fragment)


def test_missing_campaign_fields_are_422(aggregator: RunningServer) -> None:
    response = aggregator.post("/api/v1/campaigns", role="admin", json={"id": "x"})
    assert_error(response, 422, "invalid_config", "missing ['question', 'categories', 'epsilon']")
    assert_error(aggregator.post("/api/v1/campaigns", role="admin", json=[1]), 400, "bad_request")


@pytest.mark.parametrize(
    ("data", "content_type", "status", "code", "fragment"),
    [
        ("{}", "text/plain", 415, "unsupported_media_type", "application/json"),
        ("id=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type", ""),
        ("{}", None, 415, "unsupported_media_type", ""),
        ("{not json", "application/json", 400, "bad_request", "not UTF-8 JSON"),
        ("", "application/json", 400, "bad_request", "not UTF-8 JSON"),
        ('{"epsilon": NaN}', "application/json", 400, "bad_request", "NaN"),
        ('{"epsilon": Infinity}', "application/json", 400, "bad_request", "Infinity"),
        (b'{"id": "\xff"}', "application/json", 400, "bad_request", "UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "application/json", 400, "bad_request", "not UTF-8 JSON"),
        ('{"a":' * 50_000 + "1" + "}" * 50_000, "application/json", 400, "bad_request", ""),
    ],
)
def test_malformed_bodies(
    aggregator: RunningServer, data: str | bytes, content_type: str | None, status: int, code: str, fragment: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    for path, role in (("/api/v1/campaigns", "admin"), ("/api/v1/campaigns/err-any/reports", None)):
        raw = data.encode() if isinstance(data, str) else data
        response = aggregator.post(path, role=role, data=raw, headers=headers)
        if path.endswith("/reports") and status == 400 and response.status_code == 404:
            continue  # an unknown campaign may be reported first; both are client errors
        assert_error(response, status, code, fragment)
    assert aggregator.get("/healthz").status_code == 200


def test_huge_bodies_are_413_and_the_server_survives(aggregator: RunningServer) -> None:
    huge = b'{"reports": ["' + b"A" * (9 * 1024 * 1024) + b'"]}'
    response = aggregator.post("/api/v1/campaigns/err-any/reports", data=huge,
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert_error(response, 413, "request_entity_too_large")
    assert aggregator.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    ("path", "role", "content_type", "size", "status"),
    [
        ("/api/v1/campaigns/err-any/reports", None, "application/json", 9 * 1024 * 1024, 413),
        ("/api/v1/campaigns/err-any/reports", None, "text/plain", 300_000, 415),
        ("/api/v1/campaigns", None, "application/json", 300_000, 401),
        ("/api/v1/campaigns/err-unknown/reports", None, "application/json", 300_000, 404),
    ],
)
def test_an_error_that_leaves_a_body_unread_closes_the_connection_and_says_so(
    aggregator: RunningServer, path: str, role: str | None, content_type: str, size: int, status: int
) -> None:
    """A body refused before it was read (413 by size) leaves the connection unusable; a client that was not
    told would send its next request into the dropped connection and see it cut. So every error answer to a
    request with a body closes, and says so."""
    body = b'{"reports": ["' + b"A" * size + b'"]}'
    for _ in range(3):
        response = aggregator.post(path, role=role, data=body, headers={"Content-Type": content_type})
        assert response.status_code == status, response.text
        assert response.headers["Connection"] == "close"
        assert aggregator.post("/api/v1/campaigns/err-unknown/reports", json={"reports": []}).status_code == 404
        assert aggregator.get("/healthz").headers.get("Connection", "keep-alive") == "keep-alive"  # HTTP/1.1: kept


def test_unknown_routes_and_methods(aggregator: RunningServer) -> None:
    assert_error(aggregator.get("/nope"), 404, "not_found")
    assert_error(aggregator.get("/api/v1/campaigns/a/b/c"), 404, "not_found")
    error = assert_error(aggregator.request("DELETE", "/api/v1/campaigns", role="admin"), 405, "method_not_allowed")
    assert error
    response = aggregator.request("PUT", "/api/v1/campaigns/x/reports")
    assert_error(response, 405, "method_not_allowed")
    assert "POST" in response.headers["Allow"]


def test_every_error_class_has_a_client_status() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    for cls in classes:
        status = next(status for klass, status in STATUS_OF if issubclass(cls, klass))
        # 5xx only for faults of the server (or of the link), never for anything a client sends
        server_faults = (errors.TransportError, errors.CampaignKeyUnavailable, errors.StoreUnavailable)
        assert 400 <= status < 600 and (status < 500 or issubclass(cls, server_faults))
    assert dict(STATUS_OF)[errors.UnknownCampaign] == 404
    assert dict(STATUS_OF)[errors.CampaignClosed] == 409
    assert dict(STATUS_OF)[errors.BudgetExceeded] == 409


def test_a_true_bug_is_a_logged_json_500_that_reveals_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: Service) -> dict:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(Service, "health", broken)
    with tempfile.TemporaryDirectory() as data_dir:
        app = create_app({"DATA_DIR": data_dir, "ADMIN_TOKEN": "a" * 20, "ANALYST_TOKEN": "b" * 20})
        with caplog.at_level(logging.ERROR, logger="deniable.aggregator"):
            response = app.test_client().get("/healthz")
    assert response.status_code == 500
    assert response.json == {
        "error": {"code": "internal_error", "message": "the aggregator hit an internal error; it has been logged"}
    }
    assert "secret internals" not in response.get_data(as_text=True)
    assert any("RuntimeError" in record.getMessage() for record in caplog.records)


def test_logs_hold_no_addresses_tokens_or_payloads(aggregator: RunningServer) -> None:
    aggregator.post("/api/v1/campaigns", role="admin", json={**VALID, "id": "err-logs", "question": "SECRETQ"})
    aggregator.get("/api/v1/campaigns/err-logs/estimate?level=0.9", role="analyst",
                   headers={"User-Agent": "agent-UA-marker"})  # fmt: skip
    logs = aggregator.logs()
    assert '"POST /api/v1/campaigns" 201' in logs
    for secret in (aggregator.admin_token, aggregator.analyst_token, "127.0.0.1 -", "agent-UA-marker",
                   "SECRETQ", "level=0.9"):  # fmt: skip
        assert secret not in logs, secret


def test_malformed_http_is_400_and_logged_without_the_client_address(aggregator: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", aggregator.port), timeout=10) as sock:
        sock.sendall(b"GARBAGE\x01 / HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400")
    deadline = time.monotonic() + 5
    while "Invalid HTTP request" not in aggregator.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    logs = aggregator.logs()
    assert "Invalid HTTP request received." in logs  # a fixed text: neither the request line nor the address
    assert "ip=127.0.0.1" not in logs and "127.0.0.1 -" not in logs and "GARBAGE" not in logs
    assert aggregator.get("/healthz").status_code == 200


# ---------------------------------------------------------------------------------------------- first contact


ESTIMATE_PARAMS = "round, group_by, group_after, level, noise, refresh"


@pytest.mark.parametrize(
    ("path", "query", "takes"),
    [
        ("/api/v1/campaigns/qp-local/estimate", "groupby=country", f"it takes {ESTIMATE_PARAMS}"),
        ("/api/v1/campaigns/qp-local/estimate", "format=csv", f"it takes {ESTIMATE_PARAMS}"),
        ("/api/v1/campaigns/qp-local", "verbose=1", "it takes none"),
        ("/api/v1/campaigns", "page=2", "it takes status, limit, offset"),
        ("/healthz", "x=1", "it takes none"),
    ],
)
def test_unknown_query_parameters_are_400_naming_the_known_ones(
    aggregator: RunningServer, path: str, query: str, takes: str
) -> None:
    with contextlib.suppress(AssertionError):
        aggregator.create_campaign(id="qp-local", question="q?", categories=["a", "b"], epsilon=1.0,
                                   group_fields=["country"])  # fmt: skip
    name = query.split("=")[0]
    error = assert_error(aggregator.get(f"{path}?{query}", role="analyst"), 400, "bad_request", f"'{name}'")
    assert takes in error["message"]
    assert aggregator.get(path, role="analyst").status_code == 200


def test_a_body_that_is_not_an_object_is_400_as_documented(aggregator: RunningServer) -> None:
    """docs/aggregator.md: 400 for a malformed body (wrong shape), 422 for a value out of range."""
    for body, kind in (([1, 2], "an array"), ("campaign", "a string"), (True, "a boolean"), (3, "a number")):
        response = aggregator.post("/api/v1/campaigns", role="admin", json=body)
        assert_error(response, 400, "bad_request", f"must be a JSON object describing the campaign, got {kind}")
    docs = (Path(__file__).parents[2] / "docs" / "aggregator.md").read_text()
    assert "400 malformed (not JSON, wrong shape" in docs


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"categories": ["yes", "yes "]}, "'categories[1]' must not begin or end with whitespace, got 'yes '"),
        ({"categories": [" yes", "no"]}, "'categories[0]' must not begin or end with whitespace, got ' yes'"),
        ({"categories": ["yes", "no\n"]}, "write 'no'"),
        ({"trust_model": "central", "budget": 2, "group_fields": ["country"],
          "group_values": {"country": ["NL", "NL "]}}, "'group_values.country[1]' must not begin or end"),
    ],
)  # fmt: skip
def test_labels_with_surrounding_whitespace_are_refused_at_creation(
    aggregator: RunningServer, changes: dict, fragment: str
) -> None:
    body = {**VALID, **changes}
    assert_error(aggregator.post("/api/v1/campaigns", role="admin", json=body), 422, "invalid_config", fragment)
