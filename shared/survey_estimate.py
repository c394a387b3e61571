"""Survey-level estimates: every question's estimate from its additive integer tally, under either ε split.

A survey's respondents answer under one of two splits of the campaign's ε (``deniable.shared.planner``):

* ``per_question`` (sequential composition): every respondent answers every question, question j at its
  share of ε. Question j's estimate is the mechanism's own, over its n_j answers: the unbiased counts of a
  pure protocol with the score interval (``choice``, ``multi``), or the unbiased mean (``number``).
* ``sampling``: every respondent answers *one* question drawn uniformly (independently of the answers)
  with the whole ε, so question j is answered by n_j of the N respondents. Its estimate targets the whole
  population of N: proportions and means of the n_j who answered it, counts rescaled by N/n_j.

**The sampling split's estimator and its variance** (fixed population of N, with per-respondent answers
x_i; conditioned on n_j the answerers A are a simple random sample without replacement, since each
respondent's draw is independent and uniform). Every mechanism here gives each report an unbiased estimate
t_i of x_i (the indicator "holds v" for a category or option, the value for a number) with E[t_i | x_i] =
x_i and Var(t_i | x_i) = V(x_i). The estimate of the population mean π = Σx_i/N is t̄ = Σ_A t_i / n_j:

    E[t̄ | n_j] = π                                        (unbiased whenever n_j ≥ 1)
    Var(t̄ | n_j) = (1 − f)·S²/n_j + V̄/n_j,   f = n_j/N     (S² = Σ(x_i − π)²/(N − 1), V̄ = mean_i V(x_i))

the first term the price of sampling who answers (the finite-population variance of a simple random
sample, Cochran 1977, Thm 2.2), the second the randomizer's. Over the answerers, the sample variance s_t²
of the t_i has E[s_t²] = S² + V̄ exactly (t_i = x_i + e_i with independent, zero-mean e_i), and V̂ (the
mechanism's plug-in of V̄: :func:`deniable.shared.mechanisms.estimate.pure_estimate`'s variance over n_j,
or a mean mechanism's) is unbiased or an upper bound, so

    Var̂(t̄) = [(1 − f)·s_t² + f·V̂]/n_j

is unbiased (an upper bound where V̂ is one: Duchi's plug-in, the lattice and grid terms). At f = 1 (the
per-question split: every respondent answered) it is the mechanism's own V̂/n_j. For a pure protocol
s_t² comes from the support count alone: t_i = (b_i − q*)/(p* − q*) with b_i = [v ∈ Support(y_i)], so
s_t² = n_j·λ̂(1 − λ̂)/((n_j − 1)(p* − q*)²), λ̂ = S_v/n_j (Warner's unbiased plug-in, 1965); for a mean
mechanism from Σt and Σt², which its tally (a histogram of report values) gives exactly. The count of
holders N̂_v = N·t̄ = (N/n_j)·ĉ_v has N² times that variance: the *extra* variance of the rescaling is
N²(1 − f)·S²/n_j, served beside the total as ``sampling_variance``. Intervals under the sampling split
are normal, estimate ± z·SE (coverage measured in ``tests/test_survey_estimate.py``: 0.93-0.97 at every
setting tested); under the per-question split they are the mechanism's (the score interval of a count).

Everything is computed from the tallies in O(k) per question (O(lattice) for a number), whatever n is.
numpy is used for the category arrays: estimating is an aggregator and analyst task, never a device one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.estimate import (
    INTERVAL_METHODS,
    Estimate,
    Tally,
    normal_quantile,
)
from deniable.shared.mechanisms.mean import MeanMechanism, NumberRange

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "KINDS",
    "SPLITS",
    "MeanResult",
    "ProportionResult",
    "estimate_mean",
    "estimate_pure",
    "estimate_question",
    "sampling_variance",
]

#: The two ways a survey spends its ε, as the descriptor names them.
SPLITS: tuple[str, ...] = ("per_question", "sampling")
#: The three kinds of question.
KINDS: tuple[str, ...] = ("choice", "multi", "number")

#: What a choice or multi estimate says next to its numbers (the survey form of ``UNBIASED_NOTE``).
SURVEY_UNBIASED_NOTE = (
    "counts and proportions are unbiased (their average over repeated collections is the truth), so at small n "
    "they may fall below 0 or above n (proportions outside [0, 1])"
)

#: The interval served under the sampling split.
SAMPLING_INTERVAL = "normal"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise InvalidParameter(f"'split' must be one of {', '.join(SPLITS)}, got {split!r}")


def _check_sizes(answered: int, population: int) -> None:
    for name, value in (("answered", answered), ("population", population)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidParameter(f"{name!r} must be a non-negative integer, got {value!r}")
    if answered > population:
        raise InvalidParameter(f"a question answered {answered} times has more answers than its {population} "
                               "respondents")


def sampling_variance(sample_var: Any, randomizer_var: Any, answered: int, population: int) -> Any:
    """Var̂(t̄) = [(1 − f)·s_t² + f·V̂]/n_j with f = n_j/N (the module docstring): unbiased for the variance
    of a mean over a simple random sample of n_j of N respondents, each report an unbiased estimate with
    mean randomizer variance V̂ and s_t² the reports' sample variance. Vectorized (numpy or floats)."""
    f = answered / population
    return ((1 - f) * sample_var + f * randomizer_var) / answered


