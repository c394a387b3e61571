"""Trusted-curator (central) releases and the per-campaign privacy accountant.

A central campaign trades the device-side guarantee for accuracy: the aggregator **holds the raw answers**
(tallies where ``support[v]`` is the number of respondents with value v) and releases each histogram bin
plus noise (Dwork, McSherry, Nissim and Smith, TCC 2006). See ``docs/central.md`` for what that costs.

Noise (per bin, scale b = Δ/ε, Δ the histogram's ℓ1 sensitivity under the campaign's adjacency): the exact
discrete Laplace (default), the lattice Laplace (``laplace``) or the discrete Gaussian, defined, drawn and
given their exact intervals in :mod:`deniable.shared.noise` (the same definitions ``deniable compare`` and
``deniable audit`` simulate); this module draws them over the stored tallies and keeps the books.

Adjacency → sensitivity: ``add-remove`` (one person added or removed: one bin moves by 1) → Δ = 1;
``replace`` (one person's answer changed: one bin −1, another +1) → Δ = 2.

Accountant (pure ε-DP, persisted in ``campaigns.epsilon_spent``): a release spends its ε (sequential
composition, Dwork et al. 2006); a release grouped by a field spends ε **once** for all its groups, since
the groups are disjoint (parallel composition, McSherry 2009). A release is kept in a slot named by what
was asked (``group_by`` and noise, :func:`release_key`): the same release asked again is served from
``central_releases`` and spends nothing (post-processing), whatever reports arrived since; the CI level is
not part of the key because intervals are recomputed from the stored noisy counts (post-processing
again). To include newer reports the analyst asks for ``refresh``: a new draw over the current data that
spends ε again and replaces the slot. A release that would take the spent ε past the budget raises
:class:`BudgetExceeded` (expected as HTTP 409 Conflict).

Whether a request is served from the slot, and so whether it spends ε, depends on the request only, never
on the data: reusing a release only while no report arrives (keying it by the report count) would tell
an analyst, through ``cached`` and ``epsilon_spent``, for free, exactly when someone took part, and a key
hashing n could be inverted by trying every n.
ε values are taken as the decimals they are written as (``Decimal(repr(ε))``), both for the noise scale
and in the sum, so that the noise spends exactly what is charged and ten releases at 0.1 spend exactly 1.
The spent ε is summed in exact decimal arithmetic (an ``Inexact`` trap proves no digit is dropped), stored
as that exact decimal string (``campaigns.epsilon_spent``, TEXT since schema version 3) and compared with
the budget exactly: ε = 3.145282958874041 under a budget of 47.179244383110614 allows exactly 14 releases
(15·ε exceeds the budget by 10⁻¹⁵, which a float sum would lose).

Contract with the service (``aggregator/api``): the estimate route of a central campaign calls::

    with store.transaction() as conn:                      # BEGIN IMMEDIATE: atomic read-modify-write
        body = central.release(conn, campaign_id, epsilon=eps, k=k, categories=labels,
                               group_by=field_or_None, group_values=declared_values_or_None,
                               level=level, noise=noise, refresh=False)

``release`` reads the campaign's books (budget, adjacency, epsilon_spent) and its tallies (the raw counts
per ``(group_field, group_value)``, ``("", "")`` overall, of the one round ``''``: central campaigns do not
recur) and writes the kept release and the spent ε, all through :class:`~deniable.aggregator.store.Store`
methods on the caller's connection (the SQL lives in the store), and returns the JSON body: the shape of
``Estimate.to_dict`` (per category count, stderr, ci, proportion…) plus ``trust_model``, ``noise``,
``scale``, ``sensitivity``, ``adjacency``, ``epsilon_spent``, ``epsilon_remaining``, ``budget``, ``cached``
and ``release_key``; grouped, ``{"group_by": f, "groups": {value: estimate}, ...}`` (the local estimate's shape).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal, Inexact, InvalidOperation, Overflow, Rounded, Underflow
from fractions import Fraction
from typing import Any

from deniable.aggregator.database import Connection
from deniable.aggregator.store import Store
from deniable.shared.accounting import Budget, compose
from deniable.shared.errors import BudgetExceeded, InvalidConfig, UnknownCampaign
from deniable.shared.mechanisms.estimate import Estimate, Tally, normal_quantile
from deniable.shared.noise import (
    check_epsilon,
    check_noise,
    exact_epsilon,
    interval_widths,
    lattice_half_width,
    noise_pmf,
    noise_scale,
    noise_variance,
    sample_noise,
    sensitivity,
)

__all__ = ["charge", "release", "release_key", "remaining", "render", "spent_text"]

#: Exact decimal arithmetic: any sum of decimals written as floats (exponents −324..308) fits in 2,000
#: digits, and the traps turn a dropped digit into an error rather than a rounding.
_EXACT = Context(
    prec=2000, Emin=-10_000, Emax=10_000, traps=[Inexact, Rounded, InvalidOperation, Overflow, Underflow]
)


def spent_text(spent: Decimal) -> str:
    """The exact fixed-point decimal string stored for a spent ε (``Decimal(spent_text(d)) == d``)."""
    return format(spent, "f")


# -- the accountant --------------------------------------------------------------------------------


def remaining(spent: float | Decimal | str, budget: float) -> float:
    """The ε left: budget − spent, computed exactly in decimal, never below 0 (rounded to a float once)."""
    return float(max(_EXACT.subtract(exact_epsilon(budget), exact_epsilon(spent)), Decimal(0)))


def charge(spent: float | Decimal | str, budget: float, epsilon: float, *, campaign_id: str = "") -> Decimal:
    """The ε spent after a release of ``epsilon`` (sequential composition: spent + ε), exactly.

    ``spent`` is the exact decimal (a stored string or a Decimal; a float is read by its ``repr``).
    Raises :class:`BudgetExceeded` naming what is spent, left and requested when spent + ε > budget,
    compared exactly.
    """
    check_epsilon(epsilon)
    before = exact_epsilon(spent)
    total = _EXACT.add(before, exact_epsilon(epsilon))
    if total > exact_epsilon(budget):
        left = remaining(before, budget)
        name = f"campaign {campaign_id!r}" if campaign_id else "this campaign"
        raise BudgetExceeded(
            f"{name} has spent epsilon {float(before)} of its budget {float(budget)} "
            f"({left} left); this release needs {float(epsilon)}. Releases already made are served "
            "again for free; for new ones create a campaign with a larger budget",
            spent=float(before),
            remaining=left,
            requested=float(epsilon),
        )
    return total


def release_key(group_by: str | None, noise: str, **asked: Any) -> str:
    """The slot a release is kept in: what was asked (grouping, noise, a sampling rate…), nothing about
    the data. Unset options (``None``) leave the key as it was before they existed."""
    extra = {name: value for name, value in asked.items() if value is not None}
    canonical = json.dumps({"group_by": group_by or "", "noise": noise, **extra}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


# -- releases --------------------------------------------------------------------------------------


def poisson_subsample(counts: Sequence[int], rate: Fraction) -> list[int]:
    """Each of the ``counts[v]`` respondents kept independently with probability ``rate`` (a multiple of
    2^−32): Binomial(c, q) per bin, exactly, each record's coin one comparison of 32 bits of ``os.urandom``."""
    import os

    import numpy as np

    grid = 1 << 32
    if (rate * grid).denominator != 1:
        raise ValueError(f"the sampling rate must be a multiple of 2^-32, got {rate}")
    units = int(rate * grid)
    kept = []
    for c in counts:
        total, left = 0, int(c)
        while left:
            chunk = min(left, 1 << 20)
            coins = np.frombuffer(os.urandom(4 * chunk), dtype=np.uint32)
            total += int(np.count_nonzero(coins < units)) if units < grid else chunk
            left -= chunk
        kept.append(total)
    return kept


