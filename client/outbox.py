"""Delivery of the outbox: batches of sealed envelopes, retried with backoff, settled exactly once.

Every envelope is persisted (``DeviceState``) before any attempt to send it, and leaves the outbox only
on a *verdict about that report*: a well-formed batch reply of the aggregator (``docs/wire-format.md`` §9:
a 200 whose JSON body has one result per report, in request order, for exactly the report ids sent, with
counts that add up) that says

* ``accepted`` or ``duplicate`` (the aggregator holds that report, e.g. after a lost answer): delivered,
  removed. Report ids make retries idempotent, so resending after a crash or a timeout never counts a
  report twice;
* ``rejected`` with a reason: moved to the rejections with that reason and not retried
  (:meth:`~deniable.client.Client.rejections`).

Every other answer keeps the reports queued and is surfaced as a typed
:class:`~deniable.shared.errors.DeliveryError` (``FlushResult.failure``; :meth:`FlushResult.raise_for_error`)
and in :meth:`~deniable.client.Client.pending` (why each report waits):

=====================================  ==========================  ===================================
answer                                 error                       what the flush does
=====================================  ==========================  ===================================
no answer (refused, reset, timeout)    ``TransportError``          retry with backoff, then stop
3xx                                    ``RedirectRefused``         never follows it with a POST
401, 403                               ``AccessDenied``            next campaign
404 of any kind                        ``CampaignNotFound``        next campaign (an aggregator that
                                                                   lost its data dir must not drop
                                                                   reports)
413                                    ``BatchTooLarge``           split the batch in halves and retry;
                                                                   only a single report can fail so
429                                    ``RateLimited``             wait ``Retry-After`` (up to
                                                                   ``RETRY_AFTER_MAX_WAIT``), else stop;
                                                                   no POST before that time
5xx, 408, 425                          ``AggregatorUnavailable``   retry with backoff, next campaign
other 4xx (400, 409 closed, 415, 422)  ``BatchRefused``            next campaign
not JSON, no results, wrong results    ``MalformedReply``          retry with backoff, next campaign
=====================================  ==========================  ===================================

Retries: up to ``attempts`` per batch and flush with exponential backoff ``min(cap, base·2^i)`` scaled by a
jitter factor in [1/2, 1] drawn from :mod:`secrets`. A report that cannot be delivered waits for the next
flush, for at most ``outbox_max_age`` (default 30 days, ``deniable.shared.limits``); then it expires:
it leaves the outbox and is recorded as expired in the ledger (its ε stays spent), never silently.
"""

from __future__ import annotations

import email.utils
import json
import math
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deniable.shared.contract import BATCH_STATUSES, CLIENT_BATCH, campaign_path, parse_error
from deniable.shared.errors import (
    AccessDenied,
    AggregatorUnavailable,
    BatchRefused,
    BatchTooLarge,
    CampaignNotFound,
    DeliveryError,
    InvalidParameter,
    MalformedReply,
    RateLimited,
    RedirectRefused,
    TransportError,
)
from deniable.shared.limits import RETRY_AFTER_MAX_WAIT, RETRY_ATTEMPTS, range_text

from .state import DeviceState, OutboxEntry
from .transport import EncodedTransport, Response, Transport, error_message

__all__ = ["Delivery", "FlushResult", "Outbox", "RetryPolicy", "post_batch"]

_RETRYABLE_4XX = frozenset({408, 425})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one flush tries: ``attempts`` per batch, backoff ``min(cap, base·2^i)`` × jitter in [½, 1].

    ``max_retry_after``: the longest ``Retry-After`` of a 429 that a flush waits out in place.
    """

    attempts: int = 4
    base: float = 0.2
    cap: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    max_retry_after: float = RETRY_AFTER_MAX_WAIT

    def __post_init__(self) -> None:
        attempts = self.attempts
        low, high = RETRY_ATTEMPTS
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not low <= attempts <= high:
            raise InvalidParameter(
                f"'attempts' must be an integer in {range_text(RETRY_ATTEMPTS)}, got {self.attempts!r}"
            )
        for name in ("base", "cap", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 300:
                raise InvalidParameter(f"{name!r} must be a number of seconds in [0, 300], got {value!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based), with jitter from ``secrets``."""
        jitter = 0.5 + secrets.randbelow(1001) / 2000
        return float(min(self.cap, self.base * 2**attempt) * jitter)


