"""JSON over HTTP(S) for analysts, with the standard library only, and the answer's errors as typed errors.

:class:`AggregatorConnection` sends one request with the bearer token and returns the decoded JSON body of a 2xx
answer; every other outcome raises a :class:`~deniable.shared.errors.DeniableError` subclass chosen by the
error body's ``code`` (the aggregator's one error table), else by the status:

=====================  ==============================================================
401                    :class:`AuthenticationFailed` (no token, or not this server's)
403                    :class:`PermissionDenied` (a lower role, or a figure not released)
404 unknown_campaign   :class:`UnknownCampaign`
409                    :class:`CampaignExists`, :class:`CampaignClosed`, :class:`BudgetExceeded`,
                       :class:`ReleaseRefused` (the central release policy; ``rule``, ``retry_after``)
400, 413, 415, 422     :class:`InvalidParameter` / :class:`InvalidConfig` (by code)
429                    :class:`RateLimited` (``retry_after``: the seconds the server asked to wait)
5xx                    :class:`AggregatorUnavailable` (retryable)
no answer, not JSON    :class:`TransportError` (retryable)
=====================  ==============================================================

Every raised error carries ``status`` (None when nothing answered) and ``code``. The token is resolved by
:func:`resolve_token`: an argument, else a token file argument, else ``DENIABLE_TOKEN``, else the file
``DENIABLE_TOKEN_FILE`` names; the command line never takes the token itself, only a file's path.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deniable.shared.contract import parse_error
from deniable.shared.errors import (
    AggregatorUnavailable,
    AuthenticationFailed,
    BudgetExceeded,
    CampaignClosed,
    CampaignExists,
    DeniableError,
    InvalidConfig,
    InvalidParameter,
    InvalidReport,
    PermissionDenied,
    RateLimited,
    ReleaseRefused,
    TransportError,
    UnknownCampaign,
)
from deniable.shared.limits import check_timeout

__all__ = ["DEFAULT_URL", "AggregatorConnection", "error_from_answer", "resolve_token", "resolve_url"]

#: Where ``deniable serve`` listens by default.
DEFAULT_URL = "http://127.0.0.1:8000"

_USER_AGENT = "deniable-analyst/0.1"

#: The error class of each ``error.code`` the aggregator sends.
_BY_CODE: dict[str, type[DeniableError]] = {
    cls.code: cls
    for cls in (
        AuthenticationFailed, BudgetExceeded, CampaignClosed, CampaignExists, InvalidConfig, InvalidParameter,
        InvalidReport, PermissionDenied, ReleaseRefused, TransportError, UnknownCampaign,
    )
}  # fmt: skip

#: The error class of a status whose code is not in :data:`_BY_CODE`.
_BY_STATUS: dict[int, type[DeniableError]] = {
    400: InvalidParameter,
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: UnknownCampaign,
    405: InvalidParameter,
    409: DeniableError,
    413: InvalidParameter,
    415: InvalidParameter,
    422: InvalidParameter,
    429: RateLimited,
}


def resolve_url(url: str | None) -> str:
    """``url``, else ``DENIABLE_URL``, else :data:`DEFAULT_URL`; checked to be an http(s) URL."""
    chosen = url or os.environ.get("DENIABLE_URL") or DEFAULT_URL
    parsed = urllib.parse.urlsplit(chosen)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidParameter(
            f"the aggregator URL must be an http:// or https:// URL such as {DEFAULT_URL}, got {chosen!r}"
        )
    return chosen.rstrip("/")


def resolve_token(token: str | None = None, *, token_file: str | Path | None = None) -> str:
    """The bearer token, from the first of: ``token``, the first line of ``token_file``, ``DENIABLE_TOKEN``,
    the first line of the file ``DENIABLE_TOKEN_FILE`` names. Raises :class:`AuthenticationFailed` saying
    where to put it when none is set."""
    if token:
        return _check_token(token.strip(), "the token argument")
    if token_file is None and os.environ.get("DENIABLE_TOKEN"):
        return _check_token(os.environ["DENIABLE_TOKEN"].strip(), "DENIABLE_TOKEN")
    path = token_file or os.environ.get("DENIABLE_TOKEN_FILE")
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthenticationFailed(f"cannot read the token file {str(path)!r}: {exc.strerror or exc}") from None
        lines = text.strip().splitlines()
        return _check_token(lines[0].strip() if lines else "", f"the token file {str(path)!r}")
    raise AuthenticationFailed(
        "no token: set DENIABLE_TOKEN to the analyst (or admin) token, or DENIABLE_TOKEN_FILE / --token-file "
        "to the file holding it (deniable serve writes them to <data dir>/tokens/)"
    )


def _check_token(token: str, where: str) -> str:
    if not token or any(c.isspace() for c in token) or not token.isprintable() or not token.isascii():
        raise AuthenticationFailed(f"{where} does not hold a token (one line of printable ASCII, no spaces)")
    return token


def error_from_answer(status: int | None, body: Any, *, context: str, retry_after: float = 0.0) -> DeniableError:
    """The typed error of an error answer ``status`` with JSON ``body``, its message prefixed by ``context``."""
    code, message, extra = None, f"HTTP {status}", {}
    parsed = parse_error(body)
    if parsed is not None:
        code, message, extra = parsed.code or None, parsed.message or message, dict(parsed.extra)
    cls = _BY_CODE.get(code or "")
    if cls is None and status is not None:
        cls = AggregatorUnavailable if status >= 500 else _BY_STATUS.get(status, DeniableError)
    cls = cls or DeniableError
    text = f"{context}: {message}" if context else message
    if cls is BudgetExceeded:
        exc: DeniableError = BudgetExceeded(
            text,
            spent=float(extra.get("spent", 0.0)),
            remaining=float(extra.get("remaining", 0.0)),
            requested=float(extra.get("requested", 0.0)),
        )
    elif cls is ReleaseRefused:
        after = extra.get("retry_after")
        exc = ReleaseRefused(
            text,
            rule=str(extra.get("rule") or ""),
            next_release_at=extra.get("next_release_at"),
            retry_after=int(after) if isinstance(after, int | float) else None,
        )
    elif cls is RateLimited:
        exc = RateLimited(text, status=status, retry_after=retry_after)
    elif cls is AggregatorUnavailable:
        exc = AggregatorUnavailable(text, status=status)
    else:
        exc = cls(text)
    exc.status = status  # type: ignore[attr-defined]
    exc.code = code or cls.code
    return exc


class AggregatorConnection:
    """Requests to one aggregator with one bearer token."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0) -> None:
        timeout = check_timeout(timeout)
        self.url = resolve_url(url)
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:  # never the token
        return f"AggregatorConnection({self.url!r})"

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None) -> Any:
        """Send ``method path?params`` (None-valued params left out) with a JSON ``body``; return the
        decoded JSON of a 2xx answer or raise the typed error of any other."""
        query = {key: _param(value) for key, value in (params or {}).items() if value is not None}
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {
            "Accept": "application/json",
            "Authorization": f"Bearer {self._token}",
            "User-Agent": _USER_AGENT,
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + target, data=data, headers=headers, method=method)  # noqa: S310
        context = f"{method} {path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return _decode(response.read(), context)
        except urllib.error.HTTPError as exc:
            with exc:
                raw = exc.read()
                retry_after = exc.headers.get("Retry-After")
            try:
                parsed = _decode(raw, context)
            except TransportError:
                parsed = None
            wait = float(retry_after) if retry_after is not None and retry_after.isdigit() else 0.0
            raise error_from_answer(exc.code, parsed, context=context, retry_after=wait) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            error = TransportError(f"could not reach the aggregator at {self.url} ({context}): {reason}")
            error.status = None  # type: ignore[attr-defined]
            raise error from None


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decode(raw: bytes, context: str) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise TransportError(f"{context}: the aggregator answered with a body that is not JSON") from None
