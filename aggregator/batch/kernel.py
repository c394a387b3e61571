"""The per-partition kernel: one Arrow table of exported reports → partial tallies per cell.

Plain numpy and pyarrow over one partition, with no Dask in it, so that any engine that hands a worker an
Arrow table can run it: Dask here (:mod:`.run`), Spark through ``DataFrame.mapInArrow`` (each
``RecordBatch`` iterator to :func:`tally_table`, then sum the partials), or a plain loop. Partial tallies
are additive: the tally of a union of partitions is the sum of their tallies, ``Tally(n, S)`` with
``n`` reports and ``S_v`` of them supporting category v, the sufficient statistic of every estimate.

A *cell* is one combination of values of the ``by`` columns (group fields, ``round`` or ``day``); a
*filter* keeps the rows whose public fields satisfy every condition. Neither looks at the randomized
report, so filtering and grouping stay post-processing of ε-LDP reports.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deniable.aggregator.batch.columns import to_simulated
from deniable.aggregator.batch.export import group_column
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import OLHReports
from deniable.shared.mechanisms.estimate import Tally

__all__ = ["OPERATORS", "Condition", "Partial", "Plan", "merge", "subset", "tally_table"]

#: Filter operators on public fields.
OPERATORS = ("=", "!=", ">=", "<=", ">", "<")

#: A cell key: one value per ``by`` column (``None`` where a device sent no value for that group field).
Cell = tuple[str | None, ...]

#: Partial tallies: cell → its ``Tally`` (additive: the tally of a union of partitions is the sum).
Partial = dict[Cell, Tally]


@dataclass(frozen=True, slots=True)
class Condition:
    """``column op value`` on a public column (a group field, ``round`` or ``day``)."""

    column: str
    op: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What to compute over every partition: the descriptor, the cells and the filters."""

    descriptor: Mapping[str, Any]
    by: tuple[str, ...] = ()
    where: tuple[Condition, ...] = ()
    check: bool = True  # also the service's own tallies (per round: overall and per group field)
    cross: tuple[str, ...] = ()  # two choice questions of a survey to cross-tabulate per cell

    def config(self) -> CampaignConfig:
        return CampaignConfig.from_json(dict(self.descriptor))


def public_column(config: CampaignConfig, name: str) -> str:
    """The Parquet column of a public field name (``round``, ``day`` or a group field)."""
    if name in ("round", "day"):
        return name
    if name in config.group_fields:
        return group_column(name)
    known = ", ".join(["round", "day", *config.group_fields])
    raise InvalidParameter(f"{name!r} is not a public field of campaign {config.id!r}; use one of: {known}")


def _mask(table: pa.Table, config: CampaignConfig, where: Sequence[Condition]) -> pa.ChunkedArray | None:
    functions = {"=": pc.equal, "!=": pc.not_equal, ">=": pc.greater_equal, "<=": pc.less_equal,
                 ">": pc.greater, "<": pc.less}
    mask = None
    for cond in where:
        column = table.column(public_column(config, cond.column))
        value: Any = dt.date.fromisoformat(cond.value) if cond.column == "day" else cond.value
        test = pc.fill_null(functions[cond.op](column, pa.scalar(value, column.type)), False)
        mask = test if mask is None else pc.and_(mask, test)
    return mask


def subset(simulated: Any, index: np.ndarray) -> Any:
    """Rows ``index`` of a mechanism's vectorized reports (:meth:`simulate` output)."""
    if isinstance(simulated, OLHReports):
        return OLHReports(simulated.seeds[index], simulated.y[index])
    return simulated[index]


