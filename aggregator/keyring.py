"""Campaign HPKE key pairs: one X25519 pair per campaign, the private half in a 0600 file that checks itself.

The private key is written to ``<data dir>/keys/<campaign id>.key`` when the campaign is created, durably
(file and directory fsynced, :func:`deniable.client.secret_file.write_secret_file`) before the campaign
row is committed, and read back when a report batch arrives. It is never returned by the API, never logged
and never stored in the database; only the public key goes into the campaign's descriptor.

Key file format (``deniable-campaign-key/1``, UTF-8 JSON, one object)::

    {"format": "deniable-campaign-key/1", "campaign_id": "<id>",
     "public_key": "<base64url, 43 chars>", "private_key": "<base64url, 43 chars>"}

It carries what is needed to check it: the campaign it belongs to and its public key. A key is
**usable** only if the file parses, names its campaign, its private key derives its public key, and that
public key is the one in the campaign's descriptor. Files written before this format (the raw 32 private
bytes) are still read and checked against the descriptor. A missing, truncated, replaced, swapped or
damaged file raises :class:`~deniable.shared.errors.CampaignKeyUnavailable`: the aggregator answers that
campaign's reports with 503 ``campaign_key_unavailable`` (retryable: devices keep their reports) and logs an
ERROR naming the campaign and the file, instead of rejecting every report as undecryptable. The check runs
for every campaign when a worker starts and whenever a key file is (re)loaded; a file that changes on disk
is loaded, and checked, again.

Over PostgreSQL (several instances, no shared disk) the same bytes are kept in the database instead,
sealed under the key-encryption key of the configuration (:mod:`deniable.aggregator.sealed_keys`): a
:class:`Keyring` given ``sealed_in=store`` and ``kek`` reads and writes those rows, runs the same checks
after unsealing, and caches a checked key for the life of the process (a campaign's key never changes).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deniable.aggregator.sealed_keys import keep_key, load_sealed
from deniable.aggregator.secret_files import key_path, read_secret
from deniable.shared.errors import CampaignKeyUnavailable, DeniableError
from deniable.shared.keys import decode_key, encode_key, generate_keypair, public_key_of

if TYPE_CHECKING:
    from deniable.aggregator.store import Store

__all__ = ["KEY_FILE_FORMAT", "KeyProblem", "Keyring", "encode_key_file", "load_private_key"]

log = logging.getLogger("deniable.aggregator")

KEY_FILE_FORMAT = "deniable-campaign-key/1"
_LEGACY_KEY_BYTES = 32
#: ``campaign_keys.kind`` of a campaign's HPKE key.
HPKE_KIND = "hpke"


@dataclass(frozen=True)
class KeyProblem:
    """Why a campaign's key file (or sealed key, ``path`` None) is unusable, for the log and ``deniable verify``."""

    campaign_id: str
    path: Path | None
    reason: str

    def __str__(self) -> str:
        where = "sealed key in the database" if self.path is None else f"key file {self.path}"
        return f"campaign {self.campaign_id!r}: {where}: {self.reason}"


def encode_key_file(campaign_id: str, private_key: bytes) -> bytes:
    """The bytes of a key file (format ``deniable-campaign-key/1``) for ``private_key``."""
    body = {
        "format": KEY_FILE_FORMAT,
        "campaign_id": campaign_id,
        "public_key": encode_key(public_key_of(private_key)),
        "private_key": encode_key(private_key),
    }
    return (json.dumps(body, separators=(",", ":")) + "\n").encode("ascii")


def _decode_key_file(campaign_id: str, data: bytes) -> tuple[bytes, str | None]:
    """``(private key, reason)``: the key if the file is self-consistent, else a reason (never raises)."""
    if len(data) == _LEGACY_KEY_BYTES and not data.startswith(b"{"):
        return data, None  # the raw 32 bytes of files written before the self-checking format
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return b"", f"is not a key file ({len(data)} bytes, neither JSON nor the 32 raw bytes of an old one)"
    if not isinstance(body, dict) or body.get("format") != KEY_FILE_FORMAT:
        return b"", f"is not a {KEY_FILE_FORMAT} file"
    if body.get("campaign_id") != campaign_id:
        return b"", f"holds the key of campaign {str(body.get('campaign_id'))[:64]!r}, not of this one"
    try:
        private = decode_key(str(body.get("private_key")), name="private_key")
        public = decode_key(str(body.get("public_key")), name="public_key")
        derived = public_key_of(private)
    except DeniableError:  # its message would quote the (damaged) key text: not for a log
        return b"", "is damaged: 'private_key' or 'public_key' is not a 32-byte key in base64url"
    if derived != public:
        return b"", "is damaged: its private key does not belong to the public key it records"
    return private, None


def load_private_key(
    data_dir: Path, campaign_id: str, *, sealed_in: Store | None = None, kek: bytes | None = None
) -> bytes:
    """The private key in a campaign's key file (or, with ``sealed_in`` and ``kek``, unsealed from that
    store's database), checked for self-consistency only (for tools and tests that have no descriptor at
    hand); raises ``CampaignKeyUnavailable`` naming the problem."""
    path: Path | None = None
    if sealed_in is not None:
        if kek is None:
            raise ValueError("keys sealed in the database need the key-encryption key")
        data, reason = load_sealed(sealed_in, kek, campaign_id, HPKE_KIND)
    else:
        path = key_path(data_dir, campaign_id)
        try:
            data, reason = read_secret(path), None
        except OSError as exc:
            raise CampaignKeyUnavailable(f"campaign {campaign_id!r}: key file {path} cannot be read: {exc}") from exc
    private, reason = _decode_key_file(campaign_id, data) if reason is None else (b"", reason)
    if reason is not None:
        raise CampaignKeyUnavailable(str(KeyProblem(campaign_id, path, reason)))
    return private


