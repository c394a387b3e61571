"""base64url without padding (RFC 4648 §5), strict and canonical: the one byte-string encoding of the wire.

Envelopes (ciphertext, device key, signature), campaign keys and admission tokens all travel in it. Decoding
accepts only the alphabet, no ``=`` padding and canonical trailing bits, so every byte string has exactly
one text and two texts never decode to the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import re

from deniable.shared.limits import BASE64URL_PATTERN

__all__ = ["b64url_decode", "b64url_encode"]

_B64URL_RE = re.compile(BASE64URL_PATTERN.removeprefix("^").removesuffix("$"))


def b64url_encode(raw: bytes) -> str:
    """base64url of ``raw`` without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: object, *, length: int | None = None) -> bytes | None:
    """Strict, canonical base64url without padding (of ``length`` bytes if given), else ``None``."""
    if not isinstance(text, str) or len(text) % 4 == 1 or _B64URL_RE.fullmatch(text) is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    if b64url_encode(raw) != text or (length is not None and len(raw) != length):
        return None
    return raw
