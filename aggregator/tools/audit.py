"""Empirical privacy auditing: a statistically valid lower bound on a mechanism's ε.

Method (Jagielski, Ullman and Oprea, "Auditing Differentially Private Machine Learning", NeurIPS 2020):

1. Fix two neighbouring inputs D₀, D₁ and run the mechanism N times on each.
2. On the first half of the samples, choose the output event S that best separates them: outcomes are
   ranked by their likelihood ratio and S is the prefix (in either direction) with the best bound.
3. On the held-out half (N₀ = N₁ = N/2 runs), count k₀ = #{M(D₀) ∈ S} and k₁ = #{M(D₁) ∈ S} and report

       ε_LB = ln( CP_lower(k₀, N₀) / CP_upper(k₁, N₁) )

   with Clopper–Pearson bounds, each two-sided at level α = 1 − confidence, so that the pair (hence the
   bound) holds with probability ≥ 1 − α. Because S was chosen on other samples, the bound is valid for
   any mechanism: a true ε-DP mechanism gives ε_LB > ε with probability at most α.

The auditor also reports the point estimate ln((k₀/N₀)/(k₁/N₁)) (∞ when S never happened under D₁: no
finite ε fits the samples) and the statistical (total-variation) distance TV = sup_S P₀(S) − P₁(S), the
event T again chosen on the selection half (:func:`_distance_event`) and measured on the held-out half,
with its Clopper–Pearson lower bound. T is {outcomes more frequent under D₀} when outcomes are few (the
event that attains the supremum), and a threshold {output ≤ t} or {output ≥ t} for the central noise: its
likelihood ratio is monotone, so the supremum is attained by a threshold, while outcome-by-outcome
comparison on 2^20 lattice points per unit would fit the selection samples' noise and measure almost nothing
on the held-out half. Exact values to compare with: (e^ε−1)/(e^ε+k−1) for GRR on two values (binary RR:
k = 2), (1−a)/(1+a) with a = e^(−ε) for the discrete Laplace count, 1 − e^(−ε/2) for the Laplace one.

What is audited (``--mechanism``):

* ``binary-rr``, ``grr``, ``oue``, ``olh``: the local randomizers on the values 0 and 1. They run through
  their vectorized ``simulate`` with a seeded numpy generator, which draws from the same distribution
  as the device's exact ``randomize`` (the exact samplers are tested against their probabilities
  elsewhere). Each report is reduced to its support pattern (0 ∈ Support(y), 1 ∈ Support(y)): for these
  pure protocols the likelihood ratio P(y | 0)/P(y | 1) is a function of that pattern, so no event is lost.
* ``discrete-laplace`` and ``laplace``: the central release of one count (0 against 1, sensitivity 1), the
  noise drawn as a difference of two geometric variables, which is the two-sided geometric law (per
  2^−20 lattice step for ``laplace``, the lattice the service draws its Laplace noise on).
* ``--exact`` (``exact=True``) audits the code the product runs instead of its simulation: each device
  report from ``randomize`` and each noise draw from the service's exact sampler, the very algorithms,
  with their uniform integers drawn from the seeded generator (``seeded_randbelow``) instead of
  ``secrets`` so that ``--seed`` replays a run (about 20-60 µs per run).
* ``subsample``: Dwork 2006, Example 3, which releases each record independently with probability p
  (``--p``, default 0.1), on D₁ = nine records and D₀ = D₁ plus one target record. An outcome is whether
  the target was released and how many of the nine others were. It is not ε-DP for any finite ε: the
  event {target released} has probability p under D₀ and 0 under D₁, so the point estimate is ∞ and the
  lower bound grows without limit with the number of runs, although the statistical distance is only p.
  It shows why a small statistical distance is no privacy guarantee (an "ε = ∞ with probability p"
  mechanism publishes some records in the clear); the claimed ``--epsilon`` is what the audit refutes.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from deniable.aggregator.cli import needs
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import MECHANISMS, Mechanism, mechanism_from_name
from deniable.shared.mechanisms.mean import MEAN_MECHANISMS, MeanMechanism, mean_mechanism_from_name
from deniable.shared.mechanisms.sets import SET_MECHANISMS, SetMechanism, set_mechanism_from_name
from deniable.shared.sampling import seeded_randbelow

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]

__all__ = [
    "CENTRAL_AUDITABLE",
    "AuditResult",
    "Neighbours",
    "audit",
    "audit_neighbours",
    "auditable",
    "central_neighbours",
    "clopper_pearson",
    "local_mechanism",
    "local_neighbours",
    "neighbours",
    "number_neighbours",
    "register",
    "set_neighbours",
    "subsample_neighbours",
    "worst_set_pair",
]

#: Names ``deniable audit --mechanism`` accepts beside the registry's local mechanisms (:func:`auditable`).
CENTRAL_AUDITABLE: tuple[str, ...] = ("discrete-laplace", "laplace", "subsample", "gaussian")


def auditable() -> tuple[str, ...]:
    """Every name ``deniable audit`` takes: the registry's mechanisms of each kind (asked now, so one
    registered later is auditable too), then the central noises and subsampling."""
    return (*MECHANISMS, *MEAN_MECHANISMS, *SET_MECHANISMS, *CENTRAL_AUDITABLE)

#: Most prefixes of the ranked outcomes the event search evaluates (beta quantiles are costly).
_MAX_CUTS = 1024

#: Records besides the target in the subsampling audit (Example 3).
_SUBSAMPLE_OTHERS = 9


@dataclass(frozen=True)
class Neighbours:
    """A mechanism on two neighbouring inputs: ``sample(which, size, rng)`` returns integer outcome codes
    of ``size`` runs on input ``which`` (0 or 1); ``describe(code)`` names an outcome; ``ordered`` names
    the output when codes are its values in order, in steps of ``unit`` (threshold events are then tried too)."""

    name: str
    claimed_epsilon: float
    sample: Callable[[int, int, np.random.Generator], IntArray]
    describe: Callable[[int], str]
    ordered: str | None = None
    unit: float = 1.0


@dataclass(frozen=True)
class AuditResult:
    """The audit's findings; ``epsilon_lower_bound`` holds with probability ≥ ``confidence``."""

    mechanism: str
    claimed_epsilon: float
    trials: int
    confidence: float
    event: str
    hits: tuple[int, int]
    runs: tuple[int, int]
    probability_intervals: tuple[tuple[float, float], tuple[float, float]]
    epsilon_lower_bound: float
    epsilon_point: float
    statistical_distance: float
    statistical_distance_lower: float

    @property
    def violated(self) -> bool:
        """Whether the samples refute the claim (ε_LB > claimed ε) at the stated confidence."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (an infinite point estimate becomes the string ``"inf"``)."""
        result = asdict(self)
        if math.isinf(self.epsilon_point):
            result["epsilon_point"] = "inf"
        result["violated"] = self.violated
        return result

    def summary(self) -> str:
        """A human-readable report of the audit."""
        (lo0, hi0), (lo1, hi1) = self.probability_intervals
        level = f"{self.confidence:.0%}"
        point = "∞" if math.isinf(self.epsilon_point) else f"{self.epsilon_point:.4f}"
        lines = [
            f"audit of {self.mechanism} (claimed ε = {self.claimed_epsilon:g}), "
            f"{self.trials} runs per input, half to choose the event, half to measure it",
            f"most distinguishing event: {self.event}",
            f"  under D0: {self.hits[0]}/{self.runs[0]} (CP {level}: [{lo0:.6g}, {hi0:.6g}])",
            f"  under D1: {self.hits[1]}/{self.runs[1]} (CP {level}: [{lo1:.6g}, {hi1:.6g}])",
            f"ε lower bound ({level} confidence): {self.epsilon_lower_bound:.4f}   point estimate: {point}",
            f"statistical distance: {self.statistical_distance:.4f} (≥ {self.statistical_distance_lower:.4f}"
            f" at {level})",
        ]
        if math.isinf(self.epsilon_point):
            lines.append(
                "the event never happened under D1: no finite ε fits these samples, and the lower bound "
                "grows without limit with the number of runs (about ln(P(S|D0)·N/ln(2/α)))"
            )
        if self.violated:
            lines.append(f"VIOLATION: the mechanism is not {self.claimed_epsilon:g}-DP ({level} confidence)")
        else:
            lines.append(f"consistent with the claim: ε_LB ≤ {self.claimed_epsilon:g}")
        return "\n".join(lines)


