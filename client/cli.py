"""``deniable submit`` and ``deniable ledger``: the device client from a shell.

``deniable submit --aggregator URL --campaign ID --value V [--group k=v ...] [--state-dir DIR]`` answers a
campaign (randomized on this machine, encrypted, queued) and flushes the outbox; it prints what it did in a
few lines, or the receipt and the delivery as JSON with ``--json``. ``deniable ledger [--state-dir DIR]``
prints the ε spent per campaign and what is left, as a table or (``--json``) JSON. The state dir defaults
to ``$DENIABLE_STATE_DIR`` or ``~/.local/share/deniable``.

Exit codes: 0 done; 1 refused or failed (the message says why and what to do); 3 queued but not delivered
yet (the aggregator is unreachable; run the command again or ``flush`` later, nothing is lost).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from deniable.shared.errors import DeniableError, InvalidParameter
from deniable.shared.fields import plural
from deniable.shared.limits import DEVICE_BUDGET_MAX

from .device import Client
from .ledger import build_ledger, fmt_epsilon
from .state import DB_FILE, SECRET_FILE, DeviceState, default_state_dir, state_errors

__all__ = ["register"]


def _group(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--group must be field=value (e.g. country=NL), got {text!r}")
    return key, value


def register(subparsers: Any) -> None:
    """Add ``submit`` and ``ledger`` to the ``deniable`` command line."""
    submit = subparsers.add_parser(
        "submit",
        help="answer a campaign from this device (randomized here, encrypted, delivered)",
        description="Answer a campaign: the value is randomized on this machine, encrypted to the "
        "campaign key and delivered; the raw value never leaves the machine (local campaigns).",
    )
    submit.add_argument("--aggregator", required=True, metavar="URL", help="e.g. http://127.0.0.1:8000")
    submit.add_argument("--campaign", required=True, metavar="ID", help="the campaign id")
    submit.add_argument("--value", required=True, metavar="V", help="your answer: one of the categories")
    submit.add_argument(
        "--group", action="append", type=_group, default=[], metavar="K=V",
        help="a public group attribute the campaign asks for (repeatable), e.g. country=NL",
    )
    _state_dir_option(submit)
    submit.add_argument(
        "--reset-ledger", action="store_true",
        help="start a new ledger over a device secret whose ledger was lost (the old spends are then unknown)",
    )
    submit.add_argument("--recurring", action="store_true", help="permanent randomized response per value")
    submit.add_argument(
        "--round", default=None, metavar="LABEL",
        help="the round answered, for a recurring campaign (with --recurring), e.g. 2026-11-29",
    )
    submit.add_argument(
        "--allow-central", action="store_true",
        help="allow central campaigns, which receive the raw answer (encrypted) and add noise centrally",
    )
    submit.add_argument("--max-epsilon", type=float, default=4.0, help="device cap of ε per campaign")
    submit.add_argument("--lifetime-budget", type=float, default=10.0, help="device lifetime ε budget")
    submit.add_argument("--no-flush", action="store_true", help="queue only; deliver on a later call")
    _json_option(submit)
    submit.set_defaults(func=_submit)

    ledger = subparsers.add_parser(
        "ledger",
        help="show the ε this device spent and what is left",
        description="Show the ε this device spent per campaign, the total, and what is left of the lifetime "
        "budget (read from the device state; nothing is sent or spent).",
    )
    _state_dir_option(ledger)
    ledger.add_argument("--lifetime-budget", type=float, default=10.0, help="device lifetime ε budget")
    ledger.add_argument("--max-epsilon", type=float, default=4.0, help="device cap of ε per campaign")
    _json_option(ledger)
    ledger.set_defaults(func=_ledger)

    forget = subparsers.add_parser(
        "forget",
        help="forget a campaign on this device (answering it again spends ε again)",
        description="Forget a campaign on this device: its pinned config, its memoized answer and its queued "
        "reports. For the development loop, when the aggregator was recreated with new keys under the same "
        "campaign id and this device refuses the changed config. Answering the campaign again afterwards "
        "spends its ε again; the ε already spent stays on the ledger.",
    )
    forget.add_argument("campaign", metavar="CAMPAIGN", help="the campaign id")
    _state_dir_option(forget)
    _json_option(forget)
    forget.set_defaults(func=_forget)


def _budget(flag: str, value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= DEVICE_BUDGET_MAX):
        raise InvalidParameter(f"{flag} must be a finite number in (0, {DEVICE_BUDGET_MAX:g}], got {value:g}")
    return value


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of text")


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", default=None, metavar="DIR",
        help="device state (default: $DENIABLE_STATE_DIR or ~/.local/share/deniable)",
    )


def _submit(args: argparse.Namespace) -> int:
    try:
        with Client(
            args.aggregator,
            args.state_dir or default_state_dir(),
            max_epsilon_per_campaign=args.max_epsilon,
            lifetime_budget=args.lifetime_budget,
            allow_central=args.allow_central,
            reset_ledger=args.reset_ledger,
        ) as client:
            groups = dict(args.group) or None
            receipt = client.submit(args.campaign, args.value, groups, recurring=args.recurring, round=args.round)
            result = None if args.no_flush else client.deliver()
            rejected = [r for r in client.rejections() if r.report_id == receipt.report_id]
    except DeniableError as exc:
        print(f"deniable submit: {exc}", file=sys.stderr)
        return 1
    out: dict[str, Any] = {"receipt": dataclasses.asdict(receipt)}
    if result is not None:
        out["delivery"] = {k: v for k, v in dataclasses.asdict(result).items() if k != "failure"}
    print(json.dumps(out, indent=2) if args.json else _submit_text(out))
    if rejected:
        print(f"deniable submit: the aggregator rejected the report: {rejected[0].reason}", file=sys.stderr)
        return 1
    if result is not None and result.error is not None:
        print(f"deniable submit: queued, not delivered yet: {result.error}", file=sys.stderr)
        return 3
    return 0


def _submit_text(out: dict[str, Any]) -> str:
    """The human form of ``submit``'s outcome: the receipt, then the delivery (same facts as ``--json``)."""
    receipt = out["receipt"]
    where = f"campaign {receipt['campaign_id']}" + (f", round {receipt['round']}" if receipt["round"] else "")
    cost = (
        "memoized: the earlier report was sent again, ε spent 0"
        if receipt["memoized"]
        else f"ε spent {fmt_epsilon(receipt['epsilon_spent'])}"
    )
    lines = [f"answered {where}: report {receipt['report_id']} ({receipt['trust_model']}; {cost})"]
    delivery = out.get("delivery")
    if delivery is None:
        lines.append("queued; not sent yet (--no-flush)" if receipt["queued"] else "not queued")
    else:
        lines.append(
            f"delivery: {delivery['accepted']} accepted, {delivery['duplicate']} duplicate, "
            f"{delivery['rejected']} rejected; {plural(delivery['pending'], 'report')} still queued"
        )
    return "\n".join(lines)


