"""How a survey's reports are tallied: one additive integer vector per (campaign, round, group), every
question a slot of it, updated in the report's own ingest transaction.

A survey (format 3) is tallied in the store's ordinary tally rows (``Store.ingest``: the row's ``n`` is
the number of respondents, its support the vector below), so grouping, rounds, sharding, backups and
``deniable verify`` hold for every question as they do for one. Question q, in descriptor order, owns the
slot ``[offset_q, offset_q + width_q)``:

    slot[0] = answers to q        slot[1] = answers that skipped q (optional questions)
    slot[2:] = the question's own additive tally of the answers:

* ``choice`` / ``multi``, local: the support count S_v of each category or option
  (``mechanism.support(report)``), the pure protocol's sufficient statistic;
* ``number``, local: the histogram of report values (Duchi's two outputs, the lattice cells of PM, the
  Hybrid's both), from which Σt and Σt² are exact (:meth:`MeanMechanism.moments`);
* ``choice`` / ``multi``, central: the number of answers holding each category or option;
* ``number``, central: Σj, the sum of the grid indices, kept in binary: slot[2 + b] counts the answers whose
  index has bit b set, so Σj = Σ_b 2^b·slot[2 + b] with unit increments only (``steps.bit_length()`` cells).

Under the sampling split a report answers one question; the others' slots do not move (not asked), so the
respondents N of the row and the answers n_q of each slot are what the sampling estimate needs. A format 1
or 2 campaign keeps its one-question layout (the support counts alone, width k).

The vector's width also bounds a grouped estimate: :func:`group_page` lists at most ``MAX_GROUP_CELLS``
cells of groups per page, for one-question campaigns and surveys alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.limits import MAX_GROUP_CELLS
from deniable.shared.mechanisms import Tally
from deniable.shared.questions import Question

__all__ = ["Slot", "layout", "question_tally", "recount_support", "report_support", "width"]

#: Cells before a question's own tally: answers, skipped.
HEADER = 2


@dataclass(frozen=True, slots=True)
class Slot:
    """Question ``question``'s cells ``[offset, offset + width)`` of its survey's tally vector."""

    question: Question
    offset: int
    width: int

    @property
    def body(self) -> int:
        return self.width - HEADER


def _body_width(question: Question) -> int:
    if question.kind == "number":
        steps: int = question.steps  # type: ignore[attr-defined]
        return steps.bit_length() if question.central else int(question.build_mechanism().outputs)
    return len(question.labels)


def _layout(config: CampaignConfig) -> tuple[Slot, ...]:
    slots, offset = [], 0
    for question in config.questions:
        size = HEADER + _body_width(question)
        slots.append(Slot(question, offset, size))
        offset += size
    return tuple(slots)


def layout(config: CampaignConfig) -> tuple[Slot, ...]:
    """The slots of a survey's questions, in descriptor order (``()`` for a format 1 or 2 campaign)."""
    if not config.is_survey:
        return ()
    return _layout(config)


def width(config: CampaignConfig) -> int:
    """The length of the campaign's tally vector: Σ_q (2 + width of q's tally), or k for formats 1 and 2."""
    if not config.is_survey:
        return len(config.categories)
    last = _layout(config)[-1]
    return last.offset + last.width


def group_page_size(config: CampaignConfig) -> int:
    """Groups one page of a local grouped estimate lists: ⌊MAX_GROUP_CELLS / (tally width)⌋, at least 1
    (the width is k for a one-question campaign, a survey's tally vector length otherwise)."""
    return max(1, MAX_GROUP_CELLS // width(config))


def group_page(
    config: CampaignConfig, group_by: str, present: Iterable[str], group_after: str | None
) -> tuple[list[str], bool]:
    """The group values one page of a local grouped estimate lists, and whether more follow.

    Every declared value and every one ``present`` in the tallies, in value order, those after
    ``group_after`` only, at most :func:`group_page_size` of them (so at most ``MAX_GROUP_CELLS`` cells,
    whatever was stored); when more follow, the body's ``next_group_after`` names the last one listed.
    """
    values = sorted(set(config.group_values.get(group_by, ())) | set(present))
    if group_after is not None:
        values = [value for value in values if value > group_after]
    size = group_page_size(config)
    return values[:size], len(values) > size


def report_support(config: CampaignConfig, answers: Mapping[str, Any]) -> tuple[int, ...]:
    """The cells of the tally vector one survey report adds 1 to (``answers``: decoded reports or central
    values per asked question, None for skipped; absent questions were not asked)."""
    cells: list[int] = []
    for slot in _layout(config):
        qid = slot.question.id
        if qid not in answers:
            continue
        answer = answers[qid]
        if answer is None:
            cells.append(slot.offset + 1)
            continue
        cells.append(slot.offset)
        base = slot.offset + HEADER
        question = slot.question
        if question.central:
            if question.kind == "choice":
                cells.append(base + int(answer))
            elif question.kind == "multi":
                cells.extend(base + int(v) for v in answer)
            else:
                j = int(answer)
                cells.extend(base + b for b in range(j.bit_length()) if (j >> b) & 1)
        elif question.kind == "number":
            cells.append(base + int(answer))
        else:
            cells.extend(base + int(v) for v in question.build_mechanism().support(answer))
    return tuple(cells)


def recount_support(config: CampaignConfig, wire: Any) -> tuple[int, ...]:
    """:func:`report_support` of a stored report (its ``report_json``: the wire answers object)."""
    if not isinstance(wire, dict):
        raise ValueError(f"a stored survey report must be an object of answers, got {type(wire).__name__}")
    by_id = {slot.question.id: slot.question for slot in _layout(config)}
    answers = {qid: None if value is None else by_id[qid].decode_report(value) for qid, value in wire.items()}
    return report_support(config, answers)


@dataclass(frozen=True, slots=True)
class QuestionTally:
    """One question's part of a stored tally: answers, skipped, respondents of the row, and its tally."""

    answered: int
    skipped: int
    respondents: int
    tally: Tally

    @property
    def sum_j(self) -> int:
        """Σj of a central number question (its cells hold Σj in binary)."""
        return sum(count << b for b, count in enumerate(self.tally.support))


def question_tally(slot: Slot, n: int, support: list[int] | tuple[int, ...]) -> QuestionTally:
    """Question ``slot``'s part of a stored tally row (``n`` respondents, the row's ``support``); an empty
    row (no reports) reads as zeros."""
    if not support:
        return QuestionTally(0, 0, n, Tally(0, (0,) * slot.body))
    cells = support[slot.offset : slot.offset + slot.width]
    answered, skipped = int(cells[0]), int(cells[1])
    return QuestionTally(answered, skipped, n, Tally(answered, tuple(int(c) for c in cells[HEADER:])))
