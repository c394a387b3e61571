"""Mechanism API, exact privacy claims, report encodings and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from support.strategies import mechanism_epsilons as epsilons
from support.strategies import small_k

import deniable.shared.mechanisms as mechanisms
from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.mechanisms import (
    GRR,
    OLH,
    OUE,
    BinaryRR,
    Mechanism,
    OLHReport,
    Tally,
    choose_mechanism,
    mechanism_from_name,
    olh_hash,
    project_to_simplex,
)
from deniable.shared.sampling import seeded_randbelow


def all_reports(m: Mechanism, rng: np.random.Generator) -> list:
    """Every report of a small mechanism (OLH: a few seeds × every bucket)."""
    if isinstance(m, OUE):
        return list(range(1 << m.k))
    if isinstance(m, OLH):
        seeds = [int(s) for s in rng.integers(0, 2**63, size=6)]
        return [OLHReport(s, y) for s in seeds for y in range(m.g)]
    return list(range(m.k))


def worst_ratio(m: Mechanism, rng: np.random.Generator) -> float:
    worst = 0.0
    for report in all_reports(m, rng):
        probs = [m.output_probability(v, report) for v in range(m.k)]
        worst = max(worst, max(probs) / min(probs))
    return worst


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(eps=epsilons, k=st.integers(min_value=2, max_value=7), name=st.sampled_from(["grr", "oue", "olh"]))
def test_likelihood_ratio_never_exceeds_e_eps_and_reaches_it(eps: float, k: int, name: str) -> None:
    m = mechanism_from_name(name, epsilon=eps, k=k)
    ratio = worst_ratio(m, np.random.default_rng(1))
    assert ratio <= math.exp(eps) * (1 + 1e-9)
    # tight: the claim is exactly ε, not looser (OLH reaches it whenever two values hash apart)
    if name != "olh":
        assert ratio == pytest.approx(math.exp(eps), rel=1e-9)


def test_a_mechanism_run_at_2_eps_fails_the_eps_claim() -> None:
    """The ratio test can fail: randomness calibrated for 2ε violates the ε bound."""
    wrong = GRR(2.0, 4)
    assert worst_ratio(wrong, np.random.default_rng(0)) > math.exp(1.0) * 1.5


@settings(max_examples=40, deadline=None)
@given(eps=epsilons, k=small_k, name=st.sampled_from(["grr", "oue", "olh"]))
def test_output_probabilities_sum_to_one(eps: float, k: int, name: str) -> None:
    m = mechanism_from_name(name, epsilon=eps, k=min(k, 6) if name == "oue" else k)
    if isinstance(m, OLH):
        total = sum(m.output_probability(1, OLHReport(12345, y)) for y in range(m.g))
    else:
        total = sum(m.output_probability(1, r) for r in all_reports(m, np.random.default_rng(0)))
    assert total == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize(
    "m", [BinaryRR(1.0), GRR(1.0, 5), GRR(0.3, 3), OUE(1.0, 4), OLH(2.0, 5)], ids=str
)
def test_simulate_and_secure_randomize_have_the_same_distribution(m: Mechanism) -> None:
    """χ² homogeneity of the two samplers' report statistics, at a 1e-6 false-alarm rate."""
    x, n, randbelow = 1, 6_000, seeded_randbelow(np.random.default_rng(8))
    secure = [m.randomize(x, randbelow=randbelow) for _ in range(n)]
    simulated = m.simulate(np.full(n, x), rng=np.random.default_rng(3))
    if isinstance(m, OUE):
        a = np.array([[(r >> v) & 1 for v in range(m.k)] for r in secure]).sum(axis=0)
        b = simulated.sum(axis=0)
        table = np.array([a, b])
        table = np.concatenate([table, n - table], axis=1)
    elif isinstance(m, OLH):
        a = np.bincount([int(olh_hash(r.seed, x, m.g) == r.y) for r in secure], minlength=2)
        hashed = m._hash_many(simulated.seeds, np.full(n, x))
        b = np.bincount((hashed == simulated.y).astype(int), minlength=2)
        table = np.array([a, b])
    else:
        table = np.array([np.bincount(secure, minlength=m.k), np.bincount(simulated, minlength=m.k)])
    assert stats.chi2_contingency(table).pvalue > 1e-6


@pytest.mark.parametrize("m", [BinaryRR(1.0), GRR(1.0, 5), OUE(1.0, 6), OLH(2.0, 5)], ids=str)
def test_secure_randomize_matches_output_probability(m: Mechanism) -> None:
    """Goodness of fit of the device sampler to the exact law it claims, on the statistic that matters."""
    x, n, randbelow = 2 % m.k, 6_000, seeded_randbelow(np.random.default_rng(9))
    reports = [m.randomize(x, randbelow=randbelow) for _ in range(n)]
    if isinstance(m, OLH | OUE):
        hits = sum(x in m.support(r) for r in reports)
        assert stats.binomtest(hits, n, m.p_star).pvalue > 1e-6
        other = (x + 1) % m.k
        hits = sum(other in m.support(r) for r in reports)
        assert stats.binomtest(hits, n, m.q_star).pvalue > 1e-6
    else:
        observed = np.bincount(reports, minlength=m.k)
        expected = np.array([m.output_probability(x, y) for y in range(m.k)]) * n
        assert stats.chisquare(observed, expected).pvalue > 1e-6


