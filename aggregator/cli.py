"""The ``deniable`` command line.

Each subcommand lives in the module that owns its work and exposes ``register(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit
code). Modules are imported lazily so that the device commands (``submit``, ``ledger``) work with only the
client's dependencies installed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

#: Modules contributing subcommands, in the order ``deniable --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "deniable.aggregator.commands",
    "deniable.client.cli",
    "deniable.aggregator.compare",
    "deniable.aggregator.audit",
    "deniable.aggregator.demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand whose module imports on this install."""
    parser = argparse.ArgumentParser(
        prog="deniable",
        description="Local differential privacy: randomized response on the device, estimates on the server.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # A missing optional dependency (the aggregator extra on a device) hides those commands;
            # a missing deniable module is a bug and must surface.
            if exc.name != name and exc.name and exc.name.split(".")[0] == "deniable":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deniable`` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
