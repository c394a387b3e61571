"""Hypothesis-generated malformed envelopes, bodies and raw HTTP against the real server: never a 5xx.

What is thrown at ``POST /api/v1/campaigns/<id>/reports`` (and the admin's ``POST /api/v1/campaigns``):

* envelopes with one field broken: bad base64url (foreign characters, padding, impossible lengths,
  non-canonical trailing bits), wrong lengths of ``report_id``/``pseudonym``/``ct``, wrong JSON types,
  missing or extra keys, unknown versions; each sits in a batch next to a valid envelope, which must
  still be accepted (a bad neighbour loses nothing);
* arbitrary JSON documents and arbitrary bytes as the body, bodies under every content type;
* deeply nested JSON (up to a million levels) as the body, inside an envelope, and sealed inside a
  ciphertext; payloads that decrypt to non-JSON, invalid UTF-8, duplicate keys, NaN or a non-object;
* bodies past the size limit (413), batches past 1,000 envelopes (400), empty batches;
* raw HTTP that is not HTTP: an over-long request line, over-large headers, a bad request line or
  version, an unknown transfer coding, an ``Expect`` the server cannot meet.

Every answer must be below 500 (an unknown transfer coding too: 400, not gunicorn's 501) and every error the
JSON body ``{"error": {"code", "message"}}``; the server stays healthy and still ingests. Seeded
(``derandomize=True``) and bounded (``DENIABLE_FUZZ_EXAMPLES`` scales the example counts).
"""

from __future__ import annotations

import base64
import json
import os
import socket
from collections import Counter
from typing import Any

import numpy as np
import pytest
import requests
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.reports import simulate_envelopes
from support.server import RunningServer
from support.strategies import broken_envelope_field, finite_json

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, hpke_info, signed_message
from deniable.shared.ids import device_signing_key, new_report_id, pseudonym_of_key

SCALE = max(1, int(os.environ.get("DENIABLE_FUZZ_EXAMPLES", "25")) // 25)
CAMPAIGN = "bodies"
REPORTS = f"/api/v1/campaigns/{CAMPAIGN}/reports"
POOL = 400
#: HTTP answers received by this module, by status (printed at the end).
STATUSES: Counter[int] = Counter()

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

FUZZ = settings(
    max_examples=40 * SCALE,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

class Pool(list[dict[str, Any]]):
    """Envelopes with a short repr (hypothesis prints the arguments of a failing example)."""

    def __repr__(self) -> str:
        return f"<{len(self)} valid envelopes>"


@pytest.fixture(scope="module")
def pool(aggregator: RunningServer) -> list[dict[str, Any]]:
    """Valid envelopes of an OLH campaign with a group field (each example spends fresh ones)."""
    aggregator.session.hooks["response"].append(
        lambda response, *args, **kwargs: STATUSES.update([response.status_code])
    )
    raw = aggregator.create_campaign(
        id=CAMPAIGN, question="Fuzzed bodies?", categories=[f"c{i}" for i in range(8)], epsilon=2.0,
        mechanism="olh", group_fields=["site"],
    )  # fmt: skip
    rng = np.random.default_rng(99)
    values = rng.integers(0, 8, size=POOL).tolist()
    return Pool(simulate_envelopes(raw, values, rng=rng, groups=[{"site": "s1"}] * POOL))


def assert_clean(response: requests.Response) -> None:
    """Below 500, and every error a JSON error body."""
    status = response.status_code
    assert status < 500, (status, response.text[:300])
    if status >= 400:
        assert response.headers.get("Content-Type", "").startswith("application/json"), (status, response.text[:300])
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str) and error["message"]


def _post_raw(server: RunningServer, path: str, data: bytes, content_type: str | None, **kwargs: Any) -> Any:
    headers = {} if content_type is None else {"Content-Type": content_type}
    return server.post(path, data=data, headers=headers, **kwargs)


# ------------------------------------------------------------------------------------- malformed envelopes


def _break(envelope: dict[str, Any], field: str, value: Any) -> Any:
    if field == "<drop>":
        return {k: v for k, v in envelope.items() if k != value}
    if field == "<extra>":
        return {**envelope, value: 1} if value not in envelope else {**envelope, value + "x": 1}
    if field == "<replace>":
        return value
    return {**envelope, field: value}


@FUZZ
@given(data=st.data())
def test_malformed_envelopes_are_rejected_and_spare_their_neighbours(
    aggregator: RunningServer, pool: list[dict[str, Any]], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, POOL - 1))
    valid = pool[index]
    broken = [
        _break(pool[(index + 1 + i) % POOL], *data.draw(broken_envelope_field()))
        for i in range(data.draw(st.integers(1, 4)))
    ]
    position = data.draw(st.integers(0, len(broken)))
    batch = [*broken[:position], valid, *broken[position:]]
    response = aggregator.post(REPORTS, json={"reports": batch})
    assert_clean(response)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == len(batch)
    assert results[position]["status"] in ("accepted", "duplicate"), results[position]
    for i, result in enumerate(results):
        if i != position:
            assert result["status"] == "rejected", (batch[i], result)
            assert result["reason"]


