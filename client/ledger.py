"""The device's ε ledger: what each campaign cost, the lifetime total, and the refusal rule.

Accounting (pure ε-DP, basic sequential composition, Dwork et al. 2006; Dwork & Roth 2014 Thm 3.16): the
device's total privacy loss over all campaigns is at most the sum of the ε it spent. A one-shot campaign
spends its ε once: a repeated ``submit`` re-sends the memoized report, which is post-processing of a report
already released and costs nothing (a fresh answer would let an observer average the noise away,
FORMULAS §5.4). A recurring campaign spends ε once per distinct true value (RAPPOR's permanent randomized
response; see :mod:`deniable.client.memo`). Two caps are enforced before anything is randomized:
``spent_on_campaign + ε ≤ max_epsilon_per_campaign`` and ``total_spent + ε ≤ lifetime_budget``.

All sums and comparisons use exact fractions of the ε the samplers actually use (the exact binary value of
each float, as ``Mechanism.epsilon_exact``): float rounding can never let a spend slip past a budget. The
flip side is honest too: ten spends of ε=0.1 (each 0.1000000000000000055…) exceed a budget of exactly 1 by
5.5e-17, and the tenth is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from deniable.shared.errors import BudgetExceeded

__all__ = ["CampaignSpend", "Ledger", "build_ledger", "check_budget", "fmt_epsilon"]


def fmt_epsilon(x: Fraction | float, digits: int = 6) -> str:
    """A short human form of an ε amount (``digits`` significant digits)."""
    return f"{float(x):.{digits}g}"


def _pair(left: Fraction, requested: Fraction) -> tuple[str, str]:
    """``left`` and ``requested`` printed with enough digits to show which is larger."""
    for digits in (6, 17):
        a, b = fmt_epsilon(left, digits), fmt_epsilon(requested, digits)
        if a != b:
            return a, b
    return f"{left}", f"{requested}"


@dataclass(frozen=True, kw_only=True)
class CampaignSpend:
    """ε spent on one campaign over ``reports`` distinct randomized reports; ``expired`` of its reports
    waited longer than the outbox's maximum age and were never delivered (their ε stays spent)."""

    campaign_id: str
    epsilon: float
    reports: int
    recurring: bool
    trust_model: str
    expired: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "campaign_id": self.campaign_id,
            "epsilon": self.epsilon,
            "reports": self.reports,
            "recurring": self.recurring,
            "trust_model": self.trust_model,
            "expired": self.expired,
        }


@dataclass(frozen=True)
class Ledger:
    """ε spent per campaign and in total, the lifetime budget and what is left of it."""

    campaigns: tuple[CampaignSpend, ...]
    spent: float
    lifetime_budget: float
    remaining: float
    max_epsilon_per_campaign: float

    def spent_on(self, campaign_id: str) -> float:
        """ε spent on ``campaign_id`` (0 if never answered)."""
        return next((c.epsilon for c in self.campaigns if c.campaign_id == campaign_id), 0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "campaigns": [c.to_dict() for c in self.campaigns],
            "spent": self.spent,
            "lifetime_budget": self.lifetime_budget,
            "remaining": self.remaining,
            "max_epsilon_per_campaign": self.max_epsilon_per_campaign,
        }


def build_ledger(
    spends: list[tuple[str, Fraction, int, bool, str]],
    lifetime_budget: Fraction,
    per_campaign: Fraction,
    expired: dict[str, int] | None = None,
) -> Ledger:
    """A :class:`Ledger` from ``(campaign_id, ε spent, reports, recurring, trust_model)`` rows, summed exactly,
    with ``expired`` reports per campaign."""
    total = sum((row[1] for row in spends), Fraction(0))
    gone = expired or {}
    return Ledger(
        campaigns=tuple(
            CampaignSpend(
                campaign_id=cid, epsilon=float(eps), reports=n, recurring=rec, trust_model=trust,
                expired=gone.get(cid, 0)
            ) for cid, eps, n, rec, trust in spends
        ),
        spent=float(total),
        lifetime_budget=float(lifetime_budget),
        remaining=float(max(lifetime_budget - total, Fraction(0))),
        max_epsilon_per_campaign=float(per_campaign),
    )


def check_budget(
    campaign_id: str,
    requested: Fraction,
    *,
    campaign_spent: Fraction,
    total_spent: Fraction,
    per_campaign: Fraction,
    lifetime_budget: Fraction,
) -> None:
    """Raise :class:`BudgetExceeded` unless spending ``requested`` keeps both caps; spends nothing itself."""
    if campaign_spent + requested > per_campaign:
        left = max(per_campaign - campaign_spent, Fraction(0))
        shown_left, shown_requested = _pair(left, requested)
        raise BudgetExceeded(
            f"campaign {campaign_id!r} asks for ε={shown_requested}, but this device allows at most "
            f"ε={fmt_epsilon(per_campaign)} per campaign and has spent ε={fmt_epsilon(campaign_spent)} on it "
            f"(ε={shown_left} left for it); nothing was sent. Raise max_epsilon_per_campaign only if "
            "the user agrees to a weaker guarantee",
            spent=float(campaign_spent),
            remaining=float(left),
            requested=float(requested),
        )
    if total_spent + requested > lifetime_budget:
        left = max(lifetime_budget - total_spent, Fraction(0))
        shown_left, shown_requested = _pair(left, requested)
        raise BudgetExceeded(
            f"campaign {campaign_id!r} asks for ε={shown_requested}, but this device has spent "
            f"ε={fmt_epsilon(total_spent)} of its lifetime budget ε={fmt_epsilon(lifetime_budget)} "
            f"(ε={shown_left} left); nothing was sent",
            spent=float(total_spent),
            remaining=float(left),
            requested=float(requested),
        )
