"""Replay and tamper resistance of report ingestion, against the real server.

* Replay: resubmitting every stored report (in other batch sizes and order) answers ``duplicate`` for each
  and changes no estimate, overall or per group.
* Moving a report: an envelope sealed for campaign A and posted to campaign B is rejected (the HPKE
  ``info`` binds the campaign id, and B's key differs); re-labelling it with a fresh report id or another
  pseudonym (to have it counted twice) is rejected too.
* Tampering: flipping any single bit of a ciphertext makes it undecryptable (ChaCha20-Poly1305's tag);
  every bit position of one envelope is tried in one batch, and hypothesis picks further positions of
  other envelopes. The untouched original is accepted afterwards, so the rejections were due to the flip.
* Out of the report space: a payload sealed correctly (shared envelope code, campaign key) whose decrypted
  report is not a valid report of the campaign's mechanism is rejected with a reason and counts nothing.
* One device, one report: a second report from the same pseudonym (a fresh report id and value) is a
  ``duplicate`` and is not counted.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, open_envelope, seal
from deniable.shared.errors import InvalidReport
from deniable.shared.ids import make_pseudonym, new_report_id

REPORTS = "/api/v1/campaigns/{}/reports"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _ct(envelope: dict[str, Any]) -> bytes:
    text = envelope["ct"]
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _flip(envelope: dict[str, Any], bit: int) -> dict[str, Any]:
    raw = bytearray(_ct(envelope))
    raw[bit // 8] ^= 1 << (bit % 8)
    return {**envelope, "ct": _b64url(bytes(raw))}


def _post(server: RunningServer, campaign_id: str, envelopes: list[dict[str, Any]]) -> dict[str, Any]:
    response = server.post(REPORTS.format(campaign_id), json={"reports": envelopes})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert len(body["results"]) == len(envelopes)
    return body


def _device(seed: int) -> bytes:
    """The device secret of simulated device ``seed``."""
    return np.random.default_rng(seed).bytes(32)


def _seal(config: CampaignConfig, payload: dict[str, Any], device: int) -> Envelope:
    """Seal any payload as a device would, padded to the campaign's length (or, if it is wider than any
    valid payload, to its own length: the aggregator then rejects it by its size)."""
    assert config.padded_length is not None
    return seal(payload, campaign_id=config.id, public_key=config.public_key_bytes, device_secret=_device(device),
                padded_length=max(config.padded_length, len(canonical_json(payload))))  # fmt: skip



@pytest.fixture(scope="module")
def aggregator(backend_aggregator: RunningServer) -> RunningServer:
    """The module's server, once over SQLite and once over PostgreSQL."""
    return backend_aggregator

@pytest.fixture(scope="module")
def grouped(aggregator: RunningServer) -> tuple[CampaignConfig, list[dict[str, Any]]]:
    """A GRR campaign (k = 3) grouped by country, holding 600 reports."""
    raw = aggregator.create_campaign(
        id="replay-grouped", question="Which?", categories=["a", "b", "c"], epsilon=1.0, mechanism="grr",
        group_fields=["country"],
    )  # fmt: skip
    config = CampaignConfig.from_json(raw)
    rng = np.random.default_rng(20260601)
    values = rng.integers(0, 3, size=600).tolist()
    groups = [{"country": c} for c in rng.choice(["NL", "FR", "DE"], size=600).tolist()]
    envelopes = simulate_envelopes(config, values, rng=rng, groups=groups)
    assert upload(aggregator, config.id, envelopes, batch_size=250) == {
        "accepted": 600, "duplicate": 0, "rejected": 0,
    }  # fmt: skip
    return config, envelopes


def test_resubmitting_every_report_changes_no_estimate(
    aggregator: RunningServer, grouped: tuple[CampaignConfig, list[dict[str, Any]]]
) -> None:
    config, envelopes = grouped
    before = aggregator.estimate(config.id)
    before_grouped = aggregator.estimate(config.id, group_by="country")
    assert before["n"] == 600
    replay = list(envelopes)
    random.Random(7).shuffle(replay)
    totals = upload(aggregator, config.id, replay, batch_size=333)
    assert totals == {"accepted": 0, "duplicate": 600, "rejected": 0}
    # A batch holding the same envelope twice: both copies are duplicates of the stored one.
    body = _post(aggregator, config.id, [envelopes[0], envelopes[0]])
    assert [r["status"] for r in body["results"]] == ["duplicate", "duplicate"]
    assert aggregator.estimate(config.id) == before
    assert aggregator.estimate(config.id, group_by="country") == before_grouped


