"""The one exception tree of deniable, shared by the device client and the aggregator.

::

    DeniableError
    ├── InvalidParameter (ValueError)   a privacy or mechanism parameter is out of range
    │   └── AnswerChanged               a second, different answer to a one-shot campaign or a round
    ├── InvalidReport (ValueError)      a report, envelope or payload is malformed or out of range
    ├── InvalidConfig (ValueError)      a campaign descriptor is malformed or changed after pinning
    ├── BudgetExceeded                  an ε budget (device ledger or central accountant) would be exceeded
    ├── ReleaseRefused                  a central campaign's release policy forbids this release now
    ├── TokenQuotaExceeded              an account asked the issuer for more admission tokens than it may get
    ├── AdmissionTokenRequired          the campaign needs an admission token and the device holds none
    ├── UnknownCampaign (LookupError)   no campaign with that id
    ├── CampaignClosed                  the campaign no longer accepts reports
    ├── CampaignKeyUnavailable          the aggregator cannot use a campaign's key (a server fault; retryable)
    ├── StoreUnavailable                the aggregator's database failed or is unreachable (HTTP 503; retryable)
    ├── CampaignExists                  a campaign with that id already exists (ids are never reused)
    ├── InvalidRequest                  a request is malformed as a whole, e.g. a batch body (HTTP 400)
    ├── BackupError                     a backup or restore cannot be done as asked (the command line only)
    ├── AuthenticationFailed            no token, or a token the aggregator does not know (HTTP 401)
    ├── PermissionDenied                the token's role may not do this, or the figure is not released (403)
    ├── TransportError                  the aggregator could not be reached, or did not settle a delivery
    │   └── DeliveryError               it answered, but not with a verdict on the reports (they stay queued)
    │       ├── RedirectRefused         3xx: a POST is never re-sent elsewhere
    │       ├── AccessDenied            401/403: a proxy or an aggregator that wants credentials
    │       ├── CampaignNotFound        404 of any kind (an HTML page, or an aggregator without the campaign)
    │       ├── BatchTooLarge           413 even for one report
    │       ├── RateLimited             429, with the Retry-After the client honours (``retry_after``)
    │       ├── AggregatorUnavailable   5xx
    │       ├── BatchRefused            any other 4xx for the whole batch (400, 409 campaign_closed, 415, 422)
    │       └── MalformedReply          not JSON, no ``results``, or results not for exactly the ids sent
    └── DeviceStateError                the device's state dir cannot be used (the message says what to do)
        ├── StateBusy                   another process holds the state database longer than the busy timeout
        ├── StateReadOnly               the state dir or its files cannot be written
        ├── StateDiskFull               no space left for the state database (nothing queued was lost)
        ├── DeviceSecretDamaged         the device secret file is unreadable or has the wrong size
        └── StateCorrupt                the state database is not a readable SQLite database

The aggregator maps each class to one HTTP status in one place; messages say what is wrong, where, and
what to do, e.g. ``'epsilon' must be a number in [0.001, 10], got 0`` (ranges: ``deniable.shared.limits``).
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "AdmissionTokenRequired",
    "AggregatorUnavailable",
    "AnswerChanged",
    "AuthenticationFailed",
    "BackupError",
    "BatchRefused",
    "BatchTooLarge",
    "BudgetExceeded",
    "CampaignClosed",
    "CampaignExists",
    "CampaignKeyUnavailable",
    "CampaignNotFound",
    "DeliveryError",
    "DeniableError",
    "DeviceSecretDamaged",
    "DeviceStateError",
    "InvalidAnswer",
    "InvalidConfig",
    "InvalidParameter",
    "InvalidReport",
    "InvalidRequest",
    "LedgerLost",
    "MalformedReply",
    "PermissionDenied",
    "RateLimited",
    "RedirectRefused",
    "ReleaseRefused",
    "StateBusy",
    "StateCorrupt",
    "StateDiskFull",
    "StateReadOnly",
    "StoreUnavailable",
    "TokenQuotaExceeded",
    "TransportError",
    "UnknownCampaign",
]


class DeniableError(Exception):
    """Base class of every error deniable raises on purpose."""

    code = "deniable_error"


class InvalidParameter(DeniableError, ValueError):
    """A parameter (ε, k, a value, a level) is outside its allowed range."""

    code = "invalid_parameter"


class InvalidReport(DeniableError, ValueError):
    """A report, envelope or decrypted payload is malformed or outside the report space."""

    code = "invalid_report"


class InvalidConfig(DeniableError, ValueError):
    """A campaign descriptor is malformed, or differs from the one pinned at first use."""

    code = "invalid_config"


class BudgetExceeded(DeniableError):
    """Spending ``requested`` would take the ε spent past the budget.

    The message always names what was spent, what is left and what was asked for.
    """

    code = "budget_exceeded"

    def __init__(self, message: str, *, spent: float, remaining: float, requested: float) -> None:
        super().__init__(message)
        self.spent = spent
        self.remaining = remaining
        self.requested = requested


class ReleaseRefused(DeniableError):
    """The campaign's release policy forbids a release that would spend ε now.

    ``rule`` names the rule (``min_reports`` or ``min_refresh_interval``); ``next_release_at`` is the UTC
    time (ISO 8601) from which the release is possible, or ``None`` when that depends on reports still to
    come; ``retry_after`` is the same as whole seconds from now (``None`` likewise).
    """

    code = "release_refused"

    def __init__(
        self, message: str, *, rule: str, next_release_at: str | None, retry_after: int | None
    ) -> None:
        super().__init__(message)
        self.rule = rule
        self.next_release_at = next_release_at
        self.retry_after = retry_after


class TokenQuotaExceeded(DeniableError):
    """The account would get more admission tokens of the campaign than ``limit`` (it has ``issued``)."""

    code = "token_quota_exceeded"

    def __init__(self, message: str, *, issued: int, limit: int, requested: int) -> None:
        super().__init__(message)
        self.issued = issued
        self.limit = limit
        self.requested = requested


class AdmissionTokenRequired(DeniableError):
    """The campaign accepts reports only with an admission token, and the device has none left for it."""

    code = "admission_token_required"


class UnknownCampaign(DeniableError, LookupError):
    """No campaign has this id."""

    code = "unknown_campaign"


class CampaignClosed(DeniableError):
    """The campaign is closed and accepts no more reports."""

    code = "campaign_closed"


class InvalidRequest(DeniableError):
    """A request is malformed as a whole (a batch body that is not ``{"reports": [...]}``, too many
    envelopes): nothing of it was processed. HTTP 400 ``bad_request``."""

    code = "bad_request"


class BackupError(DeniableError):
    """A backup or restore that cannot be done as asked; the message says what to do (``deniable backup``)."""

    code = "backup_error"


class CampaignKeyUnavailable(DeniableError):
    """The aggregator's key file of a campaign is missing or does not match the campaign's public key.

    A fault of the server, not of any report: the aggregator answers 503 (retryable), so devices keep their
    reports until the operator restores the key, and logs an ERROR naming the campaign and the file.
    """

    code = "campaign_key_unavailable"


class StoreUnavailable(DeniableError):
    """The aggregator's database failed or cannot be reached right now (HTTP 503 with ``Retry-After``).

    Nothing of the request was stored; sending it again is safe (report batches are idempotent). ``retry``
    is True when the transaction was certainly rolled back by a conflict, so the aggregator may run it again
    at once itself.
    """

    code = "store_unavailable"

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class CampaignExists(DeniableError):
    """A campaign with this id already exists (HTTP 409)."""

    code = "campaign_exists"


class AuthenticationFailed(DeniableError):
    """The request carried no token, or one this aggregator does not know (HTTP 401)."""

    code = "authentication_failed"


class PermissionDenied(DeniableError):
    """The token is valid but its role may not do this, or the figure asked for is not released to it
    (HTTP 403)."""

    code = "permission_denied"


class TransportError(DeniableError):
    """The aggregator could not be reached, or answered with a server error (retryable)."""

    code = "transport_error"


class DeliveryError(TransportError):
    """The aggregator answered a batch of reports, but not with a verdict on each of them.

    The reports stay in the outbox (a report leaves it only on a well-formed per-report verdict);
    ``status`` is the HTTP status (None when the body, not the status, was the problem).
    """

    code = "delivery_error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RedirectRefused(DeliveryError):
    """A 3xx: the client never follows a redirect with a POST (urllib would re-send it as a GET)."""

    code = "redirect_refused"


class AccessDenied(DeliveryError):
    """A 401 or 403: devices are anonymous, so a proxy or a misconfigured aggregator stands in the way."""

    code = "access_denied"


class CampaignNotFound(DeliveryError):
    """A 404 of any kind to a POST of reports: a wrong URL, a proxy page, or an aggregator that lost the
    campaign (e.g. restarted on an empty data dir); the reports wait for the right aggregator."""

    code = "campaign_not_found"


class BatchTooLarge(DeliveryError):
    """A 413 even for a batch of one report (larger batches are split and retried first)."""

    code = "batch_too_large"


class RateLimited(DeliveryError):
    """A 429 ``rate_limited``: ``retry_after`` is the number of seconds the aggregator asks the client to wait.

    The one class of both sides: the aggregator raises it to refuse a batch past the address's ingestion
    bucket (``aggregator/api/errors.py`` answers 429 with ``Retry-After``), the device client on receiving one.
    """

    code = "rate_limited"

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float = 0.0) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class AggregatorUnavailable(DeliveryError):
    """A 5xx (e.g. 503 ``campaign_key_unavailable``): the server's fault, retried later."""

    code = "aggregator_unavailable"


