"""How the device talks to the aggregator: JSON over HTTP(S), with the standard library only.

A :class:`Transport` sends one request and returns the status, the headers and the decoded JSON body; it
raises :class:`~deniable.shared.errors.TransportError` only when no HTTP answer came back (refused
connection, timeout, reset). A body that is not JSON comes back as ``body=None`` with ``content_error``
saying why. Deciding what an answer *means* (settle, retry, keep queued) is the caller's job, so tests can
swap in an in-process transport with the same contract (as httpx does).

Redirects: a GET follows them (an http → https move of the config is harmless: the config is pinned); any
other method never does. urllib would re-send a redirected POST as a GET (301-303), so a 3xx to a POST comes
back as the :class:`Response` it is, and the reports stay queued.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from deniable.shared.contract import parse_error
from deniable.shared.errors import InvalidParameter, TransportError
from deniable.shared.limits import check_timeout

__all__ = ["EncodedTransport", "HTTPTransport", "Response", "Transport", "error_message"]

_USER_AGENT = "deniable-client/0.1"


@dataclass(frozen=True)
class Response:
    """One HTTP answer: ``status``, the decoded JSON ``body`` (``None`` when the body was empty or not
    JSON), ``headers`` (names lower-cased), ``content_error`` (why the body is not JSON, else None) and
    ``raw``, the body's bytes as received when the transport has them (the client reuses a descriptor it
    validated from the same bytes; without them it compares the body's JSON text)."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    content_error: str | None = None
    raw: bytes | None = field(default=None, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)


class Transport(Protocol):
    """Sends ``method path`` with an optional JSON body; raises TransportError when nothing answered."""

    def request(self, method: str, path: str, body: Any = None) -> Response: ...


@runtime_checkable
class EncodedTransport(Transport, Protocol):
    """A :class:`Transport` that also sends a body already encoded as JSON text (UTF-8 bytes), as it is.

    The outbox posts a batch this way when the transport offers it (:class:`HTTPTransport` does): the
    envelopes' stored JSON texts are joined into the body, never parsed and encoded again. A transport
    without it gets the same batch as a JSON value (``{"reports": [...]}``) through :meth:`request`.
    """

    def request_encoded(self, method: str, path: str, data: bytes) -> Response: ...


def error_message(response: Response) -> str:
    """The ``{"error": {"code", "message"}}`` of an error answer as ``"code: message"``, or the status."""
    parsed = parse_error(response.body)
    return f"HTTP {response.status}" if parsed is None else parsed.text()


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


class _GetOnlyRedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follows redirects for GET only; any other request gets its 3xx back as an answer."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if req.get_method() != "GET":
            return None  # urllib then raises HTTPError(code), which request() returns as the Response
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_NoDelayHTTPHandler, _NoDelayHTTPSHandler, _GetOnlyRedirectHandler)


class HTTPTransport:
    """:class:`Transport` over ``urllib.request`` to ``base_url`` (``http://`` or ``https://`` only)."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidParameter(
                f"'aggregator_url' must be an http:// or https:// URL such as http://127.0.0.1:8000, "
                f"got {base_url!r}"
            )
        timeout = check_timeout(timeout)
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Response:
        """Send the request; every HTTP status comes back as a :class:`Response`."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        return self._send(method, path, data)

    def request_encoded(self, method: str, path: str, data: bytes) -> Response:
        """Send ``data`` (JSON text, UTF-8) as the body, as it is (:class:`EncodedTransport`)."""
        return self._send(method, path, data)

    def _send(self, method: str, path: str, data: bytes | None) -> Response:
        url = self.base_url + path
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    return _answer(resp.status, resp.headers, resp.read())
            except urllib.error.HTTPError as exc:
                with exc:
                    return _answer(exc.code, exc.headers, exc.read())
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransportError(
                f"could not reach the aggregator at {self.base_url} ({method} {path}): {reason}"
            ) from exc


def _answer(status: int, headers: Any, raw: bytes) -> Response:
    """A :class:`Response` from the status, headers and raw body; a non-JSON body sets ``content_error``."""
    header_map = {k.lower(): v for k, v in (headers.items() if headers is not None else ())}
    if not raw:
        return Response(status, None, header_map)
    try:
        return Response(status, json.loads(raw), header_map, raw=raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        kind = header_map.get("content-type", "no content type")
        return Response(status, None, header_map, f"a body of {len(raw)} bytes that is not JSON ({kind})")
