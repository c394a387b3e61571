"""Fixtures shared by every test module.

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

Databases (``tests/support/postgres.py``): ``database_target`` is parametrized over both backends (a
SQLite path, or a PostgreSQL URL of a fresh schema); ``pg_url`` is the PostgreSQL one alone. Without a
PostgreSQL server or binaries they skip, and under ``CI=true`` fail.

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
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from support.postgres import TestDatabase, server_url
from support.server import RunningServer, start_server

#: The database backends the store suite and the reliability tests run against.
BACKENDS = ("sqlite", "postgresql")

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


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[TestDatabase]:
    """This run's own PostgreSQL database (dropped at the end); skips without a server (fails under CI)."""
    url, cluster, reason = server_url()
    if url is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required under CI=true and none is available: {reason}")
        pytest.skip(f"no PostgreSQL for the tests: {reason}")
    database = TestDatabase(url)
    try:
        yield database
    finally:
        database.drop()
        if cluster is not None:
            cluster.destroy()


@pytest.fixture
def pg_url(postgres_database: TestDatabase) -> Iterator[str]:
    """A URL of a fresh, empty schema of this run's PostgreSQL database (dropped after the test)."""
    url, schema = postgres_database.schema_url()
    try:
        yield url
    finally:
        postgres_database.drop_schema(schema)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgresql``: each test using it runs once per database backend."""
    return str(request.param)


@pytest.fixture
def database_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str | Path:
    """Where a test's store lives: a SQLite file, or a fresh PostgreSQL schema (one run per backend)."""
    if backend == "sqlite":
        return tmp_path / "db.sqlite3"
    return str(request.getfixturevalue("pg_url"))


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