@settings(max_examples=50, deadline=None)
@given(eps=epsilons, k=st.integers(min_value=2, max_value=40), name=st.sampled_from(["grr", "oue", "olh"]),
       value=st.integers(min_value=0, max_value=39))
def test_wire_round_trip(eps: float, k: int, name: str, value: int) -> None:
    m = mechanism_from_name(name, epsilon=eps, k=k)
    report = m.randomize(value % k)
    wire = m.encode_report(report)
    assert m.decode_report(wire) == report
    import json

    assert m.decode_report(json.loads(json.dumps(wire))) == report


@pytest.mark.parametrize(
    ("m", "bad"),
    [
        (GRR(1.0, 4), 4),
        (GRR(1.0, 4), -1),
        (GRR(1.0, 4), True),
        (GRR(1.0, 4), "1"),
        (GRR(1.0, 4), 1.0),
        (OUE(1.0, 6), "40"),  # bit 6 set
        (OUE(1.0, 6), "0g"),
        (OUE(1.0, 6), "3"),  # wrong length
        (OUE(1.0, 6), "3F"),  # upper case is not canonical
        (OLH(1.0, 6), {"seed": "00" * 8, "y": 4}),  # g = 4
        (OLH(1.0, 6), {"seed": "00" * 7, "y": 0}),
        (OLH(1.0, 6), {"seed": "00" * 8}),
        (OLH(1.0, 6), [0, 1, 2]),
        (OLH(1.0, 6), None),
    ],
)
def test_reports_outside_the_report_space_are_rejected(m: Mechanism, bad: object) -> None:
    with pytest.raises(InvalidReport):
        m.decode_report(bad)


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), 1e6, 1e-7, True, "1", None])
def test_bad_epsilon_names_the_parameter_and_range(eps: object) -> None:
    with pytest.raises(InvalidParameter, match=r"'epsilon' must be a number in \[1e-06, 20\], got "):
        GRR(eps, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'epsilon'"):
        BinaryRR(eps)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [1, 0, -3, 2.5, True, 10**9])
def test_bad_k_names_the_parameter_and_range(k: object) -> None:
    with pytest.raises(InvalidParameter, match=r"'k' must be an integer in \[2, "):
        OUE(1.0, k)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 4, 1.5, "a", None])
def test_value_outside_the_domain(value: object) -> None:
    with pytest.raises(InvalidParameter, match=r"'value' must be an integer category index in \[0, 4\)"):
        GRR(1.0, 4).randomize(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="'values'"):
        GRR(1.0, 4).simulate([0, 1, 4], rng=np.random.default_rng(0))


def test_binary_rr_takes_bits_and_counts_ones() -> None:
    m = BinaryRR(2.0)
    assert isinstance(m, GRR) and m.k == 2
    assert m.randomize(True) in (0, 1)
    est = m.estimate(m.simulate(np.array([1] * 900 + [0] * 100), rng=np.random.default_rng(0)))
    assert abs(est.counts[1] - 900) <= 4 * est.stderr[1]
    assert "epsilon=2.0" in repr(m)


def test_mechanisms_are_immutable() -> None:
    m = GRR(1.0, 4)
    with pytest.raises(AttributeError):
        m.epsilon = 2.0  # type: ignore[misc]


@settings(max_examples=80, deadline=None)
@given(k=st.integers(min_value=2, max_value=2000), eps=st.floats(min_value=0.1, max_value=8.0))
def test_choose_mechanism_follows_wang_rule_and_is_lowest_variance(k: int, eps: float) -> None:
    choice = choose_mechanism(k, eps)
    variances = [m.per_user_variance() for m in (GRR(eps, k), OUE(eps, k), OLH(eps, k))]
    assert choice.per_user_variance() <= min(variances) * (1 + 1e-9)
    boundary = 3 * math.exp(eps) + 2
    if abs(k - boundary) > 0.05:  # away from the crossover rounding
        assert isinstance(choice, GRR) == (k < boundary)
    assert choice.k == k and choice.epsilon == eps


def test_choose_mechanism_examples() -> None:
    assert isinstance(choose_mechanism(2, 1.0), BinaryRR)
    assert type(choose_mechanism(10, 1.0)) is GRR
    assert type(choose_mechanism(16, 1.0)) is OUE
    assert type(choose_mechanism(3, math.log(3))) is GRR
    assert type(choose_mechanism(100, math.log(3))) is OLH  # g = e^ε + 1 = 4 exactly: OLH ties OUE


