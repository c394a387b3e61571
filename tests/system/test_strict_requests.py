"""Strict requests (issue 12 item 7): what the old front accepted is now a JSON 4xx.

* a body with a duplicate key (``{"id": "a", "id": "b"}`` created ``b``): 400, through the one strict
  parser the decrypted payloads use, and nothing is created;
* ``application/json; charset=utf-16`` (read as UTF-8 before): 415;
* HTTP/1.1 without ``Host`` (a 200 before), or with two: 400.
"""

from __future__ import annotations

import json
import re
import socket

from support.server import RunningServer

CAMPAIGN = {"question": "q", "categories": ["a", "b"], "epsilon": 1.0}


def _raw(server: RunningServer, data: bytes) -> tuple[int, bytes, dict]:
    """One request as raw bytes; the answer is read to its Content-Length (a kept-alive connection is not
    waited out) or, without one, until the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            head, found, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head) if found else None
            if length is not None and len(body) >= int(length.group(1)):
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, json.loads(body) if body else {}


def test_a_body_with_a_duplicate_key_is_refused_and_creates_nothing(aggregator: RunningServer) -> None:
    body = '{"id": "dup-a", "question": "q", "categories": ["a", "b"], "epsilon": 1.0, "id": "dup-b"}'
    response = aggregator.post("/api/v1/campaigns", role="admin", data=body,
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request" and "duplicate key 'id'" in error["message"]
    assert aggregator.get("/api/v1/campaigns/dup-a").status_code == 404
    assert aggregator.get("/api/v1/campaigns/dup-b").status_code == 404
    nested = '{"reports": [{"v": 1, "v": 2}]}'
    response = aggregator.post("/api/v1/campaigns/dup-a/reports", data=nested,
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400 and "duplicate key 'v'" in response.json()["error"]["message"]


def test_a_charset_other_than_utf8_is_refused(aggregator: RunningServer) -> None:
    body = json.dumps({"id": "charset-16", **CAMPAIGN})
    for charset, payload in (("utf-16", body.encode("utf-16")), ("utf-16", body.encode()), ("latin-1", body.encode())):
        response = aggregator.post("/api/v1/campaigns", role="admin", data=payload,
                                   headers={"Content-Type": f"application/json; charset={charset}"})  # fmt: skip
        assert response.status_code == 415, response.text
        assert "UTF-8" in response.json()["error"]["message"]
    assert aggregator.get("/api/v1/campaigns/charset-16").status_code == 404
    for i, charset in enumerate(("utf-8", "UTF-8", "utf8")):
        response = aggregator.post("/api/v1/campaigns", role="admin", headers={
            "Content-Type": f"application/json; charset={charset}"},
            data=json.dumps({"id": f"charset-8-{i}", **CAMPAIGN}).encode())  # fmt: skip
        assert response.status_code == 201, response.text


def test_http11_without_host_or_with_two_is_a_json_400(aggregator: RunningServer) -> None:
    status, head, body = _raw(aggregator, b"GET /healthz HTTP/1.1\r\n\r\n")
    assert status == 400 and b"application/json" in head.lower()
    assert "Host" in body["error"]["message"]
    status, _, body = _raw(aggregator, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    assert status == 400 and "multiple Host" in body["error"]["message"]
    status, _, body = _raw(aggregator, b"GET /healthz HTTP/1.0\r\n\r\n")  # HTTP/1.0 has no Host requirement
    assert status == 200 and body == {"status": "ok"}


def test_a_header_value_with_a_control_character_is_a_json_400(aggregator: RunningServer) -> None:
    for value in (b"application/json; boundary=\x7f", b"a\x1bb", b"x\x01"):
        status, _, body = _raw(aggregator, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Test: " + value + b"\r\n\r\n")
        assert status == 400 and "control character" in body["error"]["message"], value
