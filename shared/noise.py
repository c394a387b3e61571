"""The trusted curator's noise: its scale, law, variance, exact draw and exact interval. No I/O, no storage.

The service (``deniable.aggregator.central``), ``deniable compare`` and ``deniable audit`` all read the
noise from here, so that what is simulated, audited and released is one definition. Per bin of a histogram
of ℓ1 sensitivity Δ (:func:`sensitivity`) released at ε, the scale is b = Δ/ε (:func:`noise_scale`):

* ``discrete-laplace`` (the default): the geometric mechanism of Ghosh, Roughgarden and Sundararajan
  (2009), P(Z = z) = (1−a)/(1+a)·a^|z| with a = e^(−1/b), drawn exactly from ``secrets`` with integer
  arithmetic (:func:`deniable.shared.sampling.discrete_laplace`, Canonne–Kamath–Steinke 2020, Alg. 2). It
  is ε-DP exactly. Var = 2a/(1−a)² = 1/(2·sinh²(1/(2b))), slightly below 2b² (sd 1.357 against 1.414 at
  b = 1).
* ``laplace``: the textbook Laplace(b), made safe against Mironov's floating-point attack (CCS 2012) by
  the lattice construction OpenDP uses: the exact discrete Laplace on the grid γ·ℤ, γ = 2^−20
  (:data:`LATTICE_BITS`), with scale b/γ in grid units. Counts are integers (multiples of 2^20 grid
  steps), so moving one person shifts a bin by Δ·2^20 steps and the privacy loss is exactly
  Δ·2^20·γ/b = ε. Outputs are dyadic rationals, exact as floats. Var = γ²/(2·sinh²(γ/(2b))) =
  2b² − γ²/6 + O(γ⁴/b²): the reported stderr is √2·b to 13 digits.
* ``gaussian``: the discrete Gaussian N_ℤ(0, σ²) (``scale`` is then σ², calibrated by the accountant; the
  facts are in :mod:`deniable.shared.gaussian`).

ε is taken as the decimal it is written as (:func:`exact_epsilon`: 0.1 is 1/10), so the noise spends
exactly what the accountant charges.

**Intervals from the exact law.** A count c released with integer noise Z covers the truth t with the
interval [c − u, c + l] iff −l ≤ Z ≤ u; :func:`interval_widths` picks (l, u) from the pmf (mid-p rule: the
coverage is within half a point's mass of the level, where the normal interval of the discrete Laplace
covers 0.927 at ε = 1). For the lattice Laplace, P(|Z| ≤ m steps) = 1 − 2a^(m+1)/(1+a) in closed form
(:func:`lattice_half_width`), so its interval covers the level to within one lattice step's mass (10⁻⁶),
where ĉ ± 1.96·√2·b would cover 1 − e^(−1.96·√2) = 0.9375 for every ε.

Simulations (:func:`simulate_two_sided_geometric`) draw the same law vectorized from a seeded numpy
generator, for ``compare`` and ``audit`` only: releases use the exact sampler over ``secrets``.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from .errors import InvalidConfig, InvalidParameter
from .gaussian import L1_SENSITIVITY, discrete_gaussian_pmf, discrete_gaussian_variance
from .limits import MECHANISM_EPSILON, check_range
from .sampling import RandBelow, discrete_gaussian, discrete_laplace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ADJACENCIES",
    "LATTICE",
    "LATTICE_BITS",
    "NOISES",
    "check_epsilon",
    "check_noise",
    "exact_epsilon",
    "interval_widths",
    "lattice_half_width",
    "noise_pmf",
    "noise_scale",
    "noise_variance",
    "noisy_counts",
    "sample_noise",
    "sensitivity",
    "simulate_two_sided_geometric",
]

#: ℓ1 sensitivity of a histogram under each adjacency relation (one table, in ``deniable.shared.gaussian``).
ADJACENCIES: Mapping[str, int] = L1_SENSITIVITY

#: Noise families a release may ask for; the first is the default.
NOISES: tuple[str, ...] = ("discrete-laplace", "laplace", "gaussian")

#: The ``laplace`` noise lives on the lattice 2^−LATTICE_BITS·ℤ.
LATTICE_BITS = 20
LATTICE = Fraction(1, 2**LATTICE_BITS)


def check_epsilon(epsilon: float, name: str = "epsilon") -> None:
    """The noise samplers take the library range of ε (``deniable.shared.limits.MECHANISM_EPSILON``)."""
    check_range(name, epsilon, MECHANISM_EPSILON, InvalidParameter)


def exact_epsilon(x: float | Decimal | str) -> Decimal:
    """ε as the decimal it is written as: a float by its shortest ``repr`` (0.1 is 1/10), a Decimal or a
    decimal string (as stored in ``campaigns.epsilon_spent``) exactly."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, str):
        return Decimal(x)
    return Decimal(repr(float(x)))


def check_noise(noise: str) -> None:
    """Raise :class:`InvalidParameter` unless ``noise`` is one of :data:`NOISES`."""
    if noise not in NOISES:
        raise InvalidParameter(f"'noise' must be one of {', '.join(NOISES)}, got {noise!r}")


def sensitivity(adjacency: str) -> int:
    """Δ of a histogram: 1 under ``add-remove``, 2 under ``replace`` (one bin −1, another +1)."""
    try:
        return ADJACENCIES[adjacency]
    except KeyError:
        raise InvalidConfig(f"'adjacency' must be one of {', '.join(ADJACENCIES)}, got {adjacency!r}") from None


