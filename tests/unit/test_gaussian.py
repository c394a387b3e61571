"""The discrete Gaussian sampler against its exact law, and its privacy claims at the boundary.

Sampler checks draw their uniform integers from a seeded ``randbelow`` and reject at a false-alarm rate of
ALPHA (χ² with every bin expecting at least 5). Privacy checks compute the divergences from the exact pmf
by brute force, independently of the closed forms the module ships, and show that the claimed ρ, or the
claimed (ε, δ), holds at the worst pair and fails for a mechanism built 10% too generous.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from deniable.shared import gaussian
from deniable.shared.gaussian import (
    L2_SENSITIVITY_SQUARED,
    analytic_gaussian_sigma,
    calibrate_discrete_gaussian,
    discrete_gaussian_delta,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    gaussian_delta,
    zcdp_rho,
)
from deniable.shared.sampling import discrete_gaussian, seeded_randbelow

ALPHA = 1e-6


def brute_pmf(sigma2: float, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The pmf of N_ℤ(0, σ²) on −radius..radius by direct normalisation (independent of the module)."""
    ys = np.arange(-radius, radius + 1)
    w = np.exp(-(ys.astype(float) ** 2) / (2 * sigma2))
    return ys, w / w.sum()


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", [Fraction(1), Fraction(9, 4), Fraction(10), Fraction(1, 4)])
def test_discrete_gaussian_matches_its_pmf(sigma2: Fraction) -> None:
    n, randbelow = 12_000, seeded_randbelow(np.random.default_rng(14))
    draws = np.array([discrete_gaussian(sigma2, randbelow) for _ in range(n)])
    edge = 0
    while n * discrete_gaussian_pmf(edge + 1, sigma2) >= 5 and n * sum(
        discrete_gaussian_pmf(y, sigma2) for y in range(edge + 2, edge + 60)
    ) >= 5:
        edge += 1
    support = np.arange(-edge, edge + 1)
    pmf = np.array([discrete_gaussian_pmf(int(y), sigma2) for y in support])
    tail = (1 - pmf.sum()) / 2
    observed = np.array(
        [np.count_nonzero(draws < -edge)] + [np.count_nonzero(draws == y) for y in support]
        + [np.count_nonzero(draws > edge)]
    )  # fmt: skip
    expected = np.array([tail, *pmf, tail]) * n
    assert expected.min() >= 5
    assert stats.chisquare(observed, expected).pvalue > ALPHA
    var = discrete_gaussian_variance(sigma2)
    sd_of_var = math.sqrt((np.mean(draws.astype(float) ** 4) - var**2) / n)
    assert abs(np.var(draws) - var) < 5 * sd_of_var


@pytest.mark.slow
def test_a_discrete_laplace_in_its_place_fails_the_same_test() -> None:
    """The χ² test can fail: discrete Laplace draws of the same variance are rejected."""
    from deniable.shared.sampling import discrete_laplace

    n, randbelow = 20_000, seeded_randbelow(np.random.default_rng(15))
    draws = np.array([discrete_laplace(Fraction(2), randbelow) for _ in range(n)])  # Var ≈ 7.5 ≈ σ² of N_ℤ(0, 7.5)
    ys = np.arange(-6, 7)
    pmf = np.array([discrete_gaussian_pmf(int(y), 7.5) for y in ys])
    tail = (1 - pmf.sum()) / 2
    observed = np.array([np.count_nonzero(draws < -6), *[np.count_nonzero(draws == y) for y in ys],
                         np.count_nonzero(draws > 6)])
    assert stats.chisquare(observed, np.array([tail, *pmf, tail]) * n).pvalue < ALPHA


