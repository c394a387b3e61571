"""Amplification by shuffling: the central (ε, δ) of a shuffled batch of n reports from ε₀-LDP randomizers.

n devices each apply an ε₀-DP local randomizer (chosen adaptively or not); a shuffler permutes the n
reports uniformly and strips everything else. Neighbouring batches differ in one device's input. The
aggregator's view is then (ε, δ)-DP with ε far below ε₀ (Erlingsson et al., SODA 2019; Feldman, McMillan
and Talwar, "Hiding among the clones", FOCS 2021). Three bounds, each an upper bound on ε at a given δ:

* :func:`closed_form_epsilon`: FMT 2021 Theorem 3.1, valid when ε₀ ≤ ln(n / (16 ln(4/δ))). Two public
  versions exist. The theorem as OpenDP implements it,
  ``ε = ln(1 + (e^ε₀−1)/(e^ε₀+1) · (8√(e^ε₀ ln(4/δ)/n) + 8e^ε₀/n))``, and the authors' code
  (apple/ml-shuffling-amplification), ``ε = ln(1 + (1−e^−ε₀)/(1+e^(−ε₀−ε′)) · (a+c))`` with
  a = 8√(e^ε₀ ln(4/δ)/n), c = 8e^ε₀/n, ε′ = ln(1+a+c), which is slightly larger (at most ~10%).
  ``form="authors"`` (the default, the conservative choice) gives 0.5378 at n = 10⁵, ε₀ = 4, δ = 10⁻⁶;
  ``form="theorem"`` gives 0.0235 at n = 10⁶, ε₀ = 1, δ = 10⁻⁶ (the authors' form: 0.0238).
* :func:`numerical_epsilon`: the tighter numerical bound of FMT 2021 (Appendix E). Each of the other n − 1
  reports is, with probability e^−ε₀, a "clone": a fair mixture of the two outputs the differing device
  could produce. With C ~ Bin(n−1, e^−ε₀) clones, A ~ Bin(C, 1/2) of them towards the first output and
  the differing device towards it with probability a = e^ε₀/(e^ε₀+1), the shuffled batch is a
  post-processing of (C, A + its own), so the pair of neighbouring batches is dominated by
  ``P_c = a·Bin(c,½) + (1−a)·(Bin(c,½)+1)`` against ``Q_c = a·(Bin(c,½)+1) + (1−a)·Bin(c,½)``, mixed over c.
  δ(ε) = Σ_c P(C=c)·H_ε(P_c‖Q_c), with the hockey-stick divergence H_ε(P‖Q) = Σ_j (P(j) − e^ε Q(j))₊
  (symmetric here, since Bin(c,½) is). P_c(j)/Q_c(j) decreases in j, so the positive part is a prefix
  j < t_c and H_c is two binomial CDFs. c is truncated to the central 1 − 2·10⁻¹⁴ of its law and the
  dropped mass is added to δ (an upper bound); ε is the smallest with δ(ε) ≤ δ, by bisection. At n = 10⁵,
  ε₀ = 4, δ = 10⁻⁶: 0.16977, inside the authors' reported [0.16754, 0.17279].
* :func:`binary_rr_epsilon`: the ε of shuffled binary randomized response from the exact binomial laws
  (the count of ones is all the shuffled batch says), worst over how many of the other devices hold a
  one (every count up to 2,001 reports); it shows how loose the generic bounds are for a specific
  randomizer (0.0357 at n = 10⁴, ε₀ = 1, δ = 10⁻⁶, against 0.053 numerical and 0.233 closed form).

:func:`amplify` returns the smallest valid generic bound (never above ε₀, which holds by post-processing
whatever n is) with the method that gave it. The bounds are floats (logarithms, binomial CDFs) and are
rounded up by a relative 10⁻⁹. The numerical and exact bounds need scipy (the aggregator's extra); the
device never calls them. These bounds assume every one of the n reports comes from a distinct device
running the declared randomizer: a batch padded with the adversary's own reports amplifies only over the
honest ones, which is why the shuffler admits one report per device and the aggregator counts n from the
batches it actually received.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from deniable.shared.errors import InvalidParameter
from deniable.shared.limits import MECHANISM_EPSILON

__all__ = [
    "Amplification",
    "amplify",
    "binary_rr_epsilon",
    "closed_form_epsilon",
    "closed_form_valid",
    "local_epsilon_for",
    "numerical_delta",
    "numerical_epsilon",
]

#: Relative outward rounding of every floating-point bound (never report ε below its computed value).
_UP = 1 + 1e-9

#: Mass of the law of C left out at each end by the numerical bound (added to δ).
_TAIL = 1e-14

_BISECTIONS = 60


def _check(n: object, epsilon0: object, delta: object) -> tuple[int, float, float]:
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InvalidParameter(f"'n' (reports in the shuffled batch) must be an integer ≥ 2, got {n!r}")
    if isinstance(epsilon0, bool) or not isinstance(epsilon0, int | float) or not 0 < epsilon0 <= MECHANISM_EPSILON[1]:
        raise InvalidParameter(
            f"'epsilon0' (the local ε) must be a number in (0, {MECHANISM_EPSILON[1]:g}], got {epsilon0!r}"
        )
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise InvalidParameter(f"'delta' must be a number in (0, 1), got {delta!r}")
    return n, float(epsilon0), float(delta)


def closed_form_valid(n: int, epsilon0: float, delta: float) -> bool:
    """FMT 2021 Thm 3.1's condition, in its stricter form: ε₀ ≤ ln(n / (16 ln(4/δ)))."""
    n, epsilon0, delta = _check(n, epsilon0, delta)
    return epsilon0 <= math.log(n / (16 * math.log(4 / delta)))


