"""Admission tokens over the real server (issue 12 item 2): issuance by the issuer route with per-account
quotas, the device SDK obtaining, storing and spending tokens, and the aggregator refusing forged,
foreign, missing and double-spent tokens in the report's own transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from support.reports import seal_reports
from support.server import RunningServer

from deniable.aggregator.store import Store
from deniable.client import AdmissionTokenRequired, Client, InvalidConfig
from deniable.shared.base64url import b64url_decode
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import seal
from deniable.shared.tokens import Token, TokenRequest

CATEGORIES = ["no", "yes", "unsure"]
PSS48 = padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=48)


def _campaign(server: RunningServer, campaign_id: str, per_account: int = 3, **fields: object) -> CampaignConfig:
    body = {
        "id": campaign_id, "question": "Did you cheat?", "categories": CATEGORIES, "epsilon": 1.0,
        "mechanism": "grr", "admission": {"tokens_per_account": per_account}, **fields,
    }  # fmt: skip
    return CampaignConfig.from_json(server.create_campaign(**body))


def _backend(server: RunningServer, campaign_id: str, account: str) -> Callable[[list[str]], Sequence[object]]:
    """The app's backend: it knows the user (``account``) and forwards the requests with the issuer token."""

    def issue(requests: list[str]) -> Sequence[object]:
        response = server.post(
            f"/api/v1/campaigns/{campaign_id}/tokens",
            role="issuer",
            json={"account": account, "token_requests": requests},
        )
        assert response.status_code == 200, response.text
        return list(response.json()["token_responses"])

    return issue


def _tokens(
    server: RunningServer, config: CampaignConfig, account: str, count: int, seen: list[bytes] | None = None
) -> list[Token]:
    """``count`` tokens for ``account``, each checked with cryptography's standard RSASSA-PSS verification;
    ``seen`` collects what the issuer received and answered."""
    assert config.admission is not None
    requests = [TokenRequest.create(config.id, config.admission) for _ in range(count)]
    responses = _backend(server, config.id, account)([r.text for r in requests])
    tokens = [r.finalize(config.admission, s) for r, s in zip(requests, responses, strict=True)]
    for token in tokens:
        config.admission.public_key.verify(token.raw[-256:], token.raw[:-256], PSS48, hashes.SHA384())
    if seen is not None:
        seen += [r.request for r in requests] + [bytes(b64url_decode(s) or b"") for s in responses]
    return tokens


def _without_token(config: CampaignConfig, values: list[int], rng: np.random.Generator) -> list[dict]:
    """Envelopes of valid reports that carry no token, padded to the campaign's length as a forger would."""
    mechanism = config.build_mechanism()
    return [
        seal(
            {"report": mechanism.encode_report(v), "groups": {}},
            campaign_id=config.id,
            public_key=config.public_key_bytes,
            device_secret=rng.bytes(32),
            padded_length=config.padded_length,
            version=config.format_version,
        ).to_json()
        for v in values
    ]


def _post(server: RunningServer, campaign_id: str, envelopes: list[dict]) -> dict:
    response = server.post(f"/api/v1/campaigns/{campaign_id}/reports", json={"reports": envelopes})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_devices_obtain_store_and_spend_tokens_within_their_accounts_quota(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    config = _campaign(aggregator, "tokens-e2e", per_account=2)
    assert config.admission is not None and config.admission.tokens_per_account == 2
    assert aggregator.get("/api/v1/campaigns/tokens-e2e").json()["admission"]["token_type"] == 2
    devices = {name: Client(aggregator.url, tmp_path / name) for name in ("alice", "bob")}
    try:
        with pytest.raises(AdmissionTokenRequired, match="obtain tokens"):
            devices["alice"].submit("tokens-e2e", "yes")
        # Refused before anything was spent or queued.
        assert devices["alice"].ledger().spent == 0 and devices["alice"].pending() == []
        for name, device in devices.items():
            assert device.obtain_tokens("tokens-e2e", 2, _backend(aggregator, "tokens-e2e", name)) == 2
        more = devices["alice"].request_tokens("tokens-e2e", 1)
        refused = aggregator.post(
            "/api/v1/campaigns/tokens-e2e/tokens", role="issuer",
            json={"account": "alice", "token_requests": more.requests},
        )  # fmt: skip
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["issued"], error["limit"], error["requested"]) == ("token_quota_exceeded", 2, 2, 1)
        for name, device in devices.items():
            receipt = device.submit("tokens-e2e", "yes" if name == "alice" else "no")
            assert receipt.queued and device.tokens("tokens-e2e") == 1
            assert device.flush() == 1
            again = device.submit("tokens-e2e", "yes" if name == "alice" else "no")  # memoized: no new token
            assert again.memoized and device.tokens("tokens-e2e") == 1
            device.flush()
    finally:
        for device in devices.values():
            device.close()
    assert aggregator.estimate("tokens-e2e")["n"] == 2
    store = Store(aggregator.data_dir / "deniable.sqlite3")
    assert store.spent_token_count("tokens-e2e") == 2 and store.tokens_issued("tokens-e2e") == (2, 4)


