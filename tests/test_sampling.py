"""The exact samplers against their exact probabilities.

These draw from the real OS CSPRNG (``secrets``), so they are not seeded: each test rejects at a fixed
false-alarm rate of ALPHA per check (a χ² or binomial tail bound), small enough never to flake in practice,
while a sampler that is off by a few percent fails with certainty at these sample sizes.
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
    bernoulli_flip,
    discrete_laplace,
    exact_fraction,
    randomized_choice,
)

ALPHA = 1e-6


def binomial_ok(successes: int, trials: int, p: float) -> bool:
    """Two-sided exact binomial test at level ALPHA."""
    return stats.binomtest(successes, trials, p).pvalue > ALPHA


def chisquare_ok(observed: np.ndarray, expected_probs: np.ndarray) -> bool:
    expected = expected_probs / expected_probs.sum() * observed.sum()
    return stats.chisquare(observed, expected).pvalue > ALPHA


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 2), Fraction(1), Fraction(23, 10), Fraction(0.1)])
def test_bernoulli_exp_matches_exp_minus_gamma(gamma: Fraction) -> None:
    n = 40_000
    hits = sum(bernoulli_exp(gamma) for _ in range(n))
    assert binomial_ok(hits, n, math.exp(-float(gamma)))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, math.log(3)])
def test_bernoulli_flip_is_one_over_e_eps_plus_one(eps: float) -> None:
    n = 40_000
    hits = sum(bernoulli_flip(Fraction(eps)) for _ in range(n))
    assert binomial_ok(hits, n, 1 / (math.exp(eps) + 1))


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (4, 0.5), (16, 1.0), (5, 3.0)])
def test_randomized_choice_has_the_grr_law(k: int, eps: float) -> None:
    n = 30_000
    x = 1
    draws = np.bincount([randomized_choice(x, k, Fraction(eps)) for _ in range(n)], minlength=k)
    probs = np.full(k, 1.0)
    probs[x] = math.exp(eps)
    assert chisquare_ok(draws, probs)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(2), Fraction(1, 2), Fraction(3, 2)])
def test_discrete_laplace_pmf(scale: Fraction) -> None:
    n = 30_000
    draws = np.array([discrete_laplace(scale) for _ in range(n)])
    a = math.exp(-1 / float(scale))
    support = np.arange(-8, 9)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    tail = np.count_nonzero(np.abs(draws) > 8)
    observed = np.array([np.count_nonzero(draws == z) for z in support] + [tail])
    probs = np.append(pmf, 1 - pmf.sum())
    assert chisquare_ok(observed, probs)
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

    a = [randomized_choice(2, 8, Fraction(1), source(7)) for _ in range(50)]
    b = [randomized_choice(2, 8, Fraction(1), source(7)) for _ in range(50)]
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
