"""``tests/vectors/browser-v1.json`` still says what today's Python device computes, and the JS client's
envelopes open with the aggregator's own code.

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