def clopper_pearson(hits: Any, runs: Any, confidence: float) -> tuple[Any, Any]:
    """Two-sided Clopper–Pearson interval for a binomial proportion at ``confidence`` (vectorized).

    lower = Beta⁻¹(α/2; k, n−k+1) (0 at k = 0), upper = Beta⁻¹(1−α/2; k+1, n−k) (1 at k = n), α = 1 −
    confidence; at k = 0 the upper bound is 1 − (α/2)^(1/n).
    """
    import numpy as np
    from scipy.stats import beta

    k = np.asarray(hits, dtype=np.float64)
    n = np.asarray(runs, dtype=np.float64)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, beta.ppf(alpha / 2, np.maximum(k, 1e-300), n - k + 1), 0.0)
        upper = np.where(k < n, beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1e-300)), 1.0)
    return lower, upper


def _log_ratio_bound(k0: Any, n0: Any, k1: Any, n1: Any, confidence: float) -> Any:
    import numpy as np

    low0, _ = clopper_pearson(k0, n0, confidence)
    _, high1 = clopper_pearson(k1, n1, confidence)
    with np.errstate(divide="ignore"):
        return np.log(low0) - np.log(high1)


def _best_event(c0: IntArray, c1: IntArray, confidence: float, ordered: bool) -> tuple[int, str, IntArray]:
    """The event with the best ε bound on the selection samples: (direction, shape, outcome indices).

    Candidates are the prefixes of the outcomes ranked by their own ε bound or, for ordered outcomes (the
    central noise, whose likelihood ratio is monotone), the threshold events {≤ t} and {≥ t}: unions of
    fine-grained outcomes would fit the selection half and not generalize. Direction 0 favours D0, 1 D1.
    """
    import numpy as np

    n0, n1 = int(c0.sum()), int(c1.sum())
    m = c0.size
    best: tuple[float, int, str, IntArray] | None = None
    for direction, (a, b, na, nb) in enumerate(((c0, c1, n0, n1), (c1, c0, n1, n0))):
        if ordered:  # noise with a monotone likelihood ratio: the best events are thresholds
            orders = {"at-most": np.arange(m), "at-least": np.arange(m)[::-1]}
        else:  # rank outcomes by their own ε bound, so that rare outcomes with noisy ratios come last
            own = _log_ratio_bound(a, na, b, nb, confidence)
            orders = {"ratio": np.lexsort((-a, -own))}
        for shape, order in orders.items():
            # Prefix ends to try: all of them, or 1024 evenly spaced ones when outcomes are fine-grained.
            ends = np.unique(np.linspace(0, m - 1, min(m, _MAX_CUTS)).astype(np.int64))
            ka, kb = np.cumsum(a[order])[ends], np.cumsum(b[order])[ends]
            bounds = _log_ratio_bound(ka, na, kb, nb, confidence)
            j = int(ends[int(np.argmax(bounds))])
            if best is None or float(bounds.max()) > best[0]:
                best = (float(bounds.max()), direction, shape, order[: j + 1])
    assert best is not None
    return best[1], best[2], best[3]


