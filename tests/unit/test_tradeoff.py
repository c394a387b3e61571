"""The privacy-loss view: exact trade-off curves, the claim checked from samples, broken mechanisms flagged."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from deniable.aggregator.cli import main
from deniable.aggregator.tools.tradeoff import audit_tradeoff, exact_law, privacy_curve, tradeoff_curve

TRIALS = 100_000


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_randomized_response_and_the_discrete_laplace_are_exactly_f_epsilon(epsilon: float) -> None:
    """Their privacy loss is ±ε only: the exact curve is f_{ε,0} itself (DRS 2022, Prop. 2.5; FORMULAS §5.2)."""
    for name in ("binary-rr", "discrete-laplace"):
        law = exact_law(name, epsilon=epsilon)
        alpha, beta = tradeoff_curve(law.p0, law.p1, np.argsort(law.loss(), kind="stable"))
        assert np.max(np.abs(beta - privacy_curve(alpha, epsilon))) < 1e-12, name
        assert set(np.round(np.abs(law.loss()[np.isfinite(law.loss())]), 12)) == {round(epsilon, 12)}


def test_the_gaussian_curve_lies_above_its_claim_and_touches_delta() -> None:
    law = exact_law("gaussian", epsilon=1.0, delta=1e-5)
    alpha, beta = tradeoff_curve(law.p0, law.p1, np.argsort(law.loss(), kind="stable"))
    assert np.all(beta >= privacy_curve(alpha, 1.0, 1e-5) - 1e-12)
    assert not np.all(beta >= privacy_curve(alpha, 1.0, 0.9e-5) - 1e-12)  # the claim is tight: δ 10% less fails
    hockey = float(np.maximum(law.p0 - math.e * law.p1, 0).sum())
    assert 0.999e-5 < hockey <= 1e-5


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_the_lattice_laplace_law_is_the_laplace_curve_exactly(epsilon: float) -> None:
    """The central sampler for non-integer scales (the discrete Laplace on 2^−20·ℤ), tabulated in lattice
    steps: |L| ≤ ε with δ(ε) = 0, and its curve is the continuous Laplace's (DRS 2022, Ex. 2.2:
    1 − e^ε α, then e^(−ε)/(4α), then e^(−ε)(1 − α)) to 10⁻⁹, strictly above f_ε between the kinks."""
    law = exact_law("laplace", epsilon=epsilon)
    assert law.p0.sum() == pytest.approx(1.0, abs=1e-12) and law.p1.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.max(np.abs(law.loss())) == pytest.approx(epsilon, rel=1e-15)
    assert np.max(np.abs(law.loss() - (np.log(law.p0) - np.log(law.p1)))) < 1e-9
    alpha, beta = tradeoff_curve(law.p0, law.p1, np.argsort(law.loss(), kind="stable"))
    assert np.all(beta >= privacy_curve(alpha, epsilon) - 1e-12)
    e = math.exp(-epsilon)
    middle = e / (4 * np.maximum(alpha, 1e-300))
    laplace = np.where(alpha < e / 2, 1 - alpha / e, np.where(alpha <= 0.5, middle, e * (1 - alpha)))
    assert np.max(np.abs(beta - laplace)) < 1e-9
    assert float(np.maximum(law.p0 - math.exp(epsilon) * law.p1, 0).sum()) < 1e-12


def test_the_gaussian_dp_option_checks_mu(capsys) -> None:
    """``--mu``: the claim is also μ-GDP, T ≥ G_μ. The discrete Gaussian at σ (Δ = 1) lies above G_{1.05/σ}
    (the continuous one is exactly 1/σ-GDP); claiming 1.2/σ holds, claiming 0.5/σ is refuted, and the
    discrete Laplace at ε = 1 is refuted as 0.2-GDP (its curve starts 1 − e·α, below G_0.2 near 0)."""
    from deniable.shared.gaussian import calibrate_discrete_gaussian

    sigma = math.sqrt(float(calibrate_discrete_gaussian(1.0, 1e-5, 1)))
    held = audit_tradeoff("gaussian", epsilon=1.0, delta=1e-5, mu=1.2 / sigma, trials=TRIALS, seed=3)
    assert not held.refuted and held.claim.mu == pytest.approx(1.2 / sigma), held.summary()
    broken = audit_tradeoff("gaussian", epsilon=1.0, delta=1e-5, mu=0.5 / sigma, trials=TRIALS, seed=3)
    assert broken.refuted and f"μ = {0.5 / sigma:g}" in broken.summary()
    assert audit_tradeoff("discrete-laplace", epsilon=1.0, mu=0.2, trials=TRIALS, seed=3).refuted
    assert not audit_tradeoff("discrete-laplace", epsilon=1.0, mu=2.0, trials=TRIALS, seed=3).refuted
    args = ["audit", "--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--trials", "20000", "--json"]
    assert main([*args, "--mu", f"{0.5 / sigma:.6f}", "--seed", "2"]) == 1
    assert f'"mu": {0.5 / sigma:.6f}'.rstrip("0") in capsys.readouterr().out
    assert main([*args, "--mu", f"{1.2 / sigma:.6f}", "--seed", "2"]) == 0
    assert main(["audit", "--mechanism", "laplace", "--tradeoff", "--mu", "0.2", "--trials", "20000"]) == 1


@pytest.mark.parametrize(
    ("mechanism", "k", "floor"),
    [("binary-rr", 2, 0.95), ("grr", 4, 0.95), ("oue", 4, 0.95), ("olh", 8, 0.95), ("discrete-laplace", 2, 0.95),
     ("laplace", 2, 0.95), ("duchi", 2, 0.95), ("piecewise", 2, 0.95), ("hybrid", 2, 0.95), ("bitvector", 4, 0.9),
     ("padding", 4, 0.95), ("gaussian", 2, 0.45)],
)  # fmt: skip
def test_shipped_mechanisms_stay_above_their_curve(mechanism: str, k: int, floor: float) -> None:
    result = audit_tradeoff(mechanism, epsilon=1.0, k=k, trials=TRIALS, seed=7)
    assert not result.refuted, result.summary()
    assert floor < result.epsilon_lower_bound <= 1.0, result.summary()  # valid, and far from vacuous


@pytest.mark.parametrize(
    ("mechanism", "k"),
    [("grr", 4), ("discrete-laplace", 2), ("laplace", 2), ("oue", 4), ("hybrid", 2), ("padding", 4)],
)
def test_a_mechanism_spending_twice_its_claim_falls_below_the_curve(mechanism: str, k: int) -> None:
    result = audit_tradeoff(mechanism, epsilon=1.0, spend=2.0, k=k, trials=TRIALS, seed=8)
    assert result.refuted and result.worst_cut is not None, result.summary()
    _, beta_u, allowed = result.worst_cut
    assert beta_u < allowed and result.epsilon_lower_bound > 1.0


def test_ten_percent_too_generous_is_caught_with_enough_runs() -> None:
    result = audit_tradeoff("discrete-laplace", epsilon=1.0, spend=1.1, trials=400_000, seed=9)
    assert result.refuted, result.summary()


def test_dworks_example_3_is_below_every_finite_curve() -> None:
    result = audit_tradeoff("subsample", epsilon=5.0, p=0.1, trials=TRIALS, seed=10)
    assert result.refuted and result.exact_delta == pytest.approx(0.1)
    assert np.isinf(result.loss_values).any()  # the released target has infinite privacy loss
    assert result.epsilon_lower_bound > 5.0


def test_the_command_line_prints_plots_and_exits_by_the_verdict(tmp_path: Path, capsys) -> None:
    plot = tmp_path / "curve"
    args = ["audit", "--mechanism", "grr", "--k", "4", "--epsilon", "1", "--tradeoff", "--trials", "20000"]
    assert main([*args, "--seed", "1", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "stays on or above the claimed one" in out and f"plot written to {plot}.png" in out
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert main([*args, "--seed", "1", "--spend", "2"]) == 1
    assert "BELOW THE CLAIMED CURVE" in capsys.readouterr().out
    assert main(["audit", "--mechanism", "grr", "--plot", str(plot)]) == 2  # the view's options need it
    assert main(["audit", "--mechanism", "gaussian", "--trials", "20000", "--seed", "2", "--json"]) == 0
    assert '"refuted": false' in capsys.readouterr().out