def closed_form_epsilon(n: int, epsilon0: float, delta: float, *, form: str = "authors") -> float:
    """FMT 2021 Theorem 3.1's ε for a shuffled batch of n ε₀-LDP reports (see the module docstring).

    Raises :class:`InvalidParameter` where the theorem does not apply (:func:`closed_form_valid`).
    """
    n, epsilon0, delta = _check(n, epsilon0, delta)
    if not closed_form_valid(n, epsilon0, delta):
        raise InvalidParameter(
            f"the closed form applies only when ε₀ ≤ ln(n/(16 ln(4/δ))) = "
            f"{math.log(n / (16 * math.log(4 / delta))):.4g} (n = {n}, δ = {delta:g}); got ε₀ = {epsilon0:g}: "
            "use numerical_epsilon, or a larger batch"
        )
    e0 = math.exp(epsilon0)
    a = 8 * math.sqrt(e0 * math.log(4 / delta) / n)
    c = 8 * e0 / n
    if form == "theorem":
        value = math.log1p(math.expm1(epsilon0) / (e0 + 1) * (a + c))
    elif form == "authors":
        e_prime = math.log1p(a + c)
        value = math.log1p(-math.expm1(-epsilon0) / (1 + math.exp(-epsilon0 - e_prime)) * (a + c))
    else:
        raise InvalidParameter(f"'form' must be 'authors' or 'theorem', got {form!r}")
    return value * _UP


#: Most distinct values of C at which H_c is evaluated; beyond it, consecutive c share their first value's H.
_BLOCKS = 2_000


def _binom_pmf(ks: Any, n: int, p: float) -> Any:
    """Bin(n, p) probabilities at the integers ``ks`` (log-gamma form, no scipy.stats import)."""
    import numpy as np
    from scipy import special

    ks = np.asarray(ks, dtype=np.float64)
    log = (special.gammaln(n + 1) - special.gammaln(ks + 1) - special.gammaln(n - ks + 1)
           + special.xlogy(ks, p) + special.xlog1py(n - ks, -p))
    return np.exp(log)


def _clone_law(n: int, epsilon0: float) -> tuple[Any, Any, float]:
    """Representative values c of C ~ Bin(n−1, e^−ε₀), the probability of each one's block, and the mass
    outside every block (added to δ).

    H_c is non-increasing in c (one more clone is one more fair coin added to both sides: post-processing),
    so a block of consecutive values is bounded by its first one: at most :data:`_BLOCKS` evaluations of
    H per δ(ε), whatever n is, and still an upper bound.
    """
    import numpy as np
    from scipy import special

    m, p = n - 1, math.exp(-epsilon0)
    sd = math.sqrt(m * p * (1 - p))
    lo, hi = max(0, math.floor(m * p - 9 * sd - 30)), min(m, math.ceil(m * p + 9 * sd + 30))
    dropped = (float(special.bdtr(lo - 1, m, p)) if lo > 0 else 0.0) + float(special.bdtrc(hi, m, p))
    cs = np.arange(lo, hi + 1)
    weights = _binom_pmf(cs, m, p)
    step = max(1, math.ceil(len(cs) / _BLOCKS))
    if step > 1:
        starts = np.arange(0, len(cs), step)
        weights = np.add.reduceat(weights, starts)
        cs = cs[starts]
    return cs, weights, dropped


