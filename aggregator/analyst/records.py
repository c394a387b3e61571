"""Tidy records: one row per observation, one column per variable, the shape pandas, R and a CSV want.

An estimate body of the API becomes one row per (question, group, category, statistic) with its estimate,
standard error, interval and n (:func:`estimate_rows`), so that a campaign with several questions later adds
rows, never columns. A timeline becomes one row per bucket (:func:`timeline_rows`). :class:`Records` holds
rows with a fixed column order and writes them as CSV or JSON, or hands them to pandas when it is installed
(an optional extra: ``pip install 'deniable[pandas]'``); nothing here needs more than the standard library.

Numbers are written exactly: CSV cells use ``repr`` of the float (the shortest string that reads back as the
same double), so a CSV read back equals the API's JSON to the last bit. A missing value (a proportion at
n = 0, the noisy n of a central release under add/remove) is an empty CSV cell, ``null`` in JSON and NaN
or None in pandas.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from deniable.shared.errors import DeniableError, InvalidParameter

__all__ = [
    "ESTIMATE_COLUMNS",
    "RELEASE_COLUMNS",
    "STATISTICS",
    "TIMELINE_COLUMNS",
    "Records",
    "estimate_rows",
    "timeline_rows",
]

#: The columns of an estimate table, in order.
ESTIMATE_COLUMNS: tuple[str, ...] = (
    "campaign_id",
    "question",
    "question_id",
    "kind",
    "round",
    "group_by",
    "group",
    "category",
    "statistic",
    "estimate",
    "stderr",
    "ci_low",
    "ci_high",
    "level",
    "n",
    "trust_model",
    "mechanism",
    "epsilon",
)

#: Statistics of a category or option: its estimated count of respondents and that count's share of n; of
#: a number question: the mean.
STATISTICS: tuple[str, ...] = ("count", "proportion", "mean")

#: The columns of a release log table (``parameters`` and ``cost`` are objects: JSON in a CSV cell).
RELEASE_COLUMNS: tuple[str, ...] = (
    "campaign_id", "seq", "released_at", "role", "epsilon", "release_key", "parameters", "cost",
)  # fmt: skip

#: The columns of a timeline table.
TIMELINE_COLUMNS: tuple[str, ...] = ("campaign_id", "round", "bucket", "start", "reports")


class Records(Sequence[dict[str, Any]]):
    """Rows (dicts) with a fixed column order; a read-only sequence with CSV, JSON and pandas exports."""

    def __init__(self, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
        self.columns: tuple[str, ...] = tuple(columns)
        self._rows = [{column: row.get(column) for column in self.columns} for row in rows]

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Records: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Records:
        if isinstance(index, slice):
            return Records(self.columns, self._rows[index])
        return dict(self._rows[index])

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(row) for row in self._rows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Records):
            return NotImplemented
        return self.columns == other.columns and self._rows == other._rows

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Records({len(self)} rows × {len(self.columns)} columns: {', '.join(self.columns)})"

    def where(self, **equal: Any) -> Records:
        """The rows whose columns equal the given values, e.g. ``where(statistic="count", group="ios")``."""
        unknown = sorted(set(equal) - set(self.columns))
        if unknown:
            raise InvalidParameter(f"no such column {unknown[0]!r}; the columns are {', '.join(self.columns)}")
        return Records(self.columns, (r for r in self._rows if all(r[c] == v for c, v in equal.items())))

    # -- exports ---------------------------------------------------------------------------------

    def to_csv(self, path: str | Path | None = None) -> str:
        """The rows as CSV (a header, then one line per row, ``\\r\\n`` line ends as RFC 4180 has them);
        also written to ``path`` when given. Returns the text."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(self.columns)
        for row in self._rows:
            writer.writerow([_cell(row[column]) for column in self.columns])
        text = out.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8", newline="")
        return text

    def to_json(self, path: str | Path | None = None, *, indent: int | None = None) -> str:
        """The rows as a JSON array of objects (columns in order); also written to ``path`` when given."""
        text = json.dumps(self._rows, indent=indent, ensure_ascii=False, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    def to_records(self) -> list[dict[str, Any]]:
        """The rows as a list of new dicts."""
        return list(self)

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` of the rows, with the columns in order (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError:
            raise DeniableError(
                "to_pandas() needs pandas, which deniable does not install by default: "
                "pip install 'deniable[pandas]' (or use to_csv()/to_json()/to_records())"
            ) from None
        return pd.DataFrame.from_records(self._rows, columns=list(self.columns))

    @classmethod
    def from_csv(cls, text: str) -> Records:
        """Rows read back from :meth:`to_csv` output (every cell a string; empty cells None)."""
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if header is None:
            raise InvalidParameter("the CSV text is empty: it has no header line")
        return cls(
            header, ({c: (v if v != "" else None) for c, v in zip(header, line, strict=True)} for line in reader)
        )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _category_rows(body: Mapping[str, Any], base: Mapping[str, Any], level: float) -> Iterator[dict[str, Any]]:
    """The count and proportion rows of each category (or option) of one (ungrouped or per-group) estimate
    body; the mean row of a number question."""
    n = body.get("n")
    mean = body.get("mean")
    if isinstance(mean, Mapping):
        ci = mean.get("ci") or [None, None]
        yield {**base, "category": None, "level": level, "n": n, "statistic": "mean", "estimate": mean.get("mean"),
               "stderr": mean.get("stderr"), "ci_low": ci[0], "ci_high": ci[1]}  # fmt: skip
        return
    for row in [*body.get("categories", ()), *body.get("options", ())]:
        label = row["category"] if "category" in row else row.get("option")
        common = {**base, "category": label, "level": level, "n": n}
        yield {
            **common,
            "statistic": "count",
            "estimate": row.get("count"),
            "stderr": row.get("stderr"),
            "ci_low": (row.get("ci") or [None, None])[0],
            "ci_high": (row.get("ci") or [None, None])[1],
        }
        yield {
            **common,
            "statistic": "proportion",
            "estimate": row.get("proportion"),
            "stderr": row.get("proportion_stderr"),
            "ci_low": (row.get("proportion_ci") or [None, None])[0],
            "ci_high": (row.get("proportion_ci") or [None, None])[1],
        }


def estimate_rows(body: Mapping[str, Any], *, question: str | None = None) -> Records:
    """Tidy rows of an estimate body of ``GET /api/v1/campaigns/<id>/estimate`` (local or central, overall
    or grouped): per group (``group`` is None overall) and category, a ``count`` row and a ``proportion`` row.

    ``question`` is the campaign's question text (a one-question body does not repeat it). A survey's body
    gives every question its rows: ``question`` its text, ``question_id`` and ``kind``; per category
    (choice) or option (multi, in ``category``) a count and a proportion row; per number question one
    ``mean`` row (``category`` empty) in the range's units.
    """
    level = body.get("level", 0.95)
    base = {
        "campaign_id": body.get("campaign_id"),
        "question": question,
        "round": body.get("round"),
        "group_by": body.get("group_by"),
        "trust_model": body.get("trust_model"),
        "epsilon": body.get("epsilon"),
    }
    groups = body.get("groups")
    rows: list[dict[str, Any]] = []
    if _is_survey(body):
        for value, group in (groups.items() if isinstance(groups, Mapping) else [(None, body)]):
            for answer in group.get("questions", ()):
                mechanism = answer.get("mechanism", answer.get("noise", body.get("noise")))
                rows += _category_rows(answer, {
                    **base, "question": answer.get("text"), "question_id": answer.get("question"),
                    "kind": answer.get("kind"), "group": value, "mechanism": mechanism,
                    "epsilon": answer.get("epsilon"), "trust_model": body.get("trust_model"),
                }, answer.get("level", level))  # fmt: skip
        return Records(ESTIMATE_COLUMNS, rows)
    if isinstance(groups, Mapping):
        for value, group in groups.items():
            mechanism = group.get("mechanism", body.get("mechanism", body.get("noise")))
            rows += _category_rows(group, {**base, "group": value, "mechanism": mechanism}, level)
    else:
        mechanism = body.get("mechanism", body.get("noise"))
        rows += _category_rows(body, {**base, "group": None, "mechanism": mechanism}, level)
    return Records(ESTIMATE_COLUMNS, rows)


def _is_survey(body: Mapping[str, Any]) -> bool:
    """Whether an estimate body is a survey's (its questions listed, overall or per group)."""
    if "questions" in body:
        return True
    groups = body.get("groups")
    return isinstance(groups, Mapping) and any(isinstance(g, Mapping) and "questions" in g for g in groups.values())


def timeline_rows(body: Mapping[str, Any]) -> Records:
    """Tidy rows of a timeline body of ``GET /api/v1/campaigns/<id>/timeline``: one per bucket."""
    base = {"campaign_id": body.get("campaign_id"), "round": body.get("round"), "bucket": body.get("bucket")}
    return Records(TIMELINE_COLUMNS, ({**base, **bucket} for bucket in body.get("buckets", ())))
