"""Admission tokens (issue 12 item 2): RFC 9474 blind RSA and Privacy Pass type 0x0002, without a server.

Every finalized token is checked with ``cryptography``'s standard RSASSA-PSS verification, an independent
implementation; forged, altered and foreign tokens are refused; the issuer's and the aggregator's views
share nothing that links them; and the residual poisoning bound of the docs holds exactly.
"""

from __future__ import annotations

import json
import math
import secrets
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from deniable.aggregator.issuer import Issuer
from deniable.shared import blindrsa
from deniable.shared.base64url import b64url_decode, b64url_encode
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.mechanisms import GRR, Tally
from deniable.shared.tokens import TOKEN_BYTES, Admission, Token, TokenRequest, public_key_text, token_input

VECTORS = Path(__file__).parents[1] / "vectors" / "admission-tokens-v1.json"
CAMPAIGN = "tokens-unit"
PSS48 = padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=48)


@pytest.fixture(scope="module")
def issuer_key() -> rsa.RSAPrivateKey:
    return blindrsa.generate_key()


@pytest.fixture(scope="module")
def admission(issuer_key: rsa.RSAPrivateKey) -> Admission:
    return Admission(public_key_text(issuer_key.public_key()), 10)


def _issue(issuer_key: rsa.RSAPrivateKey, admission: Admission, count: int, campaign: str = CAMPAIGN) -> Any:
    requests = [TokenRequest.create(campaign, admission) for _ in range(count)]
    responses = Issuer(issuer_key, admission).sign([r.text for r in requests])
    return requests, responses, [r.finalize(admission, s) for r, s in zip(requests, responses, strict=True)]


def _raw(text: object) -> bytes:
    raw = b64url_decode(text)
    assert raw is not None
    return raw


def _standard_verify(key: rsa.RSAPublicKey, token: Token) -> None:
    """cryptography's RSASSA-PSS-VERIFY (SHA-384, MGF1-SHA-384, sLen 48): raises InvalidSignature if bad."""
    key.verify(token.raw[-256:], token.raw[:-256], PSS48, hashes.SHA384())


# -- known answers ---------------------------------------------------------------------------------------


def test_the_known_answers_reproduce_byte_for_byte_and_verify_with_standard_pss() -> None:
    v = json.loads(VECTORS.read_text())
    n, e, d, p, q = (int(v[k], 16) for k in ("n", "e", "d", "p", "q"))
    public = rsa.RSAPublicNumbers(e, n)
    key = rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), public
    ).private_key()
    admission = Admission(v["issuer_key"], 5)
    assert admission.public_key.public_numbers() == public and admission.key_id.hex() == v["token_key_id"]
    msg = token_input(bytes.fromhex(v["nonce"]), v["campaign_id"], admission.key_id)
    assert msg.hex() == v["token_input"]
    salt = bytes.fromhex(v["salt"])
    assert blindrsa.emsa_pss_encode(msg, 2047, salt).hex() == v["encoded_message"]
    blinded = blindrsa.blind(key.public_key(), msg, salt=salt, inv=int(v["inv"], 16))
    assert blinded.blinded.hex() == v["blinded_msg"]
    blind_sig = blindrsa.blind_sign(key, blinded.blinded)
    assert blind_sig.hex() == v["blind_sig"]  # RSA signing is deterministic: the base blinding cancels
    sig = blindrsa.finalize(key.public_key(), msg, blind_sig, blinded.inv)
    assert sig.hex() == v["sig"]
    key.public_key().verify(sig, msg, PSS48, hashes.SHA384())
    token = Token.parse(v["token"])
    assert token.raw == msg + sig
    token.verify(admission, v["campaign_id"])


# -- every finalized token is a standard RSASSA-PSS signature ---------------------------------------------


