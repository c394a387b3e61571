"""The shuffler's two key pairs, generated on first start into ``<data dir>/keys`` (mode 0600).

* ``shuffler-hpke.key``: the raw 32-byte X25519 private key devices seal the outer layer to;
* ``shuffler-sign.key``: the raw 32-byte Ed25519 seed that signs every forwarded batch.

The public halves (``GET /api/v1/shuffler``) are what the aggregator's admin registers in a shuffled
campaign's ``shuffler`` object. Losing a file makes every pending report unreadable (HPKE) or every campaign
refuse the shuffler's batches (signing key): back the data dir up as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from deniable.aggregator.secret_files import read_secret, write_secret
from deniable.shared.keys import encode_key, generate_keypair, public_key_of

__all__ = ["ShufflerKeys"]


@dataclass(frozen=True)
class ShufflerKeys:
    """The shuffler's HPKE private key (raw), its public key, and its batch-signing key."""

    hpke_private: bytes
    hpke_public: bytes
    signing_key: Ed25519PrivateKey

    @property
    def public_key(self) -> str:
        """The X25519 public key, base64url (the descriptor's ``shuffler.public_key``)."""
        return encode_key(self.hpke_public)

    @property
    def verify_key(self) -> str:
        """The Ed25519 public key, base64url (the descriptor's ``shuffler.verify_key``)."""
        return encode_key(self.signing_key.public_key().public_bytes_raw())

    @classmethod
    def load_or_create(cls, data_dir: Path) -> ShufflerKeys:
        """Read the keys of ``data_dir``, generating the missing ones (exclusive create: two workers starting
        at once end with the same keys)."""
        base = Path(data_dir) / "keys"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        hpke_path, sign_path = base / "shuffler-hpke.key", base / "shuffler-sign.key"
        if not hpke_path.exists():
            write_secret(hpke_path, generate_keypair()[0], exclusive=True)
        if not sign_path.exists():
            write_secret(sign_path, Ed25519PrivateKey.generate().private_bytes_raw(), exclusive=True)
        private = read_secret(hpke_path)
        seed = read_secret(sign_path)
        if len(private) != 32 or len(seed) != 32:
            raise ValueError(
                f"the shuffler's key files in {base} are damaged (not 32 bytes); restore them from a backup"
            )
        return cls(private, public_key_of(private), Ed25519PrivateKey.from_private_bytes(seed))
