"""Surveys end to end against the real server: a three-question survey (choice, multi, number) answered by
simulated devices through the fleet, every estimate within its 95% interval at the seeds used, per group
too, ``deniable verify`` equal to the stored tallies; a central survey released question by question under
one budget. Each test runs on both database backends (``backend_aggregator``: SQLite, and PostgreSQL, whose
runs ``make test`` takes); the store-level survey tests on both are in ``tests/unit/test_survey_store.py``.

The devices' randomizers draw from a seeded ``randbelow`` (the fleet's test hook), so each run sends the
same reports and the intervals are checked at fixed seeds, not re-rolled. With 9 (and 27, per group)
intervals at 95%, a seed misses one of them now and then by construction (0.95^27 = 0.25 of seeds pass
all 27); the z-scores of these very estimates over other seeds are N(0, 1)-like (sd 0.9-1.1, checked
while writing this test), and the statistics of the estimators are tested over thousands of runs in
``tests/unit/test_survey_estimate.py``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from support.server import RunningServer

from deniable.client.fleet import simulate_fleet
from deniable.shared.sampling import seeded_randbelow

OPTIONS = ["mail", "maps", "news", "chat", "music"]
QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Did you smoke this month?", "kind": "choice", "categories": ["no", "yes", "quit"]},
    {"id": "apps", "text": "Which apps did you use today?", "kind": "multi", "options": OPTIONS, "max_selected": 3},
    {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


@pytest.fixture(scope="module")
def aggregator(backend_aggregator: RunningServer) -> RunningServer:
    """Every test of this module runs once per database backend (SQLite, and PostgreSQL under ``make test``)."""
    return backend_aggregator


def population(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    smoke = rng.choice(["no", "yes", "quit"], size=n, p=[0.6, 0.25, 0.15])
    ages = np.clip(np.round(rng.normal(45, 15, size=n)), 18, 99).astype(int)
    answers = []
    for i in range(n):
        size = int(rng.integers(0, 4))
        apps = sorted(rng.choice(len(OPTIONS), size=size, replace=False, p=[0.35, 0.3, 0.15, 0.1, 0.1]).tolist())
        answers.append({"smoke": str(smoke[i]), "apps": [OPTIONS[a] for a in apps], "age": int(ages[i])})
    return answers


def truths(answers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "smoke": {c: sum(a["smoke"] == c for a in answers) for c in ("no", "yes", "quit")},
        "apps": {o: sum(o in a["apps"] for a in answers) for o in OPTIONS},
        "age": float(np.mean([a["age"] for a in answers])),
    }


def check_within(body: dict[str, Any], truth: dict[str, Any]) -> int:
    """Every question's every estimate inside its interval; returns how many were checked."""
    checked = 0
    for question in body["questions"]:
        qid = question["question"]
        if question["kind"] == "number":
            low, high = question["mean"]["ci"]
            assert low <= truth[qid] <= high, (qid, question["mean"], truth[qid])
            assert question["mean"]["stderr"] > 0
            checked += 1
            continue
        rows = question["categories" if question["kind"] == "choice" else "options"]
        for row in rows:
            label = row["category" if question["kind"] == "choice" else "option"]
            assert row["ci"][0] <= truth[qid][label] <= row["ci"][1], (qid, row, truth[qid][label])
            assert row["stderr"] > 0
            checked += 1
    return checked


def verify(aggregator: RunningServer) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", "verify", *aggregator.cli_args()],
        capture_output=True, text=True, timeout=600, check=False, env=aggregator.cli_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_sampling_survey_of_20000_devices_is_within_every_interval_and_verifies(aggregator: RunningServer) -> None:
    n = 20_000
    aggregator.create_campaign(id="survey-sampling", title="Health", questions=QUESTIONS, epsilon=2.0,
                               split="sampling")  # fmt: skip
    answers = population(n, seed=13)
    result = simulate_fleet(aggregator.url, "survey-sampling", answers, randbelow=seeded_randbelow(
        np.random.default_rng(0)))  # fmt: skip
    assert (result.accepted, result.rejected, result.unsent) == (n, 0, 0)
    body = aggregator.estimate("survey-sampling")
    assert body["n"] == n and body["split"]["mode"] == "sampling"
    assert [q["question"] for q in body["questions"]] == ["smoke", "apps", "age"]
    answered = [q["answered"] for q in body["questions"]]
    assert sum(answered) == n and all(abs(a - n / 3) < 5 * np.sqrt(n * 2 / 9) for a in answered)
    assert all(q["n"] == n for q in body["questions"])  # counts speak for every respondent
    assert check_within(body, truths(answers)) == 3 + 5 + 1
    one = aggregator.estimate("survey-sampling", question="age")
    assert [q["question"] for q in one["questions"]] == ["age"]
    assert one["questions"][0] == body["questions"][2]
    assert "survey-sampling: 20000 reports, tallies equal a recount" in verify(aggregator)


