"""Exact samplers for the privacy-critical path: integer arithmetic over a CSPRNG, no floats.

Every function draws uniform integers only, through ``randbelow`` (default :func:`secrets.randbelow`, the
operating system's CSPRNG), and compares integers only. Probabilities that carry ε are never rounded to a
float: ε enters as the exact rational value of the float it was given (``Fraction(0.1)`` is the exact binary
value, not 1/10), and e^(−γ) is sampled by the Bernoulli-factory of Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy", NeurIPS 2020, Algorithms 1 and 2. This avoids the floating-point attacks
of Mironov, "On Significance of the Least Significant Bits for Differential Privacy", CCS 2012.

``randbelow`` is injectable so that the device client can drive the same exact algorithms with a
deterministic HMAC-DRBG (permanent randomized response), and so that tests and audits can replay them from a
seed (:func:`seeded_randbelow`). Devices and the service always use the default, the OS CSPRNG.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from fractions import Fraction
from numbers import Real
from typing import Protocol

__all__ = [
    "RandBelow",
    "bernoulli",
    "bernoulli_exp",
    "bernoulli_flip",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_fraction",
    "geometric_exp",
    "randomized_choice",
    "seeded_randbelow",
]

#: A source of uniform integers: ``randbelow(n)`` is uniform on ``{0, …, n−1}``.
RandBelow = Callable[[int], int]


class ByteSource(Protocol):
    """Anything with ``bytes(n)``: numpy's ``Generator``."""

    def bytes(self, length: int) -> bytes: ...


def seeded_randbelow(source: ByteSource) -> RandBelow:
    """A ``randbelow`` that draws from a seeded generator (``np.random.default_rng(seed)``), for tests and
    reproducible audits only: it makes the exact samplers replayable, it is not a CSPRNG.

    Uniform by rejection: ``ceil(log2 n)`` random bits, redrawn while ≥ n (fewer than 2 draws on average).
    """

    def randbelow(n: int) -> int:
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        bits = (n - 1).bit_length()
        size = (bits + 7) // 8
        while True:
            x = int.from_bytes(source.bytes(size), "big") >> (8 * size - bits)
            if x < n:
                return x

    return randbelow


def exact_fraction(x: Real | Fraction | int, name: str = "epsilon") -> Fraction:
    """The exact rational value of ``x`` (a float's exact binary value); rejects non-finite or negative."""
    if isinstance(x, bool) or not isinstance(x, Real | Fraction | int):
        raise TypeError(f"{name!r} must be a number, got {type(x).__name__}")
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{name!r} must be finite, got {x}")
    value = Fraction(x)  # type: ignore[arg-type]
    if value < 0:
        raise ValueError(f"{name!r} must be non-negative, got {x}")
    return value


def bernoulli(num: int, den: int, randbelow: RandBelow = secrets.randbelow) -> bool:
    """Bernoulli(num/den) exactly: ``randbelow(den) < num``, for integers 0 ≤ num ≤ den, den ≥ 1."""
    if den < 1 or not 0 <= num <= den:
        raise ValueError(f"bernoulli needs 0 <= num <= den and den >= 1, got {num}/{den}")
    return randbelow(den) < num


