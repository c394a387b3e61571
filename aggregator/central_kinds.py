"""Central (trusted-curator) releases of a survey's ``multi`` and ``number`` questions: the noise, the
estimates and their error bars. (``choice`` questions are the histogram of :mod:`deniable.aggregator.central`.)

The curator holds, per question, the additive integer tally of the raw answers (``deniable.aggregator.store``):

* ``multi`` (k options, at most m selected): ``support[v]`` = the number of answers selecting option v.
  One respondent adds 1 to at most m bins, so the ℓ1 sensitivity of the option histogram is **m** under
  add-remove and **2m** under replace (m bins down, m others up). Each bin gets discrete Laplace noise of
  scale Δ/ε_q (Ghosh et al. 2009, exact: :func:`deniable.shared.sampling.discrete_laplace`), so the
  release is ε_q-DP; the counts' interval comes from the noise's exact law
  (:func:`deniable.aggregator.central.interval_widths`). The number of answers n_j is public only under
  replace adjacency with a question nobody may skip; only then are proportions served.
* ``number`` on the grid j ∈ [0, steps] of [lo, hi]: ``support = [Σj]`` over the n_j answers. The release
  is a noisy clipped sum over a noisy count. With u = 2j − steps ∈ [−steps, steps] (the value centred:
  v = (lo+hi)/2 + (hi−lo)/2 · u/steps), U = Σu = 2Σj − n_j·steps:

  - add-remove: Ũ = U + Z₁, Z₁ ~ DLap(steps/ε₁) (one answer moves U by at most steps), and
    ñ = n_j + Z₂, Z₂ ~ DLap(1/ε₂), with ε₁ = ε₂ = ε_q/2 (basic composition: ε_q-DP). The split is the
    minimax one: Var ∝ (steps/ε₁)² + μ²(1/ε₂)² with |μ| ≤ steps is largest at |μ| = steps, where equal
    shares minimise it.
  - replace, a question nobody may skip: n_j is public and Ũ = U + Z₁, Z₁ ~ DLap(2·steps/ε_q) (a value
    moves from −steps to +steps at most); with skipping allowed n_j moves by one, so it is noised as above
    (ε₂ = ε_q/2) and the sum gets DLap(2·steps/ε₁), ε₁ = ε_q/2.

  The mean (u units) is μ̂ = Ũ/ñ; its SE the delta method's √(Var Z₁ + μ̂²·Var Z₂)/ñ. The interval
  inverts the exact pivot Ũ − μ·ñ = Z₁ − μ·Z₂ (U = μ·n_j holds exactly for the data at hand, Fieller 1954):
  μ ∈ [(Ũ − w)/ñ, (Ũ + w)/ñ] with w the smallest width where P(|Z₁ − μ̂·Z₂| ≤ w) ≥ level, computed
  from the two exact laws (so the interval is calibrated for Laplace noise, whose normal interval covers
  only 0.937 at 95%); clipped to the range (post-processing, the truth lies in it). Coverage is measured
  in ``tests/test_central_kinds.py``. When ñ ≤ 0 there is no mean to serve (``None``).

Noise: discrete Laplace only (Gaussian noise and Poisson subsampling are offered for choice questions;
their calibration for these sensitivities is not done here, so they are refused with a message).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from deniable.aggregator.central import _ExactNoiseEstimate
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.estimate import normal_quantile
from deniable.shared.mechanisms.mean import NumberRange
from deniable.shared.noise import noise_pmf, noise_scale, noise_variance, sample_noise
from deniable.shared.sampling import RandBelow

__all__ = [
    "KIND_NOISE",
    "draw_histogram",
    "draw_mean",
    "draw_multi",
    "mean_sensitivities",
    "multi_sensitivity",
    "render_histogram",
    "render_mean",
    "render_multi",
]

#: The one noise a multi or number question's release takes.
KIND_NOISE = "discrete-laplace"


def check_kind_noise(kind: str, noise: str, sample: object = None) -> None:
    if noise != KIND_NOISE:
        raise InvalidParameter(
            f"a central {kind} question is released with 'discrete-laplace' noise only, got {noise!r}; "
            "Gaussian and lattice-Laplace noise apply to choice questions"
        )
    if sample is not None:
        raise InvalidParameter(f"'sample' (Poisson subsampling) applies to choice questions only, not to {kind}")


def multi_sensitivity(m: int, adjacency: str) -> int:
    """ℓ1 sensitivity of a multi-select histogram: m under add-remove, 2m under replace."""
    if adjacency == "add-remove":
        return m
    if adjacency == "replace":
        return 2 * m
    raise InvalidParameter(f"'adjacency' must be add-remove or replace, got {adjacency!r}")


def mean_sensitivities(steps: int, adjacency: str, optional: bool) -> tuple[int, bool]:
    """(Δ of the centred sum U in u units, whether the count n_j is noised) — see the module docstring."""
    if adjacency == "add-remove":
        return steps, True
    if adjacency == "replace":
        return 2 * steps, optional
    raise InvalidParameter(f"'adjacency' must be add-remove or replace, got {adjacency!r}")


def _fraction_list(x: Fraction) -> list[int]:
    return [x.numerator, x.denominator]


def draw_histogram(
    support: Sequence[int], n: int, *, kind: str, epsilon: float, sensitivity: int, adjacency: str,
    optional: bool, randbelow: RandBelow = secrets.randbelow,
) -> dict[str, Any]:  # fmt: skip
    """The stored release of a choice (``sensitivity`` 1) or multi question (``sensitivity`` m): every
    count plus DLap(Δ/ε), Δ = m under add-remove, 2m under replace (a choice is the m = 1 case)."""
    delta = multi_sensitivity(sensitivity, adjacency)
    scale = noise_scale(epsilon, delta)
    counts = [float(int(c) + sample_noise(KIND_NOISE, scale, randbelow)) for c in support]
    public = adjacency == "replace" and not optional
    return {
        "kind": kind, "noise": KIND_NOISE, "epsilon": float(epsilon), "adjacency": adjacency,
        "sensitivity": delta, "scale": _fraction_list(scale), "n": n if public else None, "counts": counts,
    }  # fmt: skip


def draw_multi(
    support: Sequence[int], n: int, *, epsilon: float, m: int, adjacency: str, optional: bool,
    randbelow: RandBelow = secrets.randbelow,
) -> dict[str, Any]:  # fmt: skip
    """The stored release of a multi question: every option's count plus DLap(Δ/ε) (Δ = m or 2m)."""
    return draw_histogram(support, n, kind="multi", epsilon=epsilon, sensitivity=m, adjacency=adjacency,
                          optional=optional, randbelow=randbelow)


