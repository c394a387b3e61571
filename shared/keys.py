"""Campaign keys: X25519 key pairs (RFC 7748) as raw bytes and as the base64url text the descriptor carries.

The aggregator holds one key pair per campaign (``deniable.aggregator.keyring``); devices seal to its public
key (``deniable.shared.envelope``). A public key must be a usable point: a small-order one would make the
HPKE shared secret all-zero (RFC 9180 §7.1.4), so :func:`check_public_key` refuses it. No I/O.
"""

from __future__ import annotations

import functools

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from deniable.shared.base64url import b64url_decode, b64url_encode
from deniable.shared.errors import InvalidParameter
from deniable.shared.messages import show

__all__ = [
    "KEY_BYTES",
    "check_public_key",
    "decode_key",
    "encode_key",
    "generate_keypair",
    "load_private",
    "load_public",
    "public_key_of",
]

#: Length of a raw X25519 key, private or public.
KEY_BYTES = 32


def encode_key(raw: bytes) -> str:
    """Encode a raw 32-byte X25519 key as base64url without padding (43 characters)."""
    if not isinstance(raw, bytes) or len(raw) != 32:
        got = f"{len(raw)} bytes" if isinstance(raw, bytes) else type(raw).__name__
        raise InvalidParameter(f"a key must be 32 raw bytes, got {got}")
    return b64url_encode(raw)


def decode_key(text: str, *, name: str = "key") -> bytes:
    """Decode a base64url (no padding) X25519 key to its 32 raw bytes, else raise ``InvalidParameter``."""
    raw = b64url_decode(text)
    if raw is None or len(raw) != 32:
        raise InvalidParameter(
            f"'{name}' must be 32 bytes in base64url without padding (43 characters), got {show(text)}"
        )
    return raw


def generate_keypair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair from the OS CSPRNG, as raw 32-byte ``(private, public)``."""
    private = X25519PrivateKey.generate()
    return _private_raw(private), _public_raw(private.public_key())


def public_key_of(private_key: bytes) -> bytes:
    """The raw 32-byte X25519 public key belonging to a raw private key."""
    return _public_raw(load_private(private_key).public_key())


#: p = 2^255 − 19, the field of Curve25519.
_P = 2**255 - 19
#: The u-coordinates (mod p) of the points of small order on Curve25519 and its twist: 0 (order 2), 1 and
#: p − 1 (order 4, one on the curve and one on the twist) and the two of order 8 (RFC 7748 §7; libsodium's
#: ``has_small_order`` list, whose non-canonical entries p and p + 1 reduce to 0 and 1).
_SMALL_ORDER_U = frozenset(
    {
        0,
        1,
        _P - 1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
    }
)


def check_public_key(public_key: bytes) -> None:
    """Raise ``InvalidParameter`` unless ``public_key`` is a usable X25519 public key.

    A small-order point (e.g. all zeros) would make the DH shared secret all-zero, which RFC 9180 §7.1.4
    forbids. X25519 reads u = the key's little-endian integer with bit 255 cleared, mod p. Every clamped
    scalar is 8·m with 0 < m < 2^252, and the curve's and the twist's groups have orders 8ℓ and 4ℓ′ with
    primes ℓ, ℓ′ > 2^252: so k·u is the identity (an all-zero secret) exactly when u has order dividing 8,
    i.e. u is in :data:`_SMALL_ORDER_U`, whatever the scalar. The test is that membership (the same keys a
    trial exchange refuses, without the two scalar multiplications it costs).
    """
    load_public(public_key)  # 32 bytes, or InvalidParameter
    u = (int.from_bytes(public_key, "little") & ((1 << 255) - 1)) % _P
    if u in _SMALL_ORDER_U:
        raise InvalidParameter("the public key is a small-order X25519 point; nothing can be sealed to it")


def _private_raw(key: X25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _public_raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_private(raw: bytes | X25519PrivateKey) -> X25519PrivateKey:
    """The key object of a raw private key (cached: loading costs about half an HPKE open)."""
    if isinstance(raw, X25519PrivateKey):
        return raw
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise InvalidParameter("'private_key' must be 32 raw bytes (an X25519 private key)")
    return _private_key_object(raw)


@functools.lru_cache(maxsize=64)
def _private_key_object(raw: bytes) -> X25519PrivateKey:
    """Loading a key costs about half an HPKE open; an aggregator opens many envelopes per campaign key."""
    return X25519PrivateKey.from_private_bytes(raw)


def load_public(raw: bytes) -> X25519PublicKey:
    """The key object of a raw public key; InvalidParameter unless it is 32 bytes."""
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise InvalidParameter("'public_key' must be 32 raw bytes (an X25519 public key)")
    return X25519PublicKey.from_public_bytes(raw)
