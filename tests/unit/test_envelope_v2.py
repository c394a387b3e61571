"""Wire format version 2: padding to one length per campaign, and the per-campaign device key that signs.

Adversaries: a network observer (sees every envelope's size and bytes) and a malicious device or observer
that captured an envelope and tries to speak for its pseudonym (issue 10 item 4, issue 11 item 2). The
end-to-end attack against the real server is in ``tests/system/test_proof_of_possession.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import (
    ENC_BYTES,
    PROOF_FAILED,
    TAG_BYTES,
    Envelope,
    hpke_info,
    open_envelope,
    seal,
    signed_message,
)
from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.formats import FORMAT_VERSION
from deniable.shared.ids import device_public_key, make_pseudonym, pseudonym_of_key
from deniable.shared.keys import generate_keypair
from deniable.shared.mechanisms import OLHReport

PRIVATE, PUBLIC = generate_keypair()
SECRET = bytes(range(32))


def _campaigns() -> list[CampaignConfig]:
    """Campaigns whose payload widths vary in every part: report digits, hex masks, OLH buckets, declared and
    undeclared groups of different lengths, rounds, central indices."""
    common: dict[str, Any] = {"question": "q?", "public_key": PUBLIC}
    return [
        CampaignConfig.create(id="pad-brr", categories=["no", "yes"], epsilon=1.0, mechanism="binary-rr",
                              group_fields=["country"], group_values={"country": ["de", "usa", "nl", "ch"]},
                              **common),
        CampaignConfig.create(id="pad-grr", categories=[f"c{i}" for i in range(12)], epsilon=2.0, mechanism="grr",
                              group_fields=["os", "country"], group_values={"country": ["de", "usa"]}, **common),
        CampaignConfig.create(id="pad-oue", categories=[f"c{i}" for i in range(10)], epsilon=1.0, mechanism="oue",
                              **common),
        CampaignConfig.create(id="pad-olh", categories=[f"c{i}" for i in range(40)], epsilon=4.0, mechanism="olh",
                              group_fields=["band"], group_values={"band": ["a", "bb", "ccc"]}, **common),
        CampaignConfig.create(id="pad-central", categories=[f"c{i}" for i in range(11)], epsilon=1.0,
                              trust_model="central", budget=2.0, group_fields=["country"],
                              group_values={"country": ["de", "usa", "united-kingdom"]}, **common),
        CampaignConfig.create(id="pad-rounds", categories=[f"c{i}" for i in range(12)], epsilon=1.0, mechanism="grr",
                              recurring=True, **common),
    ]  # fmt: skip


#: Undeclared group values of very different widths: 1 ASCII character to 64 characters whose JSON is longest.
UNDECLARED = ["x", "a" * 64, "é" * 64, "😀" * 64, '"' * 64, "\x01" * 64]
ROUNDS = ["1", "2026-11-29", "w" * 32]


def _reports(config: CampaignConfig) -> list[Any]:
    """Every report of the report space (OUE and OLH: its extremes and a spread between)."""
    if config.trust_model == "central":
        return list(range(config.k))
    mechanism = config.build_mechanism()
    if config.mechanism in ("binary-rr", "grr"):
        return list(range(config.k))
    if config.mechanism == "oue":
        return [0, 1, (1 << config.k) - 1, *range(3, 1 << config.k, 97)]
    g = int(config.params["g"])
    return [OLHReport(seed, y) for seed in (0, 1, 2**64 - 1, 0x9E3779B97F4A7C15) for y in range(g)] + [
        mechanism.randomize(v) for v in range(config.k)
    ]


def _group_choices(config: CampaignConfig) -> list[dict[str, str]]:
    per_field = [
        list(config.group_values[name]) if name in config.group_values else UNDECLARED for name in config.group_fields
    ]
    return [dict(zip(config.group_fields, combo, strict=True)) for combo in itertools.product(*per_field)]


@pytest.mark.parametrize("config", _campaigns(), ids=lambda c: c.id)
def test_every_envelope_of_a_campaign_has_one_length(config: CampaignConfig) -> None:
    """Over every value/report, every declared group value (and undeclared ones of every width) and round:
    one ciphertext length per campaign, 48 + padded_length, and each opens to its payload."""
    lengths: set[int] = set()
    rounds: list[str | None] = list(ROUNDS) if config.recurring else [None]
    cases = itertools.product(_reports(config), _group_choices(config), rounds)
    for count, (report, groups, round_) in enumerate(cases):
        payload = config.make_payload(report, groups, round_)
        envelope = config.seal(payload, device_secret=SECRET)
        lengths.add(len(envelope.ciphertext))
        if count % 17 == 0:  # open a sample: the padding is removed exactly
            opened = open_envelope(envelope, campaign_id=config.id, private_key=PRIVATE,
                                   padded_length=config.padded_length)  # fmt: skip
            assert opened == payload
    assert config.padded_length is not None
    assert lengths == {ENC_BYTES + config.padded_length + TAG_BYTES}, (config.id, sorted(lengths))


def test_the_lengths_differ_between_campaigns_only_through_the_descriptor() -> None:
    """The issue's examples: index 0-9 vs 10-11, GRR report 0 vs 11, group 'de' vs 'usa' had different sizes."""
    by_id = {c.id: c for c in _campaigns()}
    central = by_id["pad-central"]
    sizes = {len(central.seal(central.make_payload(v, {"country": g}), device_secret=SECRET).ciphertext)
             for v in (0, 9, 10) for g in ("de", "usa")}  # fmt: skip
    assert len(sizes) == 1
    assert central.padded_length == len(b'{"groups":{"country":"united-kingdom"},"value":10}')


