"""The shuffled wire format's known-answer vectors (tests/vectors/shuffled-v1.json, docs/wire-format.md §12.7)
stay true to the code: a client in another language that passes them speaks the format byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.shared.base64url import b64url_encode as _b64url_encode
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import encode_key
from deniable.shared.shuffle import (
    ShuffledBatch,
    ShuffledEnvelope,
    batch_message,
    dedup_token,
    inner_info,
    open_inner,
    open_outer,
    outer_info,
    verify_batch,
)

VECTORS: dict[str, Any] = json.loads((Path(__file__).parents[1] / "vectors" / "shuffled-v1.json").read_text())
CONFIG = CampaignConfig.from_json(VECTORS["config"])
AGG = bytes.fromhex(VECTORS["aggregator_keypair"]["private_key_hex"])
SHUF = bytes.fromhex(VECTORS["shuffler_keypair"]["private_key_hex"])


def test_descriptor_fingerprint_padding_and_info() -> None:
    assert CONFIG.pinned_fingerprint() == VECTORS["fingerprint"]
    assert CONFIG.padded_length == VECTORS["padded_length"]
    assert inner_info(CONFIG.id).hex() == VECTORS["inner_info_hex"]
    seed = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(VECTORS["shuffler_signing_seed_hex"]))
    assert CONFIG.shuffler is not None
    assert encode_key(seed.public_key().public_bytes_raw()) == CONFIG.shuffler.verify_key


@pytest.mark.parametrize("case", VECTORS["envelopes"], ids=lambda c: c["envelope"]["report_id"][:8])
def test_envelopes_open_layer_by_layer(case: dict[str, Any]) -> None:
    assert CONFIG.padded_length is not None
    secret = bytes.fromhex(case["device_secret_hex"])
    assert dedup_token(secret, CONFIG.id) == case["dedup"]
    envelope = ShuffledEnvelope.from_json(case["envelope"])
    assert outer_info(CONFIG.id, envelope.report_id).hex() == case["outer_info_hex"]
    outer = open_outer(envelope, campaign_id=CONFIG.id, private_key=SHUF, inner_bytes=48 + CONFIG.padded_length,
                       with_token=False)  # fmt: skip
    plaintext = {"campaign_id": CONFIG.id, "dedup": outer.dedup, "inner": _b64url_encode(outer.inner)}
    assert canonical_json(plaintext).decode() == case["outer_plaintext"]
    payload = open_inner(outer.inner, campaign_id=CONFIG.id, private_key=AGG, padded_length=CONFIG.padded_length)
    assert canonical_json(payload).decode() == case["inner_plaintext"] and payload == case["payload"]
    assert CONFIG.decode(payload).value == payload["report"]


def test_the_batch_verifies() -> None:
    assert CONFIG.shuffler is not None and CONFIG.padded_length is not None
    batch = ShuffledBatch.from_json(VECTORS["batch"]["body"], inner_bytes=48 + CONFIG.padded_length)
    assert batch_message(CONFIG.id, batch.batch_id, batch.reports).hex() == VECTORS["batch"]["message_hex"]
    assert verify_batch(CONFIG.shuffler.verify_key_bytes, CONFIG.id, batch)
