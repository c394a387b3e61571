"""Delivery of the outbox: batches of sealed envelopes, retried with backoff, settled exactly once.

Every envelope is persisted (``DeviceState``) before any attempt to send it, and leaves the outbox only when
the aggregator has answered for it:

* ``accepted`` or ``duplicate`` (the aggregator already holds that report id, e.g. after a lost answer):
  delivered, removed. Report ids make retries idempotent, so resending after a crash or a timeout never
  counts a report twice.
* ``rejected``, or a 4xx for the whole batch (unknown or closed campaign, malformed request): moved to the
  rejections with the aggregator's reason and not retried (:meth:`~deniable.client.Client.rejections`).
* No answer (network error, timeout), a 5xx, 408 or 429: retried up to ``attempts`` times per flush with
  exponential backoff ``min(cap, base·2^i)`` scaled by a jitter factor in [1/2, 1] drawn from
  :mod:`secrets`; then the envelopes stay queued for the next flush.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deniable.shared.errors import InvalidParameter, TransportError

from .state import DeviceState, OutboxEntry
from .transport import Response, Transport, error_message

__all__ = ["MAX_BATCH", "REPORTS_PATH", "Delivery", "FlushResult", "Outbox", "RetryPolicy", "post_batch"]

REPORTS_PATH = "/api/v1/campaigns/{}/reports"
#: Largest batch the client sends (the aggregator accepts up to 1000 per request).
MAX_BATCH = 500
_RETRYABLE_4XX = frozenset({408, 425, 429})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one flush tries: ``attempts`` per batch, backoff ``min(cap, base·2^i)`` × jitter in [½, 1]."""

    attempts: int = 4
    base: float = 0.2
    cap: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __post_init__(self) -> None:
        attempts = self.attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 20:
            raise InvalidParameter(f"'attempts' must be an integer in [1, 20], got {self.attempts!r}")
        for name in ("base", "cap"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value <= 300:
                raise InvalidParameter(f"{name!r} must be a number of seconds in [0, 300], got {value!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based), with jitter from ``secrets``."""
        jitter = 0.5 + secrets.randbelow(1001) / 2000
        return float(min(self.cap, self.base * 2**attempt) * jitter)


@dataclass(frozen=True)
class Delivery:
    """The verdict on one batch: ids delivered, ``(id, code, reason)`` rejected, ids left unsettled."""

    delivered: tuple[str, ...] = ()
    rejected: tuple[tuple[str, str, str], ...] = ()
    unsettled: tuple[str, ...] = ()
    error: str | None = None
    accepted: int = 0


@dataclass(frozen=True)
class FlushResult:
    """What one flush did: ``delivered`` = accepted + duplicate; ``pending`` is what remains queued."""

    delivered: int
    accepted: int
    duplicate: int
    rejected: int
    pending: int
    error: str | None = None


def post_batch(
    transport: Transport, campaign_id: str, envelopes: Sequence[dict[str, Any]], policy: RetryPolicy
) -> Delivery:
    """POST one batch (1..1000 envelope JSON objects), retrying transient failures; never raises them."""
    ids = [str(e["report_id"]) for e in envelopes]
    path = REPORTS_PATH.format(urllib.parse.quote(campaign_id, safe=""))
    error = "no attempt made"
    for attempt in range(policy.attempts):
        if attempt:
            policy.sleep(policy.delay(attempt - 1))
        try:
            response = transport.request("POST", path, {"reports": list(envelopes)})
        except TransportError as exc:
            error = str(exc)
            continue
        if response.status == 200:
            try:
                return _settle_results(response, ids)
            except ValueError as exc:
                error = f"the aggregator answered 200 with an unreadable body ({exc})"
                continue
        if response.status >= 500 or response.status in _RETRYABLE_4XX:
            error = f"the aggregator answered {response.status} ({error_message(response)})"
            continue
        code, reason = _error_parts(response)
        return Delivery(rejected=tuple((rid, code, reason) for rid in ids))
    return Delivery(unsettled=tuple(ids), error=error)


def _settle_results(response: Response, ids: list[str]) -> Delivery:
    body = response.body
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise ValueError("no 'results' list")
    verdicts: dict[str, tuple[str, str]] = {}
    for item in results:
        if isinstance(item, dict) and isinstance(item.get("report_id"), str):
            verdicts[item["report_id"]] = (str(item.get("status")), str(item.get("reason") or ""))
    delivered, rejected, unsettled = [], [], []
    accepted = 0
    for rid in ids:
        status, reason = verdicts.get(rid, ("", ""))
        if status in ("accepted", "duplicate"):
            delivered.append(rid)
            accepted += status == "accepted"
        elif status == "rejected":
            rejected.append((rid, "rejected", reason or "rejected by the aggregator"))
        else:
            unsettled.append(rid)
    return Delivery(tuple(delivered), tuple(rejected), tuple(unsettled), None, accepted)


def _error_parts(response: Response) -> tuple[str, str]:
    body = response.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return str(err.get("code") or f"http_{response.status}"), str(err.get("message") or "")
    return f"http_{response.status}", f"the aggregator answered {response.status}"


class Outbox:
    """Flushes a :class:`DeviceState`'s outbox; ``lock`` guards the state, one flush runs at a time."""

    def __init__(
        self,
        state: DeviceState,
        transport: Transport,
        lock: threading.RLock,
        *,
        batch_size: int = MAX_BATCH,
        policy: RetryPolicy | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= MAX_BATCH:
            raise InvalidParameter(f"'batch_size' must be an integer in [1, {MAX_BATCH}], got {batch_size!r}")
        self._state = state
        self._transport = transport
        self._lock = lock
        self._flush_lock = threading.Lock()
        self.batch_size = batch_size
        self.policy = policy or RetryPolicy()

    def flush(self) -> FlushResult:
        """Deliver every queued envelope that can be delivered now (see the module docstring)."""
        totals = {"delivered": 0, "accepted": 0, "rejected": 0}
        error: str | None = None
        with self._flush_lock:
            with self._lock:
                self._state.make_durable()  # nothing leaves the device before it is on disk for good
                campaigns = self._state.outbox_campaigns()
            for campaign_id in campaigns:
                error = self._flush_campaign(campaign_id, totals)
                if error is not None:
                    break  # the aggregator is unreachable: keep the rest queued for the next flush
            with self._lock:
                pending = self._state.pending()
        return FlushResult(
            delivered=totals["delivered"],
            accepted=totals["accepted"],
            duplicate=totals["delivered"] - totals["accepted"],
            rejected=totals["rejected"],
            pending=pending,
            error=error,
        )

    def _flush_campaign(self, campaign_id: str, totals: dict[str, int]) -> str | None:
        after = 0
        while True:
            with self._lock:
                batch: list[OutboxEntry] = self._state.next_batch(campaign_id, self.batch_size, after)
            if not batch:
                return None
            after = batch[-1].seq
            envelopes = [json.loads(entry.envelope) for entry in batch]
            delivery = post_batch(self._transport, campaign_id, envelopes, self.policy)
            with self._lock:
                self._state.settle(
                    list(delivery.delivered),
                    [(rid, campaign_id, code, reason) for rid, code, reason in delivery.rejected],
                    list(delivery.unsettled),
                    delivery.error,
                )
            totals["delivered"] += len(delivery.delivered)
            totals["accepted"] += delivery.accepted
            totals["rejected"] += len(delivery.rejected)
            if delivery.error is not None:
                return delivery.error
