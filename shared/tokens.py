"""Anonymous one-time admission tokens in the manner of Privacy Pass (RFC 9576–9578), type 0x0002.

A campaign may require every report to carry a token (``docs/admission-tokens.md``). The app's backend,
which knows its users, lets each account obtain a bounded number of tokens per campaign from the issuer;
the token is a blind RSA signature (:mod:`deniable.shared.blindrsa`, RSABSSA-SHA384-PSS-Deterministic,
2048-bit key), so the aggregator can check that a token is valid and unspent without learning who got it.

Layouts (RFC 9578 §5–6; integers big-endian, ``Nk`` = 256 bytes)::

    TokenChallenge { uint16 token_type = 0x0002; opaque issuer_name<1..2^16-1>;
                     opaque redemption_context<0..32> = empty; opaque origin_info<0..2^16-1> }
    token_input    = token_type (2) || nonce (32) || SHA-256(TokenChallenge) (32) || token_key_id (32)
    Token          = token_input || authenticator (Nk)                         354 bytes in all
    TokenRequest   = token_type (2) || truncated_token_key_id (1) || blinded_msg (Nk)
    TokenResponse  = blind_sig (Nk)

``issuer_name`` is :data:`ISSUER_NAME` and ``origin_info`` the campaign id, so a token is bound to its
campaign; ``token_key_id`` = SHA-256 of the issuer key's DER SubjectPublicKeyInfo. Deviation from RFC 9578:
the SPKI carries the ``rsaEncryption`` OID (as ``cryptography`` writes it), not ``id-RSASSA-PSS``; the key
is used for RSASSA-PSS only. On the wire (JSON) every structure is base64url without padding.

A token is spent by putting it in the encrypted payload of one report: the AEAD binds it to that envelope
(campaign, report id, pseudonym), so a token cannot be moved to another report, and the aggregator records
its nonce as spent in the transaction that stores the report. No I/O here.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from deniable.shared import blindrsa
from deniable.shared.base64url import b64url_decode, b64url_encode
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.limits import MAX_TOKENS_PER_ACCOUNT

__all__ = [
    "ADMISSION_TYPE",
    "ISSUER_NAME",
    "NONCE_BYTES",
    "TOKEN_BYTES",
    "TOKEN_REQUEST_BYTES",
    "TOKEN_TYPE",
    "Admission",
    "Token",
    "TokenRequest",
    "challenge_digest",
    "load_public_key",
    "public_key_text",
    "token_input",
    "token_key_id",
]

#: Privacy Pass token type 0x0002: Blind RSA (2048-bit), RSABSSA-SHA384-PSS-Deterministic.
TOKEN_TYPE = 0x0002
#: The ``admission.type`` of a campaign descriptor that requires these tokens.
ADMISSION_TYPE = "privacy-pass-blind-rsa"
ISSUER_NAME = b"deniable"
NONCE_BYTES = 32
_NK = blindrsa.MODULUS_BITS // 8
_INPUT_BYTES = 2 + NONCE_BYTES + 32 + 32
TOKEN_BYTES = _INPUT_BYTES + _NK
TOKEN_REQUEST_BYTES = 2 + 1 + _NK


def public_key_text(key: rsa.RSAPublicKey) -> str:
    """The issuer key as the descriptor carries it: base64url of its DER SubjectPublicKeyInfo."""
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url_encode(der)


def load_public_key(text: object) -> rsa.RSAPublicKey:
    """Parse a descriptor's ``issuer_key``: a 2048-bit RSA key with e = 65537; else ``InvalidConfig``."""
    key = _load_public_key(text) if isinstance(text, str) and len(text) <= 1400 else None
    if key is None:
        raise InvalidConfig(
            "'admission.issuer_key' must be a 2048-bit RSA public key (e = 65537) as base64url DER "
            "SubjectPublicKeyInfo"
        )
    return key


@functools.lru_cache(maxsize=256)
def _load_public_key(text: str) -> rsa.RSAPublicKey | None:
    raw = b64url_decode(text)
    try:
        key = None if raw is None else serialization.load_der_public_key(raw)
    except ValueError:
        return None
    if (
        not isinstance(key, rsa.RSAPublicKey)
        or key.key_size != blindrsa.MODULUS_BITS
        or key.public_numbers().e != blindrsa.PUBLIC_EXPONENT
    ):
        return None
    return key


def token_key_id(key: rsa.RSAPublicKey) -> bytes:
    """SHA-256 of the key's DER SubjectPublicKeyInfo (32 bytes)."""
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).digest()


def challenge_digest(campaign_id: str) -> bytes:
    """SHA-256 of the TokenChallenge binding a token to the campaign (origin_info = the campaign id)."""
    origin = campaign_id.encode("utf-8")
    challenge = (
        TOKEN_TYPE.to_bytes(2, "big")
        + len(ISSUER_NAME).to_bytes(2, "big")
        + ISSUER_NAME
        + b"\x00"  # redemption_context: empty (tokens may be fetched ahead of time)
        + len(origin).to_bytes(2, "big")
        + origin
    )
    return hashlib.sha256(challenge).digest()


def token_input(nonce: bytes, campaign_id: str, key_id: bytes) -> bytes:
    """The message the issuer blind-signs: token_type || nonce || challenge_digest || token_key_id."""
    return TOKEN_TYPE.to_bytes(2, "big") + nonce + challenge_digest(campaign_id) + key_id