def test_forged_foreign_missing_and_double_spent_tokens_are_rejected(aggregator: RunningServer) -> None:
    config = _campaign(aggregator, "tokens-attack", per_account=10)
    other = _campaign(aggregator, "tokens-other", per_account=10)
    rng = np.random.default_rng(7)
    good = _tokens(aggregator, config, "mallory", 3)
    foreign = _tokens(aggregator, other, "mallory", 1)[0]
    forged = Token(good[0].raw[:-256] + bytes(256))
    reports = [1] * 6
    tokens = [good[0], good[0], forged, foreign, good[1], good[2]]  # good[0] twice in one batch
    body = _post(aggregator, "tokens-attack", seal_reports(config, reports, rng=rng, tokens=tokens))
    statuses = [(r["status"], r["reason"]) for r in body["results"]]
    assert statuses[0] == ("accepted", None)
    assert statuses[1][0] == "rejected" and "already spent" in statuses[1][1]
    assert statuses[2][0] == "rejected" and "signature is not valid" in statuses[2][1]
    assert statuses[3][0] == "rejected" and "another campaign" in statuses[3][1]
    assert [s for s, _ in statuses[4:]] == ["accepted", "accepted"]
    # A later batch replaying a spent token under a fresh device and report id: refused.
    replay = _post(aggregator, "tokens-attack", seal_reports(config, [2], rng=rng, tokens=[good[1]]))
    assert replay["rejected"] == 1 and "already spent" in replay["results"][0]["reason"]
    # No token at all, or a payload without the field: refused; a legitimate retry stays a duplicate.
    bare = _post(aggregator, "tokens-attack", _without_token(config, [1], rng))
    assert bare["rejected"] == 1 and "'token'" in bare["results"][0]["reason"]
    assert aggregator.estimate("tokens-attack")["n"] == 3
    store = Store(aggregator.data_dir / "deniable.sqlite3")
    assert store.spent_token_count("tokens-attack") == 3


def test_forged_devices_without_accounts_move_nothing(aggregator: RunningServer) -> None:
    """The issue's attack: 1,000 forged devices answering "yes", unrandomized, in one burst. With
    admission tokens each one needs an account at the issuer; without, every report is refused."""
    config = _campaign(aggregator, "tokens-flood", per_account=1)
    honest = [_tokens(aggregator, config, f"user-{i}", 1)[0] for i in range(5)]
    rng = np.random.default_rng(8)
    assert _post(aggregator, "tokens-flood", seal_reports(config, [0] * 5, rng=rng, tokens=honest))["accepted"] == 5
    before = aggregator.estimate("tokens-flood")
    for _ in range(2):
        flood = _post(aggregator, "tokens-flood", _without_token(config, [1] * 500, rng))
        assert flood["rejected"] == 500
    fake = [Token(honest[0].raw[:2] + rng.bytes(32) + honest[0].raw[34:-256] + rng.bytes(256)) for _ in range(50)]
    assert _post(aggregator, "tokens-flood", seal_reports(config, [1] * 50, rng=rng, tokens=fake))["rejected"] == 50
    after = aggregator.estimate("tokens-flood")
    assert after["n"] == 5 and after["categories"] == before["categories"]


def test_only_the_issuer_token_issues_and_it_opens_nothing_else(aggregator: RunningServer) -> None:
    config = _campaign(aggregator, "tokens-auth")
    assert config.admission is not None
    body = {"account": "a", "token_requests": [TokenRequest.create(config.id, config.admission).text]}
    path = "/api/v1/campaigns/tokens-auth/tokens"
    assert aggregator.post(path, json=body).status_code == 401
    for role in ("admin", "analyst"):
        response = aggregator.post(path, role=role, json=body)
        assert response.status_code == 403 and "issuer token" in response.json()["error"]["message"]
    assert aggregator.post(path, role="issuer", json=body).status_code == 200
    for route in ("/api/v1/campaigns", "/api/v1/campaigns/tokens-auth/estimate"):
        assert aggregator.get(route, role="issuer").status_code == 403
    plain = aggregator.create_campaign(id="tokens-none", question="?", categories=["a", "b"], epsilon=1.0)
    assert "admission" not in plain
    refused = aggregator.post("/api/v1/campaigns/tokens-none/tokens", role="issuer", json=body)
    assert refused.status_code == 422 and "takes no admission tokens" in refused.json()["error"]["message"]
    for bad, why in [
        ({"account": "", "token_requests": body["token_requests"]}, "'account'"),
        ({"account": "a", "token_requests": []}, "'token_requests'"),
        ({"account": "a", "token_requests": ["AAAA"]}, "TokenRequest of 259 bytes"),
        ({"account": "a"}, "the body must be"),
    ]:
        response = aggregator.post(path, role="issuer", json=bad)
        assert response.status_code == 422 and why in response.json()["error"]["message"], response.text
    cases = [({"tokens_per_account": 0}, "from 1 to 10000"), ({"issuer_key": "x"}, "exactly the key")]
    for admission, why in cases:
        create = {"id": "tokens-bad", "question": "?", "categories": ["a", "b"], "epsilon": 1.0, "admission": admission}
        response = aggregator.post("/api/v1/campaigns", role="admin", json=create)
        assert response.status_code == 422 and why in response.json()["error"]["message"], response.text
    aggregator.post("/api/v1/campaigns/tokens-auth/close", role="admin")
    closed = aggregator.post(path, role="issuer", json={**body, "account": "b"})
    assert closed.status_code == 409 and closed.json()["error"]["code"] == "campaign_closed"


