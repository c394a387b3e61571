"""``deniable submit``, ``flush``, ``pending`` and ``ledger``: the device client from a shell.

``deniable submit --aggregator URL --campaign ID --value V [--group k=v ...] [--state-dir DIR]`` answers a
campaign (randomized on this machine, encrypted, queued) and flushes the outbox; it prints what it did in a
few lines, or the receipt and the delivery as JSON with ``--json``. A survey takes ``--answer QUESTION=VALUE``
per question instead of ``--value`` (``--answer smoke=yes --answer age=37 --answer 'apps=["mail", "maps"]'``:
VALUE is read as JSON when it parses as JSON, else as text; a question left out is skipped where it is
optional), all in one envelope. A second, different answer to a one-shot campaign is refused (the message
names the earlier answer's time); ``--reanswer`` replaces an answer that has not been delivered yet.
``deniable flush [--aggregator URL]`` delivers what waits (after ``submit --no-flush``, or an outage);
``deniable pending`` lists each waiting report and why it waits.
``deniable ledger [--state-dir DIR]`` prints the ε spent per campaign and what is left, as a table or
(``--json``) JSON. The state dir defaults to ``$DENIABLE_STATE_DIR`` or ``~/.local/share/deniable``.

Messages name this command line's flags (``--group country=V``, ``--reanswer``), not the Python SDK's
argument names.

Exit codes: 0 done; 1 refused or failed (the message says why and what to do; nothing was queued unless
it says so); 3 queued but not delivered yet (the aggregator did not take it now: unreachable, or an answer
that is not a verdict on the report; ``deniable flush`` later delivers it, nothing is lost).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import re
import sys
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from deniable.shared.errors import DeniableError, InvalidParameter
from deniable.shared.fields import plural
from deniable.shared.limits import DEVICE_BUDGET_MAX, OUTBOX_MAX_AGE_DEFAULT

from .device import Client
from .ledger import build_ledger, fmt_epsilon
from .outbox import FlushResult
from .state import DB_FILE, SECRET_FILE, DeviceState, PendingReport, default_state_dir, state_errors

__all__ = ["register"]


def _group(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--group must be field=value (e.g. country=NL), got {text!r}")
    return key, value


def _answer(text: str) -> tuple[str, Any]:
    """``QUESTION=VALUE``: VALUE as JSON if it parses (a number, a list, a quoted string), else as text."""
    question, sep, value = text.partition("=")
    if not sep or not question:
        raise argparse.ArgumentTypeError(f"--answer must look like QUESTION=VALUE (e.g. age=37), got {text!r}")
    try:
        parsed: Any = json.loads(value, parse_constant=lambda name: name)  # NaN stays the text 'NaN'
    except json.JSONDecodeError:
        parsed = value
    return question, parsed


def register(subparsers: Any) -> None:
    """Add ``submit``, ``flush``, ``pending`` and ``ledger`` to the ``deniable`` command line."""
    submit = subparsers.add_parser(
        "submit",
        help="answer a campaign from this device (randomized here, encrypted, delivered)",
        description="Answer a campaign: the value is randomized on this machine, encrypted to the "
        "campaign key and delivered; the raw value never leaves the machine (local campaigns).",
    )
    submit.add_argument("--aggregator", required=True, metavar="URL", help="e.g. http://127.0.0.1:8000")
    submit.add_argument("--campaign", required=True, metavar="ID", help="the campaign id")
    submit.add_argument("--value", metavar="V", help="your answer: one of the categories (one-question campaigns)")
    submit.add_argument(
        "--answer", action="append", type=_answer, default=[], metavar="QUESTION=VALUE",
        help="a survey's answer to one question (repeatable): VALUE is JSON when it parses as JSON (37, "
        "'[\"mail\", \"maps\"]', '\"30\"' for a label that looks like a number), else text (yes)",
    )
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
    submit.add_argument(
        "--reanswer", action="store_true",
        help="replace this device's earlier, different answer to the campaign while it is not delivered yet "
        "(spends ε again); without it a changed answer is refused",
    )
    submit.add_argument(
        "--no-flush", action="store_true", help="queue only; deliver later with 'deniable flush'"
    )
    _json_option(submit)
    submit.set_defaults(func=_submit)

    flush = subparsers.add_parser(
        "flush",
        help="deliver the reports waiting in this device's outbox",
        description="Deliver the reports waiting in the outbox (after 'submit --no-flush' or an outage). "
        "A report leaves the outbox only when the aggregator answers for it; anything else keeps it queued "
        "and is shown by 'deniable pending'. Exit 0 when nothing waits any more, 3 when reports still wait.",
    )
    flush.add_argument(
        "--aggregator", default=None, metavar="URL",
        help="the aggregator (default: the one this state dir last used)",
    )
    _state_dir_option(flush)
    _json_option(flush)
    flush.set_defaults(func=_flush)

    pending = subparsers.add_parser(
        "pending",
        help="list the reports waiting in this device's outbox, and why",
        description="List each report waiting in the outbox: its campaign, when it was queued, how often "
        "delivery was tried, the last answer that kept it queued, and when it expires (nothing is sent).",
    )
    _state_dir_option(pending)
    _json_option(pending)
    pending.set_defaults(func=_pending)

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


#: Python names in SDK messages and the flags of this command line that stand for them (longest first).
_FLAG_NAMES: tuple[tuple[str, str], ...] = (
    (
        r"recurring=True and round='<label>' \(e\.g\. round='([^']*)'\)",
        r"--recurring and --round LABEL (e.g. --round \1)",
    ),
    (r"leave recurring=False and round=None", "leave out --recurring and --round"),
    (r"allow_central=True \(CLI: --allow-central\)", "--allow-central"),
    (r"reset_ledger=True \(CLI: --reset-ledger\)", "--reset-ledger"),
    (r"\(state_dir=\.\.\., CLI: --state-dir DIR\)", "(--state-dir DIR)"),
    (r"submit again with reanswer=True", "run the same submit again with --reanswer"),
    (r"'groups' must have exactly the group fields", "--group must give exactly the group fields"),
    (r"recurring=True", "--recurring"),
    (r"reanswer=True", "--reanswer"),
    (r"max_epsilon_per_campaign", "--max-epsilon"),
    (r"'lifetime_budget'", "--lifetime-budget"),
    (r"'aggregator_url'", "--aggregator"),
    (r"'campaign_id'", "--campaign"),
    (r"'timeout'", "--timeout"),
    (r"call flush\(\) again later", "run 'deniable flush' later"),
)


def _cli_message(text: str) -> str:
    """An SDK message with its Python argument names replaced by this command line's flags: group fields
    as ``--group FIELD=V``, ``reanswer=True`` as ``--reanswer``, and so on."""
    for pattern, flag in _FLAG_NAMES:
        text = re.sub(pattern, flag, text)
    text = re.sub(
        r"(missing|the group fields of campaign '[^']*' \()((?:'[^']+'(?:, )?)+)",
        lambda m: m.group(1) + " ".join(f"--group {f.strip(chr(39))}=V" for f in m.group(2).split(", ")),
        text,
    )
    return re.sub(r"\bgroup '([^']+)'", r"--group \1=V", text)


def _fail(command: str, exc: DeniableError) -> int:
    print(f"deniable {command}: {_cli_message(str(exc))}", file=sys.stderr)
    return 1


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
            if (args.value is None) == (not args.answer):
                raise InvalidParameter(
                    "give --value V (a one-question campaign) or one --answer QUESTION=VALUE per question (a "
                    "survey), not both and not neither"
                )
            answer: Any = args.value if args.value is not None else dict(args.answer)
            receipt = client.submit(
                args.campaign, answer, groups, recurring=args.recurring, round=args.round,
                reanswer=args.reanswer,
            )
            result = None if args.no_flush else client.deliver()
            rejected = [r for r in client.rejections() if r.report_id == receipt.report_id]
            waiting = any(p.report_id == receipt.report_id for p in client.pending())
    except DeniableError as exc:
        return _fail("submit", exc)
    out: dict[str, Any] = {"receipt": dataclasses.asdict(receipt)}
    if result is not None:
        out["delivery"] = _delivery_json(result)
    print(json.dumps(out, indent=2) if args.json else _submit_text(out, waiting))
    if rejected:
        print(f"deniable submit: the aggregator rejected the report: {rejected[0].reason}", file=sys.stderr)
        return 1
    if result is not None and waiting:
        print(
            f"deniable submit: the report is queued, not delivered yet: {_cli_message(result.error or '')}; "
            "'deniable flush' delivers it later, 'deniable pending' shows why it waits",
            file=sys.stderr,
        )
        return 3
    if result is not None and result.error is not None:
        print(
            f"deniable submit: this report was delivered; {plural(result.pending, 'other report')} still "
            f"queued: {_cli_message(result.error)}",
            file=sys.stderr,
        )
    return 0


def _delivery_json(result: FlushResult) -> dict[str, Any]:
    out = {k: v for k, v in dataclasses.asdict(result).items() if k != "failure"}
    out["error_code"] = None if result.failure is None else result.failure.code
    return out


def _submit_text(out: dict[str, Any], waiting: bool) -> str:
    """The human form of ``submit``'s outcome: the receipt, then the delivery (same facts as ``--json``)."""
    receipt = out["receipt"]
    where = f"campaign {receipt['campaign_id']}" + (f", round {receipt['round']}" if receipt["round"] else "")
    if not receipt["memoized"]:
        cost = f"ε spent {fmt_epsilon(receipt['epsilon_spent'])}"
    elif receipt["queued"]:
        cost = "the same answer as before: its earlier report stands and is queued again, ε spent 0"
    else:
        cost = "the same answer as before: its earlier report stands (the aggregator rejected it), ε spent 0"
    lines = [f"answered {where}: report {receipt['report_id']} ({receipt['trust_model']}; {cost})"]
    delivery = out.get("delivery")
    if delivery is None:
        lines.append("queued; not sent yet (--no-flush): 'deniable flush' delivers it" if receipt["queued"]
                     else "not queued")
    else:
        lines.append(
            f"delivery: {delivery['accepted']} accepted, {delivery['duplicate']} duplicate, "
            f"{delivery['rejected']} rejected; {plural(delivery['pending'], 'report')} still queued"
            + ("" if not waiting else " (this one among them)")
        )
    return "\n".join(lines)