def _ledger(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    try:
        lifetime = Fraction(_budget("--lifetime-budget", args.lifetime_budget))
        cap = Fraction(_budget("--max-epsilon", args.max_epsilon))
    except DeniableError as exc:
        print(f"deniable ledger: {exc}", file=sys.stderr)
        return 1
    if (state_dir / DB_FILE).exists() or (state_dir / SECRET_FILE).exists():  # a secret alone: LedgerLost
        try:
            with state_errors(state_dir):
                state = DeviceState(state_dir)  # read only: no network, nothing spent
                try:
                    spends, pending = state.spent(), state.pending()
                finally:
                    state.close()
        except DeniableError as exc:
            print(f"deniable ledger: {exc}", file=sys.stderr)
            return 1
    else:
        spends, pending = [], 0  # no device state yet: nothing was ever spent (and nothing is created)
    ledger = build_ledger(spends, lifetime, cap)
    if args.json:
        print(json.dumps({**ledger.to_dict(), "pending": pending}, indent=2))
        return 0
    print(f"{'campaign':<40} {'ε spent':>10} {'reports':>8}  mode")
    if not ledger.campaigns:
        print("(no campaign answered yet)")
    for c in ledger.campaigns:
        mode = "recurring" if c.recurring else "one-shot"
        mode += "" if c.trust_model == "local" else ", central"
        print(f"{c.campaign_id:<40} {fmt_epsilon(c.epsilon):>10} {c.reports:>8}  {mode}")
    print(
        f"total ε spent {fmt_epsilon(ledger.spent)} of {fmt_epsilon(ledger.lifetime_budget)}; "
        f"{fmt_epsilon(ledger.remaining)} left; {plural(pending, 'report')} waiting to be delivered"
    )
    return 0


def _forget(args: argparse.Namespace) -> int:
    import warnings

    from .device import ForgetWarning

    state_dir = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    if not (state_dir / DB_FILE).exists():
        print(f"deniable forget: nothing to forget: no device state in {state_dir}", file=sys.stderr)
        return 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ForgetWarning)  # said below, in the CLI's words
            with Client("http://127.0.0.1:9", state_dir) as client:  # no request is made
                result = client.forget(args.campaign)
    except DeniableError as exc:
        print(f"deniable forget: {exc}", file=sys.stderr)
        return 1
    if not (result.pinned or result.dropped or result.spent):
        print(f"deniable forget: this device holds nothing about campaign {args.campaign!r}", file=sys.stderr)
    else:
        print(f"deniable forget: warning: {result.warning()}", file=sys.stderr)
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
    return 0