@FUZZ
@given(ct=st.binary(min_size=0, max_size=200))
def test_random_ciphertexts_of_every_length_are_rejected(
    aggregator: RunningServer, pool: list[dict[str, Any]], ct: bytes
) -> None:
    envelope = {**pool[0], "ct": base64.urlsafe_b64encode(ct).rstrip(b"=").decode()}
    response = aggregator.post(REPORTS, json={"reports": [envelope]})
    assert_clean(response)
    assert response.json()["results"][0]["status"] == "rejected"


# ------------------------------------------------------------------------------------- arbitrary bodies


@FUZZ
@given(body=finite_json)
def test_arbitrary_json_bodies(aggregator: RunningServer, pool: list[dict[str, Any]], body: Any) -> None:
    assert_clean(aggregator.post(REPORTS, json=body))
    assert_clean(aggregator.post("/api/v1/campaigns", role="admin", json=body))
    assert_clean(aggregator.post(REPORTS, json={"reports": [body]}))


CONTENT_TYPES = [
    None,
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=utf-16",
    "application/json;charset=latin-1",
    "application/jsonx",
    "application/merge-patch+json",
    "*/*",
    "application/json",
    "APPLICATION/JSON",
    "application/json; boundary=\x7f",
]


@FUZZ
@given(raw=st.binary(max_size=300), content_type=st.sampled_from(CONTENT_TYPES))
def test_arbitrary_bytes_under_any_content_type(
    aggregator: RunningServer, pool: list[dict[str, Any]], raw: bytes, content_type: str | None
) -> None:
    assert_clean(_post_raw(aggregator, REPORTS, raw, content_type))
    assert_clean(_post_raw(aggregator, "/api/v1/campaigns", raw, content_type, role="admin"))


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_a_valid_batch_under_a_wrong_content_type_is_refused_cleanly(
    aggregator: RunningServer, pool: list[dict[str, Any]], content_type: str | None
) -> None:
    body = json.dumps({"reports": [pool[1]]}).encode()
    if content_type == "application/json; charset=utf-16":
        body = body.decode().encode("utf-16")
    response = _post_raw(aggregator, REPORTS, body, content_type)
    assert_clean(response)
    # a charset other than UTF-8 is refused (415), even when the bytes happen to read as UTF-8 (issue 12 item 7)
    readable = content_type in ("application/json", "APPLICATION/JSON")
    assert response.status_code in ((200,) if readable else (400, 415)), (content_type, response.status_code)


@pytest.mark.parametrize("depth", [100, 1_000, 10_000, 100_000, 1_000_000])
@pytest.mark.parametrize("shape", ["array", "object"])
def test_deeply_nested_json(aggregator: RunningServer, pool: list[dict[str, Any]], depth: int, shape: str) -> None:
    opening, closing = ("[", "]") if shape == "array" else ('{"a":', "}")
    deep = opening * depth + "1" + closing * depth
    responses = [
        _post_raw(aggregator, REPORTS, deep.encode(), "application/json"),
        _post_raw(aggregator, REPORTS, f'{{"reports": [{deep}]}}'.encode(), "application/json"),
        _post_raw(aggregator, "/api/v1/campaigns", f'{{"id": {deep}}}'.encode(), "application/json", role="admin"),
    ]
    for response in responses:
        assert_clean(response)
        assert response.status_code in (200, 400, 413, 422), response.status_code


