"""``deniable plan``: the predicted standard error of every estimate of a draft survey under each ε split.

Runs on a device-only install (the planner is plain arithmetic in :mod:`deniable.shared.planner`), so a
survey designer can see what one more question costs before anything is deployed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``plan`` to the ``deniable`` parser."""
    plan = subparsers.add_parser(
        "plan",
        help="predict every estimate's standard error of a draft survey under each ε split",
        description="For a draft survey (questions, ε, expected respondents) print the predicted standard "
        "error of every question's estimate when ε is split across the questions (each respondent answers "
        "all) and when each respondent answers one question drawn at random with the whole ε, and which "
        "split is better. Questions: KIND:ID:key=value,... e.g. choice:smoke:k=2, multi:apps:k=8,m=3, "
        "number:age:lo=18,hi=99,steps=81 (mechanism=NAME to fix one).",
    )
    plan.add_argument("--epsilon", type=float, required=True, help="the survey's ε per respondent")
    plan.add_argument("--n", type=int, required=True, help="expected number of respondents")
    plan.add_argument("--question", action="append", required=True, metavar="KIND:ID:KEY=VALUE,...",
                      help="one question of the draft; repeat for each")
    plan.add_argument("--shares", default=None,
                      help="comma-separated shares of ε per question for the split (default: equal)")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON instead of a table")
    plan.set_defaults(func=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    """Print the plan; 2 on a bad draft."""
    from deniable.shared.errors import DeniableError
    from deniable.shared.planner import parse_question, plan_survey

    try:
        shares = None if args.shares is None else [float(s) for s in args.shares.split(",")]
        result = plan_survey([parse_question(q) for q in args.question], epsilon=args.epsilon, n=args.n,
                             shares=shares)
    except ValueError as exc:  # DeniableError's parameter errors are ValueErrors too
        prefix = "" if isinstance(exc, DeniableError) else "--shares must be numbers: "
        print(f"deniable plan: {prefix}{exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        print()
        return 0
    header = ("question", "kind", "split", "mechanism", "ε", "respondents", "predicted SE", "inflation")
    rows = [(r.question, r.kind, r.split, r.mechanism, f"{r.epsilon:.4g}", f"{r.respondents:,.0f}",
             f"{r.stderr:.4g}", f"{r.inflation:.2f}×") for r in result.rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"recommended: {result.recommended}: {result.reason}")
    for qid, assumption in result.assumptions.items():
        print(f"  {qid}: SE of its {'mean' if 'range' in assumption else 'proportions'} at {assumption}")
    return 0