def _bernoulli_exp_unit(gamma: Fraction, randbelow: RandBelow) -> bool:
    """Bernoulli(e^(−γ)) for 0 ≤ γ ≤ 1 (CKS 2020, Alg. 1).

    Draw A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0; return 1 iff that k is odd.
    P(K > k) = γ^k/k!, so P(K odd) = Σ_j (−γ)^j/j! = e^(−γ).
    """
    k = 1
    num, den = gamma.numerator, gamma.denominator
    if num == 0:
        return True
    while num >= den * k or randbelow(den * k) < num:  # a certain coin (γ/k = 1) needs no draw
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction | int, randbelow: RandBelow = secrets.randbelow) -> bool:
    """Bernoulli(e^(−γ)) exactly for rational γ ≥ 0 (CKS 2020, Alg. 1).

    For γ > 1: e^(−γ) = (e^(−1))^⌊γ⌋ · e^(−(γ−⌊γ⌋)), each factor an independent exact coin.
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError(f"bernoulli_exp needs gamma >= 0, got {gamma}")
    whole = math.floor(gamma)
    one = Fraction(1)
    for _ in range(whole):
        if not _bernoulli_exp_unit(one, randbelow):
            return False
    return _bernoulli_exp_unit(gamma - whole, randbelow)


def randomized_choice(
    true_index: int, k: int, epsilon: Fraction, randbelow: RandBelow = secrets.randbelow
) -> int:
    """k-ary randomized response, exactly: P(y = x) = e^ε/(e^ε+k−1), P(y = j) = 1/(e^ε+k−1) for j ≠ x.

    Rejection sampling: propose y uniform on {0..k−1}; accept y = x always and y ≠ x with probability
    e^(−ε). Acceptance weights are 1 for x and e^(−ε) for each other value, so the output law is
    proportional to (e^ε, 1, …, 1): exactly generalized randomized response, whose likelihood ratio between
    any two inputs is at most e^ε (ε-LDP). Expected proposals: k/(1+(k−1)e^(−ε)).
    """
    while True:
        y = randbelow(k)
        if y == true_index or bernoulli_exp(epsilon, randbelow):
            return y


def bernoulli_flip(epsilon: Fraction, randbelow: RandBelow = secrets.randbelow) -> bool:
    """Bernoulli(1/(e^ε+1)) exactly, by a two-coin Bernoulli factory.

    Each round returns False with probability 1/2 and True with probability e^(−ε)/2, else repeats, so
    P(True) = e^(−ε)/(1+e^(−ε)) = 1/(e^ε+1). Fewer than two rounds on average.
    """
    while True:
        if randbelow(2):
            return False
        if bernoulli_exp(epsilon, randbelow):
            return True


def geometric_exp(gamma: Fraction, randbelow: RandBelow = secrets.randbelow) -> int:
    """V ~ Geometric with P(V = v) = (1 − e^(−γ)) e^(−γv), v ≥ 0: count successes of Bernoulli(e^(−γ))."""
    v = 0
    while bernoulli_exp(gamma, randbelow):
        v += 1
    return v


def discrete_laplace(scale: Fraction | int, randbelow: RandBelow = secrets.randbelow) -> int:
    """Z with P(Z = z) = (1−a)/(1+a)·a^|z|, a = e^(−1/scale), rational scale = t/s > 0 (CKS 2020, Alg. 2).

    Var(Z) = 2a/(1−a)². With scale = Δ/ε this is the geometric mechanism of Ghosh, Roughgarden and
    Sundararajan (2009), ε-DP for a query of ℓ1 sensitivity Δ.
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError(f"discrete_laplace needs scale > 0, got {scale}")
    t, s = scale.numerator, scale.denominator
    while True:
        u = randbelow(t)
        if not bernoulli_exp(Fraction(u, t), randbelow):
            continue
        v = geometric_exp(Fraction(1), randbelow)
        x = u + t * v
        y = x // s
        negative = randbelow(2)
        if negative and y == 0:
            continue
        return -y if negative else y


def _isqrt_floor(x: Fraction) -> int:
    """⌊√x⌋ exactly for rational x ≥ 0: ⌊√(p/q)⌋ = ⌊isqrt(p·q)/q⌋."""
    return math.isqrt(x.numerator * x.denominator) // x.denominator


def discrete_gaussian(sigma2: Fraction | int, randbelow: RandBelow = secrets.randbelow) -> int:
    """Y with P(Y = y) ∝ e^(−y²/(2σ²)) on ℤ, for rational σ² > 0 (Canonne, Kamath, Steinke 2020, Alg. 3).

    Rejection from the discrete Laplace of integer scale t = ⌊σ⌋ + 1: propose Y ~ DLap(t), accept with
    probability e^(−(|Y| − σ²/t)²/(2σ²)), an exact coin since the exponent is rational. The accepted law
    is ∝ e^(−|y|/t − (|y| − σ²/t)²/(2σ²)) = e^(−y²/(2σ²))·e^(−σ²/(2t²)): exactly the discrete Gaussian.
    Added to an integer query of ℓ2 sensitivity Δ₂ it is (Δ₂²/(2σ²))-zCDP (CKS 2020, Thm 4 and 14).
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"discrete_gaussian needs sigma2 > 0, got {sigma2}")
    t = _isqrt_floor(sigma2) + 1
    shift = sigma2 / t
    twice = 2 * sigma2
    while True:
        y = discrete_laplace(t, randbelow)
        gap = abs(y) - shift
        if bernoulli_exp(gap * gap / twice, randbelow):
            return y
