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
N²(1 − f)·S²/n_j, served beside the total as ``sampling_variance``.

**Skipped optional questions** (sampling split). Of the d_j respondents drawn for question j, a_j answer
it and s_j = d_j − a_j skip it; skipping is a fixed trait of a respondent (not randomized, possibly
related to the answer). The drawn set is still a simple random sample of d_j of the N respondents, so:

* the *count* of holders among the respondents who answer j, H_v = Σ_i y_i with y_i = x_i·[i answers],
  is estimated by the Horvitz–Thompson total N̂_v = (N/d_j)·Σ_drawn t_i, where a skipper's t_i = 0 exactly
  (it carries no noise) and Σ_drawn t_i = ĉ_v, the mechanism's unbiased count over the a_j answers. It is
  unbiased, and the formula above applies over the d_j drawn with f = d_j/N: Var̂ = N²·[(1 − f)·s_t² +
  f·V̂]/d_j, s_t² the sample variance of the d_j values t_i (zeros included: for a pure protocol
  Σt² = (S_v(1 − 2q*) + a_j·q*²)/(p* − q*)²) and V̂ = Var̂(ĉ_v)/d_j; unbiased (E[s_t²] = S_y² + V̄_y);
* the *proportion* (and a number's *mean*) among those who answer is the answerers' t̄ = ĉ_v/a_j: given
  a_j the answerers are a simple random sample of a_j of the M_j who answer, so it is unbiased, with
  Var(t̄ | a_j) = (1 − a_j/M_j)·S²/a_j + V̄/a_j. M_j is unknown; Var̂ = [(1 − f)·s_t² + f·V̂]/a_j over the
  answerers (V̂ = Var̂(ĉ_v)/a_j) with f = d_j/N, whose expectation is a_j/M_j's (E a_j = d_j·M_j/N), so the
  variance estimate is unbiased up to the Jensen gap of E[1/a_j] (≤ 0, of relative order 1/M_j);
* the served ``n`` is M̂_j = N·a_j/d_j rounded, the respondents the question speaks for.

Without skips (d_j = a_j) the two coincide with the formulas above. Intervals under the sampling split
are normal, estimate ± z·SE; coverage, bias and variance are measured in ``tests/unit/test_survey_estimate.py``
(2,000 seeded runs per setting, with and without skips: bias within 4 SE, variance within 10%, coverage in
[0.93, 0.97]); under the per-question split they are the mechanism's (the score interval of a count).

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
from deniable.shared.survey import SPLIT_MODES

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "MeanResult",
    "ProportionResult",
    "estimate_mean",
    "estimate_pure",
    "estimate_question",
    "sampling_variance",
]

#: What a choice or multi estimate says next to its numbers (the survey form of ``UNBIASED_NOTE``).
SURVEY_UNBIASED_NOTE = (
    "counts and proportions are unbiased (their average over repeated collections is the truth), so at small n "
    "they may fall below 0 or above n (proportions outside [0, 1])"
)

#: The interval served under the sampling split.
SAMPLING_INTERVAL = "normal"


def _check_split(split: str) -> None:
    if split not in SPLIT_MODES:
        raise InvalidParameter(f"'split' must be one of {', '.join(SPLIT_MODES)}, got {split!r}")


