"""Surveys in the batch kernel: the per-report indicator φ of every choice mechanism is exactly unbiased,
so is the cross-tabulation Σᵢ φ₁(y₁ᵢ)_a·φ₂(y₂ᵢ)_b of two independently randomized questions, and the
kernel over an Arrow table of survey reports recounts exactly the tally vectors the service keeps.

Exact expectations over the mechanism's law (GRR, binary RR, OUE: every report enumerated with its
probability); OLH, whose report space (64-bit seeds) cannot be enumerated, by a seeded simulation with the
tolerance of 4 analytic standard errors.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from deniable.aggregator import survey_tally
from deniable.aggregator.batch import survey_columns
from deniable.aggregator.batch.columns import to_columns, to_simulated
from deniable.aggregator.batch.export import schema_of
from deniable.aggregator.batch.kernel import Condition, Plan, merge, tally_table
from deniable.aggregator.batch.survey_columns import cross_estimate, survey_arrays
from deniable.client.report import randomize_survey
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import GRR, OLH, OUE, BinaryRR, Mechanism
from deniable.shared.sampling import seeded_randbelow
from deniable.shared.survey import check_answers, encode_answers


def simulated_of(mechanism: Mechanism[Any], reports: list[Any]) -> Any:
    """Device reports through the export's column codec, back to the vectorized form the kernel reads."""
    return to_simulated(mechanism, pa.table(to_columns(mechanism, reports)))


def all_reports(mechanism: Mechanism[Any]) -> list[Any]:
    if isinstance(mechanism, OUE):
        return list(range(1 << mechanism.k))
    return list(range(mechanism.k))


@pytest.mark.parametrize("first", [GRR(1.0, 3), BinaryRR(0.7), OUE(1.5, 3)], ids=lambda m: m.name)
@pytest.mark.parametrize("second", [GRR(2.0, 4), OUE(0.5, 2)], ids=lambda m: m.name)
def test_the_cross_tab_term_is_exactly_unbiased(first: Mechanism[Any], second: Mechanism[Any]) -> None:
    """E[φ₁(y₁)_a·φ₂(y₂)_b | x₁, x₂] = [x₁ = a]·[x₂ = b] for every (x₁, x₂), over the exact law of both."""
    reports1, reports2 = all_reports(first), all_reports(second)
    phi1 = first.indicators(simulated_of(first, reports1))
    phi2 = second.indicators(simulated_of(second, reports2))
    for x1, x2 in itertools.product(range(first.k), range(second.k)):
        law1 = np.array([first.output_probability(x1, y) for y in reports1])
        law2 = np.array([second.output_probability(x2, y) for y in reports2])
        assert law1.sum() == pytest.approx(1.0, abs=1e-12) and law2.sum() == pytest.approx(1.0, abs=1e-12)
        expected = np.einsum("i,j,ia,jb->ab", law1, law2, phi1, phi2)
        truth = np.outer(np.eye(first.k)[x1], np.eye(second.k)[x2])
        np.testing.assert_allclose(expected, truth, atol=1e-12)


def test_the_olh_indicator_is_unbiased_within_four_analytic_standard_errors() -> None:
    mechanism = OLH(1.5, 5)
    rng = np.random.default_rng(7)
    n = 60_000
    for x in range(mechanism.k):
        phi = mechanism.indicators(mechanism.simulate(np.full(n, x), rng=rng))
        p, q, gap = mechanism.p_star, mechanism.q_star, mechanism.gap
        variance = np.where(np.arange(mechanism.k) == x, p * (1 - p), q * (1 - q)) / gap**2
        z = (phi.mean(axis=0) - np.eye(mechanism.k)[x]) / np.sqrt(variance / n)
        assert np.abs(z).max() < 4, z


def test_the_support_matrix_sums_to_the_tally_for_every_choice_mechanism() -> None:
    rng = np.random.default_rng(3)
    for mechanism in (GRR(1.0, 6), BinaryRR(1.0), OUE(1.0, 6), OLH(2.0, 6)):
        simulated = mechanism.simulate(rng.integers(0, mechanism.k, size=500), rng=rng)
        summed = tuple(int(c) for c in mechanism.support_matrix(simulated).sum(axis=0))
        assert summed == mechanism.tally(simulated).support
        np.testing.assert_allclose(mechanism.indicators(simulated).sum(axis=0),
                                   mechanism.estimate_tally(mechanism.tally(simulated)).counts, rtol=1e-12, atol=1e-9)


QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": ["no", "yes", "quit"], "mechanism": "grr"},
    {"id": "diet", "text": "Diet?", "kind": "choice", "categories": ["any", "veg", "vegan", "fish"],
     "mechanism": "oue", "optional": True},
    {"id": "brand", "text": "Brand?", "kind": "choice", "categories": ["a", "b", "c", "d", "e"], "mechanism": "olh"},
    {"id": "apps", "text": "Apps?", "kind": "multi", "options": ["mail", "maps", "news"], "max_selected": 2,
     "optional": True},
    {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


def survey(split: str) -> CampaignConfig:
    return CampaignConfig.create_survey(
        id=f"x-{split.replace('_', '-')}", title="Health", questions=QUESTIONS, epsilon=8.0, split=split,
        group_fields=["region"], group_values={"region": ["north", "south"]}, public_key=bytes(range(1, 33)),
    )  # fmt: skip


def respondents(config: CampaignConfig, n: int, seed: int) -> tuple[pa.Table, list[Any], list[dict[str, Any]]]:
    """n devices' reports as an exported partition, their supports (as the ingest tallies them) and their
    true answers; smoke and diet are dependent (smokers eat fish more), so the joint is not the product."""
    rng = np.random.default_rng(seed)
    randbelow = seeded_randbelow(rng)
    wires, supports, truths, groups = [], [], [], []
    for i in range(n):
        smoke = int(rng.choice(3, p=[0.6, 0.25, 0.15]))
        diet = int(rng.choice(4, p=[0.1, 0.2, 0.1, 0.6] if smoke == 1 else [0.5, 0.3, 0.1, 0.1]))
        raw = {"smoke": ["no", "yes", "quit"][smoke],
               "diet": None if i % 5 == 0 else ["any", "veg", "vegan", "fish"][diet],
               "brand": "abcde"[int(rng.integers(5))], "apps": None if i % 7 == 0 else ["maps"],
               "age": int(rng.integers(18, 100))}
        answers = check_answers(config.questions, raw)
        reports = randomize_survey(config, answers, randbelow)
        wires.append(json.loads(json.dumps(encode_answers(config.questions, reports))))
        supports.append(survey_tally.report_support(config, reports))
        truths.append({"smoke": smoke, "diet": None if raw["diet"] is None else diet})
        groups.append(["north", "south"][i % 2])
    arrays = {"round": pa.array([""] * n), "day": pa.array([dt.date(2026, 12, 1)] * n, pa.date32()),
              "group_region": pa.array(groups), **survey_arrays(config, wires)}
    schema = schema_of(config)
    return pa.table([arrays[name] for name in schema.names], schema=schema), supports, truths


@pytest.mark.parametrize("split", ["per_question", "sampling"])
def test_the_kernel_recounts_the_service_tally_vectors_exactly(split: str) -> None:
    config = survey(split)
    table, supports, _ = respondents(config, 600, seed=11)
    width = survey_tally.width(config)
    expected = [0] * width
    for cells in supports:
        for cell in cells:
            expected[cell] += 1
    halves = [table.slice(0, 250), table.slice(250)]  # two partitions: the partials add
    total = merge([tally_table(part, Plan(descriptor=config.to_json())) for part in halves])
    assert total["check"][("", "", "")].n == 600
    assert list(total["check"][("", "", "")].support) == expected
    assert total["cells"][()] == total["check"][("", "", "")]
    north = [0] * width
    for i, cells in enumerate(supports):
        for cell in cells if i % 2 == 0 else ():
            north[cell] += 1
    assert list(total["check"][("", "region", "north")].support) == north
    filtered = merge([tally_table(part, Plan(descriptor=config.to_json(), where=(Condition("region", "=", "north"),),
                                             by=("day",), check=False)) for part in halves])  # fmt: skip
    assert set(filtered) == {"cells"}
    assert list(filtered["cells"].values()) == [total["check"][("", "region", "north")]]


def test_the_cross_tab_covers_the_true_joint_counts_and_sums_the_indicators(monkeypatch: pytest.MonkeyPatch) -> None:
    config = survey("per_question")
    table, _, truths = respondents(config, 3000, seed=5)
    plan = Plan(descriptor=config.to_json(), cross=("smoke", "diet"), check=False)
    total = merge([tally_table(table.slice(0, 1100), plan), tally_table(table.slice(1100), plan)])
    sums = total["cross"][()]
    both = [t for t in truths if t["diet"] is not None]
    assert sums.m == len(both) == 2400
    smoke, diet = config.question_by_id("smoke"), config.question_by_id("diet")
    body = cross_estimate(smoke, diet, sums, 0.95)
    truth = np.zeros((3, 4))
    for t in both:
        truth[t["smoke"], t["diet"]] += 1
    z = [(row["count"] - truth[a, b]) / row["stderr"]
         for (a, b), row in zip(itertools.product(range(3), range(4)), body["cells"], strict=True)]
    assert max(abs(x) for x in z) < 4, z
    # the estimate is the plain sum of the indicator products, and its SE the plug-in one
    rows = np.flatnonzero([t["diet"] is not None for t in truths])
    phi1 = smoke.build_mechanism().indicators(to_simulated(smoke.build_mechanism(), _columns(table, "smoke", rows)))
    phi2 = diet.build_mechanism().indicators(to_simulated(diet.build_mechanism(), _columns(table, "diet", rows)))
    terms = phi1[:, :, None] * phi2[:, None, :]
    np.testing.assert_allclose(sums.total, terms.sum(axis=0), rtol=1e-9, atol=1e-9)
    se = np.sqrt(len(rows) * terms.var(axis=0, ddof=1))
    np.testing.assert_allclose([row["stderr"] for row in body["cells"]], se.ravel(), rtol=1e-6)
    monkeypatch.setattr(survey_columns, "_CHUNK_CELLS", 40)  # 10 rows per chunk: the chunks add up alike
    chunked = tally_table(table, plan)["cross"][()]
    assert chunked.m == sums.m
    np.testing.assert_allclose(chunked.total, sums.total, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(chunked.squares, sums.squares, rtol=1e-9, atol=1e-9)


def _columns(table: pa.Table, qid: str, rows: np.ndarray) -> pa.Table:
    prefix = f"q_{qid}__"
    names = [n for n in table.column_names if n.startswith(prefix) and n != prefix + "state"]
    part = table.select(names).take(pa.array(rows))
    return part.rename_columns([n[len(prefix):] for n in names])


def test_a_cross_tab_is_refused_under_sampling_and_for_non_choice_questions() -> None:
    table, _, _ = respondents(survey("sampling"), 30, seed=1)
    with pytest.raises(InvalidParameter, match="sampling split"):
        tally_table(table, Plan(descriptor=survey("sampling").to_json(), cross=("smoke", "diet")))
    config = survey("per_question")
    table, _, _ = respondents(config, 30, seed=1)
    with pytest.raises(InvalidParameter, match="'age' is a number question"):
        tally_table(table, Plan(descriptor=config.to_json(), cross=("smoke", "age")))
    with pytest.raises(InvalidParameter, match="two different question ids"):
        tally_table(table, Plan(descriptor=config.to_json(), cross=("smoke", "smoke")))


def test_a_cross_tab_of_a_recurring_survey_needs_one_round_per_cell() -> None:
    """Pooled rounds repeat each device's permanent response (one φ₁·φ₂ term R times), so the plug-in SE of
    independent rows would be too small: refused unless each cell is one round."""
    recurring = CampaignConfig.create_survey(
        id="x-recurring", title="Health", questions=QUESTIONS, epsilon=8.0, split="per_question",
        recurring=True, public_key=bytes(range(1, 33)),
    )  # fmt: skip
    table, _, _ = respondents(recurring, 30, seed=1)
    with pytest.raises(InvalidParameter, match="add --by round"):
        tally_table(table, Plan(descriptor=recurring.to_json(), cross=("smoke", "diet"), check=False))
    by_round = tally_table(table, Plan(descriptor=recurring.to_json(), by=("round",), cross=("smoke", "diet"),
                                       check=False))  # fmt: skip
    one = Plan(descriptor=recurring.to_json(), where=(Condition("round", "=", ""),), cross=("smoke", "diet"),
               check=False)  # fmt: skip
    kept = tally_table(table, one)["cross"][()]
    assert 0 < kept.m == by_round["cross"][("",)].m
    assert np.array_equal(kept.total, by_round["cross"][("",)].total)
