"""A survey's ε split and its payload codec (descriptor and envelope format 3).

**The split** (``"split"`` in the descriptor). A survey of Q questions is ε-LDP as a whole in one of two ways:

* ``per_question`` (sequential composition): every respondent answers every question; question q runs at
  ε_q = ⌊ε·share_q/Σ shares⌋, computed exactly from the rational value of the float ε and rounded *down* to
  a double (:func:`split_epsilons`), so Σ ε_q ≤ ε holds exactly, not up to rounding; each mechanism is in
  turn at most ε_q-LDP (``exp_lower``), so the whole payload is ε-LDP.
* ``sampling``: every respondent answers one question drawn uniformly at the whole ε (Wang et al., ICDE
  2019; Nguyen et al., 2016). The draw is independent of every answer (the device draws it from its secret
  and the campaign alone, before it looks at the answers), so the payload is ε-LDP: which question was
  drawn carries no information, and the one report is ε-LDP. Estimates are over the answerers of each
  question (about n/Q of them) and rescale to the population by n/n_q.

``auto`` (at creation) picks the split with the lower mean variance inflation predicted by the planner
(:func:`deniable.shared.planner.plan_survey`); the descriptor keeps what was requested, what was chosen and
the figures that decided (:class:`Split`).

**The payload** of a local survey is ``{"answers": {qid: report | null, ...}, "groups": {...}}`` (plus
``round`` and ``token`` as in format 2): every question id under ``per_question``, exactly one (the drawn
question) under ``sampling``; ``null`` is a skipped optional question. A central survey's payload is
``{"values": {qid: value | null, ...}, "groups": {...}}`` with every question. The padding makes every
envelope of a campaign one size: the widest payload has, per question, the longer of its widest report and
``null`` (when optional), every question under ``per_question`` and the widest single one under
``sampling`` (:func:`widest_answers`).

**Skipping is not randomized**: the aggregator learns that this device skipped q (as it learns a group
value), while a network observer learns nothing (same size), and the device's draws do not change (a
skipped question randomizes :attr:`~deniable.shared.questions.Question.dummy` and discards the report).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from deniable.shared.canonical_json import canonical_json
from deniable.shared.errors import InvalidAnswer, InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.fields import check_text
from deniable.shared.limits import MAX_QUESTIONS, QUESTION_SHARE
from deniable.shared.messages import show
from deniable.shared.questions import Question
from deniable.shared.sampling import RandBelow

__all__ = [
    "SPLIT_MODES",
    "SPLIT_REQUESTS",
    "Split",
    "check_answers",
    "decode_answers",
    "encode_answers",
    "randomize_answers",
    "split_epsilons",
    "widest_answers",
]

#: How a survey spends its ε (the descriptor's ``split.mode``).
SPLIT_MODES: tuple[str, ...] = ("per_question", "sampling")
#: What may be asked for at creation (``split.requested``).
SPLIT_REQUESTS: tuple[str, ...] = ("auto", *SPLIT_MODES)
#: The planner's names of the two splits.
PLANNER_NAMES = {"per_question": "split", "sampling": "sample"}
MAX_REASON_CHARS = 500


def split_epsilons(epsilon: float, shares: Sequence[int]) -> tuple[float, ...]:
    """ε_q = the largest double ≤ Fraction(ε)·share_q/Σ shares, for each share: Σ Fraction(ε_q) ≤ Fraction(ε)."""
    total = sum(shares)
    numerator, denominator = Fraction(epsilon).as_integer_ratio()
    out = []
    for share in shares:  # target = numerator·share / (denominator·total), in integers (no Fraction per share)
        top, bottom = numerator * share, denominator * total
        value = top / bottom  # int / int is correctly rounded, as float(Fraction) is
        p, q = value.as_integer_ratio()
        if p * bottom > top * q:  # Fraction(value) > target
            value = math.nextafter(value, 0.0)
        out.append(value)
    return tuple(out)


@dataclass(frozen=True)
class Split:
    """``mode`` (``per_question`` or ``sampling``), what was ``requested`` (the mode, or ``auto``) and the
    ``reason`` (the planner's figures when ``auto`` chose)."""

    mode: str
    requested: str
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str) or self.mode not in SPLIT_MODES:
            modes = ", ".join(map(repr, SPLIT_MODES))
            raise InvalidConfig(f"'split.mode' must be one of {modes}, got {show(self.mode)}")
        if not isinstance(self.requested, str) or self.requested not in SPLIT_REQUESTS:
            raise InvalidConfig(
                f"'split.requested' must be one of {', '.join(map(repr, SPLIT_REQUESTS))}, got {show(self.requested)}"
            )
        if self.requested != "auto" and self.requested != self.mode:
            raise InvalidConfig(f"'split.mode' is {self.mode!r} but {self.requested!r} was requested")
        check_text("split.reason", self.reason, MAX_REASON_CHARS)

    def to_json(self) -> dict[str, str]:
        return {"mode": self.mode, "requested": self.requested, "reason": self.reason}

    @classmethod
    def from_json(cls, obj: object) -> Split:
        if not isinstance(obj, dict) or set(obj) != {"mode", "requested", "reason"}:
            raise InvalidConfig(
                f"'split' must be an object with exactly 'mode', 'requested' and 'reason', got {show(obj)}"
            )
        return cls(obj["mode"], obj["requested"], obj["reason"])


