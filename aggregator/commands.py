"""Operator commands of the ``deniable`` CLI, on the server's own disk: ``serve`` and ``admin verify|tokens|
campaigns`` (``verify`` and ``tokens`` also at the top level, their first names).

These read and write a data dir directly, so they run where the aggregator runs. An analyst elsewhere uses
the HTTP commands of :mod:`deniable.analyst.cli` (``deniable campaigns list``, ``deniable estimate``).

Every flag has a ``DENIABLE_*`` environment variable; flags win. Tokens are better passed by environment
(``DENIABLE_ADMIN_TOKEN``, ``DENIABLE_ANALYST_TOKEN``, ``DENIABLE_ISSUER_TOKEN``) than by flag, since flags
show in ``ps``. When
neither is set, ``serve`` generates tokens into the data dir (mode 0600) and prints where, never the
tokens themselves.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from pathlib import Path
from typing import Any

from deniable.aggregator.cli import env_int, needs
from deniable.shared.fields import plural
from deniable.shared.limits import MAX_BODY_BYTES_DEFAULT, MIN_FREE_DISK_BYTES_DEFAULT

__all__ = ["register"]

DEFAULT_DATA_DIR = "deniable-data"
_PATH_WIDTH = 40


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"DENIABLE_{name}", default)


#: The integer options of ``serve``: flag, environment name, default and help. Their environment variables
#: are read when ``serve`` runs (:func:`_resolve_ints`), so a bad one never breaks another command.
_SERVE_INTS: tuple[tuple[str, str, int, str], ...] = (
    ("--port", "PORT", 8000, "TCP port to listen on"),
    ("--workers", "WORKERS", 2, "worker processes"),
    ("--threads", "THREADS", 2, "threads per worker"),
    ("--max-body-bytes", "MAX_BODY_BYTES", MAX_BODY_BYTES_DEFAULT, "largest request body; larger ones get 413"),
    ("--min-free-disk", "MIN_FREE_DISK_BYTES", MIN_FREE_DISK_BYTES_DEFAULT,
     "free bytes on the data dir's file system below which GET /readyz answers 503"),
)


#: The options of the serving front and the rate limits: flag, environment name, type, default and help
#: (bounds and the reason for each default in ``shared/limits.py``). Read when ``serve`` runs, like the
#: integers above.
def _front_options() -> tuple[tuple[str, str, type, float, str], ...]:
    from deniable.shared import limits

    return (
        ("--header-timeout", "HEADER_TIMEOUT", float, limits.HEADER_TIMEOUT_DEFAULT,
         "seconds a client has to send its request line and headers; slower ones get 408 and are closed"),
        ("--body-timeout", "BODY_TIMEOUT", float, limits.BODY_TIMEOUT_DEFAULT,
         "seconds a client has, after its headers, to send the whole body; slower ones get 408"),
        ("--max-connections", "MAX_CONNECTIONS", int, limits.MAX_CONNECTIONS_DEFAULT,
         "open connections per worker process; one more is answered 503 with Retry-After and closed"),
        ("--ingest-rate", "INGEST_RATE", float, limits.INGEST_RATE_DEFAULT,
         "reports per second one client address may submit, sustained (429 with Retry-After beyond)"),
        ("--ingest-burst", "INGEST_BURST", int, limits.INGEST_BURST_DEFAULT,
         "reports one client address may submit at once"),
        ("--auth-failure-rate", "AUTH_FAILURE_RATE", float, limits.AUTH_FAILURE_RATE_DEFAULT,
         "failed authentications per second one client address may make, sustained"),
        ("--auth-failure-burst", "AUTH_FAILURE_BURST", int, limits.AUTH_FAILURE_BURST_DEFAULT,
         "failed authentications one client address may make at once"),
        ("--max-group-values", "MAX_GROUP_VALUES", int, limits.MAX_GROUP_VALUES_DEFAULT,
         "distinct values an undeclared group field of a campaign may take; a report with a new value past "
         "it is rejected"),
    )  # fmt: skip


def _env_float(name: str, default: float) -> float:
    """``DENIABLE_<name>`` as a number, or ``default`` when unset (read when the command runs)."""
    raw = os.environ.get(f"DENIABLE_{name}")
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SystemExit(f"DENIABLE_{name} must be a number, got {raw!r}; fix or unset it") from None


def _data_dir_arg(parser: argparse.ArgumentParser, *, database: bool = True) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(_env("DATA_DIR", DEFAULT_DATA_DIR) or DEFAULT_DATA_DIR),
        help="directory of the database, campaign keys and tokens (env DENIABLE_DATA_DIR; "
        f"default: ./{DEFAULT_DATA_DIR})",
    )
    if database:
        parser.add_argument(
            "--database",
            default=None,
            metavar="URL",
            help="a postgresql://user@host/db URL: the database several instances share, with the campaign keys "
            "sealed in it under DENIABLE_KEY_ENCRYPTION_KEY (env DENIABLE_DATABASE_URL; default: the SQLite "
            "file in the data dir)",
        )
        parser.add_argument(
            "--key-encryption-key-file",
            type=Path,
            default=None,
            metavar="FILE",
            help="file holding the key-encryption key of --database (base64url or hex; env "
            "DENIABLE_KEY_ENCRYPTION_KEY holds the key itself, DENIABLE_KEY_ENCRYPTION_KEY_FILE the file)",
        )


def _database(args: argparse.Namespace) -> str | None:
    """The PostgreSQL URL of the command (flag, else ``DENIABLE_DATABASE_URL``), or None for SQLite; a URL
    that is not PostgreSQL's stops the command with one line."""
    from deniable.aggregator.database import is_postgres_url

    url = getattr(args, "database", None) or _env("DATABASE_URL") or None
    if url is not None and not is_postgres_url(url):
        raise SystemExit(
            f"--database must be a postgresql:// URL (without it the SQLite file in the data dir is used), got "
            f"{url[:40]!r}"
        )
    return url