@pytest.mark.parametrize("sigma2", [0.25, 0.5, 1.0, 2.0, 7.3, 400.0])
def test_variance_and_pmf_equal_the_brute_force_sums(sigma2: float) -> None:
    ys, pmf = brute_pmf(sigma2, math.ceil(40 * math.sqrt(sigma2)) + 2)
    assert discrete_gaussian_variance(sigma2) == pytest.approx(float(np.sum(ys**2 * pmf)), rel=1e-12)
    assert discrete_gaussian_pmf(0, sigma2) == pytest.approx(float(pmf[len(ys) // 2]), rel=1e-12)
    assert discrete_gaussian_pmf(3, sigma2) == pytest.approx(float(pmf[len(ys) // 2 + 3]), rel=1e-12)


def test_variance_known_values() -> None:
    """CKS 2020 Cor. 9: slightly below σ², noticeably only for σ < 1 (gap 0.035 at σ² = 1/4)."""
    assert discrete_gaussian_variance(0.25) == pytest.approx(0.21501, abs=1e-5)
    assert discrete_gaussian_variance(0.5) == pytest.approx(0.49898, abs=1e-5)
    assert 1 - discrete_gaussian_variance(1.0) == pytest.approx(2.11e-7, rel=1e-2)
    assert discrete_gaussian_variance(100) == 100.0


def renyi(sigma2: float, shift: int, alpha: int) -> float:
    """D_α(N_ℤ(0, σ²) ‖ N_ℤ(Δ, σ²)) by brute force over the pmf, in log space."""
    from scipy.special import logsumexp

    ys = np.arange(-math.ceil(40 * math.sqrt(sigma2)) - 40, math.ceil(40 * math.sqrt(sigma2)) + 41).astype(float)
    log_p = -(ys**2) / (2 * sigma2)
    log_q = -((ys - shift) ** 2) / (2 * sigma2)
    log_p -= logsumexp(log_p)
    log_q -= logsumexp(log_q)
    return float(logsumexp(alpha * log_p + (1 - alpha) * log_q)) / (alpha - 1)


@pytest.mark.parametrize(("sigma2", "shift"), [(1, 1), (4, 1), (9, 2), (Fraction(5, 2), 1)])
def test_zcdp_holds_exactly_at_integer_orders_and_fails_ten_percent_too_generous(sigma2, shift) -> None:
    rho = zcdp_rho(shift * shift, sigma2)
    assert rho == Fraction(shift * shift) / (2 * Fraction(sigma2))
    for alpha in (2, 3, 5):
        assert renyi(float(sigma2), shift, alpha) == pytest.approx(alpha * float(rho), rel=1e-9)
        # the same claim for noise of 10% less variance is violated at every order
        assert renyi(float(sigma2) / 1.1, shift, alpha) > alpha * float(rho) * 1.05


def test_zcdp_of_a_histogram_under_replace_is_the_sum_over_bins() -> None:
    """Replace moves two bins by 1 each: ρ = (1 + 1)/(2σ²), which is Δ₂² = 2 in the table."""
    sigma2 = 3.0
    per_bin = renyi(sigma2, 1, 2) / 2
    assert 2 * per_bin == pytest.approx(float(zcdp_rho(L2_SENSITIVITY_SQUARED["replace"], Fraction(3))), rel=1e-9)


def brute_delta(epsilon: float, sigma2: float, shift: int) -> float:
    _, p = brute_pmf(sigma2, math.ceil(40 * math.sqrt(sigma2)) + 40 + shift)
    q = np.roll(p, shift)
    return float(np.sum(np.maximum(0.0, p - math.exp(epsilon) * q)))


@pytest.mark.parametrize(("epsilon", "sigma2", "shift"), [(1.0, 1.0, 1), (0.5, 9.0, 1), (2.0, 4.0, 2), (1.0, 14.0, 1)])
def test_discrete_delta_is_the_hockey_stick_divergence(epsilon, sigma2, shift) -> None:
    expected = brute_delta(epsilon, sigma2, shift)
    assert discrete_gaussian_delta(epsilon, sigma2, shift) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("epsilon", "delta", "shift"), [(1.0, 1e-5, 1), (0.3, 1e-6, 1), (2.0, 1e-8, 2)])
def test_calibrated_discrete_gaussian_holds_at_the_boundary(epsilon, delta, shift) -> None:
    sigma2 = calibrate_discrete_gaussian(epsilon, delta, shift)
    measured = brute_delta(epsilon, float(sigma2), shift)
    assert measured <= delta
    assert measured > 0.999 * delta  # on the boundary (to the 10⁻⁶ grid of σ²), not far inside it
    assert brute_delta(epsilon, float(sigma2) / 1.1, shift) > delta


def test_analytic_gaussian_known_values() -> None:
    """Balle and Wang 2018: σ at the exact condition, against the classic Δ√(2 ln(1.25/δ))/ε."""
    assert analytic_gaussian_sigma(1.0, 1e-5) == pytest.approx(3.7306, abs=1e-4)
    assert analytic_gaussian_sigma(0.1, 1e-5) == pytest.approx(30.75, abs=1e-2)
    assert analytic_gaussian_sigma(5.0, 1e-6) == pytest.approx(0.980, abs=1e-3)
    assert analytic_gaussian_sigma(1.0, 1e-5, 2.0) == pytest.approx(2 * 3.7306, abs=2e-4)
    assert gaussian_delta(1.0, 1.0) == pytest.approx(0.126937, abs=1e-6)
    assert gaussian_delta(3.0, 0.5) == pytest.approx(0.183813, abs=1e-6)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (0.1, 1e-6), (4.0, 1e-9)])
def test_analytic_gaussian_holds_exactly_and_fails_ten_percent_too_generous(epsilon, delta) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta)
    # the exact privacy profile, integrated independently: δ(ε) = E_P[(1 − e^(ε − L))₊], L ~ N(μ, 2μ), μ = 1/(2σ²)
    mu = 1 / (2 * sigma**2)
    sd = math.sqrt(2 * mu)
    integrand = lambda x: stats.norm.pdf(x, mu, sd) * -math.expm1(epsilon - x)  # noqa: E731
    from scipy import integrate

    exact, _ = integrate.quad(integrand, epsilon, mu + 40 * sd, epsabs=0, epsrel=1e-10, limit=200)
    assert exact == pytest.approx(delta, rel=1e-6)
    assert gaussian_delta(epsilon, sigma / 1.1) > delta * 1.5


def test_classic_gaussian_is_looser_than_the_analytic_one() -> None:
    classic = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert analytic_gaussian_sigma(0.5, 1e-5) < classic
    assert gaussian_delta(0.5, classic) < 1e-5 / 100


def test_l2_sensitivity_of_a_histogram_by_enumeration() -> None:
    """Every dataset of up to 3 people over 3 answers: the largest ‖h(D) − h(D′)‖₂² per relation."""
    k, worst = 3, {"add-remove": 0, "replace": 0}
    for size in range(4):
        for data in itertools.product(range(k), repeat=size):
            h = np.bincount(np.array(data, dtype=int), minlength=k)
            for j in range(k):  # add one person with answer j
                moved = np.bincount([*data, j], minlength=k) - h
                worst["add-remove"] = max(worst["add-remove"], int(np.sum(moved**2)))
            for i, j in itertools.product(range(size), range(k)):  # replace person i's answer by j
                changed = list(data)
                changed[i] = j
                worst["replace"] = max(worst["replace"], int(np.sum((np.bincount(changed, minlength=k) - h) ** 2)))
    assert worst == dict(L2_SENSITIVITY_SQUARED)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_sigma(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        analytic_gaussian_sigma(float("inf"), 1e-5)
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian(Fraction(0))
    with pytest.raises(ValueError, match="sigma2"):
        zcdp_rho(1, 0)
    assert set(gaussian.__all__) >= {"analytic_gaussian_sigma", "zcdp_rho"}