def test_version_one_campaigns_are_not_padded_and_have_no_length() -> None:
    config = CampaignConfig.from_json({**_campaigns()[0].to_json(), "format_version": 1})
    assert config.padded_length is None
    a = config.seal(config.make_payload(0, {"country": "de"}), device_secret=SECRET)
    b = config.seal(config.make_payload(0, {"country": "usa"}), device_secret=SECRET)
    assert (a.version, a.device_key, a.signature) == (1, None, None)
    assert len(b.ciphertext) == len(a.ciphertext) + 1  # the leak version 2 closes
    assert a.pseudonym == make_pseudonym(SECRET, config.id, 1)


def test_a_payload_wider_than_the_descriptor_allows_cannot_be_sealed() -> None:
    config = _campaigns()[0]
    with pytest.raises(InvalidParameter, match="more than the campaign's padded length"):
        config.seal({"report": 1, "groups": {"country": "a-much-longer-value"}}, device_secret=SECRET)


def test_a_ciphertext_of_another_length_is_rejected_before_it_is_opened() -> None:
    config = _campaigns()[0]
    assert config.padded_length is not None
    payload = config.make_payload(1, {"country": "de"})
    longer = seal(payload, campaign_id=config.id, public_key=PUBLIC, device_secret=SECRET,
                  padded_length=config.padded_length + 1)  # fmt: skip
    with pytest.raises(InvalidReport, match=f"must be exactly {48 + config.padded_length} bytes"):
        open_envelope(longer, campaign_id=config.id, private_key=PRIVATE, padded_length=config.padded_length)


# ------------------------------------------------------------------------------------------ device keys


def test_device_keys_are_stable_per_campaign_and_unlinkable_across_campaigns() -> None:
    a, b = device_public_key(SECRET, "alpha"), device_public_key(SECRET, "beta")
    assert a == device_public_key(SECRET, "alpha") and a != b
    assert device_public_key(bytes(32), "alpha") != a
    assert make_pseudonym(SECRET, "alpha") == pseudonym_of_key(a, "alpha")
    assert make_pseudonym(SECRET, "alpha") != make_pseudonym(SECRET, "beta")
    assert make_pseudonym(SECRET, "alpha") != make_pseudonym(SECRET, "alpha", 1)  # v1 and v2 differ too