def check_survey_questions(questions: Sequence[Question], split: Split, epsilon: float) -> None:
    """The rules that tie the questions to the split: 1..MAX_QUESTIONS questions with unique ids; under
    ``per_question`` every question has a share and ε_q = :func:`split_epsilons` exactly; under ``sampling``
    none has a share and each runs at ε. ``InvalidConfig`` naming the question."""
    if not 1 <= len(questions) <= MAX_QUESTIONS:
        raise InvalidConfig(f"'questions' must hold 1..{MAX_QUESTIONS} questions, got {len(questions)}")
    ids = [q.id for q in questions]
    for qid in ids:
        if ids.count(qid) > 1:
            raise InvalidConfig(f"question ids must be unique in a survey, {qid!r} appears twice")
    central = {q.central for q in questions}
    if len(central) > 1:
        raise InvalidConfig("every question of a campaign has a mechanism, or (central) none; not a mix")
    if split.mode == "sampling":
        if True in central:
            raise InvalidConfig("a central survey splits each release's ε across its questions: 'split.mode' must "
                                "be 'per_question'")
        for q in questions:
            if q.share is not None:
                raise InvalidConfig(f"question {q.id!r}: 'share' applies to the per_question split only")
            if q.epsilon != epsilon:
                raise InvalidConfig(
                    f"question {q.id!r}: under sampling every question runs at the campaign's ε={epsilon!r}, "
                    f"got {q.epsilon!r}"
                )
        return
    for q in questions:
        if q.share is None:
            raise InvalidConfig(f"question {q.id!r}: the per_question split needs an integer 'share' per question")
    expected = split_epsilons(epsilon, [q.share for q in questions if q.share is not None])
    for q, eps in zip(questions, expected, strict=True):
        if q.epsilon != eps:
            raise InvalidConfig(
                f"question {q.id!r}: its ε must be {eps!r} (the campaign's ε times share/Σ shares, rounded down), "
                f"got {q.epsilon!r}"
            )


# ------------------------------------------------------------------------------------------ answers


def check_answers(questions: Sequence[Question], answers: object) -> dict[str, Any]:
    """The device's answers to a survey, normalized per question (None: skipped).

    ``answers`` maps question ids to answers; a question left out (or given None) is skipped, which only an
    ``optional`` question allows. Every answer is checked, whatever the split (which question a sampling
    survey draws must not decide whether a bad answer is refused). Raises :class:`InvalidAnswer` naming the
    question, and nothing else.
    """
    if not isinstance(answers, Mapping):
        raise InvalidAnswer(
            "a survey's answers must be a dict mapping question ids to answers, e.g. "
            f"{{{', '.join(repr(q.id) + ': ...' for q in questions[:3])}}}, got {show(answers)}",
            question="",
        )
    known = {q.id for q in questions}
    for key in answers:
        if key not in known:
            raise InvalidAnswer(
                f"{show(key)} is not a question of this survey; its questions are "
                + ", ".join(repr(q.id) for q in questions),
                question=str(key),
            )
    normalized: dict[str, Any] = {}
    for q in questions:
        answer = answers.get(q.id)
        if answer is None:
            if not q.optional:
                raise InvalidAnswer(f"question {q.id!r} needs an answer (it is not optional)", question=q.id)
            normalized[q.id] = None
        else:
            normalized[q.id] = q.check_answer(answer)
    return normalized


def draw_question(count: int, randbelow: RandBelow = secrets.randbelow) -> int:
    """The question a sampling survey asks: one ``randbelow(count)``, never looking at an answer."""
    return randbelow(count)


def asked(questions: Sequence[Question], mode: str, drawn: int | None) -> Sequence[Question]:
    """The questions a payload answers: all (``per_question``), or the drawn one (``sampling``)."""
    if mode == "per_question":
        return questions
    if drawn is None or not 0 <= drawn < len(questions):
        raise InvalidParameter(f"a sampling survey needs the drawn question's index in [0, {len(questions)})")
    return (questions[drawn],)


