"""Surveys (format 3) in an export: one row per report, every question in columns of its own.

Per question ``<id>``, in descriptor order:

* ``q_<id>__state`` (string, never null): ``answered``, ``skipped`` (an optional question the device
  skipped; the aggregator learns that, as it learns a group value) or ``not_drawn`` (the sampling split
  asked this device another question);
* the report in the columns of the question's mechanism, prefixed ``q_<id>__`` and null where the question
  was not answered: a ``choice`` question through its mechanism's ``report_layout`` codec
  (:mod:`.columns`: ``q_<id>__report`` for ``grr``/``binary-rr``/``oue``, ``q_<id>__seed`` and
  ``q_<id>__y`` for ``olh``); a ``number`` question as ``q_<id>__report`` (int64, the mechanism's output
  index, what its tally histograms); a ``multi`` question as ``q_<id>__report`` (string, the wire report as
  JSON text, decoded by the question itself).

:func:`survey_tally` rebuilds from those columns exactly the tally vector the service keeps per row
(:mod:`deniable.aggregator.survey_tally`: per question answers, skips, then its own tally), so the recount
checks against the manifest's tallies and the estimates are the service's own
(:func:`deniable.aggregator.survey_estimates.local_question_estimates`).

:func:`cross_sums` is the kernel of a cross-tabulation of two ``choice`` questions: over the rows that
answered both, the sums of φ₁(y₁ᵢ)_a·φ₂(y₂ᵢ)_b and of their squares, with φ the mechanism's per-report
unbiased indicator (:meth:`~deniable.shared.mechanisms.base.Mechanism.indicators`). Additive, plain numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deniable.aggregator.batch.columns import arrow_fields, to_columns, to_simulated
from deniable.aggregator.survey_tally import layout
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.estimate import Tally, normal_quantile
from deniable.shared.questions import Question

__all__ = ["cross_estimate", "cross_questions", "cross_sums", "decode", "question_fields", "survey_arrays",
           "survey_tally"]

ANSWERED, SKIPPED, NOT_DRAWN = "answered", "skipped", "not_drawn"
#: Indicator cells (rows × k) computed at once by :func:`cross_sums` (8 MB of float64).
_CHUNK_CELLS = 1 << 20
_STATES = (ANSWERED, SKIPPED, NOT_DRAWN)


def _prefix(question: Question) -> str:
    return f"q_{question.id}__"


def state_column(question: Question) -> str:
    """The column that says whether ``question`` was answered, skipped or not drawn in each row."""
    return f"{_prefix(question)}state"


def _codec(question: Question) -> str:
    if question.kind == "choice":
        return "mechanism"
    return "number" if question.kind == "number" else "multi"


def _report_fields(question: Question) -> list[pa.Field]:
    codec = _codec(question)
    if codec == "mechanism":
        fields = arrow_fields(question.build_mechanism())
    elif codec == "number":
        fields = [pa.field("report", pa.int64())]
    else:
        fields = [pa.field("report", pa.string())]
    return [pa.field(_prefix(question) + f.name, f.type, nullable=True) for f in fields]


def question_fields(question: Question) -> list[pa.Field]:
    """The Parquet fields of one question: its state, then its report columns (nullable)."""
    return [pa.field(state_column(question), pa.string(), nullable=False), *_report_fields(question)]


def survey_arrays(config: CampaignConfig, wires: Sequence[Mapping[str, Any]]) -> dict[str, pa.Array]:
    """The arrays of every question's columns for stored survey reports (each the wire ``answers`` object)."""
    out: dict[str, pa.Array] = {}
    for question in config.questions:
        states = [ANSWERED if w.get(question.id) is not None else SKIPPED if question.id in w else NOT_DRAWN
                  for w in wires]  # fmt: skip
        out[state_column(question)] = pa.array(states, pa.string())
        wire = [w.get(question.id) for w in wires]
        codec = _codec(question)
        prefix = _prefix(question)
        if codec == "mechanism":
            decoded = [None if x is None else question.decode_report(x) for x in wire]
            for name, array in to_columns(question.build_mechanism(), decoded).items():
                out[prefix + name] = array
        elif codec == "number":
            out[prefix + "report"] = pa.array(
                [None if x is None else int(question.decode_report(x)) for x in wire], pa.int64()
            )
        else:
            for x in wire:  # checked here, so that the batch never meets a report it cannot read
                if x is not None:
                    question.decode_report(x)
            out[prefix + "report"] = pa.array([None if x is None else json.dumps(x) for x in wire], pa.string())
    return out


