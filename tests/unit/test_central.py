"""Central releases: exact noise laws, the accountant's arithmetic and refusals, caching, composition."""

from __future__ import annotations

import json
import math
import threading
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2, laplace
from support.strategies import cent_epsilons as decimals

from deniable.aggregator import central
from deniable.aggregator.store import ReportRow, Store
from deniable.shared import noise
from deniable.shared.errors import BudgetExceeded, InvalidConfig, InvalidParameter
from deniable.shared.sampling import seeded_randbelow

#: False-failure rate of each statistical test. The exact samplers run on a seeded ``randbelow``, so a run
#: is reproducible; the rate is kept tiny so that a new seed or a changed draw order does not flake either.
FALSE_FAILURE = 1e-6
DRAWS = 20_000


def _chi_square_p_ok(observed: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    stat = float(((observed - expected) ** 2 / expected).sum())
    return stat, float(chi2.ppf(1 - FALSE_FAILURE, observed.size - 1))


@pytest.mark.slow
@pytest.mark.parametrize(("epsilon", "adjacency"), [(1.0, "add-remove"), (0.5, "replace")])
def test_discrete_laplace_noise_has_its_exact_law(epsilon: float, adjacency: str) -> None:
    """χ² of DRAWS released bins (the exact sampler on a seeded randbelow) against
    P(z) = (1−a)/(1+a)·a^|z|, a = e^(−ε/Δ)."""
    delta = noise.sensitivity(adjacency)
    scale = noise.noise_scale(epsilon, delta)
    assert scale == Fraction(delta) / Fraction(str(epsilon))
    # Through the very function a release uses: DRAWS bins holding the count 7, each with its own noise.
    randbelow = seeded_randbelow(np.random.default_rng(11))
    counts = noise.noisy_counts(
        [7] * DRAWS, epsilon=epsilon, delta=delta, noise="discrete-laplace", randbelow=randbelow
    )
    draws = np.array(counts) - 7
    assert np.all(draws == np.round(draws))
    a = math.exp(-epsilon / delta)
    edge = 1
    while DRAWS * a**edge / (1 + a) > 5:  # bins -edge..edge, tails beyond; each expects >= ~5
        edge += 1
    edge -= 1
    pmf = {z: (1 - a) / (1 + a) * a ** abs(z) for z in range(-edge, edge + 1)}
    tail = a ** (edge + 1) / (1 + a)  # P(Z > edge) = P(Z < −edge)
    observed = np.array(
        [np.sum(draws < -edge)] + [np.sum(draws == z) for z in pmf] + [np.sum(draws > edge)], dtype=float
    )
    expected = DRAWS * np.array([tail, *pmf.values(), tail])
    assert expected.sum() == pytest.approx(DRAWS)
    stat, critical = _chi_square_p_ok(observed, expected)
    assert stat < critical, (stat, critical)
    # The stderr the release ships is this law's exact sd: √(2a)/(1−a).
    sd = math.sqrt(noise.noise_variance("discrete-laplace", scale))
    assert sd == pytest.approx(math.sqrt(2 * a) / (1 - a), rel=1e-12)


@pytest.mark.slow
def test_lattice_laplace_noise_follows_the_laplace_law_on_its_grid() -> None:
    epsilon = 0.8
    scale = noise.noise_scale(epsilon, 1)
    randbelow = seeded_randbelow(np.random.default_rng(12))
    draws = [noise.sample_noise("laplace", scale, randbelow) for _ in range(DRAWS)]
    assert all((z * 2**noise.LATTICE_BITS).denominator == 1 for z in draws)
    values = np.array([float(z) for z in draws])
    b = 1 / epsilon
    edges = np.array([-np.inf, *laplace.ppf(np.linspace(0.05, 0.95, 19), scale=b), np.inf])
    observed = np.histogram(values, bins=edges)[0].astype(float)
    expected = DRAWS * np.diff(laplace.cdf(edges, scale=b))
    stat, critical = _chi_square_p_ok(observed, expected)
    assert stat < critical, (stat, critical)
    sd = math.sqrt(noise.noise_variance("laplace", scale))
    assert sd == pytest.approx(math.sqrt(2) * b, rel=1e-12)  # √2·b to 12 digits (lattice 2^-20)


def test_the_noise_spends_exactly_the_decimal_epsilon_charged() -> None:
    assert noise.noise_scale(0.1, 1) == 10  # not 1/Fraction(0.1), which is slightly below 10
    assert noise.noise_scale(0.3, 2) == Fraction(20, 3)


def test_noise_names_and_adjacencies_are_validated() -> None:
    with pytest.raises(InvalidParameter, match="'noise' must be one of discrete-laplace, laplace, gaussian"):
        noise.sample_noise("uniform", Fraction(1))
    with pytest.raises(InvalidConfig, match="'adjacency' must be one of add-remove, replace"):
        noise.sensitivity("swap")
    with pytest.raises(InvalidParameter, match=r"'epsilon' must be a number in \[1e-06, 20\], got 0"):
        noise.noise_scale(0, 1)
    assert noise.sensitivity("add-remove") == 1
    assert noise.sensitivity("replace") == 2


# -- the accountant --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(budget=decimals, requests=st.lists(decimals, min_size=1, max_size=20))
def test_sequential_composition_spends_exactly_and_refuses_past_the_budget(
    budget: float, requests: list[float]
) -> None:
    spent: float | Decimal = 0.0
    exact_spent = Decimal(0)
    for eps in requests:
        if exact_spent + Decimal(repr(eps)) <= Decimal(repr(budget)):
            spent = central.charge(spent, budget, eps)
            exact_spent += Decimal(repr(eps))
            assert spent == exact_spent
        else:
            with pytest.raises(BudgetExceeded) as info:
                central.charge(spent, budget, eps, campaign_id="c")
            err = info.value
            assert (err.spent, err.requested) == (float(spent), eps)
            assert Decimal(repr(err.spent)) + Decimal(repr(err.remaining)) == Decimal(repr(budget))
            assert err.remaining < eps
            message = str(err)
            assert f"spent epsilon {float(spent)}" in message and f"needs {eps}" in message
            assert f"({err.remaining} left)" in message
        assert central.remaining(spent, budget) >= 0


def test_ten_releases_at_a_tenth_spend_exactly_one() -> None:
    spent: float | Decimal = 0.0
    for _ in range(10):
        spent = central.charge(spent, 1.0, 0.1)
    assert spent == 1.0
    assert central.remaining(spent, 1.0) == 0.0
    with pytest.raises(BudgetExceeded, match=r"spent epsilon 1.0 of its budget 1.0 \(0.0 left\)"):
        central.charge(spent, 1.0, 0.1)


# -- releases over a store -------------------------------------------------------------------------

K = 3


def _store(tmp_path: Path, *, budget: float = 1.0, adjacency: str = "add-remove", n: int = 120) -> Store:
    store = Store(tmp_path / "deniable.sqlite3")
    with store.transaction() as conn:
        store.insert_campaign(conn, "c", {"id": "c"}, trust_model="central", budget=budget, adjacency=adjacency)
    _add(store, 0, n)
    return store


def _add(store: Store, start: int, n: int) -> None:
    rows = [
        ReportRow(f"{i:032x}", f"{i:064x}", {"region": "north" if i % 3 else "south"}, json.dumps(i % K), (i % K,))
        for i in range(start, start + n)
    ]
    store.ingest("c", rows, k=K, group_fields=["region"])


def _release(store: Store, **kwargs: object) -> dict:
    params = {"epsilon": 0.25, "k": K, "categories": ["a", "b", "c"], **kwargs}
    with store.transaction() as conn:
        return central.release(conn, "c", **params)  # type: ignore[arg-type]


def _spent(store: Store) -> float:
    return store.get_campaign("c").epsilon_spent


def test_a_release_spends_its_epsilon_and_has_the_local_shape(tmp_path: Path) -> None:
    store = _store(tmp_path)
    body = _release(store)
    assert body["trust_model"] == "central" and body["noise"] == "discrete-laplace"
    assert (body["epsilon"], body["epsilon_spent"], body["epsilon_remaining"], body["budget"]) == (
        0.25,
        0.25,
        0.75,
        1.0,
    )
    assert body["scale"] == 4.0 and body["sensitivity"] == 1 and body["cached"] is False
    a = math.exp(-0.25)
    for row, truth in zip(body["categories"], (40, 40, 40), strict=True):
        assert set(row) >= {"category", "count", "stderr", "ci", "proportion", "proportion_ci"}
        assert row["count"] == round(row["count"])  # integer noise on integer counts
        assert row["stderr"] == pytest.approx(math.sqrt(2 * a) / (1 - a))
        # the interval is the discrete law's own (coverage nearest 95%), not count ± 1.96·stderr
        low, up = noise.interval_widths(lambda z: (1 - a) / (1 + a) * a ** abs(z), 0.95)
        assert row["ci"] == [row["count"] - up, row["count"] + low]
        assert abs(row["count"] - truth) < 200  # |noise| > 200 has probability ~1e-22 at b = 4
    assert _spent(store) == 0.25
    # Under add/remove n is itself private: the body reports the sum of the noisy bins.
    assert body["n"] == max(0, round(sum(r["count"] for r in body["categories"])))
    assert body["n_public"] is False


def test_the_same_release_is_served_again_for_free(tmp_path: Path) -> None:
    store = _store(tmp_path, budget=2.0)
    first = _release(store)
    again = _release(store, level=0.9)  # the CI level is post-processing: same release
    assert again["cached"] is True and again["release_key"] == first["release_key"]
    assert again["released_at"] == first["released_at"]
    assert [r["count"] for r in again["categories"]] == [r["count"] for r in first["categories"]]
    assert again["level"] == 0.9 and again["categories"][0]["ci"] != first["categories"][0]["ci"]
    assert again["epsilon_spent"] == 0.25 == _spent(store)
    other = _release(store, noise="laplace")  # another release of the same data: spends
    assert other["cached"] is False and other["epsilon_spent"] == 0.5


def test_new_reports_reach_a_release_only_through_a_paid_refresh(tmp_path: Path) -> None:
    """Whether a request spends depends on the request only: a new participant changes nothing an analyst
    can see (same counts, cached, nothing spent) until a refresh, which spends ε whatever the data did."""
    store = _store(tmp_path, budget=2.0)
    first = _release(store)
    _add(store, 120, 1)
    after = _release(store)
    assert after["cached"] is True and after["epsilon_spent"] == 0.25
    assert [r["count"] for r in after["categories"]] == [r["count"] for r in first["categories"]]
    fresh = _release(store, refresh=True)
    assert fresh["cached"] is False and fresh["epsilon_spent"] == 0.5 == _spent(store)
    assert fresh["release_key"] == first["release_key"]  # the same slot, now holding the new draw
    assert _release(store)["released_at"] == fresh["released_at"]  # served from the slot again
    idle = _release(store, refresh=True)  # no new report: a refresh still spends
    assert idle["epsilon_spent"] == 0.75


@settings(max_examples=20, deadline=None)
@given(n=st.integers(min_value=1, max_value=300))
def test_release_keys_do_not_depend_on_the_data(n: int) -> None:
    """A key hashing n could be inverted by trying every n: it names the request only."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = _store(Path(tmp), n=n)
        assert _release(store)["release_key"] == central.release_key(None, "discrete-laplace")


def test_a_grouped_release_spends_once_for_all_its_disjoint_groups(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.close_campaign("c")
    body = _release(store, group_by="region", group_values=["north", "south", "west"])
    assert set(body["groups"]) == {"north", "south", "west"}  # declared values, even empty ones
    assert body["epsilon_spent"] == 0.25  # parallel composition: max, not sum, over groups
    assert body["groups"]["west"]["categories"][0]["count"] == pytest.approx(0, abs=200)
    assert _release(store, group_by="region", group_values=["north", "south", "west"])["cached"]
    assert _spent(store) == 0.25


def test_replace_adjacency_doubles_the_scale_and_keeps_n_public(tmp_path: Path) -> None:
    store = _store(tmp_path, adjacency="replace")
    body = _release(store)
    assert body["sensitivity"] == 2 and body["scale"] == 8.0
    assert body["n"] == 120 and body["n_public"] is True
    grouped = _release(store, group_by="region")
    assert grouped["n_public"] is False  # a replaced person may change group: group sizes are private


def test_a_release_counts_the_one_round_of_a_central_campaign(tmp_path: Path) -> None:
    """Defect (issue 9): the release read every round's tally rows and kept whichever came last per group
    value, so rows of another round (a database written by a later version, or a campaign re-created) took
    the place of the campaign's own counts. The store's read is per round, like the local estimates'."""
    store = _store(tmp_path, adjacency="replace", budget=50.0)
    other = [
        ReportRow(f"{i:032x}", f"{i:064x}", {"region": "north"}, json.dumps(0), (0,), round="r1")
        for i in range(1000, 1300)
    ]
    store.ingest("c", other, k=K, group_fields=["region"])
    body = _release(store, epsilon=20.0)  # Δ = 2, b = 0.1: the noise is 0 but for a chance of 10⁻⁴ per bin
    assert body["n"] == 120
    assert [abs(row["count"] - 40) <= 2 for row in body["categories"]] == [True] * K
    grouped = _release(store, epsilon=20.0, group_by="region")
    assert abs(grouped["groups"]["north"]["categories"][0]["count"]) <= 2  # not 300 (the other round's)


def test_a_release_past_the_budget_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, budget=0.5)
    store.close_campaign("c")
    _release(store)
    _release(store, noise="laplace")
    with pytest.raises(BudgetExceeded) as info:
        _release(store, group_by="region")
    assert (info.value.spent, info.value.remaining, info.value.requested) == (0.5, 0.0, 0.25)
    assert "campaign 'c' has spent ε = 0.5 of its budget ε = 0.5 (ε = 0 left); this release costs ε = 0.25" in str(
        info.value
    )
    assert _spent(store) == 0.5
    rows = store.connection().execute("SELECT COUNT(*) FROM central_releases").fetchone()[0]
    assert rows == 2
    assert _release(store)["cached"] is True  # what was released stays available


