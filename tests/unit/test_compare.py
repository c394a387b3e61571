"""`deniable compare`: the printed numbers agree with the formulas within their sampling error."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deniable.aggregator.cli import main
from deniable.aggregator.tools.compare import (
    central_count_estimates,
    compare,
    discrete_laplace_kurtosis,
    sd_standard_error,
    shuffled_epsilon0,
)

#: Two-sided normal quantile for a false-failure rate of 1e-6 per comparison.
Z = 4.89


def _rows(out: str) -> dict[str, list[float]]:
    rows = {}
    for line in out.splitlines():
        number = r"\s+([-\d.e+]+)"
        match = re.match(r"(local \(\S+\)|central \(.+?\)|shuffled \(.+?\))" + number * 3, line)
        if match:
            rows[match.group(1)] = [float(match.group(i)) for i in (2, 3, 4)]
    return rows


E0 = shuffled_epsilon0(100_000, 1.0, 1e-6)


def test_defaults_reproduce_dwork_2006(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    n, eps, trials = 100_000, 1.0, 200
    local_sd = math.sqrt(n) * math.exp(eps / 2) / math.expm1(eps)  # Warner / FORMULAS §1.3: 303.43
    a = math.exp(-eps)
    expected = {
        "local (binary-rr)": (local_sd, 3.0),
        "central (Laplace, textbook)": (math.sqrt(2) / eps, 6.0),
        "central (discrete Laplace, shipped)": (math.sqrt(2 * a) / (1 - a), discrete_laplace_kurtosis(eps)),
        # the discrete Gaussian at (1, 10⁻⁵): σ = 3.7405 on the exact discrete condition, variance σ² to 1e-15
        "central (Gaussian, δ = 1e-05)": (3.7405, 3.0),
        # shuffled: binary RR at the ε₀ whose batch of 10⁵ is (1, 10⁻⁶)-DP (about 7.07; FMT 2021 numerical)
        f"shuffled (binary-rr, ε₀ = {E0:.3g})": (math.sqrt(n) * math.exp(E0 / 2) / math.expm1(E0), 3.0),
    }
    assert set(rows) == set(expected)
    for label, (sd, kurtosis) in expected.items():
        analytic, measured, _ = rows[label]
        assert analytic == pytest.approx(sd, rel=1e-3)
        # The measured sd is within Z standard errors of the formula (error of a sample sd over 200 trials).
        assert abs(measured - sd) <= Z * sd_standard_error(sd, kurtosis, trials), label
    ratio = re.search(r"analytic ([\d.]+), measured ([\d.]+) ± ([\d.]+)", out)
    assert ratio is not None
    assert float(ratio.group(1)) == pytest.approx(214.6, abs=0.05)
    measured_ratio, ratio_se = float(ratio.group(2)), float(ratio.group(3))
    assert abs(measured_ratio - 214.6) <= Z * ratio_se
    assert measured_ratio > 150


@pytest.mark.parametrize(("k", "mechanism"), [(4, "grr"), (16, "oue")])
def test_k_categories_use_the_chosen_mechanism(k: int, mechanism: str) -> None:
    result = compare(n=5_000, p=0.3, epsilon=1.0, k=k, trials=300, rng=np.random.default_rng(7))
    assert result.mechanism == mechanism
    for model, kurtosis in ((result.local, 3.0), (result.laplace, 6.0)):
        se = sd_standard_error(model.analytic_sd, kurtosis, result.trials)
        assert abs(model.measured_sd - model.analytic_sd) <= Z * se
        # Both estimators are unbiased: the mean error is within Z standard errors of the mean.
        assert abs(model.mean_error) <= Z * model.analytic_sd / math.sqrt(result.trials)
    assert result.ratio_analytic == pytest.approx(result.local.analytic_sd / (math.sqrt(2) / 1.0))


def test_the_local_error_grows_like_root_n_and_the_central_does_not() -> None:
    small = compare(n=10_000, p=0.3, epsilon=1.0, k=2, trials=50, rng=np.random.default_rng(1))
    large = compare(n=1_000_000, p=0.3, epsilon=1.0, k=2, trials=50, rng=np.random.default_rng(1))
    assert large.local.analytic_sd / small.local.analytic_sd == pytest.approx(10.0)
    assert large.laplace.analytic_sd == small.laplace.analytic_sd


def test_discrete_laplace_simulation_has_the_shipped_law() -> None:
    """The difference of two geometrics used in simulation has P(Z = z) = (1−a)/(1+a)·a^|z|."""
    eps, draws = 0.7, 200_000
    z = central_count_estimates(0, eps, draws, np.random.default_rng(3), noise="discrete-laplace")
    a = math.exp(-eps)
    for value in (0, 1, -1, 3):
        p = (1 - a) / (1 + a) * a ** abs(value)
        freq = float(np.mean(z == value))
        assert abs(freq - p) <= Z * math.sqrt(p * (1 - p) / draws)


def test_plot_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "error.png"
    assert main(["compare", "--n", "1000", "--trials", "20", "--plot", str(target)]) == 0
    assert f"plot written to {target}" in capsys.readouterr().out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 20_000


def test_bad_arguments_get_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--p", "1.5"]) == 2
    assert "'p' must be a proportion in (0, 1), got 1.5" in capsys.readouterr().err
    assert main(["compare", "--trials", "3"]) == 2
    assert "'trials' must be at least 10" in capsys.readouterr().err
    assert main(["compare", "--epsilon", "0"]) == 2
    assert "'epsilon' must be a number in [1e-06, 20], got 0" in capsys.readouterr().err


def test_the_figure_is_of_this_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The curves are drawn at --epsilon only, up to --n, with this run's sds marked at n (the shuffled one too)."""
    drawn: dict[str, Any] = {}

    def capture(curves: Any, path: Any, *, title: str, markers: Any = ()) -> Path:
        drawn.update(curves=curves, title=title, markers=markers)
        return Path(path)

    monkeypatch.setattr("deniable.aggregator.tools.plots.plot_error_curves", capture)
    args = ["compare", "--n", "3000", "--epsilon", "2", "--trials", "20", "--plot", str(tmp_path / "f.png")]
    assert main(args) == 0
    assert {c.epsilon for c in drawn["curves"]} == {2.0}
    assert all(c.n[-1] == pytest.approx(3000) and c.measured_n[-1] == 3000 for c in drawn["curves"])
    assert "ε = 2" in drawn["title"]
    # shuffled, local, Laplace, Gaussian
    assert [n for _, n, _ in drawn["markers"]] == [3000.0, 3000.0, 3000.0, 3000.0]
    assert [c.model.split(" ")[0] for c in drawn["curves"]] == ["local", "central", "shuffled", "central"]


@pytest.mark.parametrize("kind", ["multi", "number"])
def test_the_new_kinds_measure_what_their_formulas_say(kind: str) -> None:
    """Local and central sds of an option's count and of a mean, measured over 400 trials, within 4 of
    their standard errors of the formulas; the central error is far below the local one."""
    from deniable.aggregator.tools.compare_kinds import compare_kind

    result = compare_kind(kind, n=3000, epsilon=1.0, trials=400, rng=np.random.default_rng(8))
    for model in (result.local, result.central):
        assert abs(model.measured_sd - model.analytic_sd) <= 4 * model.sd_stderr, model
        assert abs(model.mean_error) <= 4 * model.analytic_sd / math.sqrt(result.trials), model
    assert result.ratio_analytic > 10
    assert "ratio local/central" in result.table()


def test_compare_kind_prints_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", "--kind", "multi", "--k", "6", "--m", "2", "--n", "1000", "--trials", "30",
                 "--plot", str(tmp_path / "multi")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "multi question, n = 1000" in out and (tmp_path / "multi.png").stat().st_size > 10_000
    assert main(["compare", "--kind", "number", "--n", "5", "--trials", "30"]) == 2
    assert "'n' must be an integer of at least 10" in capsys.readouterr().err
