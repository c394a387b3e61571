"""Operator commands of the ``deniable`` CLI: ``serve``, ``verify``, ``tokens`` and ``campaigns``.

Every flag has a ``DENIABLE_*`` environment variable; flags win. Tokens are better passed by environment
(``DENIABLE_ADMIN_TOKEN``, ``DENIABLE_ANALYST_TOKEN``) than by flag, since flags show in ``ps``. When
neither is set, ``serve`` generates tokens into the data dir (mode 0600) and prints where, never the
tokens themselves.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

DEFAULT_DATA_DIR = "deniable-data"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"DENIABLE_{name}", default)


def _env_int(name: str, default: int) -> int:
    raw = _env(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        raise SystemExit(f"DENIABLE_{name} must be an integer, got {raw!r}") from None


def _data_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(_env("DATA_DIR", DEFAULT_DATA_DIR) or DEFAULT_DATA_DIR),
        help="directory of the database, campaign keys and tokens (env DENIABLE_DATA_DIR; "
        f"default ./{DEFAULT_DATA_DIR})",
    )


def register(subparsers: Any) -> None:
    """Add the operator subcommands to the ``deniable`` parser."""
    serve = subparsers.add_parser("serve", help="run the aggregator service under gunicorn")
    _data_dir_arg(serve)
    serve.add_argument(
        "--host", default=_env("HOST", "127.0.0.1"), help="address to bind (env DENIABLE_HOST)"
    )
    serve.add_argument("--port", type=int, default=_env_int("PORT", 8000), help="port (env DENIABLE_PORT)")
    serve.add_argument(
        "--workers", type=int, default=_env_int("WORKERS", 2), help="processes (env DENIABLE_WORKERS)"
    )
    serve.add_argument(
        "--threads", type=int, default=_env_int("THREADS", 2), help="threads each (env DENIABLE_THREADS)"
    )
    for role in ("admin", "analyst"):
        serve.add_argument(
            f"--{role}-token",
            default=_env(f"{role.upper()}_TOKEN"),
            help=f"the {role} bearer token (prefer env DENIABLE_{role.upper()}_TOKEN)",
        )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=_env_int("MAX_BODY_BYTES", 8 * 1024 * 1024),
        help="largest request body; larger ones get 413 (env DENIABLE_MAX_BODY_BYTES)",
    )
    serve.set_defaults(func=serve_command)

    verify = subparsers.add_parser(
        "verify", help="recount every tally from the stored reports; exit 1 on mismatch"
    )
    _data_dir_arg(verify)
    verify.set_defaults(func=verify_command)

    tokens = subparsers.add_parser("tokens", help="show where the admin and analyst token files are")
    _data_dir_arg(tokens)
    tokens.set_defaults(func=tokens_command)

    campaigns = subparsers.add_parser("campaigns", help="list the campaigns stored in a data dir")
    _data_dir_arg(campaigns)
    campaigns.set_defaults(func=campaigns_command)


def _check_serve_args(args: argparse.Namespace) -> None:
    if not 0 < args.port < 65536:
        raise SystemExit(f"--port must be in 1..65535, got {args.port}")
    if not 1 <= args.workers <= 64 or not 1 <= args.threads <= 64:
        raise SystemExit(f"--workers and --threads must be in 1..64, got {args.workers} and {args.threads}")
    if args.max_body_bytes < 1024:
        raise SystemExit(f"--max-body-bytes must be at least 1024, got {args.max_body_bytes}")


def serve_command(args: argparse.Namespace) -> int:
    """Prepare the data dir (tokens, schema), then run gunicorn until it is stopped (SIGTERM/SIGINT)."""
    from deniable.aggregator.app import DATABASE_NAME
    from deniable.aggregator.secret_files import ensure_tokens, token_paths
    from deniable.aggregator.server import AggregatorServer, gunicorn_options
    from deniable.aggregator.store import Store

    _check_serve_args(args)
    os.umask(0o077)  # the database, its WAL and every key or token file: owner only
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    tokens = ensure_tokens(data_dir, admin=args.admin_token, analyst=args.analyst_token)
    for role, path in token_paths(data_dir).items():
        if getattr(args, f"{role}_token"):
            print(f"{role} token: from DENIABLE_{role.upper()}_TOKEN / --{role}-token", flush=True)
        else:
            state = "generated" if path in tokens.generated else "stored"
            print(f"{role} token: {state} in {path} (mode 0600)", flush=True)
    store = Store(data_dir / DATABASE_NAME)  # migrate once, before workers fork
    store.close()
    print(f"deniable aggregator on http://{args.host}:{args.port} (data dir {data_dir})", flush=True)
    config = {
        "DATA_DIR": str(data_dir),
        "ADMIN_TOKEN": tokens.admin,
        "ANALYST_TOKEN": tokens.analyst,
        "MAX_CONTENT_LENGTH": args.max_body_bytes,
    }
    options = gunicorn_options(host=args.host, port=args.port, workers=args.workers, threads=args.threads)
    AggregatorServer(config, options).run()
    return 0


def _open_store(data_dir: Path) -> Any:
    from deniable.aggregator.app import DATABASE_NAME
    from deniable.aggregator.store import Store

    path = data_dir / DATABASE_NAME
    if not path.exists():
        print(f"no aggregator database at {path}; pass the data dir with --data-dir", file=sys.stderr)
        return None
    return Store(path)


def verify_command(args: argparse.Namespace) -> int:
    """Recount every campaign; print one line per campaign; 0 if all agree, 1 if any differs, 2 if no DB."""
    from deniable.aggregator.verify import verify_store

    store = _open_store(args.data_dir)
    if store is None:
        return 2
    checks = verify_store(store)
    for check in checks:
        if check.ok:
            print(f"ok        {check.campaign_id}: {check.reports} reports, tallies equal a recount")
        else:
            print(f"MISMATCH  {check.campaign_id}: " + "; ".join(check.mismatches))
    bad = sum(not check.ok for check in checks)
    print(f"{len(checks)} campaigns checked, {bad} with mismatches")
    return 1 if bad else 0


def tokens_command(args: argparse.Namespace) -> int:
    """Print where the token files are (not the tokens)."""
    from deniable.aggregator.secret_files import token_paths

    for role, path in token_paths(args.data_dir.resolve()).items():
        state = f"mode {path.stat().st_mode & 0o777:04o}" if path.exists() else "missing (generated by serve)"
        print(f"{role:8} {path}  {state}")
    return 0


def campaigns_command(args: argparse.Namespace) -> int:
    """Print id, trust model, status and report count of every stored campaign."""
    store = _open_store(args.data_dir)
    if store is None:
        return 2
    for record in store.list_campaigns():
        print(f"{record.id:32} {record.trust_model:8} {record.status:7} {record.n_reports:>10} reports")
    return 0
