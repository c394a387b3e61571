"""The campaign descriptor: strict validation, round trips, pinning, and payload checks per mechanism."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import any_json, campaign_configs

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import MAX_CATEGORIES, CampaignConfig
from deniable.shared.envelope import open_envelope
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.formats import FORMAT_VERSION, SUITE_ID
from deniable.shared.keys import encode_key, generate_keypair
from deniable.shared.mechanisms import OLH, OUE, BinaryRR, OLHReport, choose_mechanism

PRIVATE, PUBLIC = generate_keypair()
KEY = encode_key(PUBLIC)


def config(**changes: Any) -> CampaignConfig:
    args: dict[str, Any] = {
        "id": "smoking-2026",
        "question": "Did you smoke in the last 30 days?",
        "categories": ["no", "yes"],
        "epsilon": 1.0,
        "public_key": KEY,
        "mechanism": "binary-rr",
        "group_fields": ["country"],
    }
    args.update(changes)
    fields = args["group_fields"]
    if args.get("trust_model") == "central" and isinstance(fields, list) and "group_values" not in changes:
        args["group_values"] = {name: list(COUNTRIES) for name in fields if isinstance(name, str)}
    return CampaignConfig.create(**args)


#: The declared values of a central campaign's group fields in these tests.
COUNTRIES = ("NL", "DE", "FR")


def good_json(**changes: Any) -> dict[str, Any]:
    obj = config().to_json()
    obj.update(changes)
    return obj


# ---------------------------------------------------------------------------------------- construction


def test_to_json_has_the_documented_fields() -> None:
    assert config().to_json() == {
        "id": "smoking-2026",
        "question": "Did you smoke in the last 30 days?",
        "categories": ["no", "yes"],
        "epsilon": 1.0,
        "mechanism": "binary-rr",
        "params": {"k": 2},
        "group_fields": ["country"],
        "public_key": KEY,
        "format_version": FORMAT_VERSION,
        "suite": SUITE_ID,
        "status": "open",
        "trust_model": "local",
        "budget": None,
        "adjacency": None,
    }


@pytest.mark.parametrize(("k", "epsilon"), [(2, 1.0), (4, 1.0), (16, 1.0), (64, 2.0), (200, 0.5)])
def test_auto_picks_the_lowest_variance_mechanism(k: int, epsilon: float) -> None:
    c = config(categories=[f"c{i}" for i in range(k)], epsilon=epsilon, mechanism="auto")
    assert c.mechanism == choose_mechanism(k, epsilon).name
    assert c.params["k"] == k


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 3.3, 10.0])
def test_olh_params_carry_g(epsilon: float) -> None:
    c = config(categories=[f"c{i}" for i in range(50)], epsilon=epsilon, mechanism="olh")
    assert dict(c.params) == {"k": 50, "g": max(2, round(math.exp(epsilon)) + 1)}
    assert c.params["g"] == c.build_mechanism().g  # type: ignore[attr-defined]


def test_central_campaign_defaults() -> None:
    c = config(trust_model="central", mechanism="auto", budget=3, epsilon=0.5)
    assert (c.mechanism, c.budget, c.adjacency) == ("none", 3.0, "add-remove")
    assert config(trust_model="central", mechanism=None, budget=1, adjacency="replace").adjacency == "replace"
    with pytest.raises(InvalidConfig, match="is a central campaign"):
        c.build_mechanism()


def test_create_accepts_raw_key_bytes_and_lists() -> None:
    assert config(public_key=PUBLIC) == config()
    assert config().categories == ("no", "yes") and config().group_fields == ("country",)


def test_config_is_immutable() -> None:
    c = config()
    with pytest.raises(AttributeError):
        c.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.params["k"] = 3  # type: ignore[index]


# ---------------------------------------------------------------------------------------- validation

BAD_FIELDS = [
    ({"id": "Smoking"}, "'id' must be a slug matching"),
    ({"id": "-x"}, "'id' must be a slug"),
    ({"id": "a" * 65}, "'id' must be a slug"),
    ({"id": 3}, "'id' must be a slug"),
    ({"question": ""}, "'question' must be a string of 1..2000"),
    ({"question": "?" * 2001}, "'question' must be a string of 1..2000"),
    ({"epsilon": 0}, r"'epsilon' must be a number in \[0.001, 10\], got 0"),
    ({"epsilon": -1.0}, r"'epsilon' must be a number in \[0.001, 10\], got -1"),
    ({"epsilon": 10.5}, r"in \[0.001, 10\], got 10.5"),
    ({"epsilon": 0.0009}, r"in \[0.001, 10\], got 0.0009"),
    ({"epsilon": True}, r"got True \(a boolean is not a number"),
    ({"epsilon": "1"}, r"got '1' \(a string is not a number"),
    ({"epsilon": math.nan}, "'epsilon' must be a number in .*, got nan"),
    ({"epsilon": math.inf}, "'epsilon' must be a number in .*, got inf"),
    ({"categories": ["only"]}, "'categories' must be a list of 2..4096 labels, got 1 of them"),
    ({"categories": [f"c{i}" for i in range(MAX_CATEGORIES + 1)]}, "2..4096 labels, got 4097"),
    ({"categories": "no,yes"}, "'categories' must be a JSON array|'categories' must be a list"),
    ({"categories": ["no", "no"]}, "'categories' must be unique, 'no' appears twice"),
    ({"categories": ["no", ""]}, r"'categories\[1\]' must be a string of 1..200"),
    ({"categories": ["no", "y" * 201]}, r"'categories\[1\]'"),
    ({"categories": ["no", 1]}, r"'categories\[1\]'"),
    ({"categories": ["no", "\ud800"]}, "lone surrogate"),
    ({"mechanism": "rappor"}, "'mechanism' must be one of 'binary-rr', 'grr', 'oue', 'olh'"),
    ({"mechanism": "none"}, "'mechanism' must be one of"),
    ({"categories": ["a", "b", "c"]}, "'binary-rr' needs exactly 2 categories, got 3"),
    ({"params": {"k": 3}}, r"'params.k' must be 2 \(the number of categories\), got 3"),
    ({"params": {"k": True}}, "'params.k' must be 2"),
    ({"params": {"k": 2, "g": 4}}, "'params' must have exactly the keys 'k'"),
    ({"params": {}}, "'params' must have exactly the keys 'k', got none"),
    ({"params": [2]}, "'params' must be a JSON object|'params' must be an object"),
    ({"mechanism": "olh", "params": {"k": 2, "g": 3}}, r"'params.g' must be 4 \(round\(e\^epsilon\) \+ 1\)"),
    ({"mechanism": "olh", "params": {"k": 2}}, "'params' must have exactly the keys 'g', 'k'"),
    ({"group_fields": ["country"] * 2}, "'group_fields' must be unique"),
    ({"group_fields": ["Country"]}, r"'group_fields\[0\]' must be a slug"),
    ({"group_fields": [f"g{i}" for i in range(9)]}, "'group_fields' must be a list of at most 8"),
    ({"public_key": KEY + "A"}, "'public_key' must be 32 bytes in base64url"),
    ({"public_key": encode_key(bytes(32))}, "small-order"),
    ({"public_key": None}, "'public_key' must be a base64url string"),
    ({"format_version": 4}, r"'format_version' must be one of \[1, 2, 3\], got 4; update the client"),
    ({"format_version": True}, "'format_version' must be one of"),
    ({"suite": "P256-HKDF-SHA256-AES128GCM"}, "'suite' must be 'X25519-HKDF-SHA256-ChaCha20Poly1305'"),
    ({"status": "paused"}, "'status' must be one of 'open', 'closed'"),
    ({"trust_model": "shuffle"}, "'trust_model' must be one of 'local', 'central'"),
    ({"budget": 5.0}, "'budget' and 'adjacency' apply to central campaigns only"),
    ({"adjacency": "replace"}, "apply to central campaigns only"),
    ({"trust_model": "central"}, "central campaigns have no device mechanism: 'mechanism' must be 'none'"),
    ({"trust_model": "central", "mechanism": "none"}, "central campaigns need a 'budget'"),
    ({"trust_model": "central", "mechanism": "none", "budget": 0.5}, r"'budget' \(0.5\) must be at least"),
    (
        {"trust_model": "central", "mechanism": "none", "budget": 101},
        r"'budget' must be a finite number in \(0, 100\]",
    ),
    (
        {"trust_model": "central", "mechanism": "none", "budget": 2, "adjacency": "swap"},
        "'adjacency' must be one of",
    ),
]


@pytest.mark.parametrize(("changes", "match"), BAD_FIELDS)
def test_from_json_rejects_each_bad_field_naming_it(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidConfig, match=match):
        CampaignConfig.from_json(good_json(**changes))


def test_from_json_rejects_wrong_key_sets_and_non_objects() -> None:
    obj = good_json()
    del obj["suite"]
    with pytest.raises(InvalidConfig, match="missing 'suite'"):
        CampaignConfig.from_json(obj)
    with pytest.raises(InvalidConfig, match="unknown 'secret'"):
        CampaignConfig.from_json(good_json(secret=1))
    with pytest.raises(InvalidConfig, match="must be a JSON object"):
        CampaignConfig.from_json([good_json()])


def test_budget_and_adjacency_may_be_omitted() -> None:
    obj = good_json()
    del obj["budget"], obj["adjacency"]
    assert CampaignConfig.from_json(obj) == config()


def test_boundaries_are_inclusive() -> None:
    assert config(epsilon=10).epsilon == 10.0
    big = config(categories=[str(i) for i in range(MAX_CATEGORIES)], mechanism="oue", question="?" * 2000)
    assert big.k == MAX_CATEGORIES
    assert config(group_fields=[f"g{i}" for i in range(8)], categories=["x" * 200, "y"]).k == 2
    assert config(trust_model="central", mechanism="none", budget=100, epsilon=10).budget == 100.0


# ---------------------------------------------------------------------------------------- round trips


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(campaign_configs(KEY))
def test_config_json_round_trip(c: CampaignConfig) -> None:
    wire = json.loads(json.dumps(c.to_json()))
    back = CampaignConfig.from_json(wire)
    assert back == c
    assert back.pinned_fingerprint() == c.pinned_fingerprint()


@settings(max_examples=150, deadline=None)
@given(
    key=st.sampled_from(sorted(good_json())),
    value=st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=5)
    | st.lists(st.text(max_size=3) | st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=3), st.integers()),
)
def test_any_single_field_mutation_raises_only_invalid_config(key: str, value: object) -> None:
    try:
        c = CampaignConfig.from_json(good_json(**{key: value}))
    except InvalidConfig:
        return
    assert CampaignConfig.from_json(c.to_json()) == c


# ---------------------------------------------------------------------------------------- categories, pinning


def test_category_index_and_its_error_message() -> None:
    c = config()
    assert (c.category_index("no"), c.category_index("yes")) == (0, 1)
    with pytest.raises(
        InvalidParameter,
        match=r"^value 'maybe' is not a category of campaign 'smoking-2026'; expected one of 'no', 'yes'$",
    ):
        c.category_index("maybe")
    with pytest.raises(InvalidParameter, match=r"expected one of 'c0', .*'c9', \.\.\. \(20 categories\)"):
        config(categories=[f"c{i}" for i in range(20)], mechanism="grr").category_index(3)


def test_fingerprint_is_sha256_of_the_canonical_config_without_status() -> None:
    c = config(epsilon=0.5)
    pinned = {k: v for k, v in c.to_json().items() if k != "status"}
    text = json.dumps(pinned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert c.pinned_fingerprint() == hashlib.sha256(text.encode()).hexdigest()


def test_fingerprint_writes_whole_floats_as_integers() -> None:
    c = config(epsilon=1.0)
    pinned = {k: v for k, v in c.to_json().items() if k != "status"}
    text = json.dumps(pinned, sort_keys=True, separators=(",", ":")).replace('"epsilon":1.0', '"epsilon":1')
    assert c.pinned_fingerprint() == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "changes",
    [
        {"epsilon": 1.01},
        {"categories": ["yes", "no"]},
        {"question": "Did you smoke in the last 7 days?"},
        {"public_key": encode_key(generate_keypair()[1])},
        {"mechanism": "grr"},
        {"group_fields": []},
        {"id": "smoking-2027"},
    ],
)
def test_fingerprint_changes_with_every_pinned_field(changes: dict[str, Any]) -> None:
    assert config(**changes).pinned_fingerprint() != config().pinned_fingerprint()


def test_fingerprint_ignores_status_but_not_the_central_budget() -> None:
    c = config()
    closed = CampaignConfig.from_json(good_json(status="closed"))
    assert closed.pinned_fingerprint() == c.pinned_fingerprint()
    central = config(trust_model="central", mechanism=None, budget=2)
    assert (
        central.pinned_fingerprint()
        != config(trust_model="central", mechanism=None, budget=3).pinned_fingerprint()
    )
    other = config(trust_model="central", mechanism=None, budget=2, adjacency="replace")
    assert other.pinned_fingerprint() != central.pinned_fingerprint()


# ---------------------------------------------------------------------------------------- payloads

K5 = [f"c{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("mechanism", "categories"),
    [("binary-rr", ["no", "yes"]), ("grr", K5), ("oue", K5), ("olh", K5)],
)
def test_local_payload_round_trip_through_an_envelope(mechanism: str, categories: list[str]) -> None:
    c = config(mechanism=mechanism, categories=categories)
    m = c.build_mechanism()
    for value in range(c.k):
        report = m.randomize(value)
        payload = c.make_payload(report, {"country": "NL"})
        assert set(payload) == {"report", "groups"}
        e = c.seal(payload, device_secret=b"\x07" * 32)
        opened = open_envelope(e, campaign_id=c.id, private_key=PRIVATE, padded_length=c.padded_length)
        assert c.decode_payload(opened) == (report, {"country": "NL"})


def test_central_payload_carries_the_index() -> None:
    c = config(trust_model="central", mechanism=None, budget=2, categories=K5, group_fields=[])
    assert c.make_payload(4) == {"value": 4, "groups": {}}
    assert c.decode_payload({"value": 4, "groups": {}}) == (4, {})
    with pytest.raises(InvalidParameter, match=r"'value' must be a category index in \[0, 5\), got 5"):
        c.make_payload(5)


def test_wire_report_encodings_per_mechanism() -> None:
    assert config().make_payload(1, {"country": "NL"})["report"] == 1
    oue = config(mechanism="oue", categories=[f"c{i}" for i in range(10)])
    assert oue.make_payload(0b1000000101, {"country": "NL"})["report"] == "205"
    olh = config(mechanism="olh", categories=K5)
    assert olh.make_payload(OLHReport(0xABC, 2), {"country": "NL"})["report"] == {
        "seed": "0000000000000abc",
        "y": 2,
    }


def test_make_payload_checks_groups_on_the_device() -> None:
    c = config()
    with pytest.raises(InvalidParameter, match="missing 'country'"):
        c.make_payload(1)
    with pytest.raises(InvalidParameter, match="unexpected 'city'"):
        c.make_payload(1, {"country": "NL", "city": "Delft"})
    with pytest.raises(InvalidParameter, match=r"group 'country' must be a string of 1\.\.64"):
        c.make_payload(1, {"country": "N" * 65})
    with pytest.raises(InvalidReport):  # the mechanism refuses a report outside its space
        c.make_payload(2, {"country": "NL"})


LOCAL = {
    "binary-rr": config(),
    "grr": config(mechanism="grr", categories=K5),
    "oue": config(mechanism="oue", categories=K5),
    "olh": config(mechanism="olh", categories=K5),
}
CENTRAL = config(trust_model="central", mechanism=None, budget=2, categories=K5)

BAD_PAYLOADS = [
    (
        LOCAL["binary-rr"],
        {"report": 2, "groups": {"country": "NL"}},
        "report must be an integer in \\[0, 2\\)",
    ),
    (LOCAL["binary-rr"], {"report": True, "groups": {"country": "NL"}}, "must be a JSON integer"),
    (LOCAL["binary-rr"], {"report": 1.0, "groups": {"country": "NL"}}, "must be a JSON integer"),
    (LOCAL["binary-rr"], {"report": 1, "groups": {}}, "missing 'country'"),
    (LOCAL["binary-rr"], {"report": 1, "groups": {"country": "NL", "x": "y"}}, "unexpected 'x'"),
    (LOCAL["binary-rr"], {"report": 1, "groups": {"country": 31}}, "group 'country' must be a string"),
    (
        LOCAL["binary-rr"],
        {"report": 1, "groups": {"country": ""}},
        "group 'country' must be a string of 1..64",
    ),
    (LOCAL["binary-rr"], {"report": 1, "groups": ["NL"]}, "'groups' must be an object"),
    (LOCAL["binary-rr"], {"report": 1}, "exactly the keys 'report' and 'groups'"),
    (LOCAL["binary-rr"], {"value": 1, "groups": {"country": "NL"}}, "exactly the keys 'report' and 'groups'"),
    (LOCAL["binary-rr"], {"report": 1, "groups": {"country": "NL"}, "x": 1}, "exactly the keys"),
    (LOCAL["binary-rr"], [1], "must be an object"),
    (LOCAL["grr"], {"report": 5, "groups": {"country": "NL"}}, "integer in \\[0, 5\\)"),
    (LOCAL["grr"], {"report": -1, "groups": {"country": "NL"}}, "integer in \\[0, 5\\)"),
    (LOCAL["oue"], {"report": 3, "groups": {"country": "NL"}}, "must be a JSON string of hex digits"),
    (LOCAL["oue"], {"report": "003", "groups": {"country": "NL"}}, "exactly 2 lowercase hex digits"),
    (LOCAL["oue"], {"report": "1F", "groups": {"country": "NL"}}, "lowercase hex"),
    (LOCAL["oue"], {"report": "20", "groups": {"country": "NL"}}, "sets a bit at or above k=5"),
    (LOCAL["olh"], {"report": [1, 1], "groups": {"country": "NL"}}, "must be a JSON object"),
    (LOCAL["olh"], {"report": {"seed": "00", "y": 0}, "groups": {"country": "NL"}}, "16 lowercase hex"),
    (LOCAL["olh"], {"report": {"seed": "0" * 16, "y": 4}, "groups": {"country": "NL"}}, "bucket 'y'"),
    (
        LOCAL["olh"],
        {"report": {"seed": "0" * 16}, "groups": {"country": "NL"}},
        "olh report must be an object",
    ),
    (CENTRAL, {"value": 5, "groups": {"country": "NL"}}, "category index in \\[0, 5\\)"),
    (CENTRAL, {"value": True, "groups": {"country": "NL"}}, "category index"),
    (CENTRAL, {"value": "c1", "groups": {"country": "NL"}}, "category index"),
    (
        CENTRAL,
        {"report": 1, "groups": {"country": "NL"}},
        "central campaign must be an object with exactly the keys 'value'",
    ),
]


@pytest.mark.parametrize(("c", "payload", "match"), BAD_PAYLOADS)
def test_decode_payload_rejects_bad_payloads(c: CampaignConfig, payload: object, match: str) -> None:
    with pytest.raises(InvalidReport, match=match):
        c.decode_payload(payload)


@settings(max_examples=200, deadline=None)
@given(
    c=st.sampled_from([*LOCAL.values(), CENTRAL]),
    payload=any_json
    | st.fixed_dictionaries({"report": any_json, "groups": any_json})
    | st.fixed_dictionaries({"value": any_json, "groups": st.fixed_dictionaries({"country": any_json})})
    | st.fixed_dictionaries({"report": any_json, "groups": st.just({"country": "NL"})}),
)
def test_decode_payload_only_ever_raises_invalid_report(c: CampaignConfig, payload: object) -> None:
    with contextlib.suppress(InvalidReport):
        c.decode_payload(payload)


@pytest.mark.parametrize(("cls", "name"), [(BinaryRR, "binary-rr"), (OUE, "oue"), (OLH, "olh")])
def test_build_mechanism_matches_the_config(cls: type, name: str) -> None:
    c = config(mechanism=name, categories=["a", "b"])
    m = c.build_mechanism()
    assert isinstance(m, cls) and m.epsilon == c.epsilon and m.k == c.k
    assert c.build_mechanism() is m


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"group_fields": "country"}, "'group_fields' must be a list"),
        ({"categories": "ab"}, "'categories' must be a list"),
        ({"categories": {"a": 1, "b": 2}}, "'categories' must be a list"),
        ({"mechanism": ["grr"]}, "'mechanism' must be one of"),
        ({"trust_model": None}, "'trust_model' must be one of"),
        ({"trust_model": "central", "mechanism": "grr", "budget": 2}, "'mechanism' must be 'none'"),
    ],
)
def test_create_validates_untrusted_request_values(changes: dict[str, Any], match: str) -> None:
    """``create`` is called with fields straight from an HTTP body: wrong types are InvalidConfig too."""
    with pytest.raises(InvalidConfig, match=match):
        config(**changes)


CREATE_FIELDS = [
    "id",
    "question",
    "categories",
    "epsilon",
    "public_key",
    "mechanism",
    "group_fields",
    "trust_model",
    "budget",
    "adjacency",
    "group_values",
]


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(CREATE_FIELDS), value=any_json)
def test_create_with_any_json_field_raises_only_invalid_config(field: str, value: object) -> None:
    base: dict[str, Any] = (
        {"trust_model": "central", "mechanism": None, "budget": 2.0}
        if field in ("budget", "adjacency")
        else {}
    )
    try:
        c = config(**{**base, field: value})
    except InvalidConfig:
        return
    assert CampaignConfig.from_json(c.to_json()) == c


def test_config_pickles_and_copies_through_its_wire_form() -> None:
    import copy
    import pickle

    for c in (config(), config(mechanism="olh", categories=K5), CENTRAL):
        assert pickle.loads(pickle.dumps(c)) == c
        assert copy.deepcopy(c) == c and copy.copy(c) == c


def test_public_names_are_pinned() -> None:
    from deniable.shared import descriptor as campaign

    assert sorted(campaign.__all__) == [
        "ADJACENCIES", "CENTRAL_MECHANISM", "CampaignConfig", "MAX_BUDGET", "MAX_CATEGORIES",
        "MAX_CATEGORY_CHARS", "MAX_GROUP_FIELDS", "MAX_GROUP_VALUES", "MAX_GROUP_VALUE_CHARS",
        "MAX_QUESTION_CHARS",
        "STATUSES", "TRUST_MODELS",
    ]  # fmt: skip
    assert all(hasattr(campaign, name) for name in campaign.__all__)
    # one public MAX_EPSILON (the mechanisms', 20); a campaign's range is deniable.shared.limits.CAMPAIGN_EPSILON
    assert not hasattr(campaign, "MAX_EPSILON") and not hasattr(campaign, "MIN_EPSILON")
    from deniable.shared import payload

    assert sorted(payload.__all__) == [
        "Payload", "check_groups", "decode_payload", "make_payload", "padded_length", "seal_payload",
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------- declared group values


def test_group_values_are_serialized_only_when_declared() -> None:
    assert "group_values" not in config().to_json()  # old descriptors keep their canonical JSON
    declared = config(group_values={"country": ["NL", "DE"]})
    assert declared.group_values == {"country": ("NL", "DE")}
    assert declared.to_json()["group_values"] == {"country": ["NL", "DE"]}
    assert CampaignConfig.from_json(json.loads(json.dumps(declared.to_json()))) == declared
    assert config(group_values={}).to_json() == config().to_json()


def test_central_campaigns_must_declare_every_group_fields_values() -> None:
    with pytest.raises(InvalidConfig, match="central campaigns must declare 'group_values' for every group field"):
        config(trust_model="central", mechanism=None, budget=2, group_values={})
    with pytest.raises(InvalidConfig, match=r"missing 'city': .* which groups exist reveals nothing"):
        config(
            trust_model="central",
            mechanism=None,
            budget=2,
            group_fields=["country", "city"],
            group_values={"country": ["NL"]},
        )
    central = config(trust_model="central", mechanism=None, budget=2, group_fields=[], group_values={})
    assert central.group_values == {} and "group_values" not in central.to_json()
    assert config(group_values={}).group_values == {}  # optional for local campaigns
    assert config(trust_model="central", mechanism=None, budget=2).undeclared_group_fields == ()


def test_a_legacy_central_descriptor_without_group_values_still_parses() -> None:
    """Descriptors made before ``group_values`` existed stay readable; the aggregator refuses grouped releases."""
    legacy = config(trust_model="central", mechanism=None, budget=2).to_json()
    del legacy["group_values"]
    parsed = CampaignConfig.from_json(legacy)
    assert parsed.undeclared_group_fields == ("country",) and parsed.to_json() == legacy


BAD_GROUP_VALUES = [
    (["NL"], "'group_values' must be an object mapping group fields"),
    ({"city": ["Delft"]}, r"'group_values' keys must be group fields \('country'\), got 'city'"),
    ({"country": "NL"}, r"'group_values.country' must be a list of 1..1000 values, got 'NL'"),
    ({"country": []}, r"'group_values.country' must be a list of 1..1000 values, got 0 of them"),
    ({"country": ["NL"] * 2}, r"'group_values.country' must be unique, 'NL' appears twice"),
    ({"country": ["NL", ""]}, r"'group_values.country\[1\]' must be a string of 1..64 characters, got ''"),
    ({"country": ["N" * 65]}, r"'group_values.country\[0\]' must be a string of 1..64 characters"),
    ({"country": [31]}, r"'group_values.country\[0\]' must be a string of 1..64 characters, got 31"),
    ({"country": ["\ud800"]}, "lone surrogate"),
    ({"country": [f"c{i}" for i in range(1001)]}, "must be a list of 1..1000 values, got 1001 of them"),
]


@pytest.mark.parametrize(("group_values", "match"), BAD_GROUP_VALUES)
def test_bad_group_values_are_refused_naming_the_field(group_values: object, match: str) -> None:
    with pytest.raises(InvalidConfig, match=match):
        config(group_values=group_values)
    with pytest.raises(InvalidConfig, match=match):
        CampaignConfig.from_json(good_json(group_values=group_values))


def test_group_values_boundaries_are_inclusive() -> None:
    values = [f"{i:064d}" for i in range(1000)]
    c = config(group_values={"country": values})
    assert len(c.group_values["country"]) == 1000 and c.decode_payload({"report": 1, "groups": {"country": values[-1]}})


def test_declared_group_values_are_pinned() -> None:
    plain = config()
    declared = config(group_values={"country": ["NL", "DE"]})
    assert declared.pinned_fingerprint() != plain.pinned_fingerprint()
    assert declared.pinned_fingerprint() != config(group_values={"country": ["NL", "DE", "FR"]}).pinned_fingerprint()
    pinned = {k: v for k, v in declared.to_json().items() if k != "status"}
    assert declared.pinned_fingerprint() == hashlib.sha256(canonical_json(pinned)).hexdigest()


def test_decode_payload_refuses_an_undeclared_group_value() -> None:
    central = config(trust_model="central", mechanism=None, budget=2, categories=K5)
    assert central.decode_payload({"value": 3, "groups": {"country": "DE"}}) == (3, {"country": "DE"})
    with pytest.raises(InvalidReport, match=r"group 'country' has the value 'BE', which campaign 'smoking-2026' "
                       r"does not declare; its group_values for 'country' are 'NL', 'DE', 'FR'"):
        central.decode_payload({"value": 3, "groups": {"country": "BE"}})
    local = config(group_values={"country": ["NL"]})
    with pytest.raises(InvalidReport, match="does not declare"):
        local.decode_payload({"report": 1, "groups": {"country": "DE"}})
    with pytest.raises(InvalidParameter, match="does not declare"):  # the device checks it before sending
        local.make_payload(1, {"country": "DE"})
    assert config().decode_payload({"report": 1, "groups": {"country": "anything"}})[1] == {"country": "anything"}


@settings(max_examples=150, deadline=None)
@given(value=any_json)
def test_any_group_values_raise_only_invalid_config(value: object) -> None:
    try:
        c = CampaignConfig.from_json(good_json(group_values=value))
    except InvalidConfig:
        return
    assert CampaignConfig.from_json(c.to_json()) == c


def test_one_epsilon_range_everywhere() -> None:
    """The campaign range is stated by one constant: descriptor, aggregator schema and messages agree."""
    from deniable.aggregator.openapi_document import document
    from deniable.shared.limits import CAMPAIGN_EPSILON, range_text

    schema = document()["components"]["schemas"]
    create = next(s for s in schema.values() if "epsilon" in s.get("properties", {}) and "minimum" in
                  s["properties"]["epsilon"])  # fmt: skip
    assert (create["properties"]["epsilon"]["minimum"], create["properties"]["epsilon"]["maximum"]) == CAMPAIGN_EPSILON
    assert range_text(CAMPAIGN_EPSILON) == "[0.001, 10]"
    message = re.escape(f"'epsilon' must be a number in {range_text(CAMPAIGN_EPSILON)}")
    for bad in (CAMPAIGN_EPSILON[0] / 2, CAMPAIGN_EPSILON[1] * 1.01):
        with pytest.raises(InvalidConfig, match=message):
            config(epsilon=bad)
    with pytest.raises(InvalidConfig, match="'mechanism' must be one of 'auto', 'binary-rr'"):
        config(mechanism="rappor")
