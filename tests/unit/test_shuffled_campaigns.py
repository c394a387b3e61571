"""Creating shuffled campaigns on the aggregator app (Flask test client, no server): what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.aggregator.api.app import create_app
from deniable.shared.keys import encode_key, generate_keypair
from deniable.shared.limits import MAX_BODY_BYTES_DEFAULT

ADMIN = "admin-" + "k" * 40
SHUFFLER = {
    "url": "http://127.0.0.1:8100",
    "public_key": encode_key(generate_keypair()[1]),
    "verify_key": encode_key(Ed25519PrivateKey.generate().public_key().public_bytes_raw()),
}


def _create(tmp_path: Path, max_body: int, **fields: Any) -> Any:
    app = create_app({"DATA_DIR": tmp_path, "ADMIN_TOKEN": ADMIN, "ANALYST_TOKEN": "analyst-" + "a" * 40,
                      "MAX_CONTENT_LENGTH": max_body})  # fmt: skip
    body = {"id": "s", "question": "Q?", "categories": ["no", "yes"], "epsilon": 2.0, "trust_model": "shuffled",
            "delta": 1e-6, **fields}  # fmt: skip
    return app.test_client().post("/api/v1/campaigns", json=body, headers={"Authorization": f"Bearer {ADMIN}"})


def test_a_threshold_that_fits_one_request_is_taken(tmp_path: Path) -> None:
    """The largest threshold of the smallest campaign fits the default body limit (as limits.py says)."""
    answer = _create(tmp_path, MAX_BODY_BYTES_DEFAULT, shuffler={**SHUFFLER, "min_batch": 100_000})
    assert answer.status_code == 201, answer.get_json()
    assert answer.get_json()["shuffler"]["min_batch"] == 100_000


def test_a_threshold_past_the_body_limit_is_refused_with_what_fits(tmp_path: Path) -> None:
    answer = _create(tmp_path, 1024 * 1024, shuffler={**SHUFFLER, "min_batch": 100_000})
    assert answer.status_code == 422
    message = answer.get_json()["error"]["message"]
    assert "does not fit one request" in message and "declare at most 12627" in message


def test_a_shuffler_that_is_not_an_object_or_is_missing_is_refused(tmp_path: Path) -> None:
    assert _create(tmp_path / "a", 8 << 20, shuffler="http://x").status_code == 422
    assert _create(tmp_path / "b", 8 << 20).status_code == 422
