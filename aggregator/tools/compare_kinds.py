"""``deniable compare --kind multi|number``: local against central error for a multi-select option and a mean.

One simulated population of n respondents, ``trials`` estimates under each model (one seeded numpy
generator; the central noise from the exact samplers on a seeded ``randbelow``, simulation only):

* **multi** (k options, at most m selected; option 0 held by a share p): *local*, the set mechanism ``auto``
  picks (padding-and-sampling or the bit vector; :mod:`deniable.shared.mechanisms.sets`), whose count has
  Var = n_v·p*(1−p*) + (n−n_v)·q*(1−q*), over (p*−q*)²; *central*, the curator's multi-select histogram, each
  option's count plus discrete Laplace noise of scale m/ε (one respondent moves up to m bins,
  :mod:`deniable.aggregator.central_kinds`), sd √(2a)/(1−a) with a = e^(−ε/m), whatever n is.
* **number** (values in [0, 100] on a grid of 100 steps, a population spread over the range): *local*, the
  mean mechanism ``auto`` picks (the Hybrid, Duchi below ε*), Var(mean) = scale²·mean_i Var(t | x_i)/n, the
  per-report variance from the mechanism's exact law; *central*, the noisy clipped sum over the noisy count
  (ε/2 each), Var ≈ [Var Z₁ + μ²·Var Z₂]/n² in grid units: it falls like 1/n, the local one like 1/√n.

The printed ± are the standard errors of the measured sds (as ``deniable compare``'s, kurtosis 3 for the
local estimate, the discrete Laplace's for the central count, 3 for the central mean at large n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from deniable.aggregator import central_kinds
from deniable.aggregator.tools.compare import ErrorCurve, ModelError, _model, discrete_laplace_kurtosis
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.mean import MeanMechanism, NumberRange, choose_mean_mechanism
from deniable.shared.mechanisms.registry import KINDS  # the kinds ``deniable compare --kind`` takes
from deniable.shared.mechanisms.sets import SetMechanism, choose_set_mechanism
from deniable.shared.noise import noise_variance
from deniable.shared.sampling import seeded_randbelow

if TYPE_CHECKING:
    import numpy as np

__all__ = ["KINDS", "KindComparison", "compare_kind", "kind_error_curves"]


#: The number question's range and grid.
NUMBER_RANGE = NumberRange(0.0, 100.0, 100)


@dataclass(frozen=True)
class KindComparison:
    """Local against central for one kind: what is estimated, its truth and the two models' errors."""

    kind: str
    n: int
    epsilon: float
    trials: int
    mechanism: str
    estimand: str
    truth: float
    local: ModelError
    central: ModelError

    @property
    def ratio_analytic(self) -> float:
        return self.local.analytic_sd / self.central.analytic_sd

    @property
    def ratio_measured(self) -> float:
        return self.local.measured_sd / self.central.measured_sd

    def table(self) -> str:
        lines = [
            f"{self.kind} question, n = {self.n}, ε = {self.epsilon:g}, {self.trials} trials; estimating "
            f"{self.estimand} (truth {self.truth:.6g}); local mechanism: {self.mechanism}",
            "",
            f"{'model':<36}{'analytic sd':>14}{'measured sd':>14}{'± (sd error)':>14}{'mean error':>12}",
        ]
        for row, label in ((self.local, f"local ({self.mechanism})"), (self.central, "central (discrete Laplace)")):
            lines.append(f"{label:<36}{row.analytic_sd:>14.4g}{row.measured_sd:>14.4g}{row.sd_stderr:>14.3g}"
                         f"{row.mean_error:>12.3g}")  # fmt: skip
        growth = "√n (the central one does not depend on n)" if self.kind == "multi" else \
            "1/√n (the central one like 1/n)"  # fmt: skip
        lines += ["", f"ratio local/central: analytic {self.ratio_analytic:.4g}, measured {self.ratio_measured:.4g}",
                  f"the local error shrinks like {growth}" if self.kind == "number"
                  else f"the local error grows like {growth}"]  # fmt: skip
        return "\n".join(lines)