def test_a_report_for_campaign_a_is_rejected_by_campaign_b(aggregator: RunningServer) -> None:
    configs = [
        CampaignConfig.from_json(
            aggregator.create_campaign(id=f"moved-{name}", question="Same?", categories=["no", "yes"], epsilon=1.0)
        )
        for name in ("a", "b")
    ]
    a, b = configs
    envelopes = simulate_envelopes(a, [0, 1] * 20, rng=np.random.default_rng(11))
    body = _post(aggregator, b.id, envelopes)
    assert body["rejected"] == 40 and body["accepted"] == 0
    assert all("proof of possession fails" in r["reason"] for r in body["results"])  # the pseudonym binds the id
    assert aggregator.estimate(b.id)["n"] == 0
    # Under the SAME private key the campaign binding alone still refuses it (HPKE info holds the id).
    private_key = aggregator.private_key(a.id)
    envelope = Envelope.from_json(envelopes[0])
    assert open_envelope(envelope, campaign_id=a.id, private_key=private_key)["report"] in (0, 1)
    with pytest.raises(InvalidReport):
        open_envelope(envelope, campaign_id=b.id, private_key=private_key)
    # The rightful campaign takes them all.
    assert _post(aggregator, a.id, envelopes)["accepted"] == 40


def test_relabelled_envelopes_are_rejected(aggregator: RunningServer) -> None:
    config = CampaignConfig.from_json(
        aggregator.create_campaign(id="relabel", question="Twice?", categories=["no", "yes"], epsilon=1.0)
    )
    envelopes = simulate_envelopes(config, [1] * 10, rng=np.random.default_rng(12))
    assert _post(aggregator, config.id, envelopes)["accepted"] == 10
    fresh_ids = [{**e, "report_id": new_report_id()} for e in envelopes]
    other_device = [{**e, "pseudonym": make_pseudonym(_device(1000 + i), config.id)} for i, e in enumerate(envelopes)]
    other_version = [{**e, "v": 1} for e in envelopes]
    for forged in (fresh_ids, other_device, other_version):
        body = _post(aggregator, config.id, forged)
        assert body["rejected"] == 10, body["results"][0]
    assert aggregator.estimate(config.id)["n"] == 10


@pytest.fixture(scope="module")
def tamper_target(aggregator: RunningServer) -> CampaignConfig:
    raw = aggregator.create_campaign(
        id="tamper", question="Flip?", categories=[f"c{i}" for i in range(6)], epsilon=2.0, mechanism="oue",
        group_fields=["region"],
    )  # fmt: skip
    return CampaignConfig.from_json(raw)


def test_every_single_bit_flip_of_a_ciphertext_is_rejected(
    aggregator: RunningServer, tamper_target: CampaignConfig
) -> None:
    (envelope,) = simulate_envelopes(tamper_target, [3], rng=np.random.default_rng(13), groups=[{"region": "north"}])
    bits = 8 * len(_ct(envelope))
    assert bits > 8 * (32 + 16)
    flipped = [_flip(envelope, bit) for bit in range(bits)]
    for start in range(0, bits, 1000):  # a padded ciphertext has more bits than one batch holds
        body = _post(aggregator, tamper_target.id, flipped[start : start + 1000])
        assert body["accepted"] == body["duplicate"] == 0, [r for r in body["results"] if r["status"] != "rejected"][:3]
    assert aggregator.estimate(tamper_target.id)["n"] == 0
    assert _post(aggregator, tamper_target.id, [envelope])["accepted"] == 1


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), position=st.floats(0, 1, exclude_max=True), extra=st.integers(0, 7))
def test_bit_flips_anywhere_are_rejected(
    aggregator: RunningServer, tamper_target: CampaignConfig, seed: int, position: float, extra: int
) -> None:
    (envelope,) = simulate_envelopes(
        tamper_target, [seed % 6], rng=np.random.default_rng(seed), groups=[{"region": f"r{seed % 5}"}]
    )
    bits = 8 * len(_ct(envelope))
    first = int(position * bits)
    tampered = _flip(envelope, first)
    if extra:  # sometimes a second flip elsewhere
        tampered = _flip(tampered, (first + 1 + extra * 37) % bits)
    n_before = aggregator.estimate(tamper_target.id)["n"]
    body = _post(aggregator, tamper_target.id, [tampered])
    assert body["results"][0]["status"] == "rejected"
    assert aggregator.estimate(tamper_target.id)["n"] == n_before


