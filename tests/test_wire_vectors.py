"""Known-answer vectors of wire format v1 (``tests/vectors/wire-v1.json``, made by ``make_vectors.py``).

Each vector was sealed once with real randomness; these tests check that today's code still reads them
exactly as a client in another language must (``docs/wire-format.md``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from deniable.shared.campaign import CampaignConfig
from deniable.shared.envelope import (
    FORMAT_VERSION,
    SUITE_ID,
    Envelope,
    canonical_json,
    decode_key,
    hpke_info,
    make_pseudonym,
    open_envelope,
    public_key_of,
)
from deniable.shared.errors import InvalidReport
from deniable.shared.mechanisms import olh_hash

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "vectors" / "wire-v1.json").read_text(encoding="utf-8")
)
PRIVATE = bytes.fromhex(VECTORS["keypair"]["private_key_hex"])
CONFIGS = {case["name"]: CampaignConfig.from_json(case["config"]) for case in VECTORS["campaigns"]}
ENVELOPES = [
    pytest.param(case["name"], item, id=f"{case['name']}-{i}")
    for case in VECTORS["campaigns"]
    for i, item in enumerate(case["envelopes"])
]
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


def rfc9180_open(enc_and_ct: bytes, private_key: bytes, info: bytes) -> bytes:
    """HPKE base-mode single-shot Open, written out from RFC 9180 §4-§6 over bare primitives.

    DHKEM(X25519, HKDF-SHA256) = 0x0020, HKDF-SHA256 = 0x0001, ChaCha20Poly1305 = 0x0003, empty aad. An
    independent check that an envelope is plain HPKE, as a client in another language would produce it.
    """

    def extract(salt: bytes, ikm: bytes) -> bytes:
        return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()

    def expand(prk: bytes, info_: bytes, length: int) -> bytes:
        out, block = b"", b""
        for counter in range(1, -(-length // 32) + 1):
            block = hmac.new(prk, block + info_ + bytes([counter]), hashlib.sha256).digest()
            out += block
        return out[:length]

    def labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
        return extract(salt, b"HPKE-v1" + suite + label + ikm)

    def labeled_expand(suite: bytes, prk: bytes, label: bytes, info_: bytes, length: int) -> bytes:
        return expand(prk, length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info_, length)

    enc, ct = enc_and_ct[:32], enc_and_ct[32:]
    sk = X25519PrivateKey.from_private_bytes(private_key)
    dh = sk.exchange(X25519PublicKey.from_public_bytes(enc))
    kem_context = enc + public_key_of(private_key)
    kem_suite = b"KEM\x00\x20"
    eae_prk = labeled_extract(kem_suite, b"", b"eae_prk", dh)
    shared_secret = labeled_expand(kem_suite, eae_prk, b"shared_secret", kem_context, 32)

    suite = b"HPKE\x00\x20\x00\x01\x00\x03"
    psk_id_hash = labeled_extract(suite, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(suite, b"", b"info_hash", info)
    context = b"\x00" + psk_id_hash + info_hash  # mode_base
    secret = labeled_extract(suite, shared_secret, b"secret", b"")
    key = labeled_expand(suite, secret, b"key", context, 32)
    base_nonce = labeled_expand(suite, secret, b"base_nonce", context, 12)
    return ChaCha20Poly1305(key).decrypt(base_nonce, ct, b"")  # sequence number 0: nonce = base_nonce


def test_vector_file_is_for_this_format() -> None:
    assert VECTORS["format_version"] == FORMAT_VERSION and VECTORS["suite"] == SUITE_ID
    assert {case["name"] for case in VECTORS["campaigns"]} == {"binary-rr", "grr", "oue", "olh", "central"}


def test_keypair_is_consistent() -> None:
    public = bytes.fromhex(VECTORS["keypair"]["public_key_hex"])
    assert public_key_of(PRIVATE) == public
    assert decode_key(VECTORS["keypair"]["public_key"]) == public


@pytest.mark.parametrize("case", VECTORS["campaigns"], ids=lambda case: case["name"])
def test_campaign_configs_parse_and_fingerprint_as_recorded(case: dict[str, Any]) -> None:
    config = CONFIGS[case["name"]]
    assert config.to_json() == case["config"]
    assert config.pinned_fingerprint() == case["fingerprint"]
    assert config.public_key == VECTORS["keypair"]["public_key"]


@pytest.mark.parametrize(("name", "item"), ENVELOPES)
def test_envelopes_open_to_the_recorded_payloads(name: str, item: dict[str, Any]) -> None:
    config = CONFIGS[name]
    envelope = Envelope.from_json(item["envelope"])
    assert envelope.to_json() == item["envelope"]
    assert envelope.pseudonym == make_pseudonym(bytes.fromhex(item["device_secret_hex"]), config.id)
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    assert info.hex() == item["info_hex"]

    # The plaintext bytes, decrypted with plain RFC 9180 HPKE (two implementations) and the documented info.
    plain = SUITE.decrypt(envelope.ciphertext, X25519PrivateKey.from_private_bytes(PRIVATE), info=info)
    assert plain == rfc9180_open(envelope.ciphertext, PRIVATE, info)
    assert plain == item["plaintext"].encode("utf-8") == canonical_json(item["payload"])

    payload = open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE)
    assert payload == item["payload"]
    decoded, groups = config.decode_payload(payload)
    assert groups == payload["groups"]
    if config.trust_model == "central":
        assert decoded == payload["value"]
    else:
        mechanism = config.build_mechanism()
        assert mechanism.encode_report(decoded) == payload["report"]
        assert mechanism.support(decoded) == item["support"]


@pytest.mark.parametrize("item", VECTORS["undecryptable"], ids=lambda item: item["name"])
def test_undecryptable_envelopes_are_rejected(item: dict[str, Any]) -> None:
    envelope = Envelope.from_json(item["envelope"])  # well-formed ...
    with pytest.raises(
        InvalidReport, match=f"ciphertext does not decrypt for campaign '{item['campaign_id']}'"
    ):
        open_envelope(envelope, campaign_id=item["campaign_id"], private_key=PRIVATE)  # ... but not openable


@pytest.mark.parametrize("item", VECTORS["malformed_envelopes"], ids=lambda item: item["name"])
def test_malformed_envelopes_are_rejected_naming_the_field(item: dict[str, Any]) -> None:
    with pytest.raises(InvalidReport, match=item["field"]):
        Envelope.from_json(item["envelope"])


@pytest.mark.parametrize("item", VECTORS["rejected_payloads"], ids=lambda item: item["name"])
def test_decryptable_but_invalid_payloads_are_rejected(item: dict[str, Any]) -> None:
    config = CONFIGS[item["campaign"]]
    envelope = Envelope.from_json(item["envelope"])
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    key = X25519PrivateKey.from_private_bytes(PRIVATE)
    assert SUITE.decrypt(envelope.ciphertext, key, info=info) == item["plaintext"].encode()
    with pytest.raises(InvalidReport):
        config.decode_payload(open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE))


@pytest.mark.parametrize("item", VECTORS["olh_hash"], ids=lambda item: item["seed"])
def test_olh_hash_examples(item: dict[str, Any]) -> None:
    seed, g = int(item["seed"], 16), item["g"]
    assert [olh_hash(seed, v, g) for v in range(len(item["hashes"]))] == item["hashes"]
    # The same numbers from the formula written out in docs/wire-format.md.
    p = 2**31 - 1
    a, b = 1 + ((seed >> 32) % (p - 1)), (seed & 0xFFFFFFFF) % p
    assert [((a * v + b) % p) % g for v in range(len(item["hashes"]))] == item["hashes"]


def test_the_independent_hpke_open_detects_a_wrong_info() -> None:
    item = VECTORS["campaigns"][0]["envelopes"][0]
    envelope = Envelope.from_json(item["envelope"])
    info = bytes.fromhex(item["info_hex"])
    assert rfc9180_open(envelope.ciphertext, PRIVATE, info) == item["plaintext"].encode()
    with pytest.raises(InvalidTag):
        rfc9180_open(envelope.ciphertext, PRIVATE, info[:-1] + bytes([info[-1] ^ 1]))


def test_the_examples_quoted_in_the_spec_are_the_vectors() -> None:
    """docs/wire-format.md quotes the first binary-rr vector; regenerating the vectors must update it."""
    doc = (Path(__file__).parents[1] / "docs" / "wire-format.md").read_text(encoding="utf-8")
    case = VECTORS["campaigns"][0]
    first = case["envelopes"][0]
    config = CONFIGS[case["name"]]
    pinned = {key: value for key, value in case["config"].items() if key != "status"}
    assert f"its fingerprint is `{case['fingerprint']}`" in doc
    assert canonical_json(pinned).decode() in doc
    assert json.dumps(first["envelope"], indent=2) in doc
    assert first["plaintext"] in doc
    info_lines = [
        line.split()[0]
        for line in doc.split("Worked example (first envelope")[1].split("```")[1].splitlines()
        if line
    ]
    assert "".join(info_lines) == first["info_hex"]
    assert f'"public_key": "{config.public_key}"' in doc
    olh = VECTORS["olh_hash"][0]
    assert olh["seed"] == "9e3779b97f4a7c15" and olh["g"] == 8
    assert f"H(0..11) = {', '.join(map(str, olh['hashes']))}" in doc
