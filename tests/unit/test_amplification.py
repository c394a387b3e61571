"""Amplification by shuffling: known figures of FMT 2021 and its authors' code, and the bounds' order.

Values from the authors' README (n = 10⁵, ε₀ = 4, δ = 10⁻⁶: closed form 0.5378040242, numerical bound in
[0.16754, 0.17279]) and from exact binomial computations of shuffled binary randomized response.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable.shared.amplification import (
    amplify,
    binary_rr_epsilon,
    closed_form_epsilon,
    closed_form_valid,
    numerical_delta,
    numerical_epsilon,
)
from deniable.shared.errors import InvalidParameter


def test_closed_form_reproduces_both_published_versions() -> None:
    assert closed_form_epsilon(10**5, 4, 1e-6) == pytest.approx(0.5378040242374512, rel=1e-8)
    assert closed_form_epsilon(10**6, 1, 1e-6, form="theorem") == pytest.approx(0.0235, abs=5e-5)
    assert closed_form_epsilon(10**5, 4, 1e-6, form="theorem") == pytest.approx(0.534634, abs=1e-6)
    # the authors' form is the larger (conservative) one, and the default
    for n, e0 in [(10**4, 1), (10**5, 2), (10**6, 4)]:
        assert closed_form_epsilon(n, e0, 1e-6) >= closed_form_epsilon(n, e0, 1e-6, form="theorem")


def test_closed_form_refuses_outside_its_condition() -> None:
    assert not closed_form_valid(10**4, 4, 1e-6)  # ln(1e4 / (16 ln 4e6)) = 3.716 < 4
    assert closed_form_valid(10**4, 3.7, 1e-6)
    with pytest.raises(InvalidParameter, match="applies only when"):
        closed_form_epsilon(10**4, 4, 1e-6)


def test_numerical_bound_matches_the_authors_figure() -> None:
    epsilon = numerical_epsilon(10**5, 4, 1e-6)
    assert 0.1675385583 <= epsilon <= 0.1727905508
    assert epsilon == pytest.approx(0.169770, abs=2e-6)
    # δ at the ends of the authors' interval brackets the target
    assert numerical_delta(10**5, 4, 0.1675385583) > 1e-6 > numerical_delta(10**5, 4, 0.1727905508)


@pytest.mark.parametrize(
    ("n", "epsilon0", "delta", "numerical", "exact"),
    [(10**4, 1, 1e-6, 0.05301, 0.03566), (10**4, 2, 1e-6, 0.15505, 0.08702), (10**3, 1, 1e-5, 0.15405, 0.10537)],
)
def test_exact_binary_rr_lies_below_the_generic_bounds(
    n: int, epsilon0: float, delta: float, numerical: float, exact: float
) -> None:
    assert numerical_epsilon(n, epsilon0, delta) == pytest.approx(numerical, abs=1e-5)
    rr = binary_rr_epsilon(n, epsilon0, delta)
    assert rr == pytest.approx(exact, abs=1e-5)
    assert rr <= numerical_epsilon(n, epsilon0, delta)
    if closed_form_valid(n, epsilon0, delta):
        assert numerical_epsilon(n, epsilon0, delta) <= closed_form_epsilon(n, epsilon0, delta)


@pytest.mark.slow  # the exact ε at every one of 2,002 counts: seconds (make test runs it)
def test_binary_rr_worst_case_over_the_extremes_is_the_worst_over_every_count() -> None:
    """Beyond 2,001 reports only the counts 0..16 and one half are tried: at the largest n where every count
    is tried, those give the same worst case (the maximum is not always at 0: at n = 201 it is at 1)."""
    n, e0, d = 2_001, 1.0, 1e-6
    every = binary_rr_epsilon(n, e0, d)
    assert binary_rr_epsilon(n, e0, d, ones=(*range(17), 1000)) == pytest.approx(every, rel=1e-9)
    assert binary_rr_epsilon(201, 1.5, 1e-4) > binary_rr_epsilon(201, 1.5, 1e-4, ones=(0, 100))


def test_a_generic_bound_never_undercuts_the_exact_law_of_binary_rr() -> None:
    """A bound below the exact ε of one ε₀-LDP randomizer would be wrong: check δ at the exact ε."""
    n, e0, d = 2_000, 2.0, 1e-6
    rr = binary_rr_epsilon(n, e0, d, ones=(*range(17), 999))  # a lower bound on the worst case suffices
    assert numerical_delta(n, e0, rr * 0.999) > d  # the numerical δ at a smaller ε exceeds the target


@settings(max_examples=30)
@given(n=st.integers(10, 20_000), epsilon0=st.floats(0.1, 6), delta=st.sampled_from([1e-4, 1e-6, 1e-9]))
def test_amplify_takes_the_smallest_valid_bound_and_never_exceeds_the_local_epsilon(
    n: int, epsilon0: float, delta: float
) -> None:
    result = amplify(n, epsilon0, delta)
    assert result.epsilon <= epsilon0
    assert result.numerical is not None and result.epsilon <= result.numerical
    if result.closed_form is not None:
        assert result.epsilon <= result.closed_form
    assert result.to_json()["method"] == result.method


def test_more_reports_amplify_more() -> None:
    values = [numerical_epsilon(n, 2, 1e-6) for n in (10**3, 10**4, 10**5)]
    assert values == sorted(values, reverse=True)
    assert math.isclose(numerical_epsilon(10**4, 2, 1e-6), 0.15505, abs_tol=1e-5)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1, 1, 1e-6), "'n'"),
        ((100, 0, 1e-6), "'epsilon0'"),
        ((100, 1, 1.0), "'delta'"),
        ((100, True, 1e-6), "'epsilon0'"),
    ],
)
def test_bad_parameters_are_clear_errors(args: tuple[int, float, float], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        amplify(*args)


def test_local_epsilon_for_gives_the_target_and_no_more() -> None:
    """ε₀ such that a shuffled batch of n is (1, 10⁻⁶)-DP: at it the bound holds, a little above it fails."""
    from deniable.shared.amplification import amplify, local_epsilon_for

    for n in (1_000, 100_000):
        e0 = local_epsilon_for(n, 1.0, 1e-6)
        assert e0 >= 1.0
        assert amplify(n, e0, 1e-6).epsilon <= 1.0
        assert amplify(n, e0 + 0.01, 1e-6).epsilon > 1.0 or e0 + 0.01 > 10
    assert local_epsilon_for(10, 1.0, 1e-6) < 1.05  # ten reports hide little: ε₀ stays near ε
    assert local_epsilon_for(100_000, 1.0, 1e-6) > 5  # 10⁵ reports: ε₀ far above the central ε
