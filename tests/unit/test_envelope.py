"""HPKE envelopes: key and id formats, the info binding, strict parsing, and seal/open round trips."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import string
from collections.abc import Callable
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import envelope_slugs as slugs
from support.strategies import hex_text, payloads
from support.strategies import wide_json as any_json

from deniable.shared import base64url, formats, ids, keys, messages
from deniable.shared import canonical_json as canonical_json_module
from deniable.shared import envelope as env
from deniable.shared.canonical_json import canonical_json
from deniable.shared.envelope import (
    MAX_CIPHERTEXT_BYTES,
    MAX_PLAINTEXT_BYTES,
    MIN_CIPHERTEXT_BYTES,
    Envelope,
    hpke_info,
    open_envelope,
    seal,
)
from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.ids import make_pseudonym, new_report_id
from deniable.shared.keys import check_public_key, decode_key, encode_key, generate_keypair, public_key_of

PRIVATE, PUBLIC = generate_keypair()
SECRET = b"\x01" * 32
PSEUDONYM = make_pseudonym(SECRET, "smoking-2026", 1)
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
hex32, hex64 = hex_text(32), hex_text(64)


def sealed(payload: dict[str, object] | None = None, **kwargs: object) -> Envelope:
    """A version-1 envelope (still read for campaigns created under it); version 2: test_envelope_v2.py."""
    args: dict[str, object] = {"campaign_id": "smoking-2026", "public_key": PUBLIC, "device_secret": SECRET,
                               "padded_length": None, "version": 1}  # fmt: skip
    args.update(kwargs)
    return seal({"report": 1, "groups": {}} if payload is None else payload, **args)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- keys


def test_generate_keypair_gives_matching_raw_x25519_keys() -> None:
    private, public = generate_keypair()
    assert len(private) == len(public) == 32
    assert public_key_of(private) == public
    assert generate_keypair()[0] != private


def test_keys_encode_as_unpadded_base64url_and_decode_back() -> None:
    text = encode_key(PUBLIC)
    assert len(text) == 43 and "=" not in text
    assert set(text) <= set(string.ascii_letters + string.digits + "-_")
    assert decode_key(text) == PUBLIC
    assert base64.urlsafe_b64decode(text + "=") == PUBLIC


@pytest.mark.parametrize(
    "text",
    [
        encode_key(PUBLIC) + "=",  # padding
        encode_key(PUBLIC)[:-1],  # 31.x bytes
        "A" * 44,  # 33 bytes
        encode_key(PUBLIC)[:-1] + "+",  # standard alphabet, not url-safe
        encode_key(PUBLIC)[:-1] + "B",  # non-canonical trailing bits (43rd char carries 4 bits)
        "",
        None,
        32,
    ],
    # fixed ids: PUBLIC is fresh on every import, and pytest-xdist's workers must collect the same names
    ids=["padding", "31-bytes", "33-bytes", "standard-alphabet", "non-canonical-bits", "empty", "none", "int"],
)
def test_decode_key_rejects_anything_but_32_bytes_of_canonical_base64url(text: object) -> None:
    with pytest.raises(InvalidParameter, match="'public_key' must be 32 bytes in base64url"):
        decode_key(text, name="public_key")  # type: ignore[arg-type]


def test_encode_key_rejects_wrong_length() -> None:
    with pytest.raises(InvalidParameter, match="32 raw bytes, got 31 bytes"):
        encode_key(b"\x00" * 31)


def test_small_order_public_key_is_refused() -> None:
    with pytest.raises(InvalidParameter, match="small-order"):
        check_public_key(bytes(32))
    with pytest.raises(InvalidParameter, match="small-order"):
        sealed(public_key=bytes(32))
    check_public_key(PUBLIC)


# ---------------------------------------------------------------------------------------- ids


def test_report_ids_are_128_bit_lowercase_hex_and_fresh() -> None:
    ids = {new_report_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and set(i) <= set("0123456789abcdef") for i in ids)


def test_pseudonym_is_the_documented_hmac() -> None:
    secret = bytes(range(32))
    expected = hmac.new(secret, b"deniable/pseudonym/v1\x00smoking-2026", hashlib.sha256).hexdigest()
    assert make_pseudonym(secret, "smoking-2026", 1) == expected


@given(secret=st.binary(min_size=32, max_size=32), a=slugs, b=slugs)
def test_pseudonym_is_stable_per_campaign_and_differs_across_campaigns(secret: bytes, a: str, b: str) -> None:
    assert make_pseudonym(secret, a) == make_pseudonym(secret, a)
    assert len(make_pseudonym(secret, a)) == 64
    assert (make_pseudonym(secret, a) == make_pseudonym(secret, b)) == (a == b)
    assert make_pseudonym(secret, a) != make_pseudonym(bytes([secret[0] ^ 1]) + secret[1:], a)


@pytest.mark.parametrize(
    ("secret", "campaign", "match"),
    [
        (b"short", "c", "'device_secret' must be exactly 32"),
        (b"\x00" * 33, "c", "'device_secret' must be exactly 32"),
        ("x" * 32, "c", "'device_secret'"),
        (b"\x00" * 32, "Not-A-Slug", "'campaign_id' must be a slug"),
        (b"\x00" * 32, "", "'campaign_id' must be a slug"),
    ],
)
def test_pseudonym_rejects_bad_arguments(secret: object, campaign: str, match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        make_pseudonym(secret, campaign)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- info


def test_hpke_info_has_the_documented_byte_layout() -> None:
    info = hpke_info("smoking-2026", 1, "00" * 15 + "ff", "ab" * 32)
    expected = (
        b"deniable/hpke-info/v1\x00"
        + b"\x00\x01"
        + bytes([12])
        + b"smoking-2026"
        + bytes(15)
        + b"\xff"
        + b"\xab" * 32
    )
    assert info == expected
    assert len(hpke_info("a" * 64, 1, "0" * 32, "0" * 64)) == 137


info_args = st.tuples(slugs, st.integers(0, 3), hex32, hex64)


@given(a=info_args, b=info_args)
def test_hpke_info_is_injective(a: tuple[str, int, str, str], b: tuple[str, int, str, str]) -> None:
    assert (hpke_info(*a) == hpke_info(*b)) == (a == b)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("UPPER", 1, "0" * 32, "0" * 64), "'campaign_id'"),
        (("c", -1, "0" * 32, "0" * 64), "'version'"),
        (("c", True, "0" * 32, "0" * 64), "'version'"),
        (("c", 1, "0" * 31, "0" * 64), "'report_id' must be 32 lowercase hex"),
        (("c", 1, "A" * 32, "0" * 64), "'report_id'"),
        (("c", 1, "0" * 32, "0" * 63), "'pseudonym' must be 64 lowercase hex"),
    ],
)
def test_hpke_info_rejects_malformed_fields(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        hpke_info(*args)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- canonical JSON


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [True, None, "é\n"]}, '{"a":[true,null,"é\\n"],"b":1}'),
        ({"eps": 1.0}, '{"eps":1}'),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (-0.0, "0"),
        (0.1 + 0.2, "0.30000000000000004"),
        ("\u001f/", '"\\u001f/"'),
    ],
)
def test_canonical_json_follows_rfc_8785(value: object, expected: str) -> None:
    assert canonical_json(value) == expected.encode("utf-8")


def test_a_canonical_part_is_written_as_it_is_inside_a_whole() -> None:
    part = {"b": [1, 2.5, "é"], "a": None}
    whole = {"z": 1, "parts": [part, part]}
    embedded = {"z": 1, "parts": [canonical_json_module.Canonical(canonical_json(part))] * 2}
    assert canonical_json(embedded) == canonical_json(whole)


@pytest.mark.parametrize("value", [math.nan, math.inf, {1: "a"}, {"a": {1, 2}}, "\ud800"])
def test_canonical_json_rejects_what_json_cannot_carry(value: object) -> None:
    with pytest.raises(InvalidParameter):
        canonical_json(value)


@given(payloads)
def test_canonical_json_parses_back_to_the_same_object(payload: dict[str, object]) -> None:
    text = canonical_json(payload)
    assert json.loads(text) == payload
    plain = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert text == plain.encode()


# ---------------------------------------------------------------------------------------- envelope JSON


def test_envelope_to_json_has_exactly_the_wire_keys() -> None:
    e = sealed()
    obj = e.to_json()
    assert set(obj) == {"v", "report_id", "pseudonym", "ct"}
    assert obj["v"] == 1 and obj["pseudonym"] == PSEUDONYM and obj["report_id"] == e.report_id
    assert base64.urlsafe_b64decode(obj["ct"] + "=" * (-len(obj["ct"]) % 4)) == e.ciphertext
    assert Envelope.from_json(json.loads(json.dumps(obj))) == e


@given(rid=hex32, pseudonym=hex64, ct=st.binary(min_size=MIN_CIPHERTEXT_BYTES, max_size=300))
def test_envelope_json_round_trip(rid: str, pseudonym: str, ct: bytes) -> None:
    e = Envelope(version=1, report_id=rid, pseudonym=pseudonym, ciphertext=ct)
    assert Envelope.from_json(e.to_json()) == e


GOOD = sealed().to_json()


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ([GOOD], "must be a JSON object"),
        ("x", "must be a JSON object"),
        ({k: v for k, v in GOOD.items() if k != "ct"}, "missing 'ct'"),
        ({**GOOD, "extra": 1}, "unexpected 'extra'"),
        ({**GOOD, "v": 3}, "'v' is 3, an unknown format version"),
        ({**GOOD, "v": 2}, "missing 'device_key', 'sig'"),
        ({**GOOD, "v": "1"}, "'v' must be an integer"),
        ({**GOOD, "v": True}, "'v' must be an integer"),
        ({**GOOD, "v": 1.0}, "'v' must be an integer"),
        ({**GOOD, "report_id": GOOD["report_id"].upper()}, "'report_id' must be 32 lowercase hex"),
        ({**GOOD, "report_id": GOOD["report_id"][:-1]}, "'report_id'"),
        ({**GOOD, "report_id": 7}, "'report_id'"),
        ({**GOOD, "pseudonym": GOOD["pseudonym"] + "0"}, "'pseudonym' must be 64 lowercase hex"),
        ({**GOOD, "ct": GOOD["ct"] + "="}, "'ct' must be base64url"),
        ({**GOOD, "ct": GOOD["ct"].replace("-", "+").replace("_", "/") + "+/"}, "'ct' must be base64url"),
        ({**GOOD, "ct": "Zm9v"}, "'ct' must decode to 48..65536 bytes"),
        ({**GOOD, "ct": ""}, "'ct' must decode to 48"),
        ({**GOOD, "ct": "A" * 87384}, "'ct' is longer than 65536 bytes"),
        ({**GOOD, "ct": 12}, "'ct' must be a base64url string"),
    ],
)
def test_envelope_from_json_rejects_malformed_input_naming_the_field(obj: object, match: str) -> None:
    with pytest.raises(InvalidReport, match=match):
        Envelope.from_json(obj)


def test_ciphertext_length_bounds_are_inclusive() -> None:
    for size in (MIN_CIPHERTEXT_BYTES, MAX_CIPHERTEXT_BYTES):
        e = Envelope(1, "0" * 32, "0" * 64, bytes(size))
        assert Envelope.from_json(e.to_json()).ciphertext == bytes(size)
    for size in (MIN_CIPHERTEXT_BYTES - 1, MAX_CIPHERTEXT_BYTES + 1):
        with pytest.raises(InvalidReport):
            Envelope(1, "0" * 32, "0" * 64, bytes(size))


@given(
    obj=any_json
    | st.fixed_dictionaries({"v": any_json, "report_id": any_json, "pseudonym": any_json, "ct": any_json})
    | st.fixed_dictionaries(
        {
            "v": st.just(1),
            "report_id": hex32 | any_json,
            "pseudonym": hex64 | any_json,
            "ct": st.text(max_size=200),
        }
    )
)
def test_envelope_from_json_only_ever_raises_invalid_report(obj: object) -> None:
    try:
        e = Envelope.from_json(obj)
    except InvalidReport:
        return
    assert e.to_json() == obj


# ---------------------------------------------------------------------------------------- seal / open


@settings(max_examples=50, deadline=None)
@given(payload=payloads, campaign=slugs, secret=st.binary(min_size=32, max_size=32))
def test_seal_then_open_returns_the_payload(
    payload: dict[str, object], campaign: str, secret: bytes
) -> None:
    e = sealed(payload, campaign_id=campaign, device_secret=secret)
    assert e.pseudonym == make_pseudonym(secret, campaign, 1) and e.version == 1
    assert len(e.ciphertext) == 32 + len(canonical_json(payload)) + 16
    received = Envelope.from_json(e.to_json())
    assert open_envelope(received, campaign_id=campaign, private_key=PRIVATE) == payload


def test_seal_uses_the_given_report_id_and_fresh_ones_otherwise() -> None:
    assert sealed(report_id="ab" * 16).report_id == "ab" * 16
    a, b = sealed(), sealed()
    assert a.report_id != b.report_id and a.ciphertext != b.ciphertext


def test_ciphertext_is_plain_rfc9180_hpke_with_the_documented_info() -> None:
    """An independent HPKE implementation (here cryptography's, called directly) opens our envelopes."""
    e = sealed({"report": 0, "groups": {"country": "NL"}})
    info = b"deniable/hpke-info/v1\x00\x00\x01\x0csmoking-2026" + bytes.fromhex(e.report_id + PSEUDONYM)
    plain = SUITE.decrypt(e.ciphertext, X25519PrivateKey.from_private_bytes(PRIVATE), info=info)
    assert plain == b'{"groups":{"country":"NL"},"report":0}'


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


TAMPERINGS = {
    "other campaign": lambda e: (e, "flu-2026", PRIVATE),
    "fresh report id": lambda e: (replace(e, report_id=new_report_id()), "smoking-2026", PRIVATE),
    "other pseudonym": lambda e: (replace(e, pseudonym="0" * 64), "smoking-2026", PRIVATE),
    "other key": lambda e: (e, "smoking-2026", generate_keypair()[0]),
    "flipped enc": lambda e: (replace(e, ciphertext=_flip(e.ciphertext, 0)), "smoking-2026", PRIVATE),
    "flipped body": lambda e: (replace(e, ciphertext=_flip(e.ciphertext, 40)), "smoking-2026", PRIVATE),
    "flipped tag": lambda e: (replace(e, ciphertext=_flip(e.ciphertext, -1)), "smoking-2026", PRIVATE),
    "truncated": lambda e: (replace(e, ciphertext=e.ciphertext[:-1]), "smoking-2026", PRIVATE),
    "zero enc": lambda e: (replace(e, ciphertext=bytes(32) + e.ciphertext[32:]), "smoking-2026", PRIVATE),
}


@pytest.mark.parametrize("tamper", TAMPERINGS.values(), ids=TAMPERINGS.keys())
def test_open_rejects_tampering_replay_and_misrouting(
    tamper: Callable[[Envelope], tuple[Envelope, str, bytes]],
) -> None:
    e, campaign, key = tamper(sealed())
    with pytest.raises(InvalidReport, match="ciphertext does not decrypt for campaign"):
        open_envelope(e, campaign_id=campaign, private_key=key)


def _raw_envelope(plaintext: bytes) -> Envelope:
    rid = new_report_id()
    info = hpke_info("smoking-2026", 1, rid, PSEUDONYM)
    ct = SUITE.encrypt(plaintext, X25519PrivateKey.from_private_bytes(PRIVATE).public_key(), info=info)
    return Envelope(1, rid, PSEUDONYM, ct)


@pytest.mark.parametrize(
    ("plaintext", "match"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"{", "not UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object, got a list"),
        (b'"report"', "must be a JSON object"),
        (b'{"a": 1, "a": 2}', "duplicate key"),
        (b'{"a": NaN}', "NaN, which is not JSON"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b"{}" + b" " * MAX_PLAINTEXT_BYTES, "at most"),
    ],
)
def test_open_rejects_plaintexts_that_are_not_a_json_object(plaintext: bytes, match: str) -> None:
    with pytest.raises(InvalidReport, match=match):
        open_envelope(_raw_envelope(plaintext), campaign_id="smoking-2026", private_key=PRIVATE)


