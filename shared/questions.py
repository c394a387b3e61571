"""The questions of a survey (descriptor format 3): three kinds of answer, each with its mechanism and wire form.

* ``choice``: one of k categories, randomized by a frequency oracle (``binary-rr``, ``grr``, ``oue``, ``olh``:
  :mod:`deniable.shared.mechanisms`). With ``bins`` it is the *histogram of a number*: the device maps a
  number to the bin ``[bins[i], bins[i+1])`` holding it (the last bin closed) and answers that category.
* ``multi``: any subset of k options with at most m of them ("select all that apply"), ε-LDP for the whole
  set (``bitvector``, ``padding``: :mod:`deniable.shared.mechanisms.sets`).
* ``number``: a value in a declared range [lo, hi] on a grid of ``steps`` equal steps, for its mean
  (``duchi``, ``piecewise``, ``hybrid``: :mod:`deniable.shared.mechanisms.mean`). The device rounds the value
  to the grid by unbiased randomized rounding (one ``randbelow(2^64)``) before randomizing it.

A question of a central campaign has mechanism ``none``: the device sends its (checked) answer to the curator
instead of a randomized report.

Each question owns, in one place: its JSON form (``docs/wire-format.md`` §3.2), the check of a device's answer
(:meth:`Question.check_answer`, which raises :class:`~deniable.shared.errors.InvalidAnswer` naming the
question: unknown option, too many options, out of range, NaN, wrong type), the randomizer with a fixed
pattern of draws whatever the answer (:meth:`Question.randomize`), the wire encoding of its reports and
their strict decoding (``InvalidReport`` only), and the widest report, which fixes the padding.

Answers are *normalized* before anything is drawn: a choice is its category index, a multi answer the
sorted tuple of option indices, a number the int or float as given (exact). A question that the user
skipped (allowed only where ``optional``) randomizes :meth:`Question.dummy` instead and the report is
discarded, so skipping changes neither the draw pattern nor the time spent.
"""

from __future__ import annotations

import functools
import itertools
import math
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from deniable.shared.canonical_json import Canonical, canonical_json
from deniable.shared.errors import DeniableError, InvalidAnswer, InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.fields import (
    check_categories,
    check_labels,
    check_slug,
    check_text,
    check_trimmed_labels,
)
from deniable.shared.limits import (
    MAX_CATEGORIES,
    MAX_CATEGORY_CHARS,
    MAX_QUESTION_CHARS,
    MECHANISM_EPSILON,
    NUMBER_STEPS,
    QUESTION_SHARE,
    check_range,
)
from deniable.shared.mechanisms import MECHANISMS, Mechanism, choose_mechanism, mechanism_from_name
from deniable.shared.mechanisms.mean import (
    DEFAULT_LATTICE,
    MeanMechanism,
    NumberRange,
    choose_mean_mechanism,
    mean_mechanism_from_name,
)
from deniable.shared.mechanisms.registry import JSON_TYPES, KINDS, mechanism_class, mechanism_names
from deniable.shared.mechanisms.sets import (
    Padding,
    SetMechanism,
    choose_set_mechanism,
    set_mechanism_from_name,
)
from deniable.shared.messages import show
from deniable.shared.sampling import RandBelow

__all__ = [
    "CENTRAL_MECHANISM",
    "LEGACY_QUESTION_ID",
    "MAX_QUESTION_CHARS",
    "QUESTION_KINDS",
    "ChoiceQuestion",
    "MultiQuestion",
    "NumberQuestion",
    "Question",
    "bin_labels",
    "question_from_json",
]

#: The kinds of question, in the order the docs list them.
QUESTION_KINDS: tuple[str, ...] = KINDS
#: The id of the one question of a format 1 or 2 descriptor (a one-question survey).
LEGACY_QUESTION_ID = "answer"
#: The mechanism of a question in a central campaign: the device does not randomize.
CENTRAL_MECHANISM = "none"

