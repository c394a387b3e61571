"""Serving the aggregator: gunicorn's master over uvicorn workers, each an asyncio event loop.

The design (issue 12 item 1): an event loop per worker process owns every connection and hands only
complete requests to the Flask app, which runs in a small thread pool (``a2wsgi``) of the same process.
A connection that is idle, or trickles its headers or its body, costs the loop a socket and a buffer and
never a thread, so that slow clients cannot starve the threads that decrypt reports. Several processes
(``--workers``) share the listening socket, so that CPU-bound decryption runs on every core; gunicorn's
master restarts a worker that dies and stops them gracefully on SIGTERM.

What each layer bounds:

* :class:`DeniableH11Protocol` (uvicorn's h11 protocol, extended): at most ``max_connections`` open
  connections per process (one beyond is answered ``503`` with ``Retry-After`` and closed); a request line
  and headers complete within ``header_timeout`` seconds of the connection opening or of the previous
  answer (else ``408`` and close, or a silent close if nothing was sent); at most
  :data:`~deniable.shared.limits.MAX_HEADER_BYTES` of head; HTTP that h11 refuses (including HTTP/1.1
  without ``Host``) answered with the API's JSON 400.
* :class:`deniable.aggregator.front.Front`: header count, rate limits, body size and body deadline.
* Flask: everything about the content.

Logs: gunicorn's and uvicorn's records pass through :class:`deniable.aggregator.log_format.EscapingFormatter`
(one escaped line per record); the access log is the front's (no query string, no address); uvicorn's own
access log, which names the client address and the query string, is off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import h11
from a2wsgi import WSGIMiddleware
from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn_worker import UvicornWorker

from deniable.aggregator.api.app import create_app
from deniable.aggregator.front import Front, FrontSettings, error_bytes
from deniable.aggregator.log_format import EscapingFormatter
from deniable.shared.limits import MAX_HEADER_BYTES

__all__ = ["AggregatorServer", "PrivateLogger", "gunicorn_options"]

GRACEFUL_TIMEOUT = 15


class PrivateLogger(Logger):
    """gunicorn's logger with every record escaped into one line (:mod:`deniable.aggregator.log_format`)."""

    def _set_handler(self, log: Any, output: Any, fmt: logging.Formatter, stream: Any = None) -> None:
        escaping = EscapingFormatter(fmt._fmt, fmt.datefmt)
        super()._set_handler(log, output, escaping, stream)  # type: ignore[misc]  # private, not in the stubs