def test_a_per_question_survey_is_within_every_interval_per_group(aggregator: RunningServer) -> None:
    n = 6000
    aggregator.create_campaign(
        id="survey-split", title="Health", questions=QUESTIONS, epsilon=6.0, split="per_question",
        group_fields=["region"], group_values={"region": ["north", "south", "west"]},
    )  # fmt: skip
    answers = population(n, seed=5)
    groups = [{"region": "north" if i % 2 else "south"} for i in range(n)]
    simulate_fleet(aggregator.url, "survey-split", answers, groups, randbelow=seeded_randbelow(
        np.random.default_rng(4)))  # fmt: skip
    body = aggregator.estimate("survey-split")
    assert body["split"]["mode"] == "per_question"
    assert [q["epsilon"] for q in body["questions"]] == [2.0, 2.0, 2.0]
    assert check_within(body, truths(answers)) == 9
    grouped = aggregator.estimate("survey-split", group_by="region")
    assert set(grouped["groups"]) == {"north", "south", "west"}
    assert grouped["groups"]["west"]["n"] == 0
    assert all(row["count"] is None for row in grouped["groups"]["west"]["questions"][0]["categories"])
    for region, parity in (("north", 1), ("south", 0)):
        mine = [a for i, a in enumerate(answers) if i % 2 == parity]
        assert grouped["groups"][region]["n"] == len(mine)
        check_within(grouped["groups"][region], truths(mine))
    assert "survey-split: 6000 reports, tallies equal a recount" in verify(aggregator)


def test_an_unknown_question_is_refused_naming_the_questions(aggregator: RunningServer) -> None:
    aggregator.create_campaign(id="survey-q", title="T", questions=QUESTIONS[:1], epsilon=1.0)
    reply = aggregator.get("/api/v1/campaigns/survey-q/estimate?question=nope", role="analyst")
    assert reply.status_code == 422  # an invalid parameter, as every other one
    assert "smoke" in reply.json()["error"]["message"]


def test_a_central_survey_releases_each_question_under_one_budget(aggregator: RunningServer) -> None:
    n = 3000
    aggregator.create_campaign(
        id="survey-central", title="Health", questions=QUESTIONS, epsilon=3.0, split="per_question",
        trust_model="central", budget=4.5, release_policy={"min_reports": 1, "min_refresh_interval_seconds": 0},
    )  # fmt: skip
    answers = population(n, seed=3)
    simulate_fleet(aggregator.url, "survey-central", answers, allow_central=True)
    one = aggregator.estimate("survey-central", question="apps")
    assert one["accountant"]["spent"] == pytest.approx(1.0)
    assert one["questions"][0]["kind"] == "multi" and one["questions"][0]["sensitivity"] == 3
    body = aggregator.estimate("survey-central")
    assert body["accountant"]["spent"] == pytest.approx(3.0)  # smoke and age new, apps served again
    assert [q["cached"] for q in body["questions"]] == [False, True, False]
    truth = truths(answers)
    mean = body["questions"][2]["mean"]
    assert abs(mean["mean"] - truth["age"]) <= 5 * mean["stderr"]
    for row in body["questions"][0]["categories"]:
        assert abs(row["count"] - truth["smoke"][row["category"]]) <= 5 * row["stderr"]
    again = aggregator.estimate("survey-central")
    assert again["accountant"]["spent"] == pytest.approx(3.0)
    refused = aggregator.get("/api/v1/campaigns/survey-central/estimate?refresh=true", role="analyst")
    assert refused.status_code == 409  # 3 more would pass the budget of 4.5
    assert aggregator.estimate("survey-central", question="smoke", refresh="true")["accountant"]["spent"] == \
        pytest.approx(4.0)
    assert "survey-central: 3000 reports, tallies equal a recount" in verify(aggregator)


