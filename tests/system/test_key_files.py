"""Campaign key files: durable before the campaign is acknowledged, self-checking, and a damaged one is a
503 of its campaign (never a 4xx, never a per-report rejection), logged, and found by ``deniable verify``.

Adversary: operator mistakes and faults (power cut, truncated copy, a key file replaced by other bytes or
by another campaign's key) - issue 10 item 7, issue 11 item 3.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes
from support.server import RunningServer

from deniable.aggregator.keyring import KEY_FILE_FORMAT, Keyring, load_private_key
from deniable.aggregator.service import Service
from deniable.client import Client
from deniable.client.secret_file import write_secret_file
from deniable.client.state import SECRET_FILE, DeviceState
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import CampaignKeyUnavailable

# ------------------------------------------------------------------------------------------ durability


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """Every ``os.fsync`` call as ``(is a directory, inode)``, in order."""
    calls: list[tuple[bool, int]] = []
    real = os.fsync

    def recording(fd: int) -> None:
        st = os.fstat(fd)
        calls.append((stat.S_ISDIR(st.st_mode), st.st_ino))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return calls


def test_the_secret_writer_fsyncs_the_file_and_then_its_directory(tmp_path: Path, fsyncs: list) -> None:
    path = tmp_path / "keys" / "k.key"
    assert write_secret_file(path, b"secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes() == b"secret"
    assert fsyncs == [(False, path.stat().st_ino), (True, path.parent.stat().st_ino)]
    assert not write_secret_file(path, b"other", exclusive=True) and path.read_bytes() == b"secret"
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.key"]  # no temporary file left behind


def test_a_campaign_is_acknowledged_only_after_its_key_file_and_directory_are_durable(
    tmp_path: Path, fsyncs: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix the aggregator fsynced the key file but not the keys directory: a power cut after the
    database commit could lose the key of a campaign whose row survived."""
    service = Service(tmp_path, database=tmp_path / "deniable.sqlite3")
    commits: list[int] = []
    real_insert = service.store.insert_campaign
    def insert(*args: object, **kwargs: object) -> object:
        commits.append(len(fsyncs))
        return real_insert(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(service.store, "insert_campaign", insert)
    service.create_campaign({"id": "durable", "question": "q", "categories": ["a", "b"], "epsilon": 1.0})
    keys_dir = (tmp_path / "keys").stat().st_ino
    key_file = (tmp_path / "keys" / "durable.key").stat().st_ino
    before_row = fsyncs[: commits[0]]
    assert (False, key_file) in before_row and (True, keys_dir) in before_row
    assert before_row.index((True, keys_dir)) > before_row.index((False, key_file))


def test_client_and_aggregator_write_secrets_with_the_same_writer(tmp_path: Path, fsyncs: list) -> None:
    DeviceState(tmp_path / "device").close()
    secret = tmp_path / "device" / SECRET_FILE
    assert (True, secret.parent.stat().st_ino) in fsyncs
    Keyring(tmp_path / "agg").save("c1", bytes(range(32)))
    assert (True, (tmp_path / "agg" / "keys").stat().st_ino) in fsyncs


# ------------------------------------------------------------------------------------------ integrity


def test_key_files_carry_their_campaign_and_public_key(tmp_path: Path) -> None:
    service = Service(tmp_path, database=tmp_path / "deniable.sqlite3")
    config = CampaignConfig.from_json(
        service.create_campaign({"id": "self-check", "question": "q", "categories": ["a", "b"], "epsilon": 1.0})
    )
    text = (tmp_path / "keys" / "self-check.key").read_text()
    assert KEY_FILE_FORMAT in text and config.public_key in text and '"campaign_id":"self-check"' in text
    assert service.keyring.problem("self-check", config.public_key_bytes) is None
    private = service.keyring.private_key("self-check", config.public_key_bytes)
    assert load_private_key(tmp_path, "self-check") == private


def _damage_truncate(path: Path, _other: Path) -> None:
    path.write_bytes(path.read_bytes()[:20])


def _damage_replace(path: Path, _other: Path) -> None:
    path.write_bytes(os.urandom(32))  # what an old raw key file looks like, but not this campaign's key


def _damage_swap(path: Path, other: Path) -> None:
    shutil.copyfile(other, path)


def _damage_flip(path: Path, _other: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b'"private_key":"') + 20
    data[at] = ord("A") if data[at] != ord("A") else ord("B")
    path.write_bytes(bytes(data))


def _damage_delete(path: Path, _other: Path) -> None:
    path.unlink()


DAMAGES: dict[str, Callable[[Path, Path], None]] = {
    "truncated": _damage_truncate,
    "replaced by other bytes": _damage_replace,
    "another campaign's key": _damage_swap,
    "a flipped private key byte": _damage_flip,
    "deleted": _damage_delete,
}


def _campaign(server: RunningServer, cid: str) -> CampaignConfig:
    return CampaignConfig.from_json(server.create_campaign(id=cid, question="q", categories=["a", "b"], epsilon=1.0))


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
def test_a_damaged_key_makes_its_campaign_answer_503_and_is_logged(
    aggregator: RunningServer, damage: str
) -> None:
    slug = damage.replace(" ", "-").replace("'", "")
    config, healthy = _campaign(aggregator, f"kd-{slug}"), _campaign(aggregator, f"kd-ok-{slug}")
    path = aggregator.data_dir / "keys" / f"{config.id}.key"
    saved = path.read_bytes()
    DAMAGES[damage](path, aggregator.data_dir / "keys" / f"{healthy.id}.key")
    envelopes = simulate_envelopes(config, [0, 1, 1], rng=np.random.default_rng(1))
    response = aggregator.post(f"/api/v1/campaigns/{config.id}/reports", json={"reports": envelopes})
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "campaign_key_unavailable"
    assert str(path) not in response.text  # the operator's file layout is for the log, not for devices
    log = aggregator.logs()
    assert f"campaign key unavailable: campaign {config.id!r}: key file {path}" in log
    # Other campaigns are unaffected; restoring the file brings the campaign back without a restart.
    other = simulate_envelopes(healthy, [1], rng=np.random.default_rng(2))
    assert aggregator.post(f"/api/v1/campaigns/{healthy.id}/reports", json={"reports": other}).json()["accepted"] == 1
    path.write_bytes(saved)
    os.utime(path, ns=(0, 123_456_789))  # a restored copy has another mtime than the damaged one
    body = aggregator.post(f"/api/v1/campaigns/{config.id}/reports", json={"reports": envelopes}).json()
    assert body["accepted"] == 3, body


def test_the_sdk_keeps_reports_while_the_key_is_unavailable(aggregator: RunningServer, tmp_path: Path) -> None:
    config = _campaign(aggregator, "kd-sdk")
    path = aggregator.data_dir / "keys" / f"{config.id}.key"
    saved = path.read_bytes()
    path.write_bytes(saved[:10])
    client = Client(aggregator.url, tmp_path / "device")
    client.submit(config.id, "a")
    result = client.deliver()
    assert (result.delivered, result.rejected, result.pending) == (0, 0, 1), result
    path.write_bytes(saved)
    os.utime(path, ns=(0, 987_654_321))
    result = client.deliver()
    assert (result.delivered, result.pending) == (1, 0), result
    client.close()


def test_an_unusable_key_is_logged_as_an_error_at_start_and_on_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = Service(tmp_path, database=tmp_path / "deniable.sqlite3")
    config = CampaignConfig.from_json(
        service.create_campaign({"id": "logged", "question": "q", "categories": ["a", "b"], "epsilon": 1.0})
    )
    path = tmp_path / "keys" / "logged.key"
    path.write_bytes(b"{}")
    with caplog.at_level(logging.ERROR, logger="deniable.aggregator"):
        Service(tmp_path, database=tmp_path / "deniable.sqlite3")  # a worker starting
        with pytest.raises(CampaignKeyUnavailable):
            envelopes = simulate_envelopes(config, [1], rng=np.random.default_rng(4))
            service.submit_reports(config.id, {"reports": envelopes})
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and str(path) in r.getMessage()]
    assert len(errors) == 2 and all("'logged'" in r.getMessage() for r in errors)


