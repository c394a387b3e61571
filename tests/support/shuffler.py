"""The real shuffler (``deniable shuffle``) as a subprocess on a free loopback port, beside a real aggregator.

Usage::

    aggregator = start_server(tmp_path / "agg")
    shuffler = start_shuffler(tmp_path / "shuf", upstream=aggregator.url)
    config = create_shuffled_campaign(aggregator, shuffler, id="smoking", min_batch=20)
    shuffler.kill(); shuffler.restart()

The product's harness (:class:`deniable.aggregator.harness.ShufflerProcess`) with the ``requests`` helpers
of :class:`support.server.RunningServer`; its own process group, so :meth:`kill` is a power cut.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deniable.aggregator.harness import ShufflerProcess
from support.server import RunningServer

__all__ = ["RunningShuffler", "create_shuffled_campaign", "start_shuffler", "wait_for"]


class RunningShuffler(ShufflerProcess, RunningServer):
    """A ``deniable shuffle`` subprocess with ``get``/``post`` (no tokens), ``info`` and ``status``."""


def start_shuffler(data_dir: Path, *, upstream: str, interval: float = 0.2, **options: Any) -> RunningShuffler:
    """Start ``deniable shuffle`` forwarding to ``upstream``; wait until ``/healthz`` answers."""
    shuffler = RunningShuffler(Path(data_dir), upstream=upstream, interval=interval, **options)
    shuffler.start()
    return shuffler


def create_shuffled_campaign(aggregator: RunningServer, shuffler: ShufflerProcess, *, min_batch: int,
                             **fields: Any) -> dict[str, Any]:  # fmt: skip
    """Create a shuffled campaign on ``aggregator`` naming ``shuffler`` (its keys and URL)."""
    fields.setdefault("id", "shuffled-" + secrets.token_hex(4))
    fields.setdefault("question", "Did you smoke this year?")
    fields.setdefault("categories", ["no", "yes"])
    fields.setdefault("epsilon", 2.0)
    fields.setdefault("delta", 1e-6)
    return aggregator.create_campaign(trust_model="shuffled", shuffler=shuffler.shuffler_object(min_batch), **fields)


def wait_for(predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "the condition") -> Any:
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")
