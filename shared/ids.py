"""Who and what an envelope names: campaign ids, report ids, device keys and pseudonyms.

A report id is 128 random bits; a pseudonym is stable per (device, campaign) and unlinkable across
campaigns without the device secret. Version 1 pseudonyms are an HMAC of the secret; version 2 ones are a
hash of the device's per-campaign Ed25519 public key (itself derived from the secret by HMAC, a PRF), so
that only the holder of the matching private key can sign for a pseudonym (the proof of possession of
``deniable.shared.envelope``). Byte layouts: ``docs/wire-format.md``. No I/O.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.formats import FORMAT_VERSION, check_version
from deniable.shared.limits import (
    PSEUDONYM_HEX_DIGITS,
    PSEUDONYM_PATTERN,
    REPORT_ID_HEX_DIGITS,
    REPORT_ID_PATTERN,
    SLUG_MAX_CHARS,
    SLUG_PATTERN,
)
from deniable.shared.messages import show

__all__ = [
    "DEVICE_KEY_BYTES",
    "DEVICE_KEY_LABEL",
    "DEVICE_SECRET_BYTES",
    "PSEUDONYM_LABEL",
    "PSEUDONYM_LABEL_V2",
    "PSEUDONYM_RE",
    "REPORT_ID_RE",
    "check_campaign_id",
    "check_device_secret",
    "check_pseudonym",
    "check_report_id",
    "device_public_key",
    "device_signing_key",
    "make_pseudonym",
    "new_report_id",
    "pseudonym_of_key",
]

#: Length of a device secret (HMAC keys shorter than a block are zero-padded, so the length is fixed).
DEVICE_SECRET_BYTES = 32
#: Domain-separation prefixes (each followed by one 0x00 byte): the version-1 pseudonym MAC, the device's
#: per-campaign Ed25519 seed and the version-2 pseudonym.
PSEUDONYM_LABEL = b"deniable/pseudonym/v1"
DEVICE_KEY_LABEL = b"deniable/device-key/v2"
PSEUDONYM_LABEL_V2 = b"deniable/pseudonym/v2"
#: Raw Ed25519 public key length (RFC 8032).
DEVICE_KEY_BYTES = 32

#: A report id (a shuffled batch id has the same form) and a pseudonym (a shuffled campaign's dedup token
#: too), compiled from the patterns of :mod:`deniable.shared.limits` (use ``fullmatch``).
REPORT_ID_RE = re.compile(REPORT_ID_PATTERN.removeprefix("^").removesuffix("$"))
PSEUDONYM_RE = re.compile(PSEUDONYM_PATTERN.removeprefix("^").removesuffix("$"))
_CAMPAIGN_ID_RE = re.compile(SLUG_PATTERN.removeprefix("^").removesuffix("$"))


def new_report_id() -> str:
    """A fresh report id: 128 bits from ``secrets``, as 32 lowercase hex digits."""
    return secrets.token_hex(16)


def make_pseudonym(device_secret: bytes, campaign_id: str, version: int = FORMAT_VERSION) -> str:
    """The device's pseudonym in one campaign under format ``version``: 64 lowercase hex digits.

    Version 2: :func:`pseudonym_of_key` of the device's campaign public key (:func:`device_public_key`), so
    only the holder of the matching private key can sign for it. Version 1:
    ``HMAC-SHA256(device_secret, b"deniable/pseudonym/v1" || 0x00 || UTF-8(campaign_id))``. Either way it is
    stable per (device, campaign), so the aggregator counts one report per device, and without the secret
    the pseudonyms of one device in two campaigns are unlinkable (HMAC is a PRF).
    """
    check_device_secret(device_secret)
    check_campaign_id(campaign_id, InvalidParameter)
    if version == 1:
        message = PSEUDONYM_LABEL + b"\x00" + campaign_id.encode("utf-8")
        return hmac.new(device_secret, message, hashlib.sha256).hexdigest()
    check_version(version)
    return _pseudonym_v2(device_secret, campaign_id)


@functools.lru_cache(maxsize=256)
def _pseudonym_v2(device_secret: bytes, campaign_id: str) -> str:
    # a pure function of checked arguments: a device answering a campaign derives it once, not per report
    return pseudonym_of_key(_public_key(device_secret, campaign_id), campaign_id)


def check_device_secret(device_secret: object) -> None:
    """Raise ``InvalidParameter`` unless ``device_secret`` is :data:`DEVICE_SECRET_BYTES` bytes."""
    if not isinstance(device_secret, bytes) or len(device_secret) != DEVICE_SECRET_BYTES:
        raise InvalidParameter(
            f"'device_secret' must be exactly {DEVICE_SECRET_BYTES} random bytes; use "
            f"secrets.token_bytes({DEVICE_SECRET_BYTES})"
        )


def device_signing_key(device_secret: bytes, campaign_id: str) -> Ed25519PrivateKey:
    """The device's Ed25519 key for one campaign (format version 2), derived from its secret.

    ``seed = HMAC-SHA256(device_secret, b"deniable/device-key/v2" || 0x00 || UTF-8(campaign_id))`` is the
    RFC 8032 private key. HMAC is a PRF, so the keys (and pseudonyms) of one device in two campaigns are
    independent-looking without the secret, and the same device always has the same key in a campaign.
    """
    check_device_secret(device_secret)
    check_campaign_id(campaign_id, InvalidParameter)
    return _signing_key(device_secret, campaign_id)


@functools.lru_cache(maxsize=256)
def _signing_key(device_secret: bytes, campaign_id: str) -> Ed25519PrivateKey:
    message = DEVICE_KEY_LABEL + b"\x00" + campaign_id.encode("utf-8")
    return Ed25519PrivateKey.from_private_bytes(hmac.new(device_secret, message, hashlib.sha256).digest())


def device_public_key(device_secret: bytes, campaign_id: str) -> bytes:
    """The raw 32-byte Ed25519 public key of :func:`device_signing_key`."""
    check_device_secret(device_secret)
    check_campaign_id(campaign_id, InvalidParameter)
    return _public_key(device_secret, campaign_id)


@functools.lru_cache(maxsize=256)
def _public_key(device_secret: bytes, campaign_id: str) -> bytes:
    return _signing_key(device_secret, campaign_id).public_key().public_bytes_raw()


def pseudonym_of_key(device_key: bytes, campaign_id: str) -> str:
    """Version-2 pseudonym of a device public key in a campaign, 64 hex digits::

    hex(SHA-256(b"deniable/pseudonym/v2" || 0x00 || I2OSP(len(campaign_id), 1) || campaign_id
                || device_key))
    """
    check_campaign_id(campaign_id, InvalidParameter)
    if not isinstance(device_key, bytes) or len(device_key) != DEVICE_KEY_BYTES:
        raise InvalidParameter(f"'device_key' must be {DEVICE_KEY_BYTES} raw bytes (an Ed25519 public key)")
    cid = campaign_id.encode("ascii")
    return hashlib.sha256(PSEUDONYM_LABEL_V2 + b"\x00" + len(cid).to_bytes(1, "big") + cid + device_key).hexdigest()


def check_campaign_id(campaign_id: object, error: type[ValueError]) -> None:
    """Raise ``error`` unless ``campaign_id`` is a slug (``deniable.shared.limits.SLUG_PATTERN``)."""
    if not isinstance(campaign_id, str) or _CAMPAIGN_ID_RE.fullmatch(campaign_id) is None:
        raise error(
            f"'campaign_id' must be a slug of 1-{SLUG_MAX_CHARS} characters from a-z, 0-9 and '-', starting with a "
            f"letter or digit, got {show(campaign_id)}"
        )


def check_report_id(report_id: object, error: type[ValueError]) -> None:
    """Raise ``error`` unless ``report_id`` is 32 lowercase hex digits."""
    _check_hex("report_id", report_id, REPORT_ID_RE, REPORT_ID_HEX_DIGITS, error)


def check_pseudonym(pseudonym: object, error: type[ValueError]) -> None:
    """Raise ``error`` unless ``pseudonym`` is 64 lowercase hex digits."""
    _check_hex("pseudonym", pseudonym, PSEUDONYM_RE, PSEUDONYM_HEX_DIGITS, error)


def _check_hex(
    name: str, value: object, pattern: re.Pattern[str], digits: int, error: type[ValueError]
) -> None:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        where = "envelope " if error is InvalidReport else ""
        raise error(f"{where}'{name}' must be {digits} lowercase hex digits, got {show(value)}")