def test_the_analyst_client_and_cli_serve_every_question(aggregator: RunningServer, tmp_path: Any) -> None:
    import json
    import os

    from deniable.analyst import Analyst

    analyst = Analyst(aggregator.url, token=aggregator.admin_token)
    config = analyst.create_survey("survey-cli", "Health", QUESTIONS, 3.0, split="per_question")
    assert config["format_version"] == 3 and [q["id"] for q in config["questions"]] == ["smoke", "apps", "age"]
    answers = population(1500, seed=11)
    simulate_fleet(aggregator.url, "survey-cli", answers, randbelow=seeded_randbelow(np.random.default_rng(1)))
    rows = analyst.estimates("survey-cli")
    body = aggregator.estimate("survey-cli")
    assert {r["question_id"] for r in rows} == {"smoke", "apps", "age"}
    assert len(rows.where(question_id="smoke")) == 3 * 2 and len(rows.where(question_id="apps")) == 5 * 2
    (mean_row,) = rows.where(question_id="age")
    assert (mean_row["statistic"], mean_row["kind"], mean_row["question"]) == ("mean", "number", "How old are you?")
    assert mean_row["estimate"] == body["questions"][2]["mean"]["mean"]
    assert [mean_row["ci_low"], mean_row["ci_high"]] == body["questions"][2]["mean"]["ci"]
    option = rows.where(question_id="apps", category="maps", statistic="count")[0]
    served = next(r for r in body["questions"][1]["options"] if r["option"] == "maps")
    assert (option["estimate"], option["stderr"]) == (served["count"], served["stderr"])
    assert len(analyst.estimates("survey-cli", question="apps")) == 10
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    env["DENIABLE_TOKEN"] = aggregator.analyst_token
    cli = [sys.executable, "-m", "deniable.aggregator.cli", "estimate", "survey-cli", "--url", aggregator.url]
    table = subprocess.run([*cli, "--question", "age"], capture_output=True, text=True, env=env, timeout=120,
                           check=False)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "age (number): How old are you?" in table.stdout and "MEAN" in table.stdout
    assert "smoke" not in table.stdout
    every = subprocess.run([*cli, "--format", "json"], capture_output=True, text=True, env=env, timeout=120,
                           check=False)  # fmt: skip
    assert every.returncode == 0, every.stderr
    assert json.loads(every.stdout) == rows.to_records()
    full = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert "apps (multi): Which apps did you use today?" in full.stdout and "OPTION" in full.stdout
    listing = subprocess.run([sys.executable, "-m", "deniable.aggregator.cli", "campaigns", "list", "--url",
                              aggregator.url], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert listing.returncode == 0, listing.stderr
    assert "survey: 3 questions, per_question" in listing.stdout


def test_a_recurring_survey_is_estimated_round_by_round_and_skips_are_counted(aggregator: RunningServer) -> None:
    questions = [QUESTIONS[0], {**QUESTIONS[1], "optional": True}, QUESTIONS[2]]
    aggregator.create_campaign(id="survey-rounds", title="Weekly", questions=questions, epsilon=3.0,
                               split="per_question", recurring=True)  # fmt: skip
    answers = population(900, seed=2)
    for i in range(0, 900, 3):
        del answers[i]["apps"]  # a third skip the optional question
    first, second = answers[:500], answers[500:]
    simulate_fleet(aggregator.url, "survey-rounds", first, round="2026-w48",
                   randbelow=seeded_randbelow(np.random.default_rng(3)))  # fmt: skip
    simulate_fleet(aggregator.url, "survey-rounds", second, round="2026-w49",
                   randbelow=seeded_randbelow(np.random.default_rng(4)))  # fmt: skip
    refused = aggregator.get("/api/v1/campaigns/survey-rounds/estimate", role="analyst")
    assert refused.status_code == 422 and "round" in refused.json()["error"]["message"]
    for label, mine in (("2026-w48", first), ("2026-w49", second)):
        body = aggregator.estimate("survey-rounds", round=label)
        assert body["round"] == label and body["n"] == len(mine)
        apps = body["questions"][1]
        skipped = sum("apps" not in a for a in mine)
        assert (apps["skipped"], apps["answered"], apps["n"]) == (skipped, len(mine) - skipped, len(mine) - skipped)
        assert body["questions"][0]["answered"] == len(mine) and body["questions"][0]["skipped"] == 0
    assert "survey-rounds: 900 reports, tallies equal a recount" in verify(aggregator)
