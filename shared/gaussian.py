"""Gaussian noise for the trusted curator: its law, its privacy, its calibration. No I/O, no numpy.

The sampler itself is :func:`deniable.shared.sampling.discrete_gaussian` (exact, over ``secrets``); this
module holds the facts about it, in one place:

* **Law.** N_ℤ(0, σ²): P(Y = y) = e^(−y²/(2σ²)) / Σ_z e^(−z²/(2σ²)) (Canonne, Kamath, Steinke, "The
  Discrete Gaussian for Differential Privacy", NeurIPS 2020). Its variance is slightly below σ²; by
  Poisson summation, with w_k = e^(−2π²σ²k²),

      Var = σ² − 4π²σ⁴ · Σ_k k² w_k / Σ_k w_k                      (k over ℤ)

  (gap 2.1·10⁻⁷ at σ² = 1, below 10⁻¹⁵ from σ² = 2 on).
* **zCDP.** Added to an integer query of ℓ2 sensitivity Δ₂ it is ρ-zCDP with ρ = Δ₂²/(2σ²) (CKS 2020,
  Thm 4; for a histogram, independent noise per bin, Thm 14), exactly at integer Rényi orders.
* **(ε, δ) exactly.** For a one-dimensional integer shift Δ the privacy profile is (CKS 2020, Thm 7)

      δ(ε) = Σ_y max(0, P(y) − e^ε P(y − Δ)) = P[Y > εσ²/Δ − Δ/2] − e^ε P[Y > εσ²/Δ + Δ/2].

* **Analytic Gaussian.** Continuous N(0, σ²) noise on a query of ℓ2 sensitivity Δ is (ε, δ)-DP iff
  Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ (Balle and Wang, ICML 2018, Thm 8); the left side
  decreases in σ, so the smallest σ is found by bisection. Valid for every ε > 0 (the classic
  σ = Δ√(2 ln(1.25/δ))/ε needs ε < 1 and is 20–60% larger).
* **Sensitivity of a histogram.** One bin moves by 1 under add-remove: Δ₂ = 1. One bin −1 and another
  +1 under replace: Δ₂ = √2 (Δ₂² = 2), against Δ₁ = 2.

Floating-point here is only in *accounting and calibration*, never in a draw: the sampler takes σ² as an
exact rational. Calibration rounds σ² up (:func:`calibrate_discrete_gaussian`) and then checks the exact
discrete condition, so rounding can only make the release more private than claimed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from fractions import Fraction

__all__ = [
    "L1_SENSITIVITY",
    "L2_SENSITIVITY_SQUARED",
    "analytic_gaussian_sigma",
    "calibrate_discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "gaussian_delta",
    "normal_cdf",
    "zcdp_rho",
]

#: ℓ1 sensitivity of a histogram under each adjacency relation (the Laplace scale is Δ₁/ε).
L1_SENSITIVITY: Mapping[str, int] = {"add-remove": 1, "replace": 2}

#: Squared ℓ2 sensitivity of a histogram (ρ = Δ₂²/(2σ²)): 1 under add-remove, 2 under replace (Δ₂ = √2).
L2_SENSITIVITY_SQUARED: Mapping[str, int] = {"add-remove": 1, "replace": 2}

#: Terms of the Gaussian sums beyond which e^(−y²/(2σ²)) underflows: |y| ≤ 39σ covers e^(−760).
_TAIL_SIGMAS = 39

#: Grid on which calibrated σ² is rounded up, so that the sampler's exponents stay small fractions.
_SIGMA2_GRID = 10**6


def normal_cdf(x: float) -> float:
    """Φ(x) = erfc(−x/√2)/2, accurate to a few ulps in both tails (no 1 − Φ cancellation)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def zcdp_rho(sensitivity_squared: int | Fraction, sigma2: int | Fraction) -> Fraction:
    """ρ = Δ₂²/(2σ²) exactly: the zCDP cost of one discrete (or continuous) Gaussian release."""
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2}")
    return Fraction(sensitivity_squared) / (2 * sigma2)


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """δ(ε) of continuous N(0, σ²) noise at ℓ2 sensitivity Δ (Balle and Wang 2018, Thm 8), exact."""
    if sigma <= 0 or sensitivity <= 0 or epsilon < 0:
        raise ValueError(f"need sigma > 0, sensitivity > 0, epsilon >= 0; got {sigma}, {sensitivity}, {epsilon}")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = normal_cdf(a - b)
    second = normal_cdf(-a - b)
    if second == 0.0:
        return first
    return max(0.0, first - math.exp(epsilon + math.log(second)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest σ with which N(0, σ²) noise is (ε, δ)-DP at ℓ2 sensitivity Δ (Balle and Wang 2018).

    Bisection on the exact condition :func:`gaussian_delta` ≤ δ (decreasing in σ); returns the upper end
    of the final bracket, so the condition holds at the returned σ. σ(ε = 1, δ = 10⁻⁵, Δ = 1) = 3.7305.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    lo, hi = 0.0, sensitivity
    while gaussian_delta(epsilon, hi, sensitivity) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if gaussian_delta(epsilon, mid, sensitivity) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def _weight(y: int, sigma2: float) -> float:
    return math.exp(-(y * y) / (2.0 * sigma2))


def _normaliser(sigma2: float) -> float:
    """Σ_y e^(−y²/(2σ²)) over ℤ: directly for small σ, by Poisson summation (σ√(2π)·Σ_k w_k) otherwise."""
    if sigma2 < 1:
        radius = math.ceil(_TAIL_SIGMAS * math.sqrt(sigma2)) + 1
        return math.fsum(_weight(y, sigma2) for y in range(-radius, radius + 1))
    theta = math.fsum(math.exp(-2.0 * math.pi**2 * sigma2 * k * k) for k in range(-3, 4))
    return math.sqrt(2.0 * math.pi * sigma2) * theta


def discrete_gaussian_pmf(y: int, sigma2: Fraction | float) -> float:
    """P(Y = y) for Y ~ N_ℤ(0, σ²)."""
    s2 = float(sigma2)
    return _weight(y, s2) / _normaliser(s2)


def discrete_gaussian_variance(sigma2: Fraction | float) -> float:
    """Var(Y) for Y ~ N_ℤ(0, σ²): exact up to rounding (Poisson summation above σ² = 1, a direct sum below)."""
    s2 = float(sigma2)
    if s2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2}")
    if s2 < 1:
        radius = math.ceil(_TAIL_SIGMAS * math.sqrt(s2)) + 1
        weights = [(y, _weight(y, s2)) for y in range(-radius, radius + 1)]
        return math.fsum(y * y * w for y, w in weights) / math.fsum(w for _, w in weights)
    ks = range(1, 4)
    w = [math.exp(-2.0 * math.pi**2 * s2 * k * k) for k in ks]
    gap = 4.0 * math.pi**2 * s2 * s2 * 2.0 * math.fsum(k * k * wk for k, wk in zip(ks, w, strict=True))
    return s2 - gap / (1.0 + 2.0 * math.fsum(w))


def discrete_gaussian_delta(epsilon: float, sigma2: Fraction | float, sensitivity: int = 1) -> float:
    """δ(ε) of N_ℤ(0, σ²) noise on an integer query shifted by Δ (CKS 2020, Thm 7), exactly.

    Sums the non-negative terms P(y)·(1 − e^(ε − L(y))) over the outputs whose privacy loss
    L(y) = (Δ² + 2Δy)/(2σ²) (with y ↦ −y by symmetry) exceeds ε; no difference of two tails is formed.
    """
    s2 = float(sigma2)
    if s2 <= 0 or sensitivity < 1 or epsilon < 0:
        raise ValueError(f"need sigma2 > 0, sensitivity >= 1, epsilon >= 0; got {sigma2}, {sensitivity}, {epsilon}")
    start = math.floor(epsilon * s2 / sensitivity - sensitivity / 2.0) + 1
    stop = max(start, 0) + math.ceil(_TAIL_SIGMAS * math.sqrt(s2)) + 2
    total = []
    for y in range(start, stop):
        loss = (sensitivity * sensitivity + 2.0 * sensitivity * y) / (2.0 * s2)
        if loss > epsilon:
            total.append(_weight(y, s2) * -math.expm1(epsilon - loss))
    return math.fsum(total) / _normaliser(s2)


@functools.lru_cache(maxsize=256)
def calibrate_discrete_gaussian(epsilon: float, delta: float, sensitivity: int = 1) -> Fraction:
    """σ² (rational, on a 10⁻⁶ grid) with which N_ℤ(0, σ²) on an integer query of shift Δ is (ε, δ)-DP.

    Starts from the analytic Gaussian σ (Balle and Wang 2018) rounded up to the grid, then checks the
    exact discrete condition :func:`discrete_gaussian_delta`, moving σ² in 0.1% steps to bracket the
    boundary and bisecting on the grid (the discrete profile is within a hair of the continuous one once
    σ ≥ 1). One-dimensional shifts only; a histogram under replace is calibrated through its ρ instead.
    """
    sigma = analytic_gaussian_sigma(epsilon, delta, float(sensitivity))

    def holds(units: int) -> bool:
        return units > 0 and discrete_gaussian_delta(epsilon, Fraction(units, _SIGMA2_GRID), sensitivity) <= delta

    lo = hi = math.ceil(sigma * sigma * _SIGMA2_GRID)
    while not holds(hi):  # the discrete profile lies above the continuous one here: grow σ²
        lo, hi = hi, math.ceil(hi * 1.001) + 1
    while lo == hi or holds(lo):  # or below it: shrink σ² while the exact condition still holds
        hi, lo = lo, max(0, math.floor(lo * 0.999) - 1)
    while hi - lo > 1:  # bisect on the grid; hi always satisfies the exact condition
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return Fraction(hi, _SIGMA2_GRID)