def _distance_event(c0: IntArray, c1: IntArray, ordered: bool) -> IntArray:
    """The outcome indices of the event T that maximizes P₀(T) − P₁(T) on the selection counts.

    Unordered outcomes: {outcomes more frequent under D₀}, which attains TV = Σ max(p₀ − p₁, 0). Ordered ones
    (codes are output values in order): the best threshold event {≤ t} or {≥ t}, since with a monotone
    likelihood ratio the set {p₀ > p₁} is a threshold set and the supremum is attained there.
    """
    import numpy as np

    if not ordered:
        event: IntArray = np.nonzero(c0 > c1)[0]
        return event
    gap = c0 / max(int(c0.sum()), 1) - c1 / max(int(c1.sum()), 1)
    at_most = np.cumsum(gap)  # P₀(≤ t) − P₁(≤ t) at each outcome t
    at_least = np.cumsum(gap[::-1])[::-1]  # P₀(≥ t) − P₁(≥ t)
    low, high = int(np.argmax(at_most)), int(np.argmax(at_least))
    m = c0.size
    result: IntArray = np.arange(low + 1) if at_most[low] >= at_least[high] else np.arange(high, m)
    return result


def _describe(target: Neighbours, codes: IntArray, shape: str, event: IntArray) -> str:
    if shape == "at-most":
        return f"{target.ordered} ≤ {int(codes[event[-1]]) * target.unit:g}"
    if shape == "at-least":
        return f"{target.ordered} ≥ {int(codes[event[-1]]) * target.unit:g}"
    names = [target.describe(int(codes[i])) for i in sorted(event.tolist())]
    return " or ".join(names[:6]) + (f" or … ({len(names)} outcomes)" if len(names) > 6 else "")