def _flush(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    if not (state_dir / DB_FILE).exists():
        print(f"nothing to deliver: no device state in {state_dir}")
        return 0
    try:
        url = args.aggregator or _remembered_url(state_dir)
        if url is None:
            print(
                f"deniable flush: {state_dir} does not say which aggregator it answered; pass --aggregator URL",
                file=sys.stderr,
            )
            return 1
        with Client(url, state_dir) as client:
            result = client.deliver()
            left = client.pending()
    except DeniableError as exc:
        return _fail("flush", exc)
    if args.json:
        print(json.dumps({"aggregator": url, **_delivery_json(result)}, indent=2))
    else:
        print(
            f"delivered {plural(result.delivered, 'report')} to {url} ({result.accepted} accepted, "
            f"{result.duplicate} duplicate); {result.rejected} rejected; {result.expired} expired; "
            f"{plural(result.pending, 'report')} still queued"
        )
    if left:
        print(
            f"deniable flush: {plural(len(left), 'report')} still queued: "
            f"{_cli_message(result.error or left[0].why)}; 'deniable pending' shows each and why",
            file=sys.stderr,
        )
        return 3
    return 0


@contextlib.contextmanager
def _reading(state_dir: Path) -> Iterator[DeviceState]:
    """The device state of ``state_dir`` for a command that only reads it (no network, nothing spent or
    sent); its storage errors are ``DeviceStateError`` s."""
    with state_errors(state_dir):
        state = DeviceState(state_dir)
        try:
            yield state
        finally:
            state.close()


def _remembered_url(state_dir: Path) -> str | None:
    with _reading(state_dir) as state:
        return state.aggregator_url()


def _pending(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    waiting: list[PendingReport] = []
    rejected = expired = 0
    if (state_dir / DB_FILE).exists():
        try:
            with _reading(state_dir) as state:
                waiting = state.pending_reports(OUTBOX_MAX_AGE_DEFAULT)
                rejected, expired = len(state.rejections()), len(state.expired())
        except DeniableError as exc:
            return _fail("pending", exc)
    if args.json:
        rows = [{**dataclasses.asdict(p), "why": p.why} for p in waiting]
        print(json.dumps({"pending": rows, "rejected": rejected, "expired": expired}, indent=2))
        return 0
    if not waiting:
        print("nothing waiting to be delivered")
    else:
        print(f"{'report':<32}  {'campaign':<24} {'queued (UTC)':<16} {'tries':>5}  {'expires (UTC)':<16}  why")
    for p in waiting:
        print(
            f"{p.report_id:<32}  {p.campaign_id:<24} {_utc(p.queued_at):<16} {p.attempts:>5}  "
            f"{_utc(p.expires_at):<16}  {_cli_message(p.why)}"
        )
    print(
        f"{plural(len(waiting), 'report')} waiting; {rejected} rejected by the aggregator; {expired} expired "
        f"after {OUTBOX_MAX_AGE_DEFAULT / 86400:g} days in the outbox"
    )
    return 0


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


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
            with _reading(state_dir) as state:
                spends, pending, expired = state.spent(), state.pending(), state.expired_counts()
        except DeniableError as exc:
            return _fail("ledger", exc)
    else:
        spends, pending, expired = [], 0, {}  # no device state yet: nothing was ever spent or created
    ledger = build_ledger(spends, lifetime, cap, expired)
    if args.json:
        print(json.dumps({**ledger.to_dict(), "pending": pending}, indent=2))
        return 0
    print(f"{'campaign':<40} {'ε spent':>10} {'reports':>8}  mode")
    if not ledger.campaigns:
        print("(no campaign answered yet)")
    for c in ledger.campaigns:
        mode = "recurring" if c.recurring else "one-shot"
        mode += "" if c.trust_model == "local" else ", central"
        mode += "" if not c.expired else f"; {plural(c.expired, 'report')} expired undelivered"
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
