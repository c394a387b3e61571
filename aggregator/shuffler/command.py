"""``deniable shuffle --upstream URL``: run the shuffler service (its own data dir, keys and port).

The shuffler is meant to be run by another party than the aggregator's operator, on its own data dir
(``./deniable-shuffler-data`` by default; it holds the shuffler's private keys and the reports waiting for
a batch). It serves on the aggregator's stack (gunicorn over uvicorn workers, the same front limits) and
each worker runs a forwarder that forms batches of at least each campaign's threshold and sends them to
``--upstream`` every ``--interval`` seconds. Every option has a ``DENIABLE_SHUFFLER_*`` environment variable.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from deniable.aggregator.cli import env_int, needs
from deniable.shared.limits import MAX_BODY_BYTES_DEFAULT, PORT_RANGE, WORKERS_RANGE

__all__ = ["register"]

DEFAULT_DATA_DIR = "deniable-shuffler-data"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"DENIABLE_SHUFFLER_{name}", default)


def register(subparsers: Any) -> None:
    """Add ``shuffle`` to the ``deniable`` parser."""
    shuffle = subparsers.add_parser(
        "shuffle",
        help=needs("aggregator") + "run a shuffler between devices and an aggregator (shuffled campaigns)",
        description="Run the shuffler: take device uploads of shuffled campaigns, store them durably, and forward "
        "them to the aggregator at --upstream only in signed batches of at least each campaign's threshold, in a "
        "uniformly random order, without report ids, times, addresses or device tokens. Its public keys (GET "
        "/api/v1/shuffler, also printed at start) go into the campaign's 'shuffler' object.",
    )
    shuffle.add_argument(
        "--upstream", default=_env("UPSTREAM"), help="the aggregator's base URL (env DENIABLE_SHUFFLER_UPSTREAM)"
    )
    shuffle.add_argument(
        "--data-dir", type=Path, default=Path(_env("DATA_DIR", DEFAULT_DATA_DIR) or DEFAULT_DATA_DIR),
        help="the shuffler's data dir: keys and pending reports (env DENIABLE_SHUFFLER_DATA_DIR; "
        f"default ./{DEFAULT_DATA_DIR})",
    )  # fmt: skip
    shuffle.add_argument(
        "--host", default=_env("HOST", "127.0.0.1"), help="address to bind (env DENIABLE_SHUFFLER_HOST)"
    )
    shuffle.add_argument("--port", type=int, default=None, help="TCP port (env DENIABLE_SHUFFLER_PORT; default: 8100)")
    shuffle.add_argument("--workers", type=int, default=None, help="worker processes (default: 1)")
    shuffle.add_argument("--threads", type=int, default=None, help="threads per worker (default: 4)")
    shuffle.add_argument(
        "--interval", type=float, default=None,
        help="seconds between two forwarding passes (env DENIABLE_SHUFFLER_INTERVAL; default: 1)",
    )  # fmt: skip
    shuffle.add_argument(
        "--upstream-max-body", type=int, default=None,
        help="the aggregator's request body limit (its --max-body-bytes): no batch is larger "
        f"(default: {MAX_BODY_BYTES_DEFAULT // (1024 * 1024)} MiB)",
    )  # fmt: skip
    shuffle.add_argument(
        "--ingest-rate", type=float, default=None,
        help="reports per second one device address may upload, sustained (env DENIABLE_INGEST_RATE; default: "
        "the aggregator's)",
    )  # fmt: skip
    shuffle.add_argument("--ingest-burst", type=int, default=None, help="reports one address may upload at once")
    shuffle.set_defaults(func=shuffle_command, extra="aggregator")


def shuffle_command(args: argparse.Namespace) -> int:
    """Prepare the data dir and keys, then serve until stopped (SIGTERM/SIGINT)."""
    from deniable.aggregator.commands import _check_port
    from deniable.aggregator.front import FrontSettings
    from deniable.aggregator.server import AggregatorServer, gunicorn_options
    from deniable.aggregator.shuffler.app import create_shuffler_app
    from deniable.aggregator.shuffler.service import Shuffler
    from deniable.shared import limits

    if not args.upstream:
        raise SystemExit("deniable shuffle: --upstream URL (the aggregator, e.g. http://127.0.0.1:8000) is required")
    if not args.upstream.startswith(("http://", "https://")):
        raise SystemExit(f"deniable shuffle: --upstream must be an http:// or https:// URL, got {args.upstream!r}")
    port = args.port if args.port is not None else env_int("SHUFFLER_PORT", 8100)
    workers = args.workers if args.workers is not None else env_int("SHUFFLER_WORKERS", 1)
    threads = args.threads if args.threads is not None else env_int("SHUFFLER_THREADS", 4)
    interval = (
        args.interval
        if args.interval is not None
        else float(_env("INTERVAL", str(limits.SHUFFLE_INTERVAL_DEFAULT)) or 1)
    )
    max_body = args.upstream_max_body if args.upstream_max_body is not None else MAX_BODY_BYTES_DEFAULT
    (low_port, high_port), (low, high) = PORT_RANGE, WORKERS_RANGE
    if not low_port <= port <= high_port or not low <= workers <= high or not low <= threads <= high:
        raise SystemExit(f"deniable shuffle: --port must be in {low_port}..{high_port}, --workers and --threads in "
                         f"{low}..{high}")
    if not 0.01 <= interval <= 3600:
        raise SystemExit(f"deniable shuffle: --interval must be in 0.01..3600 seconds, got {interval:g}")
    _check_port(args.host, port)
    os.umask(0o077)
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    shuffler = Shuffler(data_dir, upstream=args.upstream, upstream_max_body=max_body)  # keys and schema, before fork
    shuffler.store.release_leases()  # no worker runs yet: a batch cut off by a crash is due again now
    print(f"shuffler public_key: {shuffler.keys.public_key}", flush=True)
    print(f"shuffler verify_key: {shuffler.keys.verify_key}", flush=True)
    from deniable.aggregator.commands import _env_float

    settings = FrontSettings(  # the same DENIABLE_INGEST_* variables as deniable serve (flags win)
        ingest_rate=args.ingest_rate if args.ingest_rate is not None
        else _env_float("INGEST_RATE", limits.INGEST_RATE_DEFAULT),
        ingest_burst=args.ingest_burst if args.ingest_burst is not None
        else env_int("INGEST_BURST", limits.INGEST_BURST_DEFAULT),
    )  # fmt: skip
    if not limits.RATE_RANGE[0] <= settings.ingest_rate <= limits.RATE_RANGE[1]:
        raise SystemExit(f"deniable shuffle: --ingest-rate must be in {limits.range_text(limits.RATE_RANGE)}")
    if not limits.BURST_RANGE[0] <= settings.ingest_burst <= limits.BURST_RANGE[1]:
        raise SystemExit(f"deniable shuffle: --ingest-burst must be in {limits.range_text(limits.BURST_RANGE)}")
    options = gunicorn_options(host=args.host, port=port, workers=workers, threads=threads, settings=settings)
    options["proc_name"] = "deniable-shuffler"
    url = f"http://{args.host}:{port}"

    def ready(_server: Any) -> None:
        print(f"deniable shuffler on {url} forwarding to {args.upstream} (data dir {data_dir})", flush=True)

    options["when_ready"] = ready
    config = {"DATA_DIR": str(data_dir), "UPSTREAM": args.upstream, "FORWARD_INTERVAL": interval,
              "UPSTREAM_MAX_BODY": max_body}  # fmt: skip
    AggregatorServer(config, options, settings, factory=create_shuffler_app).run()
    return 0
