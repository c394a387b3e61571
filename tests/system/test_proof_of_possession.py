"""The forging attack of issue 11 item 2, against the real server: it must fail.

Adversary: a network observer (or anyone on the device's path) who captured one undelivered envelope. It
does not have the device secret; it knows the campaign's public key and descriptor. Before wire format
version 2 it sealed another answer under the captured pseudonym and posted it first: accepted, the
device's real answer then came back "duplicate" and, in a central campaign, the stored raw answer was
the forger's. The same request also told it whether the pseudonym had reported (a membership oracle).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.faulty import FaultyTransport
from support.server import RunningServer

from deniable.aggregator.store import Store
from deniable.client import Client
from deniable.client.transport import HTTPTransport
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import PROOF_FAILED, Envelope, hpke_info, seal, signed_message


def _captured(link: FaultyTransport) -> list[dict[str, Any]]:
    """The envelopes an observer on the device's link captured (every POST body, the retries too)."""
    return [envelope for request in link.posted() for envelope in request.body["reports"]]


def _forge(config: CampaignConfig, captured: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """Every way the observer can speak for the captured pseudonym without the device's secret."""
    envelope = Envelope.from_json(captured)
    attacker = Ed25519PrivateKey.generate()
    resealed = seal(other, campaign_id=config.id, public_key=config.public_key_bytes, device_secret=bytes(32),
                    padded_length=config.padded_length)  # fmt: skip
    forgeries = []
    for report_id in (envelope.report_id, "e" * 32):  # its report id (to pre-empt it) or a fresh one
        info = hpke_info(config.id, envelope.version, report_id, envelope.pseudonym)
        ct = seal(other, campaign_id=config.id, public_key=config.public_key_bytes, device_secret=bytes(32),
                  padded_length=config.padded_length, report_id=report_id).ciphertext  # fmt: skip
        signature = attacker.sign(signed_message(info, ct))
        base = replace(envelope, report_id=report_id, ciphertext=ct)
        forgeries += [
            replace(base, signature=signature),  # the device's key, the attacker's signature
            replace(base, device_key=attacker.public_key().public_bytes_raw(), signature=signature),
            base,  # the device's key and signature, another ciphertext
        ]
    forgeries.append(replace(resealed, pseudonym=envelope.pseudonym))  # the attacker's own envelope, relabelled
    return [f.to_json() for f in forgeries]


@pytest.mark.parametrize("trust_model", ["local", "central"])
def test_an_observer_cannot_replace_a_devices_answer(
    aggregator: RunningServer, tmp_path: Path, trust_model: str
) -> None:
    cid = f"pop-{trust_model}"
    fields: dict[str, Any] = {"id": cid, "question": "Smoked?", "categories": ["no", "yes"], "epsilon": 1.0}
    if trust_model == "central":
        fields.update(trust_model="central", budget=2.0)
    config = CampaignConfig.from_json(aggregator.create_campaign(**fields))
    assert config.format_version == 2
    link = FaultyTransport(HTTPTransport(aggregator.url), posts_down=True)  # the observer keeps the packets
    device = Client(aggregator.url, tmp_path / "device", transport=link, allow_central=True)
    device.submit(cid, "yes")
    assert device.deliver().delivered == 0  # the envelope was captured on the way and never arrived
    captured = _captured(link)[0]
    assert all(e == captured for e in _captured(link))  # retries resend the identical envelope

    forged = _forge(config, captured, config.make_payload(0, {}))  # the forger's answer: "no"
    body = aggregator.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": forged}).json()
    assert body["accepted"] == body["duplicate"] == 0, body
    assert {r["reason"] for r in body["results"]} == {PROOF_FAILED}

    link.posts_down = False
    result = device.deliver()
    assert (result.delivered, result.rejected, result.pending) == (1, 0, 0), result  # accepted, not "duplicate"
    store = Store(aggregator.data_dir / "deniable.sqlite3")
    try:
        stored = [(rid, json.loads(report)) for rid, _, report in store.iter_reports(cid)]
    finally:
        store.close()
    # One report, the device's own; in the central campaign the stored raw answer is the device's "yes" (1).
    assert [rid for rid, _ in stored] == [captured["report_id"]]
    if trust_model == "central":
        assert stored[0][1] == 1
    device.close()


def test_a_forgery_does_not_tell_whether_the_pseudonym_has_reported(aggregator: RunningServer, tmp_path: Path) -> None:
    """The same answer for a forged envelope under a pseudonym that reported and one that did not."""
    cid = "pop-oracle"
    config = CampaignConfig.from_json(
        aggregator.create_campaign(id=cid, question="Smoked?", categories=["no", "yes"], epsilon=1.0)
    )
    reported = config.seal(config.make_payload(1, {}), device_secret=b"\x01" * 32)
    silent = config.seal(config.make_payload(1, {}), device_secret=b"\x02" * 32)  # never delivered
    assert aggregator.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": [reported.to_json()]}).json()[
        "accepted"
    ] == 1
    answers = []
    for target in (reported, silent):
        (forged,) = _forge(config, target.to_json(), config.make_payload(0, {}))[1:2]
        response = aggregator.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": [forged]})
        result = response.json()["results"][0]
        answers.append((response.status_code, result["status"], result["reason"]))
    assert answers[0] == answers[1] == (200, "rejected", PROOF_FAILED)


@pytest.mark.parametrize("trust_model", ["local", "central"])
def test_an_observer_cannot_pre_empt_a_devices_report_id_under_its_own_key(
    aggregator: RunningServer, tmp_path: Path, trust_model: str
) -> None:
    """The observer seals its own answer, correctly signed by its own device key, under the *captured
    report id* and posts it first. Before the fix the device's real envelope then came back "duplicate"
    (the report id was taken), the SDK settled it as delivered, and only the forger's answer was stored."""
    cid = f"pop-squat-{trust_model}"
    fields: dict[str, Any] = {"id": cid, "question": "Smoked?", "categories": ["no", "yes"], "epsilon": 1.0}
    if trust_model == "central":
        fields.update(trust_model="central", budget=2.0)
    config = CampaignConfig.from_json(aggregator.create_campaign(**fields))
    link = FaultyTransport(HTTPTransport(aggregator.url), posts_down=True)
    device = Client(aggregator.url, tmp_path / "device", transport=link, allow_central=True)
    device.submit(cid, "yes")
    assert device.deliver().delivered == 0
    captured = _captured(link)[0]
    squat = config.seal(config.make_payload(0, {}), device_secret=b"\x07" * 32, report_id=captured["report_id"])
    body = aggregator.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": [squat.to_json()]}).json()
    assert body["accepted"] == 1, body  # a device of its own (Sybils are the admission tokens' business)

    link.posts_down = False
    result = device.deliver()
    assert (result.delivered, result.accepted, result.pending) == (1, 1, 0), result  # counted, not "duplicate"
    store = Store(aggregator.data_dir / "deniable.sqlite3")
    try:
        stored = sorted(json.loads(report) for _, _, report in store.iter_reports(cid))
    finally:
        store.close()
    if trust_model == "central":
        assert stored == [0, 1]  # the forger's "no" and the device's own raw "yes"
    else:  # a local report is randomized (binary RR at ε = 1 keeps "yes" with probability 0.73): count it
        assert len(stored) == 2 and aggregator.estimate(cid)["n"] == 2
    # its retry is still a duplicate of its own report, and the forger's too
    again = aggregator.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": [captured, squat.to_json()]}).json()
    assert again["duplicate"] == 2, again
    device.close()
