"""The admission-token issuer: blind-signs token requests, at most ``tokens_per_account`` per account.

The app's backend knows its users; deniable does not. The backend authenticates a user its own way, then
forwards the user's token requests (made on the device, :class:`deniable.shared.tokens.TokenRequest`) to
``POST /api/v1/campaigns/<id>/tokens`` with the **issuer** bearer token and an ``account`` naming the user
(any opaque string of the backend's choosing). The route answers one blind signature per request and
counts them against the account's quota for that campaign (``docs/admission-tokens.md``).

What the issuer sees and keeps: the account (stored only as ``HMAC-SHA256(k, account)``, k derived from
the campaign's issuer key, so that the database alone does not list the accounts), the number of tokens
issued to it, and the blinded requests, which are uniform in Z_n^* and independent of the tokens they
become (:mod:`deniable.shared.blindrsa`). Nothing of a request is stored. The aggregator's view of a
spent token (its nonce and signature) therefore shares nothing with the issuer's view that links them.

The signing key is one 2048-bit RSA key per campaign (``keys/<id>.issuer.pem``, mode 0600), used for
nothing else; its public half is pinned in the campaign descriptor, so every device verifies its tokens
against the same key (a per-device key would let the issuer tag devices).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from deniable.aggregator.sealed_keys import MISSING, keep_key, load_sealed
from deniable.aggregator.secret_files import issuer_key_path, read_secret
from deniable.shared import blindrsa
from deniable.shared.base64url import b64url_decode, b64url_encode
from deniable.shared.errors import InvalidParameter
from deniable.shared.tokens import TOKEN_REQUEST_BYTES, TOKEN_TYPE, Admission

if TYPE_CHECKING:
    from deniable.aggregator.store import Store

__all__ = ["Issuer", "IssuerKeys"]

#: ``campaign_keys.kind`` of a campaign's issuer key (sealed in the database over PostgreSQL).
ISSUER_KIND = "issuer"

_ACCOUNT_LABEL = b"deniable/issuer-account/v1"


class Issuer:
    """Blind-signs TokenRequests of one campaign with its private key (stateless; quotas are the store's)."""

    def __init__(self, private_key: rsa.RSAPrivateKey, admission: Admission) -> None:
        if private_key.public_key().public_numbers() != admission.public_key.public_numbers():
            raise ValueError("the issuer's private key does not match the campaign's issuer_key")
        self._key = private_key
        self._key_id_byte = admission.key_id[-1]
        der = private_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self._account_key = hashlib.sha256(_ACCOUNT_LABEL + b"\x00" + der).digest()

    def account_key(self, account: str) -> bytes:
        """What the quota table stores for ``account``: HMAC-SHA256 under a key derived from the issuer key."""
        return hmac.new(self._account_key, account.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    def _blinded(self, text: object, position: int) -> bytes:
        raw = b64url_decode(text, length=TOKEN_REQUEST_BYTES)
        if raw is None:
            raise InvalidParameter(
                f"'token_requests[{position}]' must be a TokenRequest of {TOKEN_REQUEST_BYTES} bytes in base64url "
                "without padding (made by the client SDK)"
            )
        if int.from_bytes(raw[:2], "big") != TOKEN_TYPE:
            raise InvalidParameter(f"'token_requests[{position}]' is not of token type {TOKEN_TYPE:#06x}")
        if raw[2] != self._key_id_byte:
            raise InvalidParameter(
                f"'token_requests[{position}]' names another issuer key; fetch the campaign's descriptor again"
            )
        return raw[3:]

    def sign(self, requests: Sequence[object]) -> list[str]:
        """One TokenResponse (base64url blind signature) per request, in order; ``InvalidParameter`` for a
        malformed request (then nothing is signed)."""
        blinded = [self._blinded(text, i) for i, text in enumerate(requests)]
        try:
            return [b64url_encode(blindrsa.blind_sign(self._key, b)) for b in blinded]
        except InvalidParameter as exc:
            raise InvalidParameter(f"a token request cannot be signed: {exc}") from exc


class IssuerKeys:
    """The issuer private keys of the campaigns in one data dir (or sealed in ``sealed_in``'s database under
    ``kek``, :mod:`deniable.aggregator.sealed_keys`), cached per process."""

    def __init__(self, data_dir: Path, *, sealed_in: Store | None = None, kek: bytes | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.store, self.kek = sealed_in, kek
        self._cache: dict[str, Issuer] = {}
        self._lock = threading.Lock()

    @staticmethod
    def generate() -> rsa.RSAPrivateKey:
        """A fresh 2048-bit blind-signing key (not yet stored)."""
        return blindrsa.generate_key()

    def save(self, campaign_id: str, key: rsa.RSAPrivateKey, *, conn: Any = None) -> None:
        """Store the key as PKCS#8 PEM (mode 0600, atomic, fsynced), or sealed in the caller's transaction."""
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        keep_key(self.store, self.kek, conn, campaign_id, ISSUER_KIND, issuer_key_path(self.data_dir, campaign_id), pem)
        with self._lock:
            self._cache.pop(campaign_id, None)

    def issuer(self, campaign_id: str, admission: Admission) -> Issuer:
        """The campaign's :class:`Issuer` (raises ``FileNotFoundError`` if it has no issuer key)."""
        issuer = self._cache.get(campaign_id)
        if issuer is None:
            key = serialization.load_pem_private_key(self._pem(campaign_id), None)
            if not isinstance(key, rsa.RSAPrivateKey):
                raise ValueError(f"the issuer key of campaign {campaign_id!r} is not an RSA key")
            issuer = Issuer(key, admission)
            with self._lock:
                self._cache[campaign_id] = issuer
        return issuer

    def _pem(self, campaign_id: str) -> bytes:
        if self.store is None:
            return read_secret(issuer_key_path(self.data_dir, campaign_id))
        assert self.kek is not None
        pem, reason = load_sealed(self.store, self.kek, campaign_id, ISSUER_KIND)
        if reason == MISSING:
            raise FileNotFoundError(f"campaign {campaign_id!r} has no issuer key in the database")
        if reason is not None:
            raise ValueError(f"the issuer key of campaign {campaign_id!r} {reason}")
        return pem
