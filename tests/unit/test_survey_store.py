"""Surveys (format 3) in the store on both backends (SQLite and PostgreSQL, ``database_target``): rows made
the way the ingest makes them (the devices' randomizers at a fixed seed, ``encode_answers``,
``report_support``) go through ``Store.ingest``; the stored tallies equal the sum of the rows' supports and
``deniable verify``'s recount, duplicates count once, rounds keep their own tallies, and the estimate served
from the store (``estimation.estimate``, every question, overall and per group) is the same body as the one a
reference SQLite store gives from the same rows, so a PostgreSQL deployment answers exactly what an
embedded one does; concurrent central releases of a survey are each charged once.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from support.store import make_store

from deniable.aggregator import estimation, survey_tally
from deniable.aggregator.store import OVERALL, ReportRow, Store
from deniable.aggregator.verify import recount, verify_store
from deniable.client.report import randomize_survey
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.mechanisms import Tally
from deniable.shared.sampling import seeded_randbelow
from deniable.shared.survey import check_answers, encode_answers

if TYPE_CHECKING:
    from deniable.aggregator.batch.export import ExportSummary

OPTIONS = ["mail", "maps", "news", "chat", "music"]
QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": ["no", "yes", "quit"]},
    {"id": "apps", "text": "Apps?", "kind": "multi", "options": OPTIONS, "max_selected": 3, "optional": True},
    {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]},
]  # fmt: skip
REGIONS = ("north", "south")


def survey(split: str, *, recurring: bool = False) -> CampaignConfig:
    return CampaignConfig.create_survey(
        id=f"s-{split.replace('_', '-')}", title="Health", questions=QUESTIONS, epsilon=3.0, split=split,
        group_fields=["region"], group_values={"region": list(REGIONS)}, recurring=recurring,
        public_key=bytes(range(1, 33)),
    )  # fmt: skip


def rows_for(config: CampaignConfig, n: int, seed: int, *, round: str = "") -> list[ReportRow]:
    """``n`` devices' survey reports as the ingest stores them (randomized on the 'device' at a fixed seed); a
    device's pseudonym depends on ``seed`` and its number, its report id on the round too."""
    rng = np.random.default_rng(seed)
    randbelow = seeded_randbelow(rng)
    rows = []
    for i in range(n):
        apps = sorted(rng.choice(len(OPTIONS), size=int(rng.integers(0, 4)), replace=False).tolist())
        answers = check_answers(config.questions, {
            "smoke": str(rng.choice(["no", "yes", "quit"])),
            "apps": None if i % 7 == 0 else [OPTIONS[a] for a in apps],
            "age": int(rng.integers(18, 100)),
        })  # fmt: skip
        reports = randomize_survey(config, answers, randbelow)
        wire = encode_answers(config.questions, reports)
        rows.append(ReportRow(
            report_id=hashlib.sha256(f"{round}/{seed}/{i}".encode()).hexdigest()[:32],
            pseudonym=f"{seed:08x}{i:056x}", groups={"region": REGIONS[i % 2]}, report_json=_compact(wire),
            support=survey_tally.report_support(config, reports), round=round,
        ))  # fmt: skip
    return rows


def _compact(obj: Any) -> str:
    import json

    return json.dumps(obj, separators=(",", ":"))


def ingest(store: Store, config: CampaignConfig, rows: list[ReportRow]) -> list[str]:
    outcomes = store.ingest(config.id, rows, k=survey_tally.width(config), group_fields=config.group_fields)
    return [status for status, _ in outcomes]


def summed(config: CampaignConfig, rows: list[ReportRow]) -> dict[tuple[str, str], Tally]:
    """The tallies the rows must leave: per key, the respondents and the sum of their supports."""
    width = survey_tally.width(config)
    sums: dict[tuple[str, str], list[int]] = {}
    ns: dict[tuple[str, str], int] = {}
    for row in rows:
        for key in (OVERALL, ("region", row.groups["region"])):
            cells = sums.setdefault(key, [0] * width)
            ns[key] = ns.get(key, 0) + 1
            for cell in row.support:
                cells[cell] += 1
    return {key: Tally(ns[key], tuple(cells)) for key, cells in sums.items()}


def estimates(store: Store, config: CampaignConfig, **kwargs: Any) -> list[dict[str, Any]]:
    return [
        estimation.estimate(store, config, group_by=group_by, level=0.95, noise=None, **kwargs)
        for group_by in (None, "region")
    ]


