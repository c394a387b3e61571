"""The real aggregator (``deniable serve``: gunicorn over uvicorn workers) as a subprocess on a free loopback port.

Usage (or use the ``aggregator`` / ``fresh_aggregator`` / ``server_factory`` fixtures of conftest)::

    server = start_server(tmp_path / "data")
    config = server.create_campaign(id="smoking", question="Do you smoke?", categories=["no", "yes"],
                                    epsilon=1.0)
    server.post(f"/api/v1/campaigns/smoking/reports", json={"reports": [...]})
    server.get("/api/v1/campaigns/smoking/estimate", role="analyst").json()
    server.kill(); server.restart()          # crash and recover on the same data dir and port
    server.stop()

The server runs in its own process group so that :meth:`RunningServer.kill` takes down gunicorn's master
and workers together, like a power cut. Its stdout and stderr go to ``log_path`` (:meth:`logs`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import requests

from deniable.aggregator.harness import STARTUP_TIMEOUT, ServerProcess, free_port

__all__ = ["RunningServer", "free_port", "start_server"]


class RunningServer(ServerProcess):
    """The product's harness (:class:`deniable.aggregator.harness.ServerProcess`: start, health wait, stop,
    kill, restart, logs) plus the ``requests`` helpers a test needs to talk to it."""

    def __init__(self, data_dir: Path, **options: Any) -> None:
        super().__init__(data_dir, **options)
        self.session = requests.Session()

    def stop(self, timeout: float = 20.0) -> int | None:
        self.session.close()
        return super().stop(timeout)

    def kill(self) -> None:
        self.session.close()
        super().kill()

    def cli_args(self) -> list[str]:
        """``--data-dir`` (and ``--database``) for an operator command over this server's data
        (``deniable verify``); run it with :meth:`cli_env`."""
        return ["--data-dir", str(self.data_dir), *(("--database", self.database) if self.database else ())]

    def cli_env(self) -> dict[str, str]:
        """The environment of an operator command over this server's data (the key-encryption key)."""
        return {**os.environ, "DENIABLE_KEY_ENCRYPTION_KEY": self.kek}

    def open_store(self) -> Any:
        """The server's store (SQLite file or PostgreSQL), opened in this process."""
        from deniable.aggregator.api.app import DATABASE_NAME
        from deniable.aggregator.store import Store

        return Store(self.database or self.data_dir / DATABASE_NAME)

    def private_key(self, campaign_id: str) -> bytes:
        """A campaign's private key, from its key file or (PostgreSQL) unsealed from the database and checked."""
        from deniable.aggregator.keyring import load_private_key
        from deniable.aggregator.sealed_keys import parse_kek

        if self.database is None:
            return load_private_key(self.data_dir, campaign_id)
        store = self.open_store()
        try:
            return load_private_key(self.data_dir, campaign_id, sealed_in=store, kek=parse_kek(self.kek, source="kek"))
        finally:
            store.close()

    def restart(self, timeout: float = STARTUP_TIMEOUT) -> RunningServer:
        if self.process is not None:
            self.stop()
        self.session.close()
        self.session = requests.Session()
        self.start(timeout)
        return self

    # -- HTTP ----------------------------------------------------------------------------------------

    def auth(self, role: str | None) -> dict[str, str]:
        """The ``Authorization`` header of ``role`` (``"admin"``, ``"analyst"``, ``"issuer"`` or None)."""
        if role is None:
            return {}
        return {"Authorization": f"Bearer {self.token(role)}"}

    def request(self, method: str, path: str, *, role: str | None = None, **kwargs: Any) -> requests.Response:
        """Send a request to ``path`` as ``role``; extra headers and requests arguments pass through."""
        headers = {**self.auth(role), **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 60)
        return self.session.request(method, self.url + path, headers=headers, **kwargs)

    def get(self, path: str, *, role: str | None = None, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, role=role, **kwargs)

    def post(self, path: str, *, role: str | None = None, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, role=role, **kwargs)

    def create_campaign(self, **fields: Any) -> dict[str, Any]:
        """Create a campaign as admin; returns its public config (asserts 201)."""
        response = self.post("/api/v1/campaigns", role="admin", json=fields)
        assert response.status_code == 201, response.text
        config: dict[str, Any] = response.json()
        return config

    def estimate(self, campaign_id: str, **params: Any) -> dict[str, Any]:
        """The estimate as analyst (asserts 200)."""
        response = self.get(f"/api/v1/campaigns/{campaign_id}/estimate", role="analyst", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def start_server(
    data_dir: Path,
    *,
    workers: int = 1,
    threads: int = 4,
    port: int | None = None,
    admin_token: str | None = None,
    analyst_token: str | None = None,
    log_path: Path | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    database: str | None = None,
    kek: str | None = None,
    issuer_token: str | None = None,
) -> RunningServer:
    """Start ``deniable serve`` on ``data_dir`` and a free loopback port; wait until it is healthy.

    Tokens default to fresh random ones, passed through ``DENIABLE_ADMIN_TOKEN`` /
    ``DENIABLE_ANALYST_TOKEN``. The log goes to ``<data_dir>.log`` unless ``log_path`` is given.
    ``database`` (a PostgreSQL URL) and ``kek`` (its key-encryption key) make it an instance over that
    database; instances of one aggregator share both, and the tokens.
    """
    server = RunningServer(
        Path(data_dir),
        port=port or free_port(),
        admin_token=admin_token or "admin-" + secrets.token_urlsafe(24),
        analyst_token=analyst_token or "analyst-" + secrets.token_urlsafe(24),
        workers=workers,
        threads=threads,
        log_path=log_path,
        extra_env=extra_env,
        extra_args=extra_args,
        database=database,
        kek=kek,
        issuer_token=issuer_token,
    )
    server.start()
    return server