@dataclass(frozen=True)
class Delivery:
    """The verdict on one batch: ids delivered, ``(id, code, reason)`` rejected, ids left unsettled, and
    the typed ``failure`` that kept the unsettled ones queued (``error`` is its message)."""

    delivered: tuple[str, ...] = ()
    rejected: tuple[tuple[str, str, str], ...] = ()
    unsettled: tuple[str, ...] = ()
    error: str | None = None
    accepted: int = 0
    failure: TransportError | None = None


@dataclass(frozen=True)
class FlushResult:
    """What one flush did: ``delivered`` = accepted + duplicate; ``pending`` is what remains queued;
    ``expired`` how many reports passed the outbox's maximum age in this flush (see the ledger);
    ``failure`` the typed error that kept reports queued (``error`` is its message), else None."""

    delivered: int
    accepted: int
    duplicate: int
    rejected: int
    pending: int
    error: str | None = None
    expired: int = 0
    failure: TransportError | None = field(default=None, compare=False)

    def raise_for_error(self) -> None:
        """Raise :attr:`failure` (a ``TransportError``/``DeliveryError`` subclass) if there was one."""
        if self.failure is not None:
            raise self.failure


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds of a ``Retry-After`` header (delta-seconds or an HTTP-date, RFC 9110 §10.2.3), or None."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # str.isdigit also takes '²' and other digits int() refuses
        digits = text.lstrip("0") or "0"
        return float(min(int(digits), 10**9)) if len(digits) <= 10 else 1e9  # int() refuses > 4300 digits
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def read_batch_reply(body: Any, ids: Sequence[str]) -> Delivery:
    """The per-report verdicts of a 200 batch reply, or :class:`MalformedReply` if it is not one.

    Well-formed means: a JSON object whose ``results`` is a list with one entry per report sent, in
    request order, each ``{"report_id": <the id sent>, "status": accepted|duplicate|rejected, "reason":
    null or a string (a non-empty one for rejected)}``, and ``accepted``/``duplicate``/``rejected`` counts
    equal to the results'.
    """
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        raise MalformedReply(
            "the aggregator answered 200 without a 'results' list, so no report was settled",
            status=200,
        )
    results = body["results"]
    if len(results) != len(ids):
        raise MalformedReply(
            f"the aggregator answered 200 with {len(results)} results for {len(ids)} reports sent, so no "
            "report was settled",
            status=200,
        )
    delivered: list[str] = []
    rejected: list[tuple[str, str, str]] = []
    counts = dict.fromkeys(BATCH_STATUSES, 0)
    for i, (item, rid) in enumerate(zip(results, ids, strict=True)):
        ok = isinstance(item, dict) and item.get("report_id") == rid and item.get("status") in BATCH_STATUSES
        reason = item.get("reason") if isinstance(item, dict) else None
        if ok and item["status"] == "rejected":
            ok = isinstance(reason, str) and bool(reason.strip())
        if not ok:
            raise MalformedReply(
                f"result {i} of the aggregator's 200 answer is not a verdict on report {rid!r} "
                "(report_id, status accepted/duplicate/rejected, a reason for rejected), so no report was "
                "settled",
                status=200,
            )
        counts[item["status"]] += 1
        if item["status"] == "rejected":
            rejected.append((rid, "rejected", str(reason)))
        else:
            delivered.append(rid)
    if any(body.get(key) != counts[key] for key in BATCH_STATUSES):
        raise MalformedReply(
            "the counts of the aggregator's 200 answer do not match its results, so no report was settled",
            status=200,
        )
    return Delivery(tuple(delivered), tuple(rejected), (), None, counts["accepted"])


def _failure(response: Response, where: str, count: int) -> DeliveryError:
    """The typed error of a batch answer that is not a 200 (or of a 200 that is not JSON)."""
    status = response.status
    what = f"the aggregator answered {status} to {count} report(s) of {where}"
    kept = "they stay in the outbox"
    if response.content_error is not None and status == 200:
        return MalformedReply(f"{what} with {response.content_error}; {kept}", status=status)
    detail = error_message(response) if isinstance(response.body, dict) else (
        response.content_error or "no JSON body"
    )
    if 300 <= status < 400:
        target = response.header("location") or "no Location"
        return RedirectRefused(
            f"{what} ({detail}), a redirect to {target}; a POST is never re-sent elsewhere, so {kept}. "
            "Point the client at the aggregator's real URL",
            status=status,
        )
    if status in (401, 403):
        return AccessDenied(
            f"{what} ({detail}); devices post reports without credentials, so a proxy or a misconfigured "
            f"aggregator stands in the way. {kept}",
            status=status,
        )
    if status == 404:
        return CampaignNotFound(
            f"{what} ({detail}); a wrong URL, or an aggregator that does not know the campaign (e.g. one "
            f"restarted on an empty data dir). {kept} until the right aggregator answers",
            status=status,
        )
    if status == 413:
        return BatchTooLarge(f"{what} ({detail}), even for a single report; {kept}", status=status)
    if status == 429:
        wait = retry_after_seconds(response.header("retry-after"))
        return RateLimited(
            f"{what} ({detail}): rate limited, retry after {wait or 0:g} s; {kept}",
            retry_after=wait or 0.0,
        )
    if status >= 500 or status in _RETRYABLE_4XX:
        return AggregatorUnavailable(f"{what} ({detail}); {kept}, retry later", status=status)
    if 400 <= status < 500:
        parsed = parse_error(response.body)
        code = "" if parsed is None else parsed.code
        return BatchRefused(
            f"{what} ({detail}); an answer about the whole batch, not a verdict on each report, so {kept}",
            status=status,
            error_code=code,
        )
    return MalformedReply(f"{what} ({detail}), not a batch reply; {kept}", status=status)


def batch_body(envelopes: Sequence[str]) -> bytes:
    """The JSON text of a batch, ``{"reports":[...]}``, from its envelopes' JSON texts joined as they are:
    the bytes of ``json.dumps({"reports": [json.loads(e) for e in envelopes]}, separators=(",", ":"))``
    for envelope texts written by ``to_text``."""
    return ('{"reports":[' + ",".join(envelopes) + "]}").encode("utf-8")


def _sender(transport: Transport, path: str, envelopes: Sequence[str]) -> Callable[[], Response]:
    """What POSTs the batch, its body built once for every attempt: the encoded text where the transport
    takes one, else the batch as a JSON value."""
    if isinstance(transport, EncodedTransport):
        encoded, body = transport, batch_body(envelopes)
        return lambda: encoded.request_encoded("POST", path, body)
    value = {"reports": [json.loads(e) for e in envelopes]}
    return lambda: transport.request("POST", path, value)


def post_batch(
    transport: Transport, campaign_id: str, envelopes: Sequence[tuple[str, str]], policy: RetryPolicy
) -> Delivery:
    """POST one batch of 1..MAX_BATCH envelopes, each ``(report_id, envelope JSON text)``, retrying
    transient failures; never raises them. The texts are sent as they are (:func:`batch_body`).

    A 413 splits the batch in halves, each posted (and retried) on its own.
    """
    ids = [report_id for report_id, _ in envelopes]
    texts = [text for _, text in envelopes]
    send = _sender(transport, campaign_path(campaign_id, "reports"), texts)
    failure: TransportError = TransportError("no attempt made")
    attempt = 0
    while attempt < policy.attempts:
        if attempt:
            wait = failure.retry_after if isinstance(failure, RateLimited) else 0.0
            policy.sleep(max(wait, policy.delay(attempt - 1)) if wait else policy.delay(attempt - 1))
        attempt += 1
        try:
            response = send()
        except TransportError as exc:
            failure = TransportError(f"{exc}; {len(ids)} report(s) of {campaign_id!r} stay in the outbox")
            continue
        if response.status == 200 and response.content_error is None:
            try:
                return read_batch_reply(response.body, ids)
            except MalformedReply as exc:
                failure = MalformedReply(
                    f"{exc}; {len(ids)} report(s) of {campaign_id!r} stay in the outbox", status=200
                )
                continue
        failure = _failure(response, repr(campaign_id), len(ids))
        if isinstance(failure, BatchTooLarge) and len(envelopes) > 1:
            half = len(envelopes) // 2
            return _merge(
                post_batch(transport, campaign_id, envelopes[:half], policy),
                post_batch(transport, campaign_id, envelopes[half:], policy),
            )
        if isinstance(failure, RateLimited):
            if failure.retry_after > policy.max_retry_after:
                break
            continue
        if isinstance(failure, AggregatorUnavailable | MalformedReply):
            continue
        break  # redirects, 401/403, 404, other 4xx, a lone 413: retrying now would get the same answer
    return Delivery(unsettled=tuple(ids), error=str(failure), failure=failure)