def test_every_finalized_token_verifies_with_cryptographys_standard_pss(
    issuer_key: rsa.RSAPrivateKey, admission: Admission
) -> None:
    requests, _, tokens = _issue(issuer_key, admission, 12)
    assert len({t.nonce for t in tokens}) == 12 and all(len(t.raw) == TOKEN_BYTES for t in tokens)
    for request, token in zip(requests, tokens, strict=True):
        _standard_verify(issuer_key.public_key(), token)
        token.verify(admission, CAMPAIGN)
        assert token.nonce == request.nonce
    # Deterministic variant, randomized PSS: one message signed twice gives two different valid signatures.
    msg = tokens[0].raw[:-256]
    twice = [blindrsa.blind(issuer_key.public_key(), msg) for _ in range(2)]
    sigs = [
        blindrsa.finalize(issuer_key.public_key(), msg, blindrsa.blind_sign(issuer_key, b.blinded), b.inv)
        for b in twice
    ]
    assert sigs[0] != sigs[1] and all(blindrsa.verify(issuer_key.public_key(), msg, s) for s in sigs)


# -- forged, altered, foreign ----------------------------------------------------------------------------


def test_forged_altered_and_foreign_tokens_are_refused(issuer_key: rsa.RSAPrivateKey, admission: Admission) -> None:
    _, _, (token,) = _issue(issuer_key, admission, 1)
    msg = token.raw[:-256]
    forged = [
        ("not valid", Token(msg + secrets.token_bytes(256))),  # a made-up authenticator
        ("not valid", Token(msg[:2] + secrets.token_bytes(32) + msg[34:] + token.raw[-256:])),  # new nonce
        ("not valid", Token(token.raw[:-1] + bytes([token.raw[-1] ^ 1]))),  # one bit of the signature
        ("another campaign", Token(token_input(token.nonce, "other-campaign", admission.key_id) + token.raw[-256:])),
        ("not of type", Token(b"\x00\x01" + token.raw[2:])),
    ]
    other_key = blindrsa.generate_key()
    other = Admission(public_key_text(other_key.public_key()), 10)
    _, _, (foreign,) = _issue(other_key, other, 1)
    forged.append(("another issuer key", foreign))
    for why, bad in forged:
        with pytest.raises(InvalidReport, match=why):
            bad.verify(admission, CAMPAIGN)
    with pytest.raises(InvalidReport, match="another campaign"):
        token.verify(admission, "other-campaign")
    for text in ("", token.text[:-2], token.text + "AA", token.text + "=", 42, None):
        with pytest.raises(InvalidReport, match=f"{TOKEN_BYTES} bytes"):
            Token.parse(text)


def test_a_client_refuses_an_answer_that_does_not_verify(issuer_key: rsa.RSAPrivateKey, admission: Admission) -> None:
    requests, responses, _ = _issue(issuer_key, admission, 2)
    with pytest.raises(InvalidParameter, match="does not verify"):
        requests[0].finalize(admission, responses[1])  # the signature of another request
    with pytest.raises(InvalidParameter, match="does not verify"):
        requests[0].finalize(admission, b64url_encode(b"\x00" + secrets.token_bytes(255)))
    with pytest.raises(InvalidParameter, match="256 bytes"):
        requests[0].finalize(admission, "not base64url!")


def test_the_issuer_refuses_malformed_requests(issuer_key: rsa.RSAPrivateKey, admission: Admission) -> None:
    issuer = Issuer(issuer_key, admission)
    good = TokenRequest.create(CAMPAIGN, admission).request
    cases = [
        (b64url_encode(good[:-1]), "259 bytes"),
        (b64url_encode(b"\x00\x01" + good[2:]), "not of token type"),
        (b64url_encode(good[:2] + bytes([good[2] ^ 1]) + good[3:]), "another issuer key"),
        (b64url_encode(good[:3] + b"\xff" * 256), "not below the modulus"),
        (7, "259 bytes"),
    ]
    for text, why in cases:
        with pytest.raises(InvalidParameter, match=why):
            issuer.sign([b64url_encode(good), text])
    with pytest.raises(ValueError, match="does not match"):
        Issuer(blindrsa.generate_key(), admission)
    for bad in ({"tokens_per_account": 0}, {"tokens_per_account": True}):
        with pytest.raises(InvalidConfig, match="tokens_per_account"):
            Admission(admission.issuer_key, bad["tokens_per_account"])
    with pytest.raises(InvalidConfig, match="2048-bit RSA public key"):
        Admission(public_key_text(rsa.generate_private_key(public_exponent=65537, key_size=3072).public_key()), 1)


