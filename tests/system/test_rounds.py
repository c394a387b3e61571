"""Recurring campaigns collect in rounds: per-round counting and estimates, the permanent response re-sent
in every round with ε charged once per distinct value, and the errors around ``round`` (client and server).

Every test runs against the real aggregator (``deniable serve``) started by the ``aggregator`` fixture.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator.keyring import load_private_key
from deniable.client import Client
from deniable.client.fleet import simulate_fleet
from deniable.client.memo import permanent_response, round_report_id
from deniable.client.report import seal_answer
from deniable.client.state import DB_FILE
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, open_envelope, seal
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport

CATEGORIES = ["red", "green", "blue", "grey"]
ROUNDS = ["2026-11-15", "2026-11-22", "2026-11-29"]


def recurring_campaign(server: RunningServer, cid: str, **extra: Any) -> CampaignConfig:
    body = server.create_campaign(
        id=cid, question="Favourite colour this week?", categories=CATEGORIES, epsilon=2.0, recurring=True, **extra
    )
    assert body["recurring"] is True
    return CampaignConfig.from_json(body)


def round_envelopes(
    config: CampaignConfig, device_secrets: list[bytes], values: list[int], round_: str
) -> list[dict[str, Any]]:
    """What each device sends in ``round_``: its permanent response under the round's report id."""
    mechanism = config.build_mechanism()
    envelopes = []
    for secret, value in zip(device_secrets, values, strict=True):
        _, report = permanent_response(mechanism, secret, config.id, value)
        envelope = seal_answer(
            config,
            secret,
            report,
            None,
            report_id=round_report_id(secret, config.id, value, round_),
            round=round_,
        )
        envelopes.append(envelope.to_json())
    return envelopes


def estimate_error(server: RunningServer, cid: str, **params: Any) -> tuple[int, str]:
    response = server.get(f"/api/v1/campaigns/{cid}/estimate", role="analyst", params=params)
    return response.status_code, response.json()["error"]["message"] if response.status_code != 200 else ""


# ---------------------------------------------------------------------------------------------- descriptor


def test_recurring_is_serialized_only_when_true_and_pinned() -> None:
    key = bytes(range(32))
    plain = CampaignConfig.create(id="c", question="q", categories=CATEGORIES, epsilon=1.0, public_key=key)
    rounds = CampaignConfig.create(
        id="c", question="q", categories=CATEGORIES, epsilon=1.0, public_key=key, recurring=True
    )
    assert "recurring" not in plain.to_json() and rounds.to_json()["recurring"] is True
    assert CampaignConfig.from_json({**plain.to_json(), "recurring": False}) == plain
    assert CampaignConfig.from_json(json.loads(json.dumps(rounds.to_json()))) == rounds
    assert rounds.pinned_fingerprint() != plain.pinned_fingerprint()
    with pytest.raises(InvalidConfig, match="'recurring' must be true or false, got 'yes'"):
        CampaignConfig.from_json({**plain.to_json(), "recurring": "yes"})
    with pytest.raises(InvalidConfig, match="'recurring' applies to local campaigns only"):
        CampaignConfig.create(
            id="c", question="q", categories=CATEGORIES, epsilon=1.0, public_key=key, trust_model="central",
            budget=2.0, recurring=True,
        )  # fmt: skip


