"""Secrets stay secret: 0600 files in a 0700 data dir, never in a response, a log line or the store.

One full scenario against the real server, started WITHOUT tokens so that it generates them into the data
dir: campaigns of every mechanism and both trust models, reports from the device client (``Client`` with a
state dir, and ``simulate_fleet``), duplicates, rejections, wrong tokens, estimates, a close, malformed
HTTP, and the operator commands (``tokens``, ``campaigns``, ``verify``). The server's stdout/stderr go to a
log file. Then:

* modes: data dir 0700, token and key files 0600 (and their directories 0700), the database files 0600;
  the device's state dir 0700 and its secret 0600;
* every HTTP response collected (status line, headers and body), the server log and the command outputs
  are scanned for the two tokens, every campaign private key (raw hex, base64, base64url, with and without
  padding), the device secret, and values that must never be logged: the distinctive category labels
  devices answered, their ciphertexts and pseudonyms, the client's address and user agent;
* the SQLite store (database and WAL) is scanned for the tokens, keys, client address and user agent.
"""

from __future__ import annotations

import base64
import json
import socket
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from support.cli import deniable
from support.faulty import FaultyTransport
from support.reports import simulate_envelopes
from support.server import RunningServer, start_server

from deniable.aggregator.keyring import load_private_key
from deniable.client import Client, HTTPTransport
from deniable.client.fleet import simulate_fleet
from deniable.client.state import SECRET_FILE

LABELS = ["ans-zq7-never", "ans-zq7-rarely", "ans-zq7-often"]
USER_AGENT = "secret-scan-agent/9.9"
#: The app backend's name of the user who gets admission tokens: the aggregator stores only an HMAC of it.
ACCOUNT = "account-zq7-alice@example.org"

pytestmark = pytest.mark.slow