_COMMON_KEYS = frozenset({"id", "text", "kind", "epsilon", "mechanism", "params"})
_COMMON_OPTIONAL = frozenset({"share", "optional"})
_KIND_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "choice": (frozenset({"categories"}), frozenset({"bins", "clip"})),
    "multi": (frozenset({"options", "max_selected"}), frozenset()),
    "number": (frozenset({"range", "steps"}), frozenset({"clip"})),
}


def _number_text(x: int | float) -> str:
    """A bin edge as a label: integers without a point, other floats in their shortest exact form."""
    if isinstance(x, int) or x.is_integer():
        return str(int(x))
    return repr(x)


def bin_labels(bins: Sequence[int | float]) -> tuple[str, ...]:
    """The category labels of a number histogram: ``[a, b)`` per bin, the last one closed ``[a, b]``."""
    last = len(bins) - 2
    return tuple(
        f"[{_number_text(a)}, {_number_text(b)}{']' if i == last else ')'}"
        for i, (a, b) in enumerate(itertools.pairwise(bins))
    )


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


@dataclass(frozen=True, kw_only=True)
class Question(ABC):
    """One question of a survey, valid by construction (``InvalidConfig`` naming the question otherwise).

    ``epsilon`` is the ε its report runs at (the campaign's ε, or its share of it under the per-question
    split); ``share`` is the integer weight of that split (None under sampling); ``optional`` lets the device
    skip it. ``mechanism`` is a wire name, or ``none`` in a central campaign.
    """

    id: str
    text: str
    epsilon: float
    mechanism: str
    optional: bool = False
    share: int | None = None
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        check_slug("question id", self.id)
        check_text(f"questions[{self.id}].text", self.text, MAX_QUESTION_CHARS)
        try:
            object.__setattr__(self, "epsilon", check_range(
                f"questions[{self.id}].epsilon", self.epsilon, MECHANISM_EPSILON, InvalidConfig))
        except InvalidConfig as exc:
            raise InvalidConfig(f"{exc} (a question's ε is its share of the campaign's ε)") from None
        if not isinstance(self.optional, bool):
            raise InvalidConfig(f"'questions[{self.id}].optional' must be true or false, got {show(self.optional)}")
        if self.share is not None:
            low, high = QUESTION_SHARE
            if isinstance(self.share, bool) or not isinstance(self.share, int) or not low <= self.share <= high:
                raise InvalidConfig(
                    f"'questions[{self.id}].share' must be an integer in [{low}, {high}] (its weight in the "
                    f"per-question split of ε), got {show(self.share)}"
                )
        allowed = (CENTRAL_MECHANISM, *self.mechanisms())
        if not isinstance(self.mechanism, str) or self.mechanism not in allowed:
            raise InvalidConfig(
                f"'questions[{self.id}].mechanism' must be one of {', '.join(map(repr, allowed))} for a "
                f"{self.kind} question, got {show(self.mechanism)}"
            )
        self._check_kind()
        if not self.central:
            self._mechanism  # noqa: B018 - builds (and so checks) the mechanism once

    # -- what each kind defines -----------------------------------------------------------------------
    @classmethod
    def mechanisms(cls) -> tuple[str, ...]:
        """The local mechanisms a question of this kind may name (the registry's, in its order)."""
        return mechanism_names(cls.kind)  # type: ignore[arg-type]

    @abstractmethod
    def _check_kind(self) -> None: ...

    @abstractmethod
    def _build(self) -> Any: ...

    @abstractmethod
    def params(self) -> dict[str, int]:
        """The descriptor's ``params`` of the question (checked exactly when parsed)."""

    @abstractmethod
    def _kind_json(self) -> dict[str, Any]: ...

    @abstractmethod
    def check_answer(self, answer: object) -> Any:
        """The normalized answer (see the module docstring); :class:`InvalidAnswer` naming the question."""

    @property
    @abstractmethod
    def dummy(self) -> Any:
        """The normalized answer randomized (and discarded) in place of a skipped one."""

    @abstractmethod
    def randomize(self, answer: Any, *, randbelow: RandBelow = secrets.randbelow) -> Any:
        """The device report of a normalized answer (local) or its value for the curator (central); a
        fixed pattern of draws whatever the answer."""

    @abstractmethod
    def widest_report(self) -> Any:
        """The wire report (local) or value (central) whose canonical JSON is the longest."""

    @abstractmethod
    def _decode_value(self, wire: object) -> Any:
        """A central campaign's value of this question, checked (``InvalidReport``)."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The category or option labels (() for a number)."""
        return ()

    # -- shared ----------------------------------------------------------------------------------------
    @property
    def central(self) -> bool:
        return self.mechanism == CENTRAL_MECHANISM

    @functools.cached_property
    def _mechanism(self) -> Any:
        try:
            return self._build()
        except InvalidParameter as exc:
            raise InvalidConfig(
                f"question {self.id!r}: mechanism {self.mechanism!r} cannot run with epsilon={self.epsilon:g}: {exc}"
            ) from exc

    def build_mechanism(self) -> Any:
        """The local mechanism: a :class:`~deniable.shared.mechanisms.Mechanism` (choice), a
        :class:`~deniable.shared.mechanisms.sets.SetMechanism` (multi) or a
        :class:`~deniable.shared.mechanisms.mean.MeanMechanism` (number); built once. ``InvalidConfig`` for
        a question of a central campaign, which has none."""
        if self.central:
            raise InvalidConfig(
                f"question {self.id!r} belongs to a central campaign: the device sends its answer to the curator "
                "and there is no mechanism"
            )
        return self._mechanism

    @functools.cached_property
    def canonical(self) -> Canonical:
        """The canonical JSON of :meth:`to_json`, encoded once (the descriptor's fingerprint embeds it)."""
        return Canonical(canonical_json(self.to_json()))

    def to_json(self) -> dict[str, Any]:
        """The question object of the descriptor (``share`` and ``optional`` only when set)."""
        body: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "epsilon": self.epsilon,
            "mechanism": self.mechanism,
            "params": self.params(),
        }
        if self.share is not None:
            body["share"] = self.share
        if self.optional:
            body["optional"] = True
        body.update(self._kind_json())
        return body

    def _refuse(self, message: str) -> InvalidAnswer:
        return InvalidAnswer(f"question {self.id!r}: {message}", question=self.id)

    def encode_report(self, report: Any) -> Any:
        """The wire form of a report from :meth:`randomize` (local) or of the value (central)."""
        if self.central:
            return report
        return self._mechanism.encode_report(report)

    def decode_report(self, wire: object) -> Any:
        """A payload's report (local) or value (central) for this question, checked: ``InvalidReport`` only."""
        if self.central:
            return self._decode_value(wire)
        cls = mechanism_class(self.mechanism, self.kind)  # type: ignore[arg-type]
        assert cls is not None  # checked when the question was built
        if isinstance(wire, bool) or not isinstance(wire, cls.wire_type):
            described = getattr(cls, "wire_description", JSON_TYPES[cls.wire_type])
            raise InvalidReport(
                f"question {self.id!r}: a {self.mechanism} report must be a JSON {described}, got {show(wire)}"
            )
        try:
            return self._mechanism.decode_report(wire)
        except InvalidReport as exc:
            raise InvalidReport(f"question {self.id!r}: {exc}") from None
        except (DeniableError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise InvalidReport(f"question {self.id!r}: not a valid {self.mechanism} report: {exc}") from exc


def _params_check(question: Question, params: object) -> None:
    expected = question.params()
    if not isinstance(params, Mapping) or dict(params) != expected or any(
        isinstance(v, bool) for v in params.values()
    ):
        raise InvalidConfig(
            f"'questions[{question.id}].params' must be exactly {expected} for this question, got {show(params)}"
            if not isinstance(params, Mapping) else
            f"'questions[{question.id}].params' must be exactly {expected} for this question, got {dict(params)}"
        )


@dataclass(frozen=True, kw_only=True)
class ChoiceQuestion(Question):
    """One of k categories; with ``bins`` (k + 1 increasing edges) the histogram of a number."""

    categories: tuple[str, ...]
    bins: tuple[int | float, ...] | None = None
    clip: bool = False
    kind: ClassVar[str] = "choice"

    def _check_kind(self) -> None:
        try:
            object.__setattr__(self, "categories", check_categories(self.categories))
        except InvalidConfig as exc:
            raise InvalidConfig(f"question {self.id!r}: {exc}") from None
        if self.bins is not None:
            bins = self.bins
            if not isinstance(bins, list | tuple) or len(bins) != len(self.categories) + 1:
                raise InvalidConfig(
                    f"'questions[{self.id}].bins' must be {len(self.categories) + 1} edges (one more than the "
                    f"categories), got {show(bins)}"
                )
            for a, b in itertools.pairwise(bins):
                if not (_is_number(a) and _is_number(b) and math.isfinite(a) and math.isfinite(b) and a < b):
                    raise InvalidConfig(
                        f"'questions[{self.id}].bins' must be finite numbers in strictly increasing order, got "
                        f"{show(a)} before {show(b)}"
                    )
            object.__setattr__(self, "bins", tuple(bins))
        if not isinstance(self.clip, bool) or (self.clip and self.bins is None):
            raise InvalidConfig(
                f"'questions[{self.id}].clip' must be true or false, and applies only to a question with 'bins' "
                f"or a number question, got {show(self.clip)}"
            )
        cls = MECHANISMS.get(self.mechanism)
        if cls is not None and cls.fixed_k is not None and len(self.categories) != cls.fixed_k:
            others = ", ".join(repr(name) for name, c in MECHANISMS.items() if c.fixed_k is None)
            raise InvalidConfig(
                f"question {self.id!r}: mechanism {self.mechanism!r} needs exactly {cls.fixed_k} categories, got "
                f"{len(self.categories)}; use {' or '.join(others.rsplit(', ', 1))}"
            )

    def _build(self) -> Mechanism[Any]:
        return mechanism_from_name(self.mechanism, epsilon=self.epsilon, k=len(self.categories))

    def params(self) -> dict[str, int]:
        if self.central:
            return {"k": len(self.categories)}
        return {"k": len(self.categories), **self._mechanism.public_params()}

    def _kind_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"categories": list(self.categories)}
        if self.bins is not None:
            body["bins"] = list(self.bins)
        if self.clip:
            body["clip"] = True
        return body

    @property
    def labels(self) -> tuple[str, ...]:
        return self.categories

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.categories)}

    def check_answer(self, answer: object) -> int:
        if isinstance(answer, str):
            index = self._index.get(answer)
            if index is None:
                shown = ", ".join(repr(c) for c in self.categories[:10])
                more = f", ... ({len(self.categories)} categories)" if len(self.categories) > 10 else ""
                raise self._refuse(f"{show(answer)} is not one of its categories; expected one of {shown}{more}")
            return index
        if self.bins is not None and _is_number(answer):
            return self._bin_of(answer)  # type: ignore[arg-type]
        expected = "a category label (a string)" + (" or a number to put in its bins" if self.bins else "")
        raise self._refuse(f"the answer must be {expected}, got {show(answer)}")

    def _bin_of(self, value: int | float) -> int:
        assert self.bins is not None
        if isinstance(value, float) and not math.isfinite(value):
            raise self._refuse(f"the answer must be a finite number, got {value!r}")
        lo, hi = self.bins[0], self.bins[-1]
        if not lo <= value <= hi:
            if not self.clip:
                raise self._refuse(
                    f"the answer must lie in [{_number_text(lo)}, {_number_text(hi)}], got {value!r} (values are "
                    "not clipped silently; a question declared with clip=True moves them to the nearest bin)"
                )
            return 0 if value < lo else len(self.categories) - 1
        exact = Fraction(value)
        for i in range(len(self.categories) - 1):
            if exact < Fraction(self.bins[i + 1]):
                return i
        return len(self.categories) - 1

    @property
    def dummy(self) -> int:
        return 0

    def randomize(self, answer: int, *, randbelow: RandBelow = secrets.randbelow) -> Any:
        if self.central:
            return answer
        return self._mechanism.randomize(answer, randbelow=randbelow)

    def widest_report(self) -> Any:
        if self.central:
            return len(self.categories) - 1
        mechanism = self._mechanism
        return mechanism.encode_report(mechanism.widest_report())

    def _decode_value(self, wire: object) -> int:
        k = len(self.categories)
        if isinstance(wire, bool) or not isinstance(wire, int) or not 0 <= wire < k:
            raise InvalidReport(f"question {self.id!r}: a value must be a category index in [0, {k}), got {show(wire)}")
        return wire