def _hockey_sticks(cs: Any, epsilon: float, epsilon0: float) -> Any:
    """H_ε(P_c‖Q_c) for every c in ``cs``: a prefix sum of P_c − e^ε·Q_c, as two binomial CDFs."""
    import numpy as np
    from scipy import special

    a = 1 / (1 + math.exp(-epsilon0))
    e = math.exp(epsilon)
    coef_now, coef_prev = a - e * (1 - a), (1 - a) - e * a  # P − e^ε Q = coef_now·B(j) + coef_prev·B(j−1)
    if coef_now <= 0:
        return np.zeros(len(cs))
    beta = coef_now / -coef_prev  # P − e^ε Q > 0  ⇔  B(j−1)/B(j) = j/(c−j+1) < β
    t = np.ceil(beta * (cs + 1) / (1 + beta)).astype(np.int64)  # the first j where it is not positive
    t = np.clip(t, 0, cs + 1)

    def cdf(x: Any) -> Any:
        return np.where(x < 0, 0.0, special.bdtr(np.clip(x, 0, cs), cs, 0.5))

    return np.maximum(coef_now * cdf(t - 1) + coef_prev * cdf(t - 2), 0.0)


def numerical_delta(n: int, epsilon0: float, epsilon: float) -> float:
    """An upper bound on the δ at which a shuffled batch of n ε₀-LDP reports is (ε, δ)-DP (FMT 2021, App. E)."""
    n, epsilon0, _ = _check(n, epsilon0, 0.5)
    cs, weights, dropped = _clone_law(n, epsilon0)
    return float((weights * _hockey_sticks(cs, epsilon, epsilon0)).sum()) + dropped


def numerical_epsilon(n: int, epsilon0: float, delta: float) -> float:
    """The smallest ε (to 60 bisections) whose :func:`numerical_delta` is ≤ δ; never above ε₀."""
    n, epsilon0, delta = _check(n, epsilon0, delta)
    cs, weights, dropped = _clone_law(n, epsilon0)
    if dropped >= delta:
        return epsilon0
    lo, hi = 0.0, epsilon0
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if float((weights * _hockey_sticks(cs, mid, epsilon0)).sum()) + dropped <= delta:
            hi = mid
        else:
            lo = mid
    return min(hi * _UP, epsilon0)


def _rr_count_law(others: int, ones: int, keep: float) -> Any:
    """The law of the number of reported ones among ``others`` devices, ``ones`` of which hold a one."""
    import numpy as np

    from_ones = _binom_pmf(np.arange(ones + 1), ones, keep)
    from_zeros = _binom_pmf(np.arange(others - ones + 1), others - ones, 1 - keep)
    size = len(from_ones) + len(from_zeros) - 1
    fft_size = 1 << (size - 1).bit_length()  # a power of two: numpy's FFT is slow at large prime sizes
    law = np.fft.irfft(np.fft.rfft(from_ones, fft_size) * np.fft.rfft(from_zeros, fft_size), fft_size)[:size]
    return np.clip(law, 0.0, None)


def _trimmed(law: Any, floor: float = 1e-30) -> tuple[Any, float]:
    """The window of ``law`` where it exceeds ``floor``, and the mass outside it (added to δ: an upper bound)."""
    import numpy as np

    keep = np.flatnonzero(law > floor)
    window = law[keep[0] : keep[-1] + 1]
    return window, max(0.0, float(law.sum() - window.sum()))


def _rr_delta(law: Any, keep: float, epsilon: float) -> float:
    import numpy as np

    shifted = np.concatenate(([0.0], law))
    padded = np.concatenate((law, [0.0]))
    one = keep * shifted + (1 - keep) * padded  # the differing device holds a one
    zero = (1 - keep) * shifted + keep * padded
    e = math.exp(epsilon)
    return max(float(np.maximum(one - e * zero, 0).sum()), float(np.maximum(zero - e * one, 0).sum()))


