"""Central releases beyond pure ε: Gaussian noise, (ε, δ) and ρ budgets, group privacy, Poisson subsampling.

Releases run over a real store; the coverage checks run the release's own draw and estimate functions many
times (no store, the exact samplers from ``secrets``) and require every served interval to cover the truth
at a rate in [0.93, 0.97] (each rate ±6 binomial standard errors around 0.95 at these sizes).
"""

from __future__ import annotations

import json
import math
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from deniable.aggregator import accountant, central
from deniable.aggregator.migrations import MIGRATIONS, migrate
from deniable.aggregator.store import ReportRow, Store
from deniable.shared.accounting import Budget, Cost, subsampled_epsilon
from deniable.shared.errors import BudgetExceeded, InvalidParameter
from deniable.shared.gaussian import (
    analytic_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
)
from deniable.shared.mechanisms import Tally
from deniable.shared.noise import LATTICE_BITS, simulate_two_sided_geometric

K = 3


def _store(tmp_path: Path, *, budget: float | None = 10.0, adjacency: str = "add-remove", n: int = 300) -> Store:
    store = Store(tmp_path / "deniable.sqlite3")
    with store.transaction() as conn:
        store.insert_campaign(conn, "c", {"id": "c"}, trust_model="central", budget=budget, adjacency=adjacency)
    rows = [ReportRow(f"{i:032x}", f"{i:064x}", {}, json.dumps(i % K), (i % K,)) for i in range(n)]
    store.ingest("c", rows, k=K, group_fields=[])
    return store


def _release(store: Store, **kwargs: object) -> dict:
    params = {"epsilon": 1.0, "k": K, "categories": ["a", "b", "c"], "refresh": True, **kwargs}
    with store.transaction() as conn:
        return central.release(conn, "c", **params)  # type: ignore[arg-type]


def test_a_gaussian_release_says_its_noise_its_cost_and_the_totals(tmp_path: Path) -> None:
    store = _store(tmp_path)
    budget = Budget.approx(10, 1e-5)
    body = _release(store, noise="gaussian", delta=1e-5, budget=budget)
    assert body["noise"] == "gaussian"
    sigma2 = Fraction(body["scale"]).limit_denominator(10**6)
    # Balle–Wang's continuous σ = 3.7306, raised by 0.26% until the exact discrete condition holds
    assert body["sigma"] == pytest.approx(analytic_gaussian_sigma(1.0, 1e-5), rel=5e-3)
    assert discrete_gaussian_delta(1.0, sigma2) <= 1e-5
    cost = body["cost"]
    assert cost["kind"] == "zcdp" and Fraction(cost["rho"]) == 1 / (2 * sigma2)
    assert (cost["epsilon"], cost["delta"]) == ("1", "1/100000")  # δ as the decimal written, exactly
    assert "ρ = " in cost["text"] and "(ε, δ) = (1, 1e-05)" in cost["text"]
    for row in body["categories"]:
        assert row["stderr"] == pytest.approx(math.sqrt(discrete_gaussian_variance(sigma2)), rel=1e-12)
    books = body["accountant"]
    assert books["releases"] == 1 and books["rho"] == pytest.approx(float(1 / (2 * sigma2)))
    (at,) = books["at_delta"]
    assert at["delta"] == 1e-5 and at["epsilon"] == 1.0 and at["by_rule"]["sequential"] == 1.0
    assert books["spent"] == 1.0 and books["left"] == 9.0
    assert [cost["kind"] for cost in Store.release_costs(store.connection(), "c")] == ["zcdp"]
    (logged,) = store.releases("c")
    assert logged.cost == {k: v for k, v in body["cost"].items() if k != "text"} and logged.role == "analyst"


def test_gaussian_noise_needs_a_delta_and_a_budget_that_can_pay_for_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(InvalidParameter, match="per-release 'delta'"):
        _release(store, noise="gaussian")
    with pytest.raises(InvalidParameter, match="pure ε budget, which cannot pay"):
        _release(store, noise="gaussian", delta=1e-6)  # the campaign's pure budget
    assert Store.release_costs(store.connection(), "c") == []


def test_replace_adjacency_calibrates_through_rho(tmp_path: Path) -> None:
    """Two bins move under replace (Δ₂² = 2): σ² = 1/ρ with the largest ρ whose ε at δ is at most ε."""
    from deniable.shared.accounting import zcdp_epsilon

    sigma2 = accountant.gaussian_sigma2(1.0, 1e-6, "replace")
    assert zcdp_epsilon(1 / sigma2, 1e-6) <= 1.0
    assert zcdp_epsilon(1.01 / sigma2, 1e-6) > 1.0  # on the boundary, not far inside it


