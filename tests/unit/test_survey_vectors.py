"""Known-answer vectors of format 3, surveys (``tests/vectors/wire-v3.json``, ``make_vectors.py --surveys``).

Each envelope was sealed once with real HPKE randomness; everything else in it is a function of the device
secret and the answers: the report id, the question a sampling survey asks, every report (derived as
``Client.submit`` derives them, from the device secret's HMAC_DRBG). These tests check that today's code
reads the vectors exactly, and re-derives the same answers, as a client in another language must
(``docs/wire-format.md`` §3.2, §7.2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from test_wire_vectors import assert_documented_proof, rfc9180_open

from deniable.client.memo import drawn_question, survey_one_shot, survey_permanent, survey_round_report_id
from deniable.client.report import normalize_answers
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import PROOF_FAILED, Envelope, hpke_info, open_envelope
from deniable.shared.errors import InvalidReport
from deniable.shared.formats import SUITE_ID, SURVEY_FORMAT_VERSION
from deniable.shared.ids import make_pseudonym
from deniable.shared.keys import decode_key, public_key_of

PATH = Path(__file__).parents[1] / "vectors" / "wire-v3.json"
VECTORS: dict[str, Any] = json.loads(PATH.read_text(encoding="utf-8"))
PRIVATE = bytes.fromhex(VECTORS["keypair"]["private_key_hex"])
CONFIGS = {case["name"]: CampaignConfig.from_json(case["config"]) for case in VECTORS["campaigns"]}
BY_ID = {config.id: config for config in CONFIGS.values()}
ENVELOPES = [
    pytest.param(case["name"], item, id=f"{case['name']}-{i}")
    for case in VECTORS["campaigns"]
    for i, item in enumerate(case["envelopes"])
]
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


def test_the_file_covers_every_kind_split_and_trust_model() -> None:
    assert VECTORS["format_version"] == SURVEY_FORMAT_VERSION and VECTORS["suite"] == SUITE_ID
    assert all(case["config"]["format_version"] == SURVEY_FORMAT_VERSION for case in VECTORS["campaigns"])
    public = bytes.fromhex(VECTORS["keypair"]["public_key_hex"])
    assert public_key_of(PRIVATE) == public == decode_key(VECTORS["keypair"]["public_key"])
    questions = [q for config in CONFIGS.values() for q in config.questions]
    assert {q.kind for q in questions} == {"choice", "multi", "number"}
    assert {q.mechanism for q in questions} >= {
        "binary-rr", "grr", "oue", "olh", "bitvector", "padding", "duchi", "piecewise", "hybrid", "none"
    }  # fmt: skip
    assert {c.split.mode for c in CONFIGS.values()} == {"per_question", "sampling"}
    assert {c.trust_model for c in CONFIGS.values()} == {"local", "central"}
    assert any(c.recurring for c in CONFIGS.values()) and any(q.optional for q in questions)
    assert any(getattr(q, "bins", None) for q in questions) and any(getattr(q, "clip", False) for q in questions)


@pytest.mark.parametrize("case", VECTORS["campaigns"], ids=lambda c: c["name"])
def test_survey_descriptors_parse_and_fingerprint_as_recorded(case: dict[str, Any]) -> None:
    config = CONFIGS[case["name"]]
    assert config.format_version == 3 and config.to_json() == case["config"]
    assert config.pinned_fingerprint() == case["fingerprint"]
    assert config.padded_length == case["padded_length"]


@pytest.mark.parametrize(("name", "item"), ENVELOPES)
def test_survey_envelopes_open_to_the_recorded_payloads(name: str, item: dict[str, Any]) -> None:
    config = CONFIGS[name]
    envelope = Envelope.from_json(item["envelope"])
    assert envelope.version == config.envelope_version == 2 and envelope.to_json() == item["envelope"]
    secret = bytes.fromhex(item["device_secret_hex"])
    assert envelope.pseudonym == make_pseudonym(secret, config.id, 2)
    info = hpke_info(config.id, 2, envelope.report_id, envelope.pseudonym)
    assert info.hex() == item["info_hex"]
    plain = SUITE.decrypt(envelope.ciphertext, X25519PrivateKey.from_private_bytes(PRIVATE), info=info)
    assert plain == rfc9180_open(envelope.ciphertext, PRIVATE, info)
    json_bytes = item["plaintext"].encode("utf-8")
    assert json_bytes == canonical_json(item["payload"])
    assert config.padded_length is not None
    assert plain == json_bytes + bytes(config.padded_length - len(json_bytes))
    assert_documented_proof(config.id, secret, envelope, info, item)
    payload = open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE, padded_length=config.padded_length)
    assert payload == item["payload"]
    decoded = config.decode(payload)
    for qid, expected in item["decoded"].items():
        question, report = config.question_by_id(qid), decoded.answers[qid]
        if expected is None:
            assert report is None
        elif "support" in expected:
            assert question.build_mechanism().support(report) == expected["support"]
        elif "t" in expected:
            t = question.build_mechanism().value_of_report(report)
            assert f"{t.numerator}/{t.denominator}" == expected["t"]
        else:
            assert (list(report) if isinstance(report, tuple) else report) == expected["value"]
    assert set(decoded.answers) == set(item["decoded"])


@pytest.mark.parametrize(("name", "item"), ENVELOPES)
def test_the_device_derivation_gives_the_recorded_report_id_and_reports(name: str, item: dict[str, Any]) -> None:
    """Report id, drawn question and reports are a function of (device secret, descriptor, answers)."""
    config = CONFIGS[name]
    secret = bytes.fromhex(item["device_secret_hex"])
    normalized = normalize_answers(config, item["answers"])
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in normalized.items()} == item["normalized"]
    assert drawn_question(config, secret) == item["drawn"]
    key = "values" if config.trust_model == "central" else "answers"
    if "round" in item:
        report_id = survey_round_report_id(config, secret, normalized, item["round"])
        reports = {}
        for i, question in enumerate(config.questions):
            if item["drawn"] is None or i == item["drawn"]:
                permanent_id, report = survey_permanent(config, secret, i, normalized[question.id])
                reports[question.id] = None if normalized[question.id] is None else report
                if normalized[question.id] is not None:
                    assert item["permanent_ids"][question.id] == permanent_id
    else:
        report_id, reports = survey_one_shot(config, secret, normalized)
    assert report_id == item["envelope"]["report_id"]
    assert config.make_payload(reports, item["payload"]["groups"], item.get("round"))[key] == item["payload"][key]


@pytest.mark.parametrize("item", VECTORS["forged"], ids=lambda i: i["name"])
def test_forged_survey_envelopes_fail(item: dict[str, Any]) -> None:
    config = BY_ID[item["campaign_id"]]
    envelope = Envelope.from_json(item["envelope"])
    with pytest.raises(InvalidReport) as caught:
        if envelope.version != config.envelope_version:  # the aggregator's first check (docs §2)
            raise InvalidReport(f"campaign takes format version {config.envelope_version} envelopes only")
        open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE)  # the proof before the size
    assert str(caught.value) in (PROOF_FAILED, "campaign takes format version 2 envelopes only")


@pytest.mark.parametrize("item", VECTORS["rejected_payloads"], ids=lambda i: i["name"])
def test_decryptable_but_invalid_survey_payloads_are_rejected(item: dict[str, Any]) -> None:
    config = CONFIGS[item["campaign"]]
    envelope = Envelope.from_json(item["envelope"])
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    plain = SUITE.decrypt(envelope.ciphertext, X25519PrivateKey.from_private_bytes(PRIVATE), info=info)
    recorded = bytes.fromhex(item["plaintext_hex"])
    assert plain[: len(recorded)] == recorded and not plain[len(recorded) :].strip(b"\x00")  # padding
    with pytest.raises(InvalidReport):
        config.decode(
            open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE, padded_length=config.padded_length)
        )