def randomize_answers(
    questions: Sequence[Question],
    mode: str,
    normalized: Mapping[str, Any],
    *,
    drawn: int | None = None,
    randbelow: RandBelow = secrets.randbelow,
) -> dict[str, Any]:
    """The reports (local) or values (central) of the asked questions, in descriptor order, each drawn with
    its mechanism's fixed pattern; a skipped question randomizes its dummy and reports None, so the
    pattern of draws depends on neither the answers nor which of them were skipped."""
    out: dict[str, Any] = {}
    for q in asked(questions, mode, drawn):
        answer = normalized[q.id]
        report = q.randomize(q.dummy if answer is None else answer, randbelow=randbelow)
        out[q.id] = None if answer is None else report
    return out


def encode_answers(questions: Sequence[Question], reports: Mapping[str, Any]) -> dict[str, Any]:
    """The ``answers`` (or ``values``) object of a payload: each question's wire report, or None."""
    by_id = {q.id: q for q in questions}
    return {qid: None if report is None else by_id[qid].encode_report(report) for qid, report in reports.items()}


def decode_answers(questions: Sequence[Question], mode: str, obj: object, key: str) -> dict[str, Any]:
    """A payload's ``answers``/``values`` object, checked: every question (``per_question``) or exactly one
    (``sampling``), each report in its question's report space, ``null`` only for an optional question.
    Raises ``InvalidReport`` only."""
    if not isinstance(obj, dict):
        raise InvalidReport(f"{key!r} must be an object mapping question ids to reports, got {show(obj)}")
    by_id = {q.id: q for q in questions}
    unknown = sorted(show(k) for k in obj if k not in by_id)
    if unknown:
        raise InvalidReport(f"{key!r} names questions this survey does not have: {', '.join(unknown[:5])}")
    if mode == "per_question":
        missing = [q.id for q in questions if q.id not in obj]
        if missing:
            raise InvalidReport(
                f"{key!r} must answer every question of the survey (null for a skipped optional one), missing "
                + ", ".join(map(repr, missing[:5]))
            )
    elif len(obj) != 1:
        raise InvalidReport(
            f"{key!r} of a sampling survey must answer exactly one question (the one the device drew), got {len(obj)}"
        )
    out: dict[str, Any] = {}
    for q in questions:
        if q.id not in obj:
            continue
        wire = obj[q.id]
        if wire is None:
            if not q.optional:
                raise InvalidReport(f"question {q.id!r} is not optional: its report cannot be null (skipped)")
            out[q.id] = None
        else:
            out[q.id] = q.decode_report(wire)
    return out


def widest_answers(questions: Sequence[Question], mode: str) -> dict[str, Any]:
    """The ``answers``/``values`` object whose canonical JSON is the longest a payload may carry."""

    def widest(q: Question) -> Any:
        report = q.widest_report()
        if q.optional and len(canonical_json(None)) > len(canonical_json(report)):
            return None
        return report

    if mode == "per_question":
        return {q.id: widest(q) for q in questions}
    candidates = [{q.id: widest(q)} for q in questions]
    return max(candidates, key=lambda c: len(canonical_json(c)))


# ------------------------------------------------------------------------------------------ creation

_SPEC_KEYS = frozenset(
    {"id", "text", "kind", "mechanism", "optional", "share", "categories", "bins", "options", "max_selected",
     "range", "steps", "clip"}
)


