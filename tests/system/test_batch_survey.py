"""Surveys in batch analysis, against the real server on both database backends: a survey answered by
simulated devices through the fleet, exported beside the live server (``deniable export``), recounted by
``deniable batch`` exactly to the service's tally vectors with every question's estimate equal to the
service's, and the cross-tabulation of two choice questions (``--cross``) covering the true joint counts
within 4 standard errors; under the sampling split the cross-tabulation is refused.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.cli import deniable
from support.server import RunningServer

from deniable.aggregator.batch.run import local_cluster, run_batch
from deniable.client.fleet import simulate_fleet
from deniable.shared.sampling import seeded_randbelow

SMOKE = ["no", "yes", "quit"]
DIET = ["any", "veg", "vegan", "fish"]
QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Do you smoke?", "kind": "choice", "categories": SMOKE, "mechanism": "grr"},
    {"id": "diet", "text": "Your diet?", "kind": "choice", "categories": DIET, "mechanism": "oue", "optional": True},
    {"id": "apps", "text": "Apps today?", "kind": "multi", "options": ["mail", "maps", "news"], "max_selected": 2},
    {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


@pytest.fixture(scope="module")
def aggregator(backend_aggregator: RunningServer) -> RunningServer:
    return backend_aggregator


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    with local_cluster(1) as client:
        yield client


def population(n: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Dependent smoke and diet (smokers mostly eat fish), a fifth skipping diet, two regions."""
    rng = np.random.default_rng(seed)
    answers = []
    for i in range(n):
        smoke = int(rng.choice(3, p=[0.6, 0.25, 0.15]))
        diet = int(rng.choice(4, p=[0.1, 0.2, 0.1, 0.6] if smoke == 1 else [0.5, 0.3, 0.1, 0.1]))
        answers.append({"smoke": SMOKE[smoke], "diet": None if i % 5 == 0 else DIET[diet],
                        "apps": ["maps"] if i % 3 else [], "age": int(rng.integers(18, 100))})
    return answers, [{"region": "north" if i % 2 else "south"} for i in range(n)]


def collected(
    aggregator: RunningServer, campaign_id: str, n: int, out: Path, *, epsilon: float, split: str,
    seeds: tuple[int, int],
) -> tuple[list[dict[str, Any]], Any]:
    """The survey created, ``n`` devices of :func:`population` (seeded ``seeds[0]``, their randomness
    ``seeds[1]``) answering it through the fleet, and its reports exported to ``out``: the answers and the
    fleet's totals."""
    aggregator.create_campaign(id=campaign_id, title="Health", questions=QUESTIONS, epsilon=epsilon,
                               split=split, group_fields=["region"])  # fmt: skip
    answers, groups = population(n, seed=seeds[0])
    sent = simulate_fleet(aggregator.url, campaign_id, answers, groups,
                          randbelow=seeded_randbelow(np.random.default_rng(seeds[1])))  # fmt: skip
    done = deniable("export", campaign_id, "--to", str(out), "--rows-per-file", "700", *aggregator.cli_args(),
               env=aggregator.cli_env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    return answers, sent


def test_a_survey_export_recounts_to_the_service_and_cross_tabulates_two_questions(
    aggregator: RunningServer, tmp_path: Path, dask_client: Any
) -> None:
    n = 2000
    campaign_id = "batch-survey"
    out = tmp_path / "export"
    answers, sent = collected(aggregator, campaign_id, n, out, epsilon=8.0, split="per_question", seeds=(21, 3))
    assert (sent.accepted, sent.rejected, sent.unsent) == (n, 0, 0)

    result = run_batch(out, client=dask_client)
    assert result.ok, result.check_mismatches
    assert result.checked == 1 + 2  # overall and the two regions, every question's slots in each
    served = aggregator.estimate(campaign_id)
    (overall,) = result.cells
    assert overall["n"] == served["n"] == n
    assert overall["questions"] == served["questions"]  # the same estimator on the same vectors: equal

    grouped = run_batch(out, by=["region"], client=dask_client)
    by_region = aggregator.estimate(campaign_id, group_by="region")
    for cell in grouped.cells:
        assert cell["questions"] == by_region["groups"][cell["cell"]["region"]]["questions"]

    done = deniable("batch", str(out), "--cross", "smoke,diet", "--workers", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert "spend no privacy budget" in body["privacy"] and body["check"]["mismatches"] == []
    (cross,) = body["cross"]
    both = [a for a in answers if a["diet"] is not None]
    assert cross["answered_both"] == len(both) == n - n // 5
    z = []
    for row, (a, b) in zip(cross["cells"], itertools.product(SMOKE, DIET), strict=True):
        assert (row["smoke"], row["diet"]) == (a, b)
        truth = sum(x["smoke"] == a and x["diet"] == b for x in both)
        z.append((row["count"] - truth) / row["stderr"])
    assert max(abs(x) for x in z) < 4, z
    table = deniable("batch", str(out), "--cross", "smoke,diet", "--by", "region", "--workers", "1")
    assert table.returncode == 0, table.stderr
    assert "cross-tabulation" in table.stdout and "no privacy budget" in table.stdout
    assert "# check: 3 service tallies recounted, equal" in table.stdout
    live = deniable("batch", str(out), "--workers", "1", "--url", aggregator.url,
               env={**os.environ, "DENIABLE_TOKEN": aggregator.analyst_token})  # fmt: skip
    assert live.returncode == 0, live.stdout + live.stderr
    assert "# live service: equal: the service's estimates of all 4 questions over the same 2000 reports" in live.stdout


def test_a_sampling_survey_recounts_but_refuses_a_cross_tab(
    aggregator: RunningServer, tmp_path: Path, dask_client: Any
) -> None:
    n = 900
    campaign_id = "batch-survey-sampling"
    out = tmp_path / "export"
    _, sent = collected(aggregator, campaign_id, n, out, epsilon=2.0, split="sampling", seeds=(8, 4))
    assert sent.accepted == n
    result = run_batch(out, client=dask_client)
    assert result.ok, result.check_mismatches
    assert result.cells[0]["questions"] == aggregator.estimate(campaign_id)["questions"]
    done = deniable("batch", str(out), "--cross", "smoke,diet")
    assert done.returncode == 2 and "sampling split" in done.stderr and "not estimable" in done.stderr