#: Up to this many other devices the exact ε of binary RR takes the worst case over every count of ones.
_RR_ALL_COUNTS = 2_000


def _rr_counts(others: int) -> tuple[int, ...]:
    """The counts of ones among the other devices over which the worst case is taken.

    Every count (by the 0/1 symmetry, 0..others/2) up to :data:`_RR_ALL_COUNTS` others; beyond, the extremes
    0..16 and one half, where the maximum lay at every n up to that bound (a test checks the largest).
    """
    if others <= _RR_ALL_COUNTS:
        return tuple(range(others // 2 + 1))
    return (*range(17), others // 2)


def binary_rr_epsilon(n: int, epsilon0: float, delta: float, *, ones: tuple[int, ...] | None = None) -> float:
    """The ε of shuffled binary randomized response (keep with probability e^ε₀/(e^ε₀+1)) at δ.

    Computed from the exact law of the count of reported ones, the worst case over the other n − 1 devices
    holding ``ones`` ones (default :func:`_rr_counts`): exact up to 2,001 reports, and beyond that the worst
    of the counts where the maximum lies. Each law is trimmed where it is below 10⁻³⁰, its dropped mass
    added to δ.
    """
    n, epsilon0, delta = _check(n, epsilon0, delta)
    keep = 1 / (1 + math.exp(-epsilon0))
    others = n - 1
    laws = [_trimmed(_rr_count_law(others, m, keep)) for m in (ones if ones is not None else _rr_counts(others))]
    lo, hi = 0.0, epsilon0
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if max(_rr_delta(law, keep, mid) + dropped for law, dropped in laws) <= delta:
            hi = mid
        else:
            lo = mid
    return min(hi * _UP, epsilon0)


@dataclass(frozen=True, slots=True)
class Amplification:
    """The (ε, δ) a shuffled batch satisfies, the method that gave ε, and every bound computed."""

    n: int
    epsilon0: float
    delta: float
    epsilon: float
    method: str
    closed_form: float | None
    numerical: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "epsilon0": self.epsilon0,
            "delta": self.delta,
            "epsilon": self.epsilon,
            "method": self.method,
            "bounds": {"closed_form": self.closed_form, "numerical": self.numerical},
        }


def amplify(n: int, epsilon0: float, delta: float, *, numerical: bool = True) -> Amplification:
    """The smallest valid generic bound on the central ε of a shuffled batch (ε₀ itself when none helps)."""
    n, epsilon0, delta = _check(n, epsilon0, delta)
    closed = closed_form_epsilon(n, epsilon0, delta) if closed_form_valid(n, epsilon0, delta) else None
    numeric = numerical_epsilon(n, epsilon0, delta) if numerical else None
    options = [(epsilon0, "local (no amplification)")]
    if closed is not None:
        options.append((closed, "FMT 2021 Thm 3.1 (closed form)"))
    if numeric is not None:
        options.append((numeric, "FMT 2021 App. E (numerical)"))
    epsilon, method = min(options)
    return Amplification(n, epsilon0, delta, epsilon, method, closed, numeric)


def local_epsilon_for(n: int, epsilon: float, delta: float, *, upper: float = 10.0, steps: int = 16) -> float:
    """The largest ε₀ (to within (upper − ε)/2^steps, rounded down) whose shuffled batch of ``n`` is
    (``epsilon``, ``delta``)-DP by :func:`amplify`: the local ε a shuffled campaign may declare to give the
    aggregator the same guarantee as a central (ε, δ) release. Never below ``epsilon`` (ε₀ = ε is always
    (ε, δ)-DP by post-processing) nor above ``upper``. Bisection on the monotone map ε₀ ↦ ε(n, ε₀, δ); each
    step is one :func:`amplify` (about 0.3 s at n = 10⁵ on one core)."""
    n, epsilon, delta = _check(n, epsilon, delta)
    if not epsilon < upper <= 20:
        raise InvalidParameter(f"'upper' must be in ({epsilon:g}, 20], got {upper!r}")
    lo, hi = epsilon, upper
    if amplify(n, hi, delta).epsilon <= epsilon:
        return hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        if amplify(n, mid, delta).epsilon <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo
