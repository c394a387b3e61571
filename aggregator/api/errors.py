"""The one place where errors become HTTP responses: ``{"error": {"code", "message"}}``.

* ``deniable.shared.errors`` classes map to a status by :data:`STATUS_OF` (most specific class first);
  the body's ``code`` is the class's ``code``. ``BudgetExceeded`` also carries ``spent``, ``remaining``
  and ``requested``; ``ReleaseRefused`` carries ``rule``, ``next_release_at`` and ``retry_after`` (also as the
  ``Retry-After`` header when the release becomes possible at a known time); ``TokenQuotaExceeded`` carries
  ``issued``, ``limit`` and ``requested``; ``StoreUnavailable`` (the database failed or is unreachable) is a
  503 with ``Retry-After: 1``, logged as an ERROR; ``RateLimited`` (a batch past the address's ingestion
  bucket) is a 429 with its ``retry_after`` as ``Retry-After``.
* werkzeug ``HTTPException`` s (400, 401, 403, 404, 405, 413, 415, ...) keep their status; the code is
  the snake-cased class name (``RequestEntityTooLarge`` → ``request_entity_too_large``).
* Anything else is a bug: it is logged with its traceback (never the request body) and answered with a
  JSON 500 that reveals nothing.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from deniable.shared.contract import error_body
from deniable.shared.errors import (
    BudgetExceeded,
    CampaignClosed,
    CampaignExists,
    CampaignKeyUnavailable,
    DeniableError,
    InvalidConfig,
    InvalidParameter,
    InvalidReport,
    InvalidRequest,
    PermissionDenied,
    RateLimited,
    ReleaseRefused,
    StoreUnavailable,
    TokenQuotaExceeded,
    TransportError,
    UnknownCampaign,
)

__all__ = ["STATUS_OF", "register_error_handlers"]

log = logging.getLogger("deniable.aggregator")

#: HTTP status of each error class; the first matching entry (in this order) wins.
STATUS_OF: tuple[tuple[type[DeniableError], int], ...] = (
    (InvalidRequest, 400),
    (CampaignExists, 409),
    (UnknownCampaign, 404),
    (CampaignClosed, 409),
    (BudgetExceeded, 409),
    (ReleaseRefused, 409),
    (PermissionDenied, 403),
    (TokenQuotaExceeded, 409),
    (InvalidParameter, 422),
    (InvalidConfig, 422),
    (InvalidReport, 422),
    (CampaignKeyUnavailable, 503),
    (StoreUnavailable, 503),
    (RateLimited, 429),
    (TransportError, 502),
    (DeniableError, 400),
)

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def error_response(status: int, code: str, message: str, **extra: Any) -> tuple[Response, int]:
    """The JSON error body with its status."""
    return jsonify(error_body(code, message, **extra)), status


def _deniable_error(exc: DeniableError) -> tuple[Response, int]:
    status = next(status for cls, status in STATUS_OF if isinstance(exc, cls))
    extra: dict[str, Any] = {}
    if isinstance(exc, BudgetExceeded):
        extra = {"spent": exc.spent, "remaining": exc.remaining, "requested": exc.requested}
    if isinstance(exc, TokenQuotaExceeded):
        extra = {"issued": exc.issued, "limit": exc.limit, "requested": exc.requested}
    if isinstance(exc, ReleaseRefused):
        extra = {"rule": exc.rule, "next_release_at": exc.next_release_at, "retry_after": exc.retry_after}
    response, status = error_response(status, exc.code, str(exc), **extra)
    if isinstance(exc, ReleaseRefused) and exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, RateLimited):
        response.headers["Retry-After"] = str(math.ceil(exc.retry_after))
    if isinstance(exc, StoreUnavailable):
        log.error("database unavailable: %s", exc)
        response.headers["Retry-After"] = "1"
    return response, status


def _http_error(exc: HTTPException) -> Response | tuple[Response, int]:
    status = exc.code or 500
    code = _CAMEL.sub("_", type(exc).__name__).lower()
    response, status = error_response(status, code, exc.description or exc.name)
    for header, value in exc.get_headers():
        if header.lower() not in ("content-type", "content-length"):
            response.headers[header] = value
    return response, status


def _unexpected(exc: Exception) -> tuple[Response, int]:
    log.exception("internal error while handling a request (%s)", type(exc).__name__)
    return error_response(500, "internal_error", "the aggregator hit an internal error; it has been logged")


def register_error_handlers(app: Flask) -> None:
    """Install the three handlers on ``app``."""
    app.register_error_handler(DeniableError, _deniable_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
