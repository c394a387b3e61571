"""Known-answer vectors of the one-question wire formats (``tests/vectors/wire-v<N>.json``, made by
``make_vectors.py``): version 2, what one-question campaigns write today, and version 1, still read for
campaigns created under it. Version 3 (surveys) has its own file and checks: ``test_survey_vectors.py``.

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
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import PROOF_FAILED, Envelope, hpke_info, open_envelope
from deniable.shared.errors import InvalidReport
from deniable.shared.formats import FORMAT_VERSION, SUITE_ID, SUPPORTED_VERSIONS, SURVEY_FORMAT_VERSION
from deniable.shared.ids import make_pseudonym
from deniable.shared.keys import decode_key, public_key_of
from deniable.shared.mechanisms import olh_hash


def _load(version: int) -> dict[str, Any]:
    path = Path(__file__).parents[1] / "vectors" / f"wire-v{version}.json"
    vectors: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return vectors


#: The one-question formats; every version read has a vector file (version 3's: test_survey_vectors.py).
LEGACY_VERSIONS = tuple(version for version in SUPPORTED_VERSIONS if version < SURVEY_FORMAT_VERSION)
ALL = {version: _load(version) for version in LEGACY_VERSIONS}
VECTORS = ALL[FORMAT_VERSION]  # the current version: the one docs/wire-format.md quotes
PRIVATE = {version: bytes.fromhex(v["keypair"]["private_key_hex"]) for version, v in ALL.items()}
CONFIGS = {
    (version, case["name"]): CampaignConfig.from_json(case["config"])
    for version, v in ALL.items()
    for case in v["campaigns"]
}
ENVELOPES = [
    pytest.param(version, case["name"], item, id=f"v{version}-{case['name']}-{i}")
    for version, v in ALL.items()
    for case in v["campaigns"]
    for i, item in enumerate(case["envelopes"])
]


def _items(key: str) -> list[Any]:
    return [
        pytest.param(version, item, id=f"v{version}-{item.get('name', item.get('seed'))}")
        for version, v in ALL.items()
        for item in v.get(key, [])
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


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_vector_files_exist_for_every_version_read(version: int) -> None:
    assert ALL[version]["format_version"] == version and ALL[version]["suite"] == SUITE_ID
    assert {case["name"] for case in ALL[version]["campaigns"]} == {"binary-rr", "grr", "oue", "olh", "central"}
    assert all(case["config"]["format_version"] == version for case in ALL[version]["campaigns"])


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_keypair_is_consistent(version: int) -> None:
    public = bytes.fromhex(ALL[version]["keypair"]["public_key_hex"])
    assert public_key_of(PRIVATE[version]) == public
    assert decode_key(ALL[version]["keypair"]["public_key"]) == public


@pytest.mark.parametrize(
    ("version", "case"),
    [
        pytest.param(version, case, id=f"v{version}-{case['name']}")
        for version, v in ALL.items()
        for case in v["campaigns"]
    ],
)
def test_campaign_configs_parse_and_fingerprint_as_recorded(version: int, case: dict[str, Any]) -> None:
    config = CONFIGS[version, case["name"]]
    assert config.to_json() == case["config"]
    assert config.pinned_fingerprint() == case["fingerprint"]
    assert config.public_key == ALL[version]["keypair"]["public_key"]
    assert config.padded_length == case.get("padded_length")


@pytest.mark.parametrize(("version", "name", "item"), ENVELOPES)
def test_envelopes_open_to_the_recorded_payloads(version: int, name: str, item: dict[str, Any]) -> None:
    config, private = CONFIGS[version, name], PRIVATE[version]
    envelope = Envelope.from_json(item["envelope"])
    assert envelope.version == version and envelope.to_json() == item["envelope"]
    secret = bytes.fromhex(item["device_secret_hex"])
    assert envelope.pseudonym == make_pseudonym(secret, config.id, version)
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    assert info.hex() == item["info_hex"]

    # The plaintext bytes, decrypted with plain RFC 9180 HPKE (two implementations) and the documented info.
    plain = SUITE.decrypt(envelope.ciphertext, X25519PrivateKey.from_private_bytes(private), info=info)
    assert plain == rfc9180_open(envelope.ciphertext, private, info)
    json_bytes = item["plaintext"].encode("utf-8")
    assert json_bytes == canonical_json(item["payload"])
    if version == 1:
        assert plain == json_bytes
    else:  # zero bytes up to the campaign's padded length, and the documented proof of possession
        assert config.padded_length is not None
        assert plain == json_bytes + bytes(config.padded_length - len(json_bytes))
        assert_documented_proof(config.id, secret, envelope, info, item)

    payload = open_envelope(envelope, campaign_id=config.id, private_key=private, padded_length=config.padded_length)
    assert payload == item["payload"]
    decoded, groups = config.decode_payload(payload)
    assert groups == payload["groups"]
    if config.trust_model == "central":
        assert decoded == payload["value"]
    else:
        mechanism = config.build_mechanism()
        assert mechanism.encode_report(decoded) == payload["report"]
        assert mechanism.support(decoded) == item["support"]


def assert_documented_proof(
    campaign_id: str, secret: bytes, envelope: Envelope, info: bytes, item: dict[str, Any]
) -> None:
    """The device key, pseudonym and signature recomputed from docs/wire-format.md §4-§6 with bare primitives."""
    cid = campaign_id.encode()
    seed = hmac.new(secret, b"deniable/device-key/v2\x00" + cid, hashlib.sha256).digest()
    device_key = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    assert device_key == envelope.device_key == bytes.fromhex(item["device_key_hex"])
    digest = hashlib.sha256(b"deniable/pseudonym/v2\x00" + bytes([len(cid)]) + cid + device_key).hexdigest()
    assert digest == envelope.pseudonym
    message = b"deniable/envelope-signature/v2\x00" + info + envelope.ciphertext
    assert envelope.signature is not None
    Ed25519PublicKey.from_public_bytes(device_key).verify(envelope.signature, message)  # raises if not


@pytest.mark.parametrize(("version", "item"), _items("undecryptable"))
def test_undecryptable_envelopes_are_rejected(version: int, item: dict[str, Any]) -> None:
    envelope = Envelope.from_json(item["envelope"])  # well-formed (and, in version 2, properly signed) ...
    with pytest.raises(InvalidReport, match=f"ciphertext does not decrypt for campaign '{item['campaign_id']}'"):
        open_envelope(envelope, campaign_id=item["campaign_id"], private_key=PRIVATE[version])  # ... not openable


@pytest.mark.parametrize(("version", "item"), _items("forged"))
def test_forged_envelopes_fail_the_proof_of_possession(version: int, item: dict[str, Any]) -> None:
    envelope = Envelope.from_json(item["envelope"])  # well-formed, but not signed by the pseudonym's key
    with pytest.raises(InvalidReport) as caught:
        open_envelope(envelope, campaign_id=item["campaign_id"], private_key=PRIVATE[version])
    assert str(caught.value) == PROOF_FAILED


@pytest.mark.parametrize(("version", "item"), _items("malformed_envelopes"))
def test_malformed_envelopes_are_rejected_naming_the_field(version: int, item: dict[str, Any]) -> None:
    with pytest.raises(InvalidReport, match=item["field"]):
        Envelope.from_json(item["envelope"])


@pytest.mark.parametrize(("version", "item"), _items("rejected_payloads"))
def test_decryptable_but_invalid_payloads_are_rejected(version: int, item: dict[str, Any]) -> None:
    config = CONFIGS[version, item["campaign"]]
    envelope = Envelope.from_json(item["envelope"])
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    key = X25519PrivateKey.from_private_bytes(PRIVATE[version])
    plain = SUITE.decrypt(envelope.ciphertext, key, info=info)
    recorded = bytes.fromhex(item["plaintext_hex"]) if "plaintext_hex" in item else item["plaintext"].encode()
    assert plain[: len(recorded)] == recorded and not plain[len(recorded) :].strip(b"\x00")  # padding
    with pytest.raises(InvalidReport):
        config.decode_payload(
            open_envelope(
                envelope, campaign_id=config.id, private_key=PRIVATE[version], padded_length=config.padded_length
            )
        )


@pytest.mark.parametrize(("version", "item"), _items("olh_hash"))
def test_olh_hash_examples(version: int, item: dict[str, Any]) -> None:
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
    private = PRIVATE[FORMAT_VERSION]
    assert rfc9180_open(envelope.ciphertext, private, info).rstrip(b"\x00") == item["plaintext"].encode()
    with pytest.raises(InvalidTag):
        rfc9180_open(envelope.ciphertext, private, info[:-1] + bytes([info[-1] ^ 1]))


def test_the_examples_quoted_in_the_spec_are_the_vectors() -> None:
    """docs/wire-format.md quotes the first binary-rr vector; regenerating the vectors must update it."""
    doc = (Path(__file__).parents[2] / "docs" / "wire-format.md").read_text(encoding="utf-8")
    case = VECTORS["campaigns"][0]
    first = case["envelopes"][0]
    config = CONFIGS[FORMAT_VERSION, case["name"]]
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