def test_round_is_required_for_recurring_payloads_and_forbidden_elsewhere() -> None:
    key = bytes(range(32))
    plain = CampaignConfig.create(id="c", question="q", categories=CATEGORIES, epsilon=1.0, public_key=key,
                                  mechanism="grr")  # fmt: skip
    rounds = CampaignConfig.create(id="c", question="q", categories=CATEGORIES, epsilon=1.0, public_key=key,
                                   mechanism="grr", recurring=True)  # fmt: skip
    assert rounds.make_payload(2, None, "w48") == {"report": 2, "groups": {}, "round": "w48"}
    decoded = rounds.decode({"report": 2, "groups": {}, "round": "w48"})
    assert (decoded.value, decoded.groups, decoded.round) == (2, {}, "w48")
    assert rounds.decode_payload({"report": 2, "groups": {}, "round": "w48"}) == (2, {})
    assert plain.decode({"report": 2, "groups": {}}).round is None
    with pytest.raises(InvalidParameter, match="is recurring: 'round' is required"):
        rounds.make_payload(2)
    with pytest.raises(InvalidReport, match="is recurring: 'round' is required"):
        rounds.decode_payload({"report": 2, "groups": {}})
    with pytest.raises(InvalidParameter, match="is not recurring: 'round' is not allowed"):
        plain.make_payload(2, None, "w48")
    with pytest.raises(InvalidReport, match="is not recurring: 'round' is not allowed"):
        plain.decode_payload({"report": 2, "groups": {}, "round": "w48"})
    for bad in ("", "-w1", "a" * 33, "w 1", "w1\n", 7, None, "é"):
        with pytest.raises(InvalidReport, match=r"'round' must be a label matching \^\[A-Za-z0-9\]"):
            rounds.decode_payload({"report": 2, "groups": {}, "round": bad})
    assert rounds.decode({"report": 2, "groups": {}, "round": "A" + "._-9" * 7 + "abc"}).round is not None


# ---------------------------------------------------------------------------------------------- estimates


def test_each_round_is_estimated_from_its_own_reports(aggregator: RunningServer) -> None:
    config = recurring_campaign(aggregator, "weekly-colour")
    rng = np.random.default_rng(20261129)
    n = 1500
    device_secrets = [rng.bytes(32) for _ in range(n)]
    values = rng.choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])
    truths = []
    for i, round_ in enumerate(ROUNDS):
        if i:  # values change slowly: 15% of the devices move to 'grey' each week
            movers = rng.random(n) < 0.15
            values = np.where(movers, 3, values)
        truths.append(np.bincount(values, minlength=4))
        sent = upload(aggregator, config.id, round_envelopes(config, device_secrets, values.tolist(), round_))
        assert sent == {"accepted": n, "duplicate": 0, "rejected": 0}
    rounds = aggregator.get(f"/api/v1/campaigns/{config.id}/rounds", role="analyst").json()
    assert rounds == {
        "campaign_id": config.id, "recurring": True, "rounds": [{"round": r, "n": n} for r in ROUNDS],
    }  # fmt: skip
    for round_, truth in zip(ROUNDS, truths, strict=True):
        body = aggregator.estimate(config.id, round=round_)
        assert body["round"] == round_ and body["n"] == n
        for row, true_count in zip(body["categories"], truth, strict=True):
            assert abs(row["count"] - true_count) <= 4 * row["stderr"], (round_, row, true_count)
    assert truths[2][3] - truths[0][3] > 8 * aggregator.estimate(config.id, round=ROUNDS[0])["categories"][3]["stderr"]
    empty = aggregator.estimate(config.id, round="2026-12-06")
    assert empty["n"] == 0 and empty["round"] == "2026-12-06"


def test_a_device_counts_once_per_round(aggregator: RunningServer) -> None:
    config = recurring_campaign(aggregator, "once-per-round")
    secret = bytes(range(32))
    first = round_envelopes(config, [secret], [1], "w1")[0]
    assert upload(aggregator, config.id, [first])["accepted"] == 1
    again = round_envelopes(config, [secret], [2], "w1")[0]  # another report id, same device and round
    response = aggregator.post(f"/api/v1/campaigns/{config.id}/reports", json={"reports": [again, first]})
    assert [r["status"] for r in response.json()["results"]] == ["duplicate", "duplicate"]
    assert "once per round" in response.json()["results"][0]["reason"]
    assert upload(aggregator, config.id, round_envelopes(config, [secret], [2], "w2"))["accepted"] == 1
    assert aggregator.estimate(config.id, round="w1")["n"] == 1
    assert aggregator.estimate(config.id, round="w2")["n"] == 1


