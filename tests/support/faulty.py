"""Faults between a device and its aggregator, in two places: on the wire (:class:`FaultyAggregator`) and in
the client's ``Transport`` (:class:`FaultyTransport`, the one fake transport of the tests).

:class:`FaultyAggregator` is a faulty aggregator on loopback: a real HTTP server that forwards to a real
aggregator, or answers what a test scripts (a redirect, an HTML 404, a 413, a 429 with Retry-After, a 503,
a body that is not JSON, a 200 without results, ...).

Usage::

    with FaultyAggregator(upstream=aggregator.url) as proxy:
        proxy.script(Answer(404, "<html>not here</html>", content_type="text/html"))  # the next POST
        client = Client(proxy.url, state_dir)
        ...
        proxy.script()                       # nothing scripted: forward everything to the upstream

``script(*answers, times=1)`` makes the next ``times`` POSTs get the answers in turn (``times=None``: every
POST, until the next ``script``). An answer may also be a callable ``(Request) -> Answer | None`` (None:
forward). Every request is recorded in ``requests`` (method, path, parsed JSON body or None).

:class:`FaultyTcpProxy` is the same idea one layer down, between an aggregator and its database: a TCP
proxy on loopback that forwards bytes both ways, and, when armed with ``drop_on(b"COMMIT", before=...)``,
cuts the next connection whose client sends that pattern (with a TCP reset, both sides at once): before
forwarding it (the transaction dies uncommitted), or once the server answers it (it committed, and the
client never hears so).

:class:`FaultyTransport` wraps any ``Transport`` (``HTTPTransport(url)`` to a real server, :class:`AppTransport`
over the Flask test client in the same process, or a plain function ``(method, path, body) -> Response``):
it records every request and answer and injects the faults a test switches on::

    link = FaultyTransport(HTTPTransport(aggregator.url), posts_down=True)   # POSTs never arrive
    client = Client(aggregator.url, state_dir, transport=link)
    ...
    link.posts_down = False; link.fail_posts(2, status=503)                 # two 503s, then through
    link.edit_config = lambda c: c.update(epsilon=3.0)                      # a tampered descriptor
    link.after_post = lambda request, response: ...                          # crash, report, linger
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deniable.client import Response, TransportError

__all__ = ["Answer", "AppTransport", "FaultyAggregator", "FaultyTcpProxy", "FaultyTransport", "Request"]


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


class FaultyTcpProxy:
    """A TCP proxy on 127.0.0.1 (free port) to ``upstream`` (host, port) that cuts connections on command.

    ``drop_on(pattern, before=True, times=1)``: the next ``times`` client chunks containing ``pattern`` end
    their connection with a reset, ``before`` forwarding the chunk or right after it. ``cut_all()`` resets
    every open connection now. ``drops`` counts the cuts made.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pattern: bytes | None = None
        self._before = True
        self._times = 0
        self.drops = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._running = True
        self._thread = threading.Thread(target=self._accept, name="faulty-tcp-proxy", daemon=True)
        self._thread.start()

    def drop_on(self, pattern: bytes, *, before: bool = True, times: int = 1) -> None:
        with self._lock:
            self._pattern, self._before, self._times = pattern, before, times

    def armed(self) -> int:
        """How many cuts are still to come."""
        with self._lock:
            return self._times

    def cut_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            self._reset(client, server)

    @staticmethod
    def _reset(*sockets: socket.socket) -> None:
        for sock in sockets:
            # shutdown() wakes the other pump's recv() at once (close() alone would wait for it); linger 0
            # makes the close a reset
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                self._reset(client)
                continue
            with self._lock:
                self._pairs.append((client, server))
            state = {"swallow": False}  # after-mode: the server's next answer is dropped with the connection
            threading.Thread(target=self._pump, args=(client, server, True, state), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False, state), daemon=True).start()

    def _cut_now(self, chunk: bytes) -> tuple[bool, bool]:
        """``(cut, before)`` for a client chunk."""
        with self._lock:
            if self._times > 0 and self._pattern is not None and self._pattern in chunk:
                self._times -= 1
                self.drops += 1
                return True, self._before
        return False, False

    def _pump(self, source: socket.socket, dest: socket.socket, from_client: bool, state: dict[str, bool]) -> None:
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self._reset(source, dest)
                return
            if not from_client and state["swallow"]:  # the server answered the COMMIT: the client never hears
                self._reset(source, dest)
                return
            cut, before = self._cut_now(chunk) if from_client else (False, False)
            if cut and before:
                self._reset(source, dest)
                return
            if cut:
                state["swallow"] = True
            try:
                dest.sendall(chunk)
            except OSError:
                self._reset(source, dest)
                return

    def stop(self) -> None:
        self._running = False
        self._listener.close()
        self.cut_all()

    def __enter__(self) -> FaultyTcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------- the fake Transport


