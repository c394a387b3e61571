"""The event-loop front of the aggregator: an ASGI app that hands only complete requests to the WSGI app.

``deniable serve`` runs uvicorn workers under gunicorn (:mod:`deniable.aggregator.server`). In each worker
process one asyncio event loop owns every connection, and :class:`Front` sits between it and the Flask
app (run by ``a2wsgi`` in a pool of threads). For each request the front, on the event loop:

1. refuses more than :data:`~deniable.shared.limits.MAX_HEADER_FIELDS` header fields (431) and header
   values with control characters (400);
2. applies the rate limits of the client address (:mod:`deniable.aggregator.ratelimit`): a request that
   carries ``Authorization`` while the address has used up its failed authentications, and a report batch
   while its ingestion bucket is empty, get 429 with ``Retry-After`` before a thread is used;
3. reads the whole body, at most ``max_body`` bytes (413 at once for a larger ``Content-Length``, 413 as
   soon as a chunked body grows past it) within ``body_timeout`` seconds of the headers (408 after), so
   that a slow body costs the loop a buffer and never a thread;
4. only then passes the request to the app, with the body as one ``Content-Length`` message.

The header deadline and the connection bound live in the protocol (:mod:`deniable.aggregator.server`),
since they apply before there is a request. An error answer (≥ 400) to a request that carried a body says
``Connection: close``: a body refused by size was not read to its end, and a client must not reuse that
connection (RFC 9112 §9.6). Every answer is logged in one access-log line: method, raw path (still
percent-encoded, without its query string; escaped by :mod:`deniable.aggregator.log_format`), status,
response bytes and milliseconds. Nothing else of a request reaches a log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from deniable.aggregator.ratelimit import BucketTable, Decision
from deniable.shared.contract import error_body
from deniable.shared.limits import (
    AUTH_FAILURE_BURST_DEFAULT,
    AUTH_FAILURE_RATE_DEFAULT,
    BODY_TIMEOUT_DEFAULT,
    HEADER_TIMEOUT_DEFAULT,
    INGEST_BURST_DEFAULT,
    INGEST_RATE_DEFAULT,
    KEEPALIVE_TIMEOUT,
    MAX_BODY_BYTES_DEFAULT,
    MAX_CONNECTIONS_DEFAULT,
    MAX_HEADER_FIELDS,
)

__all__ = ["ENVIRON_INGEST_LIMIT", "Front", "FrontSettings", "error_bytes"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("deniable.access")

#: The WSGI environ key under which the app finds :meth:`RateLimits.take_reports` bound to the client.
ENVIRON_INGEST_LIMIT = "deniable.take_reports"

#: Control characters, which RFC 9110 §5.5 excludes from field values (h11 lets all but NUL, CR and LF pass).
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")

#: The one route whose requests spend ingestion tokens.
_REPORTS_PATH = re.compile(rb"^/api/v1/campaigns/[^/]+/reports/?$")


@dataclass(frozen=True, slots=True)
class FrontSettings:
    """What the front and the protocol enforce (``deniable serve`` flags; bounds in ``shared/limits.py``)."""

    max_body: int = MAX_BODY_BYTES_DEFAULT
    header_timeout: float = HEADER_TIMEOUT_DEFAULT
    body_timeout: float = BODY_TIMEOUT_DEFAULT
    keepalive_timeout: float = KEEPALIVE_TIMEOUT
    max_connections: int = MAX_CONNECTIONS_DEFAULT
    ingest_rate: float = INGEST_RATE_DEFAULT
    ingest_burst: int = INGEST_BURST_DEFAULT
    auth_failure_rate: float = AUTH_FAILURE_RATE_DEFAULT
    auth_failure_burst: int = AUTH_FAILURE_BURST_DEFAULT


def error_bytes(code: str, message: str) -> bytes:
    """The API's JSON error body (:func:`deniable.shared.contract.error_body`) as bytes, for answers the
    front writes before Flask sees the request."""
    return json.dumps(error_body(code, message)).encode()


class RateLimits:
    """The two bucket tables of one process: reports submitted and authentications failed, per address."""

    def __init__(self, settings: FrontSettings) -> None:
        self.ingest = BucketTable(rate=settings.ingest_rate, burst=settings.ingest_burst)
        self.auth_failures = BucketTable(rate=settings.auth_failure_rate, burst=settings.auth_failure_burst)

    def take_reports(self, address: str, count: int) -> Decision:
        """Spend ``count`` ingestion tokens of ``address`` (all or none)."""
        return self.ingest.take(address, count)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


class Front:
    """ASGI middleware in front of ``app`` (an a2wsgi-wrapped WSGI app); see the module docstring."""

    def __init__(self, app: ASGIApp, settings: FrontSettings, limits: RateLimits | None = None) -> None:
        self.app = app
        self.settings = settings
        self.limits = limits or RateLimits(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off and websockets are not served
            return
        started = time.perf_counter()
        sent = {"status": 0, "bytes": 0}
        carries_body = _header(scope, b"transfer-encoding") is not None or (
            _header(scope, b"content-length") not in (None, b"0")
        )
        address = _client_address(scope)

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                sent["status"] = status
                headers = list(message.get("headers", []))
                if status >= 400 and carries_body:
                    headers = [(k, v) for k, v in headers if k.lower() != b"connection"]
                    headers.append((b"connection", b"close"))
                if status == 401:
                    self.limits.auth_failures.charge(address)
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self._handle(scope, receive, logged_send, address=address, carries_body=carries_body)
        finally:
            if sent["status"]:
                raw_path = bytes(scope.get("raw_path") or scope["path"].encode()).partition(b"?")[0]
                access_log.info(
                    '"%s %s" %d %d %dms',
                    scope["method"],
                    raw_path.decode("latin-1"),
                    sent["status"],
                    sent["bytes"],
                    round((time.perf_counter() - started) * 1000),
                )

    async def _handle(self, scope: Scope, receive: Receive, send: Send, *, address: str, carries_body: bool) -> None:
        if len(scope["headers"]) > MAX_HEADER_FIELDS:
            await _answer(send, 431, "request_header_fields_too_large",
                          f"a request may carry at most {MAX_HEADER_FIELDS} header fields")
            return
        if any(_CONTROL.search(value) for _, value in scope["headers"]):  # RFC 9110 §5.5: no CTL in a value
            await _answer(send, 400, "bad_request", "a header value contains a control character; remove it")
            return
        refusal = self._rate_limit(scope, address)
        if refusal is not None:
            code, message, wait = refusal
            await _answer(send, 429, code, message, headers=[(b"retry-after", str(wait).encode())])
            return
        body = b""
        if carries_body:
            read = await self._read_body(scope, receive, send)
            if read is None:
                return
            body = read
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length", b"transfer-encoding")]
        if carries_body:
            headers.append((b"content-length", str(len(body)).encode()))
        inner_scope = {**scope, "headers": headers}
        inner_scope.setdefault("extensions", {})
        inner_scope["extensions"] = {
            **(scope.get("extensions") or {}),
            "deniable": {ENVIRON_INGEST_LIMIT: lambda count: self.limits.take_reports(address, count)},
        }
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(inner_scope, replay, send)

    def _rate_limit(self, scope: Scope, address: str) -> tuple[str, str, int] | None:
        if _header(scope, b"authorization") is not None:
            verdict = self.limits.auth_failures.check(address)
            if not verdict.allowed:
                return (
                    "too_many_failed_authentications",
                    "too many requests with a wrong token came from this address; wait for Retry-After "
                    "seconds, then send the right token",
                    verdict.retry_after,
                )
        if scope["method"] == "POST" and _REPORTS_PATH.match(bytes(scope.get("raw_path") or b"")):
            verdict = self.limits.ingest.take(address, 1)
            if not verdict.allowed:
                return (
                    "rate_limited",
                    f"this address sent more reports than this aggregator accepts per second "
                    f"({self.limits.ingest.rate:g}/s); wait for Retry-After seconds and send the batch again",
                    verdict.retry_after,
                )
        return None

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None after answering 413/408 (or when the client went away)."""
        limit = self.settings.max_body
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = bytes(message.get("body", b""))
                    size += len(chunk)
                    if size > limit:
                        await _too_large(send, limit)
                        return None
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            await _answer(
                send, 408, "request_timeout",
                f"the request body did not arrive within {self.settings.body_timeout:g} s of its headers; "
                "send it again at once",
            )
            return None


async def _too_large(send: Send, limit: int) -> None:
    await _answer(send, 413, "request_entity_too_large",
                  f"the request body is larger than this aggregator accepts ({limit} bytes); send smaller batches")


async def _answer(
    send: Send, status: int, code: str, message: str, *, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = error_bytes(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
