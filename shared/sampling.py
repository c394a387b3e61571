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

**The device randomizers draw a fixed pattern** (:func:`randomized_response`, :func:`unary_bits`): the
number of ``randbelow`` calls and their bounds are the same for every true value and every report, so
neither the number of draws nor the time they take tells an observer anything about the value. This
forces one change to the probabilities: a sampler that makes a fixed number of uniform integer draws can
only produce rational probabilities, and a likelihood ratio of exactly e^ε is irrational for every rational
ε > 0; with a variable number of draws, on the other hand, the number of draws given the report would
depend on whether the report equals the value (the rejection sampler of CKS 2020 accepts the true value
without a coin). So randomized response here weighs the true value by a rational r with
e^ε·(1 − 10⁻³⁸) < r ≤ e^ε (:func:`exp_lower`, 40 significant digits): the likelihood ratio is exactly r, so
each report is exactly ln(r)-LDP, slightly *better* than ε, and its probabilities differ from the e^ε ones
by less than 10⁻³⁸ (far below a float's resolution; the estimators use the same r). One draw of
``randbelow(a + (k−1)·b)`` for r = a/b decides the report: expected O(1) work at every accepted ε, where a
rejection sampler needs about k/(1+(k−1)e^(−ε)) proposals (2.4·10⁸ for OLH at ε = 20).

Limits: the draws are fixed, but the interpreter is not a constant-time machine. Selecting between the
value and its alternative costs a few nanoseconds of Python either way, and the big-integer comparison is
not constant-time in CPython; against an observer who can time a device to the nanosecond per call, only
a constant-time native implementation would do. ``secrets.randbelow`` itself redraws with probability
below 1/2 per call, independently of the value.
"""

from __future__ import annotations

import decimal
import functools
import math
import secrets
from collections.abc import Callable
from fractions import Fraction
from numbers import Real
from typing import Protocol

__all__ = [
    "RR_DIGITS",
    "RandBelow",
    "bernoulli",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_fraction",
    "exp_lower",
    "geometric_exp",
    "randomized_response",
    "seeded_randbelow",
    "unary_bits",
    "unary_set_bits",
]

#: Significant decimal digits of the rational weight r ≤ e^ε of randomized response (:func:`exp_lower`).
RR_DIGITS = 40

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


@functools.lru_cache(maxsize=1024)
def exp_lower(epsilon: Fraction) -> Fraction:
    """A rational r with e^ε·(1 − 10^(2−RR_DIGITS)) < r ≤ e^ε, for rational ε ≥ 0 (r = 1 at ε = 0).

    Proof of r ≤ e^ε: ε_low = ε rounded toward −∞ to RR_DIGITS + 20 digits, so ε_low ≤ ε; Python's
    ``Decimal.exp`` is correctly rounded (half-even), so y = exp(ε_low) at RR_DIGITS digits is within half
    a unit in the last place of e^(ε_low); r = y − 1 ulp is therefore below e^(ε_low) ≤ e^ε, and above
    e^ε·(1 − 2·10^(1−RR_DIGITS)) since ε − ε_low < ε·10^(−RR_DIGITS−19).
    """
    epsilon = Fraction(epsilon)
    if epsilon < 0:
        raise ValueError(f"exp_lower needs epsilon >= 0, got {epsilon}")
    if epsilon == 0:
        return Fraction(1)
    floor = decimal.Context(prec=RR_DIGITS + 20, rounding=decimal.ROUND_FLOOR)
    low = floor.divide(decimal.Decimal(epsilon.numerator), decimal.Decimal(epsilon.denominator))
    context = decimal.Context(prec=RR_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    y = context.exp(low)
    ulp = decimal.Decimal(1).scaleb(y.adjusted() - RR_DIGITS + 1)
    return Fraction(y) - Fraction(ulp)


def randomized_response(
    true_index: int, k: int, weight: Fraction, randbelow: RandBelow = secrets.randbelow
) -> int:
    """k-ary randomized response with one draw: P(y = x) = r/(r+k−1), P(y = j) = 1/(r+k−1) for j ≠ x.

    ``weight`` r = a/b ≥ 1 (from :func:`exp_lower`, so r ≤ e^ε and the report is ε-LDP: the likelihood
    ratio between two inputs is at most r). u = randbelow(a + (k−1)·b): u < a keeps x (mass a), otherwise
    y = x + 1 + ⌊(u−a)/b⌋ mod k, each of the k−1 other values with mass b. The one draw has the same bound
    for every x, and both candidates are computed before one is selected.
    """
    a, b = weight.numerator, weight.denominator
    u = randbelow(a + (k - 1) * b)
    other = (true_index + 1 + (u - a) // b) % k
    keep = u < a
    return true_index if keep else other


def unary_bits(true_index: int, k: int, weight: Fraction, randbelow: RandBelow = secrets.randbelow) -> int:
    """k independent bits: bit x is 1 with probability 1/2, every other bit with q = 1/(r+1) (OUE).

    Per bit one draw u = randbelow(2(a+b)) for r = a/b yields both candidate coins, independent and exact:
    the fair coin u mod 2 and the q-coin ⌊u/2⌋ < b. Bit v takes the fair coin iff v = x. k draws with one
    bound whatever x. Ratio p(1−q)/((1−p)q) = (1−q)/q = r ≤ e^ε (Wang et al. 2017, §4.3).
    """
    return unary_set_bits(1 << true_index, k, weight, randbelow)


def unary_set_bits(selected: int, k: int, weight: Fraction, randbelow: RandBelow = secrets.randbelow) -> int:
    """:func:`unary_bits` for a set: every bit in the mask ``selected`` takes the fair coin, the others the
    q-coin, q = 1/(r+1); the same k draws with one bound whatever the set."""
    a, b = weight.numerator, weight.denominator
    bound = 2 * (a + b)
    mask = 0
    for v in range(k):
        u = randbelow(bound)
        fair, low = u & 1, int((u >> 1) < b)
        chosen = (low, fair)[(selected >> v) & 1]
        mask |= chosen << v
    return mask


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
