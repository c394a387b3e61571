"""Sealed report envelopes: HPKE (RFC 9180) to the campaign key, bound to campaign, version, id and pseudonym.

A device seals a payload (canonical JSON, see :func:`canonical_json`) with single-shot HPKE in base mode,
suite DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305, to the campaign's public key. The HPKE
``info`` string (:func:`hpke_info`) binds the campaign id, the format version, the report id and the
device's pseudonym, so a captured ciphertext decrypts only under the envelope it was sealed in: it cannot be
replayed under a fresh report id or pseudonym (to be counted twice) nor moved to another campaign.

Privacy: the envelope hides the payload from everyone but the holder of the campaign's private key. It does
not randomize anything; in local campaigns the payload already holds the randomized report
(``deniable.shared.mechanisms``), so even the aggregator never sees a raw value. The pseudonym
(:func:`make_pseudonym`) is stable per (device, campaign), so the aggregator can count one report per device,
and is unlinkable across campaigns without the device secret. The byte layouts are specified in
``docs/wire-format.md``.

This module does no I/O and imports neither Flask nor numpy.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import functools
import hashlib
import hmac
import json
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from deniable.shared.errors import InvalidParameter, InvalidReport

__all__ = [
    "DEVICE_SECRET_BYTES",
    "ENC_BYTES",
    "FORMAT_VERSION",
    "INFO_LABEL",
    "MAX_CIPHERTEXT_BYTES",
    "MAX_PLAINTEXT_BYTES",
    "MIN_CIPHERTEXT_BYTES",
    "PSEUDONYM_LABEL",
    "SUITE_ID",
    "SUPPORTED_VERSIONS",
    "TAG_BYTES",
    "Envelope",
    "canonical_json",
    "check_public_key",
    "decode_key",
    "encode_key",
    "generate_keypair",
    "hpke_info",
    "make_pseudonym",
    "new_report_id",
    "open_envelope",
    "parse_json_object",
    "public_key_of",
    "seal",
]

#: The envelope format this code writes; :data:`SUPPORTED_VERSIONS` lists those it reads.
FORMAT_VERSION = 1
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)
#: The HPKE suite, named as in RFC 9180: KEM 0x0020, KDF 0x0001, AEAD 0x0003.
SUITE_ID = "X25519-HKDF-SHA256-ChaCha20Poly1305"

#: Length of the HPKE encapsulated key (X25519 public key) that prefixes every ciphertext.
ENC_BYTES = 32
#: Length of the ChaCha20-Poly1305 authentication tag that ends every ciphertext.
TAG_BYTES = 16
#: Largest canonical-JSON payload :func:`seal` accepts, in bytes.
MAX_PLAINTEXT_BYTES = 60 * 1024
#: Ciphertext bounds (decoded bytes): an empty plaintext still carries ``enc`` and the tag.
MIN_CIPHERTEXT_BYTES = ENC_BYTES + TAG_BYTES
MAX_CIPHERTEXT_BYTES = 64 * 1024

#: Length of a device secret (HMAC keys shorter than a block are zero-padded, so the length is fixed).
DEVICE_SECRET_BYTES = 32
#: Domain-separation prefixes (each followed by one 0x00 byte) of the pseudonym MAC and the HPKE info.
PSEUDONYM_LABEL = b"deniable/pseudonym/v1"
INFO_LABEL = b"deniable/hpke-info/v1"

_SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
_REPORT_ID_RE = re.compile(r"[0-9a-f]{32}")
_PSEUDONYM_RE = re.compile(r"[0-9a-f]{64}")
_CAMPAIGN_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_ENVELOPE_KEYS = frozenset({"v", "report_id", "pseudonym", "ct"})


# --------------------------------------------------------------------------------------------- encodings


def encode_key(raw: bytes) -> str:
    """Encode a raw 32-byte X25519 key as base64url without padding (43 characters)."""
    if not isinstance(raw, bytes) or len(raw) != 32:
        got = f"{len(raw)} bytes" if isinstance(raw, bytes) else type(raw).__name__
        raise InvalidParameter(f"a key must be 32 raw bytes, got {got}")
    return _b64url_encode(raw)


def decode_key(text: str, *, name: str = "key") -> bytes:
    """Decode a base64url (no padding) X25519 key to its 32 raw bytes, else raise ``InvalidParameter``."""
    raw = _b64url_decode(text)
    if raw is None or len(raw) != 32:
        shown = repr(text) if isinstance(text, str) and len(text) <= 64 else f"a {type(text).__name__}"
        raise InvalidParameter(
            f"'{name}' must be 32 bytes in base64url without padding (43 characters), got {shown}"
        )
    return raw


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64url_decode(text: object) -> bytes | None:
    """Strict base64url without padding: alphabet only, canonical trailing bits; ``None`` if not."""
    if not isinstance(text, str) or len(text) % 4 == 1 or _B64URL_RE.fullmatch(text) is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if _b64url_encode(raw) == text else None


def canonical_json(obj: Any) -> bytes:
    """Serialize to canonical JSON (RFC 8785, JCS) in UTF-8: sorted keys, no whitespace, shortest numbers.

    Keys are sorted by code point (the same as JCS's UTF-16 order for the ASCII keys deniable uses); floats
    are written as ECMAScript does (``1.0`` → ``1``, ``1e-07`` → ``1e-7``). NaN, infinities, non-string
    keys, lone surrogates and other types raise ``InvalidParameter``.
    """
    parts: list[str] = []
    _canonical(obj, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidParameter("canonical JSON strings must be valid Unicode (no lone surrogates)") from exc


def _canonical(obj: Any, out: list[str]) -> None:
    if obj is None or isinstance(obj, bool):
        out.append("null" if obj is None else ("true" if obj else "false"))
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(_ecmascript_number(obj))
    elif isinstance(obj, str):
        out.append(json.dumps(obj, ensure_ascii=False))
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(obj, Mapping):
        if not all(isinstance(key, str) for key in obj):
            raise InvalidParameter("canonical JSON object keys must be strings")
        out.append("{")
        for i, key in enumerate(sorted(obj)):
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _canonical(obj[key], out)
        out.append("}")
    else:
        raise InvalidParameter(f"canonical JSON cannot encode a {type(obj).__name__}")


def _ecmascript_number(x: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(x):
        raise InvalidParameter(f"canonical JSON numbers must be finite, got {x!r}")
    if x == 0:
        return "0"
    shortest = repr(x)  # Python's repr is the shortest round-trip digit string, as ECMAScript requires
    exponent = decimal.Decimal(shortest).adjusted()
    if -7 < exponent < 21:
        text = format(decimal.Decimal(shortest), "f")
        return text[:-2] if text.endswith(".0") else text
    mantissa, _, exp = shortest.partition("e")
    mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
    return f"{mantissa}e{'+' if int(exp) > 0 else '-'}{abs(int(exp))}"


def parse_json_object(data: bytes, *, what: str) -> dict[str, Any]:
    """Parse UTF-8 JSON that must be an object, rejecting duplicate keys, NaN/Infinity and deep nesting.

    Raises ``InvalidReport`` naming ``what`` on any problem.
    """

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            raise InvalidReport(f"{what} has a duplicate key")
        return obj

    def no_constants(name: str) -> Any:
        raise InvalidReport(f"{what} contains {name}, which is not JSON")

    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except InvalidReport:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidReport(f"{what} is not UTF-8 JSON: {type(exc).__name__}") from exc
    if not isinstance(obj, dict):
        raise InvalidReport(f"{what} must be a JSON object, got a {type(obj).__name__}")
    return obj


# --------------------------------------------------------------------------------------------- keys and ids


def generate_keypair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair from the OS CSPRNG, as raw 32-byte ``(private, public)``."""
    private = X25519PrivateKey.generate()
    return _private_raw(private), _public_raw(private.public_key())


def public_key_of(private_key: bytes) -> bytes:
    """The raw 32-byte X25519 public key belonging to a raw private key."""
    return _public_raw(_load_private(private_key).public_key())


def check_public_key(public_key: bytes) -> None:
    """Raise ``InvalidParameter`` unless ``public_key`` is a usable X25519 public key.

    A small-order point (e.g. all zeros) would make the DH shared secret all-zero, which RFC 9180 §7.1.4
    forbids; it is detected by one trial exchange.
    """
    peer = _load_public(public_key)
    try:
        X25519PrivateKey.generate().exchange(peer)
    except ValueError as exc:
        raise InvalidParameter(
            "the public key is a small-order X25519 point; nothing can be sealed to it"
        ) from exc


def _private_raw(key: X25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _public_raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _load_private(raw: bytes | X25519PrivateKey) -> X25519PrivateKey:
    if isinstance(raw, X25519PrivateKey):
        return raw
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise InvalidParameter("'private_key' must be 32 raw bytes (an X25519 private key)")
    return _private_key_object(raw)


@functools.lru_cache(maxsize=64)
def _private_key_object(raw: bytes) -> X25519PrivateKey:
    """Loading a key costs about half an HPKE open; an aggregator opens many envelopes per campaign key."""
    return X25519PrivateKey.from_private_bytes(raw)


def _load_public(raw: bytes) -> X25519PublicKey:
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise InvalidParameter("'public_key' must be 32 raw bytes (an X25519 public key)")
    return X25519PublicKey.from_public_bytes(raw)


def new_report_id() -> str:
    """A fresh report id: 128 bits from ``secrets``, as 32 lowercase hex digits."""
    return secrets.token_hex(16)


def make_pseudonym(device_secret: bytes, campaign_id: str) -> str:
    """The device's pseudonym in one campaign: 64 lowercase hex digits.

    ``HMAC-SHA256(device_secret, b"deniable/pseudonym/v1" || 0x00 || UTF-8(campaign_id))``. It is stable per
    (device, campaign), so the aggregator counts one report per device, and without the secret the
    pseudonyms of one device in two campaigns are unlinkable (HMAC is a PRF).
    """
    if not isinstance(device_secret, bytes) or len(device_secret) != DEVICE_SECRET_BYTES:
        raise InvalidParameter(
            f"'device_secret' must be exactly {DEVICE_SECRET_BYTES} random bytes; use "
            f"secrets.token_bytes({DEVICE_SECRET_BYTES})"
        )
    _check_campaign_id(campaign_id, InvalidParameter)
    message = PSEUDONYM_LABEL + b"\x00" + campaign_id.encode("utf-8")
    return hmac.new(device_secret, message, hashlib.sha256).hexdigest()


def hpke_info(campaign_id: str, version: int, report_id: str, pseudonym: str) -> bytes:
    """The HPKE ``info`` bytes of one envelope (at most 137 bytes)::

        b"deniable/hpke-info/v1" || 0x00                       22 bytes
        || I2OSP(version, 2)                                     2 bytes, big-endian
        || I2OSP(len(campaign_id), 1) || ASCII(campaign_id)   1 + 1..64 bytes
        || bytes.fromhex(report_id)                             16 bytes
        || bytes.fromhex(pseudonym)                             32 bytes

    The campaign id is length-prefixed and the other fields have fixed lengths, so distinct tuples give
    distinct strings. Raises ``InvalidParameter`` if a field is malformed.
    """
    _check_campaign_id(campaign_id, InvalidParameter)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version < 2**16:
        raise InvalidParameter(f"'version' must be an integer in [0, 65535], got {version!r}")
    _check_hex("report_id", report_id, _REPORT_ID_RE, 32, InvalidParameter)
    _check_hex("pseudonym", pseudonym, _PSEUDONYM_RE, 64, InvalidParameter)
    cid = campaign_id.encode("ascii")
    return b"".join(
        (
            INFO_LABEL,
            b"\x00",
            version.to_bytes(2, "big"),
            len(cid).to_bytes(1, "big"),
            cid,
            bytes.fromhex(report_id),
            bytes.fromhex(pseudonym),
        )
    )


def _check_campaign_id(campaign_id: object, error: type[ValueError]) -> None:
    if not isinstance(campaign_id, str) or _CAMPAIGN_ID_RE.fullmatch(campaign_id) is None:
        raise error(
            "'campaign_id' must be a slug of 1-64 characters from a-z, 0-9 and '-', starting with a "
            f"letter or digit, got {_short(campaign_id)}"
        )


def _check_hex(
    name: str, value: object, pattern: re.Pattern[str], digits: int, error: type[ValueError]
) -> None:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        where = "envelope " if error is InvalidReport else ""
        raise error(f"{where}'{name}' must be {digits} lowercase hex digits, got {_short(value)}")


def _short(value: object) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else f"a string of {len(value)} characters"
    return f"a {type(value).__name__}"


# --------------------------------------------------------------------------------------------- envelope


@dataclass(frozen=True)
class Envelope:
    """One sealed report as it travels: validated on construction (``InvalidReport`` naming the field).

    ``ciphertext`` is HPKE's ``enc || ct`` (32-byte encapsulated key, then the AEAD output with its tag).
    """

    version: int
    report_id: str
    pseudonym: str
    ciphertext: bytes

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise InvalidReport(f"envelope 'v' must be an integer, got {_short(self.version)}")
        if self.version not in SUPPORTED_VERSIONS:
            raise InvalidReport(
                f"envelope 'v' is {self.version}, an unknown format version; this aggregator reads "
                f"{', '.join(map(str, SUPPORTED_VERSIONS))} (update the client or the aggregator)"
            )
        _check_hex("report_id", self.report_id, _REPORT_ID_RE, 32, InvalidReport)
        _check_hex("pseudonym", self.pseudonym, _PSEUDONYM_RE, 64, InvalidReport)
        if not isinstance(self.ciphertext, bytes):
            raise InvalidReport(f"envelope 'ct' must be bytes, got {_short(self.ciphertext)}")
        if not MIN_CIPHERTEXT_BYTES <= len(self.ciphertext) <= MAX_CIPHERTEXT_BYTES:
            raise InvalidReport(
                f"envelope 'ct' must decode to {MIN_CIPHERTEXT_BYTES}..{MAX_CIPHERTEXT_BYTES} bytes "
                f"(32-byte HPKE enc + ciphertext + 16-byte tag), got {len(self.ciphertext)}"
            )

    def to_json(self) -> dict[str, Any]:
        """The wire form ``{"v", "report_id", "pseudonym", "ct"}``, ``ct`` in base64url without padding."""
        return {
            "v": self.version,
            "report_id": self.report_id,
            "pseudonym": self.pseudonym,
            "ct": _b64url_encode(self.ciphertext),
        }

    @classmethod
    def from_json(cls, obj: object) -> Envelope:
        """Parse the wire form strictly: a dict with exactly the four keys, each well-formed.

        Raises ``InvalidReport`` (and nothing else) naming the offending field.
        """
        if not isinstance(obj, dict):
            raise InvalidReport(f"an envelope must be a JSON object, got {_short(obj)}")
        keys = set(obj)
        if keys != _ENVELOPE_KEYS:
            missing = sorted(_ENVELOPE_KEYS - keys)
            extra = sorted(str(k) for k in keys - _ENVELOPE_KEYS)
            parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
            parts += [f"unexpected {', '.join(_short(k) for k in extra[:5])}"] if extra else []
            raise InvalidReport(
                "an envelope must have exactly the keys 'ct', 'pseudonym', 'report_id', 'v': "
                + "; ".join(parts)
            )
        ct = obj["ct"]
        if not isinstance(ct, str):
            raise InvalidReport(f"envelope 'ct' must be a base64url string, got {_short(ct)}")
        if len(ct) > (MAX_CIPHERTEXT_BYTES * 4 + 2) // 3:
            raise InvalidReport(f"envelope 'ct' is longer than {MAX_CIPHERTEXT_BYTES} bytes")
        raw = _b64url_decode(ct)
        if raw is None:
            raise InvalidReport(
                "envelope 'ct' must be base64url without padding (alphabet A-Z a-z 0-9 - _, canonical)"
            )
        return cls(version=obj["v"], report_id=obj["report_id"], pseudonym=obj["pseudonym"], ciphertext=raw)


def seal(
    payload: Mapping[str, Any],
    *,
    campaign_id: str,
    public_key: bytes,
    pseudonym: str,
    report_id: str | None = None,
) -> Envelope:
    """Encrypt ``payload`` (as canonical JSON) to the campaign's ``public_key`` in a fresh envelope.

    The envelope is bound (via :func:`hpke_info`) to ``campaign_id``, :data:`FORMAT_VERSION`, the report id
    (fresh from :func:`new_report_id` unless given) and ``pseudonym``. Raises ``InvalidParameter`` for a
    malformed argument or a payload over :data:`MAX_PLAINTEXT_BYTES`.
    """
    if not isinstance(payload, Mapping):
        raise InvalidParameter(f"'payload' must be a JSON object (a dict), got {_short(payload)}")
    plaintext = canonical_json(payload)
    if len(plaintext) > MAX_PLAINTEXT_BYTES:
        raise InvalidParameter(
            f"the payload is {len(plaintext)} bytes of JSON; at most {MAX_PLAINTEXT_BYTES} can be sealed"
        )
    rid = new_report_id() if report_id is None else report_id
    info = hpke_info(campaign_id, FORMAT_VERSION, rid, pseudonym)
    key = _load_public(public_key)
    try:
        ciphertext = _SUITE.encrypt(plaintext, key, info=info)
    except ValueError as exc:  # a small-order public key gives an all-zero shared secret
        raise InvalidParameter("cannot encrypt to this public key (a small-order X25519 point)") from exc
    return Envelope(version=FORMAT_VERSION, report_id=rid, pseudonym=pseudonym, ciphertext=ciphertext)


def open_envelope(
    envelope: Envelope, *, campaign_id: str, private_key: bytes | X25519PrivateKey
) -> dict[str, Any]:
    """Decrypt ``envelope`` with the campaign's ``private_key`` (raw bytes or a loaded key) and parse it.

    Raises ``InvalidReport`` if the ciphertext does not decrypt under this campaign id, the envelope's
    version, report id and pseudonym (tampering, replay under another id, another campaign or key), or if
    the plaintext is not a JSON object.
    """
    info = hpke_info(campaign_id, envelope.version, envelope.report_id, envelope.pseudonym)
    key = _load_private(private_key)
    try:
        plaintext = _SUITE.decrypt(envelope.ciphertext, key, info=info)
    except Exception as exc:  # InvalidTag, or a malformed enc (small-order point): all the same to a client
        raise InvalidReport(
            f"ciphertext does not decrypt for campaign '{campaign_id}' with this report id and pseudonym; "
            "it was sealed for another campaign, key, report id or pseudonym, or it was altered in transit "
            "(fetch the campaign's current config and seal the report again)"
        ) from exc
    if len(plaintext) > MAX_PLAINTEXT_BYTES:
        raise InvalidReport(
            f"the payload is {len(plaintext)} bytes; at most {MAX_PLAINTEXT_BYTES} are allowed"
        )
    return parse_json_object(plaintext, what="the decrypted payload")
