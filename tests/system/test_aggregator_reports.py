"""Report batches against the real server: accepted, duplicate, rejected; replays; batch-level errors."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.shared.descriptor import CampaignConfig

CATEGORIES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def campaign(aggregator: RunningServer) -> dict:
    return aggregator.create_campaign(
        id="reports-main", question="q", categories=CATEGORIES, epsilon=1.0, mechanism="grr", group_fields=["g"]
    )


def envelopes(config: dict, n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return simulate_envelopes(config, rng.integers(0, len(config["categories"]), n), rng=rng,
                              groups=[{"g": "x"}] * n)  # fmt: skip


def post(server: RunningServer, campaign_id: str, items: list) -> dict:
    response = server.post(f"/api/v1/campaigns/{campaign_id}/reports", json={"reports": items})
    assert response.status_code == 200, response.text
    return response.json()


def flip_bit(envelope: dict, byte: int) -> dict:
    raw = bytearray(base64.urlsafe_b64decode(envelope["ct"] + "=" * (-len(envelope["ct"]) % 4)))
    raw[byte] ^= 0x01
    return {**envelope, "ct": base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()}


def test_replaying_every_report_changes_nothing(aggregator: RunningServer, campaign: dict) -> None:
    batch = envelopes(campaign, 300, seed=1)
    assert upload(aggregator, campaign["id"], batch, batch_size=120) == {
        "accepted": 300, "duplicate": 0, "rejected": 0,
    }  # fmt: skip
    before = aggregator.estimate(campaign["id"])
    replay = post(aggregator, campaign["id"], batch[:200])
    assert replay["accepted"] == 0 and replay["duplicate"] == 200
    assert {r["reason"] for r in replay["results"]} == {
        "this report_id is already stored; the retry changes nothing"
    }
    assert [r["report_id"] for r in replay["results"]] == [e["report_id"] for e in batch[:200]]
    assert aggregator.estimate(campaign["id"]) == before


def test_one_device_counts_once_per_campaign(aggregator: RunningServer, campaign: dict) -> None:
    config = CampaignConfig.from_json(campaign)
    fresh = [config.seal(config.make_payload(i % 4, {"g": "x"}), device_secret=bytes(range(32))).to_json()
             for i in range(3)]  # fmt: skip
    body = post(aggregator, config.id, fresh)
    assert [r["status"] for r in body["results"]] == ["accepted", "duplicate", "duplicate"]
    assert "already reported" in body["results"][1]["reason"]


def test_per_envelope_problems_are_rejected_without_failing_the_batch(
    aggregator: RunningServer, campaign: dict
) -> None:
    good = envelopes(campaign, 3, seed=2)
    other = aggregator.create_campaign(id="reports-other", question="q", categories=CATEGORIES, epsilon=1.0,
                                       mechanism="grr", group_fields=["g"])  # fmt: skip
    for_other = envelopes(other, 1, seed=3)[0]
    config = CampaignConfig.from_json(campaign)
    secret = bytes(range(1, 33))
    out_of_range = config.seal({"report": 7, "groups": {"g": "x"}}, device_secret=secret).to_json()
    missing_group = config.seal({"report": 1, "groups": {}}, device_secret=secret).to_json()
    items = [
        good[0],
        flip_bit(good[1], 5),  # in the encapsulated key
        flip_bit(good[1], 40),  # in the ciphertext body
        {**good[2], "report_id": "f" * 32},  # moved under another report id: the binding breaks
        for_other,  # sealed for campaign B, sent to campaign A
        out_of_range,
        missing_group,
        {"v": 2, "report_id": "0" * 32, "pseudonym": "0" * 64, "ct": "AAAA"},
        {"v": 1, "report_id": "0" * 32, "pseudonym": "0" * 64, "ct": "not base64!"},
        "not an object",
        [1, 2],
        None,
        {"v": 1},
        good[1],
    ]
    body = post(aggregator, campaign["id"], items)
    statuses = [r["status"] for r in body["results"]]
    assert statuses == ["accepted"] + ["rejected"] * 12 + ["accepted"]
    assert body["accepted"] == 2 and body["rejected"] == 12 and body["duplicate"] == 0
    reasons = [r["reason"] for r in body["results"]]
    assert all(isinstance(reason, str) and reason for reason in reasons[1:-1])
    # Altered or moved envelopes no longer carry a valid signature: the proof fails before decryption.
    assert "proof of possession fails" in reasons[1] and "proof of possession fails" in reasons[4]
    assert "'groups'" in reasons[6]
    assert body["results"][9]["report_id"] is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"reports": []}, "1 to 1000"),
        ({"reports": [{}] * 1001}, "1 to 1000"),
        ({"reports": "x"}, '{"reports"'),
        ({"envelopes": []}, '{"reports"'),
        ([], '{"reports"'),
        ("reports", '{"reports"'),
        ({"reports": [{}], "extra": 1}, "unexpected keys"),
    ],
)
def test_batch_level_problems_are_400(aggregator: RunningServer, campaign: dict, body: object, fragment: str) -> None:
    response = aggregator.post(f"/api/v1/campaigns/{campaign['id']}/reports", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request" and fragment in error["message"]


def test_verify_recounts_and_detects_tampering(backend_server_factory: Any) -> None:
    server = backend_server_factory(workers=1)
    config = server.create_campaign(id="verify-me", question="q", categories=CATEGORIES, epsilon=1.0,
                                    mechanism="oue", group_fields=["g"])  # fmt: skip
    assert upload(server, "verify-me", envelopes(config, 200, seed=4))["accepted"] == 200
    server.stop()
    cmd = [sys.executable, "-m", "deniable.aggregator.cli", "verify", *server.cli_args()]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=server.cli_env())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok        verify-me: 200 reports" in ok.stdout
    store = server.open_store()
    store.connection().execute("UPDATE tally_shards SET n = n + 1 WHERE group_field = ''")
    store.close()
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=server.cli_env())
    assert bad.returncode == 1
    assert "MISMATCH  verify-me" in bad.stdout and "tally overall" in bad.stdout