def audit_neighbours(
    target: Neighbours, *, trials: int = 200_000, confidence: float = 0.95, seed: int | None = 0
) -> AuditResult:
    """Run ``target`` ``trials`` times on each input and return the ε lower bound (see module doc)."""
    import numpy as np

    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 100:
        raise InvalidParameter(f"'trials' must be an integer >= 100, got {trials!r}")
    if not isinstance(confidence, int | float) or not 0.5 <= confidence < 1:
        raise InvalidParameter(f"'confidence' must be a number in [0.5, 1), got {confidence!r}")
    rng = np.random.default_rng(seed)
    half = trials // 2
    out = [target.sample(which, trials, rng) for which in (0, 1)]
    codes, inverse = np.unique(np.concatenate(out), return_inverse=True)
    idx0, idx1 = inverse[:trials], inverse[trials:]
    m = codes.size

    def counts(indices: IntArray) -> IntArray:
        result: IntArray = np.bincount(indices, minlength=m)
        return result

    sel0, sel1 = counts(idx0[:half]), counts(idx1[:half])
    ev0, ev1 = counts(idx0[half:]), counts(idx1[half:])
    n0, n1 = int(ev0.sum()), int(ev1.sum())
    direction, shape, event = _best_event(sel0, sel1, confidence, target.ordered is not None)
    hits = (int(ev0[event].sum()), int(ev1[event].sum()))
    (k_hi, n_hi), (k_lo, n_lo) = ((hits[0], n0), (hits[1], n1))[:: 1 if direction == 0 else -1]
    lower = float(_log_ratio_bound(k_hi, n_hi, k_lo, n_lo, confidence))
    point = math.inf if k_lo == 0 else (math.log(k_hi / n_hi) - math.log(k_lo / n_lo) if k_hi else -math.inf)
    (lo0, hi0), (lo1, hi1) = (tuple(map(float, clopper_pearson(k, n0, confidence))) for k in hits)

    tv_event = _distance_event(sel0, sel1, target.ordered is not None)
    t0, t1 = int(ev0[tv_event].sum()), int(ev1[tv_event].sum())
    tv_low = float(clopper_pearson(t0, n0, confidence)[0]) - float(clopper_pearson(t1, n1, confidence)[1])
    shown = _describe(target, codes, shape, event)
    which = "D0 over D1" if direction == 0 else "D1 over D0"
    return AuditResult(
        mechanism=target.name,
        claimed_epsilon=target.claimed_epsilon,
        trials=trials,
        confidence=confidence,
        event=f"{{{shown}}} (favours {which})",
        hits=hits,
        runs=(n0, n1),
        probability_intervals=((lo0, hi0), (lo1, hi1)),
        epsilon_lower_bound=max(lower, 0.0),
        epsilon_point=point,
        statistical_distance=max(t0 / n0 - t1 / n1, 0.0),
        statistical_distance_lower=max(tv_low, 0.0),
    )


