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


# -- every bound and pattern, wherever it stands in the document ------------------------------------------

#: Bounds the document may write as literals: structural ones (a count is ≥ 0, a list holds ≥ 1 item, an
#: interval has 2 ends, a probability is in [0, 1]), not limits of deniable.
_STRUCTURAL = {0, 1, 2}
_BOUND_KEYS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "maxProperties")


def _limit_values() -> set[float]:
    values: set[float] = {MAX_BATCH}
    for name in limits.__all__:
        value = getattr(limits, name)
        if isinstance(value, tuple):
            values.update(v for v in value if isinstance(v, int | float) and not isinstance(v, bool))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            values.add(value)
    return values


def test_every_bound_in_the_document_is_a_limit() -> None:
    """A bound other than a structural 0, 1 or 2 is the value of a constant of deniable.shared.limits (or the
    contract's MAX_BATCH): a new literal fails here until it moves there."""
    known = _limit_values()
    stray = sorted(
        {(key, node[key]) for node in _walk(document()) for key in _BOUND_KEYS if key in node}
        - {(key, value) for key in _BOUND_KEYS for value in known | _STRUCTURAL},
        key=str,
    )
    assert not stray, stray


def test_every_pattern_in_the_document_is_a_limit() -> None:
    patterns = {getattr(limits, name) for name in limits.__all__ if name.endswith("_PATTERN")}
    stray = sorted({node["pattern"] for node in _walk(document()) if isinstance(node.get("pattern"), str)} - patterns)
    assert not stray, stray


def test_ids_keys_and_signatures_are_the_limits_patterns() -> None:
    envelope = schemas()["Envelope"]["properties"]
    assert envelope["report_id"]["pattern"] == limits.REPORT_ID_PATTERN
    assert envelope["pseudonym"]["pattern"] == limits.PSEUDONYM_PATTERN
    assert envelope["device_key"]["pattern"] == limits.KEY_PATTERN
    assert envelope["sig"]["pattern"] == limits.SIGNATURE_PATTERN
    assert schemas()["CampaignConfig"]["properties"]["public_key"]["pattern"] == limits.KEY_PATTERN
    import pytest

    from deniable.shared.ids import check_pseudonym, check_report_id

    check_report_id("a" * limits.REPORT_ID_HEX_DIGITS, ValueError)
    check_pseudonym("a" * limits.PSEUDONYM_HEX_DIGITS, ValueError)
    with pytest.raises(ValueError, match=str(limits.REPORT_ID_HEX_DIGITS)):
        check_report_id("a" * (limits.REPORT_ID_HEX_DIGITS + 1), ValueError)
    with pytest.raises(ValueError, match=str(limits.PSEUDONYM_HEX_DIGITS)):
        check_pseudonym("a" * (limits.PSEUDONYM_HEX_DIGITS - 1), ValueError)


def test_the_slug_length_is_one_constant() -> None:
    import pytest

    from deniable.shared.errors import InvalidConfig
    from deniable.shared.fields import check_slug
    from deniable.shared.ids import check_campaign_id

    for schema in (schemas()["CampaignCreate"]["properties"]["id"], schemas()["SurveyQuestion"]["properties"]["id"]):
        assert schema["maxLength"] == limits.SLUG_MAX_CHARS and schema["pattern"] == limits.SLUG_PATTERN
    check_slug("id", "a" * limits.SLUG_MAX_CHARS)
    check_campaign_id("a" * limits.SLUG_MAX_CHARS, InvalidConfig)
    with pytest.raises(InvalidConfig):
        check_slug("id", "a" * (limits.SLUG_MAX_CHARS + 1))
    with pytest.raises(InvalidConfig, match=f"1-{limits.SLUG_MAX_CHARS} characters"):
        check_campaign_id("a" * (limits.SLUG_MAX_CHARS + 1), InvalidConfig)
    estimate = next(iter(document()["paths"]["/api/v1/campaigns/{campaign_id}/estimate"].values()))
    queries = {p["name"]: p["schema"] for p in estimate["parameters"] if p["in"] == "query"}
    for name in ("group_by", "question", "group_after"):
        assert queries[name]["maxLength"] == limits.MAX_QUERY_CHARS
    assert max(limits.SLUG_MAX_CHARS, limits.MAX_GROUP_VALUE_CHARS) <= limits.MAX_QUERY_CHARS


