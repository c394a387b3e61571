"""The real shuffler (``deniable shuffle``) as a subprocess on a free loopback port, beside a real aggregator.

Usage::

    aggregator = start_server(tmp_path / "agg")
    shuffler = start_shuffler(tmp_path / "shuf", upstream=aggregator.url)
    config = create_shuffled_campaign(aggregator, shuffler, id="smoking", min_batch=20)
    shuffler.kill(); shuffler.restart()

It runs in its own process group (:meth:`RunningServer.kill` takes master, workers and forwarder threads
down at once, like a power cut).
"""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path
from typing import Any

from support.server import RunningServer, free_port

__all__ = ["RunningShuffler", "create_shuffled_campaign", "start_shuffler", "wait_for"]


class RunningShuffler(RunningServer):
    """A ``deniable shuffle`` subprocess (the HTTP helpers of :class:`RunningServer`, no tokens)."""

    def __init__(self, data_dir: Path, *, port: int, upstream: str, interval: float, log_path: Path,
                 workers: int = 1, extra_args: tuple[str, ...] = ()) -> None:  # fmt: skip
        super().__init__(
            data_dir, port=port, admin_token="-", analyst_token="-", workers=workers, threads=4,
            log_path=log_path, extra_args=extra_args,
        )  # fmt: skip
        self.upstream = upstream
        self.interval = interval

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "deniable.aggregator.cli", "shuffle",
            "--upstream", self.upstream,
            "--data-dir", str(self.data_dir),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--workers", str(self.workers),
            "--interval", str(self.interval),
            *self.extra_args,
        ]  # fmt: skip

    def info(self) -> dict[str, Any]:
        response = self.get("/api/v1/shuffler")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = self.get("/api/v1/status").json()["campaigns"]
        return body


def start_shuffler(
    data_dir: Path, *, upstream: str, interval: float = 0.2, workers: int = 1, port: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> RunningShuffler:  # fmt: skip
    """Start ``deniable shuffle`` forwarding to ``upstream``; wait until ``/healthz`` answers."""
    data_dir = Path(data_dir)
    shuffler = RunningShuffler(
        data_dir, port=port or free_port(), upstream=upstream, interval=interval, workers=workers,
        log_path=data_dir.with_name(data_dir.name + ".log"), extra_args=extra_args,
    )  # fmt: skip
    return shuffler.start()  # type: ignore[return-value]


def create_shuffled_campaign(aggregator: RunningServer, shuffler: RunningShuffler, *, min_batch: int,
                             **fields: Any) -> dict[str, Any]:  # fmt: skip
    """Create a shuffled campaign on ``aggregator`` naming ``shuffler`` (its keys and URL)."""
    info = shuffler.info()
    fields.setdefault("id", "shuffled-" + secrets.token_hex(4))
    fields.setdefault("question", "Did you smoke this year?")
    fields.setdefault("categories", ["no", "yes"])
    fields.setdefault("epsilon", 2.0)
    fields.setdefault("delta", 1e-6)
    return aggregator.create_campaign(
        trust_model="shuffled",
        shuffler={"url": shuffler.url, "public_key": info["public_key"], "verify_key": info["verify_key"],
                  "min_batch": min_batch},
        **fields,
    )  # fmt: skip


def wait_for(predicate: Any, *, timeout: float = 30.0, what: str = "the condition") -> Any:
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")
