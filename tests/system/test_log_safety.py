"""The logs cannot be forged and carry no secret (issue 12 item 4).

Before, the access log held the percent-decoded path, so ``/api/v1/campaigns/x%0A[...] [CRITICAL] FORGED``
wrote a fake log line (and ``%1b[2J``, ``%00`` wrote terminal escapes and NUL bytes), and gunicorn's
"Invalid HTTP request line" warning logged the whole request line, query string and any token in it.
This test sends hostile requests to the real server and scans every line it logged.
"""

from __future__ import annotations

import logging
import re
import socket
import time

from support.server import RunningServer

from deniable.aggregator.log_format import EscapingFormatter, escape

SECRET = "SECRETq7Zt"  # stands for a token a client put in a query string or a broken request line
HOSTILE_PATHS = [
    "/api/v1/campaigns/x%0A[2026-12-01 08:00:00 +0000] [1] [CRITICAL] FORGED",
    "/api/v1/campaigns/x%0D%0AFORGED-CRLF",
    "/api/v1/campaigns/x%1b[2J%1b[31mRED",
    "/api/v1/campaigns/x%00nul",
    "/api/v1/campaigns/x%E2%80%A8FORGED-LS%E2%80%AEbidi",
    "/api/v1/campaigns/x%C0%80overlong",
    f"/api/v1/campaigns/q/estimate?token={SECRET}&group_by=%0AFORGED",
    f"/healthz?access_token={SECRET}",
]
RAW_REQUESTS = [
    f"GARBAGE\x01 /api/v1/campaigns?token={SECRET} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    f"GET /healthz?token={SECRET} HTTP/9.9\r\nHost: x\r\n\r\n".encode(),
    f"GET /x?token={SECRET}\x1b[2J HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    f"GET /x?token={SECRET} HTTP/1.1\r\nHost: x\r\nX-Evil: a\x1bb\r\n\r\n".encode(),
    f"GET /x?token={SECRET} HTTP/1.1\r\n\r\n".encode(),  # no Host
    b"GET /\xff\xfe?token=" + SECRET.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    f"GET /healthz?token={SECRET} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n".encode(),  # body never sent
]
#: How a line the server printed may begin: its start-up lines (the tokens, the address, the database: a
#: file or a URL without its password), gunicorn/uvicorn records, the access log, an indented traceback line.
LINE_START = re.compile(
    r'^((admin|analyst|issuer) token: |deniable aggregator on |database: |\[\d{4}-\d\d-\d\d |"[A-Z]+ /|\| )'
)


def _raw(server: RunningServer, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        sock.settimeout(3)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            pass


def test_hostile_requests_leave_only_escaped_lines_and_no_query_string(server_factory) -> None:  # type: ignore[no-untyped-def]
    server: RunningServer = server_factory(workers=1, extra_args=("--header-timeout", "1", "--body-timeout", "1"))
    for path in HOSTILE_PATHS:
        for role in (None, "analyst"):
            response = server.get(path, role=role)
            assert response.status_code < 500
    for data in RAW_REQUESTS:
        _raw(server, data)
    time.sleep(1.5)  # the unfinished body meets its deadline
    server.stop()
    log = server.log_path.read_bytes()
    assert log, "nothing was logged"
    text = log.decode("utf-8")  # the log is valid UTF-8 ...
    lines = text.split("\n")
    for line in lines:
        # ... and each line is one printable record: no control character, no line separator, no bidi override
        assert not re.search("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", line), repr(line)
        assert not line or LINE_START.match(line), f"a line no record of the server starts like this: {line!r}"
        assert "FORGED" not in line or line.startswith('"GET /api/v1/campaigns/x%'), repr(line)  # only quoted
    assert SECRET not in text, "a query string or request line reached the log"
    assert "?" not in "".join(line for line in lines if line.startswith('"'))  # no query string in the access log
    # the raw path as sent (the client quoted '[' and ' ' too), never its decoding
    forged = "x%0A%5B2026-12-01%2008:00:00%20+0000%5D%20%5B1%5D%20%5BCRITICAL%5D%20FORGED"
    assert f'"GET /api/v1/campaigns/{forged}" 404' in text
    assert '"GET /api/v1/campaigns/x%1B%5B2J%1B%5B31mRED" 404' in text
    assert '"GET /api/v1/campaigns/x%00nul" 404' in text
    assert "Invalid HTTP request received." in text  # the protocol errors were logged, as a fixed text


def test_escape_makes_every_record_one_printable_line() -> None:
    assert escape("a\nb\r\x1b[2J\x00\x7f\x85\u2028\u202e\\") == "a\\x0ab\\x0d\\x1b[2J\\x00\\x7f\\x85\\u2028\\u202e\\\\"
    assert escape("plain /api/v1/campaigns?x=1 é ✓") == "plain /api/v1/campaigns?x=1 é ✓"
    formatter = EscapingFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError("boom\nFORGED line")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "bad %s", ("va\nlue",), exc_info=True)
        import sys

        record.exc_info = sys.exc_info()
    out = formatter.format(record)
    first, *rest = out.split("\n")
    assert first == "ERROR bad va\\x0alue"
    assert rest and all(line.startswith("| ") for line in rest)
    assert any(line == "| FORGED line" for line in rest)  # a newline in an exception stays inside the "| " block