# Hand-made payloads outside each mechanism's report space (or of the wrong shape), per campaign.
OUT_OF_SPACE: dict[str, list[Any]] = {
    "binary-rr": [2, -1, True, 0.5, "1", None, [1], {"report": 1}, 2**70],
    "grr": [5, -1, 10**30, False, 1.5, "2", [], {}],
    "oue": ["20", "1", "001", "0x1", "1F", "G0", 31, "", "ff"],
    "olh": [
        {"seed": "0123456789abcdef", "y": 99},
        {"seed": "0123456789abcdef", "y": -1},
        {"seed": "0123456789abcde", "y": 0},
        {"seed": "0123456789ABCDEF", "y": 0},
        {"seed": 81985529216486895, "y": 0},
        {"seed": "0123456789abcdef", "y": True},
        {"seed": "0123456789abcdef"},
        {"seed": "0123456789abcdef", "y": 0, "z": 1},
        [1, 0],
    ],
}


@pytest.mark.parametrize("mechanism", sorted(OUT_OF_SPACE))
def test_a_decrypted_report_outside_the_report_space_is_rejected(aggregator: RunningServer, mechanism: str) -> None:
    categories = ["no", "yes"] if mechanism == "binary-rr" else [f"v{i}" for i in range(5)]
    config = CampaignConfig.from_json(
        aggregator.create_campaign(
            id=f"space-{mechanism}", question="In range?", categories=categories, epsilon=1.0, mechanism=mechanism
        )
    )
    valid = config.make_payload(config.build_mechanism().randomize(1), {})
    payloads = [{"report": bad, "groups": {}} for bad in OUT_OF_SPACE[mechanism]]
    payloads += [
        {"report": valid["report"]},  # no groups
        {"report": valid["report"], "groups": {"country": "NL"}},  # a group field the campaign lacks
        {"report": valid["report"], "groups": {}, "value": 1},  # an extra key
        {"value": 1, "groups": {}},  # a central payload in a local campaign
    ]
    envelopes = [
        _seal(config, p, i).to_json()
        for i, p in enumerate(payloads)
    ]
    body = _post(aggregator, config.id, envelopes)
    statuses = [(r["status"], p) for r, p in zip(body["results"], payloads, strict=True)]
    assert all(status == "rejected" for status, _ in statuses), [s for s in statuses if s[0] != "rejected"]
    assert all(r["reason"] for r in body["results"])
    assert aggregator.estimate(config.id)["n"] == 0
    # The same sealing path with a valid payload is accepted: the rejections were about the content.
    good = _seal(config, valid, 99)
    assert _post(aggregator, config.id, [good.to_json()])["accepted"] == 1


def test_a_second_report_from_the_same_pseudonym_is_not_counted(aggregator: RunningServer) -> None:
    config = CampaignConfig.from_json(
        aggregator.create_campaign(id="one-device", question="Once?", categories=["no", "yes"], epsilon=1.0)
    )

    def report(device: int, value: int) -> dict[str, Any]:
        payload = config.make_payload(value, {})
        return _seal(config, payload, device).to_json()

    first = [report(device, 1) for device in range(20)]
    assert _post(aggregator, config.id, first)["accepted"] == 20
    before = aggregator.estimate(config.id)
    # Same devices again with fresh report ids and the other value: across batches...
    again = _post(aggregator, config.id, [report(device, 0) for device in range(20)])
    assert again["duplicate"] == 20 and again["accepted"] == 0
    assert all("pseudonym" in r["reason"] for r in again["results"])
    # ... and twice within one batch: the first counts, the second does not.
    body = _post(aggregator, config.id, [report(500, 0), report(500, 1), report(500, 0)])
    assert [r["status"] for r in body["results"]] == ["accepted", "duplicate", "duplicate"]
    after = aggregator.estimate(config.id)
    assert after["n"] == before["n"] + 1 == 21