def noise_scale(epsilon: float, delta: int) -> Fraction:
    """b = Δ/ε exactly, ε taken as the decimal it is written as (0.1 is 1/10), as the accountant adds it."""
    check_epsilon(epsilon)
    return Fraction(delta) / Fraction(exact_epsilon(epsilon))


def noise_variance(noise: str, scale: Fraction | float) -> float:
    """Exact variance of one bin's noise: 1/(2 sinh²(1/2b)) (discrete) or γ²/(2 sinh²(γ/2b)) (lattice);
    for ``gaussian`` ``scale`` is σ² and the variance that of N_ℤ(0, σ²), slightly below σ²."""
    check_noise(noise)
    if noise == "gaussian":
        return discrete_gaussian_variance(scale)
    b = float(scale)
    if noise == "discrete-laplace":
        return 1.0 / (2.0 * math.sinh(0.5 / b) ** 2)
    gamma = float(LATTICE)
    return gamma * gamma / (2.0 * math.sinh(0.5 * gamma / b) ** 2)


def sample_noise(noise: str, scale: Fraction, randbelow: RandBelow = secrets.randbelow) -> Fraction:
    """One exact draw of the noise: an integer, or a multiple of 2^−20 for ``laplace``; for ``gaussian``
    ``scale`` is σ² and the draw N_ℤ(0, σ²) (CKS 2020, Alg. 3).

    Releases draw from ``secrets`` (the default); tests replay the same algorithm from a seeded ``randbelow``.
    """
    check_noise(noise)
    if noise == "gaussian":
        return Fraction(discrete_gaussian(scale, randbelow))
    if noise == "discrete-laplace":
        return Fraction(discrete_laplace(scale, randbelow))
    return Fraction(discrete_laplace(scale / LATTICE, randbelow)) * LATTICE


def noisy_counts(
    counts: Sequence[int], *, epsilon: float, delta: int, noise: str, randbelow: RandBelow = secrets.randbelow
) -> list[float]:
    """Each count plus independent noise of scale Δ/ε: ε-DP for a histogram of ℓ1 sensitivity Δ."""
    scale = noise_scale(epsilon, delta)
    return [float(int(c) + sample_noise(noise, scale, randbelow)) for c in counts]


def noise_pmf(noise: str, scale: Fraction) -> Callable[[int], float] | None:
    """P(Z = z) of an integer-valued noise (``discrete-laplace``, ``gaussian``); ``None`` for the lattice."""
    if noise == "discrete-laplace":
        a = math.exp(-1.0 / float(scale))
        return lambda z: (1 - a) / (1 + a) * a ** abs(z)
    if noise == "gaussian":
        return lambda z: discrete_gaussian_pmf(z, scale)
    return None


def interval_widths(pmf: Callable[[int], float], level: float) -> tuple[int, int]:
    """The integer interval (−l, u), u ≤ l + 1, of a symmetric integer noise whose coverage P(−l ≤ Z ≤ u)
    is nearest to ``level``.

    Widths grow one point at a time, alternating sides ((0, 0), (0, 1), (1, 1), …); a point is added while
    that brings the coverage nearer the level (mid-p rule), so the coverage is within half a point's mass of
    the level. A symmetric interval alone jumps from 0.927 to 0.973 at ε = 1 (discrete Laplace); this one
    covers 0.950. Returned as (l, u): the interval for a count c is [c − u, c + l] (it covers t iff
    −l ≤ c − t ≤ u).
    """
    low = up = 0
    covered = pmf(0)
    while True:
        nxt = pmf(up + 1) if up == low else pmf(-(low + 1))
        if covered + nxt / 2 >= level:
            return low, up
        covered += nxt
        if up == low:
            up += 1
        else:
            low += 1


def lattice_half_width(scale: Fraction | float, level: float) -> float:
    """The half-width h (a multiple of the lattice step γ) of the lattice Laplace's interval c ± h.

    With a = e^(−γ/b) per step, P(|Z| ≤ mγ) = 1 − 2a^(m+1)/(1+a); m is the least integer with coverage
    ≥ ``level``, m = ⌈ln((1 − level)(1 + a)/2)/ln a⌉ − 1, so the coverage exceeds the level by less than
    one step's mass (≈ γ/b). It tends to b·ln(1/(1 − level)) (2.996·b at 95%), against the normal
    1.96·√2·b = 2.772·b, which covers 0.9375 whatever b is.
    """
    gamma = float(LATTICE)
    log_a = -gamma / float(scale)
    a = math.exp(log_a)
    m = max(math.ceil(math.log((1.0 - level) * (1.0 + a) / 2.0) / log_a) - 1, 0)
    while 1.0 - 2.0 * math.exp((m + 1) * log_a) / (1.0 + a) < level:  # guard the float rounding of m
        m += 1
    return m * gamma


def simulate_two_sided_geometric(success: float, size: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """``size`` draws of the two-sided geometric law P(Z = z) ∝ a^|z|, a = 1 − ``success``, vectorized from a
    seeded generator as the difference of two Geometric(success) variables (for simulations and audits;
    releases draw :func:`sample_noise` over ``secrets``). With success = 1 − e^(−1/b) it is the discrete
    Laplace of scale b; per lattice step, success = 1 − e^(−γ/b) gives the lattice Laplace in steps."""
    import numpy as np

    result: npt.NDArray[np.int64] = (rng.geometric(success, size) - rng.geometric(success, size)).astype(np.int64)
    return result
