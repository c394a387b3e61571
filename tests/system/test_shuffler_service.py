"""The shuffler between devices and the aggregator, as real processes on free loopback ports.

End to end through the device SDK; the threshold (nothing below it is forwarded or accepted); dedup at the
shuffler; the aggregator's side (signed batches only, stored once per batch id, never a device's
envelope); and faults: the shuffler SIGKILLed under load (nothing acknowledged lost, nothing forwarded
twice) and the aggregator SIGKILLed while the shuffler forwards (retried, stored exactly once).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from support.server import RunningServer, start_server
from support.shuffler import RunningShuffler, create_shuffled_campaign, start_shuffler, wait_for

from deniable.client import Client
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.shuffle import seal_shuffled, sign_batch

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    aggregator = start_server(tmp_path / "agg")
    shuffler = start_shuffler(tmp_path / "shuf", upstream=aggregator.url, interval=0.1)
    try:
        yield aggregator, shuffler
    finally:
        shuffler.stop()
        aggregator.stop()


def _envelopes(config: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """``n`` devices' sealed reports (each its own secret), report 1 for every third device."""
    parsed = CampaignConfig.from_json(config)
    assert parsed.shuffler is not None and parsed.padded_length is not None
    return [
        seal_shuffled(
            parsed.make_payload(int(i % 3 == 0)), campaign_id=parsed.id, aggregator_key=parsed.public_key_bytes,
            padded_length=parsed.padded_length, shuffler_key=parsed.shuffler.public_key_bytes,
            device_secret=secrets.token_bytes(32),
        ).to_json()
        for i in range(n)
    ]  # fmt: skip


def _post(shuffler: RunningShuffler, campaign_id: str, envelopes: list[dict[str, Any]]) -> dict[str, Any]:
    response = shuffler.post(f"/api/v1/campaigns/{campaign_id}/reports", json={"reports": envelopes})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _n(aggregator: RunningServer, campaign_id: str) -> int:
    return int(aggregator.estimate(campaign_id)["n"])


def _batches(aggregator: RunningServer, campaign_id: str) -> list[tuple[int, int]]:
    """``(n, accepted)`` of every stored batch, read from the aggregator's database."""
    with sqlite3.connect(aggregator.data_dir / "deniable.sqlite3") as conn:
        rows = conn.execute("SELECT n, accepted FROM shuffled_batches WHERE campaign_id = ?", (campaign_id,))
        return [(int(n), int(a)) for n, a in rows]


def test_devices_report_through_the_shuffler_and_estimates_carry_the_central_epsilon(pair: Any, tmp_path: Path) -> None:
    aggregator, shuffler = pair
    config = create_shuffled_campaign(aggregator, shuffler, min_batch=12, id="smoke", epsilon=2.0)
    for i in range(11):
        with Client(aggregator.url, state_dir=tmp_path / f"device{i}") as client:
            client.submit("smoke", "yes" if i % 2 else "no")
            result = client.deliver()
            assert (result.accepted, result.pending) == (1, 0), result  # settled on the shuffler's verdict
    time.sleep(1.0)  # ten forwarding passes: one short of the threshold, nothing may leave
    assert _n(aggregator, "smoke") == 0
    assert shuffler.status()["smoke"]["pending_reports"] == 11
    with Client(aggregator.url, state_dir=tmp_path / "device11") as client:
        client.submit("smoke", "yes")
        assert client.deliver().accepted == 1
    estimate = wait_for(lambda: (e := aggregator.estimate("smoke"))["n"] == 12 and e, what="the batch's arrival")
    privacy = estimate["privacy"]
    assert estimate["trust_model"] == "shuffled"
    assert (privacy["epsilon0"], privacy["delta"], privacy["batches"], privacy["smallest_batch"]) == (2.0, 1e-6, 1, 12)
    assert 0 < privacy["epsilon"] <= 2.0 and privacy["method"]
    assert shuffler.status()["smoke"] == {"forwarded_batches": 1, "forwarded_reports": 12}
    assert config["shuffler"]["min_batch"] == 12
    # the same device again: the shuffler counts it once (its dedup token), and the device settles it
    with Client(aggregator.url, state_dir=tmp_path / "device3") as client:
        receipt = client.submit("smoke", "yes")
        assert receipt.memoized and receipt.epsilon_spent == 0  # the same envelope again, nothing spent
        result = client.deliver()
        assert (result.duplicate, result.pending) == (1, 0), result


