"""The shuffled trust model's wire format: nested HPKE envelopes, dedup tokens, signed batches, the shuffle.

In a ``"trust_model": "shuffled"`` campaign a device randomizes locally at ε₀ (the campaign's ``epsilon``)
and sends its report through a *shuffler*, a service run by another party than the aggregator's operator,
which batches and permutes the reports so that the aggregator's view of a batch of n is (ε, δ)-DP with
ε ≪ ε₀ (:mod:`deniable.shared.amplification`). Two layers, each HPKE (RFC 9180, the suite of
:mod:`deniable.shared.envelope`) in base mode, single shot, empty aad:

* **inner** (read by the aggregator only): the padded canonical JSON ``{"report": <wire report>}`` sealed
  to the campaign's ``public_key`` with ``info = "deniable/shuffled-inner/v1" || 0x00 || I2OSP(version, 2)
  || I2OSP(len(campaign_id), 1) || campaign_id`` — no report id, no pseudonym, no device key, no
  signature: nothing in it is specific to a device, so the aggregator cannot link it to one. It is
  ``48 + padded_length`` bytes, the same for every report of the campaign.
* **outer** (read by the shuffler only): the canonical JSON ``{"campaign_id", "dedup", "inner"}`` (plus
  ``"token"`` in a campaign with admission tokens) sealed to the shuffler's ``public_key`` (from the
  descriptor's ``shuffler`` object) with ``info = "deniable/shuffled-outer/v1" || 0x00 ||
  I2OSP(version, 2) || I2OSP(len(campaign_id), 1) || campaign_id || report_id (16 raw bytes)``. Every field
  has one length per campaign, so every outer ciphertext of a campaign has the same size too.

``dedup`` = hex(HMAC-SHA256(device_secret, "deniable/shuffle-dedup/v1" || 0x00 || I2OSP(len(cid), 1) ||
cid)): stable per (device, campaign), unlinkable across campaigns (HMAC is a PRF), seen only by the
shuffler, which counts one report per dedup token. The shuffler never holds the campaign key, so it reads
neither the report nor anything the aggregator sees besides the opaque inner ciphertext; the aggregator
receives inner ciphertexts only, in batches, without report ids, arrival times, addresses or pseudonyms.

A **batch** the shuffler forwards is ``{"batch_id": <32 hex>, "reports": [<base64url inner>, ...], "sig":
<base64url>}``, signed with the shuffler's Ed25519 key (whose public half the descriptor pins as
``shuffler.verify_key``) over :func:`batch_message`; the aggregator stores each ``batch_id`` once
(idempotent retries) and refuses a batch below the campaign's ``min_batch``. The order of a batch is a
uniformly random permutation drawn by :func:`shuffle` (Fisher–Yates with ``secrets.randbelow``).

Byte layouts: ``docs/wire-format.md`` §12. This module does no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import urllib.parse
from collections.abc import Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from deniable.shared.base64url import b64url_decode as _b64url_decode
from deniable.shared.base64url import b64url_encode as _b64url_encode
from deniable.shared.canonical_json import canonical_json, parse_json_object
from deniable.shared.envelope import ENC_BYTES, HPKE_SUITE, TAG_BYTES, ciphertext_bytes, pad_plaintext, unpad_plaintext
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.formats import FORMAT_VERSION
from deniable.shared.ids import DEVICE_SECRET_BYTES, PSEUDONYM_RE, REPORT_ID_RE, check_report_id, new_report_id
from deniable.shared.keys import check_public_key, decode_key
from deniable.shared.keys import load_private as _load_private
from deniable.shared.keys import load_public as _load_public
from deniable.shared.limits import (
    SHUFFLE_MIN_BATCH_RANGE,
    SHUFFLER_URL_MAX_CHARS,
    SLUG_MAX_CHARS,
)
from deniable.shared.messages import show
from deniable.shared.sampling import RandBelow

__all__ = [
    "BATCH_SIGNATURE_LABEL",
    "DEDUP_LABEL",
    "INNER_INFO_LABEL",
    "OUTER_INFO_LABEL",
    "OuterPayload",
    "ShuffledBatch",
    "ShuffledEnvelope",
    "ShufflerInfo",
    "batch_body_bytes",
    "batch_capacity",
    "batch_message",
    "dedup_token",
    "inner_info",
    "open_inner",
    "open_outer",
    "outer_info",
    "seal_inner",
    "seal_shuffled",
    "shuffle",
    "sign_batch",
    "verify_batch",
]

INNER_INFO_LABEL = b"deniable/shuffled-inner/v1"
OUTER_INFO_LABEL = b"deniable/shuffled-outer/v1"
DEDUP_LABEL = b"deniable/shuffle-dedup/v1"
BATCH_SIGNATURE_LABEL = b"deniable/shuffled-batch/v1"

_ENVELOPE_KEYS = frozenset({"v", "report_id", "ct"})

T = TypeVar("T")


# ------------------------------------------------------------------------------------------- descriptor


@dataclass(frozen=True)
class ShufflerInfo:
    """The descriptor's ``shuffler`` object: where devices send, and the shuffler's two public keys.

    ``url`` (http:// or https://, at most 2000 characters) takes the device uploads; ``public_key`` (X25519,
    base64url) is what the outer layer is sealed to; ``verify_key`` (Ed25519, base64url) verifies the
    batches the aggregator receives; ``min_batch`` is the threshold: no batch of fewer reports is forwarded
    or accepted. Validation raises ``InvalidConfig``.
    """

    url: str
    public_key: str
    verify_key: str
    min_batch: int

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not 1 <= len(self.url) <= SHUFFLER_URL_MAX_CHARS:
            raise InvalidConfig(
                f"'shuffler.url' must be a URL of at most {SHUFFLER_URL_MAX_CHARS} characters, got {show(self.url)}"
            )
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise InvalidConfig(
                f"'shuffler.url' must be an http:// or https:// URL without query or fragment, got {show(self.url)}"
            )
        try:
            check_public_key(decode_key(self.public_key, name="shuffler.public_key"))
        except InvalidParameter as exc:
            raise InvalidConfig(str(exc)) from exc
        raw = _b64url_decode(self.verify_key)
        if raw is None or len(raw) != 32:
            raise InvalidConfig(
                "'shuffler.verify_key' must be a 32-byte Ed25519 public key in base64url (43 characters)"
            )
        try:
            Ed25519PublicKey.from_public_bytes(raw)
        except ValueError as exc:
            raise InvalidConfig("'shuffler.verify_key' is not an Ed25519 public key") from exc
        low, high = SHUFFLE_MIN_BATCH_RANGE
        if isinstance(self.min_batch, bool) or not isinstance(self.min_batch, int) or not low <= self.min_batch <= high:
            raise InvalidConfig(
                f"'shuffler.min_batch' must be a whole number of reports in [{low}, {high}] (the smallest batch the "
                f"shuffler forwards), got {show(self.min_batch)}"
            )

    @property
    def public_key_bytes(self) -> bytes:
        raw: bytes = decode_key(self.public_key, name="shuffler.public_key")
        return raw

    @property
    def verify_key_bytes(self) -> bytes:
        raw = _b64url_decode(self.verify_key)
        assert raw is not None
        return raw

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "public_key": self.public_key, "verify_key": self.verify_key,
                "min_batch": self.min_batch}  # fmt: skip

    @classmethod
    def from_json(cls, obj: object) -> ShufflerInfo:
        keys = {"url", "public_key", "verify_key", "min_batch"}
        if not isinstance(obj, dict) or set(obj) != keys:
            got = sorted(map(str, obj)) if isinstance(obj, dict) else show(obj)
            raise InvalidConfig(f"'shuffler' must be an object with exactly the keys {sorted(keys)}, got {got}")
        return cls(
            url=obj["url"], public_key=obj["public_key"], verify_key=obj["verify_key"], min_batch=obj["min_batch"]
        )


# ------------------------------------------------------------------------------------------- layers


def _campaign_bytes(campaign_id: str) -> bytes:
    cid = campaign_id.encode("ascii")
    if not 1 <= len(cid) <= SLUG_MAX_CHARS:
        raise InvalidParameter(f"'campaign_id' must be 1..{SLUG_MAX_CHARS} ASCII characters, got {show(campaign_id)}")
    return len(cid).to_bytes(1, "big") + cid


def inner_info(campaign_id: str, version: int = FORMAT_VERSION) -> bytes:
    """``"deniable/shuffled-inner/v1" || 0x00 || I2OSP(version, 2) || I2OSP(len(cid), 1) || cid``."""
    return INNER_INFO_LABEL + b"\x00" + version.to_bytes(2, "big") + _campaign_bytes(campaign_id)


def outer_info(campaign_id: str, report_id: str, version: int = FORMAT_VERSION) -> bytes:
    """``"deniable/shuffled-outer/v1" || 0x00 || I2OSP(version, 2) || I2OSP(len(cid), 1) || cid ||
    report_id`` (16 raw bytes)."""
    check_report_id(report_id, InvalidParameter)
    return (
        OUTER_INFO_LABEL
        + b"\x00"
        + version.to_bytes(2, "big")
        + _campaign_bytes(campaign_id)
        + bytes.fromhex(report_id)
    )


def dedup_token(device_secret: bytes, campaign_id: str) -> str:
    """The device's dedup token in a shuffled campaign (64 hex digits), seen by the shuffler only."""
    if not isinstance(device_secret, bytes) or len(device_secret) != DEVICE_SECRET_BYTES:
        raise InvalidParameter(f"the device secret must be exactly {DEVICE_SECRET_BYTES} bytes")
    message = DEDUP_LABEL + b"\x00" + _campaign_bytes(campaign_id)
    return hmac.new(device_secret, message, hashlib.sha256).hexdigest()


