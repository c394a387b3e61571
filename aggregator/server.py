"""Running the aggregator under gunicorn (a production WSGI server), embedded via ``BaseApplication``.

Each worker process builds its own app with :func:`create_app` (no preloading: SQLite connections must
never cross a fork). Workers are ``gthread``: a few threads per process, so that decryption (CPU) in one
request overlaps with the fsync of another. The access log names method, path, status, size and time
only: no client address, user agent, query string, header or body ever reaches a log line.

An error answer to a request that carries a body says ``Connection: close`` and closes
(:func:`close_after_unread_body`): the app may have refused the body without reading it (413, 415, 401,
404 ...), and gunicorn only drains 64 KiB of an unread body before it drops a keep-alive connection. Without
the header a client would reuse that connection for its next request and see it cut (RFC 9112 §9.6).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from deniable.aggregator.app import create_app

__all__ = [
    "ACCESS_LOG_FORMAT",
    "AggregatorServer",
    "PrivateLogger",
    "close_after_unread_body",
    "gunicorn_options",
    "remember_request",
    "write_json_error",
]

#: method, path (no query string), status, response bytes, milliseconds.
ACCESS_LOG_FORMAT = '"%(m)s %(U)s" %(s)s %(B)s %(M)sms'


class PrivateLogger(Logger):  # type: ignore[misc]
    """gunicorn's logger without client addresses: its one address-bearing message (a malformed HTTP
    request, ``Invalid request from ip=...``) is logged with the address redacted."""

    _ADDRESS = re.compile(r"ip=\S+")

    def warning(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        super().warning(self._ADDRESS.sub("ip=[redacted]:", str(msg)), *args, **kwargs)


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's answer to a request it cannot parse (bad request line, oversized headers, bad chunking),
    as the API's JSON error body ``{"error": {"code", "message"}}`` instead of gunicorn's HTML page.

    gunicorn answers an unknown transfer coding with 501; the API promises no 5xx for anything a client
    sends, so that becomes a 400 telling the client what to send instead."""
    if status_int >= 500:
        status_int, reason = 400, "Bad Request"
        mesg = f"{mesg}; send the body with Content-Length or Transfer-Encoding: chunked".lstrip("; ")
    code = re.sub(r"[^a-z0-9]+", "_", reason.lower()).strip("_") or "bad_request"
    body = json.dumps({"error": {"code": code, "message": mesg or reason}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


#: The gunicorn request being served by this thread (set by :func:`remember_request`; gthread serves a request
#: on one thread from ``pre_request`` to the last byte of the response).
_serving = threading.local()


def remember_request(worker: Any, req: Any) -> None:
    """gunicorn's ``pre_request`` hook: keep the parsed request so that the app can ask to close after it."""
    _serving.request = req


def _carries_body(environ: Mapping[str, Any]) -> bool:
    if environ.get("HTTP_TRANSFER_ENCODING"):
        return True
    length = str(environ.get("CONTENT_LENGTH") or "0")
    return not length.isdigit() or int(length) > 0


def close_after_unread_body(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """WSGI middleware: an error status (≥ 400) to a request with a body closes the connection, announced by
    ``Connection: close``. Successful answers have read their whole body, so their connection stays open."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            request = getattr(_serving, "request", None)
            if request is not None and int(status[:3]) >= 400 and _carries_body(environ):
                request.force_close()
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return wrapped


def gunicorn_options(*, host: str, port: int, workers: int, threads: int = 4) -> dict[str, Any]:
    """The gunicorn settings ``deniable serve`` uses."""
    return {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "logger_class": PrivateLogger,
        "accesslog": "-",
        "access_log_format": ACCESS_LOG_FORMAT,
        "errorlog": "-",
        "loglevel": "info",
        "timeout": 120,
        "graceful_timeout": 15,
        "keepalive": 5,
        "limit_request_line": 4094,
        "limit_request_fields": 100,
        "limit_request_field_size": 8190,
        "proc_name": "deniable-aggregator",
        "control_socket_disable": True,  # one shared ~/.gunicorn socket would clash between servers
        "forwarded_allow_ips": "",
        "proxy_allow_ips": "",
        "pre_request": remember_request,
    }


class AggregatorServer(BaseApplication):  # type: ignore[misc]
    """gunicorn application serving ``create_app(app_config)`` with the given options."""

    def __init__(self, app_config: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        self.app_config = dict(app_config)
        self.options = dict(options)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        gunicorn_util.write_error = write_json_error  # gunicorn has no hook for its protocol-error page
        return close_after_unread_body(create_app(self.app_config))