# -- the audited mechanisms ------------------------------------------------------------------------


def local_neighbours(
    mechanism: Mechanism[Any], *, claimed_epsilon: float | None = None, exact: bool = False
) -> Neighbours:
    """A local randomizer on the values 0 and 1; ``claimed_epsilon`` defaults to the mechanism's own ε
    (pass another to audit a mechanism that claims less than it spends). ``exact=True`` runs the device's
    own ``randomize`` (the exact samplers, replayed from the seeded generator) instead of the vectorized
    simulation: slower, and it audits the very code devices run."""
    import numpy as np

    def sample(which: int, size: int, rng: np.random.Generator) -> IntArray:
        if exact:
            randbelow = seeded_randbelow(rng)
            supports = [set(mechanism.support(mechanism.randomize(which, randbelow=randbelow))) for _ in range(size)]
            result: IntArray = np.fromiter((2 * (0 in s) + (1 in s) for s in supports), np.int64, size)
            return result
        reports = mechanism.simulate(np.full(size, which, dtype=np.int64), rng=rng)
        return mechanism.support_pattern(reports)

    def describe(code: int) -> str:
        return f"0 {'∈' if code & 2 else '∉'} Support(y), 1 {'∈' if code & 1 else '∉'} Support(y)"

    claim = mechanism.epsilon if claimed_epsilon is None else claimed_epsilon
    return Neighbours(f"{mechanism.name}(k={mechanism.k})", claim, sample, describe)


def number_neighbours(
    mechanism: MeanMechanism, *, claimed_epsilon: float | None = None, exact: bool = False
) -> Neighbours:
    """A number question's randomizer (Duchi, Piecewise, Hybrid) on the two ends of its range, grid
    indices 0 and ``steps`` (x = −1 and x = +1: the pair whose likelihood ratio is largest, since every
    report's probability is affine or piecewise affine in x); outcome codes are the reports themselves.
    ``exact=True`` runs the device's ``randomize``."""
    import numpy as np

    ends = (0, mechanism.steps)

    def sample(which: int, size: int, rng: np.random.Generator) -> IntArray:
        j = ends[which]
        if exact:
            randbelow = seeded_randbelow(rng)
            result: IntArray = np.fromiter((mechanism.randomize(j, randbelow=randbelow) for _ in range(size)),
                                           np.int64, size)  # fmt: skip
            return result
        drawn: IntArray = np.asarray(mechanism.simulate(np.full(size, j, dtype=np.int64), rng=rng), dtype=np.int64)
        return drawn

    def describe(code: int) -> str:
        return f"report {code} (t = {float(mechanism.value_of_report(code)):.4g})"

    claim = mechanism.epsilon if claimed_epsilon is None else claimed_epsilon
    return Neighbours(f"{mechanism.name}(steps={mechanism.steps})", claim, sample, describe)


def worst_set_pair(mechanism: SetMechanism) -> tuple[frozenset[int], frozenset[int]]:
    """The pair of answers with the largest exact privacy loss among ∅ against the first m options, one
    option against another, and (when 2m ≤ k) the first m options against the next m, by enumerating
    every report with exact rationals."""
    m, k = mechanism.m, mechanism.k
    first = frozenset(range(m))
    pairs = [(frozenset(), first), (frozenset({0}), frozenset({1 % k}))]
    if 2 * m <= k:
        pairs.append((first, frozenset(range(m, 2 * m))))

    def loss(pair: tuple[frozenset[int], frozenset[int]]) -> float:
        worst = 0.0
        for report in mechanism.reports():
            a, b = (mechanism.output_probability(side, report) for side in pair)
            if a != b:
                worst = max(worst, abs(math.log(a) - math.log(b)) if a and b else math.inf)
        return worst

    return max(pairs, key=loss)