def test_bodies_past_the_limits(aggregator: RunningServer, pool: list[dict[str, Any]]) -> None:
    huge = b'{"reports": ["' + b"a" * (9 * 1024 * 1024) + b'"]}'
    response = _post_raw(aggregator, REPORTS, huge, "application/json")
    assert_clean(response)
    assert response.status_code == 413
    too_many = aggregator.post(REPORTS, json={"reports": [pool[2]] * 1001})
    assert_clean(too_many)
    assert too_many.status_code == 400
    empty = aggregator.post(REPORTS, json={"reports": []})
    assert_clean(empty)
    assert empty.status_code == 400
    long_ct = {**pool[3], "ct": "A" * (90 * 1024)}
    response = aggregator.post(REPORTS, json={"reports": [long_ct, pool[3]]})
    assert_clean(response)
    assert response.json()["results"][0]["status"] == "rejected"
    big_number = _post_raw(aggregator, REPORTS, b'{"reports": [' + b"9" * 100_000 + b"]}", "application/json")
    assert_clean(big_number)


# ------------------------------------------------------------------------------------- sealed garbage


def _seal_bytes(config: CampaignConfig, plaintext: bytes) -> dict[str, Any]:
    """Seal arbitrary plaintext bytes exactly as ``seal`` would seal canonical JSON (same suite, same info,
    padded to the campaign's length, signed by a fresh device's campaign key): only the content is wrong."""
    report_id = new_report_id()
    signer = device_signing_key(os.urandom(32), config.id)
    device_key = signer.public_key().public_bytes_raw()
    pseudonym = pseudonym_of_key(device_key, config.id)
    info = hpke_info(config.id, config.format_version, report_id, pseudonym)
    assert config.padded_length is not None
    padded = plaintext + bytes(max(0, config.padded_length - len(plaintext)))
    ciphertext = SUITE.encrypt(padded, X25519PublicKey.from_public_bytes(config.public_key_bytes), info=info)
    signature = signer.sign(signed_message(info, ciphertext))
    return Envelope(config.format_version, report_id, pseudonym, ciphertext, device_key, signature).to_json()


#: The envelope suite as docs/wire-format.md names it: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305.
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)

SEALED_GARBAGE: list[bytes] = [
    b"",
    b"not json",
    b"\xff\xfe\x00",
    b'{"report": {"seed": "0123456789abcdef", "y": 0}, "report": 1, "groups": {"site": "s1"}}',
    b'{"report": NaN, "groups": {"site": "s1"}}',
    b'{"report": Infinity, "groups": {"site": "s1"}}',
    b'[{"report": {"seed": "0123456789abcdef", "y": 0}, "groups": {"site": "s1"}}]',
    b"[" * 30_000 + b"]" * 30_000,
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b'{"report": {"seed": "0123456789abcdef", "y": ' + b"9" * 5000 + b'}, "groups": {"site": "s1"}}',
    b'{"report": {"seed": "0123456789abcdef", "y": 0}, "groups": {"site": "' + b"s" * 65 + b'"}}',
    b'{"report": {"seed": "0123456789abcdef", "y": 0}, "groups": {"site": "\\ud800"}}',
    b'{"report": {"seed": "0123456789abcdef", "y": 0}, "groups": {"site": 1}}',
]


def test_ciphertexts_that_decrypt_to_garbage_are_rejected(
    aggregator: RunningServer, pool: list[dict[str, Any]]
) -> None:
    config = CampaignConfig.from_json(aggregator.get(f"/api/v1/campaigns/{CAMPAIGN}").json())
    n_before = aggregator.estimate(CAMPAIGN)["n"]
    envelopes = [_seal_bytes(config, plaintext) for plaintext in SEALED_GARBAGE]
    response = aggregator.post(REPORTS, json={"reports": envelopes})
    assert_clean(response)
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["rejected"] * len(SEALED_GARBAGE), results
    good = _seal_bytes(config, b'{"groups":{"site":"s1"},"report":{"seed":"0123456789abcdef","y":0}}')
    assert aggregator.post(REPORTS, json={"reports": [good]}).json()["accepted"] == 1
    assert aggregator.estimate(CAMPAIGN)["n"] == n_before + 1


