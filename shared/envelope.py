"""Sealed report envelopes: HPKE (RFC 9180) to the campaign key, padded, signed by the device's campaign key.

A device seals a payload (canonical JSON, see :func:`canonical_json`) with single-shot HPKE in base mode,
suite DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305, to the campaign's public key. The HPKE
``info`` string (:func:`hpke_info`) binds the campaign id, the format version, the report id and the
device's pseudonym, so a captured ciphertext decrypts only under the envelope it was sealed in: it cannot be
replayed under a fresh report id or pseudonym (to be counted twice) nor moved to another campaign.

Format version 2 (what :func:`seal` writes) adds two things to version 1 (still read, for campaigns created
under it):

* **Padding.** The plaintext is the canonical JSON followed by zero bytes up to a length fixed by the
  campaign descriptor (the longest payload it allows, ``CampaignConfig.padded_length``), so every envelope
  of a campaign has the same size whatever the value, report, groups or round.
* **Proof of possession.** Each device has one Ed25519 key pair per campaign, derived from its secret
  (:func:`device_signing_key`); the pseudonym is a hash of that public key (:func:`pseudonym_of_key`), and
  the envelope carries the public key and an Ed25519 signature over the bound fields and the ciphertext
  (:func:`signed_message`). Whoever sees an envelope can neither seal another answer under its pseudonym
  nor learn from the aggregator whether that pseudonym has reported: a forged envelope fails the proof
  before anything is looked up.

Privacy: the envelope hides the payload from everyone but the holder of the campaign's private key. It does
not randomize anything; in local campaigns the payload already holds the randomized report
(``deniable.shared.mechanisms``), so even the aggregator never sees a raw value. The pseudonym is stable
per (device, campaign), so the aggregator can count one report per device, and is unlinkable across
campaigns without the device secret (the campaign keys are outputs of a PRF of the secret). The byte
layouts are specified in ``docs/wire-format.md``.

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

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from deniable.shared.errors import InvalidParameter, InvalidReport

__all__ = [
    "DEVICE_KEY_BYTES",
    "DEVICE_KEY_LABEL",
    "DEVICE_SECRET_BYTES",
    "ENC_BYTES",
    "FORMAT_VERSION",
    "INFO_LABEL",
    "MAX_CIPHERTEXT_BYTES",
    "MAX_PLAINTEXT_BYTES",
    "MIN_CIPHERTEXT_BYTES",
    "PROOF_FAILED",
    "PSEUDONYM_LABEL",
    "PSEUDONYM_LABEL_V2",
    "SIGNATURE_BYTES",
    "SIGNATURE_LABEL",
    "SUITE_ID",
    "SUPPORTED_VERSIONS",
    "TAG_BYTES",
    "Envelope",
    "canonical_json",
    "check_public_key",
    "decode_key",
    "device_public_key",
    "device_signing_key",
    "encode_key",
    "generate_keypair",
    "hpke_info",
    "make_pseudonym",
    "new_report_id",
    "open_envelope",
    "pad_plaintext",
    "parse_json",
    "parse_json_object",
    "pseudonym_of_key",
    "public_key_of",
    "seal",
    "signed_message",
    "unpad_plaintext",
    "verify_possession",
]

#: The envelope format this code writes; :data:`SUPPORTED_VERSIONS` lists those it reads. Version 1 (no
#: padding, no proof of possession) is read and written only for campaigns whose descriptor says 1.
FORMAT_VERSION = 2
SUPPORTED_VERSIONS: tuple[int, ...] = (1, 2)
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
#: Version 2: the device's per-campaign Ed25519 seed, its pseudonym, and the signed message.
DEVICE_KEY_LABEL = b"deniable/device-key/v2"
PSEUDONYM_LABEL_V2 = b"deniable/pseudonym/v2"
SIGNATURE_LABEL = b"deniable/envelope-signature/v2"
#: Raw Ed25519 public key and signature lengths (RFC 8032).
DEVICE_KEY_BYTES = 32
SIGNATURE_BYTES = 64
#: The one reason given for every failed proof of possession, whether or not the pseudonym is known.
PROOF_FAILED = (
    "the proof of possession fails: the signature does not verify under the envelope's 'device_key', or "
    "the pseudonym is not the one of that key; the envelope was forged or altered (the device must seal "
    "its report again with its own campaign key)"
)

_SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
_REPORT_ID_RE = re.compile(r"[0-9a-f]{32}")
_PSEUDONYM_RE = re.compile(r"[0-9a-f]{64}")
_CAMPAIGN_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_ENVELOPE_KEYS = frozenset({"v", "report_id", "pseudonym", "ct"})
_ENVELOPE_KEYS_V2 = _ENVELOPE_KEYS | {"device_key", "sig"}


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


def parse_json(data: bytes, *, what: str) -> Any:
    """Parse strict UTF-8 JSON of any type: duplicate keys, NaN/Infinity, invalid UTF-8 and nesting past the
    interpreter's recursion limit are refused. The one strict parser of deniable: decrypted payloads and
    the aggregator's request bodies both go through it.

    Raises ``InvalidReport`` naming ``what`` on any problem.
    """

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise InvalidReport(f"{what} has a duplicate key {key[:40]!r}; send each key once")
            obj[key] = value
        return obj

    def no_constants(name: str) -> Any:
        raise InvalidReport(f"{what} contains {name}, which is not JSON")

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except InvalidReport:
        raise
    except json.JSONDecodeError as exc:
        raise InvalidReport(f"{what} is not UTF-8 JSON: {type(exc).__name__}: {exc.msg} at char {exc.pos}") from exc
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidReport(f"{what} is not UTF-8 JSON: {type(exc).__name__}") from exc


def parse_json_object(data: bytes, *, what: str) -> dict[str, Any]:
    """Parse strict UTF-8 JSON (:func:`parse_json`) that must be an object.

    Raises ``InvalidReport`` naming ``what`` on any problem.
    """
    obj = parse_json(data, what=what)
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


def make_pseudonym(device_secret: bytes, campaign_id: str, version: int = FORMAT_VERSION) -> str:
    """The device's pseudonym in one campaign under format ``version``: 64 lowercase hex digits.

    Version 2: :func:`pseudonym_of_key` of the device's campaign public key (:func:`device_public_key`), so
    only the holder of the matching private key can sign for it. Version 1:
    ``HMAC-SHA256(device_secret, b"deniable/pseudonym/v1" || 0x00 || UTF-8(campaign_id))``. Either way it is
    stable per (device, campaign), so the aggregator counts one report per device, and without the secret
    the pseudonyms of one device in two campaigns are unlinkable (HMAC is a PRF).
    """
    _check_device_secret(device_secret)
    _check_campaign_id(campaign_id, InvalidParameter)
    if version == 1:
        message = PSEUDONYM_LABEL + b"\x00" + campaign_id.encode("utf-8")
        return hmac.new(device_secret, message, hashlib.sha256).hexdigest()
    _check_version(version)
    return pseudonym_of_key(device_public_key(device_secret, campaign_id), campaign_id)


def _check_device_secret(device_secret: object) -> None:
    if not isinstance(device_secret, bytes) or len(device_secret) != DEVICE_SECRET_BYTES:
        raise InvalidParameter(
            f"'device_secret' must be exactly {DEVICE_SECRET_BYTES} random bytes; use "
            f"secrets.token_bytes({DEVICE_SECRET_BYTES})"
        )


def _check_version(version: object) -> None:
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise InvalidParameter(f"'version' must be one of {list(SUPPORTED_VERSIONS)}, got {version!r}")


def device_signing_key(device_secret: bytes, campaign_id: str) -> Ed25519PrivateKey:
    """The device's Ed25519 key for one campaign (format version 2), derived from its secret.

    ``seed = HMAC-SHA256(device_secret, b"deniable/device-key/v2" || 0x00 || UTF-8(campaign_id))`` is the
    RFC 8032 private key. HMAC is a PRF, so the keys (and pseudonyms) of one device in two campaigns are
    independent-looking without the secret, and the same device always has the same key in a campaign.
    """
    _check_device_secret(device_secret)
    _check_campaign_id(campaign_id, InvalidParameter)
    return _signing_key(device_secret, campaign_id)


@functools.lru_cache(maxsize=256)
def _signing_key(device_secret: bytes, campaign_id: str) -> Ed25519PrivateKey:
    message = DEVICE_KEY_LABEL + b"\x00" + campaign_id.encode("utf-8")
    return Ed25519PrivateKey.from_private_bytes(hmac.new(device_secret, message, hashlib.sha256).digest())


def device_public_key(device_secret: bytes, campaign_id: str) -> bytes:
    """The raw 32-byte Ed25519 public key of :func:`device_signing_key`."""
    return device_signing_key(device_secret, campaign_id).public_key().public_bytes_raw()


def pseudonym_of_key(device_key: bytes, campaign_id: str) -> str:
    """Version-2 pseudonym of a device public key in a campaign, 64 hex digits::

    hex(SHA-256(b"deniable/pseudonym/v2" || 0x00 || I2OSP(len(campaign_id), 1) || campaign_id
                || device_key))
    """
    _check_campaign_id(campaign_id, InvalidParameter)
    if not isinstance(device_key, bytes) or len(device_key) != DEVICE_KEY_BYTES:
        raise InvalidParameter(f"'device_key' must be {DEVICE_KEY_BYTES} raw bytes (an Ed25519 public key)")
    cid = campaign_id.encode("ascii")
    return hashlib.sha256(PSEUDONYM_LABEL_V2 + b"\x00" + len(cid).to_bytes(1, "big") + cid + device_key).hexdigest()


def signed_message(info: bytes, ciphertext: bytes) -> bytes:
    """What a version-2 device signs: ``b"deniable/envelope-signature/v2" || 0x00 || info || ciphertext``.

    ``info`` (:func:`hpke_info`) fixes campaign, version, report id and pseudonym (hence the device key);
    the ciphertext is last and runs to the end, so the split is unambiguous.
    """
    return SIGNATURE_LABEL + b"\x00" + info + ciphertext


def pad_plaintext(plaintext: bytes, length: int) -> bytes:
    """``plaintext`` followed by zero bytes up to ``length`` (version 2); ``InvalidParameter`` if longer.

    Canonical JSON never contains a 0x00 byte (control characters are escaped) and an object ends in
    ``}``, so :func:`unpad_plaintext` recovers it by stripping trailing zeros.
    """
    if isinstance(length, bool) or not isinstance(length, int) or not 2 <= length <= MAX_PLAINTEXT_BYTES:
        raise InvalidParameter(f"'padded_length' must be an integer in [2, {MAX_PLAINTEXT_BYTES}], got {length!r}")
    if len(plaintext) > length:
        raise InvalidParameter(
            f"the payload is {len(plaintext)} bytes of JSON, more than the campaign's padded length "
            f"{length}; it breaks a bound of the descriptor"
        )
    return plaintext + bytes(length - len(plaintext))


def unpad_plaintext(padded: bytes) -> bytes:
    """The JSON of a padded plaintext: everything before the trailing zero bytes."""
    return padded.rstrip(b"\x00")


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
    Version 2 also carries ``device_key`` (raw Ed25519 public key) and ``signature`` (over
    :func:`signed_message`); version 1 has neither.
    """

    version: int
    report_id: str
    pseudonym: str
    ciphertext: bytes
    device_key: bytes | None = None
    signature: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise InvalidReport(f"envelope 'v' must be an integer, got {_short(self.version)}")
        if self.version not in SUPPORTED_VERSIONS:
            raise InvalidReport(_unknown_version(self.version))
        _check_hex("report_id", self.report_id, _REPORT_ID_RE, 32, InvalidReport)
        _check_hex("pseudonym", self.pseudonym, _PSEUDONYM_RE, 64, InvalidReport)
        if not isinstance(self.ciphertext, bytes):
            raise InvalidReport(f"envelope 'ct' must be bytes, got {_short(self.ciphertext)}")
        if not MIN_CIPHERTEXT_BYTES <= len(self.ciphertext) <= MAX_CIPHERTEXT_BYTES:
            raise InvalidReport(
                f"envelope 'ct' must decode to {MIN_CIPHERTEXT_BYTES}..{MAX_CIPHERTEXT_BYTES} bytes "
                f"(32-byte HPKE enc + ciphertext + 16-byte tag), got {len(self.ciphertext)}"
            )
        if self.version == 1:
            if self.device_key is not None or self.signature is not None:
                raise InvalidReport("a version 1 envelope has no 'device_key' and no 'sig'")
            return
        if not isinstance(self.device_key, bytes) or len(self.device_key) != DEVICE_KEY_BYTES:
            raise InvalidReport(
                f"envelope 'device_key' must be {DEVICE_KEY_BYTES} bytes (an Ed25519 public key) in base64url "
                "without padding (43 characters)"
            )
        if not isinstance(self.signature, bytes) or len(self.signature) != SIGNATURE_BYTES:
            raise InvalidReport(
                f"envelope 'sig' must be {SIGNATURE_BYTES} bytes (an Ed25519 signature) in base64url without "
                "padding (86 characters)"
            )

    def to_json(self) -> dict[str, Any]:
        """The wire form ``{"v", "report_id", "pseudonym", "ct"}`` (plus ``"device_key"`` and ``"sig"`` in
        version 2), the byte strings in base64url without padding."""
        wire = {
            "v": self.version,
            "report_id": self.report_id,
            "pseudonym": self.pseudonym,
            "ct": _b64url_encode(self.ciphertext),
        }
        if self.device_key is not None and self.signature is not None:
            wire["device_key"] = _b64url_encode(self.device_key)
            wire["sig"] = _b64url_encode(self.signature)
        return wire

    @classmethod
    def from_json(cls, obj: object) -> Envelope:
        """Parse the wire form strictly: a dict with exactly the keys of its version, each well-formed.

        Raises ``InvalidReport`` (and nothing else) naming the offending field.
        """
        if not isinstance(obj, dict):
            raise InvalidReport(f"an envelope must be a JSON object, got {_short(obj)}")
        keys = set(obj)
        version = obj.get("v")
        if type(version) is int and version not in SUPPORTED_VERSIONS:
            raise InvalidReport(_unknown_version(version))
        v2 = version == 2 and type(version) is int
        expected = _ENVELOPE_KEYS_V2 if v2 else _ENVELOPE_KEYS
        if keys != expected:
            missing = sorted(expected - keys)
            extra = sorted(str(k) for k in keys - expected)
            parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
            parts += [f"unexpected {', '.join(_short(k) for k in extra[:5])}"] if extra else []
            raise InvalidReport(
                f"an envelope must have exactly the keys {', '.join(map(repr, sorted(expected)))}: " + "; ".join(parts)
            )
        ct = obj["ct"]
        if not isinstance(ct, str):
            raise InvalidReport(f"envelope 'ct' must be a base64url string, got {_short(ct)}")
        if len(ct) > (MAX_CIPHERTEXT_BYTES * 4 + 2) // 3:
            raise InvalidReport(f"envelope 'ct' is longer than {MAX_CIPHERTEXT_BYTES} bytes")
        raw = _b64url_decode(ct)
        if raw is None:
            raise InvalidReport("envelope 'ct' must be base64url without padding (alphabet A-Z a-z 0-9 - _, canonical)")
        device_key = signature = None
        if v2:
            device_key, signature = _b64url_decode(obj["device_key"]), _b64url_decode(obj["sig"])
            if device_key is None:
                raise InvalidReport("envelope 'device_key' must be base64url without padding (43 characters)")
            if signature is None:
                raise InvalidReport("envelope 'sig' must be base64url without padding (86 characters)")
        return cls(version=obj["v"], report_id=obj["report_id"], pseudonym=obj["pseudonym"], ciphertext=raw,
                   device_key=device_key, signature=signature)  # fmt: skip