class AppTransport:
    """The client's ``Transport`` contract over the Flask test client of an app in this process (serialized:
    the test client is not thread-safe). ``http`` is the test client, for a test's own admin requests."""

    def __init__(self, app: Any) -> None:
        self.http = app.test_client()
        self._lock = threading.Lock()

    def request(self, method: str, path: str, body: Any = None) -> Response:
        with self._lock:
            answer = self.http.open(path, method=method, json=body)
            return Response(answer.status_code, answer.get_json(silent=True))


class FaultyTransport:
    """A ``Transport`` that forwards to ``inner`` and injects faults; the only fake transport of the tests.

    Every request is recorded in ``requests`` (as sent, faults or not) and every answer that came back in
    ``answers``. The faults, each an attribute a test may flip at any time:

    * ``down``: every request raises ``TransportError`` (the network is gone);
    * ``posts_down``: every POST raises ``TransportError`` after it was recorded (an observer kept the
      packet; the device sees a network failure), GETs still pass;
    * :meth:`fail_posts` ``(n, status=None)``: the next ``n`` POSTs fail without reaching ``inner``, raising
      ``TransportError`` or answering ``status`` with an error body;
    * ``edit_config``: GET answers that are JSON objects are copied and edited in place by it (a tampered
      descriptor);
    * ``edit_post``: POST bodies are replaced by what it returns before they are forwarded;
    * ``after_post``: called with the request and the answer after every answered POST (raise there to
      crash the device after the aggregator stored the batch; report to a parent process; linger).
    """

    def __init__(
        self,
        inner: Any,
        *,
        down: bool = False,
        posts_down: bool = False,
        edit_config: Callable[[dict[str, Any]], None] | None = None,
        edit_post: Callable[[Any], Any] | None = None,
        after_post: Callable[[Request, Response], None] | None = None,
    ) -> None:
        self._send: Callable[[str, str, Any], Response] = inner.request if hasattr(inner, "request") else inner
        self.down = down
        self.posts_down = posts_down
        self.edit_config = edit_config
        self.edit_post = edit_post
        self.after_post = after_post
        self.failures = 0
        self.failure_status: int | None = None
        self.requests: list[Request] = []
        self.answers: list[Response] = []

    @property
    def posts(self) -> int:
        """How many POSTs the device sent (including those a fault stopped)."""
        return sum(1 for r in self.requests if r.method == "POST")

    def posted(self) -> list[Request]:
        """The POSTs as sent."""
        return [r for r in self.requests if r.method == "POST"]

    def fail_posts(self, n: int, status: int | None = None) -> None:
        """The next ``n`` POSTs fail: ``TransportError`` (``status=None``) or an answer with that status."""
        self.failures, self.failure_status = n, status

    def request(self, method: str, path: str, body: Any = None) -> Response:
        if method == "POST" and self.edit_post is not None:
            body = self.edit_post(body)
        request = Request(method, path, body)
        self.requests.append(request)
        if self.down:
            raise TransportError("network unreachable (simulated)")
        if method == "POST":
            if self.posts_down:
                raise TransportError("connection reset (simulated: the packet never arrived)")
            if self.failures > 0:
                self.failures -= 1
                if self.failure_status is None:
                    raise TransportError("connection refused (simulated)")
                return Response(self.failure_status, {"error": {"code": "unavailable", "message": "busy"}})
        response = self._send(method, path, body)
        if method == "GET" and self.edit_config is not None and isinstance(response.body, dict):
            config = dict(response.body)
            self.edit_config(config)
            response = Response(response.status, config)
        self.answers.append(response)
        if method == "POST" and self.after_post is not None:
            self.after_post(request, response)
        return response