def draw_mean(
    sum_j: int, n: int, *, epsilon: float, steps: int, adjacency: str, optional: bool,
    randbelow: RandBelow = secrets.randbelow,
) -> dict[str, Any]:  # fmt: skip
    """The stored release of a number question: the noisy centred sum Ũ and, unless public, the noisy
    count ñ (``sum_j`` = Σj over the n answers)."""
    delta_sum, noisy_count = mean_sensitivities(steps, adjacency, optional)
    eps = Fraction(repr(float(epsilon)))
    eps_sum = eps / 2 if noisy_count else eps
    scale_sum = Fraction(delta_sum) / eps_sum
    u_total = 2 * int(sum_j) - int(n) * steps
    out: dict[str, Any] = {
        "kind": "number", "noise": KIND_NOISE, "epsilon": float(epsilon), "adjacency": adjacency,
        "steps": steps, "sensitivity": delta_sum, "scale": _fraction_list(scale_sum),
        "sum": int(u_total + sample_noise(KIND_NOISE, scale_sum, randbelow)),
    }  # fmt: skip
    if noisy_count:
        scale_count = 1 / (eps - eps_sum)
        out["count_scale"] = _fraction_list(scale_count)
        out["count"] = int(n + sample_noise(KIND_NOISE, scale_count, randbelow))
        out["n"] = None
    else:
        out["count"] = int(n)
        out["n"] = int(n)
    return out


def _dlap_cdf(z: Any, a: float) -> Any:
    """P(Z ≤ z) of the discrete Laplace with P(z) ∝ a^|z| (vectorized over integer arrays)."""
    import numpy as np

    z = np.asarray(z, dtype=np.float64)
    return np.where(z >= 0, 1.0 - a ** (np.maximum(z, 0) + 1) / (1 + a), a ** np.maximum(-z, 0) / (1 + a))


def _pivot_width(level: float, scale_sum: Fraction, scale_count: Fraction | None, mu: float) -> float:
    """The smallest w with P(|Z₁ − μ·Z₂| ≤ w) ≥ level (Z₂ ≡ 0 when the count is public), by bisection on
    the exact laws (Z₂'s tail below 10⁻¹² dropped)."""
    import numpy as np

    a1 = math.exp(-1.0 / float(scale_sum))
    shifts: Any = np.zeros(1)
    weights: Any = np.ones(1)
    if scale_count is not None:
        a2 = math.exp(-1.0 / float(scale_count))
        reach = math.ceil(math.log(1e-12) / math.log(a2)) if a2 > 0 else 0
        z2 = np.arange(-reach, reach + 1)
        shifts, weights = mu * z2, (1 - a2) / (1 + a2) * a2 ** np.abs(z2)

    def coverage(w: float) -> float:
        inside = _dlap_cdf(np.floor(w + shifts), a1) - _dlap_cdf(np.ceil(-w + shifts) - 1, a1)
        return float(np.dot(weights, inside))

    low, high = 0.0, 1.0
    while coverage(high) < level:
        high *= 2
    for _ in range(34):  # to 2^-34 of the width: far below one noise step
        mid = (low + high) / 2
        if coverage(mid) >= level:
            high = mid
        else:
            low = mid
    return high