def _unknown_version(version: int) -> str:
    return (
        f"envelope 'v' is {version}, an unknown format version; this aggregator reads "
        f"{', '.join(map(str, SUPPORTED_VERSIONS))} (update the client or the aggregator)"
    )


def seal(
    payload: Mapping[str, Any],
    *,
    campaign_id: str,
    public_key: bytes,
    device_secret: bytes,
    padded_length: int | None,
    report_id: str | None = None,
    version: int = FORMAT_VERSION,
) -> Envelope:
    """Encrypt ``payload`` (as canonical JSON) to the campaign's ``public_key`` in a fresh envelope.

    The envelope is bound (via :func:`hpke_info`) to ``campaign_id``, ``version``, the report id (fresh from
    :func:`new_report_id` unless given) and the device's pseudonym in the campaign (from ``device_secret``).
    Version 2 (the default) pads the plaintext to ``padded_length`` (the campaign's
    ``CampaignConfig.padded_length``) and signs the envelope with the device's campaign key; version 1 (for
    campaigns created under it) does neither and takes ``padded_length=None``. Raises ``InvalidParameter``
    for a malformed argument or a payload over :data:`MAX_PLAINTEXT_BYTES` or ``padded_length``.
    """
    if not isinstance(payload, Mapping):
        raise InvalidParameter(f"'payload' must be a JSON object (a dict), got {_short(payload)}")
    _check_version(version)
    plaintext = canonical_json(payload)
    if len(plaintext) > MAX_PLAINTEXT_BYTES:
        raise InvalidParameter(
            f"the payload is {len(plaintext)} bytes of JSON; at most {MAX_PLAINTEXT_BYTES} can be sealed"
        )
    if version >= 2:
        if padded_length is None:
            raise InvalidParameter("a version 2 envelope needs the campaign's 'padded_length'")
        plaintext = pad_plaintext(plaintext, padded_length)
    elif padded_length is not None:
        raise InvalidParameter("version 1 envelopes are not padded; pass padded_length=None")
    rid = new_report_id() if report_id is None else report_id
    pseudonym = make_pseudonym(device_secret, campaign_id, version)
    info = hpke_info(campaign_id, version, rid, pseudonym)
    key = _load_public(public_key)
    try:
        ciphertext = _SUITE.encrypt(plaintext, key, info=info)
    except ValueError as exc:  # a small-order public key gives an all-zero shared secret
        raise InvalidParameter("cannot encrypt to this public key (a small-order X25519 point)") from exc
    if version == 1:
        return Envelope(version=1, report_id=rid, pseudonym=pseudonym, ciphertext=ciphertext)
    signer = device_signing_key(device_secret, campaign_id)
    return Envelope(
        version=version,
        report_id=rid,
        pseudonym=pseudonym,
        ciphertext=ciphertext,
        device_key=signer.public_key().public_bytes_raw(),
        signature=signer.sign(signed_message(info, ciphertext)),
    )


