"""The one harness that runs a real ``deniable serve`` on a free loopback port, for the demo, the examples,
the tests and the benchmarks.

``ServerProcess`` starts ``python -m deniable.aggregator.cli serve`` (gunicorn's master and its uvicorn
workers) as a subprocess in its own process group, on ``127.0.0.1`` and a port that was free a moment
before, over a data dir of the caller's, with random tokens passed by environment
(``DENIABLE_ADMIN_TOKEN``, ``DENIABLE_ANALYST_TOKEN``, ``DENIABLE_ISSUER_TOKEN``). :meth:`start` returns once
``GET /healthz`` answers 200 (or raises ``RuntimeError`` with the end of the server's log if the process
exits or is not healthy within the timeout). :meth:`stop` sends SIGTERM to gunicorn's master (a graceful
shutdown: in-flight requests finish) and SIGKILLs the whole group if it hangs; :meth:`kill` SIGKILLs the
group at once, like a power cut; :meth:`restart` starts again on the same data dir, port and tokens.

``database`` (a ``postgresql://`` URL) makes the server an instance over that database, with ``kek`` its
key-encryption key (random unless given): instances of one aggregator share the URL, the key and the tokens.

:class:`ThrowawayDatabase` creates a PostgreSQL database of its own on a server (the tests' run database,
the PostgreSQL benchmark's) and drops it again: the URL the instances of one aggregator share.

``simulation=True`` (the default) lifts the per-address rate limits (:data:`SIMULATION_ENV`): every
simulated device shares the loopback address. A benchmark or test of the limits themselves passes
``simulation=False`` or its own values in ``extra_env`` (which wins over everything else).

Only the standard library is used (``urllib`` with no proxy for the health probe and :meth:`call`), so the
demo and the examples need nothing beyond the aggregator's install; :class:`ThrowawayDatabase` alone imports
``psycopg`` (the ``postgres`` extra), when it is used. Never pointed at anything but this
machine's loopback address.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from .ratelimit import SIMULATION_ENV

__all__ = [
    "STARTUP_TIMEOUT",
    "ServerProcess",
    "ShufflerProcess",
    "ThrowawayDatabase",
    "free_port",
    "running_server",
    "running_shuffler",
]

#: Seconds :meth:`ServerProcess.start` waits for ``/healthz`` (a loaded 2-core machine needs several).
STARTUP_TIMEOUT = 30.0
HOST = "127.0.0.1"

#: Loopback only: no ``http_proxy`` from the environment may reroute the harness's own requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it; another process may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A ``deniable serve`` subprocess on the loopback address, and the tokens to talk to it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        workers: int = 1,
        threads: int | None = None,
        admin_token: str | None = None,
        analyst_token: str | None = None,
        issuer_token: str | None = None,
        log_path: Path | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        simulation: bool = True,
        database: str | None = None,
        kek: str | None = None,
    ) -> None:
        self.database = database
        self.kek = kek or secrets.token_urlsafe(32)
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.workers = workers
        self.threads = threads
        self.admin_token = admin_token or "admin-" + secrets.token_urlsafe(24)
        self.analyst_token = analyst_token or "analyst-" + secrets.token_urlsafe(24)
        self.issuer_token = issuer_token or "issuer-" + secrets.token_urlsafe(24)
        self.log_path = Path(log_path) if log_path else self.data_dir.with_name(self.data_dir.name + ".log")
        self.extra_env = dict(extra_env or {})
        self.extra_args = tuple(extra_args)
        self.simulation = simulation
        self.url = f"http://{HOST}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def command(self) -> list[str]:
        """The exact command line (the ``deniable`` CLI of this interpreter; ``threads=None``: serve's default)."""
        return [
            sys.executable, "-m", "deniable.aggregator.cli", "serve",
            "--data-dir", str(self.data_dir),
            "--host", HOST,
            "--port", str(self.port),
            "--workers", str(self.workers),
            *(() if self.threads is None else ("--threads", str(self.threads))),
            *(("--database", self.database) if self.database else ()),
            *self.extra_args,
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The server's environment: this process's, the simulation limits, the tokens, then ``extra_env``."""
        return {
            **os.environ,
            **(SIMULATION_ENV if self.simulation else {}),
            "DENIABLE_ADMIN_TOKEN": self.admin_token,
            "DENIABLE_ANALYST_TOKEN": self.analyst_token,
            "DENIABLE_ISSUER_TOKEN": self.issuer_token,
            "DENIABLE_KEY_ENCRYPTION_KEY": self.kek,
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }

    def start(self, timeout: float = STARTUP_TIMEOUT) -> ServerProcess:
        """Start the process and wait until ``GET /healthz`` answers 200; returns ``self``."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(), start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"deniable serve exited with {code}:\n{self.logs()[-4000:]}")
            if self.healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"deniable serve did not become healthy in {timeout}s:\n{self.logs()[-4000:]}")

    def healthy(self) -> bool:
        """Whether ``GET /healthz`` answers 200 right now."""
        try:
            with _OPENER.open(self.url + "/healthz", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM to gunicorn's master), SIGKILL of the group if it hangs; the exit code."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers at once), as a crash would."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def restart(self, timeout: float = STARTUP_TIMEOUT) -> ServerProcess:
        """Start again on the same data dir, port and tokens (after :meth:`stop` or :meth:`kill`)."""
        if self.process is not None:
            self.stop()
        return self.start(timeout)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def logs(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ServerProcess:
        return self if self.is_alive() else self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- HTTP ----------------------------------------------------------------------------------------

    def token(self, role: str) -> str:
        """The bearer token of ``role`` (``"admin"``, ``"analyst"`` or ``"issuer"``)."""
        return {"admin": self.admin_token, "analyst": self.analyst_token, "issuer": self.issuer_token}[role]

    def call(self, method: str, path: str, *, role: str, body: Any = None, timeout: float = 60.0) -> Any:
        """One JSON request as ``role``; its decoded answer, or ``RuntimeError`` with the server's message."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the URL is our own loopback server
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token(role)}", "Content-Type": "application/json"},
        )
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise RuntimeError(f"{method} {path} answered {exc.code}: {detail}") from None


class ShufflerProcess(ServerProcess):
    """A ``deniable shuffle`` subprocess forwarding to ``upstream`` every ``interval`` seconds (same lifecycle).

    It takes no tokens; :meth:`info` is its ``GET /api/v1/shuffler`` (the keys a shuffled campaign registers),
    :meth:`status` its counts per campaign, :meth:`shuffler_object` the campaign's ``shuffler`` object.
    """

    def __init__(self, data_dir: Path, *, upstream: str, interval: float = 1.0, **options: Any) -> None:
        super().__init__(data_dir, **options)
        self.upstream = upstream
        self.interval = interval

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "deniable.aggregator.cli", "shuffle",
            "--upstream", self.upstream,
            "--data-dir", str(self.data_dir),
            "--host", HOST,
            "--port", str(self.port),
            "--workers", str(self.workers),
            "--interval", str(self.interval),
            *(() if self.threads is None else ("--threads", str(self.threads))),
            *self.extra_args,
        ]  # fmt: skip

    def _get(self, path: str) -> Any:
        with _OPENER.open(self.url + path, timeout=30) as response:
            return json.loads(response.read())

    def info(self) -> dict[str, Any]:
        body: dict[str, Any] = self._get("/api/v1/shuffler")
        return body

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = self._get("/api/v1/status")["campaigns"]
        return body

    def shuffler_object(self, min_batch: int) -> dict[str, Any]:
        """The ``shuffler`` object of a campaign that sends its reports through this shuffler."""
        info = self.info()
        return {"url": self.url, "public_key": info["public_key"], "verify_key": info["verify_key"],
                "min_batch": min_batch}  # fmt: skip


@contextlib.contextmanager
def running_shuffler(data_dir: Path, *, upstream: str, **options: Any) -> Iterator[ShufflerProcess]:
    """``deniable shuffle`` on ``data_dir`` forwarding to ``upstream``, stopped on exit whatever happens."""
    shuffler = ShufflerProcess(data_dir, upstream=upstream, **options)
    shuffler.start()
    try:
        yield shuffler
    finally:
        shuffler.stop()


@contextlib.contextmanager
def running_server(data_dir: Path, **options: Any) -> Iterator[ServerProcess]:
    """``deniable serve`` on ``data_dir`` and a free loopback port (``options``: those of
    :class:`ServerProcess`), stopped on exit whatever happens."""
    server = ServerProcess(data_dir, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class ThrowawayDatabase:
    """A PostgreSQL database of its own (``<prefix>_<pid>_<random>``) on the server at ``admin_url`` (a
    superuser's libpq URL of a maintenance database): created now, its URL in :attr:`url`, dropped with
    every connection to it by :meth:`drop`."""

    def __init__(self, admin_url: str, *, prefix: str = "deniable") -> None:
        import psycopg

        self.admin_url = admin_url
        self.name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        base, _, _ = admin_url.rpartition("/")
        self.url = f"{base}/{self.name}"

    def drop(self) -> None:
        """Drop the database (``WITH (FORCE)``: sessions left behind are ended); tried three times, a second
        apart. When every try fails, a warning names the database and the command that drops it (a benchmark's
        may hold 10⁷ reports: it must not be left behind unsaid)."""
        import psycopg

        error: psycopg.Error | None = None
        for _ in range(3):
            try:
                with psycopg.connect(self.admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
                return
            except psycopg.Error as exc:
                error = exc
                time.sleep(1)
        warnings.warn(
            f"could not drop the throwaway PostgreSQL database {self.name!r} ({error}); drop it by hand: "
            f'DROP DATABASE "{self.name}" WITH (FORCE)',
            RuntimeWarning,
            stacklevel=2,
        )