def test_a_device_refuses_tokens_of_a_campaign_without_admission(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="tokens-plain", question="?", categories=["a", "b"], epsilon=1.0)
    with Client(aggregator.url, tmp_path / "device") as device, pytest.raises(InvalidConfig, match="no admission"):
        device.request_tokens("tokens-plain", 1)


def _windows(data: bytes, width: int = 8) -> set[bytes]:
    return {data[i : i + width] for i in range(len(data) - width + 1)}


def test_what_the_issuer_and_the_aggregator_stored_shares_nothing_that_links_them(aggregator: RunningServer) -> None:
    """The issuer's view (the requests and answers it saw, its quota rows) against the aggregator's view (the
    envelopes it received, its spent-token and report rows): no 8-byte run in common."""
    config = _campaign(aggregator, "tokens-views", per_account=2)
    issuer_seen: list[bytes] = []
    tokens = [t for i in range(3) for t in _tokens(aggregator, config, f"person-{i}", 2, issuer_seen)]
    envelopes = seal_reports(config, [0, 1, 2, 0, 1, 2], rng=np.random.default_rng(9), tokens=tokens)
    assert _post(aggregator, "tokens-views", envelopes)["accepted"] == 6
    assert len({len(e["ct"]) for e in envelopes}) == 1  # the token is padded for: every envelope one size
    db = sqlite3.connect(aggregator.data_dir / "deniable.sqlite3")
    try:
        where = "WHERE campaign_id = 'tokens-views'"
        accounts = db.execute(f"SELECT account, issued FROM token_accounts {where}").fetchall()
        spent = [row[0] for row in db.execute(f"SELECT nonce FROM spent_tokens {where}")]
        reports = db.execute(f"SELECT report_id, pseudonym, report_json FROM reports {where}")
        stored = [b"".join(bytes(x) if isinstance(x, bytes) else x.encode() for x in row) for row in reports]
    finally:
        db.close()
    assert [issued for _, issued in accounts] == [2, 2, 2] and len(spent) == 6
    assert sorted(spent) == sorted(t.nonce for t in tokens)  # the aggregator keeps the nonces, nothing else
    issuer_view = _windows(b"".join(issuer_seen + [account for account, _ in accounts]))
    aggregator_view = b"".join(spent + stored + [json.dumps(e).encode() for e in envelopes] + [t.raw for t in tokens])
    assert not issuer_view & _windows(aggregator_view)


def test_a_backup_keeps_the_issuer_key_so_the_restored_campaign_still_issues(tmp_path: Path) -> None:
    from deniable.aggregator.backup import backup_data_dir, restore_data_dir
    from deniable.aggregator.service import Service

    source = tmp_path / "src"
    created = Service(source, database=source / "deniable.sqlite3").create_campaign(
        {"id": "bk-tokens", "question": "q", "categories": ["a", "b"], "epsilon": 1.0,
         "admission": {"tokens_per_account": 2}}
    )  # fmt: skip
    config = CampaignConfig.from_json(created)
    assert config.admission is not None
    summary = backup_data_dir(source, tmp_path / "b.tar")
    assert (summary.campaigns, summary.keys, summary.key_problems) == (1, 2, ())  # HPKE key and issuer key
    restored = restore_data_dir(tmp_path / "b.tar", tmp_path / "dst")
    assert restored.keys == 2
    service = Service(tmp_path / "dst", database=tmp_path / "dst" / "deniable.sqlite3")
    request = TokenRequest.create(config.id, config.admission)
    answer = service.issue_tokens(config.id, {"account": "a", "token_requests": [request.text]})
    request.finalize(config.admission, answer["token_responses"][0]).verify(config.admission, config.id)