def seal_inner(payload: Mapping[str, Any], *, campaign_id: str, public_key: bytes, padded_length: int) -> bytes:
    """The inner ciphertext (``enc || ct``): ``payload`` padded to ``padded_length``, sealed to the campaign."""
    plaintext = pad_plaintext(canonical_json(payload), padded_length)
    try:
        ct: bytes = HPKE_SUITE.encrypt(plaintext, _load_public(public_key), info=inner_info(campaign_id))
    except ValueError as exc:
        raise InvalidParameter("cannot encrypt to this public key (a small-order X25519 point)") from exc
    return ct


def open_inner(ciphertext: bytes, *, campaign_id: str, private_key: Any, padded_length: int) -> dict[str, Any]:
    """Decrypt and parse one inner ciphertext; ``InvalidReport`` if its length, key, binding or JSON is wrong."""
    expected = ciphertext_bytes(padded_length)
    if len(ciphertext) != expected:
        raise InvalidReport(
            f"an inner ciphertext of campaign '{campaign_id}' is {expected} bytes, got {len(ciphertext)}"
        )
    try:
        plaintext = HPKE_SUITE.decrypt(ciphertext, _load_private(private_key), info=inner_info(campaign_id))
    except Exception as exc:  # InvalidTag or a malformed enc: the same to whoever sent it
        raise InvalidReport(
            f"an inner ciphertext does not decrypt for campaign '{campaign_id}' under its key; it was sealed "
            "for another campaign or key, or altered"
        ) from exc
    return parse_json_object(unpad_plaintext(plaintext), what="the decrypted inner payload")