def test_release_needs_the_callers_transaction(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(RuntimeError, match=r"inside Store\.transaction"):
        central.release(store.connection(), "c", epsilon=0.25, k=K)


def test_concurrent_requests_spend_atomically(tmp_path: Path) -> None:
    """Eight threads (own connections) ask for four distinct releases, twice each, on a budget of two."""
    store = _store(tmp_path, budget=0.5)
    store.close_campaign("c")  # releases of a closed campaign are reused
    variants = [{"noise": n, "group_by": g} for n in ("discrete-laplace", "laplace") for g in (None, "region")] * 2
    results: list[object] = [None] * len(variants)

    def worker(i: int) -> None:
        try:
            results[i] = _release(store, **variants[i])
        except BudgetExceeded as exc:
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(variants))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    granted = [r for r in results if isinstance(r, dict)]
    keys = {r["release_key"] for r in granted}
    assert len(keys) == 2  # exactly two distinct releases fit in the budget
    assert all(isinstance(r, dict | BudgetExceeded) for r in results)
    assert _spent(store) == 0.5
    by_key: dict[str, list[float]] = {}
    for body in granted:  # every answer for one release shows the same noisy counts
        counts = [row["count"] for row in body["categories"]] if "categories" in body else json.dumps(body["groups"])
        by_key.setdefault(body["release_key"], []).append(counts)  # type: ignore[arg-type]
    for answers in by_key.values():
        assert all(answer == answers[0] for answer in answers)