def _raw_answer(status: int, reason: str, code: str, message: str, extra: str = "") -> bytes:
    body = error_bytes(code, message)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{extra}Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class DeniableH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection bound, a header deadline and JSON protocol errors."""

    settings: ClassVar[FrontSettings] = FrontSettings()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._peer_done = False
        self._deadline: asyncio.TimerHandle | None = None
        self._protocol_error = ""
        next_event = self.conn.next_event

        def recording_next_event() -> Any:  # keep h11's reason for the JSON 400
            try:
                return next_event()
            except h11.RemoteProtocolError as exc:
                self._protocol_error = str(exc)
                raise

        self.conn.next_event = recording_next_event  # type: ignore[method-assign]

    # -- the connection bound ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.server_state.connections) >= self.settings.max_connections:
            self._refused = True
            self.transport = transport
            transport.write(
                _raw_answer(
                    503, "Service Unavailable", "too_many_connections",
                    f"this aggregator process holds its maximum of {self.settings.max_connections} open "
                    "connections; retry after a second",
                    extra="Retry-After: 1\r\n",
                )
            )
            transport.close()
            return
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        if self._refused:
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_deadline()  # the headers are complete; the front times the body

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """A client that half-closes after a complete request still gets its answer (then the connection
        closes); one that half-closes mid-request is closed at once (its request can never complete)."""
        if self._refused or self.conn.their_state is not h11.DONE:
            return None
        self._peer_done = True
        return True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._peer_done:
            self.transport.close()
        elif not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()  # the next request's headers are due from now

    # -- the header deadline ----------------------------------------------------------------------

    def _arm_header_deadline(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.settings.header_timeout, self._header_deadline_passed)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _header_deadline_passed(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        partial, _ = self.conn.trailing_data
        if partial and self.conn.our_state is h11.IDLE:
            self.transport.write(
                _raw_answer(
                    408, "Request Timeout", "request_timeout",
                    f"the request line and headers did not arrive within {self.settings.header_timeout:g} s; "
                    "send the whole request at once",
                )
            )
        self.transport.close()

    # -- protocol errors --------------------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        reason = self._protocol_error or msg
        if "Transfer-Encoding" in reason:
            reason += "; send the body with Content-Length or Transfer-Encoding: chunked"
        self.transport.write(
            _raw_answer(400, "Bad Request", "bad_request", f"the request is not valid HTTP/1.1: {reason[:200]}")
        )
        self.transport.close()


class DeniableWorker(UvicornWorker):  # type: ignore[misc]
    """A gunicorn worker running uvicorn with :class:`DeniableH11Protocol` (subclassed per server)."""

    protocol_class: ClassVar[type[DeniableH11Protocol]] = DeniableH11Protocol
    trusted_proxies: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.CONFIG_KWARGS = {
            "loop": "asyncio",
            "http": self.protocol_class,
            "lifespan": "off",
            "access_log": False,
            "server_header": False,
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "timeout_keep_alive": self.protocol_class.settings.keepalive_timeout,
            "timeout_graceful_shutdown": GRACEFUL_TIMEOUT - 2,
            "proxy_headers": bool(self.trusted_proxies),
            "forwarded_allow_ips": self.trusted_proxies or "127.0.0.1",
        }
        super().__init__(*args, **kwargs)
        for name, source in (("deniable.access", self.log.access_log), ("deniable", self.log.error_log)):
            logger = logging.getLogger(name)
            logger.handlers = source.handlers
            logger.setLevel(logging.INFO)
            logger.propagate = False


def worker_class(settings: FrontSettings, *, trusted_proxies: str = "") -> type[DeniableWorker]:
    """A worker class (and protocol class) carrying ``settings`` to every worker process of one server."""
    protocol = type("ConfiguredH11Protocol", (DeniableH11Protocol,), {"settings": settings})
    return type(
        "ConfiguredDeniableWorker",
        (DeniableWorker,),
        {"protocol_class": protocol, "trusted_proxies": trusted_proxies, "__module__": __name__},
    )


def gunicorn_options(
    *,
    host: str,
    port: int,
    workers: int,
    threads: int = 4,
    settings: FrontSettings | None = None,
    trusted_proxies: str = "",
) -> dict[str, Any]:
    """The gunicorn settings ``deniable serve`` uses."""
    settings = settings or FrontSettings()
    return {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": worker_class(settings, trusted_proxies=trusted_proxies),
        "threads": threads,
        "logger_class": PrivateLogger,
        "accesslog": "-",
        "errorlog": "-",
        "loglevel": "info",
        "timeout": 120,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "keepalive": int(settings.keepalive_timeout),
        "proc_name": "deniable-aggregator",
        "control_socket_disable": True,  # one shared ~/.gunicorn socket would clash between servers
        "forwarded_allow_ips": trusted_proxies or "127.0.0.1",
        "proxy_allow_ips": "",
    }


class AggregatorServer(BaseApplication):
    """gunicorn application serving ``Front(a2wsgi(create_app(app_config)))`` with the given options."""

    def __init__(
        self,
        app_config: Mapping[str, Any],
        options: Mapping[str, Any],
        settings: FrontSettings,
        factory: Callable[[Mapping[str, Any]], Any] = create_app,
    ) -> None:
        self.factory = factory  # the shuffler (deniable shuffle) serves its own app on the same stack
        self.app_config = dict(app_config)
        self.options = dict(options)
        self.settings = replace(settings, max_body=int(self.app_config.get("MAX_CONTENT_LENGTH", settings.max_body)))
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        threads = int(self.options.get("threads", 4))
        wsgi: Any = self.factory(self.app_config)
        asgi: Any = WSGIMiddleware(wsgi, workers=threads)
        return Front(asgi, self.settings)