def _kek(args: argparse.Namespace, database: str | None) -> bytes | None:
    """The key-encryption key for ``database`` (None for SQLite): from ``DENIABLE_KEY_ENCRYPTION_KEY``, else
    the file of ``--key-encryption-key-file`` / ``DENIABLE_KEY_ENCRYPTION_KEY_FILE``; stops the command
    with what to do when it is missing or malformed."""
    from deniable.aggregator.sealed_keys import KEK_HINT, parse_kek

    if database is None:
        return None
    text, source = _env("KEY_ENCRYPTION_KEY"), "DENIABLE_KEY_ENCRYPTION_KEY"
    path = getattr(args, "key_encryption_key_file", None) or _env("KEY_ENCRYPTION_KEY_FILE")
    if not text and path:
        source = f"the key-encryption key file {path}"
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SystemExit(f"cannot read {source}: {exc.strerror or exc}") from None
    if not text:
        raise SystemExit(
            "--database postgresql://... keeps the campaign keys sealed in the database: give every instance the "
            "same key-encryption key in DENIABLE_KEY_ENCRYPTION_KEY (or a file: --key-encryption-key-file); "
            + KEK_HINT
        )
    try:
        return parse_kek(text, source=source)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def _resolve_ints(args: argparse.Namespace) -> None:
    """Fill each integer option not given on the command line from its ``DENIABLE_*`` variable or default."""
    for flag, env, default, _ in _SERVE_INTS:
        dest = flag.lstrip("-").replace("-", "_")
        if getattr(args, dest) is None:
            setattr(args, dest, env_int(env, default))
    for flag, env, kind, number, _ in _front_options():
        dest = flag.lstrip("-").replace("-", "_")
        if getattr(args, dest) is None:
            setattr(args, dest, env_int(env, int(number)) if kind is int else _env_float(env, float(number)))


