"""The ``deniable`` command line.

Each subcommand lives in the module that owns its work and exposes ``register(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit
code). A command that needs an optional extra says so with ``set_defaults(extra="aggregator")`` and a help
line starting with :func:`needs` (``[aggregator] ...``), so that ``deniable --help`` shows which commands a
device-only install (``pip install deniable``) cannot run.

Rules every command module keeps, so that one install or one setting cannot break the others:

* Third-party modules (numpy, flask, matplotlib, ...) are imported inside the command function, never at
  module level: a device-only install lists every command, and running one that needs a missing extra
  prints one line naming the extra to install (``pip install 'deniable[aggregator]'``), exit status 2.
* Environment settings (``DENIABLE_PORT`` ...) are parsed only by the command that uses them, when it runs
  (:func:`env_int`): ``DENIABLE_PORT=abc deniable ledger`` works, ``deniable serve`` names the bad variable.
* Output goes to stdout and may be cut short by a reader that stops early (``deniable ... | head``): that
  ends the command quietly, never with a ``BrokenPipeError`` traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["build_parser", "env_int", "main", "needs", "version"]

#: Modules contributing subcommands, in the order ``deniable --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "deniable.aggregator.commands",
    "deniable.aggregator.backup",
    "deniable.aggregator.shuffler.command",
    "deniable.analyst.cli",
    "deniable.client.cli",
    "deniable.aggregator.tools.compare",
    "deniable.aggregator.tools.audit",
    "deniable.aggregator.tools.demo",
    "deniable.aggregator.batch.subcommands",
    "deniable.aggregator.planning",
)

#: The optional extras a command may need, with the line that installs each.
EXTRAS: dict[str, str] = {
    "aggregator": "pip install 'deniable[aggregator]'",
    "batch": "pip install 'deniable[batch]'",
    "tools": "pip install 'deniable[tools]'",
}

#: Exit status of a command whose reader closed the pipe (128 + SIGPIPE, as a shell reports it).
_BROKEN_PIPE = 141


def needs(extra: str) -> str:
    """The tag that starts the help line of a command needing ``extra``: ``"[aggregator] "``."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    return f"[{extra}] "


def env_int(name: str, default: int) -> int:
    """``DENIABLE_<name>`` as an integer, or ``default`` when unset; a bad value stops *this* command only
    (call it when the command runs, not when its parser is built)."""
    raw = os.environ.get(f"DENIABLE_{name}")
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"DENIABLE_{name} must be an integer, got {raw!r}; fix or unset it") from None


def version() -> str:
    """The installed version of deniable (``unknown`` when run from a source tree that is not installed)."""
    try:
        return importlib.metadata.version("deniable")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - always installed in practice
        return "unknown"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, adding ``(default: X)`` to every option that has a default its help does not
    already state (flags that are off by default and options without a default show nothing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text
            or default in (None, False, argparse.SUPPRESS)
            or action.option_strings == []
            or isinstance(default, list)
        ):
            return action.help
        return f"{text} (default: %(default)s)"


class _CommandParser(argparse.ArgumentParser):
    """The parser of one subcommand: :class:`HelpFormatter` unless the command picks another."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(**kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand."""
    tags = " ".join(f"Commands marked [{extra}] need the {extra} extra: {line}." for extra, line in EXTRAS.items())
    parser = argparse.ArgumentParser(
        prog="deniable",
        description="Local differential privacy: randomized response on the device, estimates on the server.",
        epilog=f"{tags} The others run on a device-only install (pip install deniable). "
        "'deniable COMMAND --help' describes each command and shows its defaults.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"deniable {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _missing_extra(args: argparse.Namespace, exc: ModuleNotFoundError) -> int | None:
    """The one-line answer to a command that hit a missing third-party module (None: a deniable bug)."""
    missing = (exc.name or "").split(".")[0]
    if not missing or missing == "deniable":
        return None
    extra = getattr(args, "extra", None) or "aggregator"
    print(
        f"deniable {args.command} needs the {extra} extra ({missing} is not installed): {EXTRAS[extra]}",
        file=sys.stderr,
    )
    return 2


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's final flush is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deniable`` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Any = getattr(args, "func", None)
    if not func:
        parser.print_help()
        return 2
    try:
        try:
            result = int(func(args) or 0)
        except ModuleNotFoundError as exc:
            code = _missing_extra(args, exc)
            if code is None:
                raise
            return code
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (| head): the output it wanted was written
        _quiet_stdout()
        return _BROKEN_PIPE
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