def build_questions(
    specs: Sequence[Mapping[str, Any]], *, epsilon: float, split: str = "auto", central: bool = False
) -> tuple[tuple[Question, ...], Split]:
    """The questions and split of a new survey from question specs (the keyword arguments of
    :func:`~deniable.shared.questions.make_question` without ``epsilon``: ``id``, ``text``, ``kind`` and the
    kind's fields; ``share`` defaults to 1 under ``per_question``).

    ``split="auto"`` asks the planner for the split with the lower mean variance inflation (central surveys:
    always ``per_question``); the mechanisms named ``auto`` are then resolved at each question's ε. Raises
    ``InvalidConfig``.
    """
    from deniable.shared.questions import make_question

    if not isinstance(specs, list | tuple) or not 1 <= len(specs) <= MAX_QUESTIONS:
        count = len(specs) if isinstance(specs, list | tuple) else show(specs)
        raise InvalidConfig(f"'questions' must be a list of 1..{MAX_QUESTIONS} questions, got {count}")
    for i, spec in enumerate(specs):
        if not isinstance(spec, Mapping):
            raise InvalidConfig(f"'questions[{i}]' must be an object, got {show(spec)}")
        unknown = sorted(str(k) for k in set(spec) - _SPEC_KEYS)
        if unknown:
            raise InvalidConfig(f"'questions[{i}]' has unknown keys {', '.join(map(repr, unknown[:5]))}; a question "
                                f"takes {', '.join(sorted(_SPEC_KEYS))}")
        for key in ("id", "text", "kind"):
            if key not in spec:
                raise InvalidConfig(f"'questions[{i}]' needs {key!r}")
    ids = [spec["id"] for spec in specs]
    for qid in ids:
        if ids.count(qid) > 1:
            raise InvalidConfig(f"question ids must be unique in a survey, {show(qid)} appears twice")
    if not isinstance(split, str) or split not in SPLIT_REQUESTS:
        raise InvalidConfig(f"'split' must be one of {', '.join(map(repr, SPLIT_REQUESTS))}, got {show(split)}")
    shares = [spec.get("share", 1) for spec in specs]
    if central:
        if split == "sampling":
            raise InvalidConfig("a central survey splits each release's ε across its questions: use split "
                                "'per_question' (or 'auto')")
        chosen, reason = "per_question", "central: each release's ε is split across the questions"
    elif len(specs) == 1:
        chosen = "per_question" if split == "auto" else split
        reason = "one question: it runs at the whole ε" if split == "auto" else "requested"
    elif split == "auto":
        chosen, reason = _auto_split(specs, epsilon, shares)
    else:
        chosen, reason = split, "requested"
    if chosen == "per_question":
        for i, share in enumerate(shares):
            low, high = QUESTION_SHARE
            if isinstance(share, bool) or not isinstance(share, int) or not low <= share <= high:
                raise InvalidConfig(f"'questions[{i}].share' must be an integer in [{QUESTION_SHARE[0]}, "
                                    f"{QUESTION_SHARE[1]}], got {show(share)}")
        epsilons = split_epsilons(epsilon, shares)
    else:
        for i, spec in enumerate(specs):
            if spec.get("share") is not None:
                raise InvalidConfig(f"'questions[{i}].share' applies to the per_question split only")
        epsilons = (epsilon,) * len(specs)
    questions = []
    for spec, eps in zip(specs, epsilons, strict=True):
        fields = {k: v for k, v in spec.items() if k != "share"}
        share = spec.get("share", 1) if chosen == "per_question" else None
        questions.append(make_question(**fields, epsilon=eps, share=share, central=central))
    result = tuple(questions)
    mode = Split(chosen, split, reason)
    check_survey_questions(result, mode, epsilon)
    return result, mode


def _auto_split(specs: Sequence[Mapping[str, Any]], epsilon: float, shares: list[Any]) -> tuple[str, str]:
    """The split with the lower mean variance inflation in the planner, and the figures as the reason."""
    from deniable.shared.planner import DraftQuestion, plan_survey

    drafts = []
    for spec in specs:
        kind, mechanism = spec["kind"], spec.get("mechanism") or "auto"
        try:
            if kind == "choice":
                binned = spec.get("categories") is None and spec.get("bins")
                k = len(spec["bins"]) - 1 if binned else len(spec["categories"])
                drafts.append(DraftQuestion(spec["id"], "choice", k=k, mechanism=mechanism))
            elif kind == "multi":
                k = len(spec["options"])
                m = spec.get("max_selected") or k
                drafts.append(DraftQuestion(spec["id"], "multi", k=k, m=m, mechanism=mechanism))
            elif kind == "number":
                lo, hi = spec["range"]
                steps = spec.get("steps") or int(hi - lo)
                drafts.append(DraftQuestion(spec["id"], "number", lo=lo, hi=hi, steps=steps, mechanism=mechanism))
            else:
                raise InvalidConfig(f"question {spec['id']!r}: 'kind' must be one of choice, multi, number, got "
                                    f"{show(kind)}")
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidConfig):
                raise
            raise InvalidConfig(f"question {show(spec.get('id'))}: {exc}") from None
    for share in shares:
        if isinstance(share, bool) or not isinstance(share, int) or share < 1:
            raise InvalidConfig(f"a question's 'share' must be a positive integer, got {show(share)}")
    total = sum(shares)
    try:
        plan = plan_survey(drafts, epsilon=epsilon, n=10_000, shares=[s / total for s in shares])
    except InvalidParameter as exc:
        raise InvalidConfig(str(exc)) from None
    inflation = {split: sum(r.inflation for r in plan.rows if r.split == split) / len(drafts)
                 for split in PLANNER_NAMES.values()}
    chosen = next(mode for mode, name in PLANNER_NAMES.items() if name == plan.recommended)
    other = next(mode for mode in SPLIT_MODES if mode != chosen)
    reason = (
        f"auto: the planner predicts a mean variance inflation of {inflation[PLANNER_NAMES[chosen]]:.3g}x under "
        f"{chosen} against {inflation[PLANNER_NAMES[other]]:.3g}x under {other} (1x: each question alone with the "
        "whole epsilon and every respondent)"
    )
    return chosen, reason