def set_neighbours(
    mechanism: SetMechanism, *, claimed_epsilon: float | None = None, exact: bool = False
) -> Neighbours:
    """A multi-select question's randomizer (BitVector, Padding) on its worst pair of answers
    (:func:`worst_set_pair`); outcome codes are the reports (a bit mask for BitVector, the reported
    symbol for Padding). ``exact=True`` runs the device's ``randomize``."""
    import numpy as np

    pair = worst_set_pair(mechanism)

    def sample(which: int, size: int, rng: np.random.Generator) -> IntArray:
        chosen = pair[which]
        if exact:
            randbelow = seeded_randbelow(rng)
            result: IntArray = np.fromiter((mechanism.randomize(chosen, randbelow=randbelow) for _ in range(size)),
                                           np.int64, size)  # fmt: skip
            return result
        matrix = np.zeros((size, mechanism.k), dtype=bool)
        matrix[:, sorted(chosen)] = True
        reports = np.asarray(mechanism.simulate(matrix, rng=rng))
        if reports.ndim == 2:  # one boolean column per option: the bit mask
            reports = reports.astype(np.int64) @ (1 << np.arange(mechanism.k, dtype=np.int64))
        coded: IntArray = reports.astype(np.int64)
        return coded

    def describe(code: int) -> str:
        return f"report {mechanism.encode_report(code)!r} (supports {mechanism.support(code)})"

    claim = mechanism.epsilon if claimed_epsilon is None else claimed_epsilon
    name = f"{mechanism.name}(k={mechanism.k}, m={mechanism.m}; {sorted(pair[0])} vs {sorted(pair[1])})"
    return Neighbours(name, claim, sample, describe)


def central_neighbours(
    epsilon: float, *, noise: str = "discrete-laplace", claimed_epsilon: float | None = None, exact: bool = False
) -> Neighbours:
    """The central release of one count (0 on D0, 1 on D1, sensitivity 1) with the service's noise.

    ``discrete-laplace``: a = e^(−ε), simulated as a difference of two geometric variables. ``laplace``:
    the same law on the lattice 2^−20·ℤ (a = e^(−ε·2^−20) per lattice step), outcomes coded in lattice
    steps. ``exact=True`` draws with the service's own exact sampler
    (:func:`deniable.shared.noise.sample_noise`), replayed from the seeded generator.
    """
    import numpy as np

    from deniable.shared.noise import LATTICE_BITS, NOISES, noise_scale, sample_noise
    from deniable.shared.noise import simulate_two_sided_geometric as two_sided_geometric

    if noise not in NOISES or noise == "gaussian":
        laplaces = ", ".join(n for n in NOISES if n != "gaussian")
        raise InvalidParameter(
            f"'noise' must be one of {laplaces}, got {noise!r} (the Gaussian is (ε, δ)-DP: audit it with --tradeoff)"
        )
    steps = 1 if noise == "discrete-laplace" else 2**LATTICE_BITS  # lattice steps per unit of count
    success = -math.expm1(-epsilon / steps)  # 1 − a per step
    scale = noise_scale(epsilon, 1)

    def sample(which: int, size: int, rng: np.random.Generator) -> IntArray:
        if exact:
            randbelow = seeded_randbelow(rng)
            draws = (int(sample_noise(noise, scale, randbelow) * steps) for _ in range(size))
            noise_steps = np.fromiter(draws, np.int64, size)
        else:
            noise_steps = two_sided_geometric(success, size, rng)
        result: IntArray = noise_steps.astype(np.int64) + which * steps
        return result

    claim = epsilon if claimed_epsilon is None else claimed_epsilon
    return Neighbours(
        f"{noise}(count)", claim, sample, lambda code: f"output = {code / steps:g}", "output", 1.0 / steps
    )


