"""Fixtures of the system tests: real servers.

Aggregator servers (see ``tests/support/server.py``): each is the real ``deniable serve`` (gunicorn) as a
subprocess on a free 127.0.0.1 port, over its own temporary data dir, with random known tokens.

* ``aggregator``: one server (2 workers) shared by all tests of a module; use unique campaign ids.
* ``backend_aggregator``: like ``aggregator``, once per database backend (module scope).
* ``fresh_aggregator``: a server of its own for one test (1 worker).
* ``server_factory``: ``server_factory(workers=2, ...)`` starts as many as a test needs (same keyword
  arguments as :func:`support.server.start_server`, plus ``name`` for the data dir); all are stopped at
  teardown.
* ``backend_server_factory``: the same, run once per database backend (``backend`` is ``sqlite`` or
  ``postgresql``): on PostgreSQL every server it starts uses the test's own schema (``--database``) and one
  key-encryption key, so several servers are instances of one aggregator.

Each yields a :class:`support.server.RunningServer`: ``.url``, ``.admin_token``, ``.analyst_token``,
``.data_dir``, ``.log_path``, ``.get/.post(path, role=...)``, ``.create_campaign(...)``, ``.estimate(id)``,
``.stop()``, ``.kill()`` and ``.restart()``. Envelopes for it: :func:`support.reports.simulate_envelopes`
and :func:`support.reports.upload`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.postgres import BACKENDS, TestDatabase
from support.server import RunningServer, start_server


@pytest.fixture(scope="module")
def aggregator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real server for the whole test module."""
    server = start_server(tmp_path_factory.mktemp("aggregator") / "data", workers=2)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def backend_aggregator(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """One real server (2 workers) for the whole module, once per database backend (PostgreSQL: a schema of
    the module's own)."""
    database = schema = None
    if request.param == "postgresql":
        postgres: TestDatabase = request.getfixturevalue("postgres_database")
        database, schema = postgres.schema_url()
    server = start_server(tmp_path_factory.mktemp("aggregator") / "data", workers=2, database=database)
    try:
        yield server
    finally:
        server.stop()
        if schema is not None:
            postgres.drop_schema(schema)


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


@pytest.fixture
def backend_server_factory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., RunningServer]]:
    """:func:`server_factory` over the test's backend: on PostgreSQL every server started shares the test's
    schema and one key-encryption key (instances of one aggregator)."""
    database = None if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    shared = {
        "kek": secrets.token_urlsafe(32),
        "admin_token": "admin-" + secrets.token_urlsafe(24),
        "analyst_token": "analyst-" + secrets.token_urlsafe(24),
        "issuer_token": "issuer-" + secrets.token_urlsafe(24),
    }
    started: list[RunningServer] = []

    def start(name: str = "data", **kwargs: Any) -> RunningServer:
        server = start_server(tmp_path / f"{name}-{len(started)}", database=database, **{**shared, **kwargs})
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
