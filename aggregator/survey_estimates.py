"""Estimates of a survey (format 3): every question, overall, per group and per round, from the stored
tally vectors (:mod:`deniable.aggregator.survey_tally`) in O(questions · k) whatever n is.

Local surveys: each question's slot gives its tally, and :func:`deniable.shared.survey_estimate.estimate_question`
its estimate under the descriptor's split (``per_question``: the mechanism's own estimate over the
question's answers; ``sampling``: the answerers' proportions and means, counts rescaled to the respondents,
with the sampling variance stated). A question nobody skipped speaks for the row's N respondents; with
skips under sampling, for the estimated N·a/(a + s) respondents who answer it (a answers, s skips of the
respondents it was drawn for): its counts are the Horvitz–Thompson totals (N/(a + s))·ĉ, its proportions
and means the answerers' (:mod:`deniable.shared.survey_estimate`). Reading estimates costs no privacy
(post-processing).

Central surveys (split ``per_question``: every respondent answers every question, question q at its ε_q,
Σ ε_q ≤ ε): a release of question q draws noise on its slot (:mod:`deniable.aggregator.central_kinds`)
and charges ε_q to the campaign's budget through the accountant, in one write transaction; releasing all
questions charges each of them (their sum is the campaign's ε for one survey release). A release is kept
per (question, grouping): asked again it is served free; ``refresh`` draws anew and pays again.

Body (local and central alike): ``{"campaign_id", "trust_model", "split", "n", "level", "questions": [...]}``
with one entry per question (``?question=`` keeps one), each ``{"question", "text", "kind", ...}`` with
``categories`` (choice), ``options`` (multi) or ``mean`` (number); grouped:
``{"group_by", "groups": {value: {"n", "questions": [...]}}}``.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from deniable.aggregator import accountant, central, central_kinds
from deniable.aggregator.store import OVERALL, Store
from deniable.aggregator.survey_tally import Slot, group_page, layout, question_tally
from deniable.shared.accounting import Totals, compose
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.estimate import Tally
from deniable.shared.survey_estimate import estimate_question

__all__ = ["local_question_estimates", "question_slots", "survey_central_estimate", "survey_local_estimate"]


def question_slots(config: CampaignConfig, question: str | None) -> tuple[Slot, ...]:
    """The slots to estimate: every question's, or the one named (``InvalidParameter`` naming the
    survey's questions otherwise)."""
    slots = layout(config)
    if question is None:
        return slots
    config.question_by_id(question)  # the message that lists the questions
    return tuple(slot for slot in slots if slot.question.id == question)


def _local_question(config: CampaignConfig, slot: Slot, stored: Tally, level: float) -> dict[str, Any]:
    question = slot.question
    qt = question_tally(slot, stored.n, stored.support)
    result = estimate_question(
        question.id, question.kind, question.build_mechanism(), qt.tally, split=config.split.mode,
        population=qt.respondents, skipped=qt.skipped, labels=question.labels,
        number_range=question.range if question.kind == "number" else None,  # type: ignore[attr-defined]
    )  # fmt: skip
    body = result.to_dict(level)
    body["text"] = question.text
    body["skipped"] = qt.skipped
    return body


def local_question_estimates(
    config: CampaignConfig, slots: Sequence[Slot], stored: Tally, level: float
) -> list[dict[str, Any]]:
    """The estimate of every question of ``slots`` from one stored tally vector (the estimate route's
    ``questions``; ``deniable batch`` calls it on its recounted vectors, so the numbers are the same)."""
    return [_local_question(config, slot, stored, level) for slot in slots]


def survey_local_estimate(
    store: Store,
    config: CampaignConfig,
    *,
    question: str | None,
    group_by: str | None,
    level: float,
    round_: str,
    group_after: str | None = None,
) -> dict[str, Any]:
    """The estimate body of a local survey (``round_``: ``''`` unless recurring, checked by the caller); a
    grouped one lists a page of groups as a one-question campaign's does
    (:func:`deniable.aggregator.survey_tally.group_page`)."""

    slots = question_slots(config, question)
    head: dict[str, Any] = {"campaign_id": config.id, "trust_model": "local", "split": config.split.to_json()}
    if config.recurring:
        head["round"] = round_
    empty = Tally(0, ())
    overall = store.tallies(config.id, round=round_).get(OVERALL[1], empty)
    body = {**head, "n": overall.n, "level": level}
    if group_by is None:
        return {**body, "questions": local_question_estimates(config, slots, overall, level)}
    groups = store.tallies(config.id, group_by, round=round_)
    values, more = group_page(config, group_by, groups, group_after)
    body["group_by"] = group_by
    body["groups"] = {
        value: {"n": groups.get(value, empty).n,
                "questions": local_question_estimates(config, slots, groups.get(value, empty), level)}
        for value in values
    }  # fmt: skip
    if more:
        body["next_group_after"] = values[-1]
    return body


# -- central ------------------------------------------------------------------------------------------


def _draw(slot: Slot, stored: Tally, adjacency: str) -> dict[str, Any]:
    question = slot.question
    qt = question_tally(slot, stored.n, stored.support)
    if question.kind == "number":
        return central_kinds.draw_mean(
            qt.sum_j, qt.answered, epsilon=question.epsilon, steps=question.steps,  # type: ignore[attr-defined]
            adjacency=adjacency, optional=question.optional,
        )  # fmt: skip
    m = question.max_selected if question.kind == "multi" else 1  # type: ignore[attr-defined]
    return central_kinds.draw_histogram(
        qt.tally.support, qt.answered, kind=question.kind, epsilon=question.epsilon, sensitivity=m,
        adjacency=adjacency, optional=question.optional,
    )  # fmt: skip


