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

Keys are in ``deniable.shared.keys``, ids and pseudonyms in ``deniable.shared.ids``, the canonical JSON in
``deniable.shared.canonical_json``. This module does no I/O and imports neither Flask nor numpy.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from deniable.shared.base64url import b64url_decode, b64url_encode
from deniable.shared.canonical_json import canonical_json, parse_json_object
from deniable.shared.errors import InvalidParameter, InvalidReport
from deniable.shared.formats import FORMAT_VERSION, SUPPORTED_VERSIONS, check_version
from deniable.shared.ids import (
    DEVICE_KEY_BYTES,
    check_campaign_id,
    check_pseudonym,
    check_report_id,
    device_public_key,
    device_signing_key,
    make_pseudonym,
    new_report_id,
    pseudonym_of_key,
)
from deniable.shared.keys import load_private, load_public
from deniable.shared.messages import show

__all__ = [
    "ENC_BYTES",
    "HPKE_SUITE",
    "INFO_LABEL",
    "MAX_CIPHERTEXT_BYTES",
    "MAX_PLAINTEXT_BYTES",
    "MIN_CIPHERTEXT_BYTES",
    "PROOF_FAILED",
    "SIGNATURE_BYTES",
    "SIGNATURE_LABEL",
    "TAG_BYTES",
    "Envelope",
    "ciphertext_bytes",
    "hpke_info",
    "open_envelope",
    "pad_plaintext",
    "seal",
    "signed_message",
    "unpad_plaintext",
    "verify_possession",
]

#: Length of the HPKE encapsulated key (X25519 public key) that prefixes every ciphertext.
ENC_BYTES = 32
#: Length of the ChaCha20-Poly1305 authentication tag that ends every ciphertext.
TAG_BYTES = 16
#: Largest canonical-JSON payload :func:`seal` accepts, in bytes.
MAX_PLAINTEXT_BYTES = 60 * 1024
#: Ciphertext bounds (decoded bytes): an empty plaintext still carries ``enc`` and the tag.
MIN_CIPHERTEXT_BYTES = ENC_BYTES + TAG_BYTES
MAX_CIPHERTEXT_BYTES = 64 * 1024


def ciphertext_bytes(padded_length: int) -> int:
    """Bytes of the ciphertext of a payload padded to ``padded_length``: ``enc``, the padded plaintext and the
    tag (``48 + padded_length``), the one length of every report of a campaign."""
    return ENC_BYTES + padded_length + TAG_BYTES


#: Domain-separation prefixes (each followed by one 0x00 byte) of the HPKE info and the signed message.
INFO_LABEL = b"deniable/hpke-info/v1"
SIGNATURE_LABEL = b"deniable/envelope-signature/v2"
#: Raw Ed25519 signature length (RFC 8032).
SIGNATURE_BYTES = 64
#: The one reason given for every failed proof of possession, whether or not the pseudonym is known.
PROOF_FAILED = (
    "the proof of possession fails: the signature does not verify under the envelope's 'device_key', or "
    "the pseudonym is not the one of that key; the envelope was forged or altered (the device must seal "
    "its report again with its own campaign key)"
)

#: The HPKE suite of every envelope (``formats.SUITE_ID`` names it): DHKEM(X25519), HKDF-SHA256, ChaCha20-Poly1305;
#: the shuffled model's two layers (``shuffle.py``) seal in it too.
HPKE_SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
_ENVELOPE_KEYS = frozenset({"v", "report_id", "pseudonym", "ct"})
_ENVELOPE_KEYS_V2 = _ENVELOPE_KEYS | {"device_key", "sig"}


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
    check_campaign_id(campaign_id, InvalidParameter)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version < 2**16:
        raise InvalidParameter(f"'version' must be an integer in [0, 65535], got {version!r}")
    check_report_id(report_id, InvalidParameter)
    check_pseudonym(pseudonym, InvalidParameter)
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
            raise InvalidReport(f"envelope 'v' must be an integer, got {show(self.version)}")
        if self.version not in SUPPORTED_VERSIONS:
            raise InvalidReport(_unknown_version(self.version))
        check_report_id(self.report_id, InvalidReport)
        check_pseudonym(self.pseudonym, InvalidReport)
        if not isinstance(self.ciphertext, bytes):
            raise InvalidReport(f"envelope 'ct' must be bytes, got {show(self.ciphertext)}")
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
            "ct": b64url_encode(self.ciphertext),
        }
        if self.device_key is not None and self.signature is not None:
            wire["device_key"] = b64url_encode(self.device_key)
            wire["sig"] = b64url_encode(self.signature)
        return wire

    def to_text(self) -> str:
        """The wire form as JSON text, written once: the bytes of ``json.dumps(self.to_json(),
        separators=(",", ":"))`` (every field is an integer or a hex or base64url string, none needs an
        escape), what the device stores and the outbox sends as it is."""
        text = (
            f'{{"v":{self.version},"report_id":"{self.report_id}","pseudonym":"{self.pseudonym}",'
            f'"ct":"{b64url_encode(self.ciphertext)}"'
        )
        if self.device_key is not None and self.signature is not None:
            text += f',"device_key":"{b64url_encode(self.device_key)}","sig":"{b64url_encode(self.signature)}"'
        return text + "}"

    @classmethod
    def from_json(cls, obj: object) -> Envelope:
        """Parse the wire form strictly: a dict with exactly the keys of its version, each well-formed.

        Raises ``InvalidReport`` (and nothing else) naming the offending field.
        """
        if not isinstance(obj, dict):
            raise InvalidReport(f"an envelope must be a JSON object, got {show(obj)}")
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
            parts += [f"unexpected {', '.join(show(k) for k in extra[:5])}"] if extra else []
            raise InvalidReport(
                f"an envelope must have exactly the keys {', '.join(map(repr, sorted(expected)))}: " + "; ".join(parts)
            )
        ct = obj["ct"]
        if not isinstance(ct, str):
            raise InvalidReport(f"envelope 'ct' must be a base64url string, got {show(ct)}")
        if len(ct) > (MAX_CIPHERTEXT_BYTES * 4 + 2) // 3:
            raise InvalidReport(f"envelope 'ct' is longer than {MAX_CIPHERTEXT_BYTES} bytes")
        raw = b64url_decode(ct)
        if raw is None:
            raise InvalidReport("envelope 'ct' must be base64url without padding (alphabet A-Z a-z 0-9 - _, canonical)")
        device_key = signature = None
        if v2:
            device_key, signature = b64url_decode(obj["device_key"]), b64url_decode(obj["sig"])
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
        raise InvalidParameter(f"'payload' must be a JSON object (a dict), got {show(payload)}")
    check_version(version)
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
    key = load_public(public_key)
    try:
        ciphertext = HPKE_SUITE.encrypt(plaintext, key, info=info)
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
        device_key=device_public_key(device_secret, campaign_id),
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
        expected = ciphertext_bytes(padded_length)
        if len(envelope.ciphertext) != expected:
            raise InvalidReport(
                f"envelope 'ct' must be exactly {expected} bytes in campaign '{campaign_id}' (every payload "
                f"is padded to {padded_length} bytes), got {len(envelope.ciphertext)}; seal it again with the "
                "campaign's current descriptor"
            )
    verify_possession(envelope, campaign_id=campaign_id)
    info = hpke_info(campaign_id, envelope.version, envelope.report_id, envelope.pseudonym)
    key = load_private(private_key)
    try:
        plaintext = HPKE_SUITE.decrypt(envelope.ciphertext, key, info=info)
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