@dataclass(frozen=True, slots=True)
class _Decoded:
    """One question over one partition: per-row state code (0 answered, 1 skipped, 2 not drawn), and the
    answered rows' reports in the mechanism's vectorized form, row r at ``position[r]``."""

    question: Question
    state: np.ndarray
    position: np.ndarray
    simulated: Any

    def reports(self, rows: np.ndarray) -> Any:
        index = self.position[rows]
        if isinstance(self.simulated, list):
            return [self.simulated[i] for i in index.tolist()]
        from deniable.aggregator.batch.kernel import subset

        return subset(self.simulated, index)


def decode(config: CampaignConfig, table: pa.Table) -> list[_Decoded]:
    """Every question of a partition, decoded once (the kernel then takes rows of it per cell)."""
    out = []
    for question in config.questions:
        column = table.column(state_column(question)).combine_chunks()
        state = np.full(len(column), 2, dtype=np.int8)
        for code, name in enumerate(_STATES[:2]):
            state[pc.equal(column, name).to_numpy(zero_copy_only=False)] = code
        answered = np.flatnonzero(state == 0)
        position = np.full(len(column), -1, dtype=np.int64)
        position[answered] = np.arange(answered.size)
        prefix = _prefix(question)
        names = [f.name for f in _report_fields(question)]
        part = table.select(names).take(pa.array(answered, pa.int64()))
        part = part.rename_columns([n[len(prefix):] for n in names])
        codec = _codec(question)
        simulated: Any
        if codec == "mechanism":
            simulated = to_simulated(question.build_mechanism(), part)
        elif codec == "number":
            simulated = part.column("report").to_numpy().astype(np.int64, copy=False)
        else:
            simulated = [question.decode_report(json.loads(x)) for x in part.column("report").to_pylist()]
        out.append(_Decoded(question, state, position, simulated))
    return out


def survey_tally(config: CampaignConfig, decoded: Sequence[_Decoded], rows: np.ndarray) -> Tally:
    """The service's tally vector of the given rows: n respondents, per question answers, skips and its tally."""
    vector: list[int] = []
    for slot, d in zip(layout(config), decoded, strict=True):
        state = d.state[rows]
        answered = rows[state == 0]
        body = d.question.build_mechanism().tally(d.reports(answered))
        if body.n != answered.size or len(body.support) != slot.body:  # pragma: no cover - codec invariant
            raise RuntimeError(f"question {d.question.id!r}: recount of {answered.size} answers gave {body}")
        vector += [int(answered.size), int(np.count_nonzero(state == 1)), *body.support]
    return Tally(int(rows.size), tuple(vector))