# ------------------------------------------------------------------------------------- queries and paths


@FUZZ
@given(
    level=st.text(max_size=30) | st.floats().map(str),
    group_by=st.text(max_size=80),
    noise=st.text(max_size=20),
    campaign=st.text(max_size=70),
)
def test_arbitrary_query_strings_and_campaign_ids(
    aggregator: RunningServer, pool: list[dict[str, Any]], level: str, group_by: str, noise: str, campaign: str
) -> None:
    params = {"level": level, "group_by": group_by, "noise": noise}
    assert_clean(aggregator.get(f"/api/v1/campaigns/{CAMPAIGN}/estimate", role="analyst", params=params))
    assert_clean(aggregator.get(f"/api/v1/campaigns/{CAMPAIGN}/estimate", role="analyst", params={"level": level}))
    quoted = requests.utils.quote(campaign, safe="")
    if quoted:
        assert_clean(aggregator.get(f"/api/v1/campaigns/{quoted}"))
        assert_clean(aggregator.post(f"/api/v1/campaigns/{quoted}/reports", json={"reports": [pool[4]]}))
        assert_clean(aggregator.get(f"/api/v1/campaigns/{quoted}/estimate", role="admin"))


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "TRACE"])
@pytest.mark.parametrize("path", ["/healthz", "/api/v1/campaigns", REPORTS, "/api/v1/nothing", "/"])
def test_unknown_methods_and_paths(aggregator: RunningServer, method: str, path: str) -> None:
    response = aggregator.request(method, path, role="admin", json={})
    assert_clean(response)
    assert response.status_code in (404, 405)


# ------------------------------------------------------------------------------------- not even HTTP

RAW_REQUESTS: dict[str, bytes] = {
    "long request line": b"GET /api/v1/campaigns/" + b"a" * 6000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "huge header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n",
    "too many headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-%d: 1\r\n" % i for i in range(150))
    + b"\r\n",
    "garbage request line": b"GARBAGE\r\n\r\n",
    "bad method": b"G\x00T /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad version": b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
    "bad header name": b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n",
    "obsolete folding": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n",
    "unknown transfer coding": b"POST " + REPORTS.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\n\r\n",
    "chunked and length": b"POST " + REPORTS.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Content-Length: 3\r\nContent-Type: application/json\r\n\r\n0\r\n\r\n",
    "bad chunk size": b"POST " + REPORTS.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Content-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "expectation": b"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n",
    "short body": b"POST " + REPORTS.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 500\r\n\r\n{}",
}


def _raw_exchange(server: RunningServer, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("name", sorted(RAW_REQUESTS))
def test_broken_http_gets_a_json_error(aggregator: RunningServer, name: str) -> None:
    answer = _raw_exchange(aggregator, RAW_REQUESTS[name])
    head, _, body = answer.partition(b"\r\n\r\n")
    if not answer:  # the peer closed without a reply: acceptable for a truncated request, never a crash
        assert name == "short body"
        return
    status = int(head.split(b" ", 2)[1])
    STATUSES[status] += 1
    assert status < 500, answer[:300]
    if status >= 400:
        assert b"content-type: application/json" in head.lower(), answer[:400]
        error = json.loads(body)["error"]
        assert error["code"] and error["message"]


def test_the_server_is_healthy_and_ingests_after_the_onslaught(
    aggregator: RunningServer, pool: list[dict[str, Any]]
) -> None:
    assert aggregator.is_alive()
    assert aggregator.get("/healthz").json() == {"status": "ok"}
    fresh = pool[-1]
    result = aggregator.post(REPORTS, json={"reports": [fresh]}).json()["results"][0]
    assert result["status"] in ("accepted", "duplicate")
    estimate = aggregator.estimate(CAMPAIGN)
    assert 1 <= estimate["n"] <= POOL + 1
    assert "Traceback" not in aggregator.logs()
    assert "internal_error" not in aggregator.logs()
    assert not any(status >= 500 for status in STATUSES)
    print(f"\nhypothesis bodies: {sum(STATUSES.values())} requests, statuses {dict(sorted(STATUSES.items()))}")