@dataclass(frozen=True)
class ProportionResult:
    """A ``choice`` or ``multi`` question's estimate: per label the count of holders among the population,
    its proportion, SE and interval.

    ``counts`` are scaled to ``population`` (N̂_v = N·ĉ_v/n_j under sampling; ĉ_v under per-question, where
    the population is the answerers), ``variance`` their variance, ``sampling_variance`` the part of it
    that sampling who answers adds (0 under per-question); proportions divide by the population.
    ``estimate`` is the mechanism's own estimate over the n_j answers (per-question intervals come from it).
    """

    question: str
    kind: str
    split: str
    labels: tuple[str, ...]
    answered: int
    population: int
    counts: FloatArray
    variance: FloatArray
    sampling_variance: FloatArray
    estimate: Estimate = field(repr=False)

    @property
    def stderr(self) -> FloatArray:
        import numpy as np

        result: FloatArray = np.sqrt(np.maximum(self.variance, 0.0))
        return result

    @property
    def interval_method(self) -> str:
        return self.estimate.interval_method if self.split == "per_question" else SAMPLING_INTERVAL

    def ci(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """The count's interval: the mechanism's (score) interval per question, normal under sampling."""
        if self.split == "per_question":
            return self.estimate.ci(level)
        half = normal_quantile(level) * self.stderr
        return self.counts - half, self.counts + half

    @property
    def proportions(self) -> FloatArray:
        import numpy as np

        if self.answered == 0:
            return np.full(len(self.labels), np.nan)
        result: FloatArray = self.counts / self.population
        return result

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        """JSON-ready rows (``categories`` for a choice, ``options`` for a multi), each with count, stderr,
        ci, proportion, proportion_stderr and proportion_ci (``None`` where undefined, never NaN)."""
        empty = self.answered == 0
        low, high = self.ci(level) if not empty else (self.counts, self.counts)
        stderr = self.stderr
        rows = []
        label_key = "option" if self.kind == "multi" else "category"
        for v, label in enumerate(self.labels):
            row: dict[str, Any] = {
                label_key: label,
                "count": _num(self.counts[v], empty),
                "stderr": _num(stderr[v], empty),
                "ci": [_num(low[v], empty), _num(high[v], empty)],
                "proportion": _num(self.counts[v] / self.population if self.population else math.nan, empty),
                "proportion_stderr": _num(stderr[v] / self.population if self.population else math.nan, empty),
                "proportion_ci": [
                    _num(low[v] / self.population if self.population else math.nan, empty),
                    _num(high[v] / self.population if self.population else math.nan, empty),
                ],
            }
            if self.split == "sampling":
                row["sampling_stderr"] = _num(math.sqrt(max(float(self.sampling_variance[v]), 0.0)), empty)
            rows.append(row)
        return {
            "question": self.question,
            "kind": self.kind,
            "split": self.split,
            "mechanism": self.estimate.mechanism,
            "epsilon": self.estimate.epsilon,
            "n": self.population,
            "answered": self.answered,
            "level": level,
            "interval": {"method": self.interval_method, "description": _INTERVALS[self.interval_method]},
            "options" if self.kind == "multi" else "categories": rows,
            "unbiased": {
                "outside_range": any(not 0 <= float(c) <= self.population for c in self.counts) and not empty,
                "note": SURVEY_UNBIASED_NOTE,
            },
        }


@dataclass(frozen=True)
class MeanResult:
    """A ``number`` question's estimate: the mean of the population's values, its variance (randomizer
    plus, under sampling, ``sampling_variance``), SE and normal interval, and the number of answers."""

    question: str
    split: str
    mechanism: str
    epsilon: float
    answered: int
    population: int
    mean: float
    variance: float
    sampling_variance: float
    range: NumberRange

    @property
    def stderr(self) -> float:
        return math.sqrt(max(self.variance, 0.0))

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        half = normal_quantile(level) * self.stderr
        return self.mean - half, self.mean + half

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        empty = self.answered == 0
        low, high = self.ci(level)
        body: dict[str, Any] = {
            "question": self.question,
            "kind": "number",
            "split": self.split,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "n": self.population,
            "answered": self.answered,
            "level": level,
            "interval": {"method": "normal", "description": _INTERVALS["normal-mean"]},
            "mean": {
                "mean": _num(self.mean, empty),
                "stderr": _num(self.stderr, empty),
                "ci": [_num(low, empty), _num(high, empty)],
                "range": [self.range.lo, self.range.hi],
            },
            "unbiased": {
                "outside_range": (not empty) and not self.range.lo <= self.mean <= self.range.hi,
                "note": "the mean is unbiased: at small n the mean of randomized answers may fall outside the range",
            },
        }
        if self.split == "sampling":
            body["mean"]["sampling_stderr"] = _num(math.sqrt(max(self.sampling_variance, 0.0)), empty)
        return body


_INTERVALS = {
    **INTERVAL_METHODS,
    "normal-mean": "mean ± z·stderr",
}


def _num(x: Any, empty: bool = False) -> float | None:
    if empty:
        return None
    value = float(x)
    return None if not math.isfinite(value) else value


def estimate_pure(
    question: str,
    kind: str,
    mechanism: Any,
    tally: Tally,
    *,
    labels: Sequence[str],
    split: str,
    population: int | None = None,
) -> ProportionResult:
    """A ``choice`` or ``multi`` question's estimate from its tally (n_j answers, support counts S_v).

    ``mechanism`` is a pure protocol (``p_star``, ``q_star``, ``gap``, ``estimate_tally``: every
    single-choice and set mechanism). ``population`` is N, the respondents the estimate speaks for (the
    survey's reports under sampling; default, and under per-question, the answers n_j).
    """
    import numpy as np

    _check_split(split)
    if kind not in ("choice", "multi"):
        raise InvalidParameter(f"estimate_pure takes choice and multi questions, got kind {kind!r}")
    n_j = tally.n
    big_n = n_j if population is None or split == "per_question" else population
    _check_sizes(n_j, big_n)
    if len(labels) != tally.k:
        raise InvalidParameter(f"question {question!r} has {len(labels)} labels and a tally over {tally.k}")
    estimate = mechanism.estimate_tally(tally)
    if not isinstance(estimate, Estimate):  # pragma: no cover - every pure protocol returns one
        raise InvalidParameter(f"mechanism {mechanism!r} is not a pure protocol")
    zeros = np.zeros(tally.k)
    if split == "per_question" or n_j == 0:
        return ProportionResult(question, kind, split, tuple(labels), n_j, big_n, estimate.counts,
                                estimate.variance, zeros, estimate)
    gap, q = float(mechanism.gap), float(mechanism.q_star)
    support = np.asarray(tally.support, dtype=np.float64)
    randomizer = estimate.variance / n_j  # V̂: the mean per-report variance of t_i, in proportion units
    if n_j > 1:
        lam = support / n_j
        sample_var = n_j * lam * (1 - lam) / ((n_j - 1) * gap * gap)
    else:
        sample_var = randomizer
    prop_var = sampling_variance(sample_var, randomizer, n_j, big_n)
    extra = np.maximum(prop_var - randomizer / n_j, 0.0)
    proportions = (support - n_j * q) / gap / n_j
    return ProportionResult(question, kind, split, tuple(labels), n_j, big_n, proportions * big_n,
                            prop_var * big_n**2, extra * big_n**2, estimate)


def estimate_mean(
    question: str,
    mechanism: MeanMechanism,
    tally: Tally,
    number_range: NumberRange,
    *,
    split: str,
    population: int | None = None,
) -> MeanResult:
    """A ``number`` question's estimate from its tally (the histogram of report values of n_j answers)."""
    _check_split(split)
    n_j = tally.n
    big_n = n_j if population is None or split == "per_question" else population
    _check_sizes(n_j, big_n)
    own = mechanism.estimate(tally, number_range)
    if split == "per_question" or n_j == 0:
        return MeanResult(question, split, mechanism.name, mechanism.epsilon, n_j, big_n, own.mean, own.variance,
                          0.0, number_range)
    randomizer = own.variance * n_j  # V̂ in value units
    if n_j > 1:
        total, squares = mechanism.moments(tally)
        scale2 = number_range.scale**2
        sample_var = float(squares - total * total / n_j) / (n_j - 1) * scale2
    else:
        sample_var = randomizer
    variance = float(sampling_variance(sample_var, randomizer, n_j, big_n))
    return MeanResult(question, split, mechanism.name, mechanism.epsilon, n_j, big_n, own.mean, variance,
                      max(variance - own.variance, 0.0), number_range)


def estimate_question(
    question: str,
    kind: str,
    mechanism: Any,
    tally: Tally,
    *,
    split: str,
    population: int | None = None,
    labels: Sequence[str] = (),
    number_range: NumberRange | None = None,
) -> ProportionResult | MeanResult:
    """One question's estimate, whatever its kind (``labels`` for choice and multi, ``number_range`` for a
    number)."""
    if kind == "number":
        if number_range is None or not isinstance(mechanism, MeanMechanism):
            raise InvalidParameter(f"number question {question!r} needs a mean mechanism and its range")
        return estimate_mean(question, mechanism, tally, number_range, split=split, population=population)
    return estimate_pure(question, kind, mechanism, tally, labels=labels, split=split, population=population)