class BatchRefused(DeliveryError):
    """Any other 4xx for the whole batch (400, 409 ``campaign_closed``, 415, 422): an answer about the
    request or the campaign, not a verdict on each report; ``error_code`` is the aggregator's code."""

    code = "batch_refused"

    def __init__(self, message: str, *, status: int | None = None, error_code: str = "") -> None:
        super().__init__(message, status=status)
        self.error_code = error_code


class MalformedReply(DeliveryError):
    """A reply that is not the batch reply of ``docs/wire-format.md``: not JSON, no ``results``, or
    results that are not one verdict for exactly each report id sent."""

    code = "malformed_reply"


class AnswerChanged(InvalidParameter):
    """A one-shot campaign was answered before with another value or other groups.

    The earlier answer stands (the aggregator counts one answer per device, and a new answer would spend
    ε again); ``answered_at`` is its time (seconds since the epoch). ``Client.submit(..., reanswer=True)``
    replaces it while it is still undelivered.
    """

    code = "answer_changed"

    def __init__(self, message: str, *, answered_at: float) -> None:
        super().__init__(message)
        self.answered_at = answered_at


class InvalidAnswer(InvalidParameter):
    """A device's answer to one question of a survey is not one the question allows (an unknown category or
    option, too many options, a number out of range, NaN, the wrong type, a missing required answer).

    ``question`` is the id of the question; the message names it and says what it expects. Nothing was
    randomized, spent or queued.
    """

    code = "invalid_answer"

    def __init__(self, message: str, *, question: str) -> None:
        super().__init__(message)
        self.question = question


class DeviceStateError(DeniableError):
    """The device's state dir (ε ledger, secret, outbox) cannot be used; the message says what to do."""

    code = "device_state_error"


class StateBusy(DeviceStateError):
    """Another process held the state database for longer than the busy timeout."""

    code = "state_busy"


class StateReadOnly(DeviceStateError):
    """The state dir, its database or its secret cannot be written (permissions or a read-only mount)."""

    code = "state_read_only"


class StateDiskFull(DeviceStateError):
    """The disk of the state dir is full; the operation was rolled back and nothing queued was lost."""

    code = "state_disk_full"


class DeviceSecretDamaged(DeviceStateError):
    """The device secret file cannot be read or does not hold exactly 32 bytes."""

    code = "device_secret_damaged"


class StateCorrupt(DeviceStateError):
    """The state database is not a readable SQLite database."""

    code = "state_corrupt"


class LedgerLost(DeviceStateError):
    """The device secret survives but the ledger (the state database) is gone (device only).

    Starting anyway would forget every ε spent under that secret; the device refuses unless told
    ``reset_ledger=True`` (``deniable submit --reset-ledger``). Never raised by the aggregator.
    """

    code = "ledger_lost"