def test_a_rho_budget_is_charged_in_rho(tmp_path: Path) -> None:
    store = _store(tmp_path, budget=None)
    budget = Budget.zcdp(1)
    _release(store, budget=budget)  # Laplace at ε = 1 costs ρ = 1/2
    _release(store, budget=budget)
    refusal = r"spent ρ = 1 of its budget ρ = 1 \(ρ = 0 left\); this release costs ε = 1"
    with pytest.raises(BudgetExceeded, match=refusal):
        _release(store, budget=budget)
    body = _release(store, budget=budget, epsilon=0.5, refresh=False)  # served again: free
    assert body["cached"] is True and body["accountant"]["rho"] == 1.0


def test_an_epsilon_delta_budget_composes_by_the_best_rule(tmp_path: Path) -> None:
    """(3.5, 10⁻⁶): by summation 35 releases at ε = 0.1 fit; by KOV 59 (the 60th would make 3.545)."""
    store = _store(tmp_path)
    budget = Budget.approx(3.5, 1e-6)
    granted = 0
    with pytest.raises(BudgetExceeded, match=r"at δ = 1e-06"):
        for _ in range(80):
            body = _release(store, epsilon=0.1, budget=budget)
            granted += 1
    assert granted == 59  # KOV: 59 × 0.1 composes to at most 3.5 at δ = 10⁻⁶; 60 × 0.1 to 3.545
    assert body["accountant"]["at_delta"][0]["by_rule"]["sequential"] == pytest.approx(0.1 * granted)
    assert body["accountant"]["spent"] <= 3.5 < 0.1 * granted


def test_group_privacy_charges_g_epsilon(tmp_path: Path) -> None:
    store = _store(tmp_path, budget=1.0)
    body = _release(store, epsilon=0.25, group_size=2)
    assert body["cost"]["epsilon"] == "1/2" and body["epsilon_spent"] == 0.5
    _release(store, epsilon=0.25, group_size=2)
    with pytest.raises(BudgetExceeded, match=r"costs ε = 0\.5"):
        _release(store, epsilon=0.25, group_size=2)
    cost, _ = accountant.release_cost("gaussian", epsilon=1.0, delta=1e-6, adjacency="add-remove", group_size=3)
    assert cost.epsilon == 3 and float(cost.delta) == pytest.approx(3 * math.exp(2) * 1e-6, rel=1e-8)


def test_subsampling_costs_the_amplified_epsilon_under_add_remove_only(tmp_path: Path) -> None:
    store = _store(tmp_path, n=3000)
    body = _release(store, epsilon=1.0, sample=0.01)
    assert Fraction(body["cost"]["epsilon"]) == Fraction(subsampled_epsilon(1, Fraction(42949672, 2**32)))
    assert body["sample"] == 42949672 / 2**32  # 0.01 rounded down to the 2^−32 grid
    assert body["epsilon_spent"] == pytest.approx(0.017036, abs=1e-5)
    with pytest.raises(InvalidParameter, match="add-remove"):
        _release(_store(tmp_path / "r", adjacency="replace"), sample=0.5)
    with pytest.raises(InvalidParameter, match=r"'sample' must be a rate in \(0, 1\]"):
        _release(store, sample=1.5)


def test_old_spending_and_old_log_rows_become_costs_the_accountant_reads(tmp_path: Path) -> None:
    """Migration 5: version-4 log rows become pure-ε costs; ε spent before the log (spent − logged, exactly)
    becomes one logged pure-ε row, so nothing spent is forgotten."""
    conn = sqlite3.connect(tmp_path / "old.sqlite3", isolation_level=None)
    migrate(conn, MIGRATIONS[:4])
    conn.execute(
        "INSERT INTO campaigns (id, config_json, trust_model, budget, adjacency, epsilon_spent, created_at)"
        " VALUES ('c', '{}', 'central', 1.0, 'add-remove', '0.7', 'x'), ('d', '{}', 'central', 1.0,"
        " 'add-remove', '0.1', 'x'), ('e', '{}', 'central', 1.0, 'add-remove', '0', 'x')"
    )
    conn.execute(
        "INSERT INTO release_log (campaign_id, released_at, role, epsilon, release_key, parameters_json, cost_json)"
        " VALUES ('c', 'y', 'analyst', 0.1, 'k', '{}', '{\"epsilon\": 0.1, \"delta\": 0}'),"
        " ('d', 'y', 'analyst', 0.1, 'k', '{}', '{\"epsilon\": 0.1, \"delta\": 0}')"
    )
    migrate(conn)
    costs = [Cost.from_dict(cost) for cost in Store.release_costs(conn, "c")]
    assert costs == [Cost.pure(Fraction(1, 10)), Cost.pure(Fraction(6, 10))]
    assert [Cost.from_dict(cost) for cost in Store.release_costs(conn, "d")] == [Cost.pure(Fraction(1, 10))]
    assert Store.release_costs(conn, "e") == []


# -- calibration of the intervals served ------------------------------------------------------------