def test_the_shuffler_counts_one_report_per_device(pair: Any) -> None:
    aggregator, shuffler = pair
    config = create_shuffled_campaign(aggregator, shuffler, min_batch=50, id="dedup")
    parsed = CampaignConfig.from_json(config)
    assert parsed.shuffler is not None and parsed.padded_length is not None
    secret = secrets.token_bytes(32)
    first, second = (
        seal_shuffled(parsed.make_payload(r), campaign_id="dedup", aggregator_key=parsed.public_key_bytes,
                      padded_length=parsed.padded_length, shuffler_key=parsed.shuffler.public_key_bytes,
                      device_secret=secret).to_json()
        for r in (0, 1)
    )  # fmt: skip
    body = _post(shuffler, "dedup", [first, first, second])
    assert [r["status"] for r in body["results"]] == ["accepted", "duplicate", "duplicate"]
    assert "already reported" in body["results"][2]["reason"]
    forged = {**first, "ct": first["ct"][:-4] + ("AAAA" if first["ct"][-4:] != "AAAA" else "BBBB")}
    assert _post(shuffler, "dedup", [forged])["results"][0]["status"] == "rejected"
    assert shuffler.status()["dedup"]["pending_reports"] == 1


def test_the_aggregator_takes_only_signed_batches_of_the_threshold_once(pair: Any) -> None:
    aggregator, shuffler = pair
    create_shuffled_campaign(aggregator, shuffler, min_batch=5, id="direct")
    envelopes = _envelopes(aggregator.get("/api/v1/campaigns/direct").json(), 5)
    direct = aggregator.post("/api/v1/campaigns/direct/reports", json={"reports": envelopes})
    assert direct.status_code == 422 and "shuffler" in direct.json()["error"]["message"]
    # a batch signed by anyone else, or below the threshold, is refused and stores nothing
    _post(shuffler, "direct", envelopes)
    waiting = wait_for(lambda: _batches(aggregator, "direct"), what="the forwarded batch")
    assert waiting == [(5, 5)]
    inner = [secrets.token_bytes(48 + 12) for _ in range(5)]
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    forged = sign_batch(Ed25519PrivateKey.generate(), "direct", secrets.token_hex(16), inner)
    answer = aggregator.post("/api/v1/campaigns/direct/batches", json=forged)
    assert answer.status_code == 403
    short = {**forged, "reports": forged["reports"][:4]}
    assert aggregator.post("/api/v1/campaigns/direct/batches", json=short).status_code == 400
    bad = ({}, {"batch_id": "x", "reports": [], "sig": ""}, [1], {"batch_id": "0" * 32, "reports": "x", "sig": "A"})
    for body in bad:
        assert aggregator.post("/api/v1/campaigns/direct/batches", json=body).status_code == 400
    assert _n(aggregator, "direct") == 5


def test_a_batch_sent_twice_is_stored_once(tmp_path: Path) -> None:
    """The shuffler's retry after a lost answer: the same batch id and content, stored exactly once."""
    from deniable.aggregator.shuffler.keys import ShufflerKeys

    aggregator = start_server(tmp_path / "agg")
    try:
        keys = ShufflerKeys.load_or_create(tmp_path / "keys-only")
        config = aggregator.create_campaign(
            id="twice", question="Q?", categories=["no", "yes"], epsilon=1.0, trust_model="shuffled", delta=1e-6,
            shuffler={"url": "http://127.0.0.1:9", "public_key": keys.public_key, "verify_key": keys.verify_key,
                      "min_batch": 3},
        )  # fmt: skip
        parsed = CampaignConfig.from_json(config)
        from deniable.shared.shuffle import seal_inner

        inner = [seal_inner({"report": 1}, campaign_id="twice", public_key=parsed.public_key_bytes, padded_length=12)
                 for _ in range(4)]  # fmt: skip
        body = sign_batch(keys.signing_key, "twice", secrets.token_hex(16), inner)
        first = aggregator.post("/api/v1/campaigns/twice/batches", json=body).json()
        again = aggregator.post("/api/v1/campaigns/twice/batches", json=body).json()
        assert (first["status"], first["accepted"]) == ("accepted", 4)
        assert (again["status"], again["accepted"]) == ("duplicate", 4)
        # the same ciphertexts under a new batch id (a replay by the shuffler) count once too
        replay = sign_batch(keys.signing_key, "twice", secrets.token_hex(16), inner)
        assert aggregator.post("/api/v1/campaigns/twice/batches", json=replay).json()["accepted"] == 0
        assert _n(aggregator, "twice") == 4
    finally:
        aggregator.stop()