@dataclass(frozen=True)
class ShuffledEnvelope:
    """What a device sends the shuffler: ``{"v": 2, "report_id": <32 hex>, "ct": <base64url outer>}``."""

    version: int
    report_id: str
    ciphertext: bytes

    def to_json(self) -> dict[str, Any]:
        return {"v": self.version, "report_id": self.report_id, "ct": _b64url_encode(self.ciphertext)}

    def to_text(self) -> str:
        """The wire form as JSON text (``json.dumps(self.to_json(), separators=(",", ":"))``), encoded once."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: object, *, max_bytes: int = 64 * 1024) -> ShuffledEnvelope:
        """Parse strictly; ``InvalidReport`` naming the field."""
        if not isinstance(obj, dict) or set(obj) != _ENVELOPE_KEYS:
            got = sorted(str(k)[:40] for k in obj) if isinstance(obj, dict) else show(obj)
            raise InvalidReport(
                f"a shuffled envelope must be an object with exactly the keys 'ct', 'report_id', 'v', got {got}"
            )
        if obj["v"] != FORMAT_VERSION or isinstance(obj["v"], bool):
            raise InvalidReport(f"envelope 'v' must be {FORMAT_VERSION} for a shuffled campaign, got {show(obj['v'])}")
        rid = obj["report_id"]
        check_report_id(rid, InvalidReport)
        ct = obj["ct"]
        if not isinstance(ct, str) or len(ct) > (max_bytes * 4 + 2) // 3:
            raise InvalidReport(f"envelope 'ct' must be a base64url string of at most {max_bytes} bytes")
        raw = _b64url_decode(ct)
        if raw is None or len(raw) < ENC_BYTES + TAG_BYTES:
            raise InvalidReport("envelope 'ct' must be base64url without padding holding an HPKE ciphertext")
        return cls(FORMAT_VERSION, rid, raw)


@dataclass(frozen=True)
class OuterPayload:
    """The shuffler's view of one report: the dedup token, the opaque inner ciphertext, the admission token."""

    dedup: str
    inner: bytes
    token: str | None