def register(subparsers: Any) -> None:
    """Add the operator subcommands to the ``deniable`` parser."""
    serve = subparsers.add_parser(
        "serve",
        help=needs("aggregator") + "run the aggregator service (HTTP API over the data dir)",
        description="Run the aggregator: prepare the data dir (tokens, database schema), bind the port, "
        "and serve the HTTP API until stopped (Ctrl-C or SIGTERM). Every option has a DENIABLE_* "
        "environment variable; flags win.",
    )
    _data_dir_arg(serve)
    serve.add_argument(
        "--host", default=_env("HOST", "127.0.0.1"), help="address to bind (env DENIABLE_HOST)"
    )
    for flag, env, default, text in _SERVE_INTS:
        serve.add_argument(
            flag, type=int, default=None, metavar="N", help=f"{text} (env DENIABLE_{env}; default: {default})"
        )
    for role in ("admin", "analyst", "issuer"):
        serve.add_argument(
            f"--{role}-token",
            default=_env(f"{role.upper()}_TOKEN"),
            help=f"the {role} bearer token (prefer env DENIABLE_{role.upper()}_TOKEN; default: read or "
            "generated in the data dir)",
        )
    for flag, env, kind, number, text in _front_options():
        serve.add_argument(
            flag, type=kind, default=None, metavar="N" if kind is int else "X",
            help=f"{text} (env DENIABLE_{env}; default: {number:g})",
        )  # fmt: skip
    serve.add_argument(
        "--trusted-proxies",
        default=_env("TRUSTED_PROXIES", ""),
        help="comma-separated addresses of reverse proxies whose X-Forwarded-For names the client (for the "
        "rate limits), e.g. 127.0.0.1 behind a local nginx (env DENIABLE_TRUSTED_PROXIES; default: none)",
    )
    serve.set_defaults(func=serve_command, extra="aggregator")

    admin = subparsers.add_parser(
        "admin",
        help=needs("aggregator") + "commands that read a data dir on the server's disk (verify, tokens, campaigns)",
        description="Commands that read the aggregator's data dir directly, on the machine that serves it. "
        "To ask a running aggregator over HTTP, use `deniable campaigns` and `deniable estimate`.",
    )
    admin.set_defaults(func=lambda args: _usage(admin), extra="aggregator")
    local = admin.add_subparsers(dest="admin_command", metavar="COMMAND")
    for where in (local, subparsers):  # verify and tokens keep their top-level names
        verify = where.add_parser(
            "verify",
            help=needs("aggregator") + "recount every tally from the stored reports and check every campaign "
            "key; exit 1 on a problem",
            description="Recount every campaign's tallies from its stored reports and compare them with the "
            "stored tallies, and check every campaign's key file against the campaign's public key. Exit "
            "status 0 if all agree and every key is usable, 1 otherwise, 2 if there is no database.",
        )
        _data_dir_arg(verify)
        verify.set_defaults(func=verify_command, extra="aggregator")

        tokens = where.add_parser(
            "tokens",
            help="show where the admin, analyst and issuer token files are (never the tokens)",
            description="Print the paths of the admin, analyst and issuer token files of a data dir and their "
            "mode, never the tokens themselves.",
        )
        _data_dir_arg(tokens, database=False)
        tokens.set_defaults(func=tokens_command)

    campaigns = local.add_parser(
        "campaigns",
        help=needs("aggregator") + "list the campaigns stored in a data dir",
        description="List id, trust model, status and report count of every campaign stored in a data dir "
        "(read from the database directly; the server may be running). `deniable campaigns list` asks a "
        "running aggregator over HTTP instead.",
    )
    _data_dir_arg(campaigns)
    campaigns.set_defaults(func=campaigns_command, extra="aggregator")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _check_serve_args(args: argparse.Namespace) -> None:
    from deniable.shared.limits import PORT_RANGE, WORKERS_RANGE

    if not PORT_RANGE[0] <= args.port <= PORT_RANGE[1]:
        raise SystemExit(f"--port must be in {PORT_RANGE[0]}..{PORT_RANGE[1]}, got {args.port}")
    low, high = WORKERS_RANGE
    if not low <= args.workers <= high or not low <= args.threads <= high:
        raise SystemExit(f"--workers and --threads must be in {low}..{high}, got {args.workers} and {args.threads}")
    if args.max_body_bytes < 1024:
        raise SystemExit(f"--max-body-bytes must be at least 1024, got {args.max_body_bytes}")
    if args.min_free_disk < 0:
        raise SystemExit(f"--min-free-disk must be at least 0 bytes, got {args.min_free_disk}")
    _check_front_args(args)


def _check_range(flag: str, value: float, bounds: tuple[float, float]) -> None:
    low, high = bounds
    if not low <= value <= high:
        raise SystemExit(f"--{flag} must be in {low:g}..{high:g}, got {value:g}")


def _check_front_args(args: argparse.Namespace) -> None:
    from deniable.shared import limits

    for flag in ("header-timeout", "body-timeout"):
        _check_range(flag, getattr(args, flag.replace("-", "_")), limits.TIMEOUT_RANGE)
    _check_range("max-connections", args.max_connections, limits.MAX_CONNECTIONS_RANGE)
    for flag in ("ingest-rate", "auth-failure-rate"):
        _check_range(flag, getattr(args, flag.replace("-", "_")), limits.RATE_RANGE)
    for flag in ("ingest-burst", "auth-failure-burst"):
        _check_range(flag, getattr(args, flag.replace("-", "_")), limits.BURST_RANGE)
    _check_range("max-group-values", args.max_group_values, limits.MAX_GROUP_VALUES_RANGE)


