"""The shuffled trust model's wire format (deniable.shared.shuffle) and descriptor rules.

What each party can read: the shuffler opens the outer layer only (dedup token, opaque inner ciphertext),
the aggregator the inner layer only (the report, nothing naming the device); bindings (campaign, report
id, version) hold; batches are authenticated by the shuffler's key; the shuffle is uniform.
"""

from __future__ import annotations

import itertools
import json
import math
import secrets

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scipy import stats

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidConfig, InvalidReport
from deniable.shared.keys import encode_key, generate_keypair
from deniable.shared.sampling import seeded_randbelow
from deniable.shared.shuffle import (
    ShuffledBatch,
    ShuffledEnvelope,
    batch_body_bytes,
    batch_capacity,
    dedup_token,
    open_inner,
    open_outer,
    seal_shuffled,
    shuffle,
    sign_batch,
    verify_batch,
)

AGG_PRIV, AGG_PUB = generate_keypair()
SHUF_PRIV, SHUF_PUB = generate_keypair()
SIGNER = Ed25519PrivateKey.generate()


def _shuffler(**over: object) -> dict[str, object]:
    info: dict[str, object] = {
        "url": "http://127.0.0.1:8100",
        "public_key": encode_key(SHUF_PUB),
        "verify_key": encode_key(SIGNER.public_key().public_bytes_raw()),
        "min_batch": 10,
    }
    return {**info, **over}


def _config(**over: object) -> CampaignConfig:
    fields: dict[str, object] = dict(
        id="smoke", question="Smoke?", categories=["no", "yes"], epsilon=3.0, public_key=AGG_PUB,
        trust_model="shuffled", delta=1e-6, shuffler=_shuffler(),
    )  # fmt: skip
    fields.update(over)
    return CampaignConfig.create(**fields)  # type: ignore[arg-type]


def _seal(config: CampaignConfig, report: int, secret: bytes | None = None, **kw: object) -> ShuffledEnvelope:
    assert config.padded_length is not None
    return seal_shuffled(
        config.make_payload(report), campaign_id=config.id, aggregator_key=AGG_PUB,
        padded_length=config.padded_length, shuffler_key=SHUF_PUB,
        device_secret=secret or secrets.token_bytes(32), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _open_outer(config: CampaignConfig, envelope: ShuffledEnvelope, campaign_id: str | None = None) -> object:
    assert config.padded_length is not None
    return open_outer(
        ShuffledEnvelope.from_json(envelope.to_json()), campaign_id=campaign_id or config.id,
        private_key=SHUF_PRIV, inner_bytes=48 + config.padded_length, with_token=False,
    )  # fmt: skip


def test_descriptor_round_trips_and_pins_the_shuffler() -> None:
    config = _config()
    assert CampaignConfig.from_json(config.to_json()) == config
    body = config.to_json()
    assert body["trust_model"] == "shuffled" and body["delta"] == 1e-6 and body["shuffler"]["min_batch"] == 10
    other = _config(shuffler=_shuffler(min_batch=11))
    assert other.pinned_fingerprint() != config.pinned_fingerprint()  # the threshold is pinned


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"delta": None}, "'delta'"),
        ({"delta": 0.5}, "'delta'"),
        ({"shuffler": None}, "'shuffler'"),
        ({"group_fields": ["country"]}, "group fields"),
        ({"recurring": True}, "recurring"),
        ({"shuffler": _shuffler(min_batch=1)}, "min_batch"),
        ({"shuffler": _shuffler(url="ftp://x")}, "shuffler.url"),
        ({"shuffler": _shuffler(verify_key="A" * 42)}, "verify_key"),
    ],
)
def test_descriptor_refuses_what_breaks_the_model(over: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidConfig, match=needle):
        _config(**over)


def test_a_local_campaign_takes_no_shuffler() -> None:
    with pytest.raises(InvalidConfig, match="shuffled campaigns only"):
        _config(trust_model="local", delta=None)


def test_each_party_reads_only_its_layer() -> None:
    config = _config()
    secret = secrets.token_bytes(32)
    envelope = _seal(config, 1, secret)
    outer = _open_outer(config, envelope)
    assert outer.dedup == dedup_token(secret, config.id)  # type: ignore[attr-defined]
    assert config.padded_length is not None
    payload = open_inner(outer.inner, campaign_id=config.id, private_key=AGG_PRIV, padded_length=config.padded_length)  # type: ignore[attr-defined]
    assert payload == {"report": 1}
    # the shuffler's key does not open the inner layer, and the aggregator's does not open the outer one
    with pytest.raises(InvalidReport):
        open_inner(outer.inner, campaign_id=config.id, private_key=SHUF_PRIV, padded_length=config.padded_length)  # type: ignore[attr-defined]
    with pytest.raises(InvalidReport):
        open_outer(envelope, campaign_id=config.id, private_key=AGG_PRIV, inner_bytes=48 + config.padded_length,
                   with_token=False)  # fmt: skip


