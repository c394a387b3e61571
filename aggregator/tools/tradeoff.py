"""The privacy-loss view of a mechanism: its privacy-loss distribution and trade-off curve (``deniable audit
--tradeoff``), from the exact law and from samples, against the curve its claim allows.

For a mechanism M on neighbours D₀, D₁ with laws P = M(D₀), Q = M(D₁):

* the **privacy loss** is L(y) = ln P(y)/Q(y), y ~ P; ε-DP means |L| ≤ ε, and (ε, δ)-DP means
  δ ≥ E_P[(1 − e^(ε − L))₊] (the hockey-stick divergence), in both directions;
* the **trade-off function** T(P, Q)(α) = inf{β_φ : α_φ ≤ α} is the smallest type II error of a test of D₀
  against D₁ at type I error α (Neyman–Pearson: reject D₀ on the outputs of smallest L first). M is
  (ε, δ)-DP iff T ≥ f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^(−ε)(1 − δ − α)) for every pair (Dong, Roth and
  Su, "Gaussian differential privacy", JRSS-B 2022, Prop. 2.5), and μ-GDP iff T ≥ G_μ(α) =
  Φ(Φ⁻¹(1 − α) − μ).

The exact curve comes from the law where it is known (randomized response, OUE and OLH on their support
patterns, the discrete Laplace, the lattice Laplace, the discrete Gaussian, Example 3). The lattice Laplace
(``laplace``, the central sampler for the textbook Laplace: the discrete Laplace on 2^−20·ℤ) is tabulated
exactly in lattice steps: a count moves by M = 2^20 steps, so with a = e^(−ε/M) per step its loss is ε on
every output ≤ 0, −ε on every output ≥ M and ε(M − 2y)/M in between; the outputs on each side are merged
into one code (their loss is constant, so the trade-off curve is unchanged) and the M − 1 outputs between
are kept one by one. The **empirical** curve uses the same
tests (the outputs ranked by their exact privacy loss, so no event is fitted to the data and every sample
measures) and Clopper–Pearson upper limits α_U, β_U at each cut, Bonferroni-corrected over the cuts and
both directions. The claim is **refuted** when some cut has β_U < f(α_U): with probability ≥ the
confidence the true point lies below-left of (α_U, β_U), and f is decreasing, so the true curve would be
below the claimed one there. The same cuts give a lower bound on ε at the claimed δ (FORMULAS part 2,
§5.5): ε_LB = max over cuts of ln((1 − δ − β_U)/α_U) and ln((1 − δ − α_U)/β_U).

Ranking outputs by the exact privacy loss is also the better event for the ε bound of the auditor: the
set {L ≥ ε} is the most distinguishing event (it attains δ(ε)), and fixing it from the law frees the half
of the samples the event search spends on selection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deniable.shared.errors import InvalidParameter

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Claim",
    "ExactLaw",
    "TradeoffResult",
    "audit_tradeoff",
    "exact_law",
    "gdp_curve",
    "lattice_laplace_law",
    "lattice_steps_sampler",
    "law_radius",
    "law_sampler",
    "privacy_curve",
    "tradeoff",
    "tradeoff_curve",
]


#: Most cuts of the ranked outputs the empirical curve is measured at (Bonferroni over them).
_MAX_CUTS = 64


@dataclass(frozen=True)
class Claim:
    """What a mechanism claims: (ε, δ)-DP, and optionally μ-GDP."""

    epsilon: float
    delta: float = 0.0
    mu: float | None = None

    def curve(self, alpha: Any) -> Any:
        """The smallest type II error the claim allows at ``alpha``: f_{ε,δ}, and with μ also G_μ (a
        mechanism claiming both must lie above both, so the larger one binds)."""
        import numpy as np

        allowed = privacy_curve(alpha, self.epsilon, self.delta)
        return allowed if self.mu is None else np.maximum(allowed, gdp_curve(alpha, self.mu))


def privacy_curve(alpha: Any, epsilon: float, delta: float = 0.0) -> Any:
    """f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^(−ε)(1 − δ − α))."""
    import numpy as np

    a = np.asarray(alpha, dtype=np.float64)
    lines = [np.zeros_like(a), 1 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1 - delta - a)]
    return np.maximum.reduce(lines)


def gdp_curve(alpha: Any, mu: float) -> Any:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth, Su 2022)."""
    import numpy as np
    from scipy.stats import norm

    a = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, 1.0)
    return norm.cdf(norm.ppf(1 - a) - mu)