@dataclass(frozen=True, kw_only=True)
class MultiQuestion(Question):
    """Any subset of the options with at most ``max_selected`` of them."""

    options: tuple[str, ...]
    max_selected: int
    kind: ClassVar[str] = "multi"

    def _check_kind(self) -> None:
        try:
            object.__setattr__(self, "options", check_labels(
                "'options'", self.options, sizes=(2, MAX_CATEGORIES), max_chars=MAX_CATEGORY_CHARS, noun="labels"))
        except InvalidConfig as exc:
            raise InvalidConfig(f"question {self.id!r}: {exc}") from None
        m, k = self.max_selected, len(self.options)
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= k:
            raise InvalidConfig(
                f"'questions[{self.id}].max_selected' must be an integer in [1, {k}] (the most options one answer "
                f"may select), got {show(m)}"
            )

    def _build(self) -> SetMechanism:
        return set_mechanism_from_name(self.mechanism, epsilon=self.epsilon, k=len(self.options), m=self.max_selected)

    def params(self) -> dict[str, int]:
        return {"k": len(self.options), "m": self.max_selected}

    def _kind_json(self) -> dict[str, Any]:
        return {"options": list(self.options), "max_selected": self.max_selected}

    @property
    def labels(self) -> tuple[str, ...]:
        return self.options

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.options)}

    def check_answer(self, answer: object) -> tuple[int, ...]:
        if isinstance(answer, str | bytes) or not isinstance(answer, list | tuple | set | frozenset):
            raise self._refuse(
                f"the answer must be a list of option labels (select all that apply), got {show(answer)}"
            )
        indices = []
        for item in answer:
            index = self._index.get(item) if isinstance(item, str) else None
            if index is None:
                shown = ", ".join(repr(c) for c in self.options[:10])
                more = f", ... ({len(self.options)} options)" if len(self.options) > 10 else ""
                raise self._refuse(f"{show(item)} is not one of its options; expected labels among {shown}{more}")
            indices.append(index)
        if len(set(indices)) != len(indices):
            raise self._refuse("the answer names an option twice; list each selected option once")
        if len(indices) > self.max_selected:
            raise self._refuse(
                f"at most {self.max_selected} options may be selected, got {len(indices)}"
            )
        return tuple(sorted(indices))

    @property
    def dummy(self) -> tuple[int, ...]:
        return ()

    def randomize(self, answer: tuple[int, ...], *, randbelow: RandBelow = secrets.randbelow) -> Any:
        if self.central:
            return list(answer)
        return self._mechanism.randomize(answer, randbelow=randbelow)

    def widest_report(self) -> Any:
        if self.central:  # the m largest indices: no set of at most m indices has a longer JSON array
            k = len(self.options)
            return list(range(k - self.max_selected, k))
        mechanism = self._mechanism
        if isinstance(mechanism, Padding):
            return mechanism.encode_report(mechanism.symbols - 1)
        return mechanism.encode_report(0)  # every bit vector has the same number of hex digits

    def _decode_value(self, wire: object) -> tuple[int, ...]:
        k, m = len(self.options), self.max_selected
        if (
            not isinstance(wire, list) or len(wire) > m
            or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < k for v in wire)
            or any(a >= b for a, b in itertools.pairwise(wire))
        ):  # fmt: skip
            raise InvalidReport(
                f"question {self.id!r}: a value must be an increasing array of at most {m} option indices in "
                f"[0, {k}), got {show(wire)}"
            )
        return tuple(wire)