def test_the_shuffler_bounds_are_the_validators() -> None:
    import pytest

    from deniable.shared.errors import InvalidConfig
    from deniable.shared.keys import encode_key
    from deniable.shared.shuffle import ShufflerInfo

    shuffler = schemas()["CampaignCreate"]["properties"]["shuffler"]["properties"]
    low, high = limits.SHUFFLE_MIN_BATCH_RANGE
    assert (shuffler["min_batch"]["minimum"], shuffler["min_batch"]["maximum"]) == (low, high)
    assert shuffler["url"]["maxLength"] == limits.SHUFFLER_URL_MAX_CHARS
    key = encode_key(bytes(range(32)))

    def info(url: str = "https://s.example", min_batch: int = low) -> ShufflerInfo:
        return ShufflerInfo(url=url, public_key=key, verify_key=key, min_batch=min_batch)

    info(min_batch=low), info(min_batch=high)
    info(url="https://s.example/" + "a" * (limits.SHUFFLER_URL_MAX_CHARS - 18))
    for bad in (low - 1, high + 1):
        with pytest.raises(InvalidConfig, match=str(high)):
            info(min_batch=bad)
    with pytest.raises(InvalidConfig, match=str(limits.SHUFFLER_URL_MAX_CHARS)):
        info(url="https://s.example/" + "a" * limits.SHUFFLER_URL_MAX_CHARS)


def test_the_survey_bounds_are_the_validators() -> None:
    import pytest

    from deniable.shared.errors import InvalidConfig
    from deniable.shared.survey import build_questions

    survey = schemas()["CampaignConfig"]["properties"]["questions"]
    assert survey["maxItems"] == limits.MAX_QUESTIONS
    question = schemas()["SurveyQuestion"]["properties"]
    assert (question["share"]["minimum"], question["share"]["maximum"]) == limits.QUESTION_SHARE
    assert (question["steps"]["minimum"], question["steps"]["maximum"]) == limits.NUMBER_STEPS
    assert question["text"]["maxLength"] == limits.MAX_QUESTION_CHARS

    def spec(i: int, **extra: object) -> dict[str, object]:
        return {"id": f"q{i}", "text": "?", "kind": "choice", "categories": ["a", "b"], **extra}

    build_questions([spec(i) for i in range(limits.MAX_QUESTIONS)], epsilon=1.0, split="sampling")
    with pytest.raises(InvalidConfig, match=f"1..{limits.MAX_QUESTIONS} questions"):
        build_questions([spec(i) for i in range(limits.MAX_QUESTIONS + 1)], epsilon=1.0, split="sampling")
    low, high = limits.QUESTION_SHARE
    build_questions([spec(0, share=low), spec(1, share=high)], epsilon=1.0, split="per_question")
    for bad in (low - 1, high + 1):
        with pytest.raises(InvalidConfig, match=rf"\[{low}, {high}\]"):
            build_questions([spec(0, share=bad), spec(1)], epsilon=1.0, split="per_question")


def test_the_token_issuing_bounds_are_the_validators() -> None:
    import pytest

    from deniable.aggregator.service import _issue_body
    from deniable.shared.errors import InvalidParameter

    issue = schemas()["TokenIssue"]["properties"]
    assert issue["account"]["maxLength"] == limits.MAX_ACCOUNT_CHARS
    assert issue["token_requests"]["maxItems"] == limits.MAX_TOKEN_REQUESTS
    _issue_body({"account": "a" * limits.MAX_ACCOUNT_CHARS, "token_requests": ["x"] * limits.MAX_TOKEN_REQUESTS})
    with pytest.raises(InvalidParameter, match=str(limits.MAX_ACCOUNT_CHARS)):
        _issue_body({"account": "a" * (limits.MAX_ACCOUNT_CHARS + 1), "token_requests": ["x"]})
    with pytest.raises(InvalidParameter, match=str(limits.MAX_TOKEN_REQUESTS)):
        _issue_body({"account": "a", "token_requests": ["x"] * (limits.MAX_TOKEN_REQUESTS + 1)})