def _check_sizes(answered: int, skipped: int, population: int) -> None:
    for name, value in (("answered", answered), ("skipped", skipped), ("population", population)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidParameter(f"{name!r} must be a non-negative integer, got {value!r}")
    if answered + skipped > population:
        raise InvalidParameter(f"a question answered {answered} times and skipped {skipped} times has more "
                               f"answers than its {population} respondents")


def sampling_variance(
    sample_var: Any, randomizer_var: Any, answered: int, population: int, *, drawn: int | None = None, over: int = 1
) -> Any:
    """Var̂(t̄) = [(1 − f)·s_t² + f·V̂]/n_j with f = d_j/N (the module docstring): unbiased for the variance
    of the mean t̄ of n_j reports (``answered``) of a simple random sample of d_j (``drawn``, default n_j:
    nobody skipped) of N respondents (``population``), each report an unbiased estimate of its answer, s_t²
    (``sample_var``) the reports' sample variance and V̂ their mean randomizer variance.

    ``randomizer_var`` is V̂·``over``: V̂ itself (``over`` 1), or the randomizer variance of a sum of ``over``
    reports, weighted by f before it is divided (the order of the operations is part of every served number).
    Vectorized (numpy or floats)."""
    f = (answered if drawn is None else drawn) / population
    return ((1 - f) * sample_var + f * randomizer_var / over) / answered


@dataclass(frozen=True, kw_only=True)
class _Sizes:
    """The sizes of one question's estimate: n_j answers (``answered``); under sampling (``sampled``) the N
    respondents (``population``) of whom d_j (``drawn``) were drawn for it, n_j answering and d_j − n_j
    skipping; otherwise N = d_j = n_j."""

    answered: int
    population: int
    drawn: int
    sampled: bool

    @classmethod
    def of(cls, answered: int, split: str, population: int | None, skipped: int) -> _Sizes:
        """Checked sizes: ``population`` and ``skipped`` count under ``sampling`` only (``population`` None:
        the answers n_j)."""
        sampled = split == "sampling" and population is not None
        big_n = population if sampled and population is not None else answered
        _check_sizes(answered, skipped if sampled else 0, big_n)
        drawn = answered + skipped if sampled else answered
        return cls(answered=answered, population=big_n, drawn=drawn, sampled=sampled)

    @property
    def answering(self) -> int:
        """M̂_j = N·n_j/d_j rounded (at least n_j): the respondents the question speaks for."""
        return max(self.answered, round(self.population * self.answered / self.drawn))


@dataclass(frozen=True)
class ProportionResult:
    """A ``choice`` or ``multi`` question's estimate: per label the count of holders among the population,
    its proportion, SE and interval.

    ``counts`` are the holders among the respondents who answer the question (ĉ_v under per-question,
    where the population is the answerers; the Horvitz–Thompson (N/d_j)·ĉ_v under sampling), ``variance``
    their variance, ``sampling_variance`` the part of it that sampling who answers adds (0 under
    per-question); ``proportions`` the answerers' shares ĉ_v/n_j with ``proportion_variance``;
    ``population`` the respondents the question speaks for (M̂_j under sampling). ``estimate`` is the
    mechanism's own estimate over the n_j answers (per-question intervals come from it).
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
    proportions: FloatArray
    proportion_variance: FloatArray
    estimate: Estimate = field(repr=False)

    @property
    def stderr(self) -> FloatArray:
        import numpy as np

        result: FloatArray = np.sqrt(np.maximum(self.variance, 0.0))
        return result

    @property
    def proportion_stderr(self) -> FloatArray:
        import numpy as np

        result: FloatArray = np.sqrt(np.maximum(self.proportion_variance, 0.0))
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

    def proportion_ci(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """The proportion's interval: the count's divided by the answers per question, normal under
        sampling."""
        if self.split == "per_question":
            return self.estimate.proportion_ci(level)
        half = normal_quantile(level) * self.proportion_stderr
        return self.proportions - half, self.proportions + half

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        """JSON-ready rows (``categories`` for a choice, ``options`` for a multi), each with count, stderr,
        ci, proportion, proportion_stderr and proportion_ci (``None`` where undefined, never NaN)."""
        empty = self.answered == 0
        low, high = self.ci(level) if not empty else (self.counts, self.counts)
        if empty:
            plow, phigh = self.counts, self.counts
        elif self.split == "per_question":  # the count's interval over the answers (computed once, above)
            plow, phigh = low / self.answered, high / self.answered
        else:
            plow, phigh = self.proportion_ci(level)
        stderr, proportion_stderr = self.stderr, self.proportion_stderr
        rows = []
        label_key = "option" if self.kind == "multi" else "category"
        for v, label in enumerate(self.labels):
            row: dict[str, Any] = {
                label_key: label,
                "count": _num(self.counts[v], empty),
                "stderr": _num(stderr[v], empty),
                "ci": [_num(low[v], empty), _num(high[v], empty)],
                "proportion": _num(self.proportions[v], empty),
                "proportion_stderr": _num(proportion_stderr[v], empty),
                "proportion_ci": [_num(plow[v], empty), _num(phigh[v], empty)],
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
                "outside_range": any(not 0 <= float(x) <= 1 for x in self.proportions) and not empty,
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
    skipped: int = 0,
) -> ProportionResult:
    """A ``choice`` or ``multi`` question's estimate from its tally (n_j answers, support counts S_v).

    ``mechanism`` is a pure protocol (``p_star``, ``q_star``, ``gap``, ``estimate_tally``: every
    single-choice and set mechanism). Under ``sampling``, ``population`` is N, the respondents of the row
    (default: the answers n_j), and ``skipped`` how many of those drawn for this question skipped it (the
    module docstring: Horvitz–Thompson counts, the answerers' proportions); under ``per_question`` the
    population is the answers and ``skipped`` changes nothing.
    """
    import numpy as np

    _check_split(split)
    if kind not in ("choice", "multi"):
        raise InvalidParameter(f"estimate_pure takes choice and multi questions, got kind {kind!r}")
    sizes = _Sizes.of(tally.n, split, population, skipped)
    n_j, big_n, drawn = sizes.answered, sizes.population, sizes.drawn
    if len(labels) != tally.k:
        raise InvalidParameter(f"question {question!r} has {len(labels)} labels and a tally over {tally.k}")
    estimate = mechanism.estimate_tally(tally)
    if not isinstance(estimate, Estimate):  # pragma: no cover - every pure protocol returns one
        raise InvalidParameter(f"mechanism {mechanism!r} is not a pure protocol")
    zeros = np.zeros(tally.k)
    if not sizes.sampled or n_j == 0:
        shares = estimate.proportions if n_j else np.full(tally.k, np.nan)
        share_var = estimate.variance / n_j**2 if n_j else np.full(tally.k, np.nan)
        return ProportionResult(question, kind, split, tuple(labels), n_j, n_j, estimate.counts,
                                estimate.variance, zeros, shares, share_var, estimate)
    gap, q = float(mechanism.gap), float(mechanism.q_star)
    support = np.asarray(tally.support, dtype=np.float64)
    # the proportion among the answerers: their t̄ = ĉ_v/a_j (an SRS of the M_j who answer, given a_j), with
    # f = d_j/N (the drawn are a simple random sample of the N)
    if n_j > 1:
        lam = support / n_j
        answer_var = n_j * lam * (1 - lam) / ((n_j - 1) * gap * gap)
    else:
        answer_var = estimate.variance / n_j
    share_var = sampling_variance(answer_var, estimate.variance, n_j, big_n, drawn=drawn, over=n_j)
    # the count of holders: Horvitz–Thompson over the d_j drawn, a skipper's t_i = 0 exactly
    if drawn > 1:
        squares = (support * (1 - 2 * q) + n_j * q * q) / (gap * gap)
        drawn_var = (squares - estimate.counts**2 / drawn) / (drawn - 1)
    else:
        drawn_var = estimate.variance / drawn
    count_var = big_n**2 * sampling_variance(drawn_var, estimate.variance / drawn, drawn, big_n)
    randomizer_only = (big_n / drawn) ** 2 * estimate.variance
    return ProportionResult(question, kind, split, tuple(labels), n_j, sizes.answering, estimate.counts * big_n / drawn,
                            count_var, np.maximum(count_var - randomizer_only, 0.0), estimate.counts / n_j,
                            share_var, estimate)


def estimate_mean(
    question: str,
    mechanism: MeanMechanism,
    tally: Tally,
    number_range: NumberRange,
    *,
    split: str,
    population: int | None = None,
    skipped: int = 0,
) -> MeanResult:
    """A ``number`` question's estimate from its tally (the histogram of report values of n_j answers):
    the answerers' mean; under ``sampling`` with f = d_j/N (``population`` N, ``skipped`` s_j: the module
    docstring)."""
    _check_split(split)
    sizes = _Sizes.of(tally.n, split, population, skipped)
    n_j = sizes.answered
    own = mechanism.estimate(tally, number_range)
    if not sizes.sampled or n_j == 0:
        return MeanResult(question, split, mechanism.name, mechanism.epsilon, n_j, n_j, own.mean, own.variance,
                          0.0, number_range)
    randomizer = own.variance * n_j  # V̂ in value units
    if n_j > 1:
        total, squares = mechanism.moments(tally)
        scale2 = number_range.scale**2
        sample_var = float(squares - total * total / n_j) / (n_j - 1) * scale2
    else:
        sample_var = randomizer
    variance = sampling_variance(sample_var, randomizer, n_j, sizes.population, drawn=sizes.drawn)
    return MeanResult(question, split, mechanism.name, mechanism.epsilon, n_j, sizes.answering, own.mean, variance,
                      max(variance - own.variance, 0.0), number_range)


def estimate_question(
    question: str,
    kind: str,
    mechanism: Any,
    tally: Tally,
    *,
    split: str,
    population: int | None = None,
    skipped: int = 0,
    labels: Sequence[str] = (),
    number_range: NumberRange | None = None,
) -> ProportionResult | MeanResult:
    """One question's estimate, whatever its kind (``labels`` for choice and multi, ``number_range`` for a
    number; ``population`` and ``skipped`` as in :func:`estimate_pure`)."""
    if kind == "number":
        if number_range is None or not isinstance(mechanism, MeanMechanism):
            raise InvalidParameter(f"number question {question!r} needs a mean mechanism and its range")
        return estimate_mean(question, mechanism, tally, number_range, split=split, population=population,
                             skipped=skipped)
    return estimate_pure(question, kind, mechanism, tally, labels=labels, split=split, population=population,
                         skipped=skipped)
