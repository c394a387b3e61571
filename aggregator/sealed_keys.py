"""Campaign private keys sealed in the database under a key-encryption key (KEK) from the configuration.

Several aggregator instances over one PostgreSQL database need every campaign's private keys (the HPKE key
that opens reports, the admission-token issuer key) without copying files between machines. They are
stored in the table ``campaign_keys``, each sealed with AES-256-GCM (``cryptography``) under the KEK that
every instance is given (``DENIABLE_KEY_ENCRYPTION_KEY``, or a file named by ``--key-encryption-key-file``;
never a flag, which ``ps`` shows). The database alone, or a dump of it, holds no usable key. Both kinds of
key are kept by :func:`keep_key`: sealed in the database when the aggregator is given one for its keys,
else in their key files.

A sealed row is ``(campaign_id, kind, kek_id, nonce, sealed)``:

* ``nonce``: 12 random bytes (``os.urandom``), fresh for every seal; a KEK seals one key per campaign and
  kind, so at most a few million seals: far below the 2³² bound of random 96-bit nonces per key;
* ``sealed``: AES-GCM ciphertext and 16-byte tag of the same self-checking bytes a key file holds
  (:func:`deniable.aggregator.keyring.encode_key_file`: format, campaign id, public and private key; the
  issuer key as PKCS#8 PEM);
* associated data ``"deniable-sealed-key/1" ‖ 0 ‖ kind ‖ 0 ‖ campaign_id ‖ 0 ‖ kek_id``: a row copied to
  another campaign or kind, or claiming another KEK, fails the tag, like any flipped bit;
* ``kek_id``: the first 8 bytes of SHA-256("deniable-kek-id/1" ‖ 0 ‖ KEK), in hex. An instance given the
  wrong KEK says so ("sealed under key-encryption key 1a2b..., this instance has 3c4d...") instead of
  calling the row damaged.

After unsealing, the same integrity checks as a key file apply (:mod:`deniable.aggregator.keyring`): the
bytes name their campaign, the private key derives the recorded public key, and that key is the one in
the campaign's descriptor. Any failure is :class:`~deniable.shared.errors.CampaignKeyUnavailable` (503,
retryable: devices keep their reports), logged as an ERROR naming the campaign.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from deniable.aggregator.secret_files import write_secret

if TYPE_CHECKING:
    from deniable.aggregator.store import Store

__all__ = [
    "KEK_BYTES",
    "KEK_HINT",
    "MISSING",
    "Sealed",
    "keep_key",
    "kek_id",
    "load_sealed",
    "parse_kek",
    "seal",
    "unseal",
]

#: Bytes of a key-encryption key (AES-256).
KEK_BYTES = 32
#: How to make a key-encryption key, quoted by every refusal.
KEK_HINT = (
    "generate one with: python3 -c 'import base64, secrets; "
    "print(base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b\"=\").decode())'"
)
_NONCE_BYTES = 12
_AAD_LABEL = b"deniable-sealed-key/1"
_ID_LABEL = b"deniable-kek-id/1"


def parse_kek(text: str, *, source: str) -> bytes:
    """The 32-byte KEK written as base64url (43 characters, padding optional) or 64 hex digits.

    Raises ``ValueError`` naming ``source`` (the variable or file it came from) and how to make one.
    """
    value = text.strip()
    raw: bytes | None = None
    if len(value) == 2 * KEK_BYTES:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != KEK_BYTES:
        raise ValueError(f"{source} must be a {KEK_BYTES}-byte key in base64url or hex; {KEK_HINT}")
    return raw


def kek_id(kek: bytes) -> str:
    """The public id of a KEK (16 hex digits), stored beside what it seals."""
    return hashlib.sha256(_ID_LABEL + b"\x00" + kek).digest()[:8].hex()


def _aad(campaign_id: str, kind: str, key_id: str) -> bytes:
    return b"\x00".join((_AAD_LABEL, kind.encode(), campaign_id.encode(), key_id.encode()))


@dataclass(frozen=True, slots=True)
class Sealed:
    """One sealed key as stored: the KEK's id, the nonce and the ciphertext with its tag."""

    kek_id: str
    nonce: bytes
    sealed: bytes


def seal(kek: bytes, campaign_id: str, kind: str, plaintext: bytes) -> Sealed:
    """``plaintext`` sealed for ``(campaign_id, kind)`` under ``kek`` with a fresh random nonce."""
    key_id = kek_id(kek)
    nonce = os.urandom(_NONCE_BYTES)
    return Sealed(key_id, nonce, AESGCM(kek).encrypt(nonce, plaintext, _aad(campaign_id, kind, key_id)))


def unseal(kek: bytes, campaign_id: str, kind: str, sealed: Sealed) -> tuple[bytes, str | None]:
    """``(plaintext, None)``, or ``(b"", reason)`` when the row cannot be opened (never raises)."""
    mine = kek_id(kek)
    if sealed.kek_id != mine:
        return b"", (
            f"is sealed under key-encryption key {sealed.kek_id[:16]}, this instance has {mine}: give every "
            "instance the same DENIABLE_KEY_ENCRYPTION_KEY"
        )
    if len(sealed.nonce) != _NONCE_BYTES:
        return b"", "is damaged (its nonce is not 12 bytes)"
    try:
        return AESGCM(kek).decrypt(sealed.nonce, sealed.sealed, _aad(campaign_id, kind, sealed.kek_id)), None
    except InvalidTag:
        return b"", "does not open under the key-encryption key (damaged, or copied from another campaign or kind)"


def keep_key(
    store: Store | None, kek: bytes | None, conn: Any, campaign_id: str, kind: str, path: Path, data: bytes
) -> None:
    """Keep the bytes of a campaign's private key of ``kind`` where this aggregator keeps its keys: sealed
    under ``kek`` in ``store``'s database, in the caller's transaction ``conn`` (the one that inserts the
    campaign), when ``store`` is given; else in the key file ``path`` (mode 0600, atomic, file and directory
    fsynced)."""
    if store is not None:
        assert kek is not None and conn is not None
        store.save_sealed_key(conn, campaign_id, kind, seal(kek, campaign_id, kind, data))
    else:
        write_secret(path, data)


#: The reason :func:`load_sealed` gives for a key with no row in the database.
MISSING = "is missing"


def load_sealed(store: Store, kek: bytes, campaign_id: str, kind: str) -> tuple[bytes, str | None]:
    """``(key bytes, None)``: a campaign's private key of ``kind`` unsealed from ``store``'s database, or
    ``(b"", reason)`` when it ``is missing`` or does not open (never raises; each caller words its error)."""
    row = store.sealed_key(campaign_id, kind)
    if row is None:
        return b"", MISSING
    return unseal(kek, campaign_id, kind, row)