@pytest.mark.parametrize("split", ["per_question", "sampling"])
def test_a_survey_is_stored_tallied_verified_and_estimated_alike_on_both_backends(
    database_target: str | Path, tmp_path: Path, split: str
) -> None:
    config = survey(split)
    store = make_store(database_target, config=config)
    rows = rows_for(config, 240, seed=3)
    assert ingest(store, config, rows[:150]) == ["accepted"] * 150
    again = [dataclasses.replace(rows[5], report_id="ff" * 16)]  # the same device with a new report id
    assert ingest(store, config, rows[100:] + again) == ["duplicate"] * 50 + ["accepted"] * 90 + ["duplicate"]
    stored = store.all_tallies(config.id)
    assert stored == summed(config, rows) == recount(store, config.id)
    assert stored[OVERALL].n == store.get_campaign(config.id).n_reports == store.count_reports(config.id) == 240
    [check] = [c for c in verify_store(store) if c.campaign_id == config.id]
    assert check.ok and check.reports == 240, check.mismatches
    overall, grouped = estimates(store, config)
    assert overall["n"] == 240 and [q["question"] for q in overall["questions"]] == ["smoke", "apps", "age"]
    answered = [q["answered"] for q in overall["questions"]]
    skipped = overall["questions"][1]["skipped"]  # apps is optional: every 7th device skips it
    if split == "sampling":
        assert sum(answered) + skipped == 240 and 0 < skipped < 240 / 7  # one drawn question per device
    else:
        assert answered == [240, 240 - 35, 240] and skipped == 35
    assert {value: body["n"] for value, body in grouped["groups"].items()} == {"north": 120, "south": 120}
    reference = make_store(tmp_path / "reference", config=config)  # SQLite, the same rows in one batch
    ingest(reference, config, rows)
    assert estimates(store, config) == estimates(reference, config)


def test_a_recurring_survey_keeps_each_rounds_tallies_on_both_backends(database_target: str | Path) -> None:
    config = survey("per_question", recurring=True)
    store = make_store(database_target, config=config)
    first, second = rows_for(config, 60, seed=1, round="2026-w1"), rows_for(config, 40, seed=1, round="2026-w2")
    assert ingest(store, config, first + second) == ["accepted"] * 100  # the same devices, once per round
    assert store.rounds(config.id) == [("2026-w1", 60), ("2026-w2", 40)]
    for label, rows in (("2026-w1", first), ("2026-w2", second)):
        assert store.all_tallies(config.id, round=label) == summed(config, rows) == recount(store, config.id,
                                                                                              round=label)  # fmt: skip
        overall, _ = estimates(store, config, round=label)
        assert overall["round"] == label and overall["n"] == len(rows)
    assert all(check.ok for check in verify_store(store))


