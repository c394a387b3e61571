"""The central accountant: known values, exact budgets, refusals, and the cross-check against dp-accounting.

The cross-check runs Google's ``dp-accounting`` (PLD and RDP accountants, in the dev extra) on the same
sequences of releases: our (ε at δ) must never be below theirs, since we must never be more optimistic than
a well-kept accountant. ``benchmarks/accounting.py`` prints the ratios.
"""

from __future__ import annotations

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from scipy import stats

from deniable.shared.accounting import (
    Budget,
    Cost,
    advanced_epsilon,
    check,
    compose,
    group_cost,
    kov_delta,
    subsampled_epsilon,
    zcdp_epsilon,
)
from deniable.shared.errors import BudgetExceeded, InvalidParameter


def test_composition_known_values() -> None:
    """FORMULAS part 2 §4.6: KOV optimal, DRV, and the case where DRV is worse than the plain sum."""
    assert advanced_epsilon([Fraction(1, 10)] * 50, 1e-6) == pytest.approx(3.173, abs=1e-3)
    assert advanced_epsilon([Fraction(1, 100)] * 1000, 1e-6) == pytest.approx(1.365, abs=1e-3)
    ten = advanced_epsilon([Fraction(1)] * 10, 1e-6)
    assert 9.99 < ten <= 10.0  # DRV alone gives 33.8 here: the minimum keeps the sum (or better)
    drv = math.sqrt(2 * 10 * math.log(1e6)) + 10 * (math.e - 1)
    assert drv == pytest.approx(33.8, abs=0.05)
    assert kov_delta(50, 0.1, 2.6) == pytest.approx(4.198862e-05, rel=1e-6)
    # mixed ε: DRV with Σε² (never above the sum)
    mixed = [Fraction(1, 10)] * 40 + [Fraction(1, 20)] * 40
    assert advanced_epsilon(mixed, 1e-6) < float(sum(mixed))


def test_kov_is_the_exact_profile_of_k_fold_randomized_response() -> None:
    k, eps = 7, 0.4
    p = math.exp(eps) / (1 + math.exp(eps))
    for total in (0.0, 0.8, 1.6, 2.0):
        exact = sum(
            max(0.0, stats.binom.pmf(j, k, p) - math.exp(total) * stats.binom.pmf(j, k, 1 - p)) for j in range(k + 1)
        )
        assert kov_delta(k, eps, total) == pytest.approx(exact, rel=1e-10, abs=1e-16)


@pytest.mark.parametrize(("sigma", "delta", "cks"), [(1, 1e-5, 4.728), (3, 1e-5, 1.386), (10, 1e-8, 0.524)])
def test_zcdp_conversion_known_values(sigma: float, delta: float, cks: float) -> None:
    rho = 1 / (2 * sigma**2)
    eps = zcdp_epsilon(rho, delta)
    assert eps == pytest.approx(cks, abs=1e-3)
    assert eps < rho + 2 * math.sqrt(rho * math.log(1 / delta))  # tighter than Bun–Steinke Prop. 1.3


def test_subsampling_known_value_and_the_claim_at_the_boundary() -> None:
    assert subsampled_epsilon(1, 0.01) == pytest.approx(math.log(1 + 0.01 * (math.e - 1)), rel=2e-9)
    assert subsampled_epsilon(1, 0.01) == pytest.approx(0.0170369, abs=1e-7)
    # exact enumeration: 3 other records, a count plus two-sided geometric noise, add the target record
    for q, eps in [(0.1, 1.0), (0.3, 2.0), (0.01, 3.0)]:
        a = math.exp(-eps)
        ys = np.arange(-60, 64)

        def law(records: int, ys: np.ndarray = ys, q: float = q, a: float = a) -> np.ndarray:
            out = np.zeros(len(ys))
            for c in range(records + 1):
                out += stats.binom.pmf(c, records, q) * (1 - a) / (1 + a) * a ** np.abs(ys - c)
            return out

        worst = float(np.max(np.abs(np.log(law(4) / law(3)))))
        claimed = subsampled_epsilon(eps, q)
        assert worst == pytest.approx(claimed, rel=1e-6)
        assert worst > 0.9 * claimed * 1.05  # a claim 10% too generous is refuted by the same pair


def test_group_privacy() -> None:
    assert group_cost(Cost.pure(Fraction(1, 2)), 3) == Cost.pure(Fraction(3, 2))
    approx = group_cost(Cost.approx(1, Fraction(1, 10**6)), 2)
    assert approx.epsilon == 2
    assert float(approx.delta) == pytest.approx(2 * math.e * 1e-6, rel=1e-8)
    assert float(approx.delta) >= 2 * math.e * 1e-6  # rounded up, never down
    assert group_cost(Cost.zcdp(Fraction(1, 8)), 2).rho == Fraction(1, 2)
    with pytest.raises(InvalidParameter, match="group_size"):
        group_cost(Cost.pure(1), 0)