def subsample_neighbours(p: float, *, claimed_epsilon: float) -> Neighbours:
    """Dwork 2006, Example 3: each record released independently with probability p.

    D0 has a target record plus nine others, D1 the nine others. An outcome codes whether the target was
    released and how many others were.
    """
    import numpy as np

    if not 0 < p < 1:
        raise InvalidParameter(f"'p' must be a probability in (0, 1), got {p!r}")

    def sample(which: int, size: int, rng: np.random.Generator) -> IntArray:
        target = (rng.random(size) < p) if which == 0 else np.zeros(size, dtype=bool)
        others = rng.binomial(_SUBSAMPLE_OTHERS, p, size)
        result: IntArray = target.astype(np.int64) * (_SUBSAMPLE_OTHERS + 1) + others
        return result

    def describe(code: int) -> str:
        released = "released" if code > _SUBSAMPLE_OTHERS else "withheld"
        return f"target {released} with {code % (_SUBSAMPLE_OTHERS + 1)} others"

    return Neighbours(f"subsample(p={p:g})", claimed_epsilon, sample, describe)


def audit(
    mechanism: str,
    *,
    epsilon: float,
    k: int = 2,
    trials: int = 200_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    p: float = 0.1,
    exact: bool = False,
    m: int = 2,
    steps: int = 8,
) -> AuditResult:
    """Audit a shipped mechanism by name (see :func:`auditable`) at its claimed ``epsilon``.

    ``k`` is the domain size of local mechanisms (2 for ``binary-rr``; the options of a multi-select
    question, ``m`` of them selectable); ``steps`` the grid of a number question (Duchi, Piecewise, Hybrid,
    audited on the range's two ends); ``p`` the release probability of ``subsample``. ``exact=True``
    audits the exact samplers the product runs (local randomizers and the central discrete Laplace), fed
    from the seeded generator, rather than their vectorized simulations.
    """
    target = neighbours(mechanism, epsilon=epsilon, k=k, p=p, exact=exact, m=m, steps=steps)
    return audit_neighbours(target, trials=trials, confidence=confidence, seed=seed)


def local_mechanism(name: str, *, epsilon: float, k: int) -> Mechanism[Any]:
    """The registry's local mechanism ``name`` at ``epsilon`` on ``k`` values, or on its own fixed
    domain size (``binary-rr``: 2) whatever ``k`` is."""
    return mechanism_from_name(name, epsilon=epsilon, k=MECHANISMS[name].fixed_k or k)


def neighbours(
    mechanism: str, *, epsilon: float, k: int = 2, p: float = 0.1, exact: bool = False, m: int = 2, steps: int = 8
) -> Neighbours:
    """A shipped mechanism by name running at ``epsilon`` on the audit's two neighbouring inputs, shaped
    as :func:`audit` describes (``gaussian`` has no sampler here: ``InvalidParameter``, as for a name not
    in :func:`auditable`)."""
    if mechanism in ("discrete-laplace", "laplace"):
        return central_neighbours(epsilon, noise=mechanism, exact=exact)
    if mechanism in MEAN_MECHANISMS:
        return number_neighbours(mean_mechanism_from_name(mechanism, epsilon=epsilon, steps=steps), exact=exact)
    if mechanism in SET_MECHANISMS:
        return set_neighbours(set_mechanism_from_name(mechanism, epsilon=epsilon, k=k, m=m), exact=exact)
    if mechanism == "subsample":
        return subsample_neighbours(p, claimed_epsilon=epsilon)
    if mechanism in MECHANISMS:
        return local_neighbours(local_mechanism(mechanism, epsilon=epsilon, k=k), exact=exact)
    raise InvalidParameter(f"'mechanism' must be one of {', '.join(auditable())}, got {mechanism!r}")


# -- command line ----------------------------------------------------------------------------------