@dataclass(frozen=True, kw_only=True)
class NumberQuestion(Question):
    """A value in [lo, hi] on a grid of ``steps`` equal steps, for its mean; ``clip`` moves out-of-range
    values to the nearest end on the device (biased, the app's choice) instead of refusing them."""

    lo: int | float
    hi: int | float
    steps: int
    lattice: int = DEFAULT_LATTICE
    clip: bool = False
    kind: ClassVar[str] = "number"

    def _check_kind(self) -> None:
        try:
            NumberRange(self.lo, self.hi, self.steps)
        except InvalidParameter as exc:
            raise InvalidConfig(f"question {self.id!r}: {exc}") from None
        if not isinstance(self.clip, bool):
            raise InvalidConfig(f"'questions[{self.id}].clip' must be true or false, got {show(self.clip)}")
        if not self._takes_lattice() and self.lattice != DEFAULT_LATTICE:
            raise InvalidConfig(f"question {self.id!r}: a lattice applies to piecewise and hybrid only")

    @functools.cached_property
    def range(self) -> NumberRange:
        """The declared range and grid."""
        return NumberRange(self.lo, self.hi, self.steps)

    def _build(self) -> MeanMechanism:
        return mean_mechanism_from_name(self.mechanism, epsilon=self.epsilon, steps=self.steps, lattice=self.lattice)

    def params(self) -> dict[str, int]:
        return {"lattice": self.lattice} if self._takes_lattice() else {}

    def _takes_lattice(self) -> bool:
        """Whether the question's mechanism has an output lattice (the registry's ``takes_lattice``; a central
        question has no device mechanism)."""
        cls = mechanism_class(self.mechanism, "number")
        return not self.central and (cls is None or bool(cls.takes_lattice))

    def _kind_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"range": [self.lo, self.hi], "steps": self.steps}
        if self.clip:
            body["clip"] = True
        return body

    def check_answer(self, answer: object) -> int | float:
        if not _is_number(answer):
            raise self._refuse(f"the answer must be a number in [{self.lo:g}, {self.hi:g}], got {show(answer)}")
        assert isinstance(answer, int | float)
        if isinstance(answer, float) and not math.isfinite(answer):
            raise self._refuse(f"the answer must be a finite number in [{self.lo:g}, {self.hi:g}], got {answer!r}")
        if not self.clip and not self.lo <= answer <= self.hi:
            raise self._refuse(
                f"the answer must lie in [{self.lo:g}, {self.hi:g}], got {answer!r} (values are not clipped "
                "silently; a question declared with clip=True moves them to the nearest end)"
            )
        return answer

    @property
    def dummy(self) -> int | float:
        return self.lo

    def randomize(self, answer: int | float, *, randbelow: RandBelow = secrets.randbelow) -> int:
        j = self.range.grid_index(answer, clip=self.clip, randbelow=randbelow)
        if self.central:
            return j
        result: int = self._mechanism.randomize(j, randbelow=randbelow)
        return result

    def encode_report(self, report: Any) -> int:
        """A mean mechanism's report (and a central grid index) is its JSON integer."""
        encoded: int = report if self.central else self._mechanism.decode_report(report)
        return encoded

    def widest_report(self) -> int:
        return self.steps if self.central else self._mechanism.outputs - 1

    def _decode_value(self, wire: object) -> int:
        if isinstance(wire, bool) or not isinstance(wire, int) or not 0 <= wire <= self.steps:
            raise InvalidReport(
                f"question {self.id!r}: a value must be a grid index in [0, {self.steps}], got {show(wire)}"
            )
        return wire


