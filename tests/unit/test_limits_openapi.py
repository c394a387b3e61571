"""Every bound the OpenAPI document states is the one deniable.shared.limits (or the contract) holds: the
document is built from those constants, and this test fails if a literal creeps back in or drifts."""

from __future__ import annotations

import re

from deniable.aggregator.openapi_document import document
from deniable.shared import limits
from deniable.shared.contract import MAX_BATCH
from deniable.shared.fields import ROUND_PATTERN


def schemas() -> dict:
    return document()["components"]["schemas"]


def test_the_campaign_create_schema_states_the_descriptor_limits() -> None:
    create = schemas()["CampaignCreate"]["properties"]
    assert (create["epsilon"]["minimum"], create["epsilon"]["maximum"]) == limits.CAMPAIGN_EPSILON
    assert create["question"]["maxLength"] == limits.MAX_QUESTION_CHARS
    assert create["categories"]["maxItems"] == limits.MAX_CATEGORIES
    assert create["categories"]["items"]["maxLength"] == limits.MAX_CATEGORY_CHARS
    assert create["group_fields"]["maxItems"] == limits.MAX_GROUP_FIELDS
    assert create["group_values"]["maxProperties"] == limits.MAX_GROUP_FIELDS
    assert create["group_values"]["additionalProperties"]["maxItems"] == limits.MAX_GROUP_VALUES
    assert create["group_values"]["additionalProperties"]["items"]["maxLength"] == limits.MAX_GROUP_VALUE_CHARS
    assert create["budget"]["maximum"] == limits.MAX_BUDGET
    tokens = create["admission"]["properties"]["tokens_per_account"]
    assert tokens["maximum"] == limits.MAX_TOKENS_PER_ACCOUNT


def test_slugs_rounds_and_batches_are_the_codes() -> None:
    slug = schemas()["CampaignCreate"]["properties"]["id"]
    assert slug["pattern"] == limits.SLUG_PATTERN
    longest = re.search(r"\{0,(\d+)\}", limits.SLUG_PATTERN)
    assert longest is not None and slug["maxLength"] == int(longest.group(1)) + 1
    round_schemas = [s for s in _walk(document()) if s.get("pattern") == ROUND_PATTERN]
    assert round_schemas and all(s["maxLength"] == limits.MAX_ROUND_CHARS for s in round_schemas)
    reports = next(s for s in schemas().values() if s.get("required") == ["reports"])
    assert reports["properties"]["reports"]["maxItems"] == MAX_BATCH


def test_the_validators_enforce_what_the_document_states() -> None:
    from deniable.shared.fields import check_categories, check_group_fields

    check_categories([f"c{i}" for i in range(limits.MAX_CATEGORIES)])
    check_group_fields([f"g{i}" for i in range(limits.MAX_GROUP_FIELDS)])
    import pytest

    from deniable.shared.errors import InvalidConfig

    with pytest.raises(InvalidConfig, match=str(limits.MAX_CATEGORIES)):
        check_categories([f"c{i}" for i in range(limits.MAX_CATEGORIES + 1)])
    with pytest.raises(InvalidConfig, match=str(limits.MAX_GROUP_FIELDS)):
        check_group_fields([f"g{i}" for i in range(limits.MAX_GROUP_FIELDS + 1)])


def _walk(node: object) -> list[dict]:
    found: list[dict] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found