def _merge(a: Delivery, b: Delivery) -> Delivery:
    failure = b.failure or a.failure
    return Delivery(
        a.delivered + b.delivered,
        a.rejected + b.rejected,
        a.unsettled + b.unsettled,
        None if failure is None else str(failure),
        a.accepted + b.accepted,
        failure,
    )


class Outbox:
    """Flushes a :class:`DeviceState`'s outbox; ``lock`` guards the state, one flush runs at a time."""

    def __init__(
        self,
        state: DeviceState,
        transport: Transport,
        lock: threading.RLock,
        *,
        batch_size: int = CLIENT_BATCH,
        policy: RetryPolicy | None = None,
        max_age: float,
        clock: Callable[[], float] = time.time,
        route: Callable[[str], Transport] | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= CLIENT_BATCH:
            raise InvalidParameter(f"'batch_size' must be an integer in [1, {CLIENT_BATCH}], got {batch_size!r}")
        self._state = state
        self._transport = transport
        self._route = route  # the transport of a campaign (its shuffler for a shuffled one); None: transport
        self._lock = lock
        self._flush_lock = threading.Lock()
        self.batch_size = batch_size
        self.policy = policy or RetryPolicy()
        self.max_age = max_age
        self._clock = clock

    def flush(self) -> FlushResult:
        """Deliver every queued envelope that can be delivered now (see the module docstring)."""
        totals = {"delivered": 0, "accepted": 0, "rejected": 0}
        failure: TransportError | None = None
        with self._flush_lock:
            with self._lock:
                now = self._clock()
                expired = self._state.expire(now - self.max_age, now)
                self._state.make_durable()  # nothing leaves the device before it is on disk for good
                campaigns = self._state.outbox_campaigns()
                not_before = self._state.not_before()
            if campaigns and not_before > now:
                failure = RateLimited(
                    f"the aggregator asked this device to wait until {_when(not_before)} (429 Retry-After); "
                    f"nothing was sent, the reports stay in the outbox; flush again after that time",
                    retry_after=not_before - now,
                )
                campaigns = []
            for campaign_id in campaigns:
                error = self._flush_campaign(campaign_id, totals)
                if error is None:
                    continue
                failure = error
                if isinstance(error, RateLimited):
                    with self._lock:
                        self._state.set_not_before(self._clock() + error.retry_after)
                    break
                if not isinstance(error, DeliveryError):
                    break  # the aggregator is unreachable: keep the rest queued for the next flush
            with self._lock:
                pending = self._state.pending()
        return FlushResult(
            delivered=totals["delivered"],
            accepted=totals["accepted"],
            duplicate=totals["delivered"] - totals["accepted"],
            rejected=totals["rejected"],
            pending=pending,
            error=None if failure is None else str(failure),
            expired=expired,
            failure=failure,
        )

    def _flush_campaign(self, campaign_id: str, totals: dict[str, int]) -> TransportError | None:
        after = 0
        while True:
            with self._lock:
                batch: list[OutboxEntry] = self._state.next_batch(campaign_id, self.batch_size, after)
            if not batch:
                return None
            after = batch[-1].seq
            envelopes = [(entry.report_id, entry.envelope) for entry in batch]  # stored texts, sent as they are
            with self._lock:
                transport = self._transport if self._route is None else self._route(campaign_id)
            delivery = post_batch(transport, campaign_id, envelopes, self.policy)
            failure = delivery.failure
            with self._lock:
                self._state.settle(
                    list(delivery.delivered),
                    [(rid, campaign_id, code, reason) for rid, code, reason in delivery.rejected],
                    list(delivery.unsettled),
                    delivery.error,
                    None if failure is None else failure.code,
                    self._clock(),
                )
            totals["delivered"] += len(delivery.delivered)
            totals["accepted"] += delivery.accepted
            totals["rejected"] += len(delivery.rejected)
            if failure is not None:
                return failure


def _when(t: float) -> str:
    if not math.isfinite(t):
        return "an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