def _render(slot: Slot, stored: dict[str, Any], level: float) -> dict[str, Any]:
    question = slot.question
    if question.kind == "number":
        body = central_kinds.render_mean(stored, question.range, level=level)  # type: ignore[attr-defined]
    else:
        body = central_kinds.render_histogram(stored, question.labels, level=level)
    return {"question": question.id, "text": question.text, **body}


def _release_question(
    conn: Any, config: CampaignConfig, slot: Slot, *, group_by: str | None, refresh: bool, role: str,
    level: float, adjacency: str, tallies_of: Callable[[], dict[str, Tally]],
) -> tuple[dict[str, Any], bool]:  # fmt: skip
    """One question's release (all its groups): served from its slot, or drawn and charged ε_q.
    ``tallies_of()``: the survey's tallies per group value, read once per transaction for all questions."""
    question = slot.question
    key = central.release_key(group_by, central_kinds.KIND_NOISE, question=question.id)
    cached = None if refresh else Store.stored_release(conn, config.id, key)
    if cached is not None:
        stored = cached[0]
    else:
        cost, _ = accountant.release_cost(
            central_kinds.KIND_NOISE, epsilon=question.epsilon, delta=None, adjacency=adjacency,
            group_size=config.group_size or 1,
        )  # fmt: skip
        at = dt.datetime.now(dt.UTC).isoformat()
        accountant.charge_release(
            conn, config.id, config.privacy_budget, cost, release_key=key, at=at, epsilon=question.epsilon,
            role=role, parameters={"question": question.id, "group_by": group_by, "refresh": refresh},
        )  # fmt: skip
        tallies = tallies_of()
        values = [""] if group_by is None else sorted(set(config.group_values.get(group_by, ())) | set(tallies))
        stored = {"groups": {}, "cost": {**cost.to_dict(), "text": cost.describe()}, "released_at": at}
        for value in values:
            stored["groups"][value] = _draw(slot, tallies.get(value, Tally(0, ())), adjacency)
        Store.keep_release(conn, config.id, key, epsilon=question.epsilon, result=stored, at=at)
    groups = {value: _render(slot, draw, level) for value, draw in stored["groups"].items()}
    for body in groups.values():
        body["cost"] = stored["cost"]
        body["released_at"] = stored["released_at"]
        body["cached"] = cached is not None
    return groups, cached is not None


def survey_central_estimate(
    store: Store,
    config: CampaignConfig,
    *,
    question: str | None,
    group_by: str | None,
    level: float,
    noise: str | None,
    refresh: bool,
    role: str,
    sample: str | None,
) -> dict[str, Any]:
    """Release every question (or the one named) of a central survey, charging what is not kept."""
    slots = question_slots(config, question)
    for slot in slots:
        central_kinds.check_kind_noise(slot.question.kind, noise or central_kinds.KIND_NOISE, sample)
    if group_by is not None and group_by in config.undeclared_group_fields:
        raise InvalidParameter(f"campaign {config.id!r} declares no group_values for {group_by!r}")
    adjacency = config.adjacency or "add-remove"
    from deniable.aggregator.estimation import _check_policy

    def release(conn: Any) -> tuple[list[tuple[dict[str, Any], bool]], dict[str, Any]]:
        released = []
        tallies_of = functools.cache(lambda: Store.group_tallies(conn, config.id, group_by or ""))
        for slot in slots:
            key = central.release_key(group_by, central_kinds.KIND_NOISE, question=slot.question.id)
            _check_policy(store, conn, config.id, key, refresh=refresh)
            released.append(_release_question(conn, config, slot, group_by=group_by, refresh=refresh, role=role,
                                              level=level, adjacency=adjacency, tallies_of=tallies_of))
        composed = accountant_totals(conn, config.id)
        totals = accountant.totals_body(config.privacy_budget, composed)
        if composed.epsilon_sum is not None:  # campaigns.epsilon_spent follows the ledger, as for a histogram
            spent = central.spent_text(central._decimal(Fraction(composed.epsilon_sum)))
            Store.set_epsilon_spent(conn, config.id, spent)
        return released, totals

    # one transaction spends and keeps every question's release; on PostgreSQL (SERIALIZABLE) one that a
    # concurrent release's conflict rolled back runs again, as a histogram's release does (its draws were
    # never served: the rolled-back noise leaves nothing behind)
    released, totals = store.retrying(release)
    body: dict[str, Any] = {
        "campaign_id": config.id, "trust_model": "central", "split": config.split.to_json(), "level": level,
        "noise": central_kinds.KIND_NOISE, "adjacency": adjacency, "accountant": totals,
    }  # fmt: skip
    if group_by is None:
        body["questions"] = [groups[""] for groups, _ in released]
        body["n"] = body["questions"][0].get("n") if body["questions"] else None
        return body
    values = sorted({value for groups, _ in released for value in groups})
    body["group_by"] = group_by
    body["groups"] = {value: {"questions": [groups[value] for groups, _ in released if value in groups]}
                      for value in values}  # fmt: skip
    return body


def accountant_totals(conn: Any, campaign_id: str) -> Totals:
    """The campaign's composed costs (the release log is the accountant's ledger)."""
    return compose(accountant.costs(conn, campaign_id))