def _encodings(raw: bytes) -> list[str]:
    """Every textual form a 32-byte secret could leak in."""
    b64 = base64.b64encode(raw).decode()
    b64url = base64.urlsafe_b64encode(raw).decode()
    return [raw.hex(), raw.hex().upper(), b64, b64.rstrip("="), b64url, b64url.rstrip("=")]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _cli(*args: str) -> str:
    done = deniable(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _run_scenario(server: RunningServer, tmp_path: Path, seen: list[str]) -> list[dict[str, Any]]:
    """Drive every kind of request; return the envelopes sent (their ciphertexts must not be logged)."""

    def keep(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        seen.append(f"{response.status_code} {response.reason}\n{headers}\n\n{response.text}")

    server.session.hooks["response"].append(keep)
    server.session.headers["User-Agent"] = USER_AGENT
    configs = [
        server.create_campaign(id="s-grr", question="How often?", categories=LABELS, epsilon=1.0,
                               mechanism="grr", group_fields=["country"]),
        server.create_campaign(id="s-oue", question="How often?", categories=LABELS, epsilon=1.0, mechanism="oue"),
        server.create_campaign(id="s-olh", question="How often?", categories=LABELS, epsilon=1.0, mechanism="olh"),
        server.create_campaign(id="s-central", question="How often?", categories=LABELS, epsilon=0.5,
                               trust_model="central", budget=2.0),
    ]  # fmt: skip
    rng = np.random.default_rng(31337)
    envelopes: list[dict[str, Any]] = []
    for config in configs:
        groups = [{"country": "NL"}] * 60 if config["group_fields"] else None
        batch = simulate_envelopes(config, rng.integers(0, 3, size=60).tolist(), rng=rng, groups=groups)
        envelopes.extend(batch)
        reports = f"/api/v1/campaigns/{config['id']}/reports"
        server.post(reports, json={"reports": batch})
        server.post(reports, json={"reports": batch[:10]})  # duplicates
        server.post(reports, json={"reports": [{**batch[0], "ct": batch[1]["ct"]}]})  # rejected
        server.get(f"/api/v1/campaigns/{config['id']}")
        server.get(f"/api/v1/campaigns/{config['id']}/estimate", role="analyst")
    server.get("/api/v1/campaigns/s-grr/estimate", role="analyst", params={"group_by": "country"})
    server.get("/api/v1/campaigns/s-central/estimate", role="analyst", params={"noise": "nonsense"})
    for role in ("admin", "analyst", None):
        server.get("/api/v1/campaigns", role=role)
        server.post("/api/v1/campaigns/s-oue/close", role=role)
    server.get("/api/v1/campaigns", headers={"Authorization": "Bearer " + server.admin_token + "x"})
    server.get("/api/v1/openapi.json")
    server.get("/healthz")
    server.post("/api/v1/campaigns/s-oue/reports", json={"reports": envelopes[60:62]})  # closed: 409
    server.post("/api/v1/campaigns/s-grr/reports", data=b"{nope", headers={"Content-Type": "application/json"})

    transport = FaultyTransport(HTTPTransport(server.url, timeout=30.0))  # no fault: it keeps every answer
    server.create_campaign(
        id="s-tokens", question="How often?", categories=LABELS, epsilon=1.0, admission={"tokens_per_account": 2}
    )

    def issue(requests: list[str]) -> list[str]:  # the app's backend, which knows the account
        body = {"account": ACCOUNT, "token_requests": requests}
        answer = server.post("/api/v1/campaigns/s-tokens/tokens", role="issuer", json=body)
        assert answer.status_code == 200, answer.text
        return list(answer.json()["token_responses"])

    with Client(server.url, tmp_path / "device", transport=transport) as device:
        device.submit("s-grr", LABELS[2], groups={"country": "FR"})
        device.submit("s-olh", LABELS[1])
        assert device.obtain_tokens("s-tokens", 2, issue) == 2
        device.submit("s-tokens", LABELS[0])
        device.flush()
    fleet = simulate_fleet(server.url, "s-olh", [LABELS[0], LABELS[2]] * 20, transport=transport)
    assert fleet.accepted == 40
    seen.extend(f"{answer.status} {json.dumps(answer.body)}" for answer in transport.answers)

    for raw in (b"GARBAGE\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
            seen.append(sock.recv(65536).decode("latin-1"))
    return envelopes


def test_no_secret_in_files_responses_logs_or_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log_path = tmp_path / "server.log"
    no_tokens = {"DENIABLE_ADMIN_TOKEN": "", "DENIABLE_ANALYST_TOKEN": "", "DENIABLE_ISSUER_TOKEN": ""}
    server = start_server(data_dir, workers=2, log_path=log_path, extra_env=no_tokens)
    try:
        server.admin_token = (data_dir / "tokens" / "admin.token").read_text().strip()
        server.analyst_token = (data_dir / "tokens" / "analyst.token").read_text().strip()
        server.issuer_token = (data_dir / "tokens" / "issuer.token").read_text().strip()
        assert len(server.admin_token) >= 40 and server.admin_token != server.analyst_token
        seen: list[str] = []
        envelopes = _run_scenario(server, tmp_path, seen)
        commands = [
            _cli("tokens", "--data-dir", str(data_dir)),
            _cli("campaigns", "--data-dir", str(data_dir)),
            _cli("verify", "--data-dir", str(data_dir)),
        ]
    finally:
        server.stop()

    # -- file modes ------------------------------------------------------------------------------------
    assert _mode(data_dir) == 0o700
    secret_files = sorted((data_dir / "tokens").glob("*.token")) + sorted((data_dir / "keys").glob("*.key"))
    assert len(secret_files) == 3 + 5
    for path in [*secret_files, data_dir / "deniable.sqlite3"]:
        assert _mode(path) == 0o600, (path, oct(_mode(path)))
    for directory in (data_dir / "tokens", data_dir / "keys"):
        assert _mode(directory) & 0o077 == 0, (directory, oct(_mode(directory)))
    for path in data_dir.rglob("*"):
        assert _mode(path) & 0o077 == 0, f"{path} is readable by others ({oct(_mode(path))})"
    device_dir = tmp_path / "device"
    assert _mode(device_dir) == 0o700
    assert _mode(device_dir / SECRET_FILE) == 0o600

    # -- what must never appear -------------------------------------------------------------------------
    secrets_ = {
        "admin token": [server.admin_token],
        "analyst token": [server.analyst_token],
        "issuer token": [server.issuer_token],
    }
    for path in sorted((data_dir / "keys").glob("*.key")):
        raw = load_private_key(data_dir, path.stem)
        assert len(raw) == 32
        secrets_[f"private key {path.stem}"] = _encodings(raw)
    for path in sorted((data_dir / "keys").glob("*.issuer.pem")):
        pem = path.read_bytes()
        assert _mode(path) == 0o600
        d = serialization.load_pem_private_key(pem, None).private_numbers().d  # type: ignore[union-attr]
        secrets_[f"issuer key {path.name}"] = [f"{d:x}", pem.splitlines()[2].decode()]
    secrets_["device secret"] = _encodings((device_dir / SECRET_FILE).read_bytes())
    never_logged = {
        "category label": LABELS,
        "ciphertext": [e["ct"][:48] for e in envelopes],
        "pseudonym": [e["pseudonym"] for e in envelopes],
        "client address": ["127.0.0.1"],
        "user agent": [USER_AGENT, "deniable-client/"],
        "issuer account": [ACCOUNT],
    }

    responses = "\n".join(seen)
    assert len(seen) > 40
    log = log_path.read_text(errors="replace")
    assert '"POST /api/v1/campaigns/s-grr/reports" 200' in log, "the log was not captured"
    assert "Invalid HTTP request received." in log, "the malformed requests were not logged"
    outputs = "\n".join(commands)
    for what, values in secrets_.items():
        for value in values:
            assert value not in responses, f"{what} in an HTTP response"
            assert value not in log, f"{what} in the server log"
            assert value not in outputs, f"{what} in a command's output"
    client_view = log.replace(server.url, "<bind address>")  # the server's own address is not a client's
    for what, values in never_logged.items():
        for value in values:
            assert value not in client_view, f"{what} {value[:20]!r} in the server log"

    store = b"".join(p.read_bytes() for p in sorted(data_dir.glob("deniable.sqlite3*")))
    stored_never = {"client address": ["127.0.0.1"], "user agent": [USER_AGENT], "issuer account": [ACCOUNT]}
    for what, values in {**secrets_, **stored_never}.items():
        for value in values:
            assert value.encode() not in store, f"{what} in the SQLite store"
