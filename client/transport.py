"""How the device talks to the aggregator: JSON over HTTP(S), with the standard library only.

A :class:`Transport` sends one request and returns the status and the decoded JSON body; it raises
:class:`~deniable.shared.errors.TransportError` only when no HTTP answer came back (refused connection,
timeout, reset, a body that is not JSON). Deciding what a status *means* (retry a 5xx, surface a 4xx) is the
caller's job, so tests can swap in an in-process transport with the same contract (as httpx does).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from deniable.shared.errors import InvalidParameter, TransportError

__all__ = ["HTTPTransport", "Response", "Transport", "error_message"]

_USER_AGENT = "deniable-client/0.1"


@dataclass(frozen=True)
class Response:
    """One HTTP answer: ``status`` and the decoded JSON ``body`` (``None`` when the body was empty)."""

    status: int
    body: Any


class Transport(Protocol):
    """Sends ``method path`` with an optional JSON body; raises TransportError when nothing answered."""

    def request(self, method: str, path: str, body: Any = None) -> Response: ...


def error_message(response: Response) -> str:
    """The ``{"error": {"code", "message"}}`` of an error answer as ``"code: message"``, or the status."""
    body = response.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return f"{err.get('code', 'error')}: {err.get('message', '')}".strip()
    return f"HTTP {response.status}"


class _NoDelayHTTPConnection(http.client.HTTPConnection):
    """http.client sends headers and body in two writes; without TCP_NODELAY, Nagle's algorithm and the
    peer's delayed ACK stall every POST by ~40 ms."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _NoDelayHTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _NoDelayHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_NoDelayHTTPConnection, req)


class _NoDelayHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_NoDelayHTTPSConnection, req)


_OPENER = urllib.request.build_opener(_NoDelayHTTPHandler, _NoDelayHTTPSHandler)


class HTTPTransport:
    """:class:`Transport` over ``urllib.request`` to ``base_url`` (``http://`` or ``https://`` only)."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidParameter(
                f"'aggregator_url' must be an http:// or https:// URL such as http://127.0.0.1:8000, "
                f"got {base_url!r}"
            )
        if not (isinstance(timeout, int | float) and 0 < timeout <= 600):
            raise InvalidParameter(f"'timeout' must be a number of seconds in (0, 600], got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)

    def request(self, method: str, path: str, body: Any = None) -> Response:
        """Send the request; every HTTP status comes back as a :class:`Response`."""
        url = self.base_url + path
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                return Response(resp.status, _decode(resp.read(), resp.status, url))
        except urllib.error.HTTPError as exc:
            with exc:
                raw = exc.read()
            try:
                parsed = _decode(raw, exc.code, url)
            except TransportError:
                parsed = None
            return Response(exc.code, parsed)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransportError(
                f"could not reach the aggregator at {self.base_url} ({method} {path}): {reason}; "
                "the report stays in the outbox, call flush() again later"
            ) from exc


def _decode(raw: bytes, status: int, url: str) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TransportError(
            f"the aggregator at {url} answered {status} with a body that is not JSON"
        ) from exc