_KINDS: dict[str, type[Question]] = {cls.kind: cls for cls in (ChoiceQuestion, MultiQuestion, NumberQuestion)}


#: Questions parsed before, by the ``repr`` of their JSON object (see :func:`question_from_json`).
_PARSED: dict[str, Question] = {}
_PARSED_MAX = 256
_PARSED_KEY_CHARS = 16_384
_PARSED_LOCK = threading.Lock()


def question_from_json(obj: object, position: int) -> Question:
    """Parse one question object of a format 3 descriptor: ``InvalidConfig`` (only) naming the question.

    A question is immutable and a pure function of its JSON object, so a question object seen before (the
    same keys, values and types: the same ``repr`` of a parsed JSON object) is not validated again: its
    parsed question is returned. Only valid questions are kept (at most 256 of up to 16 KiB of JSON each,
    oldest dropped first).
    """
    key = repr(obj) if type(obj) is dict else None
    if key is not None and len(key) > _PARSED_KEY_CHARS:
        key = None  # a question with thousands of categories is validated each time, not held in memory
    if key is not None:
        known = _PARSED.get(key)
        if known is not None:
            return known
    question = _question_from_json(obj, position)
    if key is not None:
        with _PARSED_LOCK:  # the aggregator parses in several threads
            while len(_PARSED) >= _PARSED_MAX:
                del _PARSED[next(iter(_PARSED))]
            _PARSED[key] = question
    return question


