"""Slow-client attacks on a server, shared by ``tests/system/test_slow_clients.py`` and ``benchmarks/slowclients.py``.

:class:`SlowAttack` holds three kinds of hostile connections open on one loopback server, each a raw
socket, driven from one background thread:

* ``idle``: connects and sends nothing;
* ``slow_headers`` (slowloris): sends a request line, then one header line every ``interval`` seconds,
  never the blank line that ends the headers;
* ``slow_bodies``: sends complete headers announcing a ``Content-Length`` of 10,000 bytes, then one byte
  every ``interval`` seconds.

:meth:`SlowAttack.outcomes` reads what each connection got back: ``"408"`` (a JSON Request Timeout), another
status, ``"closed"`` (closed without a word) or ``"open"`` (still open, no answer).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["SlowAttack"]


class SlowAttack:
    """Idle, slow-header and slow-body connections against ``127.0.0.1:port`` (see the module docstring)."""

    def __init__(
        self, port: int, *, idle: int, slow_headers: int, slow_bodies: int, interval: float = 0.5
    ) -> None:
        self.port = port
        self.interval = interval
        self.counts = {"idle": idle, "slow_headers": slow_headers, "slow_bodies": slow_bodies}
        self.sockets: dict[str, list[socket.socket]] = {kind: [] for kind in self.counts}
        self.refused = 0
        self._answers: dict[int, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, name="slow-attack", daemon=True)

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            self.refused += 1
            return None
        sock.setblocking(False)
        return sock

    def start(self) -> SlowAttack:
        """Open every connection, send the slow ones' first bytes, and start trickling."""
        for kind, count in self.counts.items():
            for _ in range(count):
                sock = self._connect()
                if sock is None:
                    continue
                if kind == "slow_headers":
                    self._send(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                elif kind == "slow_bodies":
                    self._send(sock, b"POST /api/v1/campaigns/slow/reports HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")  # fmt: skip
                self.sockets[kind].append(sock)
        self._thread.start()
        return self

    def _send(self, sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.send(data)

    def _collect(self, sock: socket.socket) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            seen = self._answers.get(sock.fileno(), b"")
            if not seen.endswith(b"\0EOF"):
                self._answers[sock.fileno()] = seen + (data or b"\0EOF")

    def _trickle(self) -> None:
        step = 0
        while not self._stop.wait(self.interval):
            step += 1
            for sock in self.sockets["slow_headers"]:
                self._send(sock, b"X-Slow-%d: 1\r\n" % step)
            for sock in self.sockets["slow_bodies"]:
                self._send(sock, b" ")

    def outcomes(self, kind: str) -> dict[str, int]:
        """How many connections of ``kind`` were answered 408, answered otherwise, closed, or are still open."""
        tally: dict[str, int] = {}
        for sock in self.sockets[kind]:
            self._collect(sock)
            answer = self._answers.get(sock.fileno(), b"")
            if answer.startswith(b"HTTP/1.1 "):
                outcome = answer[9:12].decode()
            elif answer.endswith(b"\0EOF"):
                outcome = "closed"
            else:
                outcome = "open"
            tally[outcome] = tally.get(outcome, 0) + 1
        return tally

    def answer(self, kind: str, index: int = 0) -> bytes:
        """What the ``index``-th connection of ``kind`` received so far."""
        sock = self.sockets[kind][index]
        self._collect(sock)
        return self._answers.get(sock.fileno(), b"").removesuffix(b"\0EOF")

    def stop(self) -> None:
        """Stop trickling and close every connection."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for socks in self.sockets.values():
            for sock in socks:
                sock.close()

    def wait(self, seconds: float) -> None:
        """Sleep while the trickle goes on."""
        time.sleep(seconds)
