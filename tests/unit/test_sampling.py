"""The exact samplers against their exact probabilities.

The samplers run exactly as on a device, but their uniform integers come from a seeded ``randbelow``
(:func:`seeded_randbelow`), so every run draws the same numbers. Each check still rejects at a false-alarm
rate of ALPHA (a χ² with every bin expecting at least 5, or an exact binomial test), so that a new seed
does not flake either, while a sampler that is off by a few percent fails with certainty at these sizes.
That the product itself draws from ``secrets`` is checked on the functions' defaults.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from deniable.shared import sampling
from deniable.shared.sampling import (
    bernoulli,
    bernoulli_exp,
    discrete_laplace,
    exact_fraction,
    exp_lower,
    randomized_response,
    seeded_randbelow,
    unary_bits,
)

ALPHA = 1e-6


def binomial_ok(successes: int, trials: int, p: float) -> bool:
    """Two-sided exact binomial test at level ALPHA."""
    return stats.binomtest(successes, trials, p).pvalue > ALPHA


def chisquare_ok(observed: np.ndarray, expected_probs: np.ndarray) -> bool:
    """χ² goodness of fit at level ALPHA; the approximation needs every bin to expect at least 5."""
    expected = expected_probs / expected_probs.sum() * observed.sum()
    assert expected.min() >= 5, "pool the sparse bins: the χ² law does not hold below 5 expected"
    return stats.chisquare(observed, expected).pvalue > ALPHA


def source(seed: int) -> sampling.RandBelow:
    return seeded_randbelow(np.random.default_rng(seed))


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 2), Fraction(1), Fraction(23, 10), Fraction(0.1)])
def test_bernoulli_exp_matches_exp_minus_gamma(gamma: Fraction) -> None:
    n, randbelow = 40_000, source(1)
    hits = sum(bernoulli_exp(gamma, randbelow) for _ in range(n))
    assert binomial_ok(hits, n, math.exp(-float(gamma)))


def _exp_bounds(epsilon: Fraction) -> tuple[Fraction, Fraction]:
    """L ≤ e^ε ≤ U from the Taylor series: L = Σ_{j≤m} ε^j/j!, U = L + ε^(m+1)/(m+1)!·1/(1 − ε/(m+2))."""
    total, term, j = Fraction(0), Fraction(1), 0
    while True:
        total += term
        j += 1
        term = term * epsilon / j
        if j > 2 * epsilon + 2 and term < total * Fraction(1, 10**50):
            return total, total + term / (1 - epsilon / (j + 1))


@pytest.mark.parametrize(
    "epsilon", [Fraction(1e-6), Fraction(0.1), Fraction(1), Fraction(math.log(3)), Fraction(1, 3), Fraction(5),
                Fraction(10.0), Fraction(13.7), Fraction(20)]
)  # fmt: skip
def test_exp_lower_is_at_most_e_eps_and_within_its_bound(epsilon: Fraction) -> None:
    r = exp_lower(epsilon)
    low, high = _exp_bounds(epsilon)
    assert r <= low  # hence r ≤ e^ε: the likelihood ratio r never exceeds e^ε
    assert (high - r) / high < Fraction(2, 10 ** (sampling.RR_DIGITS - 1))
    assert exp_lower(Fraction(0)) == 1
    with pytest.raises(ValueError, match=">= 0"):
        exp_lower(Fraction(-1))


def _fixed(u: int) -> sampling.RandBelow:
    """A randbelow that always answers u (checked against the bound it is asked for)."""

    def randbelow(n: int) -> int:
        assert 0 <= u < n
        return u

    return randbelow


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (4, 0.5), (16, 1.0), (5, 3.0), (7, 20.0)])
def test_randomized_response_maps_its_one_draw_exactly(k: int, eps: float) -> None:
    """Exact law: of the a + (k−1)·b outcomes of the one draw, the first a give x and each following block
    of b gives x+1, x+2, … mod k; probing the block edges proves the preimage sizes a, b, …, b."""
    r = exp_lower(Fraction(eps))
    a, b = r.numerator, r.denominator
    for x in (0, k - 1, k // 2):
        assert randomized_response(x, k, r, _fixed(0)) == x
        assert randomized_response(x, k, r, _fixed(a - 1)) == x
        for j in range(1, k):
            assert randomized_response(x, k, r, _fixed(a + (j - 1) * b)) == (x + j) % k
            assert randomized_response(x, k, r, _fixed(a + j * b - 1)) == (x + j) % k
        with pytest.raises(AssertionError):
            randomized_response(x, k, r, _fixed(a + (k - 1) * b))  # the bound is a + (k−1)·b


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (16, 1.0), (5, 3.0)])
def test_randomized_response_has_the_grr_law(k: int, eps: float) -> None:
    n, x, randbelow = 30_000, 1, source(3)
    r = exp_lower(Fraction(eps))
    draws = np.bincount([randomized_response(x, k, r, randbelow) for _ in range(n)], minlength=k)
    probs = np.full(k, 1.0)
    probs[x] = math.exp(eps)
    assert chisquare_ok(draws, probs)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.5, 1.0, 10.0])
def test_unary_bits_take_both_coins_from_each_draw(eps: float) -> None:
    """Per bit u = randbelow(2(a+b)): the fair coin is u mod 2, the q-coin ⌊u/2⌋ < b (mass b of a+b)."""
    r = exp_lower(Fraction(eps))
    a, b = r.numerator, r.denominator
    k, x = 5, 2
    assert unary_bits(x, k, r, _fixed(2 * b - 2)) == 0b11011  # q-coins 1, fair coin 0
    assert unary_bits(x, k, r, _fixed(2 * b - 1)) == 0b11111  # q-coins 1, fair coin 1
    assert unary_bits(x, k, r, _fixed(2 * b)) == 0b00000  # q-coins 0 from ⌊u/2⌋ = b on
    assert unary_bits(x, k, r, _fixed(2 * (a + b) - 1)) == 0b00100
    n, randbelow = 20_000, source(2)
    ones = np.zeros(k)
    for _ in range(n):
        mask = unary_bits(x, k, r, randbelow)
        ones += [(mask >> v) & 1 for v in range(k)]
    q = 1 / (math.exp(eps) + 1)
    for v in range(k):
        assert binomial_ok(int(ones[v]), n, 0.5 if v == x else q)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [Fraction(1), Fraction(2), Fraction(1, 2), Fraction(3, 2)])
def test_discrete_laplace_pmf(scale: Fraction) -> None:
    n, randbelow = 30_000, source(4)
    draws = np.array([discrete_laplace(scale, randbelow) for _ in range(n)])
    a = math.exp(-1 / float(scale))
    edge = 0  # bins −edge..edge, each tail beyond pooled: P(Z > m) = a^(m+1)/(1+a), each expecting >= 5
    while n * min(1 - a, a) * a ** (edge + 1) / (1 + a) >= 5:  # bin edge+1 and the tail past it
        edge += 1
    support = np.arange(-edge, edge + 1)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    tail = a ** (edge + 1) / (1 + a)
    observed = np.array(
        [np.count_nonzero(draws < -edge)] + [np.count_nonzero(draws == z) for z in support]
        + [np.count_nonzero(draws > edge)]
    )  # fmt: skip
    assert chisquare_ok(observed, np.array([tail, *pmf, tail]))
    # the variance 2a/(1−a)² is what releases report as their stderr²
    var = 2 * a / (1 - a) ** 2
    sd_of_var = math.sqrt((np.mean(draws.astype(float) ** 4) - var**2) / n)
    assert abs(np.var(draws) - var) < 5 * sd_of_var


def test_bernoulli_is_exact_on_integers() -> None:
    assert bernoulli(0, 5) is False
    assert bernoulli(5, 5) is True
    with pytest.raises(ValueError, match="num <= den"):
        bernoulli(6, 5)


def test_exact_fraction_is_the_float_value_not_the_decimal() -> None:
    assert exact_fraction(0.1) == Fraction(3602879701896397, 36028797018963968)
    with pytest.raises(ValueError, match="finite"):
        exact_fraction(float("inf"))
    with pytest.raises(TypeError):
        exact_fraction(True)  # type: ignore[arg-type]


def test_injected_randbelow_makes_the_samplers_deterministic() -> None:
    """The client's permanent randomized response drives the same exact algorithm from an HMAC-DRBG."""

    def source(seed: int):  # a deterministic stand-in for a DRBG
        state = [seed]

        def randbelow(n: int) -> int:
            state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            return (state[0] >> 11) % n

        return randbelow

    a = [randomized_response(2, 8, exp_lower(Fraction(1)), source(7)) for _ in range(50)]
    b = [randomized_response(2, 8, exp_lower(Fraction(1)), source(7)) for _ in range(50)]
    assert a == b


