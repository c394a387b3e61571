"""PostgreSQL for the tests: a database of this run's own on a real server, and throwaway clusters.

Where the server comes from, in order:

1. ``DENIABLE_TEST_POSTGRES`` (a libpq URL of a superuser on a maintenance database), else the server this
   project's machines run on ``127.0.0.1:5432`` with trust authentication (user ``postgres``);
2. if none answers, a throwaway cluster started from the PostgreSQL binaries when they are installed
   (``initdb``/``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` or ``PATH``, in a temporary directory, on a
   free port, as a non-root user: ``nobody`` when the tests run as root), stopped and deleted at the end;
3. otherwise the PostgreSQL tests skip with the reason, except under ``CI=true``, where they fail.

Each run creates one database (``deniable_test_<pid>_<random>``) and drops it at the end; each test gets a
schema of its own in it (:meth:`TestDatabase.schema_url`: the URL sets ``search_path``), dropped after it.

:class:`Cluster` is also what the fault tests stop and restart under load: the machine's shared server must
never be restarted by a test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest

from deniable.aggregator.harness import ThrowawayDatabase
from support.server import free_port

#: The database backends the store suite and the reliability tests run against; PostgreSQL's runs are
#: marked ``postgres`` (they need the server: ``make test`` runs them, ``make test-fast`` does not).
BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))

__all__ = ["Cluster", "TestDatabase", "find_binaries", "server_url"]

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _answers(url: str) -> str | None:
    """None if a superuser connection to ``url`` works, else why not."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def find_binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl`` (the newest installed version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


class Cluster:
    """A throwaway PostgreSQL cluster: ``initdb`` in a temporary directory, ``pg_ctl`` on a free loopback port,
    trust authentication for ``postgres``, run as a non-root user. ``stop()`` / ``start()`` restart it on the
    same port and data; ``destroy()`` stops it and deletes everything."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="deniable-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._user: str | None = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self._user = "nobody"
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._ids = (entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8",
            "--locale=C",
        )  # fmt: skip
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self._user is not None:
            kwargs = {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        return subprocess.run(
            [str(self.bindir / tool), *args], capture_output=True, text=True, timeout=120, check=check,
            cwd=self.root, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip

    def start(self) -> Cluster:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=on -c max_connections=200"
        result = self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start", check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {result.stdout}{result.stderr}\n{self.logs()}")
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions and close connections; ``immediate``: like
        a crash, recovery at the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def server_url() -> tuple[str | None, Cluster | None, str]:
    """``(admin URL, cluster or None, reason)``: a server to create test databases on, or the reason there
    is none (then the URL is None)."""
    url = os.environ.get("DENIABLE_TEST_POSTGRES") or DEFAULT_URL
    try:
        import psycopg  # noqa: F401
    except ModuleNotFoundError:
        return None, None, "psycopg is not installed (pip install 'deniable[postgres]')"
    problem = _answers(url)
    if problem is None:
        return url, None, ""
    bindir = find_binaries()
    if bindir is None:
        return None, None, f"no PostgreSQL server at {url} ({problem}) and no initdb/pg_ctl installed to start one"
    try:
        cluster = Cluster(bindir).start()
    except (OSError, RuntimeError, subprocess.SubprocessError, KeyError) as exc:
        return None, None, f"no PostgreSQL server at {url} ({problem}), and a throwaway cluster did not start: {exc}"
    return cluster.url, cluster, ""


class TestDatabase(ThrowawayDatabase):
    """This run's own database on the server at ``admin_url`` (the product's
    :class:`~deniable.aggregator.harness.ThrowawayDatabase`: created now, dropped by :meth:`drop`), and a
    schema per test in it."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, admin_url: str) -> None:
        super().__init__(admin_url, prefix="deniable_test")

    def schema_url(self) -> tuple[str, str]:
        """``(url, schema)``: a new empty schema, and a URL whose connections use it (``search_path``)."""
        import psycopg

        schema = f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}?options={quote(f'-csearch_path={schema}')}", schema

    def drop_schema(self, schema: str) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error), psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '20s'")  # a session left behind must not hang the run: the
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # database is dropped WITH (FORCE) at the end