def seal_shuffled(
    inner_payload: Mapping[str, Any],
    *,
    campaign_id: str,
    aggregator_key: bytes,
    padded_length: int,
    shuffler_key: bytes,
    device_secret: bytes,
    report_id: str | None = None,
    token: str | None = None,
) -> ShuffledEnvelope:
    """Seal ``inner_payload`` to the aggregator, then that with the dedup (and admission) token to the shuffler."""
    inner = seal_inner(inner_payload, campaign_id=campaign_id, public_key=aggregator_key, padded_length=padded_length)
    outer: dict[str, Any] = {"campaign_id": campaign_id, "dedup": dedup_token(device_secret, campaign_id),
                             "inner": _b64url_encode(inner)}  # fmt: skip
    if token is not None:
        outer["token"] = token
    rid = new_report_id() if report_id is None else report_id
    try:
        ct = HPKE_SUITE.encrypt(canonical_json(outer), _load_public(shuffler_key), info=outer_info(campaign_id, rid))
    except ValueError as exc:
        raise InvalidParameter("cannot encrypt to the shuffler's public key (a small-order X25519 point)") from exc
    return ShuffledEnvelope(FORMAT_VERSION, rid, ct)


def open_outer(
    envelope: ShuffledEnvelope, *, campaign_id: str, private_key: Any, inner_bytes: int, with_token: bool
) -> OuterPayload:
    """Decrypt the outer layer with the shuffler's key and check it; ``InvalidReport`` on any problem."""
    try:
        plaintext = HPKE_SUITE.decrypt(envelope.ciphertext, _load_private(private_key),
                                   info=outer_info(campaign_id, envelope.report_id))  # fmt: skip
    except Exception as exc:
        raise InvalidReport(
            f"the envelope does not decrypt for campaign '{campaign_id}' with this report id under this shuffler's "
            "key; it was sealed for another shuffler, campaign or report id, or altered (fetch the campaign's "
            "descriptor and seal again)"
        ) from exc
    obj = parse_json_object(plaintext, what="the decrypted outer payload")
    keys = {"campaign_id", "dedup", "inner"} | ({"token"} if with_token else set())
    if set(obj) != keys:
        raise InvalidReport(
            f"the outer payload must have exactly the keys {sorted(keys)}, got {sorted(map(str, obj))[:6]}"
        )
    if obj["campaign_id"] != campaign_id:
        raise InvalidReport(f"the outer payload names another campaign than '{campaign_id}'")
    dedup = obj["dedup"]
    if not isinstance(dedup, str) or PSEUDONYM_RE.fullmatch(dedup) is None:
        raise InvalidReport("the outer payload's 'dedup' must be 64 lowercase hex digits")
    inner = _b64url_decode(obj["inner"])
    if inner is None or len(inner) != inner_bytes:
        raise InvalidReport(
            f"the outer payload's 'inner' must be base64url of {inner_bytes} bytes (the campaign's inner length)"
        )
    token = obj.get("token")
    if with_token and not isinstance(token, str):
        raise InvalidReport("the outer payload's 'token' must be a base64url string (an admission token)")
    return OuterPayload(dedup, inner, token)


# ------------------------------------------------------------------------------------------- batches


def batch_message(campaign_id: str, batch_id: str, reports: Sequence[bytes]) -> bytes:
    """What the shuffler signs: ``"deniable/shuffled-batch/v1" || 0x00 || I2OSP(len(cid), 1) || cid ||
    batch_id (16 raw bytes) || I2OSP(n, 4) || SHA-256(ct_1 || ... || ct_n)`` (every ct of a campaign has the
    same length, so the concatenation is unambiguous)."""
    if not isinstance(batch_id, str) or REPORT_ID_RE.fullmatch(batch_id) is None:
        raise InvalidParameter(f"'batch_id' must be 32 lowercase hex digits, got {show(batch_id)}")
    digest = hashlib.sha256()
    for ct in reports:
        digest.update(ct)
    return (BATCH_SIGNATURE_LABEL + b"\x00" + _campaign_bytes(campaign_id) + bytes.fromhex(batch_id)
            + len(reports).to_bytes(4, "big") + digest.digest())  # fmt: skip