def _codes(column: pa.ChunkedArray | pa.Array) -> tuple[list[str | None], np.ndarray]:
    """Dictionary codes of a string column: its distinct values (``None`` last, for nulls) and per-row codes."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    encoded = pc.dictionary_encode(array.cast(pa.string()))
    labels: list[str | None] = [*encoded.dictionary.to_pylist(), None]
    codes = pc.fill_null(encoded.indices, len(labels) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
    return labels, codes


def _groups(n: int, keys: Sequence[pa.ChunkedArray]) -> Iterator[tuple[Cell, np.ndarray]]:
    """Every cell of the ``keys`` columns (one value per row each) present in the n rows, with its rows."""
    if n == 0:
        return
    combined = np.zeros(n, dtype=np.int64)
    per_column = []
    for column in keys:
        labels, codes = _codes(column)
        per_column.append(labels)
        combined = combined * len(labels) + codes
    # The combined codes are below the product of the columns' domain sizes (bounded): compact them with
    # a bincount and group rows with a stable argsort of small integers (a radix sort): O(n), no comparison sort.
    present = np.bincount(combined)
    cell_codes = np.flatnonzero(present)
    compact = np.cumsum(present > 0) - 1
    codes = compact[combined].astype(np.uint16 if len(cell_codes) <= 1 << 16 else np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(present[cell_codes])))
    for c, code in enumerate(cell_codes.tolist()):
        parts: list[str | None] = []
        for labels in reversed(per_column):
            code, rest = divmod(code, len(labels))
            parts.append(labels[rest])
        yield tuple(reversed(parts)), order[bounds[c] : bounds[c + 1]]


def _add(out: dict[Cell, Any], cell: Cell, value: Any) -> None:
    out[cell] = out[cell] + value if cell in out else value


def _tallies(
    table: pa.Table, plan: Plan, config: CampaignConfig, tally: Callable[[np.ndarray], Any]
) -> tuple[dict[str, Any], list[tuple[Cell, np.ndarray]]]:
    """The ``check`` and ``cells`` of :func:`tally_table`, ``tally(rows)`` the tally of a set of rows of the
    partition (increasing indices), and the plan's cells with their rows (a survey's cross sums take them)."""

    def cells_of(rows: np.ndarray, keys: Sequence[str]) -> list[tuple[Cell, np.ndarray]]:
        """Every cell of the ``keys`` columns present in ``rows``, with its rows (of the partition)."""
        whole = rows.size == table.num_rows  # then rows is every row, in order
        columns = [table.column(k) if whole else table.column(k).take(pa.array(rows)) for k in keys]
        return [(cell, rows[index]) for cell, index in _groups(rows.size, columns)]

    result: dict[str, Any] = {}
    every = np.arange(table.num_rows)
    if plan.check:
        check: Partial = {(round_, "", ""): tally(rows) for (round_,), rows in cells_of(every, ["round"])}
        for f in config.group_fields:
            column = table.column(group_column(f))
            present = every if column.null_count == 0 else np.flatnonzero(
                pc.is_valid(column).to_numpy(zero_copy_only=False))
            for (round_, value), rows in cells_of(present, ["round", group_column(f)]):
                check[(round_, f, value)] = tally(rows)
        result["check"] = check
    mask = _mask(table, config, plan.where)
    selected = every if mask is None else np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    cells = cells_of(selected, [public_column(config, name) for name in plan.by])
    result["cells"] = {cell: tally(rows) for cell, rows in cells}
    return result, cells


def tally_table(table: pa.Table, plan: Plan) -> dict[str, Partial]:
    """Partial tallies of one partition: ``{"cells": ...}`` for the plan's ``by``/``where``, and, when
    ``plan.check``, ``{"check": ...}`` keyed ``(round, group_field, group_value)`` like the service's.

    A survey's tallies are its tally vectors (:mod:`.survey_columns`); with ``plan.cross``, ``{"cross": ...}``
    holds per cell the additive :class:`~.survey.CrossSums` of the two questions.

    The partition's reports are decoded once; every cell and filter takes rows of them."""
    config = plan.config()
    if not config.is_survey:
        mechanism = config.build_mechanism()
        simulated = to_simulated(mechanism, table)
        return _tallies(table, plan, config, lambda rows: mechanism.tally(subset(simulated, rows)))[0]
    from deniable.aggregator.batch import survey_columns as survey

    decoded = survey.decode(config, table)
    result, cells = _tallies(table, plan, config, lambda rows: survey.survey_tally(config, decoded, rows))
    if plan.cross:
        first, second = survey.cross_questions(config, plan.cross, plan.by, plan.where)
        ids = [q.id for q in config.questions]
        pair = (ids.index(first.id), ids.index(second.id))
        result["cross"] = {cell: survey.cross_sums(decoded, pair, rows) for cell, rows in cells}
    return result


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sum of partial results (cell by cell: tallies, or the cross sums of a survey)."""
    total: dict[str, Any] = {}
    for part in parts:
        for name, partial in part.items():
            into = total.setdefault(name, {})
            for cell, value in partial.items():
                _add(into, cell, value)
    return total