def _captured() -> tuple[CampaignConfig, Envelope]:
    config = _campaigns()[0]
    return config, config.seal(config.make_payload(0, {"country": "de"}), device_secret=SECRET)


def _forgeries(config: CampaignConfig, captured: Envelope) -> dict[str, Envelope]:
    """What an observer holding the captured envelope (not the device secret) can build."""
    other = config.make_payload(1, {"country": "de"})
    attacker = Ed25519PrivateKey.generate()
    # Another answer sealed under the captured pseudonym and report id, to the public campaign key.
    resealed = seal(other, campaign_id=config.id, public_key=PUBLIC, device_secret=bytes(32),
                    padded_length=config.padded_length, report_id=captured.report_id)  # fmt: skip
    info = hpke_info(config.id, FORMAT_VERSION, captured.report_id, captured.pseudonym)
    own_sig = attacker.sign(signed_message(info, resealed.ciphertext))
    return {
        "captured key, attacker's signature": replace(resealed, pseudonym=captured.pseudonym,
                                                      device_key=captured.device_key, signature=own_sig),
        "attacker's key under the captured pseudonym": replace(
            resealed, pseudonym=captured.pseudonym, device_key=attacker.public_key().public_bytes_raw(),
            signature=own_sig),
        "captured signature on another ciphertext": replace(resealed, pseudonym=captured.pseudonym,
                                                           device_key=captured.device_key,
                                                           signature=captured.signature),
        "captured envelope under a fresh report id": replace(captured, report_id="f" * 32),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_forgeries(*_captured())))
def test_a_captured_envelope_does_not_let_anyone_speak_for_its_pseudonym(name: str) -> None:
    config, captured = _captured()
    forged = _forgeries(config, captured)[name]
    with pytest.raises(InvalidReport) as caught:
        open_envelope(Envelope.from_json(forged.to_json()), campaign_id=config.id, private_key=PRIVATE,
                      padded_length=config.padded_length)  # fmt: skip
    assert str(caught.value) == PROOF_FAILED
    # The device's own envelope still opens.
    assert open_envelope(captured, campaign_id=config.id, private_key=PRIVATE, padded_length=config.padded_length)


def test_the_proof_is_checked_before_decryption() -> None:
    """A forgery is refused without the campaign key: the failure does not depend on the ciphertext opening."""
    config, captured = _captured()
    forged = _forgeries(config, captured)["captured key, attacker's signature"]
    with pytest.raises(InvalidReport, match="proof of possession"):
        open_envelope(forged, campaign_id=config.id, private_key=generate_keypair()[0],
                      padded_length=config.padded_length)  # fmt: skip


def test_an_envelope_is_written_as_text_once_with_the_bytes_of_its_json() -> None:
    """``to_text`` (what the device stores and the outbox sends as it is) is the text of ``to_json``, for
    both versions, every campaign shape and a shuffled envelope; a batch of such texts joined is the
    batch's JSON text, so the body sent is the one an encoder would have written."""
    import json

    from deniable.client.outbox import batch_body
    from deniable.shared.shuffle import ShuffledEnvelope

    texts = []
    for config in _campaigns():
        for version in (1, 2):
            padded = None if version == 1 else 64
            envelope = seal({"report": 1, "groups": {}}, campaign_id=config.id, public_key=PUBLIC,
                            device_secret=SECRET, padded_length=padded, version=version)  # fmt: skip
            text = envelope.to_text()
            assert text == json.dumps(envelope.to_json(), separators=(",", ":"))
            assert Envelope.from_json(json.loads(text)) == envelope
            texts.append(text)
    shuffled = ShuffledEnvelope(2, "ab" * 16, bytes(range(80)))
    assert shuffled.to_text() == json.dumps(shuffled.to_json(), separators=(",", ":"))
    body = {"reports": [json.loads(t) for t in texts]}
    assert batch_body(texts) == json.dumps(body, separators=(",", ":")).encode()