def cross_questions(
    config: CampaignConfig, pair: Sequence[str], by: Sequence[str] = (), where: Sequence[Any] = ()
) -> tuple[Question, Question]:
    """The two ``choice`` questions of ``--cross Q1,Q2``, checked: a survey under the per_question split,
    and, for a recurring survey, one round per cell (``by`` holds ``round``, or ``where`` keeps one round).

    The plug-in SE √(m·s²) treats the m rows as independent. In a recurring survey a device sends its
    permanent response again every round, so pooled rounds repeat one device's φ₁·φ₂ term R times: the
    variance is up to R times the printed one, and m counts device-rounds, not devices. Within one round
    each device is one row, and the rows are independent.
    """
    if not config.is_survey:
        raise InvalidParameter("--cross crosses two questions of a survey; this export holds one question "
                               "(use --by for group fields)")
    if len(pair) != 2 or pair[0] == pair[1]:
        raise InvalidParameter(f"--cross takes two different question ids, Q1,Q2; got {','.join(pair)!r}")
    if config.split.mode != "per_question":
        raise InvalidParameter(
            "--cross needs every respondent to answer both questions: under the sampling split each respondent "
            "answers one question drawn at random, so no report holds two answers and their joint distribution "
            "is not estimable from these reports"
        )
    one_round = "round" in by or any(c.column == "round" and c.op == "=" for c in where)
    if config.recurring and not one_round:
        raise InvalidParameter(
            "--cross over a recurring survey needs one round per cell: add --by round (or --where round=R); "
            "pooled rounds repeat each device's permanent response, so the rows are not independent and the "
            "standard error would be too small"
        )
    first, second = (config.question_by_id(qid) for qid in pair)
    for q in (first, second):
        if q.kind != "choice":
            raise InvalidParameter(f"--cross crosses choice questions; {q.id!r} is a {q.kind} question")
    return first, second


@dataclass(frozen=True, slots=True)
class CrossSums:
    """Additive sums of a cross-tabulation cell: m rows that answered both, Σφ₁φ₂ and Σ(φ₁φ₂)² (k₁ × k₂)."""

    m: int
    total: np.ndarray
    squares: np.ndarray

    def __add__(self, other: CrossSums) -> CrossSums:
        return CrossSums(self.m + other.m, self.total + other.total, self.squares + other.squares)


def cross_sums(decoded: Sequence[_Decoded], pair: tuple[int, int], rows: np.ndarray) -> CrossSums:
    """The sums over the rows (of one cell) that answered both questions of ``pair`` (indices into
    ``decoded``): φ₁ᵀφ₂ and (φ₁²)ᵀ(φ₂²), φ the mechanisms' per-report indicators."""
    first, second = decoded[pair[0]], decoded[pair[1]]
    both = rows[(first.state[rows] == 0) & (second.state[rows] == 0)]
    k1, k2 = len(first.question.labels), len(second.question.labels)
    total, squares = np.zeros((k1, k2)), np.zeros((k1, k2))
    # in chunks, so that the n × k indicator matrices stay small whatever the partition's size and k
    step = max(1, _CHUNK_CELLS // max(k1, k2))
    for start in range(0, both.size, step):
        chunk = both[start : start + step]
        phi1 = first.question.build_mechanism().indicators(first.reports(chunk))
        phi2 = second.question.build_mechanism().indicators(second.reports(chunk))
        total += phi1.T @ phi2
        squares += (phi1 * phi1).T @ (phi2 * phi2)
    return CrossSums(int(both.size), total, squares)


def cross_estimate(
    first: Question, second: Question, sums: CrossSums, level: float
) -> dict[str, Any]:
    """Ĉ_ab = Σᵢ φ₁(y₁ᵢ)_a·φ₂(y₂ᵢ)_b over the m who answered both, unbiased since the two reports are
    randomized independently; SE² = m·s² (the plug-in variance of a sum of m independent terms, s² their
    sample variance: (Σt² − (Σt)²/m)/(m − 1)); interval Ĉ ± z·SE (normal)."""
    m = sums.m
    z = normal_quantile(level)
    rows = []
    for a, label_a in enumerate(first.labels):
        for b, label_b in enumerate(second.labels):
            count = float(sums.total[a, b])
            if m > 1:
                variance = m * (float(sums.squares[a, b]) - count * count / m) / (m - 1)
                stderr: float | None = math.sqrt(max(variance, 0.0))
            else:
                stderr = None
            rows.append({
                first.id: label_a, second.id: label_b, "count": count if m else None, "stderr": stderr,
                "ci": [None, None] if stderr is None else [count - z * stderr, count + z * stderr],
                "proportion": count / m if m else None,
            })  # fmt: skip
    return {"questions": [first.id, second.id], "answered_both": m, "level": level, "interval": "normal",
            "cells": rows}
