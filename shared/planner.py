"""The survey planner: the predicted standard error of every estimate of a draft survey under each ε split.

A survey of Q questions spends its ε either

* **split** (sequential composition): every respondent answers every question, question q at ε·w_q
  (the shares w_q sum to 1; equal by default), so each estimate uses all n respondents at a fraction of ε;
* **sample**: every respondent answers one question drawn uniformly, at the whole ε, so each estimate uses
  about n/Q respondents (Wang et al., ICDE 2019; Nguyen et al., 2016), estimated among those who answered
  it (a proportion or mean of the answerers, scaled to the population). Over the random assignment,
  ``Var ≈ [Q·v̄ + (Q−1)·σ²]/n``: v̄ the randomizer's mean per-report variance on a sample of n/Q, σ² the
  population variance of the answer (π(1−π) for a proportion π), the price of sampling who answers.

Per question kind (the mechanism is the one ``auto`` picks at the question's ε, or the one named):

* ``choice`` (k categories): SE of a category's proportion, at a share 1/k of respondents holding it;
* ``multi`` (k options, at most m): SE of an option's proportion, at a share m/(2k) selecting it;
* ``number`` ([lo, hi], a grid of ``steps``): SE of the mean in the range's units, at the worst case of
  the mechanism's variance (and mean x² = 1/3, a value uniform on the range, for the sampling term).

The plan recommends the split with the lower mean *inflation*: each question's predicted variance divided
by what it would be if that question alone had the whole ε and all n respondents (unit-free, so a mean in
years and a proportion can be weighed together). Predictions, not guarantees: the shares above are
assumptions, printed with the plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms.choose import choose_mechanism, mechanism_from_name
from deniable.shared.mechanisms.mean import (
    DEFAULT_LATTICE,
    NumberRange,
    choose_mean_mechanism,
    mean_mechanism_from_name,
)
from deniable.shared.mechanisms.sets import choose_set_mechanism, set_mechanism_from_name

__all__ = ["PLAN_SPLITS", "DraftQuestion", "SurveyPlan", "SurveyPlanRow", "parse_question", "plan_survey"]

#: The planner's names of the two ways a survey spends its ε: ``split`` (every question at its share: the
#: descriptor's ``per_question``) and ``sample`` (one drawn question at the whole ε: ``sampling``).
PLAN_SPLITS: tuple[str, ...] = ("split", "sample")


@dataclass(frozen=True, slots=True)
class DraftQuestion:
    """A question of a draft survey: ``kind`` choice (k), multi (k, m) or number (lo, hi, steps)."""

    id: str
    kind: str
    k: int = 0
    m: int = 0
    lo: float = 0.0
    hi: float = 0.0
    steps: int = 0
    mechanism: str = "auto"

    def __post_init__(self) -> None:
        if self.kind == "choice":
            if self.k < 2:
                raise InvalidParameter(f"question {self.id!r}: a choice question needs k ≥ 2 categories")
        elif self.kind == "multi":
            if not 1 <= self.m <= self.k:
                raise InvalidParameter(
                    f"question {self.id!r}: a multi question needs 1 ≤ m ≤ k, got k={self.k}, m={self.m}"
                )
        elif self.kind == "number":
            NumberRange(self.lo, self.hi, self.steps)
        else:
            raise InvalidParameter(f"question {self.id!r}: kind must be choice, multi or number, got {self.kind!r}")

    @property
    def assumption(self) -> str:
        if self.kind == "choice":
            return f"a share 1/{self.k} holding each category"
        if self.kind == "multi":
            return f"a share {self.m}/(2·{self.k}) selecting each option"
        return "the mechanism's worst case; values uniform on the range for the sampling term"

    def estimate_label(self) -> str:
        return "mean" if self.kind == "number" else "proportion"

    def unit_variance(self, epsilon: float) -> tuple[str, float, float]:
        """(mechanism, v, σ²): v is the per-respondent variance of this question's estimate at ε (the
        randomizer's), σ² the population variance of the answer that the sampling split adds per extra
        question (π(1−π), or (hi−lo)²/12 for values uniform on the range), in the estimate's units."""
        if self.kind == "number":
            mean = (choose_mean_mechanism(epsilon, self.steps, DEFAULT_LATTICE) if self.mechanism == "auto"
                    else mean_mechanism_from_name(self.mechanism, epsilon=epsilon, steps=self.steps))
            scale2 = ((self.hi - self.lo) / 2) ** 2
            return mean.name, mean.worst_variance * scale2, scale2 / 3  # (hi − lo)²/12
        if self.kind == "choice":
            mechanism: Any = (choose_mechanism(self.k, epsilon) if self.mechanism == "auto"
                              else mechanism_from_name(self.mechanism, epsilon=epsilon, k=self.k))
            share = 1 / self.k
        else:
            mechanism = (choose_set_mechanism(epsilon, self.k, self.m) if self.mechanism == "auto"
                         else set_mechanism_from_name(self.mechanism, epsilon=epsilon, k=self.k, m=self.m))
            share = self.m / (2 * self.k)
        p, q, gap = mechanism.p_star, mechanism.q_star, mechanism.gap
        per_count = (share * p * (1 - p) + (1 - share) * q * (1 - q)) / gap**2
        return mechanism.name, per_count, share * (1 - share)


