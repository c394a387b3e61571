"""Campaign HPKE key pairs: one X25519 pair per campaign, the private half in a 0600 file.

The private key is written to ``<data dir>/keys/<campaign id>.key`` (raw 32 bytes) when the campaign is
created and is read back, once per process, when a report batch arrives. It is never returned by the API,
never logged and never stored in the database; only the public key goes into the campaign's descriptor.
"""

from __future__ import annotations

import threading
from pathlib import Path

from deniable.aggregator.secret_files import key_path, read_secret, write_secret
from deniable.shared.envelope import generate_keypair, public_key_of

__all__ = ["Keyring"]


class Keyring:
    """The private keys of the campaigns in one data dir, cached in memory per process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._cache: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @staticmethod
    def new_keypair() -> tuple[bytes, bytes]:
        """A fresh raw ``(private, public)`` X25519 pair from the OS CSPRNG (not yet stored)."""
        return generate_keypair()

    def save(self, campaign_id: str, private_key: bytes) -> None:
        """Store the private key of ``campaign_id`` (mode 0600, atomic, fsynced).

        Overwrites a leftover key file of a campaign that was never committed: the caller holds the
        database write lock and has checked that no campaign has this id.
        """
        write_secret(key_path(self.data_dir, campaign_id), private_key)
        with self._lock:
            self._cache.pop(campaign_id, None)

    def private_key(self, campaign_id: str) -> bytes:
        """The raw private key of ``campaign_id`` (raises ``FileNotFoundError`` if it has none)."""
        key = self._cache.get(campaign_id)
        if key is None:
            key = read_secret(key_path(self.data_dir, campaign_id))
            with self._lock:
                self._cache[campaign_id] = key
        return key

    def public_key(self, campaign_id: str) -> bytes:
        """The raw public key matching the stored private key."""
        return public_key_of(self.private_key(campaign_id))
