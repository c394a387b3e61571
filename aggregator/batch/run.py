"""``deniable batch``: recompute tallies and estimates from an export on a Dask cluster, and check them.

The driver maps :func:`tally_file` over the export's Parquet files (one task per file, on a
``dask.distributed`` cluster: a :class:`~dask.distributed.LocalCluster` of processes by default, or any
scheduler by address), sums the partial tallies (:func:`.kernel.merge`) and turns each cell's
``Tally(n, S)`` into the mechanism's unbiased estimate with its standard error and interval.

Checks: without filters, the recount of every (round, group field, group value) must equal the tally the
service stored for the same reports (read in the export's snapshot); a mismatch is reported and makes the
command fail. With ``url``, the service's live overall estimate is compared too, when it still covers the
same reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from deniable.aggregator.batch.export import read_manifest
from deniable.aggregator.batch.kernel import OPERATORS, Condition, Partial, Plan, merge, public_column, tally_table
from deniable.aggregator.batch.survey_columns import cross_estimate, cross_questions
from deniable.aggregator.survey_estimates import local_question_estimates
from deniable.aggregator.survey_tally import layout, width
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import Tally

__all__ = [
    "PRIVACY_NOTE",
    "BatchResult",
    "close_client",
    "local_client",
    "local_cluster",
    "parse_condition",
    "run_batch",
]

PRIVACY_NOTE = (
    "post-processing of ε-LDP reports: every device randomized its answer before it left the device, so "
    "this analysis, its filters and its cross-tabulations spend no privacy budget"
)


@dataclass
class BatchResult:
    """The recomputed cells with their estimates, and the outcome of the checks."""

    campaign_id: str
    mechanism: str
    epsilon: float
    by: tuple[str, ...]
    where: tuple[Condition, ...]
    n_reports: int
    files: int
    workers: int
    cells: list[dict[str, Any]]
    cross: list[dict[str, Any]] = field(default_factory=list)
    check_mismatches: list[str] = field(default_factory=list)
    checked: int = 0
    live: str | None = None

    @property
    def ok(self) -> bool:
        return not self.check_mismatches

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "privacy": PRIVACY_NOTE,
            "by": list(self.by),
            "where": [f"{c.column}{c.op}{c.value}" for c in self.where],
            "n_reports": self.n_reports,
            "files": self.files,
            "workers": self.workers,
            "check": {"tallies_compared": self.checked, "mismatches": self.check_mismatches, "live": self.live},
            "cells": self.cells,
            **({"cross": self.cross} if self.cross else {}),
        }


def parse_condition(text: str) -> Condition:
    """``field=value``, ``day>=2026-11-01``, ``round!=w1``... (operators: = != >= <= > <)."""
    for op in sorted(OPERATORS, key=len, reverse=True):
        column, sep, value = text.partition(op)
        if sep and column and value:
            return Condition(column.strip(), op, value.strip())
    raise InvalidParameter(
        f"--where must look like FIELD=VALUE or FIELD>=VALUE (operators {' '.join(OPERATORS)}), got {text!r}"
    )


def tally_file(path: str, plan: Plan) -> dict[str, Partial]:
    """Run the kernel over one Parquet file (the Dask task)."""
    return tally_table(pq.read_table(path), plan)


def local_client(workers: int | None = None) -> Any:
    """A ``dask.distributed`` client of a new local cluster: ``workers`` processes (default one per core),
    one thread each, bound to 127.0.0.1 on free ports (its HTTP endpoints too, so that two clusters on one
    machine never collide on the default 8787). Close it with :func:`close_client` (or use :func:`local_cluster`)."""
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers or os.cpu_count() or 1,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
    )
    return Client(cluster)  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def local_cluster(workers: int | None = None) -> Iterator[Any]:
    """:func:`local_client` for the duration of a ``with`` block, closed with its cluster on exit."""
    client = local_client(workers)
    try:
        yield client
    finally:
        close_client(client)


def close_client(client: Any) -> None:
    """Close a ``dask.distributed`` client and, when it started one (:func:`local_client`), its cluster."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def _client(scheduler: str | None, workers: int | None) -> Any:
    from dask.distributed import Client

    if scheduler:
        return Client(scheduler)  # type: ignore[no-untyped-call]
    return local_client(workers)


def _sorted(cells: Any) -> list[Any]:
    return sorted(cells, key=lambda c: tuple("" if v is None else v for v in c))


def _estimate_rows(config: Any, cells: Partial, by: Sequence[str], level: float) -> list[dict[str, Any]]:
    rows = []
    if config.is_survey:  # the service's own estimates of every question, from the same tally vectors
        for cell in _sorted(cells):
            questions = local_question_estimates(config, layout(config), cells[cell], level)
            rows.append({"cell": dict(zip(by, cell, strict=True)), "n": cells[cell].n, "questions": questions})
        return rows
    mechanism = config.build_mechanism()
    for cell in _sorted(cells):
        estimate = mechanism.estimate_tally(cells[cell])
        rows.append({"cell": dict(zip(by, cell, strict=True)), **estimate.to_dict(level, list(config.categories))})
    return rows


