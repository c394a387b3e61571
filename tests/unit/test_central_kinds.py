"""Central releases of multi-select and number questions: sensitivities, and the coverage of their error
bars over R = 2,000 seeded draws of the exact noise (bias within 4 SE, variance within 10% of the stated
one, coverage of the 95% interval in [0.93, 0.97], 4 binomial SE at R = 2,000)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from deniable.aggregator import central_kinds
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.mean import NumberRange
from deniable.shared.sampling import seeded_randbelow

RUNS = 2000
#: Each mean run costs seconds (2,000 exact pivots): make test-fast keeps the one with a noisy count at a small
#: n (the pivot's hardest case); the others, the public count among them, are slow (make test runs them).
SLOW = pytest.mark.slow


def test_sensitivities() -> None:
    assert central_kinds.multi_sensitivity(3, "add-remove") == 3
    assert central_kinds.multi_sensitivity(3, "replace") == 6
    assert central_kinds.mean_sensitivities(10, "add-remove", False) == (10, True)
    assert central_kinds.mean_sensitivities(10, "replace", False) == (20, False)
    assert central_kinds.mean_sensitivities(10, "replace", True) == (20, True)
    with pytest.raises(InvalidParameter):
        central_kinds.multi_sensitivity(1, "swap")


def test_a_multi_release_brute_force_sensitivity_is_m() -> None:
    """Every pair of neighbouring datasets (one answer added, or replaced) of sets of at most m=2 of k=4
    options moves the histogram by at most m (add-remove) or 2m (replace) in ℓ1."""
    import itertools

    sets = [frozenset(c) for r in range(3) for c in itertools.combinations(range(4), r)]
    worst_add = max(len(a) for a in sets)
    worst_replace = max(len(a ^ b) for a in sets for b in sets)
    assert worst_add == central_kinds.multi_sensitivity(2, "add-remove")
    assert worst_replace == central_kinds.multi_sensitivity(2, "replace")


@pytest.mark.parametrize(("epsilon", "adjacency", "optional"), [(1.0, "add-remove", False),
                                                               (0.5, "replace", False), (2.0, "replace", True)])
def test_multi_counts_are_unbiased_with_calibrated_intervals(epsilon: float, adjacency: str, optional: bool) -> None:
    support, n, m = [40, 7, 0, 120], 150, 2
    randbelow = seeded_randbelow(np.random.default_rng(3))
    counts, covered = [], []
    for _ in range(RUNS):
        stored = central_kinds.draw_multi(support, n, epsilon=epsilon, m=m, adjacency=adjacency, optional=optional,
                                          randbelow=randbelow)
        body = central_kinds.render_multi(stored, ["a", "b", "c", "d"])
        counts.append([row["count"] for row in body["options"]])
        covered.append([row["ci"][0] <= s <= row["ci"][1] for row, s in zip(body["options"], support, strict=True)])
    est = np.asarray(counts)
    stated = body["options"][0]["stderr"] ** 2
    assert stated == pytest.approx(2 * math.exp(-epsilon / central_kinds.multi_sensitivity(m, adjacency))
                                   / (1 - math.exp(-epsilon / central_kinds.multi_sensitivity(m, adjacency))) ** 2)
    for v, truth in enumerate(support):
        assert abs(est[:, v].mean() - truth) <= 4 * math.sqrt(stated / RUNS)
        assert abs(est[:, v].var(ddof=1) / stated - 1) <= 0.10
        assert 0.93 <= np.mean([c[v] for c in covered]) <= 0.97 or truth == 0  # 0: clipped at 0, covers more
    assert (body["n"] is not None) == (adjacency == "replace" and not optional)


@pytest.mark.parametrize(
    ("epsilon", "adjacency", "optional", "n", "share"),
    [pytest.param(1.0, "add-remove", False, 400, 0.5, marks=SLOW), (1.0, "add-remove", False, 60, 0.9),
     pytest.param(0.5, "replace", False, 300, 0.2, marks=SLOW),
     pytest.param(2.0, "replace", True, 200, 0.7, marks=SLOW),
     pytest.param(4.0, "add-remove", True, 2000, 0.95, marks=SLOW)],
)
def test_central_mean_is_a_noisy_sum_over_a_noisy_count_with_calibrated_error_bars(
    epsilon: float, adjacency: str, optional: bool, n: int, share: float
) -> None:
    steps = 20
    number_range = NumberRange(0.0, 100.0, steps)
    rng = np.random.default_rng(5)
    js = rng.binomial(steps, share, size=n)
    truth = float(np.mean(number_range.lo + js * (number_range.hi - number_range.lo) / steps))
    randbelow = seeded_randbelow(np.random.default_rng(17))
    means, variances, covered = [], [], []
    for _ in range(RUNS):
        stored = central_kinds.draw_mean(int(js.sum()), n, epsilon=epsilon, steps=steps, adjacency=adjacency,
                                         optional=optional, randbelow=randbelow)
        body = central_kinds.render_mean(stored, number_range)["mean"]
        means.append(body["mean"])
        variances.append(body["stderr"] ** 2)
        covered.append(body["ci"][0] <= truth <= body["ci"][1])
    est = np.asarray(means)
    stated = float(np.mean(variances))
    assert abs(est.mean() - truth) <= 4 * math.sqrt(est.var(ddof=1) / RUNS), (est.mean(), truth)
    assert abs(est.var(ddof=1) / stated - 1) <= 0.10, (est.var(ddof=1), stated)
    assert 0.93 <= np.mean(covered) <= 0.97, np.mean(covered)


def test_a_count_below_one_serves_no_mean() -> None:
    stored = {"kind": "number", "noise": "discrete-laplace", "epsilon": 1.0, "adjacency": "add-remove", "steps": 4,
              "sensitivity": 4, "scale": [8, 1], "sum": 3, "count": 0, "count_scale": [2, 1], "n": None}
    body = central_kinds.render_mean(stored, NumberRange(0, 1, 4))
    assert body["mean"]["mean"] is None and body["mean"]["ci"] == [None, None]


def test_the_mean_release_spends_exactly_its_epsilon_in_two_halves() -> None:
    stored = central_kinds.draw_mean(10, 5, epsilon=0.3, steps=4, adjacency="add-remove", optional=False)
    assert Fraction(*stored["scale"]) == Fraction(4) / (Fraction(3, 10) / 2)
    assert Fraction(*stored["count_scale"]) == 1 / (Fraction(3, 10) / 2)


def test_other_noises_are_refused_for_the_new_kinds() -> None:
    with pytest.raises(InvalidParameter, match="discrete-laplace"):
        central_kinds.check_kind_noise("multi", "gaussian")
    with pytest.raises(InvalidParameter, match="sample"):
        central_kinds.check_kind_noise("number", "discrete-laplace", 0.5)
