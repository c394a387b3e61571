"""The HTTP contract is written once (deniable.shared.contract) and both sides agree with it."""

from __future__ import annotations

import pytest

from deniable.aggregator.openapi_document import document
from deniable.shared import contract
from deniable.shared.contract import (
    BATCH_STATUSES,
    CLIENT_BATCH,
    MAX_BATCH,
    campaign_path,
    error_body,
    parse_error,
)


def test_public_names_are_pinned() -> None:
    assert sorted(contract.__all__) == [
        "API_PREFIX", "BATCH_STATUSES", "CAMPAIGNS_PATH", "CLIENT_BATCH", "ErrorBody", "MAX_BATCH",
        "SAME_REPORT_REASON", "SPENT_TOKEN_REASON", "campaign_path", "error_body", "parse_error",
    ]  # fmt: skip


def test_an_error_body_parses_back_to_what_was_built() -> None:
    body = error_body("budget_exceeded", "no budget left", spent=1.0, remaining=0.0)
    parsed = parse_error(body)
    assert parsed is not None and parsed.code == "budget_exceeded" and parsed.message == "no budget left"
    assert dict(parsed.extra) == {"spent": 1.0, "remaining": 0.0}
    assert parsed.text() == "budget_exceeded: no budget left"


@pytest.mark.parametrize("body", [None, "<html>502</html>", [], {"error": "x"}, {"detail": "nope"}])
def test_what_is_not_the_error_shape_parses_to_none(body: object) -> None:
    assert parse_error(body) is None


def test_paths_quote_the_campaign_id() -> None:
    assert campaign_path("smoking", "reports") == "/api/v1/campaigns/smoking/reports"
    assert campaign_path("a/b") == "/api/v1/campaigns/a%2Fb"


def test_the_openapi_document_states_the_batch_contract() -> None:
    doc = document()
    batch = doc["components"]["schemas"]
    reports = next(s for s in batch.values() if s.get("required") == ["reports"])
    assert reports["properties"]["reports"]["maxItems"] == MAX_BATCH
    assert CLIENT_BATCH <= MAX_BATCH and BATCH_STATUSES == ("accepted", "duplicate", "rejected")
