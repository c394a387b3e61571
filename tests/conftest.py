"""Fixtures shared by every test module.

Aggregator servers (see ``tests/support/server.py``): each is the real ``deniable serve`` (gunicorn) as a
subprocess on a free 127.0.0.1 port, over its own temporary data dir, with random known tokens.

* ``aggregator``: one server (2 workers) shared by all tests of a module; use unique campaign ids.
* ``fresh_aggregator``: a server of its own for one test (1 worker).
* ``server_factory``: ``server_factory(workers=2, ...)`` starts as many as a test needs (same keyword
  arguments as :func:`support.server.start_server`, plus ``name`` for the data dir); all are stopped at
  teardown.

Each yields a :class:`support.server.RunningServer`: ``.url``, ``.admin_token``, ``.analyst_token``,
``.data_dir``, ``.log_path``, ``.get/.post(path, role=...)``, ``.create_campaign(...)``, ``.estimate(id)``,
``.stop()``, ``.kill()`` and ``.restart()``. Envelopes for it: :func:`support.reports.simulate_envelopes`
and :func:`support.reports.upload`.

Hypothesis runs under the ``deniable`` profile: derandomized (the same examples on every run, so CI is
reproducible), no deadline (a loaded 2-core runner must not turn a slow HPKE call into a failure), no
example database. ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples instead, to hunt for new ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from support.server import RunningServer, start_server

settings.register_profile("deniable", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deniable"))


@pytest.fixture(scope="module")
def aggregator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real server for the whole test module."""
    server = start_server(tmp_path_factory.mktemp("aggregator") / "data", workers=2)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_aggregator(tmp_path: Path) -> Iterator[RunningServer]:
    """A real server of this test's own, on an empty data dir."""
    server = start_server(tmp_path / "data", workers=1)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """Start servers on demand: ``server_factory(name="a", workers=2, ...)``; all stop at teardown."""
    started: list[RunningServer] = []

    def start(name: str = "data", **kwargs: Any) -> RunningServer:
        server = start_server(tmp_path / f"{name}-{len(started)}", **kwargs)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