def _question_from_json(obj: object, position: int) -> Question:
    where = f"questions[{position}]"
    if not isinstance(obj, dict):
        raise InvalidConfig(f"{where!r} must be a JSON object, got {show(obj)}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise InvalidConfig(f"'{where}.kind' must be one of {', '.join(map(repr, QUESTION_KINDS))}, got {show(kind)}")
    required, optional = _KIND_KEYS[kind]
    required = required | _COMMON_KEYS
    missing = sorted(required - set(obj))
    unknown = sorted(str(k) for k in set(obj) - required - optional - _COMMON_OPTIONAL)
    if missing or unknown:
        parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
        parts += [f"unknown {', '.join(show(k) for k in unknown[:5])}"] if unknown else []
        raise InvalidConfig(f"the keys of {where} (a {kind} question) are wrong: {'; '.join(parts)}")
    common: dict[str, Any] = {
        "id": obj["id"], "text": obj["text"], "epsilon": obj["epsilon"], "mechanism": obj["mechanism"],
        "optional": obj.get("optional", False), "share": obj.get("share"),
    }  # fmt: skip
    if obj.get("optional") is False:
        raise InvalidConfig(f"'{where}.optional' is written only when true")
    if obj.get("clip") is False:
        raise InvalidConfig(f"'{where}.clip' is written only when true")
    question: Question
    if kind == "choice":
        if not isinstance(obj["categories"], list) or ("bins" in obj and not isinstance(obj["bins"], list)):
            raise InvalidConfig(f"'{where}.categories' and '{where}.bins' must be JSON arrays")
        question = ChoiceQuestion(**common, categories=tuple(obj["categories"]),
                                  bins=None if "bins" not in obj else tuple(obj["bins"]), clip=obj.get("clip", False))
    elif kind == "multi":
        if not isinstance(obj["options"], list):
            raise InvalidConfig(f"'{where}.options' must be a JSON array, got {show(obj['options'])}")
        question = MultiQuestion(**common, options=tuple(obj["options"]), max_selected=obj["max_selected"])
    else:
        bounds, params = obj["range"], obj["params"]
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise InvalidConfig(f"'{where}.range' must be [lo, hi], got {show(bounds)}")
        lattice = params.get("lattice", DEFAULT_LATTICE) if isinstance(params, dict) else DEFAULT_LATTICE
        question = NumberQuestion(**common, lo=bounds[0], hi=bounds[1], steps=obj["steps"], lattice=lattice,
                                  clip=obj.get("clip", False))
    _params_check(question, obj["params"])
    return question


def make_question(
    *,
    id: str,
    text: str,
    kind: str,
    epsilon: float,
    mechanism: str | None = "auto",
    central: bool = False,
    optional: bool = False,
    share: int | None = None,
    categories: Sequence[str] | None = None,
    bins: Sequence[int | float] | None = None,
    options: Sequence[str] | None = None,
    max_selected: int | None = None,
    range: Sequence[int | float] | None = None,
    steps: int | None = None,
    clip: bool = False,
) -> Question:
    """A new question at ``epsilon``, resolving ``mechanism="auto"`` (the lowest-variance mechanism for the
    kind at that ε: ``choose_mechanism``, ``choose_set_mechanism``, ``choose_mean_mechanism``), the labels of
    a number histogram (``bins`` without ``categories``) and the default grid of a number (``steps``
    omitted: one step per integer when lo and hi are integers at most 2^20 apart). Creation-time checks
    (labels without surrounding whitespace) apply. Raises ``InvalidConfig``."""
    if not isinstance(kind, str) or kind not in _KINDS:
        raise InvalidConfig(f"question {show(id)}: 'kind' must be one of {', '.join(map(repr, QUESTION_KINDS))}, "
                            f"got {show(kind)}")
    eps = check_range(f"questions[{id}].epsilon", epsilon, MECHANISM_EPSILON, InvalidConfig)
    if central:
        if mechanism not in ("auto", None, CENTRAL_MECHANISM):
            raise InvalidConfig(f"question {id!r} of a central campaign has no device mechanism: leave it 'auto'")
        mechanism = CENTRAL_MECHANISM
    common: dict[str, Any] = {"id": id, "text": text, "epsilon": eps, "optional": optional, "share": share}
    if kind == "choice":
        if bins is not None:
            if not isinstance(bins, list | tuple) or len(bins) < 3:
                raise InvalidConfig(f"question {id!r}: 'bins' must be at least 3 edges (2 bins), got {show(bins)}")
            if categories is None:
                categories = bin_labels(list(bins))
        if categories is None:
            raise InvalidConfig(f"question {id!r}: a choice question needs 'categories' (or 'bins')")
        cats = check_categories(list(categories) if isinstance(categories, list | tuple) else categories)
        check_trimmed_labels(f"'questions[{id}].categories'", cats)
        if mechanism in ("auto", None):
            mechanism = choose_mechanism(len(cats), eps).name
        return ChoiceQuestion(**common, mechanism=str(mechanism), categories=cats,
                              bins=None if bins is None else tuple(bins), clip=clip)
    if kind == "multi":
        if options is None:
            raise InvalidConfig(f"question {id!r}: a multi question needs 'options'")
        opts = check_labels("'options'", list(options) if isinstance(options, list | tuple) else options,
                            sizes=(2, MAX_CATEGORIES), max_chars=MAX_CATEGORY_CHARS, noun="labels")
        check_trimmed_labels(f"'questions[{id}].options'", opts)
        m = len(opts) if max_selected is None else max_selected
        if mechanism in ("auto", None):
            if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= len(opts):
                raise InvalidConfig(f"'questions[{id}].max_selected' must be an integer in [1, {len(opts)}], "
                                    f"got {show(m)}")
            mechanism = choose_set_mechanism(eps, len(opts), m).name
        return MultiQuestion(**common, mechanism=str(mechanism), options=opts, max_selected=m)
    if range is None or not isinstance(range, list | tuple) or len(range) != 2:
        raise InvalidConfig(f"question {id!r}: a number question needs 'range' = [lo, hi], got {show(range)}")
    lo, hi = range
    if steps is None:
        whole = all(_is_number(v) and float(v).is_integer() for v in (lo, hi))
        if not whole or not 1 <= hi - lo <= NUMBER_STEPS[1]:
            raise InvalidConfig(
                f"question {id!r}: give 'steps' (the grid's number of equal steps over [lo, hi]); the default, one "
                "step per integer, needs integer lo < hi"
            )
        steps = int(hi - lo)
    if mechanism in ("auto", None):
        try:
            mechanism = choose_mean_mechanism(eps, steps).name
        except InvalidParameter as exc:
            raise InvalidConfig(f"question {id!r}: {exc}") from None
    return NumberQuestion(**common, mechanism=str(mechanism), lo=lo, hi=hi, steps=steps, clip=clip)