def _verify(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deniable.aggregator.cli", "verify", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_keys_are_checked_at_start_and_by_verify(server_factory: Callable[..., RunningServer]) -> None:
    server = server_factory(name="keycheck", workers=1)
    config = _campaign(server, "kd-start")
    assert _verify(server.data_dir).returncode == 0
    server.stop()
    path = server.data_dir / "keys" / f"{config.id}.key"
    path.write_bytes(b"")
    result = _verify(server.data_dir)
    assert result.returncode == 1 and "KEY" in result.stdout and config.id in result.stdout, result.stdout
    server.restart()
    assert f"campaign {config.id!r}: key file {path}" in server.logs()  # at start, before any request
    envelopes = simulate_envelopes(config, [0], rng=np.random.default_rng(3))
    assert server.post(f"/api/v1/campaigns/{config.id}/reports", json={"reports": envelopes}).status_code == 503


# ------------------------------------------------------------------------- sealed in PostgreSQL


def test_sealed_keys_reach_every_instance_and_fail_closed_when_damaged_or_the_kek_differs(
    tmp_path: Path, pg_url: str
) -> None:
    """Over PostgreSQL no key file exists: a campaign created on one instance takes reports on another. An
    instance given another key-encryption key, and any instance after the sealed row is damaged, answer the
    campaign's reports with 503 campaign_key_unavailable (devices keep them), /readyz says so, and
    ``deniable verify`` names the campaign."""
    from support.server import start_server

    shared = {f"{role}_token": f"{role}-{os.urandom(18).hex()}" for role in ("admin", "analyst", "issuer")}
    kek = os.urandom(32).hex()
    a = start_server(tmp_path / "a", database=pg_url, kek=kek, **shared)
    b = start_server(tmp_path / "b", database=pg_url, kek=kek, **shared)
    stray = start_server(tmp_path / "stray", database=pg_url, kek=os.urandom(32).hex(), **shared)
    servers = [a, b, stray]
    try:
        config = CampaignConfig.from_json(
            a.create_campaign(id="sealed", question="q", categories=["a", "b"], epsilon=1.0)
        )
        assert not list((tmp_path / "a").glob("keys/*.key")), "no key file over PostgreSQL"
        envelopes = simulate_envelopes(config, [0, 1] * 10, rng=np.random.default_rng(5))
        path = "/api/v1/campaigns/sealed/reports"
        assert b.post(path, json={"reports": envelopes[:10]}).json()["accepted"] == 10  # b has the key

        refused = stray.post(path, json={"reports": envelopes[10:]})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "campaign_key_unavailable"
        assert stray.get("/readyz").status_code == 503
        assert "sealed under key-encryption key" in stray.logs()

        store = a.open_store()
        store.connection().execute(
            "UPDATE campaign_keys SET sealed = set_byte(sealed, 3, get_byte(sealed, 3) # 1) WHERE campaign_id = ?",
            ("sealed",),
        )
        store.close()
        b.restart()  # a new process: nothing cached
        damaged = b.post(path, json={"reports": envelopes[10:]})
        assert damaged.status_code == 503 and damaged.json()["error"]["code"] == "campaign_key_unavailable"
        assert "does not open under the key-encryption key" in b.logs()
        verify = subprocess.run(
            [sys.executable, "-m", "deniable.aggregator.cli", "verify", *a.cli_args()],
            capture_output=True, text=True, timeout=120, env=a.cli_env(),
        )  # fmt: skip
        assert verify.returncode == 1
        assert "KEY       campaign 'sealed': sealed key in the database: does not open" in verify.stdout
        assert a.estimate("sealed")["n"] == 10  # nothing was stored by the refused batches
    finally:
        for server in servers:
            server.stop()