@dataclass(frozen=True, slots=True)
class Admission:
    """A campaign's admission rule: every report carries one token signed by ``issuer_key``; each account
    of the app's backend may obtain at most ``tokens_per_account`` of them."""

    issuer_key: str
    tokens_per_account: int

    def __post_init__(self) -> None:
        load_public_key(self.issuer_key)
        n = self.tokens_per_account
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TOKENS_PER_ACCOUNT:
            raise InvalidConfig(
                f"'admission.tokens_per_account' must be a whole number from 1 to {MAX_TOKENS_PER_ACCOUNT}, "
                f"got {n!r}"[:200]
            )

    @property
    def public_key(self) -> rsa.RSAPublicKey:
        """The issuer's RSA public key."""
        return load_public_key(self.issuer_key)

    @property
    def key_id(self) -> bytes:
        """token_key_id of the issuer key: SHA-256 of the DER SubjectPublicKeyInfo."""
        raw = b64url_decode(self.issuer_key)
        assert raw is not None  # validated in __post_init__
        return hashlib.sha256(raw).digest()

    def to_json(self) -> dict[str, object]:
        """The descriptor's ``admission`` object."""
        return {
            "type": ADMISSION_TYPE,
            "token_type": TOKEN_TYPE,
            "issuer_key": self.issuer_key,
            "tokens_per_account": self.tokens_per_account,
        }

    @classmethod
    def from_json(cls, obj: object) -> Admission:
        """Parse the descriptor's ``admission`` object; ``InvalidConfig`` naming what is wrong."""
        keys = {"type", "token_type", "issuer_key", "tokens_per_account"}
        if not isinstance(obj, dict) or set(obj) != keys:
            raise InvalidConfig(f"'admission' must be an object with exactly the keys {sorted(keys)}")
        if obj["type"] != ADMISSION_TYPE or obj["token_type"] != TOKEN_TYPE or isinstance(obj["token_type"], bool):
            raise InvalidConfig(
                f"'admission' must have type {ADMISSION_TYPE!r} and token_type {TOKEN_TYPE}; update the client "
                "to answer campaigns with other admission tokens"
            )
        return cls(issuer_key=obj["issuer_key"], tokens_per_account=obj["tokens_per_account"])


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """One blinded token request and the client's secret state to finalize its answer."""

    campaign_id: str
    nonce: bytes
    inv: int
    request: bytes

    @classmethod
    def create(cls, campaign_id: str, admission: Admission) -> TokenRequest:
        """A fresh request: random nonce, blinded token input (RFC 9578 §6.1)."""
        key, key_id = admission.public_key, admission.key_id
        nonce = secrets.token_bytes(NONCE_BYTES)
        blinded = blindrsa.blind(key, token_input(nonce, campaign_id, key_id))
        request = TOKEN_TYPE.to_bytes(2, "big") + key_id[-1:] + blinded.blinded
        return cls(campaign_id, nonce, blinded.inv, request)

    @property
    def text(self) -> str:
        """The TokenRequest as sent to the issuer (base64url)."""
        return b64url_encode(self.request)

    def finalize(self, admission: Admission, response: object) -> Token:
        """The token from the issuer's TokenResponse (base64url), verified; else ``InvalidParameter``."""
        blind_sig = b64url_decode(response, length=_NK)
        if blind_sig is None:
            raise InvalidParameter(f"a token response must be {_NK} bytes in base64url without padding")
        msg = token_input(self.nonce, self.campaign_id, admission.key_id)
        return Token(msg + blindrsa.finalize(admission.public_key, msg, blind_sig, self.inv))


@dataclass(frozen=True, slots=True)
class Token:
    """A finalized token: ``token_input || authenticator`` (:data:`TOKEN_BYTES` bytes)."""

    raw: bytes

    @property
    def nonce(self) -> bytes:
        """The token's 32-byte nonce: what the aggregator records as spent."""
        return self.raw[2 : 2 + NONCE_BYTES]

    @property
    def text(self) -> str:
        """The token as a report's payload carries it (base64url)."""
        return b64url_encode(self.raw)

    @classmethod
    def parse(cls, text: object) -> Token:
        """A token from its base64url text; ``InvalidReport`` unless it has the token's exact length."""
        raw = b64url_decode(text, length=TOKEN_BYTES)
        if raw is None:
            raise InvalidReport(
                f"'token' must be an admission token of {TOKEN_BYTES} bytes in base64url without padding"
            )
        return cls(raw)

    def verify(self, admission: Admission, campaign_id: str) -> None:
        """Check type, campaign binding, key and signature (standard RSASSA-PSS); else ``InvalidReport``."""
        msg, authenticator = self.raw[:_INPUT_BYTES], self.raw[_INPUT_BYTES:]
        if msg[:2] != TOKEN_TYPE.to_bytes(2, "big"):
            raise InvalidReport(f"the admission token is not of type {TOKEN_TYPE:#06x}")
        if msg[2 + NONCE_BYTES : 2 + NONCE_BYTES + 32] != challenge_digest(campaign_id):
            raise InvalidReport(f"the admission token was issued for another campaign, not {campaign_id!r}")
        if msg[-32:] != admission.key_id:
            raise InvalidReport("the admission token was signed by another issuer key than this campaign's")
        if not blindrsa.verify(admission.public_key, msg, authenticator):
            raise InvalidReport("the admission token's signature is not valid (a forged or altered token)")