def test_pure_budget_is_exact_and_refusals_name_spent_left_asked() -> None:
    budget, spent = Budget.pure(1), []
    for _ in range(10):
        check(budget, spent, Cost.pure(0.1))
        spent.append(Cost.pure(0.1))
    assert compose(spent).epsilon_sum == 1  # ten releases of 0.1 spend exactly 1, not 0.9999999999999999
    with pytest.raises(BudgetExceeded) as refused:
        check(budget, spent, Cost.pure(0.1), campaign_id="c")
    message = str(refused.value)
    assert "spent ε = 1 " in message and "ε = 0 left" in message and "costs ε = 0.1" in message
    assert (refused.value.spent, refused.value.remaining, refused.value.requested) == (1.0, 0.0, 0.1)
    with pytest.raises(InvalidParameter, match="pure ε budget"):
        check(budget, [], Cost.zcdp(Fraction(1, 8)))


def test_rho_budget_counts_laplace_as_epsilon_squared_over_two() -> None:
    budget = Budget.zcdp(Fraction(1, 2))
    totals = check(budget, [Cost.zcdp(Fraction(1, 4))], Cost.pure(Fraction(1, 2)))  # ρ = 1/4 + 1/8
    assert totals.rho == Fraction(3, 8)
    with pytest.raises(BudgetExceeded, match=r"spent ρ = 0.375 of its budget ρ = 0.5 \(ρ = 0.125 left\)"):
        check(budget, [Cost.zcdp(Fraction(1, 4)), Cost.pure(Fraction(1, 2))], Cost.zcdp(Fraction(1, 4)))
    with pytest.raises(InvalidParameter, match="not zCDP"):
        check(budget, [], Cost.approx(1, 1e-6))


def test_approx_budget_takes_the_best_rule() -> None:
    """Fifty releases at ε = 0.1 under (ε, δ) = (3.5, 10⁻⁶): the sum (5) would refuse, KOV (3.17) fits."""
    budget = Budget.approx(3.5, 1e-6)
    spent = [Cost.pure(0.1)] * 49
    totals = check(budget, spent, Cost.pure(0.1))
    rules = totals.rules_at(1e-6)
    assert rules["sequential"] == 5.0 and rules["advanced"] == pytest.approx(3.173, abs=1e-3)
    assert totals.epsilon_at(1e-6) == min(v for v in rules.values() if v is not None)
    gaussian = Cost.zcdp(Fraction(1, 2 * 9), epsilon=1.386, delta=1e-7)
    after = compose([*spent, Cost.pure(0.1), gaussian])
    assert after.rules_at(1e-6)["advanced"] is not None and after.delta_sum == Fraction(1, 10**7)
    with pytest.raises(BudgetExceeded, match=r"at δ = 1e-06"):
        check(budget, [*spent] * 3, Cost.pure(0.1))


def test_costs_round_trip_exactly() -> None:
    for cost in [Cost.pure(0.1), Cost.zcdp(Fraction(1, 3), epsilon=1, delta=1e-5), Cost.approx(2, 1e-9).times(3)]:
        assert Cost.from_dict(cost.to_dict()) == cost
    assert Cost.pure(0.1).to_dict() == {"kind": "pure", "count": 1, "epsilon": "1/10"}


# -- cross-check against Google's dp-accounting ---------------------------------------------------------


def theirs(event: dp_accounting.DpEvent, delta: float) -> float:
    """The tightest of dp-accounting's PLD and RDP accountants on the event (RDP has no subsampled Laplace)."""
    found = []
    for accountant in (pld.PLDAccountant(), rdp.RdpAccountant()):
        if accountant.supports(event):
            accountant.compose(event)
            found.append(accountant.get_epsilon(delta))
    return min(found)


CASES = [
    ("10 × Laplace ε=1", [Cost.pure(1)] * 10, dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 10)),
    ("50 × Laplace ε=0.1", [Cost.pure(0.1)] * 50,
     dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(10.0), 50)),
    ("1 × Gaussian σ=3", [Cost.zcdp(Fraction(1, 18))], dp_accounting.GaussianDpEvent(3.0)),
    ("20 × Gaussian σ=10", [Cost.zcdp(Fraction(1, 200))] * 20,
     dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(10.0), 20)),
    ("30 × Laplace ε=1 on a q=0.05 sample", [Cost.pure(subsampled_epsilon(1, 0.05))] * 30,
     dp_accounting.SelfComposedDpEvent(
         dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.LaplaceDpEvent(1.0)), 30)),
    ("Laplace ε=0.5 + Gaussian σ=4", [Cost.pure(0.5), Cost.zcdp(Fraction(1, 32))],
     dp_accounting.ComposedDpEvent([dp_accounting.LaplaceDpEvent(2.0), dp_accounting.GaussianDpEvent(4.0)])),
]  # fmt: skip


@pytest.mark.parametrize(("name", "costs", "event"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_we_are_never_more_optimistic_than_dp_accounting(name, costs, event, delta) -> None:
    ours = compose(costs).epsilon_at(delta)
    assert ours is not None
    reference = theirs(event, delta)
    assert ours >= reference, f"{name}: ours {ours} below dp-accounting's {reference}"
    assert ours <= 2.5 * reference  # and not absurdly loose: the ratio the benchmark prints


def test_a_release_at_the_budgets_delta_fits_by_summation() -> None:
    """δ = 1e-6 is read as 1/10⁶ on both sides: the float 1e-6 is slightly below 1/10⁶, and compared as a
    binary fraction it made the sequential rule refuse a release whose δ equals the budget's."""
    totals = compose([Cost.zcdp(Fraction(1, 50), epsilon=1, delta=1e-6)])
    assert totals.rules_at(1e-6)["sequential"] == 1.0