def test_concurrent_central_survey_releases_are_each_charged_once_on_both_backends(database_target: str | Path) -> None:
    """Six analysts at once refreshing one question each of a central survey: every release is served (on
    PostgreSQL a release that a concurrent one's serialization conflict rolled back runs again, as a
    histogram's does, instead of failing with 503) and the ledger charges each exactly once."""
    import threading

    config = CampaignConfig.create_survey(
        id="s-central", title="Health", questions=QUESTIONS, epsilon=3.0, split="per_question",
        trust_model="central", budget=100.0, public_key=bytes(range(1, 33)),
    )  # fmt: skip
    store = make_store(database_target, config=config, trust_model="central", budget=100.0)
    with store.transaction() as conn:
        store.set_release_policy(conn, config.id, min_reports=1, min_refresh_interval_s=0, updated_by="admin")
    assert ingest(store, config, rows_for(config, 50, seed=9)) == ["accepted"] * 50
    threads, per_thread = 6, 3
    barrier = threading.Barrier(threads)
    failures: list[BaseException] = []

    def analyst(index: int) -> None:
        barrier.wait()
        for _ in range(per_thread):
            try:
                estimation.estimate(store, config, group_by=None, level=0.95, noise=None, refresh=True,
                                    question=QUESTIONS[index % 3]["id"])  # fmt: skip
            except BaseException as exc:  # collected and asserted below
                failures.append(exc)

    workers = [threading.Thread(target=analyst, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    logged = store.releases(config.id, limit=1000)
    assert len(logged) == threads * per_thread and all(row.epsilon == 1.0 for row in logged)
    assert store.get_campaign(config.id).epsilon_spent == threads * per_thread  # ε_q = 1 each, exactly


def export_recount(
    store: Store, config: CampaignConfig, directory: Path, *, rows_per_file: int, by: tuple[str, ...] = ()
) -> tuple[ExportSummary, dict[str, Any], dict[tuple[str, str, str], Tally]]:
    """Export the campaign to ``directory`` and recount it with the batch kernel: the export's summary, the
    kernel's merged result over every file (cells per ``by``) and the tally vectors the manifest says are stored,
    keyed ``(round, group field, group value)``."""
    import pyarrow.parquet as pq

    from deniable.aggregator.batch.export import export_campaign, read_manifest
    from deniable.aggregator.batch.kernel import Plan, merge, tally_table

    summary = export_campaign(store, config.id, directory, rows_per_file=rows_per_file)
    manifest, _ = read_manifest(directory)
    plan = Plan(descriptor=config.to_json(), by=by)
    total = merge([tally_table(pq.read_table(directory / f), plan) for f in summary.files])
    stored = {(t["round"], t["group_field"], t["group_value"]): Tally(t["n"], tuple(t["support"]))
              for t in manifest["tallies"]}  # fmt: skip
    return summary, total, stored


@pytest.mark.parametrize("split", ["per_question", "sampling"])
def test_a_survey_export_recounts_to_the_stored_tally_vectors_on_both_backends(
    database_target: str | Path, tmp_path: Path, split: str
) -> None:
    """A local survey is exported with every question in columns of its own (its state: answered, skipped,
    not drawn), and the batch kernel over the files recounts exactly the tally vectors the store holds,
    overall and per group; the service's estimates follow from the same vectors."""
    import pyarrow.parquet as pq

    from deniable.aggregator.batch.export import read_manifest

    config = survey(split)
    store = make_store(database_target, config=config)
    rows = rows_for(config, 120, seed=4)
    ingest(store, config, rows)
    summary, total, stored = export_recount(store, config, tmp_path / "export", rows_per_file=50)
    assert summary.reports == 120 and len(summary.files) == 3
    manifest, read = read_manifest(tmp_path / "export")
    assert read == config and [q["id"] for q in manifest["questions"]] == ["smoke", "apps", "age"]
    table = pq.read_table(tmp_path / "export" / summary.files[0])
    states = set(table.column("q_apps__state").to_pylist())
    assert states == ({"answered", "skipped", "not_drawn"} if split == "sampling" else {"answered", "skipped"})
    assert total["check"] == stored
    want = summed(config, rows)
    assert stored[("", "", "")] == want[OVERALL] and stored[("", "region", "north")] == want[("region", "north")]


def test_a_recurring_survey_export_recounts_each_rounds_vectors_on_both_backends(
    database_target: str | Path, tmp_path: Path
) -> None:
    config = survey("per_question", recurring=True)
    store = make_store(database_target, config=config)
    first, second = rows_for(config, 60, seed=1, round="2026-w1"), rows_for(config, 40, seed=1, round="2026-w2")
    ingest(store, config, first + second)
    _, total, stored = export_recount(store, config, tmp_path / "export", rows_per_file=30, by=("round",))
    assert total["check"] == stored and len(stored) == 2 * 3  # per round: overall and the two regions
    for label, rows in (("2026-w1", first), ("2026-w2", second)):
        assert total["cells"][(label,)] == summed(config, rows)[OVERALL] == stored[(label, "", "")]


def test_exporting_a_central_survey_is_refused_and_leaves_the_target_untouched(
    database_target: str | Path, tmp_path: Path
) -> None:
    from deniable.aggregator.batch.export import export_campaign
    from deniable.shared.errors import InvalidParameter

    config = CampaignConfig.create_survey(
        id="s-central-export", title="Health", questions=QUESTIONS, epsilon=3.0, split="per_question",
        trust_model="central", budget=10.0, public_key=bytes(range(1, 33)),
    )  # fmt: skip
    store = make_store(database_target, config=config, trust_model="central", budget=10.0)
    target = tmp_path / "export"
    target.mkdir()
    with pytest.raises(InvalidParameter, match="is central"):
        export_campaign(store, config.id, target)
    assert list(target.iterdir()) == []
