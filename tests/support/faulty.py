"""A faulty aggregator on loopback: a real HTTP server that forwards to a real aggregator, or answers what
a test scripts (a redirect, an HTML 404, a 413, a 429 with Retry-After, a 503, a body that is not JSON, a
200 without results, ...).

Usage::

    with FaultyAggregator(upstream=aggregator.url) as proxy:
        proxy.script(Answer(404, "<html>not here</html>", content_type="text/html"))  # the next POST
        client = Client(proxy.url, state_dir)
        ...
        proxy.script()                       # nothing scripted: forward everything to the upstream

``script(*answers, times=1)`` makes the next ``times`` POSTs get the answers in turn (``times=None``: every
POST, until the next ``script``). An answer may also be a callable ``(Request) -> Answer | None`` (None:
forward). Every request is recorded in ``requests`` (method, path, parsed JSON body or None).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Answer", "FaultyAggregator", "Request"]


@dataclass(frozen=True)
class Answer:
    """A canned HTTP answer: ``body`` as bytes, text, or a JSON-ready object."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def raw(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


@dataclass(frozen=True)
class Request:
    """A request the faulty aggregator received."""

    method: str
    path: str
    body: Any

    @property
    def report_ids(self) -> list[str]:
        """The report ids of a batch POST (empty for anything else)."""
        if not isinstance(self.body, dict) or not isinstance(self.body.get("reports"), list):
            return []
        return [str(e.get("report_id")) for e in self.body["reports"]]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_FORWARD = urllib.request.build_opener(_NoRedirect)


class FaultyAggregator:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 (free port) that forwards to ``upstream`` unless scripted."""

    def __init__(self, upstream: str | None = None) -> None:
        self.upstream = None if upstream is None else upstream.rstrip("/")
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._answers: list[Answer | Callable[[Request], Answer | None]] = []
        self._times: int | None = 0
        self._used = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = Request(self.command, self.path, body)
                answer = outer._answer_for(request)
                if answer is None:
                    answer = outer._forward(self.command, self.path, raw, self.headers.get("Content-Type"))
                data = answer.raw()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-aggregator", daemon=True)
        self._thread.start()

    # -- scripting -----------------------------------------------------------------------------------
    def script(self, *answers: Answer | Callable[[Request], Answer | None], times: int | None = 1) -> None:
        """The next ``times`` POSTs (None: all) get ``answers`` in turn; no answers: forward everything."""
        with self._lock:
            self._answers = list(answers)
            self._times = (len(answers) * times if times is not None else None) if answers else 0
            self._used = 0

    def posts(self) -> list[Request]:
        """The POSTs received so far."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST"]

    def _answer_for(self, request: Request) -> Answer | None:
        with self._lock:
            self.requests.append(request)
            if request.method != "POST" or not self._answers or self._times == 0:
                return None
            chosen = self._answers[self._used % len(self._answers)]
            self._used += 1
            if self._times is not None:
                self._times -= 1
        return chosen(request) if callable(chosen) else chosen

    def _forward(self, method: str, path: str, raw: bytes, content_type: str | None) -> Answer:
        if self.upstream is None:
            return Answer(502, {"error": {"code": "no_upstream", "message": "nothing scripted, no upstream"}})
        req = urllib.request.Request(
            self.upstream + path, data=raw or None, method=method,
            headers={"Content-Type": content_type or "application/json", "Accept": "application/json"},
        )
        try:
            with _FORWARD.open(req, timeout=30) as resp:
                return Answer(resp.status, resp.read(), content_type=resp.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as exc:
            with exc:
                return Answer(exc.code, exc.read(), content_type=exc.headers.get("Content-Type", ""))

    # -- lifecycle -----------------------------------------------------------------------------------
    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FaultyAggregator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