def verify_possession(envelope: Envelope, *, campaign_id: str) -> None:
    """Raise ``InvalidReport`` (:data:`PROOF_FAILED`) unless a version-2 envelope's proof holds.

    The proof holds when the pseudonym is :func:`pseudonym_of_key` of ``device_key`` in this campaign and
    ``sig`` is a valid Ed25519 signature (RFC 8032, as OpenSSL verifies it) by ``device_key`` over
    :func:`signed_message`. It depends on the envelope alone, never on what the aggregator stored, so the
    answer to a forgery is the same whether or not the pseudonym has reported. A version-1 envelope has no
    proof (nothing to check).
    """
    if envelope.version == 1:
        return
    assert envelope.device_key is not None and envelope.signature is not None  # checked by Envelope
    info = hpke_info(campaign_id, envelope.version, envelope.report_id, envelope.pseudonym)
    if not hmac.compare_digest(pseudonym_of_key(envelope.device_key, campaign_id), envelope.pseudonym):
        raise InvalidReport(PROOF_FAILED)
    try:
        Ed25519PublicKey.from_public_bytes(envelope.device_key).verify(
            envelope.signature, signed_message(info, envelope.ciphertext)
        )
    except (InvalidSignature, ValueError) as exc:
        raise InvalidReport(PROOF_FAILED) from exc


