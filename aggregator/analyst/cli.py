"""The analyst's commands of the ``deniable`` CLI, over HTTP: ``campaigns``, ``estimate`` and ``timeline``.

::

    export DENIABLE_URL=http://127.0.0.1:8000 DENIABLE_TOKEN_FILE=deniable-data/tokens/analyst.token
    deniable campaigns list --status open
    deniable campaigns create smoking --question "Do you smoke?" --categories no,yes --epsilon 1
    deniable estimate smoking --group-by country --format csv > smoking.csv
    deniable timeline smoking --bucket hour

The token comes from ``DENIABLE_TOKEN`` or from a file (``--token-file`` / ``DENIABLE_TOKEN_FILE``), never
from the command line, where ``ps`` and the shell history would show it. These commands talk to a running
aggregator; ``deniable admin ...`` (and ``verify``/``tokens``) read a data dir on the server's own disk.
Errors print one line to stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from deniable.analyst.client import Analyst
from deniable.analyst.http import DEFAULT_URL
from deniable.analyst.records import Records
from deniable.shared.errors import DeniableError
from deniable.shared.fields import plural
from deniable.shared.limits import CAMPAIGN_PAGE_DEFAULT, CAMPAIGN_PAGE_MAX, CAMPAIGN_STATUSES, TIMELINE_BUCKETS
from deniable.shared.mechanisms.estimate import UNBIASED_NOTE

__all__ = ["register", "render_table"]

_FORMATS = ("table", "csv", "json")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[int] = ()) -> str:
    """A plain text table: a header line, a rule, then the rows; columns in ``right`` right-aligned."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        parts = [
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def _num(x: Any, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def _minute(iso: str | None) -> str:
    """``2026-12-01T08:22:22.468+00:00`` → ``2026-12-01 08:22``."""
    return (iso or "")[:16].replace("T", " ")


def _eps(x: Any) -> str:
    return "" if x is None else f"{x:g}"


# -- connection arguments ----------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows every real default (not the None of an optional flag, nor a switch's False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "%(default)" in text
            or any(action.default is v for v in (None, False, argparse.SUPPRESS))
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def _connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("aggregator")
    group.add_argument(
        "--url",
        default=os.environ.get("DENIABLE_URL", DEFAULT_URL),
        help="the aggregator's base URL (env DENIABLE_URL)",
    )
    group.add_argument(
        "--token-file",
        type=Path,
        default=os.environ.get("DENIABLE_TOKEN_FILE"),
        help="file holding the analyst or admin token (env DENIABLE_TOKEN_FILE); else env DENIABLE_TOKEN",
    )


def _analyst(args: argparse.Namespace) -> Analyst:
    return Analyst(args.url, token_file=args.token_file)


def _format_arg(parser: argparse.ArgumentParser, choices: Sequence[str] = _FORMATS) -> None:
    parser.add_argument("--format", choices=choices, default="table", help="output format")


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``func``; a DeniableError becomes one line on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except DeniableError as exc:
            name = " ".join(filter(None, (args.command, getattr(args, "action", None))))
            print(f"deniable {name}: {exc}", file=sys.stderr)
            return 1

    return run


def _emit(records: Records, fmt: str, table: Callable[[Records], str]) -> None:
    if fmt == "csv":
        sys.stdout.write(records.to_csv())
    elif fmt == "json":
        print(records.to_json(indent=2))
    else:
        print(table(records))


# -- campaigns ---------------------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _group_values(items: Sequence[str]) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for item in items:
        field, sep, rest = item.partition("=")
        if not sep or not field.strip() or not _split(rest):
            raise SystemExit(f"--group-values must look like FIELD=a,b,c, got {item!r}")
        values[field.strip()] = _split(rest)
    return values


def _create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.from_file is not None:
        try:
            body = json.loads(Path(args.from_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"--from-file: cannot read a JSON campaign from {str(args.from_file)!r}: {exc}") from None
        if not isinstance(body, dict):
            raise SystemExit("--from-file must hold a JSON object describing the campaign")
    flags = {
        "question": args.question,
        "categories": _split(args.categories) if args.categories else None,
        "epsilon": args.epsilon,
        "mechanism": args.mechanism,
        "group_fields": args.group_field or None,
        "group_values": _group_values(args.group_values) if args.group_values else None,
        "trust_model": args.trust_model,
        "budget": args.budget,
        "adjacency": args.adjacency,
        "recurring": True if args.recurring else None,
    }
    body.update({key: value for key, value in flags.items() if value is not None})
    body["id"] = args.id
    if "questions" in body or "title" in body:  # a survey (format 3) from --from-file
        return _create_survey(args, body)
    missing = [name for name in ("question", "categories", "epsilon") if name not in body]
    if missing:
        raise SystemExit(
            "deniable campaigns create: missing " + ", ".join(f"--{m}" for m in missing) + " (or --from-file)"
        )
    return _create_and_show(args, body, ("question", "categories", "epsilon"), lambda config: (
        f"campaign {config['id']} ({config['trust_model']}, {config['mechanism']}, ε = {_eps(config['epsilon'])}, "
        f"{plural(len(config['categories']), 'category', 'categories')})"
    ))  # fmt: skip


def _create_survey(args: argparse.Namespace, body: dict[str, Any]) -> int:
    missing = [name for name in ("title", "questions", "epsilon") if name not in body]
    if missing:
        raise SystemExit("deniable campaigns create: a survey needs " + ", ".join(missing) + " in --from-file")
    return _create_and_show(args, body, ("title", "questions", "epsilon"), lambda config: (
        f"survey {config['id']} ({config['trust_model']}, split {config['split']['mode']}, "
        f"ε = {_eps(config['epsilon'])}, {plural(len(config['questions']), 'question')})"
    ))  # fmt: skip


def _create_and_show(
    args: argparse.Namespace, body: dict[str, Any], required: tuple[str, str, str], summary: Callable[[Any], str]
) -> int:
    """Create a one-question campaign (``required``: question, categories, epsilon) or a survey (title,
    questions, epsilon) from ``body`` (its other keys are the optional fields); print it as JSON or in a line."""
    analyst = _analyst(args)
    create = analyst.create_survey if "questions" in required else analyst.create_campaign
    fields = {key: value for key, value in body.items() if key not in ("id", *required)}
    config = create(body["id"], *(body[name] for name in required), **fields)
    if args.format == "json":
        print(json.dumps(config, indent=2, ensure_ascii=False))
    else:
        print(f"created {summary(config)}; devices fetch it at {analyst.url}/api/v1/campaigns/{config['id']}")
    return 0


def _mechanism_text(c: Mapping[str, Any]) -> str:
    """A campaign's mechanism, or a survey's split and number of questions."""
    if "questions" in c:
        return f"survey: {plural(len(c['questions']), 'question')}, {c['split']['mode']}"
    return str(c["mechanism"])


def _campaign_rows(campaigns: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for c in campaigns:
        central = c.get("trust_model") == "central"
        budget = c.get("budget") if central else None
        left = None if budget is None else max(0.0, round(budget - c.get("epsilon_spent", 0.0), 12))
        reports = "private" if c.get("n_reports") is None else f"{c['n_reports']:,}"
        rows.append([
            c["id"], c["status"], c["trust_model"], _mechanism_text(c), _eps(c["epsilon"]), reports,
            _eps(c.get("epsilon_spent")) if central else "", _eps(left), _minute(c.get("created_at")),
        ])  # fmt: skip
    return rows


_CAMPAIGN_HEADERS = ("ID", "STATUS", "TRUST", "MECHANISM", "ε", "REPORTS", "ε SPENT", "ε LEFT", "CREATED (UTC)")


def _list(args: argparse.Namespace) -> int:
    analyst = _analyst(args)
    if args.all:
        campaigns = list(analyst.iter_campaigns(status=args.status, page_size=CAMPAIGN_PAGE_MAX))
        total, next_offset = len(campaigns), None
    else:
        page = analyst.campaigns(status=args.status, limit=args.limit, offset=args.offset)
        campaigns, total, next_offset = page.campaigns, page.total, page.next_offset
    if args.format == "json":
        print(
            json.dumps(
                {"campaigns": campaigns, "total": total, "next_offset": next_offset}, indent=2, ensure_ascii=False
            )
        )
        return 0
    if args.format == "csv":
        columns = ["id", "status", "trust_model", "mechanism", "epsilon", "n_reports", "budget", "epsilon_spent",
                   "created_at", "closed_at", "question"]  # fmt: skip
        sys.stdout.write(Records(columns, campaigns).to_csv())
        return 0
    which = f"{args.status} " if args.status else ""
    if not campaigns:
        print(f"no {which}campaigns" + (f" from offset {args.offset}" if args.offset else ""))
        return 0
    print(render_table(_CAMPAIGN_HEADERS, _campaign_rows(campaigns), right=(4, 5, 6, 7)))
    shown = plural(len(campaigns), f"{which}campaign")
    more = (
        f" of {total}; next page: --offset {next_offset}"
        if next_offset is not None
        else (f" of {total}" if total != len(campaigns) else "")
    )
    print(f"{shown}{more}")
    return 0


def _show(args: argparse.Namespace) -> int:
    c = _analyst(args).campaign(args.id)
    if args.format == "json":
        print(json.dumps(c, indent=2, ensure_ascii=False))
        return 0
    survey = "questions" in c
    about = (
        [("title", c["title"]), ("split", f"{c['split']['mode']} ({c['split'].get('reason', '')})")]
        + [(f"question {q['id']}", f"{q['kind']}, {q['mechanism']}, ε = {_eps(q['epsilon'])}: {q['text']}")
           for q in c["questions"]]
        if survey else [("question", c["question"]), ("categories", ", ".join(c["categories"]))]
    )  # fmt: skip
    lines = [
        ("id", c["id"]),
        *about,
        ("status", c["status"] + (f" (closed {_minute(c['closed_at'])} UTC)" if c.get("closed_at") else "")),
        ("trust model", c["trust_model"]),
        ("mechanism", f"{_mechanism_text(c)}, ε = {_eps(c['epsilon'])}"),
        ("reports", "private (central, add-remove: read the noisy n of a release)" if c.get("n_reports") is None
         else plural(c["n_reports"], "report")),
        ("created", _minute(c.get("created_at")) + " UTC"),
    ]  # fmt: skip
    if c.get("group_fields"):
        lines.append(("group fields", ", ".join(c["group_fields"])))
    if c.get("recurring"):
        lines.append(("recurring", "yes: estimate one round at a time (--round)"))
    if c["trust_model"] == "central":
        left = max(0.0, round(c["budget"] - c["epsilon_spent"], 12))
        lines.append(("ε budget", f"{_eps(c['budget'])}: {_eps(c['epsilon_spent'])} spent, {_eps(left)} left"))
        lines.append(("adjacency", c.get("adjacency") or ""))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key:<{width}}  {value}")
    return 0


def _close(args: argparse.Namespace) -> int:
    config = _analyst(args).close_campaign(args.id)
    print(f"campaign {config['id']} is {config['status']}: later reports are refused")
    return 0


def _local_listing(args: argparse.Namespace) -> int:
    """``deniable campaigns --data-dir DIR`` (the old, local form): list what the data dir stores."""
    from deniable.aggregator.commands import campaigns_command

    print("note: --data-dir reads the server's data dir directly (now `deniable admin campaigns`); "
          "`deniable campaigns list` asks a running aggregator", file=sys.stderr)  # fmt: skip
    return int(campaigns_command(args))


# -- estimate and timeline ---------------------------------------------------------------------------


def _survey_table(records: Records) -> str:
    """A survey's estimate: one block per question (a mean table for a number, else the category table)."""
    first = records[0]
    blocks = []
    for qid in dict.fromkeys(row["question_id"] for row in records):
        mine = records.where(question_id=qid)
        top = mine[0]
        head = f"{qid} ({top['kind']}): {top['question']}"
        model = f"{top['trust_model']}, {top['mechanism']}, ε = {_eps(top['epsilon'])}"
        if top["kind"] == "number":
            level = f"{top['level'] * 100:g}%"
            rows = [[
                "all" if row["group"] is None else row["group"], _num(row["estimate"], 2), _num(row["stderr"], 2),
                "" if row["ci_low"] is None else f"{_num(row['ci_low'], 2)} to {_num(row['ci_high'], 2)}",
                "" if row["n"] is None else f"{row['n']:,}",
            ] for row in mine]  # fmt: skip
            table = render_table(["GROUP", "MEAN", "± SE", f"{level} CI", "N"], rows, right=(1, 2, 3, 4))
        else:
            table = _estimate_table(mine, header=False)
            if top["kind"] == "multi":
                table = table.replace("CATEGORY", "OPTION  ", 1)
        blocks.append(f"{head}\n{model}\n{table}")
    title = f"{first['campaign_id']}" + (f" (round {first['round']})" if first.get("round") else "")
    return title + "\n\n" + "\n\n".join(blocks)


def _estimate_table(records: Records, *, header: bool = True) -> str:
    if header and len(records) and records[0].get("question_id") is not None:
        return _survey_table(records)
    by_key: dict[tuple[Any, Any], dict[str, dict[str, Any]]] = {}
    for row in records:
        by_key.setdefault((row["group"], row["category"]), {})[row["statistic"]] = row
    if not by_key:
        return "no estimate"
    first = records[0]
    level = f"{first['level'] * 100:g}%"
    headers = ["GROUP", "CATEGORY", "COUNT", "± SE", f"{level} CI", "SHARE", f"{level} CI", "N"]
    rows = []
    for (group, category), stats in by_key.items():
        count, share = stats.get("count", {}), stats.get("proportion", {})

        def interval(row: dict[str, Any], digits: int) -> str:
            if row.get("ci_low") is None:
                return ""
            return f"{_num(row['ci_low'], digits)} to {_num(row['ci_high'], digits)}"

        share_text = "" if share.get("estimate") is None else f"{share['estimate'] * 100:.1f}%"
        share_ci = (
            "" if share.get("ci_low") is None else f"{share['ci_low'] * 100:.1f}% to {share['ci_high'] * 100:.1f}%"
        )
        n = count.get("n")
        rows.append([
            "all" if group is None else group, category, _num(count.get("estimate")), _num(count.get("stderr")),
            interval(count, 1), share_text, share_ci, "" if n is None else f"{n:,}",
        ])  # fmt: skip
    head = f"{first['campaign_id']}: {first['question']}"
    if first.get("round"):
        head += f" (round {first['round']})"
    model = f"{first['trust_model']}, {first['mechanism']}, ε = {_eps(first['epsilon'])}"
    table = render_table(headers, rows, right=(2, 3, 4, 5, 6, 7))
    if header:
        table = f"{head}\n{model}\n" + table
    outside = [
        stats["count"] for stats in by_key.values()
        if "count" in stats and _outside(stats["count"].get("estimate"), stats["count"].get("n"))
    ]  # fmt: skip
    if outside:  # said next to the numbers, as the API's body says it (local reports' noise or central noise)
        table += f"\nnote: {plural(len(outside), 'count')} outside [0, n]: {UNBIASED_NOTE}"
    return table


def _outside(count: Any, n: Any) -> bool:
    """Whether an unbiased count left [0, n] (possible, and expected at tiny n); below 0 is outside even
    where a central campaign keeps n private (add-remove: n is None)."""
    if not isinstance(count, int | float):
        return False
    return count < 0 or (isinstance(n, int) and count > n)


def _estimate(args: argparse.Namespace) -> int:
    records = _analyst(args).estimates(args.campaign, group_by=args.group_by, round=args.round, level=args.level,
                                       question=args.question)  # fmt: skip
    _emit(records, args.format, _estimate_table)
    return 0


def _timeline_table(records: Records) -> str:
    if not len(records):
        return "no reports yet"
    unit = records[0]["bucket"]
    width = 16 if unit == "hour" else 10
    rows = [[r["start"][:width].replace("T", " "), f"{r['reports']:,}"] for r in records]
    total = sum(r["reports"] for r in records)
    table = render_table([f"{unit.upper()} (UTC)", "REPORTS"], rows, right=(1,))
    return f"{table}\n{plural(total, 'report')} in {plural(len(records), unit)}"


def _timeline(args: argparse.Namespace) -> int:
    records = _analyst(args).timeline(args.campaign, bucket=args.bucket, round=args.round)
    _emit(records, args.format, _timeline_table)
    return 0


# -- registration ------------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    """Add ``campaigns``, ``estimate`` and ``timeline`` to the ``deniable`` parser."""
    campaigns = subparsers.add_parser(
        "campaigns",
        help="create, list, show and close campaigns of a running aggregator (over HTTP)",
        description="Campaigns of a running aggregator, over HTTP with the analyst token (create and close: "
        "the admin token). The token comes from DENIABLE_TOKEN or --token-file, never the command line. "
        "`deniable admin campaigns --data-dir DIR` reads a data dir on the server's disk instead.",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    campaigns.add_argument(
        "--data-dir", type=Path, default=None, help="old form: list the campaigns stored in this data dir"
    )
    campaigns.set_defaults(func=lambda args: _local_listing(args) if args.data_dir else _usage(campaigns))
    sub = campaigns.add_subparsers(dest="action", metavar="ACTION")

    create = sub.add_parser(
        "create",
        help="create a campaign (admin token)",
        description="Create a campaign and its key pair; devices then fetch its public config. Give the "
        "fields as flags, or as a JSON object in --from-file (flags win).",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    create.add_argument("id", help="the campaign's id: a slug of a-z, 0-9 and -, never reused")
    create.add_argument("--question", help="the question devices show")
    create.add_argument("--categories", help="the answers, comma-separated, e.g. no,yes")
    create.add_argument("--epsilon", type=float, help="ε of each device's answer (central: of each release)")
    create.add_argument("--mechanism", help="binary-rr, grr, oue, olh or none (server default: auto)")
    create.add_argument("--trust-model", choices=("local", "central"), help="server default: local")
    create.add_argument("--budget", type=float, help="central only: the campaign's total ε")
    create.add_argument("--adjacency", choices=("add-remove", "replace"), help="central only")
    create.add_argument("--group-field", action="append", metavar="FIELD", help="a public group field (repeat)")
    create.add_argument(
        "--group-values", action="append", metavar="FIELD=a,b", help="a group field's declared values (repeat)"
    )
    create.add_argument("--recurring", action="store_true", help="local only: collect in rounds")
    create.add_argument("--from-file", type=Path, help="a JSON campaign descriptor to start from")
    _format_arg(create, ("table", "json"))
    _connection_args(create)
    create.set_defaults(func=_guarded(_create))

    listing = sub.add_parser(
        "list", help="list campaigns, oldest first", description="List campaigns with their counters, "
        "a page at a time.", formatter_class=_Formatter, allow_abbrev=False,
    )  # fmt: skip
    listing.add_argument("--status", choices=CAMPAIGN_STATUSES, help="only open or only closed ones")
    listing.add_argument("--limit", type=_bounded(1, CAMPAIGN_PAGE_MAX), default=CAMPAIGN_PAGE_DEFAULT,
                         help="campaigns per page")  # fmt: skip
    listing.add_argument("--offset", type=_bounded(0, 2**53), default=0, help="where the page starts")
    listing.add_argument("--all", action="store_true", help="every page, one after the other")
    _format_arg(listing)
    _connection_args(listing)
    listing.set_defaults(func=_guarded(_list))

    show = sub.add_parser("show", help="one campaign and its counters", formatter_class=_Formatter, allow_abbrev=False)
    show.add_argument("id", help="the campaign's id")
    _format_arg(show, ("table", "json"))
    _connection_args(show)
    show.set_defaults(func=_guarded(_show))

    close = sub.add_parser("close", help="close a campaign: later reports are refused (admin token)",
                           formatter_class=_Formatter, allow_abbrev=False)  # fmt: skip
    close.add_argument("id", help="the campaign's id")
    _connection_args(close)
    close.set_defaults(func=_guarded(_close))

    estimate = subparsers.add_parser(
        "estimate",
        help="a campaign's estimates with standard errors and intervals (over HTTP)",
        description="Per question, group and category (or option) the estimated count and share with standard "
        "error and interval; per number question the mean. "
        "Local campaigns: free to read. Central campaigns: the stored release is free, the first release "
        "of a grouping spends ε from the budget.",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    estimate.add_argument("campaign", help="the campaign's id")
    estimate.add_argument("--question", metavar="Q", help="surveys: only this question (its id); default: every "
                          "question")
    estimate.add_argument("--group-by", metavar="FIELD", help="estimate each value of this group field")
    estimate.add_argument("--round", help="recurring campaigns: the round to estimate")
    estimate.add_argument("--level", type=float, default=0.95, help="the intervals' coverage")
    _format_arg(estimate)
    _connection_args(estimate)
    estimate.set_defaults(func=_guarded(_estimate))

    timeline = subparsers.add_parser(
        "timeline",
        help="accepted reports per hour or day (over HTTP)",
        description="Accepted reports per UTC hour or day, from the first with reports to the last. Central "
        "campaigns: admin token only (the counts are of participants).",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    timeline.add_argument("campaign", help="the campaign's id")
    timeline.add_argument("--bucket", choices=TIMELINE_BUCKETS, default="day", help="bucket width")
    timeline.add_argument("--round", help="recurring campaigns: one round only (default: every report)")
    _format_arg(timeline)
    _connection_args(timeline)
    timeline.set_defaults(func=_guarded(_timeline))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value

    return parse
