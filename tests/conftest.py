"""Settings and fixtures shared by every test (tests/unit/ and tests/system/; the real servers' fixtures are in
tests/system/conftest.py, the helpers both folders use in tests/support/).

Databases (``tests/support/postgres.py``): ``database_target`` is parametrized over both backends (a
SQLite path, or a PostgreSQL URL of a fresh schema); ``pg_url`` is the PostgreSQL one alone. Without a
PostgreSQL server or binaries they skip, and under ``CI=true`` fail. The PostgreSQL runs are marked
``postgres``: ``make test`` runs them, ``make test-fast`` (no servers) does not.

Hypothesis runs under the ``deniable`` profile: derandomized (the same examples on every run, so CI is
reproducible), no deadline (a loaded 2-core runner must not turn a slow HPKE call into a failure), no
example database. ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples instead, to hunt for new ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from support.postgres import BACKENDS, TestDatabase, server_url

settings.register_profile("deniable", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deniable"))


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