def test_the_shuffler_refuses_campaigns_that_do_not_name_it(pair: Any, tmp_path: Path) -> None:
    aggregator, shuffler = pair
    aggregator.create_campaign(id="plain", question="Q?", categories=["no", "yes"], epsilon=1.0)
    other = start_shuffler(tmp_path / "other", upstream=aggregator.url)
    try:
        create_shuffled_campaign(aggregator, other, min_batch=5, id="elsewhere")
        for campaign in ("plain", "elsewhere"):
            answer = shuffler.post(f"/api/v1/campaigns/{campaign}/reports", json={"reports": [{}]})
            assert answer.status_code == 422, answer.text
        assert shuffler.post("/api/v1/campaigns/nope/reports", json={"reports": [{}]}).status_code == 404
    finally:
        other.stop()


def _load(shuffler: RunningShuffler, campaign_id: str, envelopes: list[dict[str, Any]], acked: set[str],
          stop: threading.Event) -> None:  # fmt: skip
    """Post envelopes in batches of 20 until done or stopped; record what the shuffler acknowledged."""
    session = requests.Session()
    for start in range(0, len(envelopes), 20):
        if stop.is_set():
            return
        chunk = envelopes[start : start + 20]
        try:
            answer = session.post(f"{shuffler.url}/api/v1/campaigns/{campaign_id}/reports", json={"reports": chunk},
                                  timeout=10)  # fmt: skip
        except requests.RequestException:
            return  # the shuffler died: nothing of this request was acknowledged
        if answer.status_code == 200:
            acked.update(r["report_id"] for r in answer.json()["results"] if r["status"] in ("accepted", "duplicate"))


def test_killing_the_shuffler_under_load_loses_nothing_acknowledged_and_forwards_nothing_twice(
    pair: Any,
) -> None:
    aggregator, shuffler = pair
    config = create_shuffled_campaign(aggregator, shuffler, min_batch=25, id="crash")
    envelopes = _envelopes(config, 1200)
    acked: set[str] = set()
    stop = threading.Event()
    threads = [threading.Thread(target=_load, args=(shuffler, "crash", envelopes[i::3], acked, stop)) for i in range(3)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(acked) >= 400, what="load on the shuffler")
    shuffler.kill()  # SIGKILL of master, workers and the forwarder threads together, mid-load
    stop.set()
    for thread in threads:
        thread.join(30)
    shuffler.restart()
    status = shuffler.status().get("crash", {})
    held = sum(status.get(key, 0) for key in ("pending_reports", "waiting_reports", "forwarded_reports"))
    assert held >= len(acked), (status, len(acked))  # every acknowledged report survived the crash
    # the devices retry everything (acknowledged ones are duplicates); then all is forwarded exactly once
    for start in range(0, len(envelopes), 100):
        body = _post(shuffler, "crash", envelopes[start : start + 100])
        assert body["rejected"] == 0
    wait_for(lambda: _n(aggregator, "crash") >= 1200 - 24, timeout=180, what="all full batches at the aggregator")
    time.sleep(1.0)
    batches = _batches(aggregator, "crash")
    assert all(n == accepted >= 25 for n, accepted in batches), batches  # no ciphertext arrived twice
    pending = shuffler.status()["crash"].get("pending_reports", 0)
    assert _n(aggregator, "crash") + pending == 1200 and pending < 25