def open_envelope(
    envelope: Envelope,
    *,
    campaign_id: str,
    private_key: bytes | X25519PrivateKey,
    padded_length: int | None = None,
) -> dict[str, Any]:
    """Check, decrypt and parse ``envelope`` with the campaign's ``private_key`` (raw bytes or a loaded key).

    Version 2: the ciphertext must be exactly ``48 + padded_length`` bytes when ``padded_length`` is given
    (the aggregator always gives it), then the proof of possession (:func:`verify_possession`) must hold,
    and only then is anything decrypted; the padding is removed before parsing. Raises ``InvalidReport`` if
    a check fails, if the ciphertext does not decrypt under this campaign id, the envelope's version, report
    id and pseudonym (tampering, replay under another id, another campaign or key), or if the plaintext is
    not a JSON object.
    """
    if envelope.version >= 2 and padded_length is not None:
        expected = ENC_BYTES + padded_length + TAG_BYTES
        if len(envelope.ciphertext) != expected:
            raise InvalidReport(
                f"envelope 'ct' must be exactly {expected} bytes in campaign '{campaign_id}' (every payload "
                f"is padded to {padded_length} bytes), got {len(envelope.ciphertext)}; seal it again with the "
                "campaign's current descriptor"
            )
    verify_possession(envelope, campaign_id=campaign_id)
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
        raise InvalidReport(f"the payload is {len(plaintext)} bytes; at most {MAX_PLAINTEXT_BYTES} are allowed")
    if envelope.version >= 2:
        plaintext = unpad_plaintext(plaintext)
    return parse_json_object(plaintext, what="the decrypted payload")