@dataclass(frozen=True)
class ExactLaw:
    """A mechanism's exact output law on D₀ and D₁ over finitely many outcome codes (the codes its
    :class:`~deniable.aggregator.tools.audit.Neighbours` sampler returns)."""

    name: str
    codes: Any  # int64 array
    p0: Any  # float64 arrays, each summing to 1 (up to a truncated tail below 10⁻³⁰⁰)
    p1: Any
    losses: Any = None  # the loss in closed form where the pmfs underflow in the tails

    def loss(self) -> Any:
        """L(y) = ln P₀(y)/P₁(y) per outcome (±∞ where one side is 0)."""
        import numpy as np

        if self.losses is not None:
            return self.losses
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(self.p0) - np.log(self.p1)


def tradeoff_curve(p: Any, q: Any, order: Any) -> tuple[Any, Any]:
    """The Neyman–Pearson points (α, β) of rejecting D₀ on the outcomes in ``order`` (a prefix at a time)."""
    import numpy as np

    alpha = np.concatenate([[0.0], np.cumsum(np.asarray(p)[order])])
    beta = 1.0 - np.concatenate([[0.0], np.cumsum(np.asarray(q)[order])])
    return np.clip(alpha, 0.0, 1.0), np.clip(beta, 0.0, 1.0)


def _levels(loss: Any) -> Any:
    """Outcome order of increasing loss (reject D₀ where L is smallest), ties kept together."""
    import numpy as np

    return np.argsort(loss, kind="stable")


