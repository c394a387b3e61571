"""The central campaign's accountant: what one release costs, the log of costs, the budget check, totals.

Each release's cost is recorded, in its natural form, in the ``cost_json`` of its row in the release log
(``release_log``, appended inside the release's write transaction, listed by ``GET .../releases``); the
budget check composes the whole log with the new cost by the best valid rule (:mod:`deniable.shared.accounting`).

What a release costs (per respondent, the unit of privacy):

* ``discrete-laplace`` / ``laplace`` at ε: pure ε-DP. On a Poisson subsample at rate q (add-remove
  neighbours only): ε′ = ln(1 + q(e^ε − 1)).
* ``gaussian`` at (ε, δ): the discrete Gaussian, ρ = Δ₂²/(2σ²)-zCDP **and** (ε, δ)-DP. Under add-remove
  (one bin moves by 1) σ² is calibrated on the exact discrete profile (CKS 2020, Thm 7); under replace (two
  bins move, Δ₂² = 2) on the zCDP conversion, the largest ρ whose (ε at δ) is at most ε.
* the exponential mechanism at ε: pure ε-DP (top-j by peeling: ε/j per answer).
* A campaign whose respondents may send up to g reports (``group_size``) is charged the group cost: g·ε,
  (gε, g·e^((g−1)ε)·δ), g²ρ.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from deniable.aggregator.database import Connection
from deniable.aggregator.store import Store
from deniable.shared.accounting import Budget, Cost, Totals, check, group_cost, subsampled_epsilon, zcdp_epsilon
from deniable.shared.errors import InvalidParameter
from deniable.shared.gaussian import L2_SENSITIVITY_SQUARED, calibrate_discrete_gaussian, zcdp_rho
from deniable.shared.limits import MAX_SUBSAMPLE_DENOMINATOR_BITS

__all__ = ["charge_release", "costs", "gaussian_sigma2", "release_cost", "subsample_rate", "totals_body"]

#: σ² of the Gaussian noise is kept on this grid (rounded up: more noise, never less).
_SIGMA2_GRID = 10**6


def _exact_epsilon(epsilon: float) -> Fraction:
    """ε as the decimal it is written as (0.1 is 1/10), as the noise scale uses it."""
    return Fraction(Decimal(repr(float(epsilon))))


def subsample_rate(q: float | None, adjacency: str) -> Fraction | None:
    """The Poisson-subsampling rate actually used: q rounded **down** to a multiple of 2^−32 (so each
    record's coin is one exact comparison of 32 CSPRNG bits). Amplification holds under add-remove only."""
    if q is None:
        return None
    if isinstance(q, bool) or not isinstance(q, int | float) or not math.isfinite(q) or not 0 < q <= 1:
        raise InvalidParameter(f"'sample' must be a rate in (0, 1], got {q!r}")
    if adjacency != "add-remove":
        raise InvalidParameter(
            "'sample' needs add-remove adjacency: the amplification ln(1 + q(e^ε − 1)) is proved for Poisson "
            f"subsampling with add-remove neighbours (Balle, Barthe, Gaboardi 2018), and this campaign uses {adjacency}"
        )
    grid = 1 << MAX_SUBSAMPLE_DENOMINATOR_BITS
    units = math.floor(Fraction(q) * grid)
    if units == 0:
        raise InvalidParameter(f"'sample' must be at least 2^-32, got {q!r}")
    return Fraction(units, grid)


@functools.lru_cache(maxsize=256)
def gaussian_sigma2(epsilon: float, delta: float, adjacency: str) -> Fraction:
    """σ² of the discrete Gaussian on every bin so that the histogram release is (ε, δ)-DP (see above)."""
    if adjacency == "add-remove":
        return calibrate_discrete_gaussian(float(epsilon), float(delta), 1)
    squared = L2_SENSITIVITY_SQUARED[adjacency]
    lo, hi = 0.0, max(1.0, float(epsilon) ** 2)  # bisect the largest ρ with ε(ρ, δ) ≤ ε (increasing in ρ)
    while zcdp_epsilon(hi, delta) <= epsilon:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo == 0:
        raise InvalidParameter(f"no Gaussian noise reaches (ε, δ) = ({epsilon:g}, {delta:g})")
    return Fraction(math.ceil(Fraction(squared) / (2 * Fraction(lo)) * _SIGMA2_GRID), _SIGMA2_GRID)


def release_cost(
    noise: str,
    *,
    epsilon: float,
    delta: float | None,
    adjacency: str,
    group_size: int = 1,
    sample: Fraction | None = None,
) -> tuple[Cost, dict[str, Any]]:
    """What one release costs each respondent, and the noise parameters that make it so."""
    if noise == "gaussian":
        if delta is None:
            raise InvalidParameter(
                "Gaussian noise needs the campaign's per-release 'delta' (an (ε, δ) guarantee); this campaign "
                "declares none: use noise=discrete-laplace, or create the campaign with a 'delta'"
            )
        if sample is not None:
            raise InvalidParameter("'sample' applies to Laplace noise (pure ε amplification) only")
        sigma2 = gaussian_sigma2(epsilon, delta, adjacency)
        rho = zcdp_rho(L2_SENSITIVITY_SQUARED[adjacency], sigma2)
        cost = Cost.zcdp(rho, epsilon=epsilon, delta=delta)
        params: dict[str, Any] = {"sigma2": [sigma2.numerator, sigma2.denominator]}
    else:
        cost = Cost.pure(_exact_epsilon(epsilon))
        params = {}
        if sample is not None:
            cost = Cost.pure(Fraction(subsampled_epsilon(cost.epsilon or 0, sample)))
            params["sample"] = [sample.numerator, sample.denominator]
    return group_cost(cost, group_size), params


def costs(conn: Connection, campaign_id: str) -> list[Cost]:
    """The campaign's logged release costs, oldest first."""
    return [Cost.from_dict(cost) for cost in Store.release_costs(conn, campaign_id)]


@dataclass(frozen=True)
class Charge:
    """The accountant's answer to a release: its cost and the campaign's totals after it."""

    cost: Cost
    totals: Totals


def charge_release(
    conn: Connection,
    campaign_id: str,
    budget: Budget,
    cost: Cost,
    *,
    release_key: str,
    at: str,
    epsilon: float,
    role: str,
    parameters: dict[str, Any],
) -> Charge:
    """Check ``cost`` against the budget given the logged costs and, if it fits, log the release with its
    cost (same transaction). Raises :class:`~deniable.shared.errors.BudgetExceeded` (nothing logged)
    naming spent, left and asked in the budget's own terms."""
    totals = check(budget, costs(conn, campaign_id), cost, campaign_id=campaign_id)
    Store.log_release(
        conn, campaign_id, released_at=at, role=role, epsilon=epsilon, release_key=release_key,
        parameters=parameters, cost=cost.to_dict(),
    )  # fmt: skip
    return Charge(cost, totals)


def totals_body(budget: Budget, totals: Totals, deltas: Sequence[float] = ()) -> dict[str, Any]:
    """The accountant's totals in every form: ``epsilon_sum``/``delta_sum`` (sequential), ``rho`` (zCDP),
    and the best ε at the budget's δ (or at each of ``deltas``) with each rule's value."""
    at = [float(budget.delta)] if budget.form == "approx" else list(deltas)
    body = totals.to_dict()
    body["at_delta"] = [totals.to_dict(d) for d in at if 0 < d < 1]
    body["budget"] = budget.to_dict()
    if budget.form == "zcdp":
        assert budget.rho is not None
        body["spent"] = body["rho"]
        body["left"] = float(max(Fraction(0), budget.rho - (totals.rho or Fraction(0))))
    elif budget.form == "pure":
        assert budget.epsilon is not None
        body["spent"] = body["epsilon_sum"]
        body["left"] = float(max(Fraction(0), budget.epsilon - (totals.epsilon_sum or Fraction(0))))
    else:
        spent = totals.epsilon_at(float(budget.delta))
        body["spent"], body["left"] = spent, max(0.0, float(budget.epsilon or 0) - (spent or 0.0))
    return body
