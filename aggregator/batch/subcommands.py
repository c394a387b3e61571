"""The ``export`` and ``batch`` subcommands (need the ``batch`` extra: pyarrow and dask.distributed).

pyarrow and dask are imported when a command runs; on an install without them the CLI answers with the
one line that installs the extra (see :mod:`deniable.aggregator.cli`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

def register(subparsers: Any) -> None:
    """Add ``export`` and ``batch`` to the ``deniable`` parser."""
    from deniable.aggregator.cli import needs
    from deniable.aggregator.commands import _data_dir_arg

    export = subparsers.add_parser(
        "export",
        help=needs("batch") + "write a local campaign's randomized reports as Parquet files",
        description="Write the stored randomized reports of one local campaign, with their public fields, "
        "as Parquet files beside its descriptor and the service's tallies (one consistent snapshot, safe "
        "beside a running server); a survey's questions each in columns of their own. Central campaigns and "
        "central surveys are refused: their stored answers are raw.",
    )
    export.add_argument("campaign", help="campaign id")
    export.add_argument("--to", type=Path, required=True, help="new or empty directory to write")
    _data_dir_arg(export)
    export.add_argument("--rows-per-file", type=int, default=1_000_000, help="reports per Parquet file")
    export.set_defaults(func=export_command, extra="batch")

    batch = subparsers.add_parser(
        "batch",
        help=needs("batch") + "recompute, check and cross-tabulate an export on Dask",
        description="Recompute every tally and estimate of an export on a Dask cluster, check them against "
        "the service's tallies, and estimate per cell of --by (group fields, round, day) over the reports "
        "kept by --where; --cross Q1,Q2 estimates the joint counts of two choice questions of a survey. "
        "Post-processing of ε-LDP reports: no privacy budget is spent.",
    )
    batch.add_argument("directory", type=Path, help="an export directory written by 'deniable export'")
    batch.add_argument("--by", default="", help="comma-separated public fields to cross-tabulate")
    batch.add_argument("--where", action="append", default=[], metavar="COND",
                       help="keep rows with FIELD=VALUE (or != >= <= > <); repeat to combine")
    batch.add_argument("--scheduler", default=os.environ.get("DENIABLE_DASK_SCHEDULER"),
                       help="address of a Dask scheduler (env DENIABLE_DASK_SCHEDULER); default: a local cluster")
    batch.add_argument("--workers", type=int, default=None, help="local cluster workers (default: one per core)")
    batch.add_argument("--cross", default="", metavar="Q1,Q2",
                       help="a survey's two choice questions: estimate their joint counts in every cell")
    batch.add_argument("--level", type=float, default=0.95, help="interval level")
    batch.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    batch.add_argument("--url", default=None,
                       help="also compare with the running service's estimate (token from env DENIABLE_TOKEN)")
    batch.set_defaults(func=batch_command, extra="batch")


def export_command(args: argparse.Namespace) -> int:
    """Export one campaign; print what was written."""
    from deniable.aggregator.batch.export import export_campaign
    from deniable.aggregator.commands import _database, _open_store
    from deniable.shared.errors import DeniableError

    store = _open_store(args.data_dir, _database(args))
    if store is None:
        return 2
    try:
        summary = export_campaign(store, args.campaign, args.to, rows_per_file=args.rows_per_file)
    except DeniableError as exc:
        print(f"deniable export: {exc}", file=sys.stderr)
        return 2
    files = len(summary.files)
    print(f"exported {summary.reports} report{'s' if summary.reports != 1 else ''} of {args.campaign!r} "
          f"in {files} Parquet file{'s' if files != 1 else ''} to {summary.directory}")
    return 0


def batch_command(args: argparse.Namespace) -> int:
    """Run the batch analysis; print the cells; 1 when a check failed."""
    from deniable.aggregator.batch.run import parse_condition, run_batch
    from deniable.shared.errors import DeniableError

    try:
        result = run_batch(
            args.directory,
            by=[f.strip() for f in args.by.split(",") if f.strip()],
            where=[parse_condition(w) for w in args.where],
            scheduler=args.scheduler,
            workers=args.workers,
            level=args.level,
            url=args.url,
            token=os.environ.get("DENIABLE_TOKEN"),
            cross=[q.strip() for q in args.cross.split(",") if q.strip()],
        )
    except DeniableError as exc:
        print(f"deniable batch: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        _print_rows(result, args.format)
    return 0 if result.ok else 1


def _survey_rows(result: Any) -> tuple[list[str], list[list[Any]]]:
    header = [*result.by, "question", "label", "answered", "count", "stderr", "ci_low", "ci_high", "proportion"]
    rows = []
    for cell in result.cells:
        keys = ["" if v is None else v for v in cell["cell"].values()]
        for q in cell["questions"]:
            if q["kind"] == "number":
                mean = q["mean"]
                rows.append([*keys, q["question"], "mean", q["answered"], mean["mean"], mean["stderr"],
                             mean["ci"][0], mean["ci"][1], None])
                continue
            for row in q["options" if q["kind"] == "multi" else "categories"]:
                rows.append([*keys, q["question"], row.get("category", row.get("option")), q["answered"],
                             row["count"], row["stderr"], row["ci"][0], row["ci"][1], row["proportion"]])
    return header, rows


def _cross_rows(result: Any) -> tuple[list[str], list[list[Any]]]:
    first, second = result.cross[0]["questions"]
    header = [*result.by, first, second, "answered_both", "count", "stderr", "ci_low", "ci_high", "proportion"]
    rows = []
    for cell in result.cross:
        keys = ["" if v is None else v for v in cell["cell"].values()]
        for row in cell["cells"]:
            rows.append([*keys, row[first], row[second], cell["answered_both"], row["count"], row["stderr"],
                         row["ci"][0], row["ci"][1], row["proportion"]])
    return header, rows


def _print_table(header: list[str], rows: list[list[Any]], left: int) -> None:
    def show(x: Any) -> str:
        return f"{x:.2f}" if isinstance(x, float) else ("-" if x is None else str(x))

    table = [header] + [[show(x) for x in row] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(c.rjust(w) if i >= left else c.ljust(w) for i, (c, w) in
                        enumerate(zip(r, widths, strict=True))).rstrip())


def _print_rows(result: Any, fmt: str) -> None:
    survey = bool(result.cells) and "questions" in result.cells[0]
    if result.cross:  # the cross-tabulation is what was asked: it is the output (the recount still checks)
        header, rows = _cross_rows(result)
        left = len(result.by) + 2
    elif survey:
        header, rows = _survey_rows(result)
        left = len(result.by) + 2
    else:
        header = [*result.by, "category", "n", "count", "stderr", "ci_low", "ci_high", "proportion"]
        rows = []
        for cell in result.cells:
            for cat in cell["categories"]:
                rows.append([*("" if v is None else v for v in cell["cell"].values()), cat["category"],
                             cell["n"], cat["count"], cat["stderr"], cat["ci"][0], cat["ci"][1], cat["proportion"]])
        left = len(result.by) + 1
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        return
    print(f"# campaign {result.campaign_id}: {result.mechanism}, ε = {result.epsilon:g}, "
          f"{result.n_reports} reports in {result.files} file{'s' if result.files != 1 else ''}, "
          f"{result.workers} worker{'s' if result.workers != 1 else ''}")
    print(f"# {_privacy_note()}")

    if result.cross:
        print("# cross-tabulation: count = Σ φ₁·φ₂ over the respondents who answered both (unbiased: the two "
              "answers are randomized independently); stderr = √(m·sample variance), interval normal")
    _print_table(header, rows, left)
    outside = [cell for cell in result.cells if cell.get("unbiased", {}).get("outside_range")]
    if outside:  # small cells: say next to the numbers why a share can be below 0 or above 1
        cells = f"{len(outside)} cell{'s' if len(outside) != 1 else ''}"
        print(f"# note ({cells} outside [0, n]): {outside[0]['unbiased']['note']}")
    if result.where:
        print("# filtered: the check against the service's tallies runs on unfiltered batches only")
    else:
        status = "equal" if result.ok else "MISMATCH"
        print(f"# check: {result.checked} service tall{'ies' if result.checked != 1 else 'y'} "
              f"recounted, {status}")
        for line in result.check_mismatches:
            print(f"#   {line}")
    if result.live:
        print(f"# live service: {result.live}")


def _privacy_note() -> str:
    from deniable.aggregator.batch.run import PRIVACY_NOTE

    return PRIVACY_NOTE
