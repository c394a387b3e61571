"""The most common answers of a central campaign, released by the exponential mechanism.

``GET /api/v1/campaigns/<id>/top?j=1`` releases the j most common answers (j = 1: the mode) with the
exponential mechanism of McSherry and Talwar (FOCS 2007) on the raw counts, sampled exactly over the finite
set of answers (:mod:`deniable.shared.selection`): P(r) ∝ e^(c·count_r) with c = ε/j per answer under
add-remove (counts are monotone: adding a person never lowers a count) and c = ε/(2j) under replace. The
whole release costs pure ε (j peels at ε/j, sequential composition), times g for ``group_size`` g. The
counts themselves are not released, only which answers won.

Next to the answers the body states the utility guarantee (Dwork and Roth 2014, Thm 3.11): with
probability at least 1 − β each answer's count is within ``gap`` = ln(K/β)/c of the largest count among the
answers not yet chosen. Peeling draws exactly the law of the one-shot Gumbel top-j (``sampling`` in the
body; the proof in :mod:`deniable.shared.selection`). Like a histogram release, a top-j release is kept
in a slot (``release_key``) and served again for free; ``refresh`` draws again and is charged again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from deniable.aggregator import accountant, central
from deniable.aggregator.database import Connection
from deniable.aggregator.store import Store
from deniable.shared import noise
from deniable.shared.accounting import Budget, Cost, compose, group_cost
from deniable.shared.errors import InvalidParameter
from deniable.shared.limits import MAX_TOP
from deniable.shared.selection import score_scale, top_answers, utility_gap

__all__ = ["SAMPLING", "release_top"]

#: Failure probability of the stated utility bound.
UTILITY_BETA = 0.05

#: How the answers were drawn, as the body says it (the proof is in :mod:`deniable.shared.selection`).
SAMPLING = (
    "peeling: j exact exponential choices at scale c, integers only; the ordered answers have exactly the law "
    "of the one-shot Gumbel top-j (Durfee and Rogers 2019, Lemma 4.2), the Plackett-Luce law"
)


def _check_j(j: int, k: int) -> int:
    if isinstance(j, bool) or not isinstance(j, int) or not 1 <= j <= min(k, MAX_TOP):
        raise InvalidParameter(f"'j' must be an integer in [1, {min(k, MAX_TOP)}] (answers to release), got {j!r}")
    return j


def release_top(
    conn: Connection,
    campaign_id: str,
    *,
    epsilon: float,
    categories: Sequence[str],
    j: int,
    budget: Budget,
    adjacency: str,
    group_size: int = 1,
    refresh: bool = False,
    role: str = "analyst",
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Release the j most common answers (exponential mechanism, peeling), charging ε once per draw.

    Must run inside the caller's write transaction (``Store.transaction()``, BEGIN IMMEDIATE).
    """
    if not conn.in_transaction:
        raise RuntimeError("release_top must run inside Store.transaction() (BEGIN IMMEDIATE)")
    k = len(categories)
    _check_j(j, k)
    key = central.release_key(None, "exponential", top=j)
    cached = None if refresh else Store.stored_release(conn, campaign_id, key)
    if cached is not None:
        stored, released_at = cached
        totals = compose(accountant.costs(conn, campaign_id))
    else:
        eps = Fraction(noise.exact_epsilon(epsilon))
        cost = group_cost(Cost.pure(eps), group_size)
        released_at = dt.datetime.now(dt.UTC).isoformat()
        totals = accountant.charge_release(
            conn, campaign_id, budget, cost, release_key=key, at=released_at, epsilon=epsilon, role=role,
            parameters=dict(parameters or {"top": j, "refresh": refresh}),
        ).totals  # fmt: skip
        counts = Store.overall_support(conn, campaign_id, k)
        monotone = adjacency == "add-remove"
        chosen = top_answers(counts, j, epsilon=eps, monotone=monotone)
        scale = score_scale(eps / j, monotone=monotone)
        stored = {
            "mechanism": "exponential",
            "epsilon": float(epsilon),
            "adjacency": adjacency,
            "top": j,
            "indices": chosen,
            "scale": [scale.numerator, scale.denominator],
            "cost": {**cost.to_dict(), "text": cost.describe()},
        }
        Store.keep_release(conn, campaign_id, key, epsilon=epsilon, result=stored, at=released_at)
    scale = Fraction(*stored["scale"])
    gap = utility_gap(k, scale, UTILITY_BETA)
    return {
        "trust_model": "central",
        "mechanism": "exponential",
        "epsilon": stored["epsilon"],
        "adjacency": stored["adjacency"],
        "j": stored["top"],
        "answers": [categories[i] for i in stored["indices"]],
        "indices": stored["indices"],
        "sampling": SAMPLING,
        "cost": stored["cost"],
        "utility": {
            "beta": UTILITY_BETA,
            "gap": gap,
            "statement": (
                f"with probability at least {1 - UTILITY_BETA:.0%}, each answer's count is within {gap:.3g} "
                "of the largest count among the answers not chosen before it (exponential mechanism, "
                "Dwork and Roth 2014, Thm 3.11)"
            ),
        },
        "accountant": accountant.totals_body(budget, totals),
        "cached": cached is not None,
        "released_at": released_at,
        "release_key": key,
    }