def render_mean(stored: dict[str, Any], number_range: NumberRange, *, level: float = 0.95) -> dict[str, Any]:
    """The JSON body of a number question's stored release at ``level`` (post-processing: no ε)."""
    normal_quantile(level)
    steps = int(stored["steps"])
    scale_sum = Fraction(*stored["scale"])
    scale_count = Fraction(*stored["count_scale"]) if "count_scale" in stored else None
    count, total = int(stored["count"]), int(stored["sum"])
    unit = number_range.scale / steps  # value units per u unit
    body: dict[str, Any] = {
        "kind": "number", "trust_model": "central", "noise": stored["noise"], "epsilon": stored["epsilon"],
        "adjacency": stored["adjacency"], "sensitivity": stored["sensitivity"], "scale": float(scale_sum),
        "n": stored["n"], "n_public": stored["n"] is not None, "answered": count, "level": level,
        "interval": {"method": "pivot", "description": "inverts Ũ − μ·ñ = Z₁ − μ·Z₂ on the noises' exact laws"},
    }  # fmt: skip
    if scale_count is not None:
        body["count_scale"] = float(scale_count)
    if count <= 0:
        body["mean"] = {"mean": None, "stderr": None, "ci": [None, None], "range": [number_range.lo, number_range.hi]}
        return body
    mu = total / count
    var_sum = noise_variance(KIND_NOISE, scale_sum)
    var_count = 0.0 if scale_count is None else noise_variance(KIND_NOISE, scale_count)
    stderr_u = math.sqrt(var_sum + mu * mu * var_count) / count
    width = _pivot_width(level, scale_sum, scale_count, mu)
    low_u, high_u = (total - width) / count, (total + width) / count
    centre = (number_range.lo + number_range.hi) / 2
    low = min(max(centre + unit * low_u, number_range.lo), number_range.hi)
    high = min(max(centre + unit * high_u, number_range.lo), number_range.hi)
    body["mean"] = {
        "mean": centre + unit * mu, "stderr": abs(unit) * stderr_u, "ci": [low, high],
        "range": [number_range.lo, number_range.hi],
    }  # fmt: skip
    return body


def render_multi(stored: dict[str, Any], options: Sequence[str], *, level: float = 0.95) -> dict[str, Any]:
    """The JSON body of a multi question's stored release at ``level`` (post-processing: no ε)."""
    return render_histogram(stored, options, level=level)


def render_histogram(stored: dict[str, Any], labels: Sequence[str], *, level: float = 0.95) -> dict[str, Any]:
    """The JSON body of a choice or multi question's stored release at ``level`` (rows ``categories`` or
    ``options``; post-processing: no ε)."""
    import numpy as np

    normal_quantile(level)
    scale = Fraction(*stored["scale"])
    counts = np.asarray(stored["counts"], dtype=np.float64)
    variance = np.full(counts.shape, noise_variance(KIND_NOISE, scale))
    small = math.sqrt(float(variance[0])) <= 100.0 if variance.size else False
    n = stored["n"]
    estimate = _ExactNoiseEstimate(
        mechanism=KIND_NOISE, epsilon=stored["epsilon"], n=int(n or 0), counts=counts, variance=variance,
        pmf=noise_pmf(KIND_NOISE, scale) if small else None,
    )  # fmt: skip
    low, high = estimate.ci(level)
    stderr = estimate.stderr
    rows = []
    kind = stored.get("kind", "multi")
    for v, label in enumerate(labels):
        row: dict[str, Any] = {
            "option" if kind == "multi" else "category": label, "count": float(counts[v]), "stderr": float(stderr[v]),
            "ci": [float(max(low[v], 0.0)), float(high[v] if n is None else min(high[v], n))],
        }  # fmt: skip
        if n:
            row.update({
                "proportion": float(counts[v]) / n, "proportion_stderr": float(stderr[v]) / n,
                "proportion_ci": [row["ci"][0] / n, row["ci"][1] / n],
            })  # fmt: skip
        else:
            row.update({"proportion": None, "proportion_stderr": None, "proportion_ci": [None, None]})
        rows.append(row)
    return {
        "kind": kind, "trust_model": "central", "noise": stored["noise"], "epsilon": stored["epsilon"],
        "adjacency": stored["adjacency"], "sensitivity": stored["sensitivity"], "scale": float(scale),
        "n": n, "n_public": n is not None, "level": level,
        "interval": {"method": "exact-noise" if small else "normal",
                     "description": "count ± the noise's exact central interval" if small else "count ± z·stderr"},
        "options" if kind == "multi" else "categories": rows,
    }  # fmt: skip
