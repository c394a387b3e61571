"""Local against central: the price of not trusting the curator (``deniable compare``).

Dwork's 2006 comparison, reproduced by simulation on one population of n people of whom a fraction p hold
the sensitive value (category 1):

* **local**: every device randomizes its own answer (randomized response for k = 2, else the mechanism
  :func:`choose_mechanism` picks) and the server debiases. For binary RR the count's standard deviation is
  √n·e^(ε/2)/(e^ε−1), about 303 at n = 10⁵, ε = 1 (Warner 1965; FORMULAS §1.3); in general the exact
  ``Mechanism.count_variance`` of the true counts.
* **central**: a trusted curator counts exactly and adds Laplace(1/ε) noise (a count has sensitivity 1):
  sd √2/ε ≈ 1.414 at ε = 1, independent of n. The service ships the discrete Laplace (two-sided geometric)
  law instead, sd √(2a)/(1−a) with a = e^(−ε) ≈ 1.357; both are shown.
* **central Gaussian** at (ε, δ): the discrete Gaussian N_ℤ(0, σ²) the service draws, σ² calibrated on its
  exact privacy profile (σ ≈ 3.74 at ε = 1, δ = 10⁻⁵: 2.6× the Laplace's sd for one count, the price of
  (ε, δ) on a single query; it wins under composition, see docs/central.md). Simulated from its exact pmf
  (truncated where the mass is below 10⁻³⁰⁰), kurtosis 3.

* **shuffled**: every device randomizes at a larger ε₀ and a shuffler (``deniable shuffle``) hides the
  reports in a batch of n, chosen so that the aggregator's view is (ε, δ_s)-DP (δ_s = 10⁻⁶ by default):
  ε₀ = :func:`deniable.shared.amplification.local_epsilon_for` (n, ε, δ_s), the largest ε₀ whose batch
  the amplification bound (FMT 2021, numerical) puts at ε. The error is the local one at ε₀: 9.4 at
  n = 10⁵, ε = 1 (ε₀ ≈ 7.07) against 303 local and 1.41 central. Same guarantee to the aggregator,
  different parties trusted (``docs/trust-models.md``).

The ratio, 214.6 at the defaults, grows like √n. Everything is simulated with one seeded numpy generator
(simulation only: devices use the exact samplers). For k = 2 the number of reported ones is drawn directly
as Binomial(m, p*) + Binomial(n−m, q*): the sum of n independent randomized bits has exactly this law, so
it is the same distribution as simulating each device, in O(1) per trial. For k > 2 each trial runs the
mechanism's vectorized ``simulate`` on the whole population.

A measured sd over T trials has a standard error of about σ/2·√((κ − (T−3)/(T−1))/T), κ the kurtosis of
the estimate: 3 for the local estimate (a sum of n independent reports, normal up to O(1/n)), 6 for the
Laplace, 3 + (1+4a+a²)/(2a) for the discrete Laplace (its cumulants are twice the odd-free cumulants of a
geometric variable). The printed ± are these standard errors.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deniable.aggregator.cli import needs
from deniable.shared.amplification import local_epsilon_for
from deniable.shared.errors import InvalidParameter
from deniable.shared.limits import MECHANISM_EPSILON, SHUFFLE_MIN_BATCH_RANGE, check_range
from deniable.shared.mechanisms import Mechanism, Tally, choose_mechanism
from deniable.shared.noise import noise_variance, simulate_two_sided_geometric

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Comparison",
    "ModelError",
    "central_count_estimates",
    "compare",
    "discrete_laplace_kurtosis",
    "error_curves",
    "gaussian_count_estimates",
    "local_count_estimates",
    "population",
    "register",
    "sd_standard_error",
    "shuffled_epsilon0",
]

@functools.lru_cache(maxsize=512)
def shuffled_epsilon0(n: int, epsilon: float, delta: float) -> float:
    """ε₀ of a shuffled campaign of n devices whose every batch is (ε, δ)-DP to the aggregator: batches hold at
    most 10⁵ reports (``SHUFFLE_MIN_BATCH_RANGE``), so beyond that ε₀ stays at its value for 10⁵ and the
    error grows like √n again (:func:`~deniable.shared.amplification.local_epsilon_for`, 12 bisection steps)."""
    return local_epsilon_for(min(n, SHUFFLE_MIN_BATCH_RANGE[1]), epsilon, delta, steps=12)


#: The category whose count is estimated (the sensitive "yes").
TARGET = 1

#: Largest n simulated for the figure when k > 2 (each trial then simulates the whole population).
_MEASURE_MAX_K = 100_000


@dataclass(frozen=True)
class ModelError:
    """How well one model estimates the count: analytic and measured sd, and the measured sd's own error."""

    model: str
    analytic_sd: float
    measured_sd: float
    sd_stderr: float
    mean_error: float


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare`: the three models on one population."""

    n: int
    p: float
    epsilon: float
    k: int
    trials: int
    mechanism: str
    true_count: int
    local: ModelError
    laplace: ModelError
    discrete_laplace: ModelError
    gaussian: ModelError
    delta: float = 1e-5
    shuffled: ModelError | None = None
    epsilon0: float | None = None
    shuffle_delta: float = 1e-6
    shuffled_mechanism: str | None = None

    @property
    def ratio_analytic(self) -> float:
        """Local sd over central (Laplace) sd, from the formulas."""
        return self.local.analytic_sd / self.laplace.analytic_sd

    @property
    def ratio_measured(self) -> float:
        """Local sd over central (Laplace) sd, as measured."""
        return self.local.measured_sd / self.laplace.measured_sd

    @property
    def ratio_stderr(self) -> float:
        """Standard error of :attr:`ratio_measured` (delta method on the two independent sds)."""
        rel = math.hypot(
            self.local.sd_stderr / self.local.measured_sd, self.laplace.sd_stderr / self.laplace.measured_sd
        )
        return self.ratio_measured * rel

    def table(self) -> str:
        """The printed report."""
        lines = [
            f"population: n = {self.n}, p = {self.p:g}, k = {self.k}; true count of category {TARGET}: "
            f"{self.true_count}",
            f"ε = {self.epsilon:g}, {self.trials} trials; local mechanism: {self.mechanism}",
            "",
            f"{'model':<36}{'analytic sd':>14}{'measured sd':>14}{'± (sd error)':>14}{'mean error':>12}",
        ]
        for row, label in (
            (self.local, f"local ({self.mechanism})"),
            (self.laplace, "central (Laplace, textbook)"),
            (self.discrete_laplace, "central (discrete Laplace, shipped)"),
            (self.gaussian, f"central (Gaussian, δ = {self.delta:g})"),
            *(
                ((self.shuffled, f"shuffled ({self.shuffled_mechanism}, ε₀ = {self.epsilon0:.3g})"),)
                if self.shuffled is not None
                else ()
            ),
        ):
            lines.append(
                f"{label:<36}{row.analytic_sd:>14.4g}{row.measured_sd:>14.4g}{row.sd_stderr:>14.3g}"
                f"{row.mean_error:>12.3g}"
            )
        lines += [
            "",
            f"ratio local/central (Laplace): analytic {self.ratio_analytic:.4g}, measured "
            f"{self.ratio_measured:.4g} ± {self.ratio_stderr:.3g}",
            f"ratio local/central (Gaussian): analytic {self.local.analytic_sd / self.gaussian.analytic_sd:.4g}",
            "the local error grows like √n; the central one does not depend on n",
        ]
        if self.shuffled is not None:
            lines += [
                f"shuffled: devices randomize at ε₀ = {self.epsilon0:.4g}, the batch of {self.n} is "
                f"({self.epsilon:g}, {self.shuffle_delta:g})-DP to the aggregator (FMT 2021); ratio "
                f"shuffled/central (Laplace): analytic {self.shuffled.analytic_sd / self.laplace.analytic_sd:.4g}, "
                f"local/shuffled: {self.local.analytic_sd / self.shuffled.analytic_sd:.4g}",
            ]
        return "\n".join(lines)


def sd_standard_error(sd: float, kurtosis: float, trials: int) -> float:
    """Standard error of a sample sd over ``trials`` draws: σ/2·√((κ − (T−3)/(T−1))/T) (delta method)."""
    return 0.5 * sd * math.sqrt((kurtosis - (trials - 3) / (trials - 1)) / trials)


def discrete_laplace_kurtosis(epsilon: float) -> float:
    """Kurtosis of the two-sided geometric law with a = e^(−ε): 3 + (1+4a+a²)/(2a) (→ 6, the Laplace's)."""
    a = math.exp(-epsilon)
    return 3.0 + (1 + 4 * a + a * a) / (2 * a)


def population(n: int, p: float, k: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """n values: category 1 with probability p, the others share 1 − p equally (category 0 when k = 2)."""
    import numpy as np

    probs = np.full(k, (1 - p) / (k - 1))
    probs[TARGET] = p
    values: npt.NDArray[np.int64] = rng.choice(k, size=n, p=probs).astype(np.int64)
    return values


def local_count_estimates(
    mechanism: Mechanism[Any], values: Any, trials: int, rng: np.random.Generator, *, progress: bool = False
) -> FloatArray:
    """``trials`` independent local estimates of the count of category 1 in ``values``."""
    import numpy as np
    from tqdm import tqdm

    values = np.asarray(values, dtype=np.int64)
    n = int(values.size)
    if mechanism.k == 2:
        m = int(np.count_nonzero(values == TARGET))
        ones = rng.binomial(m, mechanism.p_star, trials) + rng.binomial(n - m, mechanism.q_star, trials)
        tallies = (Tally(n, (n - int(y), int(y))) for y in ones)
        return np.array([mechanism.estimate_tally(t).counts[TARGET] for t in tallies])
    runs = tqdm(range(trials), desc=f"local {mechanism.name} n={n}", disable=not progress, leave=False)
    return np.array([mechanism.estimate(mechanism.simulate(values, rng=rng)).counts[TARGET] for _ in runs])


def central_count_estimates(
    count: int, epsilon: float, trials: int, rng: np.random.Generator, *, noise: str = "laplace"
) -> FloatArray:
    """``trials`` central releases of ``count`` (sensitivity 1): Laplace(1/ε), or the two-sided geometric
    law with a = e^(−ε) (:func:`deniable.shared.noise.simulate_two_sided_geometric`)."""
    import numpy as np

    if noise == "laplace":
        result: FloatArray = count + rng.laplace(0.0, 1.0 / epsilon, trials)
        return result
    draws = simulate_two_sided_geometric(-math.expm1(-epsilon), trials, rng)
    result = count + draws.astype(np.float64)
    return result


def gaussian_count_estimates(count: int, sigma2: Any, trials: int, rng: np.random.Generator) -> FloatArray:
    """``trials`` central releases of ``count`` with N_ℤ(0, σ²) noise, drawn from its exact pmf."""
    import numpy as np

    from deniable.shared.gaussian import discrete_gaussian_pmf

    radius = math.ceil(38 * math.sqrt(float(sigma2))) + 1
    support = np.arange(-radius, radius + 1)
    pmf = np.array([discrete_gaussian_pmf(int(y), sigma2) for y in support])
    result: FloatArray = count + rng.choice(support, size=trials, p=pmf / pmf.sum()).astype(np.float64)
    return result


def _model(name: str, estimates: FloatArray, truth: int, analytic: float, kurtosis: float) -> ModelError:
    trials = int(estimates.size)
    return ModelError(
        model=name,
        analytic_sd=analytic,
        measured_sd=float(estimates.std(ddof=1)),
        sd_stderr=sd_standard_error(analytic, kurtosis, trials),
        mean_error=float(estimates.mean() - truth),
    )


def _check(n: int, p: float, epsilon: float, k: int, trials: int) -> None:
    if n < 1:
        raise InvalidParameter(f"'n' must be a positive integer, got {n}")
    if not 0 < p < 1:
        raise InvalidParameter(f"'p' must be a proportion in (0, 1), got {p}")
    check_range("epsilon", epsilon, MECHANISM_EPSILON, InvalidParameter)
    if trials < 10:
        raise InvalidParameter(f"'trials' must be at least 10 to measure a standard deviation, got {trials}")
    if k < 2:
        raise InvalidParameter(f"'k' must be an integer >= 2, got {k}")


def compare(
    *,
    n: int,
    p: float,
    epsilon: float,
    k: int,
    trials: int,
    rng: np.random.Generator,
    progress: bool = False,
    delta: float = 1e-5,
    shuffle_delta: float | None = 1e-6,
) -> Comparison:
    """Simulate one population and ``trials`` estimates of its count under each model (the Gaussian one at
    (ε, ``delta``); the shuffled one at the ε₀ whose batch of n is (ε, ``shuffle_delta``)-DP, None: not
    simulated)."""
    import numpy as np

    from deniable.shared.gaussian import calibrate_discrete_gaussian, discrete_gaussian_variance

    _check(n, p, epsilon, k, trials)
    if not 0 < delta < 1:
        raise InvalidParameter(f"'delta' must be in (0, 1), got {delta}")
    mechanism = choose_mechanism(k, epsilon)
    values = population(n, p, k, rng)
    true_counts = np.bincount(values, minlength=k)
    truth = int(true_counts[TARGET])
    local = local_count_estimates(mechanism, values, trials, rng, progress=progress)
    laplace = central_count_estimates(truth, epsilon, trials, rng, noise="laplace")
    discrete = central_count_estimates(truth, epsilon, trials, rng, noise="discrete-laplace")
    sigma2 = calibrate_discrete_gaussian(epsilon, delta, 1)
    gaussian = gaussian_count_estimates(truth, sigma2, trials, rng)
    local_sd = math.sqrt(float(mechanism.count_variance(true_counts)[TARGET]))
    shuffled = epsilon0 = mechanism0 = None
    if shuffle_delta is not None and n >= 2:
        epsilon0 = shuffled_epsilon0(n, epsilon, shuffle_delta)
        mechanism0 = choose_mechanism(k, epsilon0)
        estimates0 = local_count_estimates(mechanism0, values, trials, rng, progress=progress)
        sd0 = math.sqrt(float(mechanism0.count_variance(true_counts)[TARGET]))
        shuffled = _model("shuffled", estimates0, truth, sd0, 3.0)
    return Comparison(
        n=n,
        p=p,
        epsilon=epsilon,
        k=k,
        trials=trials,
        mechanism=mechanism.name,
        true_count=truth,
        local=_model("local", local, truth, local_sd, 3.0),
        laplace=_model("laplace", laplace, truth, math.sqrt(2.0) / epsilon, 6.0),
        discrete_laplace=_model(
            "discrete-laplace",
            discrete,
            truth,
            math.sqrt(noise_variance("discrete-laplace", 1.0 / epsilon)),
            discrete_laplace_kurtosis(epsilon),
        ),
        gaussian=_model("gaussian", gaussian, truth, math.sqrt(discrete_gaussian_variance(sigma2)), 3.0),
        delta=delta,
        shuffled=shuffled,
        epsilon0=epsilon0,
        shuffle_delta=1e-6 if shuffle_delta is None else shuffle_delta,
        shuffled_mechanism=None if mechanism0 is None else mechanism0.name,
    )


@dataclass(frozen=True)
class ErrorCurve:
    """Error (sd of the count) against n for one model at one ε: analytic line and measured points."""

    model: str
    epsilon: float
    n: FloatArray
    analytic: FloatArray
    measured_n: FloatArray
    measured: FloatArray


def error_curves(
    *,
    epsilons: Sequence[float],
    p: float,
    k: int,
    trials: int,
    rng: np.random.Generator,
    n_max: int = 1_000_000,
    measure_max: int | None = None,
    progress: bool = False,
    delta: float = 1e-5,
    shuffle_delta: float | None = 1e-6,
    shuffled_epsilons: Sequence[float] | None = None,
) -> list[ErrorCurve]:
    """Local and central error against n (10² … n_max, at least 10³) for each ε: the formulas as lines and
    simulations at each power of ten and at n_max itself, up to ``measure_max`` (default n_max). The shuffled
    model's curve is drawn for ``shuffled_epsilons`` (default: every ε; each point costs a bisection over ε₀)."""
    import numpy as np
    from tqdm import tqdm

    n_max = max(int(n_max), 1000)
    line_n = np.logspace(2, math.log10(n_max), 50)
    top = n_max if measure_max is None else min(n_max, int(measure_max))
    points = sorted({*(10**e for e in range(2, int(math.log10(top)) + 1)), top})
    curves = []
    grid = [(eps, n) for eps in epsilons for n in points]
    measured: dict[tuple[float, int], Comparison] = {}
    for eps, n in tqdm(grid, desc="simulating", disable=not progress):
        shuffled_here = shuffle_delta is not None and (shuffled_epsilons is None or eps in shuffled_epsilons)
        measured[eps, n] = compare(n=n, p=p, epsilon=eps, k=k, trials=trials, rng=rng, delta=delta,
                                   shuffle_delta=shuffle_delta if shuffled_here else None)  # fmt: skip
    for eps in epsilons:
        mechanism = choose_mechanism(k, eps)
        share = np.full(k, (1 - p) / (k - 1))
        share[TARGET] = p
        local_line = np.array([math.sqrt(mechanism.count_variance(share * n)[TARGET]) for n in line_n])
        central_line = np.full(line_n.shape, math.sqrt(2.0) / eps)
        pts = np.array(points, dtype=np.float64)
        curves.append(
            ErrorCurve(
                f"local ({mechanism.name})",
                eps,
                line_n,
                local_line,
                pts,
                np.array([measured[eps, n].local.measured_sd for n in points]),
            )
        )
        curves.append(
            ErrorCurve(
                "central (Laplace)",
                eps,
                line_n,
                central_line,
                pts,
                np.array([measured[eps, n].laplace.measured_sd for n in points]),
            )
        )
        if shuffle_delta is not None and (shuffled_epsilons is None or eps in shuffled_epsilons):
            # ε₀ grows with n: the line at 12 points (one bisection each)
            few = np.logspace(2, math.log10(n_max), 12)
            shuffled_line = []
            for n in tqdm(few, desc=f"ε₀ for a shuffled batch at ε = {eps:g}", disable=not progress, leave=False):
                m0 = choose_mechanism(k, shuffled_epsilon0(int(n), eps, shuffle_delta))
                shuffled_line.append(math.sqrt(m0.count_variance(share * n)[TARGET]))
            curves.append(
                ErrorCurve(
                    f"shuffled (ε₀ for ({eps:g}, {shuffle_delta:g}) at n)",
                    eps,
                    few,
                    np.array(shuffled_line),
                    pts,
                    np.array([measured[eps, n].shuffled.measured_sd for n in points]),  # type: ignore[union-attr]
                )
            )
        gauss_sd = measured[eps, points[0]].gaussian.analytic_sd
        curves.append(
            ErrorCurve(
                "central (Gaussian)",
                eps,
                line_n,
                np.full(line_n.shape, gauss_sd),
                pts,
                np.array([measured[eps, n].gaussian.measured_sd for n in points]),
            )
        )
    return curves


# -- command line ----------------------------------------------------------------------------------


def _run_kind(args: argparse.Namespace) -> int:
    """``--kind multi|number``: :mod:`deniable.aggregator.tools.compare_kinds`."""
    import numpy as np

    from .compare_kinds import compare_kind, kind_error_curves
    from .plots import plot_error_curves, plot_path

    rng = np.random.default_rng(args.seed)
    try:
        plot = None if args.plot is None else plot_path(args.plot)
        result = compare_kind(args.kind, n=args.n, epsilon=args.epsilon, trials=args.trials, rng=rng, k=args.k,
                              m=args.m, p=args.p)  # fmt: skip
    except (InvalidParameter, ValueError) as exc:
        print(f"deniable compare: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    if plot is not None:
        curves = kind_error_curves(args.kind, epsilon=args.epsilon, trials=args.trials, rng=rng, n_max=args.n,
                                   k=args.k, m=args.m, p=args.p)  # fmt: skip
        what = "option 0's count" if args.kind == "multi" else "the mean"
        markers = [(f"this run: local, n = {args.n}", float(args.n), result.local.measured_sd),
                   (f"this run: central, n = {args.n}", float(args.n), result.central.measured_sd)]
        written = plot_error_curves(curves, plot, title=f"{args.kind} question: error of {what} at ε = "
                                    f"{args.epsilon:g}", markers=markers,
                                    ylabel=f"standard deviation of {what}")  # fmt: skip
        print(f"plot written to {written}")
    return 0


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from .plots import plot_error_curves, plot_path

    if args.kind != "choice":
        return _run_kind(args)
    rng = np.random.default_rng(args.seed)
    try:
        plot = None if args.plot is None else plot_path(args.plot)  # refuse a bad path before simulating
        result = compare(
            n=args.n, p=args.p, epsilon=args.epsilon, k=args.k, trials=args.trials, rng=rng, progress=True,
            delta=args.delta, shuffle_delta=args.shuffle_delta,
        )  # fmt: skip
    except (InvalidParameter, ValueError) as exc:
        print(f"deniable compare: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    if plot is not None:
        # The figure is of this run: its ε, its p and k, n up to --n, with this run's two sds marked.
        curves = error_curves(
            epsilons=[args.epsilon], p=args.p, k=args.k, trials=args.trials, rng=rng, n_max=args.n,
            measure_max=None if args.k == 2 else _MEASURE_MAX_K, progress=True, delta=args.delta,
            shuffle_delta=args.shuffle_delta,
        )  # fmt: skip
        markers = [
            *(
                [(f"this run: shuffled, n = {args.n}", float(args.n), result.shuffled.measured_sd)]
                if result.shuffled is not None
                else []
            ),
            (f"this run: local, n = {args.n}", float(args.n), result.local.measured_sd),
            (f"this run: central, n = {args.n}", float(args.n), result.laplace.measured_sd),
            (f"this run: central Gaussian, n = {args.n}", float(args.n), result.gaussian.measured_sd),
        ]
        title = f"count error at ε = {args.epsilon:g}, p = {args.p:g}, k = {args.k}"
        written = plot_error_curves(curves, plot, title=title, markers=markers)
        print(f"plot written to {written}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``deniable compare``."""
    parser = subparsers.add_parser(
        "compare",
        help=needs("tools") + "simulate local, shuffled and central counts at the same ε to the aggregator",
        description="Simulate a population and compare the error of the local model (randomized response on "
        "every device), the shuffled model (randomized response at the larger ε₀ whose shuffled batch is "
        "(ε, --shuffle-delta)-DP to the aggregator) and the central model (a trusted curator adding Laplace, or "
        "(ε, δ) Gaussian, noise).",
    )
    parser.add_argument("--n", type=int, default=100_000, help="population size (default 100000)")
    parser.add_argument("--p", type=float, default=0.3, help="proportion holding category 1 (default 0.3)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="privacy parameter (default 1)")
    parser.add_argument(
        "--kind", choices=("choice", "multi", "number"), default="choice",
        help="the question compared: choice (a category's count, default), multi (an option's count, at most "
        "--m selected of --k options) or number (a mean of values in [0, 100])",
    )
    parser.add_argument("--k", type=int, default=2, help="number of categories or options (default 2; 8 is "
                        "a good multi)")
    parser.add_argument("--m", type=int, default=3, help="multi: most options one answer selects (default 3)")
    parser.add_argument(
        "--delta", type=float, default=1e-5, help="δ of the central Gaussian count (default 1e-05)"
    )
    parser.add_argument(
        "--shuffle-delta", type=float, default=1e-6,
        help="δ of the shuffled batch's central guarantee (default 1e-06)",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, default=200, help="simulated runs (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="numpy seed (default 0)")
    parser.add_argument(
        "--plot", metavar="FILE.png",
        help="also draw the error against n (up to --n, at --epsilon) to this file; .png is added to a name "
        "without a suffix, and its folder must exist",
    )
    parser.set_defaults(func=_run, extra="tools")
