"""The device client: ``Client.submit`` randomizes, accounts for ε, encrypts and queues; ``flush`` delivers.

Order of operations in :meth:`Client.submit`, each step before the next can happen:

1. the public config is fetched, validated and checked against the pin (pinned at first use; a config
   validated earlier in this process is used if the aggregator is unreachable);
2. the value is checked against the categories (unknown value: ``InvalidParameter``); central campaigns
   are refused unless the client was built with ``allow_central=True``;
3. in one SQLite transaction: a memoized report is re-queued as it is (same envelope, same report id,
   nothing spent); otherwise the budget is checked (:mod:`deniable.client.ledger`), the value is
   randomized with the mechanism's exact sampler driven by an HMAC_DRBG derived from the device secret
   (:mod:`deniable.client.memo`: a one-shot answer and its report id are a function of secret, campaign,
   config fingerprint and value, so a device whose database was lost re-sends the identical report),
   sealed with HPKE to the campaign key, and the ε spend, the memo and the outbox entry are written
   together. A round of a recurring campaign re-sends the permanent response of its value under the
   round's own report id; ε is spent only for a value never answered before.

The raw value exists only in memory during the call; the database receives the sealed envelope only.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from deniable.shared.contract import CLIENT_BATCH
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import AdmissionTokenRequired, AnswerChanged, InvalidParameter
from deniable.shared.fields import check_round, plural
from deniable.shared.ids import make_pseudonym
from deniable.shared.limits import DEVICE_BUDGET_MAX, OUTBOX_MAX_AGE_DEFAULT, OUTBOX_MAX_AGE_RANGE
from deniable.shared.questions import LEGACY_QUESTION_ID
from deniable.shared.tokens import Token

from .config import ValidatedConfigs, resolve_config
from .ledger import Ledger, build_ledger, check_budget, fmt_epsilon
from .memo import (
    answer_tag,
    drawn_question,
    one_shot_answer,
    permanent_response,
    round_report_id,
    survey_answer_id,
    survey_permanent,
    survey_round_report_id,
)
from .outbox import FlushResult, Outbox, RetryPolicy
from .report import central_refusal, normalize_answers, privacy_cost, seal_answer
from .state import (
    DeviceState,
    ExpiredReport,
    PendingReport,
    Rejection,
    RoundRow,
    SpendRow,
    state_errors,
)
from .tokens import TokenBatch, held, store_tokens, take_token
from .transport import HTTPTransport, Transport

__all__ = ["Client", "ForgetWarning", "Forgotten", "Receipt"]


@dataclass(frozen=True, kw_only=True)
class Receipt:
    """The outcome of one ``submit``: which report stands for the answer and what it cost.

    ``memoized`` is True when an earlier report was re-queued (``epsilon_spent`` is then 0); ``queued``
    tells whether the envelope waits in the outbox (False once the aggregator rejected that report).
    ``round`` is the round answered (recurring campaigns), else None.
    """

    campaign_id: str
    report_id: str
    epsilon_spent: float
    memoized: bool
    recurring: bool
    trust_model: str
    queued: bool
    round: str | None = None


class ForgetWarning(UserWarning):
    """:meth:`Client.forget` was called: answering the forgotten campaign again spends its ε again."""


@dataclass(frozen=True, kw_only=True)
class Forgotten:
    """What :meth:`Client.forget` dropped: whether a config was ``pinned``, how many queued reports were
    ``dropped`` undelivered, and the ε already ``spent`` on the campaign (it stays on the ledger)."""

    campaign_id: str
    pinned: bool
    dropped: int
    spent: float

    def warning(self) -> str:
        """The warning every caller shows: what was forgotten and what answering again costs."""
        queued = f"; {plural(self.dropped, 'queued report')} dropped undelivered" if self.dropped else ""
        return (
            f"forgot campaign {self.campaign_id!r} on this device (pinned config and memoized answer{queued}). "
            f"Answering it again spends its ε again; the ε {fmt_epsilon(self.spent)} already spent on it stays "
            "on the ledger"
        )


def _positive(name: str, value: object, upper: float = DEVICE_BUDGET_MAX) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidParameter(f"{name!r} must be a finite number in (0, {upper:g}], got {value!r}")
    if not 0 < value <= upper:
        raise InvalidParameter(f"{name!r} must be a finite number in (0, {upper:g}], got {value!r}")
    return Fraction(value)


class Client:
    """A device's LDP client (thread-safe: one lock around its state; flushes are serialized).

    ``Client(aggregator_url, state_dir=None, *, max_epsilon_per_campaign=4.0, lifetime_budget=10.0,
    timeout=10.0, transport=None, allow_central=False)``. ``state_dir=None`` keeps the state in memory.
    ``allow_central=True`` lets the device answer *central* campaigns, whose raw answer goes (encrypted) to
    a curator the user chose to trust; the default refuses them, so nothing un-randomized leaves the device.
    ``durability="normal"`` (default) or ``"full"``: see :mod:`deniable.client.state` (``"full"`` fsyncs
    every answer; ``"normal"`` fsyncs once per flush, before anything is sent). ``batch_size`` (≤ ``CLIENT_BATCH``, 500)
    and ``retry`` (:class:`RetryPolicy`) tune delivery. ``outbox_max_age``: seconds a report may wait
    undelivered (default 30 days, at least a minute); then a flush records it as expired in the ledger
    (:meth:`expired`) instead of sending it.

    Every failure of the device's own storage (a read-only or full disk, a damaged secret or database,
    another process holding the state too long) is a :class:`~deniable.shared.errors.DeviceStateError`
    subclass whose message says what to do; a failed call changes nothing, so nothing queued is lost.
    A state dir whose secret survives but whose ledger is gone raises
    :class:`~deniable.shared.errors.LedgerLost` unless ``reset_ledger=True`` (what a reset costs:
    :mod:`deniable.client.state`).
    """

    def __init__(
        self,
        aggregator_url: str,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        max_epsilon_per_campaign: float = 4.0,
        lifetime_budget: float = 10.0,
        timeout: float = 10.0,
        transport: Transport | None = None,
        allow_central: bool = False,
        batch_size: int = CLIENT_BATCH,
        retry: RetryPolicy | None = None,
        durability: str = "normal",
        outbox_max_age: float = OUTBOX_MAX_AGE_DEFAULT,
        reset_ledger: bool = False,
    ) -> None:
        self._per_campaign = _positive("max_epsilon_per_campaign", max_epsilon_per_campaign)
        self._lifetime = _positive("lifetime_budget", lifetime_budget)
        low, high = OUTBOX_MAX_AGE_RANGE
        if (
            isinstance(outbox_max_age, bool)
            or not isinstance(outbox_max_age, int | float)
            or not low <= outbox_max_age <= high
        ):
            raise InvalidParameter(
                f"'outbox_max_age' must be a number of seconds in [{low:g}, {high:g}] (default "
                f"{OUTBOX_MAX_AGE_DEFAULT:g}, 30 days), got {outbox_max_age!r}"
            )
        self.outbox_max_age = float(outbox_max_age)
        self.aggregator_url = aggregator_url
        self.allow_central = bool(allow_central)
        self._transport: Transport = transport or HTTPTransport(aggregator_url, timeout=timeout)
        self._lock = threading.RLock()
        self._state = DeviceState(state_dir, durability=durability, reset_ledger=reset_ledger)
        try:
            with state_errors(self._state.path):
                self._state.remember_aggregator(aggregator_url)
        except BaseException:
            self._state.close()
            raise
        self._configs = ValidatedConfigs()
        self._outbox = Outbox(
            self._state,
            self._transport,
            self._lock,
            batch_size=batch_size,
            policy=retry,
            max_age=self.outbox_max_age,
            route=self._route,
        )
        self._timeout = timeout
        self._shufflers: dict[str, Transport] = {}

    def _route(self, campaign_id: str) -> Transport:
        """Where the campaign's reports go: its shuffler (a shuffled campaign, known from the validated config
        or the pin) or the aggregator."""
        config = self._configs.get(campaign_id)
        url = None if config is None or config.shuffler is None else config.shuffler.url
        if config is None:
            pinned = self._state.pinned(campaign_id)
            url = None if pinned is None else json.loads(pinned[1]).get("shuffler_url")
        if url is None:
            return self._transport
        transport = self._shufflers.get(url)
        if transport is None:
            transport = self._shufflers[url] = HTTPTransport(url, timeout=self._timeout)
        return transport

    @property
    def state_dir(self) -> str | None:
        """Where the state lives, or None for in-memory state."""
        return None if self._state.path is None else str(self._state.path)

    def close(self) -> None:
        """Release the state database (queued reports stay on disk for the next Client)."""
        with self._lock, state_errors(self._state.path):
            self._state.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answering ----------------------------------------------------------------------------------------
    def submit(
        self,
        campaign_id: str,
        value: Any,
        groups: Mapping[str, str] | None = None,
        *,
        recurring: bool = False,
        round: str | None = None,
        reanswer: bool = False,
    ) -> Receipt:
        """Answer ``campaign_id`` with the category label ``value``; the report is queued, not yet sent.

        A *survey* (format 3) takes its answers as a dict, all in one envelope:
        ``submit("health", {"smoke": "yes", "age": 37, "apps": ["mail", "maps"]})`` (a category label for a
        ``choice`` question, or a number for one with ``bins``; a list of option labels for ``multi``; an int
        or float for ``number``). A question left out (or None) is skipped where the question is
        ``optional`` (sent as a padded ``null``, the same size). Every answer is checked before anything is
        drawn: an unknown category or option, too many options, a number out of range (unless the question
        clips), NaN or the wrong type raise :class:`~deniable.shared.errors.InvalidAnswer` naming the
        question (``.question``), and nothing is spent or queued. The survey's ε is charged once for all
        its questions, whichever split it uses. A one-question survey also takes its answer bare.

        One-shot campaigns (the default): the first answer spends the campaign's ε once and stands;
        the same answer (value and groups) again re-queues the identical report and spends nothing. A
        *different* answer raises :class:`~deniable.shared.errors.AnswerChanged`, naming when the earlier
        one was given: a new answer would spend ε again, and the aggregator counts one answer per device.
        ``reanswer=True`` replaces the earlier answer where the campaign can still take it, i.e. while
        that report has not been delivered (queued, rejected or expired): the old report leaves the outbox
        and the new one spends ε again (both count in the ledger, since the old one may have been seen).
        A delivered answer cannot be replaced: the aggregator would count the new report as a duplicate.

        A campaign whose descriptor is recurring collects in rounds: pass ``recurring=True`` and a
        ``round`` label (e.g. ``"2026-11-29"``). Each round carries the permanent randomized response of
        the value (see :mod:`deniable.client.memo`), so ε is spent once per distinct value over all rounds;
        each round takes one answer (the same round again re-queues it; another value in the same round
        raises ``AnswerChanged``, and ``reanswer=True`` replaces it while undelivered, as for one-shot
        campaigns).

        Raises ``InvalidParameter`` (unknown value, bad groups), ``AnswerChanged``, ``InvalidConfig``
        (invalid or changed config, central campaign not allowed), ``BudgetExceeded``, ``UnknownCampaign``,
        ``CampaignClosed``, ``TransportError`` (the aggregator is unreachable and this Client has not
        validated the campaign yet; nothing was spent or queued), ``DeviceStateError``.
        """
        with self._lock, state_errors(self._state.path):
            pseudonym = make_pseudonym(self._state.secret, campaign_id)  # validates the id
            config = resolve_config(self._state, self._transport, campaign_id, self._configs)
            index: Any
            if config.is_survey:
                index = normalize_answers(config, value)  # the normalized answers, checked per question
            else:
                if isinstance(value, Mapping) and set(value) == {LEGACY_QUESTION_ID}:
                    value = value[LEGACY_QUESTION_ID]  # a one-question campaign answered as a survey
                index = config.category_index(value)
            if config.trust_model == "central" and not self.allow_central:
                raise central_refusal(config)
            if recurring and config.trust_model == "central":
                raise InvalidParameter(
                    f"campaign {campaign_id!r} is central: recurring=True applies to local campaigns only"
                )
            if config.recurring:
                if not recurring or round is None:
                    raise InvalidParameter(
                        f"campaign {campaign_id!r} is recurring and collects in rounds: pass recurring=True "
                        "and round='<label>' (e.g. round='2026-11-29'), the round this answer belongs to"
                    )
                answer_round = self._answer_survey_round if config.is_survey else self._answer_round
                return answer_round(config, index, pseudonym, groups, check_round(round, InvalidParameter), reanswer)
            if recurring or round is not None:
                raise InvalidParameter(
                    f"campaign {campaign_id!r} is not recurring: it counts one answer per device, so leave "
                    "recurring=False and round=None (a campaign created with \"recurring\": true collects in rounds)"
                )
            return self._answer(config, index, pseudonym, groups, reanswer)

    def _check_budget(self, config: CampaignConfig, cost: Fraction) -> tuple[Fraction, Fraction]:
        """Raise ``BudgetExceeded`` if spending ``cost`` on ``config`` passes its cap or the lifetime budget;
        else the balances read, ``(ε spent on it, ε spent in all)``, for :meth:`DeviceState.record_spend`
        in the same transaction."""
        campaign_spent, total_spent = self._state.balances(config.id)
        check_budget(
            config.id,
            cost,
            campaign_spent=campaign_spent,
            total_spent=total_spent,
            per_campaign=self._per_campaign,
            lifetime_budget=self._lifetime,
        )
        return campaign_spent, total_spent

    def _answer(
        self,
        config: CampaignConfig,
        index: Any,
        pseudonym: str,
        groups: Mapping[str, str] | None,
        reanswer: bool,
    ) -> Receipt:
        """A one-shot answer: the first spends ε; the same answer again re-queues that report and spends
        nothing; another value or other groups raise :class:`AnswerChanged`, unless ``reanswer`` replaces
        an answer that has not been delivered yet (spending ε again)."""
        cost = privacy_cost(config)
        checked = config.check_groups(groups)
        tag = answer_tag(self._state.secret, config.id, index, checked)
        with self._state.transaction() as db:
            current = self._state.latest_report(config.id)
            if current is not None:
                if current.answer_tag is None or current.answer_tag == tag:
                    # the same answer (or one stored before answers were tagged): the memo stands
                    return self._resend(current, db)
                status = self._state.report_status(current.report_id)
                if not reanswer or status == "delivered":
                    raise _changed(config, current.created, cost, status)
                DeviceState.withdraw(db, current.report_id)
            report_id, report = one_shot_answer(config, self._state.secret, index)
            # a report of this campaign paid before (a re-answer back to an earlier value); with none at all
            # (a first answer, or a forgotten campaign, whose reports went with it) there is nothing to look up
            paid = None if current is None else self._state.report(report_id)
            if paid is not None:
                # a re-answer back to a value answered before: the derived report is the same one, already
                # paid for; it is sealed with the groups given now and becomes the answer that stands
                envelope = seal_answer(
                    config, self._state.secret, report, checked, report_id=report_id,
                    token=self._spend_token(config, db),
                )  # fmt: skip
                text = envelope.to_text()
                DeviceState.reuse_report(db, report_id, text, tag)
                DeviceState.enqueue(db, report_id, config.id, text)
                return Receipt(
                    campaign_id=config.id, report_id=report_id, epsilon_spent=0.0, memoized=True, recurring=False,
                    trust_model=config.trust_model, queued=True
                )
            balances = self._check_budget(config, cost)
            envelope = seal_answer(
                config, self._state.secret, report, checked, report_id=report_id, token=self._spend_token(config, db)
            )
            text = envelope.to_text()
            row = SpendRow(
                report_id=envelope.report_id, campaign_id=config.id, recurring=False, trust_model=config.trust_model,
                epsilon=cost, envelope=text, answer_tag=tag
            )
            DeviceState.record_spend(db, row, balances)
            DeviceState.enqueue(db, row.report_id, row.campaign_id, text)
        return Receipt(
            campaign_id=config.id, report_id=row.report_id, epsilon_spent=float(cost), memoized=False, recurring=False,
            trust_model=config.trust_model, queued=True
        )

    def _answer_round(
        self,
        config: CampaignConfig,
        index: int,
        pseudonym: str,
        groups: Mapping[str, str] | None,
        round: str,
        reanswer: bool = False,
    ) -> Receipt:
        """One round's answer: the permanent response of ``index`` under the round's own report id.

        ε is charged only when this value was never answered before in the campaign (in any round).
        """
        report_id, report = permanent_response(config.build_mechanism(), self._state.secret, config.id, index)
        with self._state.transaction() as db:
            given = self._given_round(db, config, round, report_id, reanswer)
            if given is not None:
                return given
            paid = self._state.report(report_id) is not None
            cost = Fraction(0) if paid else privacy_cost(config)
            balances = None if paid else self._check_budget(config, cost)
            envelope = seal_answer(
                config,
                self._state.secret,
                report,
                groups,
                report_id=round_report_id(self._state.secret, config.id, index, round),
                round=round,
                token=self._spend_token(config, db),
            )
            text = envelope.to_text()
            if balances is not None:
                DeviceState.record_spend(db, SpendRow(
                    report_id=report_id, campaign_id=config.id, recurring=True, trust_model=config.trust_model,
                    epsilon=cost, envelope=text
                ), balances)
            DeviceState.record_round(db, RoundRow(config.id, round, envelope.report_id, report_id, text))
            DeviceState.enqueue(db, envelope.report_id, config.id, text)
        return Receipt(
            campaign_id=config.id, report_id=envelope.report_id, epsilon_spent=float(cost), memoized=False,
            recurring=True, trust_model=config.trust_model, queued=True, round=round
        )

    def _given_round(
        self, db: sqlite3.Connection, config: CampaignConfig, round: str, answer_id: str, reanswer: bool
    ) -> Receipt | None:
        """The receipt of this round's answer when it was given already with the same ``answer_id`` (queued
        again unless the aggregator rejected it), or None when the round is still to be answered.

        A different answer given before raises :class:`AnswerChanged`, unless ``reanswer`` and the first is
        not yet delivered: then it is withdrawn and the round forgotten (None).
        """
        given = self._state.round_answer(config.id, round)
        if given is not None and given.answer_id != answer_id:
            status = self._state.report_status(given.report_id)
            if not reanswer or status == "delivered":
                answered = self._state.round_created(config.id, round) or 0.0
                raise _changed(config, answered, privacy_cost(config), status, round)
            DeviceState.withdraw(db, given.report_id)
            DeviceState.forget_round(db, config.id, round)
            return None
        if given is None:
            return None
        queued = not self._state.rejected(given.report_id)
        if queued:
            DeviceState.enqueue(db, given.report_id, config.id, given.envelope)
        return Receipt(
            campaign_id=config.id, report_id=given.report_id, epsilon_spent=0.0, memoized=True, recurring=True,
            trust_model=config.trust_model, queued=queued, round=round
        )

    def _answer_survey_round(
        self,
        config: CampaignConfig,
        answers: dict[str, Any],
        pseudonym: str,
        groups: Mapping[str, str] | None,
        round: str,
        reanswer: bool = False,
    ) -> Receipt:
        """One round's answer to a recurring survey: each asked question's permanent response of its answer
        (:func:`~deniable.client.memo.survey_permanent`), under the round's own report id.

        The ledger pays ε_q once per distinct answer of question q (its permanent id), over all rounds: an
        unchanged survey costs nothing more, a changed answer to one question costs that question's ε. A
        sampling survey always asks this device the same question (:func:`~deniable.client.memo.drawn_question`).
        """
        secret = self._state.secret
        drawn = drawn_question(config, secret)
        asked = range(len(config.questions)) if drawn is None else (drawn,)
        permanents: list[tuple[int, str | None, Any]] = []
        for i in asked:  # every asked question draws, a skipped one its dummy: a fixed pattern
            answer = answers[config.questions[i].id]
            permanent_id, report = survey_permanent(config, secret, i, answer)
            permanents.append((i, None if answer is None else permanent_id, None if answer is None else report))
        answer_id = survey_answer_id(config, secret, answers)
        with self._state.transaction() as db:
            given = self._given_round(db, config, round, answer_id, reanswer)
            if given is not None:
                return given
            unpaid = [
                (config.questions[i], pid) for i, pid, _ in permanents
                if pid is not None and self._state.report(pid) is None
            ]  # fmt: skip
            cost = sum((Fraction(q.epsilon) for q, _ in unpaid), Fraction(0))
            balances = self._check_budget(config, cost) if unpaid else None
            reports = {config.questions[i].id: report for i, _, report in permanents}
            envelope = seal_answer(
                config, secret, reports, groups,
                report_id=survey_round_report_id(config, secret, answers, round),
                round=round, token=self._spend_token(config, db),
            )  # fmt: skip
            text = envelope.to_text()
            for question, pid in unpaid:
                row = SpendRow(
                    report_id=pid, campaign_id=config.id, recurring=True, trust_model=config.trust_model,
                    epsilon=Fraction(question.epsilon), envelope=text,
                )
                balances = DeviceState.record_spend(db, row, balances)
            DeviceState.record_round(db, RoundRow(config.id, round, envelope.report_id, answer_id, text))
            DeviceState.enqueue(db, envelope.report_id, config.id, text)
        return Receipt(
            campaign_id=config.id, report_id=envelope.report_id, epsilon_spent=float(cost), memoized=False,
            recurring=True, trust_model=config.trust_model, queued=True, round=round
        )

    # -- admission tokens ---------------------------------------------------------------------------------
    def request_tokens(self, campaign_id: str, count: int) -> TokenBatch:
        """``count`` blinded admission-token requests for the campaign (see :mod:`deniable.client.tokens`):
        forward ``batch.requests`` to the app's backend, then pass its answer to :meth:`add_tokens`."""
        with self._lock, state_errors(self._state.path):
            config = resolve_config(self._state, self._transport, campaign_id, self._configs)
            return TokenBatch.create(config, count)

    def add_tokens(self, batch: TokenBatch, responses: Sequence[object]) -> int:
        """Unblind and verify the issuer's responses to ``batch`` and store the tokens; returns how many
        tokens of the campaign the device now holds. Raises ``InvalidParameter`` (nothing stored) when a
        response does not verify."""
        tokens = batch.finalize(responses)
        with self._lock, state_errors(self._state.path), self._state.transaction() as db:
            store_tokens(db, batch.campaign_id, tokens)
            return held(db, batch.campaign_id)

    def obtain_tokens(self, campaign_id: str, count: int, issue: Callable[[list[str]], Sequence[object]]) -> int:
        """:meth:`request_tokens`, ``issue(requests)`` (the app's call to its backend), :meth:`add_tokens`."""
        batch = self.request_tokens(campaign_id, count)
        return self.add_tokens(batch, issue(batch.requests))

    def tokens(self, campaign_id: str) -> int:
        """How many unspent admission tokens of the campaign the device holds."""
        with self._lock, state_errors(self._state.path), self._state.transaction() as db:
            return held(db, campaign_id)

    @staticmethod
    def _spend_token(config: CampaignConfig, db: sqlite3.Connection) -> Token | None:
        """Take one admission token for a new report (in the answer's transaction), or None if the campaign
        takes none; ``AdmissionTokenRequired`` (nothing spent) if the device holds none."""
        if config.admission is None:
            return None
        token = take_token(db, config.id)
        if token is None:
            raise AdmissionTokenRequired(
                f"campaign {config.id!r} accepts a report only with an admission token and this device holds "
                "none for it: obtain tokens through the app (Client.obtain_tokens) first; nothing was spent"
            )
        return token

    def _resend(self, row: SpendRow, db: sqlite3.Connection) -> Receipt:
        """Re-queue a memoized envelope unchanged (the aggregator sees a duplicate); spends nothing.

        A report the aggregator rejected is not queued again (it would be rejected again).
        """
        queued = not self._state.rejected(row.report_id)
        if queued:
            DeviceState.enqueue(db, row.report_id, row.campaign_id, row.envelope)
        return Receipt(
            campaign_id=row.campaign_id, report_id=row.report_id, epsilon_spent=0.0, memoized=True,
            recurring=row.recurring, trust_model=row.trust_model, queued=queued
        )

    # -- delivery -----------------------------------------------------------------------------------------
    def flush(self) -> int:
        """Deliver queued reports; returns how many the aggregator now holds (accepted or duplicate).

        Transient failures leave reports queued for the next flush; see :meth:`deliver` for the details
        and :meth:`rejections` for reports the aggregator refused.
        """
        return self.deliver().delivered

    def deliver(self) -> FlushResult:
        """Like :meth:`flush`, with the full account (accepted, duplicate, rejected, pending, expired, and
        the typed ``failure`` that kept reports queued: :meth:`FlushResult.raise_for_error` raises it)."""
        with state_errors(self._state.path):
            return self._outbox.flush()

    def pending(self) -> list[PendingReport]:
        """The reports waiting in the outbox, oldest first, each with why it waits (``why``, the last
        error and its code), its attempts and when it expires."""
        with self._lock, state_errors(self._state.path):
            return self._state.pending_reports(self.outbox_max_age)

    def rejections(self) -> list[Rejection]:
        """Reports the aggregator rejected (a ``rejected`` verdict on that report), with its reasons; not
        retried."""
        with self._lock, state_errors(self._state.path):
            return self._state.rejections()

    def expired(self) -> list[ExpiredReport]:
        """Reports that waited longer than ``outbox_max_age`` and left the outbox undelivered."""
        with self._lock, state_errors(self._state.path):
            return self._state.expired()

    # -- accounting ---------------------------------------------------------------------------------------
    def ledger(self) -> Ledger:
        """ε spent per campaign and in total, the lifetime budget and what is left."""
        with self._lock, state_errors(self._state.path):
            spends, expired = self._state.spent(), self._state.expired_counts()
        return build_ledger(spends, self._lifetime, self._per_campaign, expired)

    def forget(self, campaign_id: str) -> Forgotten:
        """Forget ``campaign_id`` on this device: its pinned config, its memoized answer and its queued reports.

        **Answering the campaign again afterwards spends its ε again** (and the ε already spent stays on the
        ledger: a report that left the device cannot be taken back), so this emits a :class:`ForgetWarning`.
        It is for the development loop, where the aggregator was recreated with new keys under the same
        campaign id and the device rightly refuses the changed config; never to answer a campaign twice.
        Queued reports of the campaign are dropped undelivered (``Forgotten.dropped`` says how many).
        """
        with self._lock, state_errors(self._state.path):
            make_pseudonym(self._state.secret, campaign_id)  # validates the id as submit does
            pinned, dropped = self._state.forget(campaign_id)
            self._configs.pop(campaign_id)
            spent = self._state.spent_on(campaign_id)
        result = Forgotten(campaign_id=campaign_id, pinned=pinned, dropped=dropped, spent=float(spent))
        if pinned or dropped or spent:
            warnings.warn(result.warning(), ForgetWarning, stacklevel=2)
        return result

    def __repr__(self) -> str:
        return (
            f"Client({self.aggregator_url!r}, state_dir={self.state_dir!r}, "
            f"max_epsilon_per_campaign={float(self._per_campaign):g}, "
            f"lifetime_budget={float(self._lifetime):g})"
        )


def _changed(
    config: CampaignConfig,
    answered_at: float,
    cost: Fraction,
    status: str,
    round: str | None = None,
) -> AnswerChanged:
    """The error of a changed answer: when the standing answer was given, why it stands, what to do."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(answered_at))
    where = f"campaign {config.id!r}" + ("" if round is None else f" in round {round!r}")
    head = (
        f"{where} was already answered at {when} with another value or other groups; that answer stands and "
        "nothing was spent or queued now"
    )
    if status == "delivered":
        counted = "one answer per device" if round is None else "one answer per device and round"
        return AnswerChanged(
            f"{head}. It was delivered, and the aggregator counts {counted}: a new report would be a "
            f"duplicate that spends ε={fmt_epsilon(cost)} for nothing, so it cannot be re-answered"
            + ("" if round is None else "; answer the next round instead"),
            answered_at=answered_at,
        )
    return AnswerChanged(
        f"{head}. A new answer would spend ε={fmt_epsilon(cost)} again, and the aggregator counts one answer "
        f"per device{'' if round is None else ' and round'}. The earlier answer is {status}, not delivered: "
        "to replace it, submit again with reanswer=True",
        answered_at=answered_at,
    )