def _run_tradeoff(args: argparse.Namespace) -> int:
    import json

    from .tradeoff import audit_tradeoff

    try:
        plot = None
        if args.plot is not None:
            from .plots import plot_path

            plot = plot_path(args.plot)  # refuse a bad path before sampling
        result = audit_tradeoff(
            args.mechanism, epsilon=args.epsilon, spend=args.spend, delta=args.delta, mu=args.mu, k=args.k,
            p=args.p, trials=args.trials, confidence=args.confidence, seed=args.seed, exact=args.exact, m=args.m,
            steps=args.steps,
        )  # fmt: skip
    except (InvalidParameter, ValueError) as exc:
        print(f"deniable audit: {exc}")
        return 2
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary())
    if plot is not None:
        print(f"plot written to {result.plot(plot)}")
    return 1 if result.refuted else 0


def _run(args: argparse.Namespace) -> int:
    import json

    if args.tradeoff or args.mechanism == "gaussian":
        return _run_tradeoff(args)
    if args.plot is not None or args.spend is not None:
        print("deniable audit: --plot and --spend belong to the privacy-loss view: add --tradeoff")
        return 2
    try:
        result = audit(
            args.mechanism,
            epsilon=args.epsilon,
            k=args.k,
            trials=args.trials,
            confidence=args.confidence,
            seed=args.seed,
            p=args.p,
            exact=args.exact,
            m=args.m,
            steps=args.steps,
        )
    except InvalidParameter as exc:
        print(f"deniable audit: {exc}")
        return 2
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary())
    return 1 if result.violated else 0


def register(subparsers: Any) -> None:
    """Add ``deniable audit``."""
    parser = subparsers.add_parser(
        "audit",
        help=needs("tools") + "empirically lower-bound a mechanism's ε (Clopper-Pearson)",
        description="Run a mechanism on two neighbouring inputs, pick the most distinguishing event on half "
        "of the runs and report a lower bound on ε from the other half. Exit status 1 if the bound "
        "exceeds the claimed ε.",
    )
    parser.add_argument(
        "--mechanism", choices=auditable(), default="grr",
        help="what to audit: a local randomizer (a choice, a number question's duchi/piecewise/hybrid, a "
        "multi-select question's bitvector/padding), the central noise of one count, or 'subsample' (Dwork "
        "2006, Example 3: each record released with probability --p; not ε-DP for any finite ε)",
    )
    parser.add_argument("--m", type=int, default=2, help="options one answer may select (bitvector, padding)")
    parser.add_argument(
        "--steps", type=int, default=8, help="grid steps of a number question (duchi, piecewise, hybrid)"
    )
    parser.add_argument("--epsilon", type=float, default=1.0, help="the claimed ε")
    parser.add_argument("--k", type=int, default=4, help="domain size of local mechanisms")
    parser.add_argument("--trials", type=int, default=200_000, help="runs per input")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level of the bounds")
    parser.add_argument("--seed", type=int, default=None, help="numpy seed (default: fresh entropy)")
    parser.add_argument("--p", type=float, default=0.1, help="release probability of 'subsample'")
    parser.add_argument(
        "--exact",
        action="store_true",
        help="run the exact samplers the product uses (fed from --seed; slower) instead of the vectorized simulation",
    )
    parser.add_argument(
        "--tradeoff", action="store_true",
        help="the privacy-loss view: the privacy-loss distribution and the trade-off curve (type I against "
        "type II error, Dong-Roth-Su 2019) from the exact law and from samples, against the curve the claim "
        "allows; exit status 1 if the samples fall below it (always on for 'gaussian')",
    )
    parser.add_argument(
        "--delta", type=float, default=0.0, help="the claimed δ (--tradeoff; default 0, 1e-5 for gaussian)"
    )
    parser.add_argument("--mu", type=float, default=None, help="also check μ-Gaussian DP (--tradeoff)")
    parser.add_argument(
        "--spend", type=float, default=None,
        help="run the mechanism at this ε while it claims --epsilon (--tradeoff; e.g. 2ε to see it flagged)",
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw the trade-off curves and the privacy-loss distribution (--tradeoff)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=_run, extra="tools")