def _draw(
    tallies: Mapping[str, Tally],
    values: Sequence[str],
    *,
    k: int,
    epsilon: float,
    adjacency: str,
    noise: str,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Noise on every bin of every group; ``params`` from :func:`deniable.aggregator.accountant.release_cost`
    (``sigma2`` for Gaussian noise, ``sample`` for a Poisson subsample first)."""
    params = params or {}
    delta = sensitivity(adjacency)
    scale = Fraction(*params["sigma2"]) if noise == "gaussian" else noise_scale(epsilon, delta)
    rate = Fraction(*params["sample"]) if "sample" in params else None
    groups = {}
    for value in values:
        tally = tallies.get(value, Tally.zero(k))
        n, support = tally.n, list(tally.support)
        if len(support) != k:
            raise InvalidConfig(f"the stored tally has {len(support)} categories, the campaign {k}")
        if rate is not None:
            support = poisson_subsample(support, rate)
        counts = [float(int(c) + sample_noise(noise, scale)) for c in support]
        # Only the overall n under replace-one is public; otherwise n is itself a count (a person may be
        # added, removed or moved to another group), estimated from the sum of the noisy bins.
        public_n = adjacency == "replace" and list(values) == [""]
        groups[value] = {"n": n if public_n else None, "counts": counts}
    out = {
        "noise": noise,
        "epsilon": float(epsilon),
        "adjacency": adjacency,
        "sensitivity": delta,
        "scale": [scale.numerator, scale.denominator],
        "groups": groups,
    }
    if rate is not None:
        out["sample"] = [rate.numerator, rate.denominator]
    return out


#: Integer noise with an sd above this gets the normal interval: its law's steps are then below 0.4%.
_EXACT_CI_MAX_SD = 100.0


@dataclass(frozen=True)
class _ExactNoiseEstimate(Estimate):
    """A central estimate whose interval comes from the noise's exact law, not the normal approximation.

    Integer noise (``pmf``): :func:`~deniable.shared.noise.interval_widths`, coverage within half a point
    of the level (Wald intervals of the discrete Laplace cover 0.927 at ε = 1, 0.919 at 1.5, 0.905 at 3;
    above ε ≈ 4.2, P(Z = 0) alone exceeds 0.97 and the interval is the count itself). Lattice Laplace
    (``lattice_scale`` = b): c ± :func:`~deniable.shared.noise.lattice_half_width`, coverage the level to
    within one lattice step's mass, where the normal interval covers 0.9375 at every ε."""

    pmf: Callable[[int], float] | None = None
    lattice_scale: Fraction | None = None

    @property
    def interval_method(self) -> str:
        return "noise-exact" if self.pmf is not None or self.lattice_scale is not None else "normal"

    def ci(self, level: float = 0.95) -> tuple[Any, Any]:
        normal_quantile(level)
        if self.lattice_scale is not None:
            half = lattice_half_width(self.lattice_scale, level)
            return self.counts - half, self.counts + half
        if self.pmf is None:
            return super().ci(level)
        low, up = interval_widths(self.pmf, level)
        return self.counts - up, self.counts + low


def _estimate(stored: Mapping[str, Any], group: Mapping[str, Any]) -> Estimate:
    """Counts and variances of one group. On a subsample at rate q: ĉ = noisy/q, Var = Var(noise)/q² +
    c(1 − q)/q (the binomial thinning), c plugged in as max(ĉ, 0)."""
    import numpy as np

    counts = np.asarray(group["counts"], dtype=np.float64)
    scale = Fraction(*stored["scale"])
    variance = np.full(counts.shape, noise_variance(stored["noise"], scale))
    if "sample" in stored:
        q = float(Fraction(*stored["sample"]))
        counts = counts / q
        variance = variance / (q * q) + np.maximum(counts, 0.0) * (1 - q) / q
    n = group["n"] if group["n"] is not None else max(0, round(float(counts.sum())))
    small = bool(variance.size) and math.sqrt(float(variance[0])) <= _EXACT_CI_MAX_SD
    exact = "sample" not in stored  # a subsample's binomial thinning has no closed law: normal interval
    pmf = noise_pmf(stored["noise"], scale) if small and exact else None
    lattice = scale if exact and stored["noise"] == "laplace" else None
    return _ExactNoiseEstimate(
        mechanism=stored["noise"], epsilon=stored["epsilon"], n=int(n), counts=counts, variance=variance, pmf=pmf,
        lattice_scale=lattice,
    )  # fmt: skip


def render(
    stored: Mapping[str, Any],
    *,
    level: float,
    categories: Sequence[str] | None,
    group_by: str | None,
) -> dict[str, Any]:
    """The JSON body of a stored release at CI ``level`` (post-processing: no ε)."""
    scale = Fraction(*stored["scale"])
    meta = {
        "trust_model": "central",
        "noise": stored["noise"],
        "scale": float(scale),
        **({"sigma": math.sqrt(float(scale))} if stored["noise"] == "gaussian" else {}),
        **({"sample": float(Fraction(*stored["sample"]))} if "sample" in stored else {}),
        **({"cost": stored["cost"]} if "cost" in stored else {}),
        "sensitivity": stored["sensitivity"],
        "adjacency": stored["adjacency"],
        "n_public": all(group["n"] is not None for group in stored["groups"].values()),
    }
    groups = stored["groups"]
    if group_by is None:
        body: dict[str, Any] = _estimate(stored, groups[""]).to_dict(level=level, categories=categories)
        body.update(meta)
        return body
    rows = {
        value: _estimate(stored, group).to_dict(level=level, categories=categories)
        for value, group in sorted(groups.items())
    }
    return {"group_by": group_by, "epsilon": stored["epsilon"], "level": level, "groups": rows, **meta}


def _decimal(x: Fraction) -> Decimal:
    """A rational ε as an exact decimal (every ε here is a decimal or a float: its expansion ends)."""
    try:
        return _EXACT.divide(Decimal(x.numerator), Decimal(x.denominator))
    except (Inexact, Rounded):  # not a terminating decimal: round up, never under-report what was spent
        return Context(prec=40, rounding=ROUND_CEILING).divide(Decimal(x.numerator), Decimal(x.denominator))


def release(
    conn: Connection,
    campaign_id: str,
    *,
    epsilon: float,
    k: int,
    categories: Sequence[str] | None = None,
    group_by: str | None = None,
    group_values: Sequence[str] | None = None,
    level: float = 0.95,
    noise: str = "discrete-laplace",
    refresh: bool = False,
    delta: float | None = None,
    budget: Budget | None = None,
    group_size: int = 1,
    sample: float | None = None,
    role: str = "analyst",
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Release the campaign's noisy histogram (per group if ``group_by``), charging its cost at most once
    per draw.

    The release asked for before (same ``group_by``, noise and ``sample``) is served again for free;
    ``refresh`` draws a new one over the current data, charges it and replaces it. ``delta`` is the
    campaign's per-release δ (needed by Gaussian noise), ``budget`` its budget in its stated form (default:
    pure ε from the ``campaigns`` row), ``group_size`` the reports one respondent may contribute (group
    privacy) and ``sample`` a Poisson-subsampling rate applied before the noise (add-remove only). A new
    draw is appended to the release log with ``role``, the request's ``parameters`` and its cost.

    Must run inside the caller's write transaction (``Store.transaction()``, BEGIN IMMEDIATE) so that the
    budget check, the noise draw and the logged cost are one atomic step. ``group_values`` are the declared
    values of the field: each gets a release even when empty, so that which groups appear reveals nothing;
    without them, the observed values are released (their presence is then public). Raises
    :class:`BudgetExceeded` (nothing spent, nothing stored) when the release would pass the budget.
    """
    from deniable.aggregator import accountant

    if not conn.in_transaction:
        raise RuntimeError("central.release must run inside Store.transaction() (BEGIN IMMEDIATE)")
    check_epsilon(epsilon)
    check_noise(noise)
    normal_quantile(level)
    row = Store.central_books(conn, campaign_id)
    if row is None:
        raise UnknownCampaign(f"no campaign has the id {campaign_id!r}; list them with GET /api/v1/campaigns")
    trust_model, budget_epsilon, adjacency, stored_spent = row
    spent: str | Decimal = stored_spent
    if trust_model != "central" or adjacency is None or (budget is None and budget_epsilon is None):
        raise InvalidConfig(f"campaign {campaign_id!r} is not a central campaign with a budget")
    if budget is None:
        budget = Budget.pure(budget_epsilon if budget_epsilon is not None else 0)
    rate = accountant.subsample_rate(sample, adjacency)
    key = release_key(group_by, noise, sample=None if rate is None else str(rate))
    cached = None if refresh else Store.stored_release(conn, campaign_id, key)
    if cached is not None:
        stored, released_at = cached
        totals = compose(accountant.costs(conn, campaign_id))
    else:
        cost, params = accountant.release_cost(
            noise, epsilon=epsilon, delta=delta, adjacency=adjacency, group_size=group_size, sample=rate
        )
        released_at = dt.datetime.now(dt.UTC).isoformat()
        charged = accountant.charge_release(
            conn, campaign_id, budget, cost, release_key=key, at=released_at, epsilon=epsilon, role=role,
            parameters=dict(parameters or {"group_by": group_by, "noise": noise, "refresh": refresh}),
        )  # fmt: skip
        totals = charged.totals
        field = group_by or ""
        tallies = Store.group_tallies(conn, campaign_id, field)
        values = [""] if group_by is None else sorted(set(group_values or ()) | set(tallies))
        stored = _draw(tallies, values, k=k, epsilon=epsilon, adjacency=adjacency, noise=noise, params=params)
        stored["cost"] = {**cost.to_dict(), "text": cost.describe()}
        Store.keep_release(conn, campaign_id, key, epsilon=epsilon, result=stored, at=released_at)
        if totals.epsilon_sum is not None:
            spent = _decimal(totals.epsilon_sum)
            Store.set_epsilon_spent(conn, campaign_id, spent_text(spent))
    body = render(stored, level=level, categories=categories, group_by=group_by)
    books = accountant.totals_body(budget, totals, deltas=() if delta is None else (delta,))
    left = remaining(spent, float(budget.epsilon)) if budget.form == "pure" and budget.epsilon else books["left"]
    body.update(
        {
            "epsilon_spent": float(exact_epsilon(spent)),
            "epsilon_remaining": left,
            "budget": None if budget.epsilon is None else float(budget.epsilon),
            "accountant": books,
            "cached": cached is not None,
            "released_at": released_at,
            "release_key": key,
        }
    )
    return body
