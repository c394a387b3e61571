"""Campaign lifecycle against the real server: create, read, list, close; keys and tokens on disk."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
from support.reports import simulate_envelopes
from support.server import RunningServer, start_server

from deniable.aggregator.keyring import load_private_key
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import public_key_of
from deniable.shared.mechanisms import choose_mechanism


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_lifecycle_create_read_list_close(aggregator: RunningServer) -> None:
    created = aggregator.create_campaign(
        id="life-1", question="Do you smoke?", categories=["no", "yes"], epsilon=1.0, group_fields=["country"]
    )
    config = CampaignConfig.from_json(created)  # the device's own validation accepts it
    assert config.status == "open" and config.trust_model == "local"
    assert config.mechanism == "binary-rr"
    assert aggregator.get("/api/v1/campaigns/life-1").json() == created  # public: no token needed

    listed = aggregator.get("/api/v1/campaigns", role="analyst").json()["campaigns"]
    mine = next(c for c in listed if c["id"] == "life-1")
    assert mine["n_reports"] == 0 and mine["closed_at"] is None
    assert aggregator.get("/api/v1/campaigns", role="admin").status_code == 200

    closed = aggregator.post("/api/v1/campaigns/life-1/close", role="admin")
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    again = aggregator.post("/api/v1/campaigns/life-1/close", role="admin")
    assert again.status_code == 200 and again.json()["status"] == "closed"
    refreshed = CampaignConfig.from_json(aggregator.get("/api/v1/campaigns/life-1").json())
    assert refreshed.pinned_fingerprint() == config.pinned_fingerprint()  # closing changes no pinned field

    envelopes = simulate_envelopes(created, [0, 1], rng=np.random.default_rng(0), groups=[{"country": "NL"}] * 2)
    refused = aggregator.post("/api/v1/campaigns/life-1/reports", json={"reports": envelopes})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "campaign_closed"
    assert "closed" in refused.json()["error"]["message"]


def test_auto_picks_the_lowest_variance_mechanism(aggregator: RunningServer) -> None:
    for k, eps in [(4, 1.0), (32, 1.0), (12, 3.0)]:
        created = aggregator.create_campaign(
            id=f"auto-{k}-{int(eps)}", question="q", categories=[f"c{i}" for i in range(k)], epsilon=eps
        )
        chosen = choose_mechanism(k, eps)
        assert created["mechanism"] == (chosen if isinstance(chosen, str) else chosen.name)
        assert created["params"]["k"] == k


def test_explicit_mechanisms_and_central_campaigns(aggregator: RunningServer) -> None:
    for mechanism in ("grr", "oue", "olh"):
        created = aggregator.create_campaign(
            id=f"mech-{mechanism}", question="q", categories=["a", "b", "c"], epsilon=2.0, mechanism=mechanism
        )
        assert created["mechanism"] == mechanism
    central = aggregator.create_campaign(
        id="central-1", question="q", categories=["a", "b"], epsilon=0.5, trust_model="central", budget=2.0
    )
    assert central["trust_model"] == "central" and central["mechanism"] == "none"
    assert central["budget"] == 2.0 and central["adjacency"] == "add-remove"


def test_an_existing_id_is_a_conflict(aggregator: RunningServer) -> None:
    fields = {"id": "dup-id", "question": "q", "categories": ["a", "b"], "epsilon": 1.0}
    first = aggregator.create_campaign(**fields)
    again = aggregator.post("/api/v1/campaigns", role="admin", json={**fields, "question": "other"})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "campaign_exists"
    assert aggregator.get("/api/v1/campaigns/dup-id").json() == first  # key and config unchanged


def test_each_campaign_has_its_own_key_stored_0600_and_never_served(aggregator: RunningServer) -> None:
    a = aggregator.create_campaign(id="key-a", question="q", categories=["a", "b"], epsilon=1.0)
    b = aggregator.create_campaign(id="key-b", question="q", categories=["a", "b"], epsilon=1.0)
    assert a["public_key"] != b["public_key"]
    for config in (a, b):
        key_file = aggregator.data_dir / "keys" / f"{config['id']}.key"
        assert mode(key_file) == 0o600
        private = load_private_key(aggregator.data_dir, config["id"])
        assert CampaignConfig.from_json(config).public_key_bytes == public_key_of(private)
        for path in (f"/api/v1/campaigns/{config['id']}", "/api/v1/campaigns"):
            text = aggregator.get(path, role="admin").text
            assert private.hex() not in text and "private" not in text
    assert mode(aggregator.data_dir / "keys") == 0o700
    assert mode(aggregator.data_dir / "deniable.sqlite3") == 0o600
    assert private.hex() not in aggregator.logs()


def test_unknown_campaign_is_404(aggregator: RunningServer) -> None:
    for method, path, role in [
        ("GET", "/api/v1/campaigns/no-such", None),
        ("POST", "/api/v1/campaigns/no-such/close", "admin"),
        ("GET", "/api/v1/campaigns/no-such/estimate", "analyst"),
    ]:
        response = aggregator.request(method, path, role=role)
        assert response.status_code == 404, (method, path)
        assert response.json()["error"]["code"] == "unknown_campaign"
    reports = aggregator.post("/api/v1/campaigns/no-such/reports", json={"reports": [{}]})
    assert reports.status_code == 404


def test_generated_tokens_are_0600_files_and_only_their_location_is_printed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, extra_env={"DENIABLE_ADMIN_TOKEN": "", "DENIABLE_ANALYST_TOKEN": ""})
    try:
        admin_file, analyst_file = data / "tokens" / "admin.token", data / "tokens" / "analyst.token"
        assert mode(admin_file) == mode(analyst_file) == 0o600
        admin, analyst = admin_file.read_text().strip(), analyst_file.read_text().strip()
        assert len(admin) >= 43 and admin != analyst
        logs = server.logs()
        assert str(admin_file) in logs and str(analyst_file) in logs
        assert admin not in logs and analyst not in logs
        ok = server.get("/api/v1/campaigns", headers={"Authorization": f"Bearer {analyst}"})
        assert ok.status_code == 200
        server.stop()
        server.restart()  # a restart reuses the stored tokens
        assert server.get("/api/v1/campaigns", headers={"Authorization": f"Bearer {admin}"}).status_code == 200
        assert admin_file.read_text().strip() == admin
    finally:
        server.stop()