def _coverage(noise: str, *, params: dict, epsilon: float, support: list[int], reps: int) -> float:
    tallies = {"": Tally(sum(support), tuple(support))}
    hits = total = 0
    for _ in range(reps):
        stored = central._draw(tallies, [""], k=len(support), epsilon=epsilon, adjacency="add-remove",
                               noise=noise, params=params)  # fmt: skip
        body = central.render(stored, level=0.95, categories=None, group_by=None)
        for truth, row in zip(support, body["categories"], strict=True):
            lo, hi = row["ci"]
            hits += lo <= truth <= hi
            total += 1
    return hits / total


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_gaussian_intervals_cover(epsilon: float) -> None:
    sigma2 = accountant.gaussian_sigma2(epsilon, 1e-6, "add-remove")
    params = {"sigma2": [sigma2.numerator, sigma2.denominator]}
    rate = _coverage("gaussian", params=params, epsilon=epsilon, support=[40, 3], reps=2000)
    assert 0.93 <= rate <= 0.97


def test_subsampled_intervals_cover() -> None:
    rate_q = accountant.subsample_rate(0.2, "add-remove")
    assert rate_q is not None
    params = {"sample": [rate_q.numerator, rate_q.denominator]}
    rate = _coverage("discrete-laplace", params=params, epsilon=1.0, support=[2000, 500], reps=2000)
    assert 0.93 <= rate <= 0.97


@pytest.mark.parametrize("noise", ["discrete-laplace", "gaussian"])
@pytest.mark.parametrize("epsilon", [0.25, 0.5, 1.0, 1.5, 2.0, 3.0])
def test_integer_noise_intervals_have_their_coverage_exactly(noise: str, epsilon: float) -> None:
    """The served interval [c − u, c + l] covers the truth iff −l ≤ Z ≤ u: its coverage is an exact sum of the
    noise law. The normal interval of the discrete Laplace covered 0.927 at ε = 1, 0.919 at 1.5, 0.905 at 3."""
    if noise == "gaussian":
        sigma2 = accountant.gaussian_sigma2(epsilon, 1e-6, "add-remove")
        params: dict = {"sigma2": [sigma2.numerator, sigma2.denominator]}

        def pmf(z: int) -> float:
            return discrete_gaussian_pmf(z, sigma2)
    else:
        params, a = {}, math.exp(-epsilon)

        def pmf(z: int) -> float:
            return (1 - a) / (1 + a) * a ** abs(z)

    stored = central._draw({"": Tally(50, (50, 7))}, [""], k=2, epsilon=epsilon, adjacency="add-remove",
                           noise=noise, params=params)  # fmt: skip
    row = central.render(stored, level=0.95, categories=None, group_by=None)["categories"][0]
    below, above = row["count"] - row["ci"][0], row["ci"][1] - row["count"]  # u, l
    coverage = sum(pmf(z) for z in range(-round(above), round(below) + 1))
    assert 0.93 <= coverage <= 0.97, (below, above, coverage)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0, 10.0])
def test_lattice_laplace_intervals_have_their_coverage_exactly(epsilon: float) -> None:
    """The ``laplace`` release serves c ± m·γ, m the least number of lattice steps with
    P(|Z| ≤ mγ) = 1 − 2a^(m+1)/(1+a) ≥ 0.95 (a = e^(−γ/b)): its exact coverage is 0.95 to within one step's
    mass. The normal interval it served before, ĉ ± 1.96·√2·b, covers 1 − e^(−1.96·√2) = 0.9375 at every ε;
    a seeded simulation of the same law agrees within its binomial standard error."""
    stored = central._draw({"": Tally(50, (50, 7))}, [""], k=2, epsilon=epsilon, adjacency="add-remove",
                           noise="laplace")  # fmt: skip
    body = central.render(stored, level=0.95, categories=None, group_by=None)
    assert body["interval"]["method"] == "noise-exact"
    row = body["categories"][0]
    half = row["ci"][1] - row["count"]
    assert half == pytest.approx(row["count"] - row["ci"][0], abs=0)
    steps = half * 2**LATTICE_BITS
    assert steps == int(steps)  # the interval's ends are lattice points
    b = 1.0 / epsilon
    log_a = -(2.0**-LATTICE_BITS) / b
    exact = 1 - 2 * math.exp((steps + 1) * log_a) / (1 + math.exp(log_a))
    assert 0.95 <= exact <= 0.95 + 2 * (2.0**-LATTICE_BITS) / b, exact
    assert 1 - 2 * math.exp(steps * log_a) / (1 + math.exp(log_a)) < 0.95  # one step less would not do
    normal = 1 - math.exp(-1.959963984540054 * math.sqrt(2.0))
    assert normal == pytest.approx(0.9375, abs=1e-4)
    draws = simulate_two_sided_geometric(-math.expm1(log_a), 40_000, np.random.default_rng(3))
    measured = float(np.mean(np.abs(draws) <= steps))
    assert abs(measured - exact) <= 4 * math.sqrt(exact * (1 - exact) / draws.size)