@dataclass(frozen=True, slots=True)
class SurveyPlanRow:
    """One question under one split: the mechanism, the question's ε, respondents and predicted SE."""

    question: str
    kind: str
    split: str
    mechanism: str
    epsilon: float
    respondents: float
    stderr: float
    inflation: float


@dataclass(frozen=True, slots=True)
class SurveyPlan:
    """Every question under both splits, and the recommended split with its reason."""

    epsilon: float
    n: int
    rows: tuple[SurveyPlanRow, ...]
    recommended: str
    reason: str
    assumptions: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "n": self.n,
            "recommended": self.recommended,
            "reason": self.reason,
            "assumptions": self.assumptions,
            "rows": [
                {"question": r.question, "kind": r.kind, "split": r.split, "mechanism": r.mechanism,
                 "epsilon": r.epsilon, "respondents": r.respondents, "stderr": r.stderr, "inflation": r.inflation}
                for r in self.rows
            ],
        }


def plan_survey(
    questions: Sequence[DraftQuestion], *, epsilon: float, n: int, shares: Sequence[float] | None = None
) -> SurveyPlan:
    """Predicted SE of every question's estimate under both splits (see the module docstring)."""
    if not questions:
        raise InvalidParameter("a survey needs at least one question")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise InvalidParameter(f"question ids must be unique, got {ids}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidParameter(f"'n' (expected respondents) must be a positive integer, got {n!r}")
    count = len(questions)
    weights = [1 / count] * count if shares is None else list(shares)
    if len(weights) != count or any(w <= 0 for w in weights) or not math.isclose(sum(weights), 1.0):
        raise InvalidParameter(f"'shares' must be {count} positive numbers summing to 1, got {shares!r}")
    rows: list[SurveyPlanRow] = []
    inflation = {split: 0.0 for split in PLAN_SPLITS}
    for question, weight in zip(questions, weights, strict=True):
        _, ideal, _ = question.unit_variance(epsilon)
        name, v_split, _ = question.unit_variance(epsilon * weight)
        name_full, v_full, extra = question.unit_variance(epsilon)
        variances = {"split": v_split / n, "sample": (count * v_full + (count - 1) * extra) / n}
        for split, mechanism, eps, respondents in (("split", name, epsilon * weight, float(n)),
                                                    ("sample", name_full, epsilon, n / count)):
            ratio = variances[split] / (ideal / n)
            inflation[split] += ratio / count
            rows.append(SurveyPlanRow(question.id, question.kind, split, mechanism, eps, respondents,
                                math.sqrt(variances[split]), ratio))
    best = min(PLAN_SPLITS, key=lambda s: inflation[s])
    other = next(s for s in PLAN_SPLITS if s != best)
    reason = (f"mean variance inflation {inflation[best]:.2f}× under '{best}' against {inflation[other]:.2f}× under "
              f"'{other}' (1× = each question alone with the whole ε and all {n} respondents)")
    return SurveyPlan(epsilon, n, tuple(rows), best, reason, {q.id: q.assumption for q in questions})


def parse_question(text: str) -> DraftQuestion:
    """``KIND:ID:key=value,...``: ``choice:smoke:k=2``, ``multi:apps:k=8,m=3``,
    ``number:age:lo=18,hi=99,steps=81`` (``mechanism=NAME`` optional in each)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[1]:
        raise InvalidParameter(
            f"--question must look like KIND:ID:key=value,... (e.g. choice:smoke:k=2, multi:apps:k=8,m=3, "
            f"number:age:lo=18,hi=99,steps=81), got {text!r}"
        )
    kind, qid, body = parts
    fields: dict[str, Any] = {}
    for item in filter(None, body.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidParameter(f"--question {text!r}: {item!r} is not key=value")
        if key in ("k", "m", "steps"):
            fields[key] = _int(value, key, text)
        elif key in ("lo", "hi"):
            fields[key] = _float(value, key, text)
        elif key == "mechanism":
            fields[key] = value
        else:
            raise InvalidParameter(f"--question {text!r}: unknown key {key!r} (k, m, lo, hi, steps, mechanism)")
    return DraftQuestion(id=qid, kind=kind, **fields)


def _int(value: str, key: str, text: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidParameter(f"--question {text!r}: {key} must be an integer, got {value!r}") from None


def _float(value: str, key: str, text: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidParameter(f"--question {text!r}: {key} must be a number, got {value!r}") from None
