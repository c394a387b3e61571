"""The campaign descriptor: the public config a device fetches, validates and pins before it answers.

The aggregator serves it at ``GET /api/v1/campaigns/<id>`` (JSON layout in ``docs/wire-format.md``).
Validation is strict and raises ``InvalidConfig`` naming the field and its allowed range, so a device never
randomizes under a descriptor it does not fully understand.

Trust models:

- ``local``: the device randomizes with ``mechanism`` at ``epsilon`` (ε-LDP, ``deniable.shared.mechanisms``)
  and only the randomized report leaves it; the payload is ``{"report": <wire report>, "groups": {...}}``.
- ``central``: the device sends its category index, encrypted, to a curator it trusts; the curator adds
  noise to each release, spending ``epsilon`` per release from a total ``budget`` (sequential composition,
  ``adjacency`` fixing the sensitivity). There is no device mechanism: ``mechanism`` is ``"none"``. The
  payload is ``{"value": <index>, "groups": {...}}``.

Recurring local campaigns (``"recurring": true``) collect in *rounds*: the payload also carries
``"round": "<label>"`` (required there, forbidden elsewhere), a device counts once per round, and each round
is estimated from its own reports. A device sends the same permanent randomized response for the same true
value in every round (``deniable.client.memo``), so ε is spent once per distinct value over all rounds.

Group fields (e.g. ``country``) are public attributes sent as they are (inside the encryption): they are not
randomized, and estimates per group are estimates over the reports that declared that group.

``group_values`` declares each group field's domain up front (``{"country": ["de", "fr", ...]}``). A report
with an undeclared value is refused, and a grouped estimate lists every declared value, empty ones too.
New central campaigns with group fields must declare every field's values (``create`` refuses them
otherwise): a release that listed only the values present in the data would reveal, without noise, that
someone with that value took part (a country with one respondent), which is not ε-DP under add/remove
adjacency. With a public domain, which groups appear depends on nothing but the descriptor. Descriptors
created before ``group_values`` existed still parse; the aggregator refuses grouped releases of them.

``shuffled``: the device randomizes at ``epsilon`` (ε₀, as in a local campaign) and sends the report through
  the shuffler named by the descriptor's ``shuffler`` object (:mod:`deniable.shared.shuffle`, nested
  encryption); the aggregator receives batches of at least ``shuffler.min_batch`` anonymous reports in a
  random order, a view that is (ε, δ)-DP with ε from the amplification bound at the declared ``delta``
  (:mod:`deniable.shared.amplification`). The inner payload is ``{"report": <wire report>}``: no group
  fields (they would split the anonymity set) and no rounds.

``admission`` (optional, any trust model) makes every report carry an anonymous one-time token
(:mod:`deniable.shared.tokens`, Privacy Pass with blind RSA): the descriptor pins the issuer's public key
and the number of tokens an account may get; the payload then also carries ``"token": "<base64url>"``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from deniable.shared import payload as payload_codec
from deniable.shared.accounting import Budget
from deniable.shared.canonical_json import canonical_json
from deniable.shared.envelope import Envelope
from deniable.shared.errors import InvalidConfig, InvalidParameter
from deniable.shared.fields import (
    check_categories,
    check_choice,
    check_group_fields,
    check_group_values,
    check_number,
    check_params,
    check_public_key,
    check_recurring,
    check_slug,
    check_text,
    check_trimmed_labels,
)
from deniable.shared.formats import DESCRIPTOR_VERSIONS, FORMAT_VERSION, SUITE_ID, SURVEY_FORMAT_VERSION
from deniable.shared.keys import decode_key, encode_key
from deniable.shared.limits import (
    CAMPAIGN_EPSILON,
    CAMPAIGN_STATUSES,
    CENTRAL_DELTA_RANGE,
    MAX_BUDGET,
    MAX_CATEGORIES,
    MAX_CATEGORY_CHARS,
    MAX_GROUP_FIELDS,
    MAX_GROUP_SIZE,
    MAX_GROUP_VALUE_CHARS,
    MAX_GROUP_VALUES,
    MAX_QUESTION_CHARS,
    MAX_RHO,
    SHUFFLE_DELTA_RANGE,
    check_range,
)
from deniable.shared.mechanisms import (
    Mechanism,
    choose_mechanism,
    mechanism_class,
    mechanism_from_name,
    mechanism_names,
)
from deniable.shared.messages import show
from deniable.shared.payload import Payload
from deniable.shared.questions import (
    CENTRAL_MECHANISM,
    LEGACY_QUESTION_ID,
    ChoiceQuestion,
    Question,
    question_from_json,
)
from deniable.shared.shuffle import ShufflerInfo
from deniable.shared.survey import Split, build_questions, check_survey_questions
from deniable.shared.tokens import Admission, Token

__all__ = [
    "ADJACENCIES",
    "CENTRAL_MECHANISM",
    "MAX_BUDGET",
    "MAX_CATEGORIES",
    "MAX_CATEGORY_CHARS",
    "MAX_GROUP_FIELDS",
    "MAX_GROUP_VALUES",
    "MAX_GROUP_VALUE_CHARS",
    "MAX_QUESTION_CHARS",
    "STATUSES",
    "TRUST_MODELS",
    "CampaignConfig",
]

TRUST_MODELS: tuple[str, ...] = ("local", "central", "shuffled")
ADJACENCIES: tuple[str, ...] = ("add-remove", "replace")
STATUSES: tuple[str, ...] = CAMPAIGN_STATUSES

_REQUIRED_KEYS = frozenset(
    {
        "id",
        "question",
        "categories",
        "epsilon",
        "mechanism",
        "params",
        "group_fields",
        "public_key",
        "format_version",
        "suite",
        "status",
        "trust_model",
    }
)
_OPTIONAL_KEYS = frozenset(
    {
        "budget", "adjacency", "group_values", "recurring", "delta", "budget_delta", "budget_rho", "group_size",
        "admission", "shuffler",
    }
)
#: Central-only keys that appear in the JSON only when set (descriptors without them keep their fingerprint).
_CENTRAL_OPTIONAL = ("delta", "budget_delta", "budget_rho", "group_size")
_UNPINNED_KEYS = frozenset({"status"})
#: A survey (format 3) has ``title``, ``questions`` and ``split`` instead of one question's four keys.
_LEGACY_ONLY_KEYS = frozenset({"question", "categories", "mechanism", "params"})
_SURVEY_REQUIRED_KEYS = (_REQUIRED_KEYS - _LEGACY_ONLY_KEYS) | {"title", "questions", "split"}
#: The ``mechanism`` attribute of a local survey (each question names its own).
SURVEY_MECHANISM = "survey"
#: The legacy one-question split.
_LEGACY_SPLIT = Split("per_question", "per_question", "one question: it runs at the whole epsilon")


@dataclass(frozen=True, kw_only=True)
class CampaignConfig:
    """A campaign's public descriptor, valid by construction (``InvalidConfig`` otherwise).

    ``params`` holds ``k`` (= number of categories) and the mechanism's public parameters
    (``Mechanism.public_params``: for OLH ``g = round(e^ε) + 1``, Wang et al. 2017).
    For central campaigns ``epsilon`` is what one release spends and ``budget`` the total ε of all releases.
    ``group_values`` maps group fields to their declared (public) values; it is required for every group
    field of a central campaign and optional for a local one.
    """

    id: str
    question: str
    categories: tuple[str, ...]
    epsilon: float
    mechanism: str
    params: Mapping[str, int]
    group_fields: tuple[str, ...]
    public_key: str
    format_version: int = FORMAT_VERSION
    suite: str = SUITE_ID
    status: Literal["open", "closed"] = "open"
    trust_model: Literal["local", "central", "shuffled"] = "local"
    budget: float | None = None
    adjacency: Literal["add-remove", "replace"] | None = field(default=None)
    group_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    recurring: bool = False
    delta: float | None = None
    budget_delta: float | None = None
    budget_rho: float | None = None
    group_size: int | None = None
    admission: Admission | None = None
    shuffler: ShufflerInfo | None = None
    questions: tuple[Question, ...] = ()
    split: Split = _LEGACY_SPLIT

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_slug("id", self.id)
        check_text("title" if self.is_survey else "question", self.question, MAX_QUESTION_CHARS)
        if not self.is_survey:
            set_(self, "categories", check_categories(self.categories))
        set_(self, "epsilon", check_range("epsilon", self.epsilon, CAMPAIGN_EPSILON, InvalidConfig))
        set_(self, "group_fields", check_group_fields(self.group_fields))
        set_(self, "group_values", MappingProxyType(check_group_values(self.group_values, self.group_fields)))
        check_choice("trust_model", self.trust_model, TRUST_MODELS)
        check_choice("status", self.status, STATUSES)
        check_public_key(self.public_key)
        check_recurring(self.recurring)
        if self.admission is not None and not isinstance(self.admission, Admission):
            raise InvalidConfig(f"'admission' must be an Admission, got {show(self.admission)}")
        if isinstance(self.format_version, bool) or self.format_version not in DESCRIPTOR_VERSIONS:
            raise InvalidConfig(
                f"'format_version' must be one of {list(DESCRIPTOR_VERSIONS)}, "
                f"got {show(self.format_version)}; update the client to read newer campaigns"
            )
        if self.suite != SUITE_ID:
            raise InvalidConfig(f"'suite' must be {SUITE_ID!r}, got {show(self.suite)}")
        if self.is_survey:
            self._check_survey()
        elif self.questions or self.split is not _LEGACY_SPLIT:
            raise InvalidConfig("'questions' and 'split' belong to surveys (format_version 3)")
        if self.trust_model == "central":
            self._check_central()
        elif self.trust_model == "shuffled":
            self._check_shuffled()
        else:
            self._check_local()
        if (self.shuffler is not None) != (self.trust_model == "shuffled"):
            raise InvalidConfig(
                "a shuffled campaign needs a 'shuffler' object (url, public_key, verify_key, min_batch)"
                if self.shuffler is None
                else "'shuffler' applies to shuffled campaigns only; leave it out"
            )
        if self.is_survey:
            return
        rules = {} if self.trust_model == "central" else _choice_class(self.mechanism).param_rules
        set_(self, "params", MappingProxyType(check_params(self.params, self._expected_params(), rules)))
        legacy = ChoiceQuestion(
            id=LEGACY_QUESTION_ID, text=self.question, epsilon=self.epsilon, mechanism=self.mechanism,
            share=1, categories=self.categories,
        )  # fmt: skip
        set_(self, "questions", (legacy,))

    @property
    def is_survey(self) -> bool:
        """True for a format 3 descriptor (``title``, ``questions``, ``split``); a format 1 or 2 descriptor is a
        one-question survey whose question is ``LEGACY_QUESTION_ID``."""
        return type(self.format_version) is int and self.format_version >= SURVEY_FORMAT_VERSION

    def _check_survey(self) -> None:
        if self.trust_model == "shuffled":
            raise InvalidConfig(
                "a survey (format_version 3) is local or central: the shuffler's inner payload carries one report "
                "(docs/wire-format.md §12); ask a shuffled campaign one question"
            )
        if self.categories or self.params:
            raise InvalidConfig("a survey (format_version 3) has no top-level 'categories' or 'params'")
        if not isinstance(self.questions, tuple) or not all(isinstance(q, Question) for q in self.questions):
            raise InvalidConfig("'questions' must be a tuple of Question")
        if not isinstance(self.split, Split):
            raise InvalidConfig(f"'split' must be a Split, got {show(self.split)}")
        check_survey_questions(self.questions, self.split, self.epsilon)
        expected = CENTRAL_MECHANISM if self.trust_model == "central" else SURVEY_MECHANISM
        if self.mechanism != expected:
            raise InvalidConfig(f"a {self.trust_model} survey's 'mechanism' attribute is {expected!r}")
        if any(q.central != (self.trust_model == "central") for q in self.questions):
            raise InvalidConfig(
                "the questions of a central survey have mechanism 'none', those of a local survey a mechanism each"
            )

    def _check_local(self) -> None:
        if self.budget is not None or self.adjacency is not None:
            raise InvalidConfig(
                "'budget' and 'adjacency' apply to central campaigns only; leave them null for local ones"
            )
        for name in _CENTRAL_OPTIONAL:
            if getattr(self, name) is not None:
                raise InvalidConfig(f"{name!r} applies to central campaigns only; leave it null for local ones")
        if self.is_survey:
            return
        names = mechanism_names("choice")
        check_choice("mechanism", self.mechanism, names)
        fixed_k = _choice_class(self.mechanism).fixed_k
        if fixed_k is not None and len(self.categories) != fixed_k:
            others = [name for name in names if _choice_class(name).fixed_k is None]
            raise InvalidConfig(
                f"mechanism {self.mechanism!r} needs exactly {fixed_k} categories, got {len(self.categories)}; "
                f"use {_or_list(others)}"
            )

    def _check_shuffled(self) -> None:
        """A shuffled campaign is a local one whose reports pass a shuffler: ε₀ = ``epsilon``, plus ``delta``."""
        if not isinstance(self.shuffler, ShufflerInfo):
            raise InvalidConfig(f"'shuffler' must be a ShufflerInfo, got {show(self.shuffler)}")
        if self.recurring:
            raise InvalidConfig(
                "'recurring' is not available for shuffled campaigns (the shuffler counts one report per device)"
            )
        if self.group_fields:
            raise InvalidConfig(
                "shuffled campaigns take no group fields: a group value travels beside the report to the aggregator "
                "and splits the batch into smaller anonymity sets, which the batch's (ε, δ) does not cover"
            )
        if self.format_version < 2:
            raise InvalidConfig("shuffled campaigns use format version 2")
        delta = self.delta
        object.__setattr__(self, "delta", None)  # _check_local refuses the central keys; this delta is ours
        self._check_local()
        low, high = SHUFFLE_DELTA_RANGE
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not low <= delta <= high:
            raise InvalidConfig(
                f"a shuffled campaign needs 'delta', a number in [{low:g}, {high:g}]: the δ of the central (ε, δ) "
                f"its batches satisfy, got {show(delta)}"
            )
        object.__setattr__(self, "delta", float(delta))

    def _check_central(self) -> None:
        if self.recurring:
            raise InvalidConfig(
                "'recurring' applies to local campaigns only: a central campaign's curator sees each raw "
                "answer, so there is no permanent randomized response to reuse across rounds"
            )
        if self.mechanism != CENTRAL_MECHANISM:
            raise InvalidConfig(
                f"central campaigns have no device mechanism: 'mechanism' must be {CENTRAL_MECHANISM!r} "
                f"(or 'auto', or left out, when creating one), got {show(self.mechanism)}"
            )
        self._check_central_budget()
        adjacency = "add-remove" if self.adjacency is None else self.adjacency
        check_choice("adjacency", adjacency, ADJACENCIES)
        object.__setattr__(self, "adjacency", adjacency)

    def _check_central_budget(self) -> None:
        """One budget form: ``budget`` (ε, with ``budget_delta`` for (ε, δ)) or ``budget_rho`` (zCDP)."""
        low, high = CENTRAL_DELTA_RANGE
        set_ = object.__setattr__
        for name in ("delta", "budget_delta"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                    raise InvalidConfig(f"{name!r} must be a number in [{low:g}, {high:g}], got {show(value)}")
                set_(self, name, float(value))
        if self.group_size is not None and (
            isinstance(self.group_size, bool) or not isinstance(self.group_size, int)
            or not 1 <= self.group_size <= MAX_GROUP_SIZE
        ):  # fmt: skip
            raise InvalidConfig(
                f"'group_size' must be an integer in [1, {MAX_GROUP_SIZE}] (reports one respondent may "
                f"contribute), got {show(self.group_size)}"
            )
        if self.budget_rho is not None:
            if self.budget is not None or self.budget_delta is not None:
                raise InvalidConfig(
                    "state one budget: 'budget' (ε, with 'budget_delta' for (ε, δ)) or 'budget_rho' (zCDP), not both"
                )
            set_(self, "budget_rho", check_number("budget_rho", self.budget_rho, MAX_RHO))
            return
        if self.budget is None:
            raise InvalidConfig(
                "central campaigns need a 'budget': the total ε of all releases (or 'budget_rho' for zCDP)"
            )
        budget = check_number("budget", self.budget, MAX_BUDGET)
        if budget < self.epsilon:
            raise InvalidConfig(
                f"'budget' ({budget:g}) must be at least 'epsilon' ({self.epsilon:g}), the ε of one release"
            )
        set_(self, "budget", budget)

    @property
    def privacy_budget(self) -> Budget:
        """The central budget in its stated form: pure ε, (ε, δ) with ``budget_delta``, or ρ."""
        if self.trust_model != "central":
            raise InvalidConfig(f"campaign {self.id!r} is local: its devices keep their own ε ledgers")
        if self.budget_rho is not None:
            return Budget.zcdp(self.budget_rho)
        assert self.budget is not None
        if self.budget_delta is not None:
            return Budget.approx(self.budget, self.budget_delta)
        return Budget.pure(self.budget)

    @property
    def undeclared_group_fields(self) -> tuple[str, ...]:
        """The group fields without declared ``group_values`` (never any in a campaign made by ``create``)."""
        return tuple(name for name in self.group_fields if name not in self.group_values)

    def _check_declared_groups(self) -> None:
        undeclared = self.undeclared_group_fields
        if self.trust_model == "central" and undeclared:
            raise InvalidConfig(
                f"central campaigns must declare 'group_values' for every group field, missing "
                f"{', '.join(map(repr, undeclared))}: a release lists every declared value (empty ones too) "
                "so that which groups exist reveals nothing about who took part"
            )

    def _expected_params(self) -> dict[str, int]:
        if self.trust_model == "central":
            return {"k": len(self.categories)}
        return {"k": len(self.categories), **self.build_mechanism().public_params()}

    # ------------------------------------------------------------------------------------------ building

    @classmethod
    def create(
        cls,
        *,
        id: str,
        question: str,
        categories: Sequence[str],
        epsilon: float,
        public_key: str | bytes,
        mechanism: str | None = "auto",
        group_fields: Sequence[str] = (),
        trust_model: str = "local",
        budget: float | None = None,
        adjacency: str | None = None,
        group_values: Mapping[str, Sequence[str]] | None = None,
        recurring: bool = False,
        delta: float | None = None,
        budget_delta: float | None = None,
        budget_rho: float | None = None,
        group_size: int | None = None,
        admission: Admission | None = None,
        shuffler: ShufflerInfo | Mapping[str, Any] | None = None,
    ) -> CampaignConfig:
        """A new open campaign, filling in ``params`` and resolving ``mechanism="auto"``.

        ``auto`` picks the lowest-variance local mechanism for (k, ε) (``choose_mechanism``); central
        campaigns take ``"auto"``, ``None`` or ``"none"``. ``public_key`` may be raw bytes or base64url.
        ``group_values`` declares each group field's values; a new central campaign must declare them for
        every group field (``InvalidConfig`` otherwise). ``from_json`` does not insist, so that descriptors
        of central campaigns created before ``group_values`` existed (and the wire-format vectors) still
        parse; the aggregator refuses grouped releases of those (see ``undeclared_group_fields``).
        ``recurring=True`` (local only) makes a campaign that collects in rounds. ``admission`` makes every
        report carry an admission token of that issuer.
        """
        cats = check_categories(categories)
        check_trimmed_labels("'categories'", cats)
        for name, values in (group_values.items() if isinstance(group_values, Mapping) else ()):
            if isinstance(values, list | tuple) and all(isinstance(v, str) for v in values):
                check_trimmed_labels(f"'group_values.{name}'", tuple(values))
        eps = check_range("epsilon", epsilon, CAMPAIGN_EPSILON, InvalidConfig)
        if trust_model != "central":
            check_choice("mechanism", mechanism, ("auto", *mechanism_names("choice")))
        if trust_model == "central" and mechanism in ("auto", None):
            mechanism = CENTRAL_MECHANISM
        elif trust_model != "central" and mechanism == "auto":
            mechanism = choose_mechanism(len(cats), eps).name
        params: dict[str, int] = {"k": len(cats)}
        chosen = mechanism_class(mechanism) if trust_model != "central" else None
        if chosen is not None and chosen.fixed_k in (None, len(cats)):  # else __post_init__ says why not
            params.update(_build(str(mechanism), eps, len(cats)).public_params())
        key = encode_key(public_key) if isinstance(public_key, bytes) else public_key
        config = cls(
            id=id,
            question=question,
            categories=cats,
            epsilon=eps,
            mechanism=str(mechanism),
            params=params,
            group_fields=check_group_fields(group_fields),
            public_key=key,
            trust_model=trust_model,  # type: ignore[arg-type]  # validated in __post_init__
            budget=budget,
            adjacency=adjacency,  # type: ignore[arg-type]
            group_values={} if group_values is None else group_values,  # type: ignore[arg-type]  # validated
            recurring=recurring,
            delta=delta,
            budget_delta=budget_delta,
            budget_rho=budget_rho,
            group_size=group_size,
            admission=admission,
            shuffler=ShufflerInfo.from_json(dict(shuffler)) if isinstance(shuffler, Mapping) else shuffler,
        )
        config._check_declared_groups()
        return config

    @classmethod
    def create_survey(
        cls,
        *,
        id: str,
        title: str,
        questions: Sequence[Mapping[str, Any]],
        epsilon: float,
        public_key: str | bytes,
        split: str = "auto",
        group_fields: Sequence[str] = (),
        trust_model: str = "local",
        budget: float | None = None,
        adjacency: str | None = None,
        group_values: Mapping[str, Sequence[str]] | None = None,
        recurring: bool = False,
        delta: float | None = None,
        budget_delta: float | None = None,
        budget_rho: float | None = None,
        group_size: int | None = None,
        admission: Admission | None = None,
    ) -> CampaignConfig:
        """A new open survey (format 3): 1..MAX_QUESTIONS questions of the kinds ``choice``, ``multi`` and
        ``number`` under one ε.

        Each question is a mapping of :func:`~deniable.shared.questions.make_question`'s keywords without
        ``epsilon``: ``{"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]}``,
        ``{"id": "apps", "text": ..., "kind": "multi", "options": [...], "max_selected": 3, "optional": True}``,
        ``{"id": "smoke", "text": ..., "kind": "choice", "categories": ["no", "yes"]}`` (``bins`` for the
        histogram of a number, ``share`` for the weight in the per-question split, ``mechanism`` a name or
        ``auto``). ``split``: ``per_question`` (sequential composition, ε_q = ε·share/Σ shares rounded down),
        ``sampling`` (each respondent answers one uniformly drawn question at the whole ε) or ``auto`` (the
        planner's lower predicted variance; the descriptor says which and why). The rest is as in
        :meth:`create`. Raises ``InvalidConfig``.
        """
        eps = check_range("epsilon", epsilon, CAMPAIGN_EPSILON, InvalidConfig)
        for name, values in (group_values.items() if isinstance(group_values, Mapping) else ()):
            if isinstance(values, list | tuple) and all(isinstance(v, str) for v in values):
                check_trimmed_labels(f"'group_values.{name}'", tuple(values))
        check_choice("trust_model", trust_model, TRUST_MODELS)
        built, chosen = build_questions(questions, epsilon=eps, split=split, central=trust_model == "central")
        key = encode_key(public_key) if isinstance(public_key, bytes) else public_key
        config = cls(
            id=id,
            question=title,
            categories=(),
            epsilon=eps,
            mechanism=CENTRAL_MECHANISM if trust_model == "central" else SURVEY_MECHANISM,
            params={},
            group_fields=check_group_fields(group_fields),
            public_key=key,
            format_version=SURVEY_FORMAT_VERSION,
            trust_model=trust_model,  # type: ignore[arg-type]  # validated in __post_init__
            budget=budget,
            adjacency=adjacency,  # type: ignore[arg-type]
            group_values={} if group_values is None else group_values,  # type: ignore[arg-type]  # validated
            recurring=recurring,
            delta=delta,
            budget_delta=budget_delta,
            budget_rho=budget_rho,
            group_size=group_size,
            admission=admission,
            questions=built,
            split=chosen,
        )
        config._check_declared_groups()
        return config

    def to_json(self) -> dict[str, Any]:
        """The JSON object served at ``GET /api/v1/campaigns/<id>`` (``docs/wire-format.md``).

        ``group_values`` appears only when declared, ``recurring`` only when true and ``admission`` only when
        set, so descriptors without them keep their canonical JSON and pinned fingerprint.
        """
        body: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "categories": list(self.categories),
            "epsilon": self.epsilon,
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "group_fields": list(self.group_fields),
            "public_key": self.public_key,
            "format_version": self.format_version,
            "suite": self.suite,
            "status": self.status,
            "trust_model": self.trust_model,
            "budget": self.budget,
            "adjacency": self.adjacency,
        }
        if self.group_values:
            body["group_values"] = {name: list(values) for name, values in self.group_values.items()}
        if self.recurring:
            body["recurring"] = True
        for name in _CENTRAL_OPTIONAL:
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        if self.admission is not None:
            body["admission"] = self.admission.to_json()
        if self.shuffler is not None:
            body["shuffler"] = self.shuffler.to_json()
        if self.is_survey:
            for key in _LEGACY_ONLY_KEYS:
                del body[key]
            body["title"] = self.question
            body["questions"] = [q.to_json() for q in self.questions]
            body["split"] = self.split.to_json()
        return body

    @classmethod
    def from_json(cls, obj: object) -> CampaignConfig:
        """Parse and validate a descriptor; raises ``InvalidConfig`` (and nothing else) naming the field."""
        if not isinstance(obj, dict):
            raise InvalidConfig(f"a campaign config must be a JSON object, got {show(obj)}")
        version = obj.get("format_version")
        if type(version) is int and version == SURVEY_FORMAT_VERSION:
            return cls._survey_from_json(obj)
        if type(version) is int and version not in DESCRIPTOR_VERSIONS:  # before the keys, which differ by version
            raise InvalidConfig(
                f"'format_version' must be one of {list(DESCRIPTOR_VERSIONS)}, got {version}; update the client to "
                "read newer campaigns"
            )
        missing = sorted(_REQUIRED_KEYS - set(obj))
        unknown = sorted(str(key) for key in set(obj) - _REQUIRED_KEYS - _OPTIONAL_KEYS)
        _refuse_wrong_keys(missing, unknown, "campaign config")
        for name in ("categories", "group_fields"):
            if not isinstance(obj[name], list):
                raise InvalidConfig(f"{name!r} must be a JSON array, got {show(obj[name])}")
        if not isinstance(obj["params"], dict):
            raise InvalidConfig(f"'params' must be a JSON object, got {show(obj['params'])}")
        return cls(
            id=obj["id"],
            question=obj["question"],
            categories=tuple(obj["categories"]),
            epsilon=obj["epsilon"],
            mechanism=obj["mechanism"],
            params=obj["params"],
            **_common_fields(obj),
            shuffler=None if obj.get("shuffler") is None else ShufflerInfo.from_json(obj["shuffler"]),
        )

    @classmethod
    def _survey_from_json(cls, obj: dict[str, Any]) -> CampaignConfig:
        missing = sorted(_SURVEY_REQUIRED_KEYS - set(obj))
        unknown = sorted(str(key) for key in set(obj) - _SURVEY_REQUIRED_KEYS - _OPTIONAL_KEYS)
        _refuse_wrong_keys(missing, unknown, "survey config (format_version 3)")
        if not isinstance(obj["group_fields"], list):
            raise InvalidConfig(f"'group_fields' must be a JSON array, got {show(obj['group_fields'])}")
        if not isinstance(obj["questions"], list):
            raise InvalidConfig(f"'questions' must be a JSON array, got {show(obj['questions'])}")
        questions = tuple(question_from_json(q, i) for i, q in enumerate(obj["questions"]))
        central = obj["trust_model"] == "central"
        return cls(
            id=obj["id"],
            question=obj["title"],
            categories=(),
            epsilon=obj["epsilon"],
            mechanism=CENTRAL_MECHANISM if central else SURVEY_MECHANISM,
            params={},
            **_common_fields(obj),
            questions=questions,
            split=Split.from_json(obj["split"]),
        )

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickle and deep-copy through the wire form (``params`` is a read-only mapping proxy)."""
        return (type(self).from_json, (self.to_json(),))

    # ------------------------------------------------------------------------------------------ using

    @property
    def k(self) -> int:
        """The number of categories (one-question campaigns; ``InvalidConfig`` for a survey)."""
        self._not_survey("k")
        return len(self.categories)

    @property
    def envelope_version(self) -> int:
        """The ``v`` of this campaign's envelopes: the descriptor's format, except a survey's (format 3), whose
        envelopes are version 2 (the same bytes; the payload inside follows the descriptor)."""
        return min(self.format_version, FORMAT_VERSION)

    @property
    def title(self) -> str:
        """The survey's title (format 3) or the question (formats 1 and 2)."""
        return self.question

    @property
    def question_ids(self) -> tuple[str, ...]:
        """The ids of the questions, in descriptor order (``("answer",)`` for formats 1 and 2)."""
        return tuple(q.id for q in self.questions)

    def question_by_id(self, question_id: object) -> Question:
        """The question ``question_id``; ``InvalidParameter`` naming the survey's questions otherwise."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise InvalidParameter(
            f"campaign {self.id!r} has no question {show(question_id)}; its questions are "
            + ", ".join(repr(q.id) for q in self.questions)
        )

    def _not_survey(self, what: str) -> None:
        if self.is_survey:
            raise InvalidConfig(
                f"campaign {self.id!r} is a survey of {len(self.questions)} question(s): {what} belongs to each "
                "question (config.questions, config.question_by_id(...))"
            )

    @cached_property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte X25519 public key to seal reports to (decoded once per descriptor)."""
        raw: bytes = decode_key(self.public_key, name="public_key")
        return raw

    def build_mechanism(self) -> Mechanism[Any]:
        """The local mechanism (``mechanism_from_name(mechanism, epsilon=, k=)``), built once and cached.

        Raises ``InvalidConfig`` for a central campaign, which has none.
        """
        if self.trust_model == "central":
            raise InvalidConfig(
                f"campaign '{self.id}' is a central campaign: the device sends its value to the curator "
                "and has no mechanism to randomize with"
            )
        self._not_survey("the mechanism")
        return self._mechanism

    @cached_property
    def _mechanism(self) -> Mechanism[Any]:
        return _build(self.mechanism, self.epsilon, self.k)

    def category_index(self, label: object) -> int:
        """The index of ``label`` among the categories; ``InvalidParameter`` if it is not one of them."""
        self._not_survey("a category index")
        index = self._index.get(label) if isinstance(label, str) else None
        if index is None:
            shown = ", ".join(repr(c) for c in self.categories[:10])
            more = f", ... ({self.k} categories)" if self.k > 10 else ""
            raise InvalidParameter(
                f"value {show(label)} is not a category of campaign '{self.id}'; "
                f"expected one of {shown}{more}"
            )
        return index

    @cached_property
    def _index(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.categories)}

    def pinned_fingerprint(self) -> str:
        """SHA-256 (64 hex) of the canonical JSON (RFC 8785) of every field except ``status``.

        A device pins this at first use and refuses a descriptor whose fingerprint differs. The question is
        included: a changed wording under the same id asks for different consent, so it is a different
        campaign. ``status`` is excluded: closing a campaign is its normal life. Computed once per
        descriptor (it is immutable).
        """
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:  # every field is frozen, and status (the one that is not pinned) is left out
        pinned = {key: value for key, value in self.to_json().items() if key not in _UNPINNED_KEYS}
        if self.is_survey:  # each question's canonical JSON, encoded once per question
            pinned["questions"] = [q.canonical for q in self.questions]
        return hashlib.sha256(canonical_json(pinned)).hexdigest()

    @cached_property
    def padded_length(self) -> int | None:
        """The byte length every version-2 plaintext of this campaign is padded to (None in version 1);
        see :func:`deniable.shared.payload.padded_length`. Computed once per descriptor."""
        return payload_codec.padded_length(self)

    @cached_property
    def declared_group_values(self) -> dict[str, frozenset[str]]:
        """Each group field with declared values, as a set (the payload codec's membership test)."""
        return {name: frozenset(values) for name, values in self.group_values.items()}

    # -- the payload codec (deniable.shared.payload), as methods of the descriptor it checks against ------

    def seal(self, payload: Mapping[str, Any], *, device_secret: bytes, report_id: str | None = None,
             public_key: bytes | None = None) -> Envelope:  # fmt: skip
        """Seal ``payload`` for this campaign (:func:`deniable.shared.payload.seal_payload`)."""
        return payload_codec.seal_payload(
            self, payload, device_secret=device_secret, report_id=report_id, public_key=public_key
        )

    def check_groups(self, groups: Mapping[str, str] | None) -> dict[str, str]:
        """``groups`` checked against this campaign (:func:`deniable.shared.payload.check_groups`)."""
        return payload_codec.check_groups(self, groups)

    def make_payload(
        self,
        report_or_value: Any,
        groups: Mapping[str, str] | None = None,
        round: str | None = None,
        token: Token | None = None,
    ) -> dict[str, Any]:
        """The plaintext of one envelope (:func:`deniable.shared.payload.make_payload`)."""
        return payload_codec.make_payload(self, report_or_value, groups, round, token)

    def decode_payload(self, payload: object) -> tuple[Any, dict[str, str]]:
        """``(report or value, groups)`` of a decrypted payload: the checks of :meth:`decode`."""
        decoded = payload_codec.decode_payload(self, payload)
        return decoded.value, decoded.groups

    def decode(self, payload: object) -> Payload:
        """Validate a decrypted payload (:func:`deniable.shared.payload.decode_payload`); ``InvalidReport``."""
        return payload_codec.decode_payload(self, payload)


# ---------------------------------------------------------------------------------------------- helpers


def _build(name: str, epsilon: float, k: int) -> Mechanism[Any]:
    try:
        return mechanism_from_name(name, epsilon=epsilon, k=k)
    except InvalidParameter as exc:
        raise InvalidConfig(f"mechanism {name!r} cannot run with epsilon={epsilon:g}, k={k}: {exc}") from exc


def _choice_class(name: str) -> type[Mechanism[Any]]:
    """The registered class of a (validated) one-choice mechanism name."""
    cls = mechanism_class(name, "choice")
    assert cls is not None, name
    return cls


def _or_list(names: Sequence[str]) -> str:
    """``'grr', 'oue' or 'olh'``."""
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _refuse_wrong_keys(missing: list[str], unknown: list[str], what: str) -> None:
    """``InvalidConfig`` naming the missing keys and up to five unknown ones (shown, not echoed whole)."""
    if missing or unknown:
        parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
        parts += [f"unknown {', '.join(show(k) for k in unknown[:5])}"] if unknown else []
        raise InvalidConfig(f"{what} keys are wrong: {'; '.join(parts)}")


def _common_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments that single-question (v1, v2) and survey (v3) descriptors share."""
    return {
        "group_fields": tuple(obj["group_fields"]),
        "public_key": obj["public_key"],
        "format_version": obj["format_version"],
        "suite": obj["suite"],
        "status": obj["status"],
        "trust_model": obj["trust_model"],
        "budget": obj.get("budget"),
        "adjacency": obj.get("adjacency"),
        "group_values": obj.get("group_values", {}),
        "recurring": obj.get("recurring", False),
        "delta": obj.get("delta"),
        "budget_delta": obj.get("budget_delta"),
        "budget_rho": obj.get("budget_rho"),
        "group_size": obj.get("group_size"),
        "admission": None if obj.get("admission") is None else Admission.from_json(obj["admission"]),
    }