def _cuts(mass: Any) -> Any:
    """Prefix ends of the ranked outputs at which the curve is measured: where the exact mass under the
    tested input crosses 10⁻⁷ … 1/2 … 1 − 10⁻⁷ (log-spaced, so the tails, where ε shows, are covered)."""
    import numpy as np

    tail = np.logspace(-7, math.log10(0.5), _MAX_CUTS // 2)
    targets = np.unique(np.concatenate([tail, 1 - tail]))
    ends = np.unique(np.clip(np.searchsorted(mass, targets) + 1, 1, max(mass.size - 1, 1)))
    return ends


def law_radius(mechanism: str, *, epsilon: float, delta: float = 1e-5) -> int:
    """Outputs ±radius hold all but 10⁻³⁰⁰ of a central noise's mass (discrete Laplace, discrete Gaussian)."""
    from deniable.shared.gaussian import calibrate_discrete_gaussian

    if mechanism == "gaussian":
        return math.ceil(38 * math.sqrt(float(calibrate_discrete_gaussian(epsilon, delta, 1)))) + 2
    return math.ceil(700 / epsilon) + 2


def lattice_laplace_law(epsilon: float) -> ExactLaw:
    """The exact law of the lattice Laplace release of one count (0 on D₀, 1 on D₁), in lattice steps.

    Codes 0 … M (M = 2^20 steps per unit): code 0 is every output ≤ 0, code M every output ≥ M, code y the
    output y·2^−20. With a = e^(−ε/M) and c = (1−a)/(1+a): P₀(≤ 0) = 1/(1+a), P₀(y) = c·a^y,
    P₀(≥ M) = a^M/(1+a); P₁ is P₀ mirrored about M/2. The loss is exactly ε, ε(M − 2y)/M and −ε.
    """
    import numpy as np

    from deniable.shared.noise import LATTICE_BITS

    steps = 2**LATTICE_BITS
    log_a = -epsilon / steps
    a = math.exp(log_a)
    ys = np.arange(steps + 1)
    inner = (1 - a) / (1 + a) * np.exp(log_a * ys[1:-1].astype(np.float64))
    p0 = np.concatenate([[1 / (1 + a)], inner, [a**steps / (1 + a)]])
    p1 = p0[::-1].copy()
    losses = epsilon * (steps - 2 * ys.astype(np.float64)) / steps
    return ExactLaw(f"laplace(count, lattice 2^-{LATTICE_BITS})", ys, p0, p1, losses)


def lattice_steps_sampler(
    sample: Callable[[int, int, np.random.Generator], Any],
) -> Callable[[int, int, np.random.Generator], Any]:
    """The audit's lattice-Laplace sampler (outputs in lattice steps) folded onto the codes of
    :func:`lattice_laplace_law`: outputs ≤ 0 to 0, outputs ≥ M to M."""
    import numpy as np

    from deniable.shared.noise import LATTICE_BITS

    def folded(which: int, size: int, rng: np.random.Generator) -> Any:
        return np.clip(np.asarray(sample(which, size, rng)), 0, 2**LATTICE_BITS)

    return folded


def exact_law(
    mechanism: str, *, epsilon: float, k: int = 2, delta: float = 1e-5, p: float = 0.1, radius: int | None = None,
    m: int = 2, steps: int = 8,
) -> ExactLaw:
    """The exact law of a mechanism on the audit's neighbours (any name of :func:`.audit.auditable`: the
    registry's mechanisms of every kind, asked now, then the central noises and subsampling);
    central noise is tabulated on ±``radius`` (default :func:`law_radius`); ``m`` and ``steps`` shape the
    multi-select and number questions as in :func:`deniable.aggregator.tools.audit.audit`."""  # fmt: skip
    import numpy as np

    from deniable.shared.gaussian import calibrate_discrete_gaussian, discrete_gaussian_pmf
    from deniable.shared.mechanisms import MECHANISMS
    from deniable.shared.mechanisms.mean import MEAN_MECHANISMS
    from deniable.shared.mechanisms.sets import SET_MECHANISMS

    from .audit import auditable, local_mechanism

    if mechanism in MECHANISMS:  # the law of the support pattern, as the mechanism states it
        mech = local_mechanism(mechanism, epsilon=epsilon, k=k)
        codes = np.array([0, 1, 2, 3])  # 2·[0 ∈ S] + [1 ∈ S], as the audit codes support patterns
        p0 = np.array(mech.support_pattern_law())
        p1 = p0[[0, 2, 1, 3]]
        keep = (p0 + p1) > 0
        return ExactLaw(f"{mech.name}(k={mech.k})", codes[keep], p0[keep], p1[keep])
    if mechanism == "laplace":
        return lattice_laplace_law(epsilon)
    if mechanism in MEAN_MECHANISMS:  # every report's exact probability at x = −1 and x = +1
        from deniable.shared.mechanisms.mean import mean_mechanism_from_name

        number = mean_mechanism_from_name(mechanism, epsilon=epsilon, steps=steps)
        p0 = np.array([float(x) for x in number.pmf(0)])
        p1 = np.array([float(x) for x in number.pmf(number.steps)])
        return ExactLaw(f"{number.name}(steps={steps})", np.arange(number.outputs), p0, p1)
    if mechanism in SET_MECHANISMS:  # every report's exact probability under the worst pair of answers
        from deniable.shared.mechanisms.sets import set_mechanism_from_name

        from .audit import worst_set_pair

        sets = set_mechanism_from_name(mechanism, epsilon=epsilon, k=k, m=m)
        pair = worst_set_pair(sets)
        codes = np.array(sorted(sets.reports()), dtype=np.int64)
        p0, p1 = (np.array([float(sets.output_probability(side, int(r))) for r in codes]) for side in pair)
        return ExactLaw(f"{sets.name}(k={k}, m={m})", codes, p0, p1)
    if mechanism in ("discrete-laplace", "gaussian"):
        r = radius or law_radius(mechanism, epsilon=epsilon, delta=delta)
        ys = np.arange(-r, r + 2)
        if mechanism == "discrete-laplace":
            a = math.exp(-epsilon)
            pmf = (1 - a) / (1 + a) * np.exp(-epsilon * np.abs(ys).astype(np.float64))
            shifted = (1 - a) / (1 + a) * np.exp(-epsilon * np.abs(ys - 1).astype(np.float64))
            losses = epsilon * (np.abs(ys - 1) - np.abs(ys)).astype(np.float64)
            return ExactLaw("discrete-laplace(count)", ys, pmf, shifted, losses)
        sigma2 = calibrate_discrete_gaussian(epsilon, delta, 1)
        pmf = np.array([discrete_gaussian_pmf(int(y), sigma2) for y in ys])
        shifted = np.array([discrete_gaussian_pmf(int(y) - 1, sigma2) for y in ys])
        losses = (1 - 2 * ys.astype(np.float64)) / (2 * float(sigma2))
        return ExactLaw(f"gaussian(count, σ²={float(sigma2):.6g})", ys, pmf, shifted, losses)
    if mechanism == "subsample":
        from scipy.stats import binom

        others = 9  # as audit.subsample_neighbours
        counts = binom.pmf(np.arange(others + 1), others, p)
        codes = np.arange(2 * (others + 1))
        p0 = np.concatenate([(1 - p) * counts, p * counts])
        p1 = np.concatenate([counts, np.zeros(others + 1)])
        return ExactLaw(f"subsample(p={p:g})", codes, p0, p1)
    raise InvalidParameter(f"the trade-off view knows {', '.join(auditable())}, got {mechanism!r}")


@dataclass(frozen=True, kw_only=True)
class TradeoffResult:
    """The privacy-loss view of one mechanism against one claim."""

    mechanism: str
    claim: Claim
    trials: int
    confidence: float
    exact_alpha: Any
    exact_beta: Any
    empirical_alpha: Any  # (Clopper–Pearson upper limits at each cut)
    empirical_beta: Any
    loss_values: Any  # the exact privacy-loss distribution under D₀: values and probabilities
    loss_probs: Any
    sampled_losses: Any  # L(y) of the samples drawn under D₀
    epsilon_lower_bound: float
    exact_delta: float  # δ(ε) of the exact law at the claimed ε, the worse direction
    refuted: bool
    worst_cut: tuple[float, float, float] | None  # (α_U, β_U, f(α_U)) where the claim fails, if it does

    def summary(self) -> str:
        c = self.claim
        claim = f"(ε, δ) = ({c.epsilon:g}, {c.delta:g})" + (f", μ = {c.mu:g}" if c.mu is not None else "")
        finite = self.loss_values[abs(self.loss_values) < math.inf]
        top = float(finite.max()) if finite.size else math.inf
        lines = [
            f"privacy-loss view of {self.mechanism} against the claim {claim}",
            f"exact privacy loss under D0: max |L| = {max(top, float(-finite.min()) if finite.size else 0):.4g}"
            + (" (and ±∞ on some outputs)" if finite.size < self.loss_values.size else "")
            + f"; δ(ε) of the exact law = {self.exact_delta:.3g}",
            f"empirical trade-off: {self.empirical_alpha.size} cuts of outputs ranked by exact loss, "
            f"{self.trials} runs per input, Clopper–Pearson at {self.confidence:.0%} (Bonferroni over cuts)",
            f"ε lower bound from the curve ({self.confidence:.0%}): {self.epsilon_lower_bound:.4f}",
        ]
        if self.refuted and self.worst_cut is not None:
            a, b, f = self.worst_cut
            lines.append(
                f"BELOW THE CLAIMED CURVE: at α ≤ {a:.4g} the type II error is ≤ {b:.4g} < f(α) = {f:.4g}; "
                f"the mechanism does not satisfy {claim}"
            )
        else:
            lines.append("the empirical curve stays on or above the claimed one (no cut refutes the claim)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "claim": {"epsilon": self.claim.epsilon, "delta": self.claim.delta, "mu": self.claim.mu},
            "trials": self.trials,
            "confidence": self.confidence,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "exact_delta": self.exact_delta,
            "refuted": self.refuted,
            "worst_cut": self.worst_cut,
            "empirical": [[float(a), float(b)] for a, b in zip(self.empirical_alpha, self.empirical_beta, strict=True)],
        }

    def plot(self, path: str | Path) -> Path:
        """Trade-off curves (exact, empirical, claimed) beside the privacy-loss distribution, as a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        from .plots import plot_path

        out = plot_path(path)
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
        grid = np.linspace(0, 1, 401)
        c = self.claim
        left.plot(grid, privacy_curve(grid, c.epsilon, c.delta), "k--", label=f"f(ε={c.epsilon:g}, δ={c.delta:g})")
        if c.mu is not None:
            left.plot(grid, gdp_curve(grid, c.mu), "k:", label=f"G(μ={c.mu:g})")
        thin = max(1, self.exact_alpha.size // 4000)  # the lattice Laplace has 2^20 cuts: a line needs fewer
        left.plot(self.exact_alpha[::thin], self.exact_beta[::thin], "C0-", label="exact law")
        left.plot(self.empirical_alpha, self.empirical_beta, "C3o", ms=3, label="samples (CP upper limits)")
        left.set(xlabel="type I error α", ylabel="type II error β", xlim=(0, 1), ylim=(0, 1), title="trade-off")
        left.legend(loc="upper right", fontsize=8)
        finite = np.isfinite(self.loss_values)
        if finite.sum() > 2000:  # a near-continuous loss (lattice Laplace): its exact histogram, 60 bins
            right.hist(self.loss_values[finite], bins=60, weights=self.loss_probs[finite], color="C0", alpha=0.5,
                       label="exact")  # fmt: skip
        else:
            right.bar(self.loss_values[finite], self.loss_probs[finite], width=0.02, color="C0", label="exact")
        samples = self.sampled_losses[np.isfinite(self.sampled_losses)]
        if samples.size:
            right.hist(samples, bins=60, density=False, weights=np.full(samples.size, 1 / samples.size),
                       histtype="step", color="C3", label="samples")  # fmt: skip
        spread = float(np.max(np.abs(samples))) if samples.size else c.epsilon
        right.set_xlim(-1.3 * max(spread, c.epsilon), 1.3 * max(spread, c.epsilon))
        right.axvline(c.epsilon, color="k", ls="--", lw=0.8)
        right.axvline(-c.epsilon, color="k", ls="--", lw=0.8)
        right.set(xlabel="privacy loss L = ln P0(y)/P1(y)", ylabel="probability under D0", title="privacy loss")
        right.legend(fontsize=8)
        fig.suptitle(self.mechanism)
        fig.tight_layout()
        fig.savefig(out, dpi=110)
        plt.close(fig)
        return out


def _hockey(p: Any, q: Any, epsilon: float) -> float:
    import numpy as np

    return float(np.maximum(np.asarray(p) - math.exp(epsilon) * np.asarray(q), 0.0).sum())


def tradeoff(
    law: ExactLaw,
    sample: Callable[[int, int, np.random.Generator], Any],
    claim: Claim,
    *,
    trials: int = 200_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    loss_law: ExactLaw | None = None,
) -> TradeoffResult:
    """Measure the trade-off curve of ``sample`` (codes of ``law``) against ``claim``.

    ``loss_law`` (default ``law``) ranks the outputs: pass the law of the mechanism as it **claims** to be
    when auditing a broken one, so that the tests are those its claim makes most powerful.
    """
    import numpy as np

    from .audit import clopper_pearson

    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 100:
        raise InvalidParameter(f"'trials' must be an integer >= 100, got {trials!r}")
    ranking = loss_law or law
    rng = np.random.default_rng(seed)

    def counts(which: int) -> Any:
        drawn = np.asarray(sample(which, trials, rng))
        positions = np.searchsorted(law.codes, drawn)
        positions = np.clip(positions, 0, law.codes.size - 1)
        inside = law.codes[positions] == drawn
        out = np.bincount(positions[inside], minlength=law.codes.size)
        return out, drawn[inside]

    c0, drawn0 = counts(0)
    c1, _ = counts(1)
    loss = ranking.loss()
    results = []
    sides = ((c0, c1, c0.sum(), c1.sum(), loss), (c1, c0, c1.sum(), c0.sum(), -loss))
    for direction, (a, b, n_a, n_b, lo) in enumerate(sides):
        order = _levels(lo)
        ends = _cuts(np.cumsum((ranking.p0 if direction == 0 else ranking.p1)[order]))
        k_a = np.cumsum(a[order])[ends - 1]  # D₀-samples in the rejection region: type I
        k_b = n_b - np.cumsum(b[order])[ends - 1]  # D₁-samples outside it: type II
        results.append((direction, k_a, k_b, n_a, n_b))
    cuts = sum(r[1].size for r in results)
    level = 1 - (1 - confidence) / max(cuts, 1)  # Bonferroni: all the cuts' limits hold together
    eps_lb, refuted, worst = 0.0, False, None
    emp_alpha, emp_beta = [], []
    for direction, k_a, k_b, n_a, n_b in results:
        _, alpha_u = clopper_pearson(k_a, np.full(k_a.shape, n_a), 2 * level - 1)
        _, beta_u = clopper_pearson(k_b, np.full(k_b.shape, n_b), 2 * level - 1)
        if direction == 0:
            emp_alpha, emp_beta = alpha_u, beta_u
        allowed = claim.curve(alpha_u)
        gap = allowed - beta_u
        j = int(np.argmax(gap))
        if gap[j] > 0 and (worst is None or gap[j] > worst[2] - worst[1]):
            refuted, worst = True, (float(alpha_u[j]), float(beta_u[j]), float(allowed[j]))
        with np.errstate(divide="ignore", invalid="ignore"):
            one = np.log(np.maximum(1 - claim.delta - beta_u, 0)) - np.log(alpha_u)
            two = np.log(np.maximum(1 - claim.delta - alpha_u, 0)) - np.log(beta_u)
        eps_lb = max(eps_lb, float(np.nanmax(np.concatenate([one, two]))))
    order = _levels(loss)
    exact_alpha, exact_beta = tradeoff_curve(law.p0, law.p1, order)
    values, inverse = np.unique(law.loss(), return_inverse=True)
    probs = np.bincount(inverse, weights=law.p0, minlength=values.size)
    sampled = law.loss()[np.searchsorted(law.codes, drawn0)]
    exact_delta = max(_hockey(law.p0, law.p1, claim.epsilon), _hockey(law.p1, law.p0, claim.epsilon))
    return TradeoffResult(
        mechanism=law.name,
        claim=claim,
        trials=trials,
        confidence=confidence,
        exact_alpha=exact_alpha,
        exact_beta=exact_beta,
        empirical_alpha=np.asarray(emp_alpha),
        empirical_beta=np.asarray(emp_beta),
        loss_values=values,
        loss_probs=probs,
        sampled_losses=sampled[: min(sampled.size, 200_000)],
        epsilon_lower_bound=max(eps_lb, 0.0),
        exact_delta=exact_delta,
        refuted=refuted,
        worst_cut=worst,
    )


def law_sampler(law: ExactLaw) -> Callable[[int, int, np.random.Generator], Any]:
    """Draws from the exact law itself (for mechanisms whose product sampler lives elsewhere)."""

    def sample(which: int, size: int, rng: np.random.Generator) -> Any:
        probs = law.p0 if which == 0 else law.p1
        return rng.choice(law.codes, size=size, p=probs / probs.sum())

    return sample


def audit_tradeoff(
    mechanism: str,
    *,
    epsilon: float,
    spend: float | None = None,
    delta: float = 0.0,
    mu: float | None = None,
    k: int = 2,
    p: float = 0.1,
    trials: int = 200_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    exact: bool = False,
    m: int = 2,
    steps: int = 8,
) -> TradeoffResult:
    """The privacy-loss view of a shipped mechanism claiming ``epsilon`` (and ``delta``, ``mu``) while it
    actually runs at ``spend`` (default: the claim; pass 2ε to see a mechanism that spends twice its
    claim flagged). Local randomizers and the discrete and lattice Laplace run through the audit's samplers
    (``exact``: the product's exact samplers); the Gaussian and Example 3 (``subsample``) draw from their
    exact laws.
    """
    from .audit import auditable, neighbours

    if mechanism not in auditable():
        raise InvalidParameter(f"'mechanism' must be one of {', '.join(auditable())}, got {mechanism!r}")
    runs_at = epsilon if spend is None else spend
    gaussian_delta = delta if delta > 0 else 1e-5
    radius = None
    if mechanism in ("discrete-laplace", "gaussian"):  # one table of outputs for the law and the claim
        radius = max(law_radius(mechanism, epsilon=e, delta=gaussian_delta) for e in (runs_at, epsilon))
    shape = {"k": k, "delta": gaussian_delta, "p": p, "radius": radius, "m": m, "steps": steps}
    law = exact_law(mechanism, epsilon=runs_at, **shape)  # type: ignore[arg-type]
    ranking = exact_law(mechanism, epsilon=epsilon, **shape)  # type: ignore[arg-type]
    if mechanism == "gaussian":  # drawn from its exact law: the audit has no sampler of it
        sampler = law_sampler(law)
    else:  # the audit's own sampler, at the spend
        sampler = neighbours(mechanism, epsilon=runs_at, k=k, p=p, exact=exact, m=m, steps=steps).sample
        if mechanism == "laplace":
            sampler = lattice_steps_sampler(sampler)
    claim = Claim(epsilon, gaussian_delta if mechanism == "gaussian" and delta == 0 else delta, mu)
    return tradeoff(law, sampler, claim, trials=trials, confidence=confidence, seed=seed, loss_law=ranking)
