"""The HTTP contract the device client, the analyst client and the aggregator share, written once.

* **Routes**: every path is under :data:`API_PREFIX`; :func:`campaign_path` builds a campaign's paths with
  its id percent-encoded (``campaign_path("smoking", "reports")`` → ``/api/v1/campaigns/smoking/reports``).
* **Error body**: every error answer is ``{"error": {"code": "<snake_case>", "message": "...", ...}}``
  (:func:`error_body` builds it, :func:`parse_error` reads it back, never raising on what a proxy or a
  broken server may send instead).
* **Batches**: ``POST .../reports`` takes ``{"reports": [1..MAX_BATCH envelopes]}`` and answers each report
  with one of :data:`BATCH_STATUSES` (``accepted``: counted now; ``duplicate``: already counted, the device
  may forget it; ``rejected``: never counted, with a reason) and the count of each.

Plain data and pure functions: no I/O, no Flask; the aggregator renders these with Flask in
``deniable.aggregator.api`` and the clients send them with the standard library.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_PREFIX",
    "BATCH_STATUSES",
    "CAMPAIGNS_PATH",
    "CLIENT_BATCH",
    "MAX_BATCH",
    "SAME_REPORT_REASON",
    "SPENT_TOKEN_REASON",
    "ErrorBody",
    "campaign_path",
    "error_body",
    "parse_error",
]

#: Every API route lives under this prefix (the dashboard under ``/dashboard``, health under ``/healthz``).
API_PREFIX = "/api/v1"
#: The campaign collection: ``GET`` lists, ``POST`` creates.
CAMPAIGNS_PATH = f"{API_PREFIX}/campaigns"
#: Verdicts of one report in a batch reply, in the order the reply's counts are listed.
BATCH_STATUSES: tuple[str, ...] = ("accepted", "duplicate", "rejected")
#: Most envelopes one batch may hold (the aggregator's default ``max_batch``; the OpenAPI ``maxItems``).
MAX_BATCH = 1000
#: Largest batch the device client sends: half the aggregator's bound, so that a batch still fits when an
#: aggregator runs with a smaller ``max_batch`` and a 413 split stays rare.
CLIENT_BATCH = 500
#: The reasons of two verdicts every store gives alike (the aggregator's and the shuffler's): a report id
#: stored before (``duplicate``) and an admission token spent before (``rejected``).
SAME_REPORT_REASON = "this report_id is already stored; the retry changes nothing"
SPENT_TOKEN_REASON = "this admission token was already spent; each token admits exactly one report"  # noqa: S105


def campaign_path(campaign_id: str, *rest: str) -> str:
    """``/api/v1/campaigns/<id>[/<rest>...]`` with the id percent-encoded (ids are slugs, but a client
    must not build a path from an unchecked one)."""
    return "/".join([CAMPAIGNS_PATH, urllib.parse.quote(campaign_id, safe=""), *rest])


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON error body ``{"error": {"code", "message", **extra}}`` every error answer carries."""
    return {"error": {"code": code, "message": message, **extra}}


@dataclass(frozen=True)
class ErrorBody:
    """A parsed error body: its ``code`` (``""`` if none was given), ``message`` and any other fields."""

    code: str
    message: str
    extra: Mapping[str, Any]

    def text(self) -> str:
        """``"code: message"`` as a client's error message quotes it."""
        return f"{self.code or 'error'}: {self.message}".strip()


def parse_error(body: object) -> ErrorBody | None:
    """The error of an answer's JSON ``body``, or None if it is not the API's error shape (an HTML page of
    a proxy, a plain-text 502...)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("error"), Mapping):
        return None
    error = body["error"]
    code = error.get("code")
    message = error.get("message")
    extra = {str(key): value for key, value in error.items() if key not in ("code", "message")}
    return ErrorBody(str(code) if code else "", str(message) if message else "", extra)