def _check(kind: str, n: int, epsilon: float, k: int, m: int, trials: int) -> None:
    if kind not in ("multi", "number"):
        raise InvalidParameter(f"'kind' must be multi or number here, got {kind!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 10:
        raise InvalidParameter(f"'n' must be an integer of at least 10, got {n!r}")
    if not 0.01 <= epsilon <= 10:
        raise InvalidParameter(f"'epsilon' must be in [0.01, 10], got {epsilon}")
    if kind == "multi" and not 1 <= m <= k:
        raise InvalidParameter(f"a multi question needs 1 ≤ m ≤ k, got k={k}, m={m}")
    if trials < 10:
        raise InvalidParameter(f"'trials' must be at least 10, got {trials}")


def _selections(n: int, k: int, m: int, p: float, rng: np.random.Generator) -> Any:
    """An (n, k) selection matrix: option 0 held by ⌊p·n⌋ respondents, the rest up to m others at random."""
    import numpy as np

    sel = np.zeros((n, k), dtype=bool)
    holders = int(p * n)
    sel[:holders, 0] = True
    for i in range(n):
        room = m - int(sel[i, 0])
        if room > 0 and k > 1:
            extra = rng.choice(np.arange(1, k), size=int(rng.integers(0, min(room, k - 1) + 1)), replace=False)
            sel[i, extra] = True
    return sel


def _values(n: int, rng: np.random.Generator) -> Any:
    """Grid indices of n values spread over [0, 100] (Beta(2, 3): mean 40)."""
    import numpy as np

    return np.round(rng.beta(2.0, 3.0, size=n) * NUMBER_RANGE.steps).astype(np.int64)


def _exact_mean_variance(mechanism: MeanMechanism, js: Any) -> float:
    """scale²·mean_i Var(t | j_i) from the mechanism's exact law (per distinct j)."""
    import numpy as np

    counts = np.bincount(js, minlength=mechanism.steps + 1)
    total = 0.0
    for j, count in enumerate(counts):
        if count:
            law = mechanism.pmf(j)
            second = sum((p * mechanism.value_of_report(r) ** 2 for r, p in enumerate(law) if p), Fraction(0))
            total += int(count) * float(second - mechanism.x_of(j) ** 2)
    return total / len(js) * NUMBER_RANGE.scale**2


def _mean_central_variance(epsilon: float, n: int, mu_u: float, steps: int) -> float:
    scale_sum = Fraction(steps) / (Fraction(repr(float(epsilon))) / 2)
    scale_count = 1 / (Fraction(repr(float(epsilon))) / 2)
    var_u = (noise_variance("discrete-laplace", scale_sum) + mu_u**2 * noise_variance("discrete-laplace", scale_count))
    return var_u / n**2 * (NUMBER_RANGE.scale / steps) ** 2


def compare_kind(
    kind: str, *, n: int, epsilon: float, trials: int, rng: np.random.Generator, k: int = 8, m: int = 3,
    p: float = 0.3,
) -> KindComparison:  # fmt: skip
    """Simulate one population and ``trials`` estimates of option 0's count (multi) or of the mean (number)
    under the local and the central model."""
    import numpy as np

    _check(kind, n, epsilon, k, m, trials)
    randbelow = seeded_randbelow(rng)
    if kind == "multi":
        sel = _selections(n, k, m, p, rng)
        truth = float(sel[:, 0].sum())
        mech: SetMechanism = choose_set_mechanism(epsilon, k, m)
        local = np.array([mech.estimate_tally(mech.tally(mech.simulate(sel, rng=rng))).counts[0]
                          for _ in range(trials)])  # fmt: skip
        support = [int(c) for c in sel.sum(axis=0)]
        central = np.array([central_kinds.draw_multi(support, n, epsilon=epsilon, m=m, adjacency="add-remove",
                                                     optional=False, randbelow=randbelow)["counts"][0]
                            for _ in range(trials)])  # fmt: skip
        local_sd = math.sqrt(n * mech.per_user_variance(truth / n))
        central_sd = math.sqrt(noise_variance("discrete-laplace", Fraction(m) / Fraction(repr(float(epsilon)))))
        a = math.exp(-epsilon / m)
        kurtosis = 3 + (1 + 4 * a + a * a) / (2 * a)
        return KindComparison(kind, n, epsilon, trials, mech.name, "the count holding option 0", truth,
                              _model("local", local, truth, local_sd, 3.0),  # type: ignore[arg-type]
                              _model("central", central, truth, central_sd, kurtosis))  # type: ignore[arg-type]
    js = _values(n, rng)
    steps = NUMBER_RANGE.steps
    values = NUMBER_RANGE.lo + js * (NUMBER_RANGE.hi - NUMBER_RANGE.lo) / steps
    truth = float(values.mean())
    mean_mech = choose_mean_mechanism(epsilon, steps)
    local = np.array([mean_mech.estimate(mean_mech.tally(mean_mech.simulate(js, rng=rng)), NUMBER_RANGE).mean
                      for _ in range(trials)])  # fmt: skip
    central = np.array([central_kinds.render_mean(central_kinds.draw_mean(
        int(js.sum()), n, epsilon=epsilon, steps=steps, adjacency="add-remove", optional=False,
        randbelow=randbelow), NUMBER_RANGE)["mean"]["mean"] for _ in range(trials)])  # fmt: skip
    mu_u = float((2 * js - steps).mean())
    local_sd = math.sqrt(_exact_mean_variance(mean_mech, js) / n)
    central_sd = math.sqrt(_mean_central_variance(epsilon, n, mu_u, steps))
    return KindComparison(kind, n, epsilon, trials, mean_mech.name, "the mean value in [0, 100]", truth,
                          _model("local", local, truth, local_sd, 3.0),  # type: ignore[arg-type]
                          _model("central", central, truth, central_sd,  # type: ignore[arg-type]
                                 discrete_laplace_kurtosis(epsilon / 2)))


def kind_error_curves(
    kind: str, *, epsilon: float, trials: int, rng: np.random.Generator, n_max: int, k: int = 8, m: int = 3,
    p: float = 0.3,
) -> list[ErrorCurve]:  # fmt: skip
    """Local and central error against n (10² … n_max): the formulas as lines, simulations at powers of ten."""
    import numpy as np

    n_max = max(int(n_max), 1000)
    points = sorted({*(10**e for e in range(2, int(math.log10(n_max)) + 1)), n_max})
    runs = [compare_kind(kind, n=n, epsilon=epsilon, trials=trials, rng=rng, k=k, m=m, p=p) for n in points]
    line_n = np.logspace(2, math.log10(n_max), 50)
    first = runs[0]
    if kind == "multi":
        local_line = first.local.analytic_sd * np.sqrt(line_n / first.n)
        central_line = np.full(line_n.shape, first.central.analytic_sd)
    else:
        local_line = first.local.analytic_sd * np.sqrt(first.n / line_n)
        central_line = first.central.analytic_sd * first.n / line_n
    pts = np.array(points, dtype=np.float64)
    return [
        ErrorCurve(f"local ({first.mechanism})", epsilon, line_n, local_line, pts,
                   np.array([r.local.measured_sd for r in runs])),
        ErrorCurve("central (discrete Laplace)", epsilon, line_n, central_line, pts,
                   np.array([r.central.measured_sd for r in runs])),
    ]  # fmt: skip
