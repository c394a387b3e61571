"""Known-answer vectors of wire format v1 (``tests/vectors/wire-v1.json``, made by ``make_vectors.py``).

Each vector was sealed once with real randomness; these tests check that today's code still reads them
exactly as a client in another language must (``docs/wire-format.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

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

    # The plaintext bytes, decrypted with plain RFC 9180 HPKE and the documented info.
    plain = SUITE.decrypt(envelope.ciphertext, X25519PrivateKey.from_private_bytes(PRIVATE), info=info)
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