def test_sampling_uses_only_secrets_and_integers() -> None:
    """The device path imports no float randomness and calls no float function at all."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(sampling))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported.isdisjoint({"random", "numpy"})
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c in {"float", "math.exp", "math.log", "math.log1p", "math.expm1"}}
    assert sampling.bernoulli.__defaults__ == (secrets.randbelow,)


def test_the_product_paths_default_to_secrets() -> None:
    """Seeded sources are for tests only: every sampler, randomizer and noise function the product calls
    without a ``randbelow`` draws from ``secrets``."""
    import inspect

    from deniable.shared import noise
    from deniable.shared.mechanisms import GRR, OLH, OUE

    functions = [
        sampling.bernoulli, sampling.bernoulli_exp, sampling.randomized_response, sampling.unary_bits,
        sampling.geometric_exp, sampling.discrete_laplace, sampling.discrete_gaussian,
        GRR.randomize, OUE.randomize, OLH.randomize,
        noise.sample_noise, noise.noisy_counts,
    ]  # fmt: skip
    for function in functions:
        default = inspect.signature(function).parameters["randbelow"].default
        assert default is secrets.randbelow, function.__qualname__


@pytest.mark.slow
def test_seeded_randbelow_is_uniform_reproducible_and_unbounded() -> None:
    randbelow = source(5)
    draws = np.bincount([randbelow(6) for _ in range(60_000)], minlength=6)
    assert chisquare_ok(draws, np.ones(6))
    first, second = source(6), source(6)
    assert [first(1000) for _ in range(5)] == [second(1000) for _ in range(5)]
    assert source(7)(1) == 0
    huge = 3 ** 200  # exact fractions of ε have denominators far past 64 bits
    randbelow = source(8)
    top = [randbelow(huge) for _ in range(200)]
    assert all(0 <= x < huge for x in top) and max(top) > huge // 2
    with pytest.raises(ValueError, match="n >= 1"):
        source(9)(0)
