"""The central privacy accountant: costs in their natural form, budgets in three forms, best valid totals.

A release's **cost** is what its mechanism guarantees, recorded in the form the mechanism proves:

* pure ε-DP (Laplace, discrete Laplace, the exponential mechanism, subsampled pure releases);
* ρ-zCDP (the discrete Gaussian: ρ = Δ₂²/(2σ²)), optionally with the (ε, δ) it was calibrated to;
* (ε, δ)-DP (group privacy of an approximate release, anything proved only in that form).

A **budget** is stated as pure ε, as (ε, δ), or as ρ. The accountant composes the costs with every rule
that is valid for them and reports the smallest total (a minimum of valid bounds is a valid bound):

1. **Sequential composition** (Dwork, McSherry, Nissim, Smith 2006): Σε_i, Σδ_i, exactly (rationals).
2. **zCDP composition** (Bun and Steinke, TCC 2016): ε-DP implies (ε²/2)-zCDP (Prop. 1.4), ρ adds
   (Lemma 2.3); ρ converts to (ε, δ) by the Rényi bound of Canonne, Kamath and Steinke (2020, §2.3)
   ``ε(δ) = inf_{α>1} αρ + ln(1 − 1/α) + (ln(1/δ) − ln α)/(α − 1)``, never above Bun–Steinke's
   ρ + 2√(ρ ln(1/δ)) (Prop. 1.3), which is also tried.
3. **Advanced composition** of the pure releases, with δ′ = δ − Σδ of the others: for k releases of one
   ε, the optimal bound of Kairouz, Oh and Viswanath (ICML 2015, Thm 3.3), whose privacy profile is that
   of k-fold randomized response, ``δ(ε_g) = E[(1 − e^(ε_g − L))₊]`` with L = (k − 2l)ε, l ~ Bin(k, 1/(1+e^ε));
   for mixed ε, Dwork, Rothblum and Vadhan (FOCS 2010) ``√(2 ln(1/δ′) Σε_i²) + Σε_i(e^(ε_i) − 1)``. DRV is
   worse than the plain sum for few large releases (33.8 against 10 at k = 10, ε = 1, δ′ = 10⁻⁶), so the
   minimum with the sum is taken.

Exact where the rule is exact: sums of ε, δ and ρ are :class:`~fractions.Fraction` s, compared exactly
with the budget. The conversions (logarithms, square roots) are floats and are rounded **up** by a relative
10⁻⁹, so that a total is never reported below its true value. Checked against Google's ``dp-accounting``
(PLD and RDP accountants) in the tests: our totals are never below theirs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from deniable.shared.errors import BudgetExceeded, InvalidParameter

__all__ = [
    "BUDGET_FORMS",
    "Budget",
    "Cost",
    "Totals",
    "advanced_epsilon",
    "check",
    "compose",
    "group_cost",
    "kov_delta",
    "subsampled_epsilon",
    "zcdp_epsilon",
]

#: The forms a budget may be stated in.
BUDGET_FORMS: tuple[str, ...] = ("pure", "approx", "zcdp")

#: Relative outward rounding of every floating-point conversion (never report a total below the truth).
_UP = 1 + 1e-9

#: Largest k for the exact KOV bound (O(k) per evaluation, 60 bisection steps); DRV beyond it.
_KOV_MAX = 5_000

Number = Fraction | Decimal | int | float | str


def _exact(x: Number, name: str) -> Fraction:
    """A non-negative exact rational: a float by its shortest repr (0.1 is 1/10), a string as written."""
    if isinstance(x, bool):
        raise InvalidParameter(f"{name!r} must be a number, got {x!r}")
    try:
        if isinstance(x, float):
            if not math.isfinite(x):
                raise InvalidParameter(f"{name!r} must be finite, got {x!r}")
            value = Fraction(Decimal(repr(x)))
        else:
            value = Fraction(x)
    except (ValueError, TypeError, ZeroDivisionError):
        raise InvalidParameter(f"{name!r} must be a number, got {x!r}") from None
    if value < 0:
        raise InvalidParameter(f"{name!r} must be >= 0, got {x!r}")
    return value


def _text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _show(x: Fraction | float) -> str:
    """The shortest decimal that reads back as the float nearest x (0.1, 3.145282958874041, 1e-05)."""
    value = float(x)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


@dataclass(frozen=True)
class Cost:
    """One release's privacy cost in its natural form (``kind`` is ``pure``, ``zcdp`` or ``approx``).

    ``pure``: ε-DP (δ = 0). ``zcdp``: ρ-zCDP, and also (ε, δ)-DP when the calibration proved it exactly.
    ``approx``: (ε, δ)-DP only. A cost may stand for ``count`` identical releases (k-fold).
    """

    kind: str
    epsilon: Fraction | None = None
    delta: Fraction = Fraction(0)
    rho: Fraction | None = None
    count: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("pure", "zcdp", "approx"):
            raise InvalidParameter(f"'kind' must be pure, zcdp or approx, got {self.kind!r}")
        if self.kind == "zcdp" and self.rho is None:
            raise InvalidParameter("a zcdp cost needs rho")
        if self.kind != "zcdp" and self.epsilon is None:
            raise InvalidParameter(f"a {self.kind} cost needs epsilon")
        if self.kind == "pure" and self.delta:
            raise InvalidParameter("a pure cost has delta = 0; use kind='approx'")
        if not 0 <= self.delta < 1:
            raise InvalidParameter(f"'delta' must be in [0, 1), got {self.delta}")
        if self.count < 1:
            raise InvalidParameter(f"'count' must be >= 1, got {self.count}")

    @classmethod
    def pure(cls, epsilon: Number) -> Cost:
        """ε-DP."""
        return cls("pure", epsilon=_exact(epsilon, "epsilon"))

    @classmethod
    def zcdp(cls, rho: Number, *, epsilon: Number | None = None, delta: Number = 0) -> Cost:
        """ρ-zCDP; with ``epsilon`` and ``delta`` also the (ε, δ)-DP the release was calibrated to."""
        return cls(
            "zcdp",
            rho=_exact(rho, "rho"),
            epsilon=None if epsilon is None else _exact(epsilon, "epsilon"),
            delta=_exact(delta, "delta"),
        )

    @classmethod
    def approx(cls, epsilon: Number, delta: Number) -> Cost:
        """(ε, δ)-DP."""
        return cls("approx", epsilon=_exact(epsilon, "epsilon"), delta=_exact(delta, "delta"))

    def times(self, count: int) -> Cost:
        """The same release made ``count`` times."""
        return Cost(self.kind, self.epsilon, self.delta, self.rho, self.count * count)

    @property
    def implied_rho(self) -> Fraction | None:
        """ρ of one release: its own for zCDP, ε²/2 for pure ε-DP (Bun–Steinke Prop. 1.4), none for (ε, δ)."""
        if self.kind == "zcdp":
            return self.rho
        if self.kind == "pure":
            assert self.epsilon is not None
            return self.epsilon * self.epsilon / 2
        return None

    @property
    def has_epsilon_delta(self) -> bool:
        """Whether the cost states an (ε, δ) (pure costs do, with δ = 0)."""
        return self.epsilon is not None

    def describe(self) -> str:
        """The cost as a person reads it: ``ε = 0.5``, ``ρ = 0.125``, ``(ε, δ) = (1, 1e-05)``."""
        times = f"{self.count} × " if self.count > 1 else ""
        if self.kind == "pure":
            return f"{times}ε = {_show(self.epsilon or 0)}"
        if self.kind == "approx":
            return f"{times}(ε, δ) = ({_show(self.epsilon or 0)}, {float(self.delta):.3g})"
        also = f", (ε, δ) = ({_show(self.epsilon)}, {float(self.delta):.3g})" if self.epsilon is not None else ""
        return f"{times}ρ = {_show(self.rho or 0)}{also}"

    def to_dict(self) -> dict[str, Any]:
        """Exact, JSON-ready: rationals as ``"num/den"`` strings."""
        out: dict[str, Any] = {"kind": self.kind, "count": self.count}
        if self.epsilon is not None:
            out["epsilon"] = _text(self.epsilon)
        if self.delta:
            out["delta"] = _text(self.delta)
        if self.rho is not None:
            out["rho"] = _text(self.rho)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cost:
        """The inverse of :meth:`to_dict`."""

        def opt(key: str) -> Fraction | None:
            return None if data.get(key) is None else Fraction(str(data[key]))

        return cls(
            str(data["kind"]), opt("epsilon"), opt("delta") or Fraction(0), opt("rho"), int(data.get("count", 1))
        )


@dataclass(frozen=True)
class Budget:
    """A total privacy budget: pure ε, (ε, δ), or ρ (zCDP)."""

    form: str
    epsilon: Fraction | None = None
    delta: Fraction = Fraction(0)
    rho: Fraction | None = None

    def __post_init__(self) -> None:
        if self.form not in BUDGET_FORMS:
            raise InvalidParameter(f"a budget form must be one of {', '.join(BUDGET_FORMS)}, got {self.form!r}")
        if self.form == "zcdp" and (self.rho is None or self.rho <= 0):
            raise InvalidParameter("a zCDP budget needs rho > 0")
        if self.form != "zcdp" and (self.epsilon is None or self.epsilon <= 0):
            raise InvalidParameter(f"a {self.form} budget needs epsilon > 0")
        if self.form == "approx" and not 0 < self.delta < 1:
            raise InvalidParameter(f"an (ε, δ) budget needs delta in (0, 1), got {float(self.delta)}")

    @classmethod
    def pure(cls, epsilon: Number) -> Budget:
        return cls("pure", epsilon=_exact(epsilon, "budget"))

    @classmethod
    def approx(cls, epsilon: Number, delta: Number) -> Budget:
        return cls("approx", epsilon=_exact(epsilon, "budget"), delta=_exact(delta, "budget_delta"))

    @classmethod
    def zcdp(cls, rho: Number) -> Budget:
        return cls("zcdp", rho=_exact(rho, "budget_rho"))

    def describe(self) -> str:
        if self.form == "pure":
            return f"ε = {_show(self.epsilon or 0)}"
        if self.form == "approx":
            return f"(ε, δ) = ({_show(self.epsilon or 0)}, {float(self.delta):.3g})"
        return f"ρ = {_show(self.rho or 0)}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"form": self.form}
        if self.epsilon is not None:
            out["epsilon"] = float(self.epsilon)
        if self.form == "approx":
            out["delta"] = float(self.delta)
        if self.rho is not None:
            out["rho"] = float(self.rho)
        return out


# -- conversions ------------------------------------------------------------------------------------


def zcdp_epsilon(rho: Fraction | float, delta: float) -> float:
    """The smallest ε for which ρ-zCDP implies (ε, δ)-DP, by the CKS 2020 bound (min with Bun–Steinke).

    ``ε(α) = αρ + ln(1 − 1/α) + (ln(1/δ) − ln α)/(α − 1)`` is a valid ε at every α > 1; it is minimised on
    a grid refined by golden section. Rounded up by 10⁻⁹ relative.
    """
    r = float(rho)
    if r == 0:
        return 0.0
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    log_inv = math.log(1 / delta)

    def eps_at(alpha: float) -> float:
        return alpha * r + math.log1p(-1 / alpha) + (log_inv - math.log(alpha)) / (alpha - 1)

    best = r + 2 * math.sqrt(r * log_inv)
    grid = [1 + 10 ** (k / 20) for k in range(-160, 141)]
    values = [eps_at(a) for a in grid]
    i = min(range(len(grid)), key=values.__getitem__)
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    best = min(best, values[i])
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if eps_at(a) < eps_at(b):
            hi = b
        else:
            lo = a
        best = min(best, eps_at(a), eps_at(b))
    return best * _UP


def _log_binom_pmf(k: int, i: int, p: float) -> float:
    return math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) + i * math.log(p) + (k - i) * math.log1p(-p)


def _kov_profile(k: int, epsilon: float) -> list[tuple[float, float]]:
    """(loss, probability) of k-fold ε-randomized response with loss > 0, largest loss first."""
    p_flip = 1 / (1 + math.exp(epsilon))
    return [
        ((k - 2 * flips) * epsilon, math.exp(_log_binom_pmf(k, flips, p_flip)))
        for flips in range(k + 1)
        if k - 2 * flips > 0
    ]


def _profile_delta(profile: Sequence[tuple[float, float]], total: float) -> float:
    return math.fsum(p * -math.expm1(total - loss) for loss, p in profile if loss > total)


def kov_delta(k: int, epsilon: float, total: float) -> float:
    """δ at which k-fold ε-DP is (``total``, δ)-DP, optimally (Kairouz, Oh, Viswanath 2015, Thm 3.3).

    The k-fold composition of ε-randomized response is the worst case; its privacy loss is L = (k − 2l)ε
    with l ~ Bin(k, 1/(1+e^ε)), and δ = E[(1 − e^(total − L))₊].
    """
    return _profile_delta(_kov_profile(k, epsilon), total)


def advanced_epsilon(epsilons: Sequence[Fraction], delta: float) -> float:
    """The total ε of pure releases at slack δ′ = ``delta``: the best of KOV (one ε), DRV and the sum.

    Rounded up by 10⁻⁹ relative; the plain sum is exact and returned as is when it is the smallest.
    """
    plain = float(sum(epsilons, Fraction(0)))
    if not epsilons or delta <= 0:
        return plain
    floats = [float(e) for e in epsilons]
    drv = math.sqrt(2 * math.log(1 / delta) * math.fsum(e * e for e in floats))
    drv += math.fsum(e * math.expm1(e) for e in floats)
    best = min(plain, drv * _UP)
    if len(set(epsilons)) == 1 and len(epsilons) <= _KOV_MAX:
        profile = _kov_profile(len(epsilons), floats[0])
        lo, hi = 0.0, len(epsilons) * floats[0]
        if _profile_delta(profile, 0.0) > delta:
            for _ in range(60):
                mid = (lo + hi) / 2
                if _profile_delta(profile, mid) > delta:
                    lo = mid
                else:
                    hi = mid
        else:
            hi = 0.0
        best = min(best, hi * _UP)
    return best


def subsampled_epsilon(epsilon: Number, q: Number) -> float:
    """ε′ = ln(1 + q(e^ε − 1)): an ε-DP release on a Poisson subsample (each record kept with probability q)
    is ε′-DP under add-remove neighbours (Balle, Barthe, Gaboardi, NeurIPS 2018; Li, Qardaji, Su 2012).

    Tight in the "add a record" direction; the "remove" direction only reaches −ln(1 − q + q e^(−ε)).
    ε′(q = 0.01, ε = 1) = 0.0170369. Rounded up by 10⁻⁹ relative.
    """
    eps, rate = float(_exact(epsilon, "epsilon")), float(_exact(q, "q"))
    if not 0 < rate <= 1:
        raise InvalidParameter(f"'q' must be in (0, 1], got {q!r}")
    return math.log1p(rate * math.expm1(eps)) * _UP


def group_cost(cost: Cost, group_size: int) -> Cost:
    """The cost to a respondent who contributes up to ``group_size`` = g reports (group privacy).

    Pure: g·ε (Dwork and Roth 2014, Thm 2.2). (ε, δ): (gε, g·e^((g−1)ε)·δ) (Vadhan 2017, Lemma 2.2).
    zCDP: g²ρ (Bun and Steinke 2016, Prop. 1.9); a calibrated (ε, δ) rides along by the (ε, δ) rule.
    The (ε, δ) rule needs e^((g−1)ε), irrational: its δ is rounded **up** to a rational.
    """
    g = int(group_size)
    if g < 1:
        raise InvalidParameter(f"'group_size' must be an integer >= 1, got {group_size!r}")
    if g == 1:
        return cost

    def scaled_delta(eps: Fraction, delta: Fraction) -> Fraction:
        if delta == 0:
            return Fraction(0)
        value = g * math.exp((g - 1) * float(eps)) * float(delta) * _UP
        return min(Fraction(value), Fraction(1) - Fraction(1, 10**12))

    eps = None if cost.epsilon is None else cost.epsilon * g
    if cost.kind == "pure":
        return Cost("pure", eps, Fraction(0), None, cost.count)
    if cost.kind == "approx":
        assert cost.epsilon is not None
        return Cost("approx", eps, scaled_delta(cost.epsilon, cost.delta), None, cost.count)
    assert cost.rho is not None
    delta = Fraction(0) if cost.epsilon is None else scaled_delta(cost.epsilon, cost.delta)
    return Cost("zcdp", eps, delta, cost.rho * g * g, cost.count)


# -- composition ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    """What a list of costs adds up to, by each rule (``None`` where a rule does not apply).

    ``epsilon_sum``/``delta_sum``: sequential composition of every (ε, δ) form (``None`` if a zCDP cost has
    none); ``rho``: Σρ over pure (ε²/2) and zCDP costs (``None`` if an (ε, δ)-only cost is present).
    """

    releases: int
    epsilon_sum: Fraction | None
    delta_sum: Fraction
    rho: Fraction | None
    pure_epsilons: tuple[Fraction, ...] = field(repr=False, default=())
    approx: tuple[Fraction, Fraction] = field(repr=False, default=(Fraction(0), Fraction(0)))
    gaussian_rho: Fraction = field(repr=False, default=Fraction(0))

    def epsilon_at(self, delta: float) -> float | None:
        """The smallest total ε at total δ ≤ ``delta`` over the valid rules (``None``: no rule applies)."""
        if self.releases == 0:
            return 0.0
        valid = [eps for eps in self.rules_at(delta).values() if eps is not None]
        return min(valid) if valid else None

    def rules_at(self, delta: float) -> dict[str, float | None]:
        """Each rule's total ε at total δ ≤ ``delta`` (``None`` where the rule does not apply).

        ``advanced``: the (ε, δ)-only costs summed, the zCDP costs converted together at a share δ_a of the
        slack and the pure costs composed by KOV/DRV at the rest δ_b (δ_a + δ_b = δ − Σδ of the (ε, δ)
        costs; a few splits are tried, each one valid).
        """
        seq = None
        exact_delta = _exact(delta, "delta")  # as written: 1e-6 is 1/10⁶, as the costs' δ are
        if self.epsilon_sum is not None and self.delta_sum <= exact_delta:
            seq = float(self.epsilon_sum)
        zc = zcdp_epsilon(self.rho, delta) if self.rho is not None and 0 < delta < 1 else None
        approx_eps, approx_delta = self.approx
        slack = float(exact_delta - approx_delta)
        adv = None
        if slack > 0 and (self.pure_epsilons or self.gaussian_rho):
            both = self.pure_epsilons and self.gaussian_rho
            shares = (0.5, 0.1, 0.9) if both else (0.0 if self.pure_epsilons else 1.0,)
            options = []
            for share in shares:
                gauss = zcdp_epsilon(self.gaussian_rho, share * slack) if self.gaussian_rho else 0.0
                pure = advanced_epsilon(self.pure_epsilons, (1 - share) * slack) if self.pure_epsilons else 0.0
                options.append(gauss + pure)
            adv = float(approx_eps) + min(options)
        return {"sequential": seq, "zcdp": zc, "advanced": adv}

    def to_dict(self, delta: float | None = None) -> dict[str, Any]:
        """The totals in every form: sums, ρ, and ε at ``delta`` by the best rule and by each rule."""
        out: dict[str, Any] = {
            "releases": self.releases,
            "epsilon_sum": None if self.epsilon_sum is None else float(self.epsilon_sum),
            "delta_sum": float(self.delta_sum),
            "rho": None if self.rho is None else float(self.rho),
        }
        if delta is not None and 0 < delta < 1:
            out["delta"] = delta
            out["epsilon"] = self.epsilon_at(delta)
            out["by_rule"] = self.rules_at(delta)
        return out


def compose(costs: Iterable[Cost]) -> Totals:
    """Compose the costs by every valid rule (see the module docstring)."""
    releases = 0
    eps_sum: Fraction | None = Fraction(0)
    delta_sum = Fraction(0)
    rho: Fraction | None = Fraction(0)
    pure: list[Fraction] = []
    approx_eps, approx_delta, gaussian_rho = Fraction(0), Fraction(0), Fraction(0)
    for cost in costs:
        releases += cost.count
        if cost.epsilon is None:
            eps_sum = None
        elif eps_sum is not None:
            eps_sum += cost.epsilon * cost.count
            delta_sum += cost.delta * cost.count
        if cost.kind == "pure":
            assert cost.epsilon is not None
            pure.extend([cost.epsilon] * cost.count)
        elif cost.kind == "approx":
            assert cost.epsilon is not None
            approx_eps += cost.epsilon * cost.count
            approx_delta += cost.delta * cost.count
        else:
            assert cost.rho is not None
            gaussian_rho += cost.rho * cost.count
        implied = cost.implied_rho
        rho = None if implied is None or rho is None else rho + implied * cost.count
    if eps_sum is None:
        delta_sum = Fraction(0)
    return Totals(releases, eps_sum, delta_sum, rho, tuple(pure), (approx_eps, approx_delta), gaussian_rho)


def _spent_in(budget: Budget, totals: Totals) -> Fraction | float | None:
    if budget.form == "pure":
        return totals.epsilon_sum if totals.delta_sum == 0 else None
    if budget.form == "zcdp":
        return totals.rho
    return totals.epsilon_at(float(budget.delta))


def check(budget: Budget, spent: Sequence[Cost], asked: Cost, *, campaign_id: str = "") -> Totals:
    """The totals after ``asked`` joins ``spent``, or :class:`BudgetExceeded` naming spent, left and asked.

    Pure budgets take pure costs only (sum ≤ ε exactly); ρ budgets take pure and zCDP costs (Σρ ≤ ρ
    exactly); (ε, δ) budgets take any cost, by the best rule at the budget's δ. A cost the budget's form
    cannot express (a Gaussian release under a pure ε budget) is :class:`InvalidParameter`.
    """
    name = f"campaign {campaign_id!r}" if campaign_id else "this campaign"
    if budget.form == "pure" and asked.kind != "pure":
        raise InvalidParameter(
            f"{name} has a pure ε budget, which cannot pay for a release costing {asked.describe()} (not pure "
            "DP): ask for Laplace noise, or create the campaign with an (ε, δ) or ρ budget"
        )
    if budget.form == "zcdp" and asked.implied_rho is None:
        raise InvalidParameter(f"{name} has a ρ (zCDP) budget, which cannot pay for {asked.describe()} (not zCDP)")
    before = compose(spent)
    after = compose([*spent, asked])
    used, total = _spent_in(budget, before), _spent_in(budget, after)
    limit = budget.rho if budget.form == "zcdp" else budget.epsilon
    assert limit is not None
    if total is None or total > limit:
        used_value = 0.0 if used is None else float(used)
        left = max(0.0, float(limit) - used_value)
        unit = "ρ" if budget.form == "zcdp" else "ε"
        at = f" at δ = {float(budget.delta):.3g}" if budget.form == "approx" else ""
        would = "" if total is None else f"; together they would spend {unit} = {_show(total)}{at}"
        raise BudgetExceeded(
            f"{name} has spent {unit} = {_show(used_value)}{at} of its budget {budget.describe()} "
            f"({unit} = {_show(left)} left); this release costs {asked.describe()}{would}. Releases already "
            "made are served again for free; for new ones create a campaign with a larger budget",
            spent=used_value,
            remaining=left,
            requested=float(asked.implied_rho or 0) if budget.form == "zcdp" else float(asked.epsilon or 0),
        )
    return after