def _front_settings(args: argparse.Namespace) -> Any:
    from deniable.aggregator.front import FrontSettings

    return FrontSettings(
        max_body=args.max_body_bytes,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
        ingest_rate=args.ingest_rate,
        ingest_burst=args.ingest_burst,
        auth_failure_rate=args.auth_failure_rate,
        auth_failure_burst=args.auth_failure_burst,
    )


def _refuse_weak_tokens(args: argparse.Namespace, tokens: Any, paths: dict[str, Path]) -> None:
    """Exit with one line naming the variable (or file) of a token under 128 bits, and how to make one."""
    from deniable.aggregator.secret_files import GENERATE_HINT, weak_token_reason

    for role in ("admin", "analyst", "issuer"):
        reason = weak_token_reason(getattr(tokens, role))
        if reason is None:
            continue
        source = (
            f"DENIABLE_{role.upper()}_TOKEN (or --{role}-token)"
            if getattr(args, f"{role}_token")
            else f"the {role} token in {paths[role]}"
        )
        raise SystemExit(f"deniable serve: {source} {reason}; {GENERATE_HINT}")


def _check_port(host: str, port: int) -> None:
    """Stop with one line if ``host:port`` cannot be bound (in use, not permitted, unknown address), before
    anything is prepared: the server would otherwise retry the bind and log an error five times."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SystemExit(f"cannot listen on {host}:{port}: unknown address ({exc.strerror}); check --host") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SystemExit(f"port {port} is in use; choose another with --port") from None
            if exc.errno == errno.EACCES:
                raise SystemExit(
                    f"not permitted to listen on port {port}; choose a port above 1023 with --port"
                ) from None
            raise SystemExit(f"cannot listen on {host}:{port}: {exc.strerror}; check --host and --port") from None


def _announce(url: str, data_dir: Path) -> Any:
    """The server's ``when_ready`` hook: say where it listens once the socket is bound, not before."""

    def ready(_server: Any) -> None:
        print(f"deniable aggregator on {url} (data dir {data_dir})", flush=True)

    return ready


def serve_command(args: argparse.Namespace) -> int:
    """Prepare the data dir (tokens, schema), then serve (gunicorn's master over uvicorn workers, see
    :mod:`deniable.aggregator.server`) until it is stopped (SIGTERM/SIGINT)."""
    from deniable.aggregator.api.app import DATABASE_NAME
    from deniable.aggregator.secret_files import ensure_tokens, token_paths
    from deniable.aggregator.server import AggregatorServer, gunicorn_options
    from deniable.aggregator.store import Store
    from deniable.shared.errors import StoreUnavailable

    _resolve_ints(args)
    _check_serve_args(args)
    database = _database(args)
    kek = _kek(args, database)
    if database is not None:
        missing = [role for role in ("admin", "analyst", "issuer") if not getattr(args, f"{role}_token")]
        if missing:
            names = ", ".join(f"DENIABLE_{role.upper()}_TOKEN" for role in missing)
            raise SystemExit(
                f"deniable serve --database: every instance of one aggregator must know the same tokens; set {names} "
                "(tokens generated into each instance's own data dir would differ)"
            )
    _check_port(args.host, args.port)
    os.umask(0o077)  # the database, its WAL and every key or token file: owner only
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        tokens = ensure_tokens(data_dir, admin=args.admin_token, analyst=args.analyst_token, issuer=args.issuer_token)
    except ValueError as exc:  # equal tokens
        raise SystemExit(f"deniable serve: {exc}") from None
    _refuse_weak_tokens(args, tokens, token_paths(data_dir))
    for role, path in token_paths(data_dir).items():
        if getattr(args, f"{role}_token"):
            print(f"{role} token: from DENIABLE_{role.upper()}_TOKEN / --{role}-token", flush=True)
        else:
            state = "generated" if path in tokens.generated else "stored"
            print(f"{role} token: {state} in {path} (mode 0600)", flush=True)
    try:
        store = Store(database or data_dir / DATABASE_NAME)  # migrate once, before workers fork
    except StoreUnavailable as exc:
        raise SystemExit(f"deniable serve: {exc}") from None
    print(f"database: {store.db.describe()}" + (" (campaign keys sealed in it)" if store.postgres else ""), flush=True)
    store.close()
    config = {
        "DATA_DIR": str(data_dir),
        "ADMIN_TOKEN": tokens.admin,
        "ANALYST_TOKEN": tokens.analyst,
        "ISSUER_TOKEN": tokens.issuer,
        "MAX_CONTENT_LENGTH": args.max_body_bytes,
        "MIN_FREE_DISK_BYTES": args.min_free_disk,
        "MAX_GROUP_VALUES": args.max_group_values,
        "DATABASE": database,
        "KEY_ENCRYPTION_KEY": kek,
    }
    settings = _front_settings(args)
    options = gunicorn_options(
        host=args.host, port=args.port, workers=args.workers, threads=args.threads, settings=settings,
        trusted_proxies=args.trusted_proxies,
    )  # fmt: skip
    host = f"[{args.host}]" if ":" in args.host else args.host
    options["when_ready"] = _announce(f"http://{host}:{args.port}", data_dir)
    AggregatorServer(config, options, settings).run()
    return 0