def test_verify_recounts_round_by_round(aggregator: RunningServer) -> None:
    config = recurring_campaign(aggregator, "verify-rounds", group_fields=["region"])
    for round_ in ("r1", "r2"):
        envelopes = simulate_fleet(aggregator.url, config.id, ["red", "blue", "grey"] * 5,
                                   [{"region": "north"}] * 15, round=round_)  # fmt: skip
        assert envelopes.accepted == 15
    assert aggregator.estimate(config.id, round="r2", group_by="region")["groups"]["north"]["n"] == 15
    cmd = [sys.executable, "-m", "deniable.aggregator.cli", "verify", "--data-dir", str(aggregator.data_dir)]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok        verify-rounds: 30 reports" in ok.stdout


# ---------------------------------------------------------------------------------------------- client


def test_client_sends_the_same_report_each_round_and_pays_once_per_value(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    config = recurring_campaign(aggregator, "client-rounds")
    state = tmp_path / "device"
    with Client(aggregator.url, state) as client:
        w1 = client.submit(config.id, "green", recurring=True, round="w1")
        assert (w1.epsilon_spent, w1.memoized, w1.round) == (2.0, False, "w1")
        retry = client.submit(config.id, "green", recurring=True, round="w1")
        assert (retry.report_id, retry.epsilon_spent, retry.memoized) == (w1.report_id, 0.0, True)
        with pytest.raises(InvalidParameter, match=r"in round 'w1' was already answered at .* with another value"):
            client.submit(config.id, "blue", recurring=True, round="w1")
        w2 = client.submit(config.id, "green", recurring=True, round="w2")
        assert w2.report_id != w1.report_id and (w2.epsilon_spent, w2.memoized) == (0.0, False)
        w3 = client.submit(config.id, "blue", recurring=True, round="w3")
        assert w3.epsilon_spent == 2.0
        w4 = client.submit(config.id, "green", recurring=True, round="w4")
        assert w4.epsilon_spent == 0.0
        assert client.flush() == 4
        assert client.submit(config.id, "green", recurring=True, round="w2").memoized
        assert client.flush() == 1  # the retry of w2 is a duplicate at the aggregator
        ledger = client.ledger()
        [spend] = [c for c in ledger.campaigns if c.campaign_id == config.id]
        assert (spend.epsilon, spend.reports, spend.recurring) == (4.0, 2, True)  # 'green' and 'blue'
    rounds = aggregator.get(f"/api/v1/campaigns/{config.id}/rounds", role="analyst").json()["rounds"]
    assert rounds == [{"round": r, "n": 1} for r in ("w1", "w2", "w3", "w4")]
    private_key = load_private_key(aggregator.data_dir, config.id)
    with sqlite3.connect(state / DB_FILE) as db:
        sent = dict(db.execute("SELECT round, envelope FROM rounds WHERE campaign_id = ?", (config.id,)))
    payloads = {
        round_: open_envelope(Envelope.from_json(json.loads(text)), campaign_id=config.id, private_key=private_key)
        for round_, text in sent.items()
    }
    assert {r: p["round"] for r, p in payloads.items()} == {r: r for r in ("w1", "w2", "w3", "w4")}
    assert payloads["w1"]["report"] == payloads["w2"]["report"] == payloads["w4"]["report"]


def test_client_round_errors(aggregator: RunningServer, tmp_path: Path) -> None:
    recurring_campaign(aggregator, "client-round-errors")
    aggregator.create_campaign(id="client-no-rounds", question="q", categories=CATEGORIES, epsilon=1.0)
    with Client(aggregator.url, tmp_path / "device") as client:
        with pytest.raises(InvalidParameter, match="is recurring and collects in rounds: pass recurring=True"):
            client.submit("client-round-errors", "red", recurring=True)
        with pytest.raises(InvalidParameter, match="is recurring and collects in rounds"):
            client.submit("client-round-errors", "red", round="w1")
        with pytest.raises(InvalidParameter, match=r"'round' must be a label matching"):
            client.submit("client-round-errors", "red", recurring=True, round="week 1")
        with pytest.raises(InvalidParameter, match="is not recurring: it counts one answer per device"):
            client.submit("client-no-rounds", "red", round="w1")
        assert client.ledger().spent == 0 and len(client.pending()) == 0
    with pytest.raises(InvalidParameter, match="is recurring and collects in rounds"):
        simulate_fleet(aggregator.url, "client-round-errors", ["red"])
    with pytest.raises(InvalidParameter, match="is not recurring"):
        simulate_fleet(aggregator.url, "client-no-rounds", ["red"], round="w1")


def test_cli_submit_with_round(aggregator: RunningServer, tmp_path: Path) -> None:
    recurring_campaign(aggregator, "cli-rounds")
    base = [sys.executable, "-m", "deniable.aggregator.cli", "submit", "--aggregator", aggregator.url,
            "--campaign", "cli-rounds", "--value", "red", "--state-dir", str(tmp_path / "cli")]  # fmt: skip
    for round_, spent in (("w1", 2.0), ("w2", 0.0)):
        done = subprocess.run([*base, "--recurring", "--round", round_, "--json"], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["receipt"]["round"] == round_ and out["receipt"]["epsilon_spent"] == spent
        assert out["delivery"]["accepted"] == 1
    missing = subprocess.run(base, capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 1 and "pass --recurring and --round LABEL" in missing.stderr


# ---------------------------------------------------------------------------------------------- server errors


def test_server_requires_round_for_recurring_campaigns_and_refuses_it_elsewhere(aggregator: RunningServer) -> None:
    config = recurring_campaign(aggregator, "server-round-errors")
    plain = CampaignConfig.from_json(
        aggregator.create_campaign(id="server-no-rounds", question="q", categories=CATEGORIES, epsilon=1.0)
    )
    mechanism = config.build_mechanism()
    report = mechanism.encode_report(mechanism.randomize(0))
    secret = bytes(32)

    def sealed(cfg: CampaignConfig, payload: dict[str, Any], rid: str) -> dict[str, Any]:
        length = max(cfg.padded_length or 0, len(canonical_json(payload)))  # a wider payload: rejected by size
        envelope = seal(payload, campaign_id=cfg.id, public_key=cfg.public_key_bytes, device_secret=secret,
                        padded_length=length, report_id=rid)  # fmt: skip
        return envelope.to_json()

    no_round = sealed(config, {"report": report, "groups": {}}, "1" * 32)
    bad_round = sealed(config, {"report": report, "groups": {}, "round": "../etc"}, "2" * 32)
    plain_report = plain.build_mechanism().encode_report(plain.build_mechanism().randomize(0))
    extra_round = sealed(plain, {"report": plain_report, "groups": {}, "round": "w1"}, "3" * 32)
    for cfg, envelope, reason in (
        (config, no_round, "is recurring: 'round' is required"),
        (config, bad_round, "'round' must be a label matching"),
        # A round makes the payload wider than any of a campaign without rounds: refused by its size
        # (the content rule is tested on CampaignConfig.decode).
        (plain, extra_round, "must be exactly"),
    ):
        body = aggregator.post(f"/api/v1/campaigns/{cfg.id}/reports", json={"reports": [envelope]}).json()
        assert body["rejected"] == 1 and reason in body["results"][0]["reason"], body

    status, message = estimate_error(aggregator, config.id)
    assert status == 422 and f"GET /api/v1/campaigns/{config.id}/rounds" in message
    assert estimate_error(aggregator, config.id, round="no spaces")[0] == 422
    status, message = estimate_error(aggregator, plain.id, round="w1")
    assert status == 422 and "'round' applies to recurring campaigns only" in message
    assert aggregator.get(f"/api/v1/campaigns/{plain.id}/rounds", role="analyst").json()["rounds"] == []
    assert aggregator.get(f"/api/v1/campaigns/{config.id}/rounds").status_code == 401
    assert aggregator.get("/api/v1/campaigns/nobody-here/rounds", role="analyst").status_code == 404
    central = aggregator.post("/api/v1/campaigns", role="admin", json={
        "id": "central-rounds", "question": "q", "categories": CATEGORIES, "epsilon": 1.0,
        "trust_model": "central", "budget": 2.0, "recurring": True,
    })  # fmt: skip
    assert central.status_code == 422 and "local campaigns only" in central.json()["error"]["message"]
    # a plain campaign's envelopes (no round) still go in as before
    assert upload(aggregator, plain.id, simulate_envelopes(plain, [0, 1, 2], rng=np.random.default_rng(1)))[
        "accepted"
    ] == 3