def test_killing_the_aggregator_while_the_shuffler_forwards_stores_every_batch_exactly_once(pair: Any) -> None:
    aggregator, shuffler = pair
    config = create_shuffled_campaign(aggregator, shuffler, min_batch=200, id="upstream")
    envelopes = _envelopes(config, 2000)
    assert _post(shuffler, "upstream", envelopes[:100])["accepted"] == 100  # the shuffler fetches the descriptor
    aggregator.kill()  # the shuffler keeps taking reports (it holds the descriptor) and cannot forward
    for start in range(100, 1000, 100):
        assert _post(shuffler, "upstream", envelopes[start : start + 100])["accepted"] == 100
    wait_for(lambda: shuffler.status()["upstream"].get("waiting_batches", 0) >= 1, what="batches waiting to be sent")
    aggregator.restart()
    for start in range(1000, 2000, 100):  # more batches while the aggregator goes down again mid-forwarding
        _post(shuffler, "upstream", envelopes[start : start + 100])
    time.sleep(0.3)
    aggregator.kill()
    aggregator.restart()
    # The forwarder backs off up to SHUFFLE_RETRY_MAX (60 s) between attempts on a dead aggregator. A batch
    # takes every pending report once at least min_batch wait, so when a pass comes late (two uploads in
    # one batch of 300) fewer than min_batch may be left at the end: those stay pending, never forwarded.
    def settled() -> bool:
        status = shuffler.status()["upstream"]
        pending = status.get("pending_reports", 0)
        return "waiting_batches" not in status and pending < 200 and _n(aggregator, "upstream") + pending == 2000

    wait_for(settled, timeout=240, what="every batch stored at the aggregator, fewer than min_batch left")
    stored = _n(aggregator, "upstream")
    batches = _batches(aggregator, "upstream")
    assert sum(n for n, _ in batches) == stored and all(n == accepted >= 200 for n, accepted in batches), batches
    status = shuffler.status()["upstream"]
    assert status.pop("pending_reports", 0) == 2000 - stored
    assert status == {"forwarded_batches": len(batches), "forwarded_reports": stored}


def test_admission_tokens_travel_to_the_shuffler_and_are_spent_there(pair: Any, tmp_path: Path) -> None:
    """With admission, the token is in the outer layer: the shuffler verifies and spends it; the aggregator
    never sees it (its inner payload is the report alone)."""
    aggregator, shuffler = pair
    create_shuffled_campaign(aggregator, shuffler, min_batch=3, id="admitted",
                             admission={"tokens_per_account": 2})  # fmt: skip

    def backend(account: str) -> Any:
        def issue(requests: list[str]) -> list[object]:
            answer = aggregator.post("/api/v1/campaigns/admitted/tokens", role="issuer",
                                     json={"account": account, "token_requests": requests})  # fmt: skip
            assert answer.status_code == 200, answer.text
            return list(answer.json()["token_responses"])

        return issue

    for i in range(3):
        with Client(aggregator.url, state_dir=tmp_path / f"admitted{i}") as client:
            assert client.obtain_tokens("admitted", 1, backend(f"user-{i}")) == 1
            client.submit("admitted", "yes")
            assert client.deliver().accepted == 1
            assert client.tokens("admitted") == 0
    wait_for(lambda: _n(aggregator, "admitted") == 3, what="the admitted batch")
    # an outer layer without a token is rejected by the shuffler, before anything is stored
    config = CampaignConfig.from_json(aggregator.get("/api/v1/campaigns/admitted").json())
    untokened = _envelopes(config.to_json(), 1)
    result = _post(shuffler, "admitted", untokened)["results"][0]
    assert result["status"] == "rejected" and "token" in result["reason"]


def test_a_batch_whose_answer_is_lost_is_retried_and_stored_once(tmp_path: Path) -> None:
    """The aggregator stores a batch but its answer never reaches the shuffler (twice): the shuffler sends the
    same batch again until it hears back, and the aggregator keeps it once."""
    from support.faulty import Answer, FaultyAggregator

    aggregator = start_server(tmp_path / "agg")
    try:
        with FaultyAggregator(upstream=aggregator.url) as proxy:
            shuffler = start_shuffler(tmp_path / "shuf", upstream=proxy.url, interval=0.1)
            try:
                config = create_shuffled_campaign(aggregator, shuffler, min_batch=10, id="lost")

                def stored_then_lost(request: Any) -> Answer:
                    body = json.dumps(request.body).encode()
                    forwarded = proxy._forward("POST", request.path, body, "application/json")
                    assert forwarded.status == 200
                    return Answer(503, {"error": {"code": "unavailable", "message": "the answer was lost"}})

                proxy.script(stored_then_lost, times=2)
                assert _post(shuffler, "lost", _envelopes(config, 30))["accepted"] == 30
                wait_for(lambda: shuffler.status()["lost"].get("forwarded_batches") == 1, timeout=60,
                         what="the batch settled at the shuffler")  # fmt: skip
                posts = [r for r in proxy.posts() if r.path.endswith("/batches")]
                assert len(posts) == 3 and len({r.body["batch_id"] for r in posts}) == 1  # the same batch, thrice
                assert _batches(aggregator, "lost") == [(30, 30)] and _n(aggregator, "lost") == 30
            finally:
                shuffler.stop()
    finally:
        aggregator.stop()