def sign_batch(
    signing_key: Ed25519PrivateKey, campaign_id: str, batch_id: str, reports: Sequence[bytes]
) -> dict[str, Any]:
    """The body of ``POST /api/v1/campaigns/<id>/batches``: the batch, signed."""
    signature = signing_key.sign(batch_message(campaign_id, batch_id, reports))
    return {"batch_id": batch_id, "reports": [_b64url_encode(ct) for ct in reports], "sig": _b64url_encode(signature)}


#: Bytes a batch body spends besides its reports (the batch id, the signature, the keys and brackets: about
#: 150), with room to spare.
_BATCH_OVERHEAD_BYTES = 512


def _batch_report_bytes(padded_length: int) -> int:
    """At least the bytes of one report in a batch body: its inner ciphertext in base64 (rounded up to whole
    padded groups), quoted, and a comma."""
    return 4 * -(-ciphertext_bytes(padded_length) // 3) + 3


def batch_body_bytes(padded_length: int, reports: int) -> int:
    """At most the bytes of a :func:`sign_batch` body of ``reports`` inner ciphertexts of a campaign whose
    payloads are padded to ``padded_length``."""
    return reports * _batch_report_bytes(padded_length) + _BATCH_OVERHEAD_BYTES


def batch_capacity(padded_length: int, max_body: int) -> int:
    """The most reports of one batch whose body fits ``max_body`` bytes (the aggregator's body limit):
    the largest n with ``batch_body_bytes(padded_length, n) <= max_body``."""
    return (max_body - _BATCH_OVERHEAD_BYTES) // _batch_report_bytes(padded_length)


@dataclass(frozen=True)
class ShuffledBatch:
    """A parsed batch body (signature not yet checked: :func:`verify_batch`)."""

    batch_id: str
    reports: tuple[bytes, ...]
    signature: bytes

    @classmethod
    def from_json(cls, obj: object, *, inner_bytes: int) -> ShuffledBatch:
        """Parse strictly; ``InvalidReport`` (a 400) naming the problem."""
        keys = {"batch_id", "reports", "sig"}
        if not isinstance(obj, dict) or set(obj) != keys:
            raise InvalidReport(
                'a batch must be a JSON object {"batch_id": <32 hex>, "reports": [<base64url>, ...], '
                '"sig": <base64url>}'
            )
        batch_id, items, sig = obj["batch_id"], obj["reports"], _b64url_decode(obj["sig"])
        if not isinstance(batch_id, str) or REPORT_ID_RE.fullmatch(batch_id) is None:
            raise InvalidReport("'batch_id' must be 32 lowercase hex digits")
        if sig is None or len(sig) != 64:
            raise InvalidReport("'sig' must be a 64-byte Ed25519 signature in base64url (86 characters)")
        if not isinstance(items, list):
            raise InvalidReport("'reports' must be a list of base64url inner ciphertexts")
        reports = []
        for i, item in enumerate(items):
            raw = _b64url_decode(item)
            if raw is None or len(raw) != inner_bytes:
                raise InvalidReport(f"'reports[{i}]' must be base64url of {inner_bytes} bytes (one inner ciphertext)")
            reports.append(raw)
        return cls(batch_id, tuple(reports), sig)


def verify_batch(verify_key: bytes, campaign_id: str, batch: ShuffledBatch) -> bool:
    """Whether the batch's signature verifies under the shuffler's registered Ed25519 key."""
    try:
        Ed25519PublicKey.from_public_bytes(verify_key).verify(
            batch.signature, batch_message(campaign_id, batch.batch_id, batch.reports)
        )
    except (InvalidSignature, ValueError):
        return False
    return True


def shuffle(items: MutableSequence[T], randbelow: RandBelow = secrets.randbelow) -> None:
    """Permute ``items`` in place uniformly at random: Fisher–Yates (Durstenfeld), for i = n−1 … 1 swap item i
    with item ``randbelow(i + 1)``. Each of the n! orders has probability exactly 1/n!, since ``randbelow``
    is exactly uniform; the draws depend on n only, never on the items."""
    for i in range(len(items) - 1, 0, -1):
        j = randbelow(i + 1)
        items[i], items[j] = items[j], items[i]
