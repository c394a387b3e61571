"""Schemathesis against the real server: every operation of ``/api/v1/openapi.json``, zero 5xx.

For each operation of the served OpenAPI document, schemathesis generates requests that fit the schema
(positive) and requests that break it (negative: wrong types, missing fields, out-of-range values, bad
query strings), sent with the admin token so that the authorized code paths run, once with generated path
parameters and once aimed at existing campaigns (local and central). Every response must pass
schemathesis' ``not_a_server_error`` check, and every 4xx must be the JSON error body
``{"error": {"code", "message"}}``. After the run the server is still healthy and still ingests a valid
report.

Bounded and seeded: ``derandomize=True``, :data:`EXAMPLES` examples per operation and mode (env
``DENIABLE_FUZZ_EXAMPLES``, default 25 in CI; ``make fuzz`` runs a longer one).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator.openapi_document import document

EXAMPLES = int(os.environ.get("DENIABLE_FUZZ_EXAMPLES", "25"))
OPERATIONS = [f"{method.upper()} {path}" for path, operations in document()["paths"].items() for method in operations]
#: Operations with something schemathesis can break (a body, a query string or a bearer token); the others
#: (no parameters, or only a free-form path string) have no negative cases.
NEGATIVE_OPERATIONS = [
    f"{method.upper()} {path}"
    for path, operations in document()["paths"].items()
    for method, operation in operations.items()
    if "requestBody" in operation
    or operation.get("security")
    or any(parameter["in"] != "path" for parameter in operation.get("parameters", []))
]
CASES = [(label, GenerationMode.POSITIVE) for label in OPERATIONS] + [
    (label, GenerationMode.NEGATIVE) for label in NEGATIVE_OPERATIONS
]
LOCAL = "fuzz-local"
CENTRAL = "fuzz-central"
CLOSABLE = "fuzz-closable"
#: Requests sent per operation label, for the summary printed at the end of the module.
SENT: Counter[str] = Counter()
STATUSES: Counter[int] = Counter()

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]


@pytest.fixture(scope="module")
def schema(aggregator: RunningServer) -> Any:
    """The OpenAPI document as the running server serves it, plus the campaigns the cases aim at."""
    aggregator.create_campaign(
        id=LOCAL, question="Fuzzed?", categories=["a", "b", "c"], epsilon=1.0, mechanism="oue",
        group_fields=["country"],
    )  # fmt: skip
    aggregator.create_campaign(
        id=CENTRAL, question="Central?", categories=["x", "y"], epsilon=0.5, trust_model="central", budget=3.0
    )
    aggregator.create_campaign(id=CLOSABLE, question="Close me?", categories=["no", "yes"], epsilon=1.0)
    return schemathesis.openapi.from_url(aggregator.url + "/api/v1/openapi.json", timeout=10)


def _check_json_error(response: Any, label: str) -> None:
    """A 4xx must be ``{"error": {"code", "message"}}`` as JSON (``response``: schemathesis' Response)."""
    if response.status_code < 400:
        return
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.startswith("application/json"), (label, response.status_code, response.text[:300])
    error = response.json().get("error")
    assert isinstance(error, dict), (label, response.text[:300])
    assert isinstance(error.get("code"), str) and error["code"], (label, response.text[:300])
    assert isinstance(error.get("message"), str) and error["message"], (label, response.text[:300])


def _fuzz(server: RunningServer, schema: Any, label: str, mode: GenerationMode, campaign: str | None) -> None:
    operation = schema.find_operation_by_label(label)
    assert operation is not None, f"the served document lacks {label}"
    fixed = {"campaign_id": campaign} if campaign and "{campaign_id}" in label else None
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
    session = requests.Session()
    headers = server.auth("admin")

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=server.url, session=session, headers=headers, timeout=30)
        SENT[label] += 1
        STATUSES[response.status_code] += 1
        case.validate_response(response, checks=[not_a_server_error], headers=headers)
        _check_json_error(response, label)

    try:
        run()
    finally:
        session.close()


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label}-{mode}" for label, mode in CASES])
def test_generated_requests_never_get_a_server_error(
    aggregator: RunningServer, schema: Any, label: str, mode: GenerationMode
) -> None:
    _fuzz(aggregator, schema, label, mode, campaign=None)
    if "{campaign_id}" in label:
        targets = [CLOSABLE] if label.endswith("/close") else [LOCAL, CENTRAL]
        for campaign in targets:
            _fuzz(aggregator, schema, label, mode, campaign=campaign)


def test_the_fuzzed_operations_are_every_route(aggregator: RunningServer, schema: Any) -> None:
    from deniable.aggregator import create_app
    from deniable.aggregator.api.auth import SESSION_ACCESS

    app = create_app({"DATA_DIR": aggregator.data_dir.with_name("walk"), "ADMIN_TOKEN": "a" * 32,
                      "ANALYST_TOKEN": "b" * 32})  # fmt: skip
    routes = {
        f"{method} {rule.rule.replace('<', '{').replace('>', '}')}"
        for rule in app.url_map.iter_rules()
        if rule.endpoint not in SESSION_ACCESS  # the dashboard's HTML pages: tests/system/test_dashboard.py
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    assert routes == set(OPERATIONS)
    assert set(SENT) == set(OPERATIONS), "some operation was never fuzzed (run the whole module)"


def test_the_server_is_healthy_and_ingests_after_fuzzing(aggregator: RunningServer, schema: Any) -> None:
    assert aggregator.is_alive()
    assert aggregator.get("/healthz").json() == {"status": "ok"}
    raw = aggregator.create_campaign(id="after-fuzz", question="Still fine?", categories=["no", "yes"], epsilon=1.0)
    envelopes = simulate_envelopes(raw, [0, 1, 1], rng=np.random.default_rng(5))
    assert upload(aggregator, "after-fuzz", envelopes) == {"accepted": 3, "duplicate": 0, "rejected": 0}
    assert aggregator.estimate("after-fuzz")["n"] == 3
    assert "Traceback" not in aggregator.logs()
    total = sum(SENT.values())
    print(
        f"\nschemathesis: {total} requests over {len(SENT)} operations "
        f"({EXAMPLES} examples per operation, mode and target), statuses {dict(sorted(STATUSES.items()))}, 0 5xx"
    )