def test_the_inner_layer_carries_nothing_of_the_device() -> None:
    """Two devices' inner plaintexts of the same report are byte-identical (no id, pseudonym or key)."""
    config = _config()
    assert config.padded_length == len(canonical_json({"report": 1}))
    inners = []
    for _ in range(2):
        outer = _open_outer(config, _seal(config, 1))
        inners.append(outer.inner)  # type: ignore[attr-defined]
    assert inners[0] != inners[1]  # fresh HPKE encapsulation each time: ciphertexts never repeat
    assert len(inners[0]) == len(inners[1]) == 48 + config.padded_length


def test_every_envelope_of_a_campaign_has_one_size() -> None:
    config = _config(categories=[str(i) for i in range(12)], mechanism="grr")
    sizes = {len(_seal(config, report).ciphertext) for report in (0, 5, 11)}
    assert len(sizes) == 1


def test_the_outer_layer_is_bound_to_campaign_and_report_id() -> None:
    config = _config()
    envelope = _seal(config, 0)
    moved = ShuffledEnvelope(envelope.version, secrets.token_hex(16), envelope.ciphertext)
    with pytest.raises(InvalidReport, match="does not decrypt"):
        _open_outer(config, moved)
    with pytest.raises(InvalidReport, match="does not decrypt"):
        _open_outer(config, envelope, campaign_id="other")


def test_the_dedup_token_is_per_device_and_campaign() -> None:
    secret = secrets.token_bytes(32)
    assert dedup_token(secret, "a") == dedup_token(secret, "a")
    assert dedup_token(secret, "a") != dedup_token(secret, "b")
    assert dedup_token(secret, "a") != dedup_token(secrets.token_bytes(32), "a")


@pytest.mark.parametrize(
    "bad",
    [{"v": 2, "report_id": "0" * 32}, {"v": 1, "report_id": "0" * 32, "ct": "AA"}, {"v": 2, "report_id": "X", "ct": ""},
     [], {"v": 2, "report_id": "0" * 32, "ct": "A" * 10, "pseudonym": "0" * 64}],
)  # fmt: skip
def test_malformed_envelopes_are_refused(bad: object) -> None:
    with pytest.raises(InvalidReport):
        ShuffledEnvelope.from_json(bad)


def test_batches_verify_only_under_the_registered_key_and_unaltered() -> None:
    reports = [secrets.token_bytes(60) for _ in range(5)]
    body = sign_batch(SIGNER, "smoke", "ab" * 16, reports)
    batch = ShuffledBatch.from_json(body, inner_bytes=60)
    key = SIGNER.public_key().public_bytes_raw()
    assert verify_batch(key, "smoke", batch)
    assert not verify_batch(key, "other", batch)
    assert not verify_batch(Ed25519PrivateKey.generate().public_key().public_bytes_raw(), "smoke", batch)
    swapped = ShuffledBatch(batch.batch_id, (reports[1], reports[0], *reports[2:]), batch.signature)
    assert not verify_batch(key, "smoke", swapped)  # the order is signed too
    dropped = ShuffledBatch(batch.batch_id, tuple(reports[:-1]), batch.signature)
    assert not verify_batch(key, "smoke", dropped)
    with pytest.raises(InvalidReport, match="61 bytes"):
        ShuffledBatch.from_json(body, inner_bytes=61)


@pytest.mark.parametrize("padded_length", [12, 100, 1000])
def test_a_batch_of_the_capacity_fits_the_body_limit_and_one_more_does_not(padded_length: int) -> None:
    """What the shuffler forms (batch_capacity) and what the aggregator checks at creation (batch_body_bytes)
    is one bound on the compact JSON a batch is sent as."""
    inner = 48 + padded_length
    for max_body in (4096, 65_536, 1 << 20):
        n = batch_capacity(padded_length, max_body)
        assert batch_body_bytes(padded_length, n) <= max_body < batch_body_bytes(padded_length, n + 1)
        body = sign_batch(SIGNER, "c" * 64, secrets.token_hex(16), [secrets.token_bytes(inner)] * n)
        assert len(json.dumps(body, separators=(",", ":"))) <= batch_body_bytes(padded_length, n)


def test_fisher_yates_is_uniform_over_all_orders() -> None:
    """Chi-squared over the 4! = 24 orders, 24,000 seeded shuffles: every order equally likely."""
    randbelow = seeded_randbelow(np.random.default_rng(18))
    orders = {order: i for i, order in enumerate(itertools.permutations(range(4)))}
    counts = np.zeros(len(orders))
    for _ in range(24_000):
        items = [0, 1, 2, 3]
        shuffle(items, randbelow)
        counts[orders[tuple(items)]] += 1
    assert stats.chisquare(counts).pvalue > 1e-3


def test_fisher_yates_draws_depend_on_the_length_only() -> None:
    bounds: list[int] = []

    def recording(n: int) -> int:
        bounds.append(n)
        return n - 1

    shuffle(list(range(6)), recording)
    assert bounds == [6, 5, 4, 3, 2]
    assert math.factorial(6) == math.prod(bounds)