@settings(max_examples=50, deadline=None)
@given(
    name=st.sampled_from(["grr", "oue", "olh"]),
    values=st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=40),
    split=st.integers(min_value=0, max_value=40),
)
def test_tallies_add_and_estimating_a_tally_equals_estimating_the_reports(name, values, split) -> None:
    m = mechanism_from_name(name, epsilon=1.0, k=5)
    reports = [m.randomize(v) for v in values]
    whole = m.tally(reports)
    parts = m.tally(reports[:split]) + m.tally(reports[split:])
    assert whole == parts
    assert whole.n == len(values)
    np.testing.assert_array_equal(m.estimate(reports).counts, m.estimate_tally(whole).counts)


def test_simulated_and_device_reports_tally_alike() -> None:
    m = OLH(1.0, 7)
    sim = m.simulate(np.arange(7).repeat(30), rng=np.random.default_rng(5))
    device = [OLHReport(int(s), int(y)) for s, y in zip(sim.seeds, sim.y, strict=True)]
    assert m.tally(sim) == m.tally(device)
    oue = OUE(1.0, 5)
    bits = oue.simulate(np.arange(5).repeat(20), rng=np.random.default_rng(5))
    masks = [sum(int(b) << v for v, b in enumerate(row)) for row in bits]
    assert oue.tally(bits) == oue.tally(masks)


@pytest.mark.parametrize("m", [BinaryRR(0.5), GRR(2.0, 5), OUE(1.0, 5), OLH(1.5, 5)], ids=str)
def test_estimator_is_exact_on_expected_support_counts(m: Mechanism) -> None:
    truth = np.array([50, 0, 20, 10, 5][: m.k], dtype=float)
    n = truth.sum()
    expected_support = truth * m.p_star + (n - truth) * m.q_star
    est = m.estimate_tally(Tally(int(n), tuple(expected_support)))  # type: ignore[arg-type]
    np.testing.assert_allclose(est.counts, truth, atol=1e-9)
    np.testing.assert_allclose(est.variance, m.count_variance(truth.astype(int)), rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=-1e4, max_value=1e4), min_size=1, max_size=12),
       st.floats(min_value=1, max_value=1e4))
def test_projection_is_the_closest_point_of_the_simplex(counts, total) -> None:
    c = np.array(counts)
    x = project_to_simplex(c, total)
    assert np.all(x >= 0)
    assert x.sum() == pytest.approx(total, rel=1e-9, abs=1e-6)
    # optimality (KKT): x_j = max(c_j − θ, 0) with one θ for all positive entries
    positive = x > 1e-9
    theta = (c - x)[positive]
    assert np.ptp(theta) <= 1e-6 * max(1.0, np.abs(c).max())
    assert np.all(c[~positive] <= theta.mean() + 1e-6 * max(1.0, np.abs(c).max()))


def test_estimate_summary_is_json_ready() -> None:
    m = GRR(1.0, 3)
    est = m.estimate([0, 1, 2, 2, 2, 1])
    d = est.to_dict(0.9, ["a", "b", "c"])
    assert [row["category"] for row in d["categories"]] == ["a", "b", "c"]
    row = d["categories"][2]
    assert row["ci"][0] < row["count"] < row["ci"][1]
    assert d["consistent"]["biased"] is True
    assert sum(r["consistent_count"] for r in d["categories"]) == pytest.approx(6)
    empty = m.estimate([])
    assert empty.to_dict()["categories"][0]["proportion"] is None
    with pytest.raises(InvalidParameter, match="'level'"):
        est.ci(1.5)


def test_public_surface_is_pinned() -> None:
    assert sorted(mechanisms.__all__) == sorted(
        [
            "GRR", "MAX_EPSILON", "MAX_K", "MECHANISMS", "MIN_EPSILON", "OLH", "OUE",
            "BinaryRR", "Estimate", "Mechanism",
            "OLHReport", "OLHReports", "Tally", "choose_mechanism", "mechanism_from_name", "olh_hash",
            "project_to_simplex", "KINDS", "REGISTRY", "mechanism_class", "mechanism_names", "register",
            "unregister",
        ]
    )
    for name in mechanisms.__all__:
        assert hasattr(mechanisms, name)


def test_olh_hash_known_answers() -> None:
    """Pinned so that a client in another language can check its hash (docs/wire-format.md)."""
    seed = 0x0123456789ABCDEF
    prime = 2**31 - 1
    a = 1 + ((seed >> 32) % (prime - 1))
    b = (seed & 0xFFFFFFFF) % prime
    assert (a, b) == (19088744, 162254320)
    assert [olh_hash(seed, v, 21) for v in range(8)] == [4, 0, 17, 13, 9, 5, 1, 18]
    assert all(olh_hash(seed, v, 21) == ((a * v + b) % prime) % 21 for v in range(1000))


def test_vanishing_epsilon_is_refused_and_small_epsilon_stays_precise() -> None:
    with pytest.raises(InvalidParameter, match=r"'epsilon' must be a number in \[1e-06, 20\], got 8e-292"):
        GRR(8e-292, 2)
    for m in (GRR(1e-6, 3), OUE(1e-6, 3), OLH(1e-6, 3), BinaryRR(1e-6)):
        assert math.isfinite(m.per_user_variance())
        assert m.gap == pytest.approx(m.p_star - m.q_star, rel=1e-6)
