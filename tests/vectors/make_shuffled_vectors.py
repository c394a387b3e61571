"""Make ``tests/vectors/shuffled-v1.json``: known-answer vectors of the shuffled wire format (§12).

Run once (``python tests/vectors/make_shuffled_vectors.py``); the file is then fixed and
``tests/unit/test_shuffle_vectors.py`` checks the code against it. HPKE sealing is randomized, so the
vectors give the private keys and the ciphertexts: an implementation must open them (and reproduce every
deterministic string), and a sealer is checked by opening its output with the reference code.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.shared.base64url import b64url_encode as _b64url_encode
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import encode_key, generate_keypair
from deniable.shared.shuffle import (
    batch_message,
    dedup_token,
    inner_info,
    open_outer,
    outer_info,
    seal_shuffled,
    sign_batch,
)

OUT = Path(__file__).with_name("shuffled-v1.json")


def main() -> None:
    agg_priv, agg_pub = generate_keypair()
    shuf_priv, shuf_pub = generate_keypair()
    seed = secrets.token_bytes(32)
    signer = Ed25519PrivateKey.from_private_bytes(seed)
    config = CampaignConfig.create(
        id="smoking-2026", question="Did you smoke in the last 30 days?", categories=["no", "yes"], epsilon=4.0,
        public_key=agg_pub, mechanism="binary-rr", trust_model="shuffled", delta=1e-6,
        shuffler={"url": "https://shuffler.example/", "public_key": encode_key(shuf_pub),
                  "verify_key": encode_key(signer.public_key().public_bytes_raw()), "min_batch": 3},
    )  # fmt: skip
    assert config.padded_length is not None and config.shuffler is not None
    envelopes, inners = [], []
    for report in (0, 1, 1):
        secret = secrets.token_bytes(32)
        payload = config.make_payload(report)
        envelope = seal_shuffled(
            payload, campaign_id=config.id, aggregator_key=agg_pub, padded_length=config.padded_length,
            shuffler_key=shuf_pub, device_secret=secret,
        )  # fmt: skip
        outer = open_outer(envelope, campaign_id=config.id, private_key=shuf_priv,
                           inner_bytes=48 + config.padded_length, with_token=False)  # fmt: skip
        inners.append(outer.inner)
        envelopes.append({
            "device_secret_hex": secret.hex(),
            "dedup": dedup_token(secret, config.id),
            "envelope": envelope.to_json(),
            "outer_info_hex": outer_info(config.id, envelope.report_id).hex(),
            "outer_plaintext": canonical_json({"campaign_id": config.id, "dedup": outer.dedup,
                                               "inner": _b64url_encode(outer.inner)}).decode(),
            "inner_plaintext": canonical_json(payload).decode(),
            "payload": payload,
        })  # fmt: skip
    batch_id = secrets.token_hex(16)
    vectors = {
        "description": "deniable wire format §12 (shuffled campaigns): docs/wire-format.md",
        "aggregator_keypair": {"private_key_hex": agg_priv.hex(), "public_key": encode_key(agg_pub)},
        "shuffler_keypair": {"private_key_hex": shuf_priv.hex(), "public_key": encode_key(shuf_pub)},
        "shuffler_signing_seed_hex": seed.hex(),
        "config": config.to_json(),
        "fingerprint": config.pinned_fingerprint(),
        "padded_length": config.padded_length,
        "inner_info_hex": inner_info(config.id).hex(),
        "envelopes": envelopes,
        "batch": {
            "body": sign_batch(signer, config.id, batch_id, inners),
            "message_hex": batch_message(config.id, batch_id, inners).hex(),
        },
    }
    OUT.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