def _check(manifest: dict[str, Any], recount: Partial, k: int) -> tuple[int, list[str]]:
    stored: Partial = {
        (t["round"], t["group_field"], t["group_value"]): Tally(t["n"], tuple(t["support"]))
        for t in manifest["tallies"]
    }
    mismatches = []
    for key in sorted(set(stored) | set(recount)):
        a = stored.get(key, Tally.zero(k))
        b = recount.get(key, Tally.zero(k))
        if a != b:
            where = "/".join(x or "overall" for x in key if x is not None) or "overall"
            mismatches.append(
                f"{where}: service n={a.n} support={list(a.support)}, recount n={b.n} support={list(b.support)}"
            )
    return len(stored), mismatches


def _live_check(url: str, token: str | None, campaign_id: str, n: int, counts: list[float] | None,
                questions: list[dict[str, Any]] | None = None) -> str:
    """The service's live overall estimate against the recount: its counts (one question), or every
    question's estimate body (a survey: the same estimator on the same tally vector, so equal exactly)."""
    if not url.startswith(("http://", "https://")):
        raise InvalidParameter(f"--url must be an http:// or https:// address of the aggregator, got {url!r}")
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        f"{url.rstrip('/')}/api/v1/campaigns/{campaign_id}/estimate",
        headers={"Authorization": f"Bearer {token}"} if token else {},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        body = json.loads(response.read())
    if body.get("n") != n:
        return f"not compared: the service now has {body.get('n')} reports, the export {n}"
    if questions is not None:
        served = body.get("questions", [])
        differ = [q["question"] for q, theirs in zip(questions, served, strict=False) if q != theirs]
        if differ or len(served) != len(questions):
            which = ", ".join(differ) or "its questions"
            return f"MISMATCH: the service's estimates of {which} differ from the recount"
        return f"equal: the service's estimates of all {len(questions)} questions over the same {n} reports"
    served_counts = [row["count"] for row in body["categories"]]
    close = counts is not None and all(
        abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in zip(served_counts, counts, strict=True)
    )
    if not close:
        return f"MISMATCH: the service serves counts {served_counts}, the recount gives {counts}"
    return f"equal: the service's estimate over the same {n} reports"


def run_batch(
    directory: Path,
    *,
    by: Sequence[str] = (),
    where: Sequence[Condition] = (),
    scheduler: str | None = None,
    workers: int | None = None,
    level: float = 0.95,
    url: str | None = None,
    token: str | None = None,
    client: Any = None,
    cross: Sequence[str] = (),
) -> BatchResult:
    """Recompute the export's tallies on Dask; estimates per cell of ``by`` over the rows kept by ``where``.

    ``client``: an existing ``dask.distributed.Client`` (else one is made and closed here). ``cross``: two
    choice questions of a survey (per_question split) to cross-tabulate in every cell.
    """
    manifest, config = read_manifest(directory)
    if cross:
        cross_questions(config, cross, by, where)  # refused before any cluster starts
    for name in [*by, *(c.column for c in where)]:
        public_column(config, name)
    if len(set(by)) != len(by):
        raise InvalidParameter(f"--by names a field twice: {', '.join(by)}")
    plan = Plan(descriptor=config.to_json(), by=tuple(by), where=tuple(where), check=not where, cross=tuple(cross))
    paths = [str(directory / name) for name in manifest["files"]]
    own = client is None
    if own:
        client = _client(scheduler, workers)
    try:
        n_workers = len(client.scheduler_info().get("workers", {}))
        parts = client.gather(client.map(tally_file, paths, plan=plan, pure=False)) if paths else []
    finally:
        if own:
            close_client(client)
    total = merge(parts)
    cells = total.get("cells", {})
    result = BatchResult(
        campaign_id=manifest["campaign_id"],
        mechanism=manifest["mechanism"],
        epsilon=config.epsilon,
        by=tuple(by),
        where=tuple(where),
        n_reports=manifest["n_reports"],
        files=len(paths),
        workers=n_workers,
        cells=_estimate_rows(config, cells, by, level),
    )
    if cross:
        first, second = cross_questions(config, cross, by, where)
        result.cross = [{"cell": dict(zip(by, cell, strict=True)),
                         **cross_estimate(first, second, total["cross"][cell], level)}
                        for cell in _sorted(total.get("cross", {}))]  # fmt: skip
    if plan.check:
        result.checked, result.check_mismatches = _check(manifest, total.get("check", {}), width(config))
        if url and not by and not config.recurring and result.cells:
            overall = result.cells[0]
            if config.is_survey:
                result.live = _live_check(url, token, config.id, overall["n"], None, overall["questions"])
            else:
                counts = [row["count"] for row in overall["categories"]]
                result.live = _live_check(url, token, config.id, overall["n"], counts)
            if result.live.startswith("MISMATCH"):
                result.check_mismatches.append(f"live service: {result.live}")
    return result
