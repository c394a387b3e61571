"""``tests/vectors/browser-v1.json`` still says what today's Python device computes, and the JS client's
envelopes open with the aggregator's own code (one-shot cases, rounds of a recurring survey, and reports
that spend admission tokens the JS client obtained from Python's issuer).

The file is the contract of the JavaScript client (``js/test/browser-vectors.test.js``): one-shot and
permanent reports, report ids, plaintexts, pseudonyms and answer tags, and the descriptors a device refuses
with their code and message. The second test runs the JS client under Node (``js/tools/seal-vectors.mjs``)
to seal every one-shot case, then opens each envelope as the aggregator does (proof of possession, HPKE,
padding, payload) and checks it holds exactly the recorded plaintext. Without node the second test
skips, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import ENC_BYTES, TAG_BYTES, Envelope, open_envelope

VECTORS = Path(__file__).parents[1] / "vectors"
JS = Path(__file__).resolve().parents[2] / "js"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_browser_vectors", VECTORS / "make_browser_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDED: dict[str, Any] = json.loads((VECTORS / "browser-v1.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("section", ["one_shot", "permanent", "invalid_descriptors", "survey_mechanisms"])
def test_recorded_section_is_what_python_computes_today(section: str) -> None:
    today = json.loads(json.dumps(_generator().build(), ensure_ascii=False))
    assert today[section] == RECORDED[section]


def node_js() -> str:
    """The node binary with the JS client's packages installed (``npm ci``), or skip (fail under CI)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node/npm are missing: the JavaScript client cannot be checked")
        pytest.skip("node/npm are missing")
    if not (JS / "node_modules" / "@hpke" / "core").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS, check=True, timeout=300)
    return node


def test_python_aggregator_opens_every_envelope_the_js_client_seals() -> None:
    node = node_js()
    done = subprocess.run(
        [node, "tools/seal-vectors.mjs"], cwd=JS, check=True, capture_output=True, text=True, timeout=120
    )
    envelopes = json.loads(done.stdout)
    cases = RECORDED["one_shot"]
    assert len(envelopes) == len(cases)
    keys = {
        name: bytes.fromhex(json.loads((VECTORS / name).read_text())["keypair"]["private_key_hex"])
        for name in ("wire-v1.json", "wire-v2.json")
    }
    for case, obj in zip(cases, envelopes, strict=True):
        config = CampaignConfig.from_json(case["config"])
        envelope = Envelope.from_json(obj)
        assert envelope.report_id == case["report_id"] and envelope.pseudonym == case["pseudonym"]
        if config.padded_length is not None:
            assert len(envelope.ciphertext) == ENC_BYTES + config.padded_length + TAG_BYTES
        private = keys["wire-v1.json" if config.format_version == 1 else "wire-v2.json"]
        payload = open_envelope(envelope, campaign_id=config.id, private_key=private,
                                padded_length=config.padded_length)  # fmt: skip
        config.decode(payload)
        assert json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False) == case["plaintext"]


def _device_run(job: dict[str, Any], sign: Any = None) -> dict[str, Any]:
    """Run ``js/tools/device-roundtrip.mjs`` on ``job``; ``sign(requests)`` answers its token requests."""
    node = node_js()
    with subprocess.Popen(
        [node, "tools/device-roundtrip.mjs"], cwd=JS, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(job) + "\n")
        process.stdin.flush()
        if job.get("tokens"):
            requests = json.loads(process.stdout.readline())["requests"]
            process.stdin.write(json.dumps({"responses": sign(requests)}) + "\n")
            process.stdin.flush()
        out: dict[str, Any] = json.loads(process.stdout.readline())
        process.stdin.close()
        assert process.wait(timeout=120) == 0
    return out


def test_js_tokens_from_the_python_issuer_are_spent_and_verified_by_the_aggregator_code() -> None:
    """The JS client blinds token requests, Python's issuer signs them, the JS client unblinds, verifies and
    spends one per report: the aggregator's code opens each envelope and verifies its token."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from deniable.shared import blindrsa
    from deniable.shared.base64url import b64url_decode, b64url_encode
    from deniable.shared.tokens import Token

    tv = json.loads((VECTORS / "admission-tokens-v1.json").read_text())
    n, e, d, p, q = (int(tv[k], 16) for k in ("n", "e", "d", "p", "q"))
    key = rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), rsa.RSAPublicNumbers(e, n)
    ).private_key()
    wire = json.loads((VECTORS / "wire-v2.json").read_text())
    descriptor = {**next(c["config"] for c in wire["campaigns"] if c["name"] == "grr"), "id": "admitted"}
    descriptor["admission"] = {"type": "privacy-pass-blind-rsa", "token_type": 2, "issuer_key": tv["issuer_key"],
                               "tokens_per_account": 5}  # fmt: skip
    config = CampaignConfig.from_json(descriptor)

    def sign(requests: list[str]) -> list[str]:
        out = []
        for text in requests:
            raw = b64url_decode(text)
            assert raw is not None and raw[:3] == b"\x00\x02" + bytes.fromhex(tv["token_key_id"])[-1:]
            out.append(b64url_encode(blindrsa.blind_sign(key, raw[3:])))
        return out

    groups = {"country": "NL", "age-band": "18-34"}
    run = _device_run({"descriptor": descriptor, "secret_hex": "33" * 32, "tokens": 2,
                       "answers": [{"value": config.categories[1], "groups": groups}]}, sign)  # fmt: skip
    [obj] = run["envelopes"]
    private = bytes.fromhex(wire["keypair"]["private_key_hex"])
    payload = open_envelope(Envelope.from_json(obj), campaign_id=config.id, private_key=private,
                            padded_length=config.padded_length)  # fmt: skip
    decoded = config.decode(payload)
    assert decoded.token is not None and decoded.groups == groups
    assert config.admission is not None
    Token.parse(payload["token"]).verify(config.admission, config.id)  # raises unless valid for this campaign


def test_js_recurring_survey_rounds_are_the_python_derivation() -> None:
    """A recurring survey answered by the JS client: the round's report id and plaintext are Python's."""
    v3 = json.loads((VECTORS / "wire-v3.json").read_text())
    campaign = next(c for c in v3["campaigns"] if c["name"] == "recurring")
    config = CampaignConfig.from_json(campaign["config"])
    private = bytes.fromhex(v3["keypair"]["private_key_hex"])
    for case in campaign["envelopes"]:
        run = _device_run({"descriptor": campaign["config"], "secret_hex": case["device_secret_hex"],
                           "answers": [{"value": case["answers"], "groups": case["payload"]["groups"],
                                        "round": case["round"]}]})  # fmt: skip
        [obj] = run["envelopes"]
        envelope = Envelope.from_json(obj)
        assert envelope.report_id == case["envelope"]["report_id"]
        payload = open_envelope(envelope, campaign_id=config.id, private_key=private,
                                padded_length=config.padded_length)  # fmt: skip
        assert json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False) == case["plaintext"]