def test_deep_nesting_within_the_size_limit_is_rejected_cleanly() -> None:
    deep = b'{"a":' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    assert len(deep) <= MAX_PLAINTEXT_BYTES
    with pytest.raises(InvalidReport, match="not UTF-8 JSON: RecursionError"):
        open_envelope(_raw_envelope(deep), campaign_id="smoking-2026", private_key=PRIVATE)


def test_seal_refuses_oversized_payloads_and_bad_arguments() -> None:
    with pytest.raises(InvalidParameter, match=f"at most {MAX_PLAINTEXT_BYTES} can be sealed"):
        sealed({"x": "a" * MAX_PLAINTEXT_BYTES})
    with pytest.raises(InvalidParameter, match="'payload' must be a JSON object"):
        sealed([1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="'device_secret'"):
        sealed(device_secret=b"nope")
    with pytest.raises(InvalidParameter, match="'report_id'"):
        sealed(report_id="nope")
    with pytest.raises(InvalidParameter, match="'public_key' must be 32 raw bytes"):
        sealed(public_key=encode_key(PUBLIC))
    with pytest.raises(InvalidParameter, match="'private_key' must be 32 raw bytes"):
        open_envelope(sealed(), campaign_id="smoking-2026", private_key=b"")


@settings(max_examples=60, deadline=None)
@given(ct=st.binary(min_size=MIN_CIPHERTEXT_BYTES, max_size=200), rid=hex32)
def test_random_ciphertexts_are_rejected_as_invalid_reports(ct: bytes, rid: str) -> None:
    with pytest.raises(InvalidReport):
        open_envelope(Envelope(1, rid, PSEUDONYM, ct), campaign_id="smoking-2026", private_key=PRIVATE)


def test_public_names_are_pinned() -> None:
    assert sorted(env.__all__) == [
        "ENC_BYTES", "Envelope", "HPKE_SUITE", "INFO_LABEL", "MAX_CIPHERTEXT_BYTES", "MAX_PLAINTEXT_BYTES",
        "MIN_CIPHERTEXT_BYTES", "PROOF_FAILED", "SIGNATURE_BYTES", "SIGNATURE_LABEL", "TAG_BYTES", "ciphertext_bytes",
        "hpke_info",
        "open_envelope", "pad_plaintext", "seal", "signed_message", "unpad_plaintext", "verify_possession",
    ]  # fmt: skip
    assert all(hasattr(env, name) for name in env.__all__)


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (canonical_json_module, ["Canonical", "canonical_json", "parse_json", "parse_json_object"]),
        (formats, ["DESCRIPTOR_VERSIONS", "FORMAT_VERSION", "SUITE_ID", "SUPPORTED_VERSIONS", "SURVEY_FORMAT_VERSION",
                   "check_version"]),
        (base64url, ["b64url_decode", "b64url_encode"]),
        (messages, ["SHOWN_CHARS", "show"]),
        (keys, ["KEY_BYTES", "check_public_key", "decode_key", "encode_key", "generate_keypair", "load_private",
                "load_public", "public_key_of"]),
        (ids, ["DEVICE_KEY_BYTES", "DEVICE_KEY_LABEL", "DEVICE_SECRET_BYTES", "PSEUDONYM_LABEL", "PSEUDONYM_LABEL_V2",
               "PSEUDONYM_RE", "REPORT_ID_RE", "check_campaign_id", "check_device_secret", "check_pseudonym",
               "check_report_id", "device_public_key", "device_signing_key", "make_pseudonym", "new_report_id",
               "pseudonym_of_key"]),
    ],
    ids=lambda m: getattr(m, "__name__", ""),
)
def test_the_wire_modules_public_names_are_pinned(module: object, names: list[str]) -> None:
    assert sorted(module.__all__) == names  # type: ignore[attr-defined]
    assert all(hasattr(module, name) for name in names)


def test_open_accepts_a_loaded_private_key() -> None:
    e = sealed({"report": 1, "groups": {}})
    loaded = X25519PrivateKey.from_private_bytes(PRIVATE)
    assert open_envelope(e, campaign_id="smoking-2026", private_key=loaded) == {"report": 1, "groups": {}}
    with pytest.raises(InvalidReport):
        open_envelope(e, campaign_id="smoking-2026", private_key=X25519PrivateKey.generate())