# -- unlinkability ---------------------------------------------------------------------------------------


def _common_window(a: bytes, b: bytes, width: int = 8) -> bool:
    windows = {a[i : i + width] for i in range(len(a) - width + 1)}
    return any(b[i : i + width] in windows for i in range(len(b) - width + 1))


def test_the_issuers_view_and_the_aggregators_view_share_nothing_that_links_them(
    issuer_key: rsa.RSAPrivateKey, admission: Admission
) -> None:
    """Even knowing the private key, the issuer can match any signing session with any spent token.

    For a session i (blinded message B_i, blind signature S_i = B_i^d) and a spent token j (signature
    σ_j, whose encoded message is M_j = σ_j^e), r = S_i·σ_j⁻¹ mod n is a unit with r^e·M_j = B_i: a valid
    blinding factor that would turn token j into session i. So every pairing is equally consistent with
    what both sides saw, and the views link nothing (information-theoretic blindness).
    """
    issuer = Issuer(issuer_key, admission)
    requests, responses, tokens = _issue(issuer_key, admission, 6)
    n, e = admission.public_key.public_numbers().n, admission.public_key.public_numbers().e
    sessions = [
        (int.from_bytes(_raw(r.text)[3:], "big"), int.from_bytes(_raw(s), "big"))
        for r, s in zip(requests, responses, strict=True)
    ]
    for blinded, blind_sig in sessions:
        for token in tokens:
            sigma = int.from_bytes(token.raw[-256:], "big")
            r = blind_sig * pow(sigma, -1, n) % n
            assert math.gcd(r, n) == 1
            assert pow(r, e, n) * pow(sigma, e, n) % n == blinded
    # And byte for byte: what the issuer received, answered and stored has no 8-byte run in common with
    # what the aggregator receives and stores (the tokens, their nonces) beyond the public key id.
    issuer_view = b"".join(
        [_raw(r.text)[3:] for r in requests]
        + [_raw(s) for s in responses]
        + [issuer.account_key("alice@example.org")]
    )
    for token in tokens:
        spent_view = token.nonce + token.raw[-256:]
        assert not _common_window(issuer_view, spent_view)


# -- the residual poisoning bound --------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "k", "m"), [(1.0, 2, 10), (0.5, 5, 100), (3.0, 10, 1)])
def test_m_fake_reports_shift_a_grr_count_by_at_most_m_1_minus_q_over_p_minus_q(epsilon: float, k: int, m: int) -> None:
    """c_v = (S_v − n·q)/(p − q): a fake report moves S_v by at most 1 and n by 1, so by ≤ (1 − q)/(p − q)."""
    grr = GRR(epsilon=epsilon, k=k)
    p, q = grr.p_star, grr.q_star
    honest = Tally(1000, tuple([1000 // k] * k))
    base = grr.estimate_tally(honest).counts
    support = list(honest.support)
    support[0] += m  # m fake reports, all for category 0, unrandomized: the strongest push on c_0
    poisoned = grr.estimate_tally(Tally(honest.n + m, tuple(support))).counts
    assert poisoned[0] - base[0] == pytest.approx(m * (1 - q) / (p - q), rel=1e-12)
    for v in range(1, k):  # and every other category is pushed down by m·q/(p − q)
        assert base[v] - poisoned[v] == pytest.approx(m * q / (p - q), rel=1e-12)