def _open_store(data_dir: Path, database: str | None = None) -> Any:
    """The store of ``database`` (a PostgreSQL URL), else of the data dir's SQLite file; None (after one line
    on stderr) when there is none or it cannot be reached."""
    # the app (Flask), not only the store: a command over a data dir needs the aggregator extra, and a
    # device-only install hears so here, in one line (cli._missing_extra), before it looks for a database
    from deniable.aggregator.api.app import DATABASE_NAME
    from deniable.aggregator.store import Store
    from deniable.shared.errors import StoreUnavailable

    if database is not None:
        try:
            return Store(database)
        except StoreUnavailable as exc:
            print(f"cannot open the database: {exc}", file=sys.stderr)
            return None
    path = data_dir / DATABASE_NAME
    if not path.exists():
        print(f"no aggregator database at {path}; pass the data dir with --data-dir (or --database)", file=sys.stderr)
        return None
    return Store(path)


def verify_command(args: argparse.Namespace) -> int:
    """Recount every campaign and check its key; print one line per campaign; 0 if all agree and every key
    is usable, 1 otherwise, 2 if no DB."""
    from deniable.aggregator.verify import verify_keys, verify_store

    database = _database(args)
    kek = _kek(args, database)
    store = _open_store(args.data_dir, database)
    if store is None:
        return 2
    checks = verify_store(store)
    for check in checks:
        if check.ok:
            print(f"ok        {check.campaign_id}: {plural(check.reports, 'report')}, tallies equal a recount")
        else:
            print(f"MISMATCH  {check.campaign_id}: " + "; ".join(check.mismatches))
    bad = sum(not check.ok for check in checks)
    key_problems = verify_keys(store, args.data_dir.resolve(), kek=kek)
    for problem in key_problems:
        fix = "check DENIABLE_KEY_ENCRYPTION_KEY" if store.postgres else "restore the file from a backup"
        fix += "" if store.postgres else " (deniable restore)"
        print(f"KEY       {problem}; {fix}")
    print(f"{plural(len(checks), 'campaign')} checked, {bad} with {'a mismatch' if bad == 1 else 'mismatches'}, "
          f"{len(key_problems)} with an unusable key")  # fmt: skip
    return 1 if bad or key_problems else 0


def tokens_command(args: argparse.Namespace) -> int:
    """Print where the token files are (not the tokens)."""
    from deniable.aggregator.secret_files import token_paths

    print(f"{'role':8} {'file':<{_PATH_WIDTH}}  state")
    for role, path in token_paths(args.data_dir.resolve()).items():
        state = f"mode {path.stat().st_mode & 0o777:04o}" if path.exists() else "missing (generated by serve)"
        print(f"{role:8} {path!s:<{_PATH_WIDTH}}  {state}")
    return 0


def campaigns_command(args: argparse.Namespace) -> int:
    """Print id, trust model, status and report count of every stored campaign."""
    store = _open_store(args.data_dir, _database(args))
    if store is None:
        return 2
    records = store.list_campaigns()
    print(f"{'campaign':32} {'trust':8} {'status':7} {'reports':>10}")
    for record in records:
        print(f"{record.id:32} {record.trust_model:8} {record.status:7} {record.n_reports:>10}")
    print(plural(len(records), "campaign"))
    return 0
