"""Recounting and key checks: stored tallies and counters equal a fresh count of the stored reports, and
every campaign's key file is usable and matches the campaign's public key.

The ingestion path updates reports, tallies and counters in one transaction, so they always agree; this
module is the independent check behind ``deniable verify`` (and the crash tests): it decodes every stored
report again with the campaign's mechanism and compares, per campaign and group, ``n`` and ``support``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deniable.aggregator import survey_tally
from deniable.aggregator.keyring import KeyProblem, Keyring
from deniable.aggregator.service import config_of
from deniable.aggregator.store import OVERALL, Store
from deniable.shared.mechanisms.estimate import Tally

__all__ = ["recount", "verify_keys", "verify_store"]


@dataclass
class CampaignCheck:
    """The outcome of recounting one campaign: which tallies differ, if any."""

    campaign_id: str
    reports: int
    counter: int
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def recount(store: Store, campaign_id: str, *, round: str = "") -> dict[tuple[str, str], Tally]:
    """Tallies recomputed from the stored reports of one campaign and round, keyed like
    :meth:`Store.all_tallies`."""
    config = config_of(store.get_campaign(campaign_id))
    central = config.trust_model == "central"
    mechanism = None if central or config.is_survey else config.build_mechanism()
    k = survey_tally.width(config)
    counts: dict[tuple[str, str], list[int]] = {}  # the support counts of each tally
    ns: dict[tuple[str, str], int] = {}
    for _, groups, report_json in store.iter_reports(campaign_id, round=round):
        wire = json.loads(report_json)
        if config.is_survey:  # every question's slot, decoded again from the stored answers
            support: Sequence[int] = survey_tally.recount_support(config, wire)
        else:
            support = [wire] if mechanism is None else mechanism.support(mechanism.decode_report(wire))
        for key in [OVERALL] + [(f, groups[f]) for f in config.group_fields if f in groups]:
            row = counts.setdefault(key, [0] * k)
            ns[key] = ns.get(key, 0) + 1
            for v in support:
                row[v] += 1
    return {key: Tally(ns[key], tuple(row)) for key, row in counts.items()}


def verify_store(store: Store) -> list[CampaignCheck]:
    """Recount every campaign, round by round; each result lists the tallies or counters that disagree."""
    checks = []
    for record in store.list_campaigns():
        check = CampaignCheck(record.id, store.count_reports(record.id), record.n_reports)
        if check.reports != check.counter:
            check.mismatches.append(f"n_reports counter is {check.counter}, {check.reports} reports stored")
        arrived, stored_per_round = store.arrivals_per_round(record.id), store.reports_per_round(record.id)
        for round_ in sorted(set(arrived) | set(stored_per_round)):
            if arrived.get(round_, 0) != stored_per_round.get(round_, 0):
                where = f" in round {round_!r}" if round_ else ""
                check.mismatches.append(
                    f"timeline{where}: {arrived.get(round_, 0)} arrivals counted, "
                    f"{stored_per_round.get(round_, 0)} reports stored"
                )
        for round_ in sorted(store.stored_rounds(record.id)):
            fresh = recount(store, record.id, round=round_)
            stored = store.all_tallies(record.id, round=round_)
            for key in sorted(set(fresh) | set(stored)):
                want, have = fresh.get(key), stored.get(key)
                if want != have:
                    where = "overall" if key == OVERALL else f"{key[0]}={key[1]!r}"
                    where += f" in round {round_!r}" if round_ else ""
                    check.mismatches.append(f"tally {where}: stored {have}, recount {want}")
        checks.append(check)
    return checks


def verify_keys(store: Store, data_dir: Path, *, kek: bytes | None = None) -> list[KeyProblem]:
    """Every campaign whose key file (over PostgreSQL: sealed key, opened with ``kek``) is missing, damaged or
    not the key of its descriptor (the same check the server runs at start and on load)."""
    keyring = Keyring(data_dir, sealed_in=store if store.postgres else None, kek=kek)
    problems = []
    for record in store.list_campaigns():
        config = config_of(record)
        problem = keyring.problem(config.id, config.public_key_bytes)
        if problem is not None:
            problems.append(problem)
    return problems
