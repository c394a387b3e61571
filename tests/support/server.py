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

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from deniable.aggregator.ratelimit import SIMULATION_ENV

__all__ = ["RunningServer", "free_port", "start_server"]

STARTUP_TIMEOUT = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RunningServer:
    """A ``deniable serve`` subprocess and what a test needs to talk to it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int,
        admin_token: str,
        analyst_token: str,
        workers: int,
        issuer_token: str | None = None,
        threads: int,
        log_path: Path,
        extra_env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.admin_token = admin_token
        self.analyst_token = analyst_token
        self.issuer_token = issuer_token or "issuer-" + secrets.token_urlsafe(24)
        self.workers = workers
        self.threads = threads
        self.log_path = Path(log_path)
        self.extra_env = dict(extra_env or {})
        self.extra_args = tuple(extra_args)
        self.url = f"http://127.0.0.1:{port}"
        self.session = requests.Session()
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def command(self) -> list[str]:
        """The exact command line (the ``deniable`` CLI of this interpreter)."""
        return [
            sys.executable, "-m", "deniable.aggregator.cli", "serve",
            "--data-dir", str(self.data_dir),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--workers", str(self.workers),
            "--threads", str(self.threads),
            *self.extra_args,
        ]  # fmt: skip

    def start(self, timeout: float = STARTUP_TIMEOUT) -> RunningServer:
        """Start the process and wait until ``GET /healthz`` answers 200."""
        env = {
            **os.environ,
            "DENIABLE_ADMIN_TOKEN": self.admin_token,
            "DENIABLE_ANALYST_TOKEN": self.analyst_token,
            "DENIABLE_ISSUER_TOKEN": self.issuer_token,
            "PYTHONUNBUFFERED": "1",
            **SIMULATION_ENV,  # one address for the whole suite; the tests of the limits pass their own
            **self.extra_env,
        }
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"deniable serve exited with {self.process.returncode}:\n{self.logs()}")
            try:
                if requests.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"deniable serve did not become healthy in {timeout}s:\n{self.logs()}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM to gunicorn's master), SIGKILL if it hangs; returns the exit code."""
        process, self.process = self.process, None
        self.session.close()
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers at once), as a crash would."""
        process, self.process = self.process, None
        self.session.close()
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def restart(self, timeout: float = STARTUP_TIMEOUT) -> RunningServer:
        """Start again on the same data dir, port and tokens (after :meth:`stop` or :meth:`kill`)."""
        if self.process is not None:
            self.stop()
        self.session.close()
        self.session = requests.Session()
        return self.start(timeout)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def logs(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- HTTP ----------------------------------------------------------------------------------------

    def auth(self, role: str | None) -> dict[str, str]:
        """The ``Authorization`` header of ``role`` (``"admin"``, ``"analyst"``, ``"issuer"`` or None)."""
        if role is None:
            return {}
        token = {"admin": self.admin_token, "analyst": self.analyst_token, "issuer": self.issuer_token}[role]
        return {"Authorization": f"Bearer {token}"}

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
) -> RunningServer:
    """Start ``deniable serve`` on ``data_dir`` and a free loopback port; wait until it is healthy.

    Tokens default to fresh random ones, passed through ``DENIABLE_ADMIN_TOKEN`` /
    ``DENIABLE_ANALYST_TOKEN``. The log goes to ``<data_dir>.log`` unless ``log_path`` is given.
    """
    data_dir = Path(data_dir)
    server = RunningServer(
        data_dir,
        port=port or free_port(),
        admin_token=admin_token or "admin-" + secrets.token_urlsafe(24),
        analyst_token=analyst_token or "analyst-" + secrets.token_urlsafe(24),
        workers=workers,
        threads=threads,
        log_path=log_path or data_dir.with_name(data_dir.name + ".log"),
        extra_env=extra_env,
        extra_args=extra_args,
    )
    return server.start()