def check_key_file(campaign_id: str, path: Path, descriptor_key: bytes) -> tuple[bytes, KeyProblem | None]:
    """Read and check one campaign's key file against the descriptor's public key (never raises)."""
    try:
        data = read_secret(path)
    except FileNotFoundError:
        return b"", KeyProblem(campaign_id, path, "is missing")
    except OSError as exc:
        return b"", KeyProblem(campaign_id, path, f"cannot be read ({exc.strerror or type(exc).__name__})")
    return _check_decoded(campaign_id, path, data, descriptor_key)


def _check_decoded(
    campaign_id: str, path: Path | None, data: bytes, descriptor_key: bytes
) -> tuple[bytes, KeyProblem | None]:
    """The checks every key passes, whether read from a file or unsealed from the database."""
    private, reason = _decode_key_file(campaign_id, data)
    if reason is None:
        try:
            matches = public_key_of(private) == descriptor_key
        except DeniableError:
            matches = False
        if not matches:
            reason = "does not match the public key in the campaign's descriptor (wrong or damaged key)"
    return (b"", KeyProblem(campaign_id, path, reason)) if reason else (private, None)


class Keyring:
    """The private keys of the campaigns in one data dir (or, with ``sealed_in``, sealed in that store's
    database under ``kek``), checked and cached in memory per process."""

    def __init__(self, data_dir: Path, *, sealed_in: Store | None = None, kek: bytes | None = None) -> None:
        if sealed_in is not None and kek is None:
            raise ValueError("keys sealed in the database need the key-encryption key")
        self.data_dir = Path(data_dir)
        self.store = sealed_in
        self.kek = kek
        self._cache: dict[str, tuple[tuple[int, int, int], bytes, bytes]] = {}
        self._lock = threading.Lock()

    @property
    def sealed(self) -> bool:
        """Whether the keys live in the database (sealed) rather than in key files."""
        return self.store is not None

    def _check_sealed(self, campaign_id: str, descriptor_key: bytes) -> tuple[bytes, KeyProblem | None]:
        assert self.store is not None and self.kek is not None
        data, reason = load_sealed(self.store, self.kek, campaign_id, HPKE_KIND)
        if reason is not None:
            return b"", KeyProblem(campaign_id, None, reason)
        return _check_decoded(campaign_id, None, data, descriptor_key)

    def _check(self, campaign_id: str, descriptor_key: bytes) -> tuple[bytes, KeyProblem | None]:
        if self.sealed:
            return self._check_sealed(campaign_id, descriptor_key)
        return check_key_file(campaign_id, self.path(campaign_id), descriptor_key)

    @staticmethod
    def new_keypair() -> tuple[bytes, bytes]:
        """A fresh raw ``(private, public)`` X25519 pair from the OS CSPRNG (not yet stored)."""
        return generate_keypair()

    def path(self, campaign_id: str) -> Path:
        """Where the key file of ``campaign_id`` lives."""
        return key_path(self.data_dir, campaign_id)

    def save(self, campaign_id: str, private_key: bytes, *, conn: Any = None) -> None:
        """Store the private key of ``campaign_id`` (mode 0600, atomic; file and directory fsynced).

        Overwrites a leftover key file of a campaign that was never committed: the caller holds the
        database write lock and has checked that no campaign has this id. Sealed in the database, the row
        is written in the caller's transaction ``conn`` (the one that inserts the campaign).
        """
        data = encode_key_file(campaign_id, private_key)
        keep_key(self.store, self.kek, conn, campaign_id, HPKE_KIND, self.path(campaign_id), data)
        with self._lock:
            self._cache.pop(campaign_id, None)

    def private_key(self, campaign_id: str, public_key: bytes) -> bytes:
        """The raw private key of ``campaign_id``, checked against the descriptor's ``public_key``.

        Raises ``CampaignKeyUnavailable`` (and logs an ERROR naming the campaign and the file) if the key
        file is missing or unusable. The checked key is cached until the file changes on disk.
        """
        path = self.path(campaign_id)
        try:
            st = os.stat(path) if not self.sealed else None
            stamp = (0, 0, 0) if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (0, 0, -1)
        cached = self._cache.get(campaign_id)
        if cached is not None and cached[0] == stamp and cached[2] == public_key:
            return cached[1]
        private, problem = self._check(campaign_id, public_key)
        if problem is not None:
            log.error("campaign key unavailable: %s; the campaign answers 503 until it is restored", problem)
            raise CampaignKeyUnavailable(
                f"campaign {campaign_id!r} cannot take reports right now: its key is unavailable on the "
                "aggregator (the operator has been alerted); keep the reports and retry later"
            )
        with self._lock:
            self._cache[campaign_id] = (stamp, private, public_key)
        return private

    def problem(self, campaign_id: str, public_key: bytes) -> KeyProblem | None:
        """What is wrong with the key file of ``campaign_id``, or None if it is usable (never logs)."""
        return self._check(campaign_id, public_key)[1]

    def check(self, campaigns: dict[str, bytes]) -> list[KeyProblem]:
        """Check every campaign's key file against its descriptor key (``{id: public key}``); log each
        problem as an ERROR and return them all (empty when every key is usable)."""
        problems = []
        for campaign_id, public_key in campaigns.items():
            _, problem = self._check(campaign_id, public_key)
            if problem is not None:
                log.error("campaign key unavailable: %s; the campaign answers 503 until it is restored", problem)
                problems.append(problem)
        return problems
