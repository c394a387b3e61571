"""Secret files in the data dir: bearer tokens, campaign and issuer private keys, always mode 0600.

A secret is written by the device client's one atomic writer,
:func:`deniable.client.secret_file.write_secret_file`: a temporary file created with mode 0600 (never
world-readable, not even for an instant), fsynced, renamed into place, then the directory fsynced, so that a
crash leaves either the old file or the new one and a written key survives a power cut (the campaign is
acknowledged only after its key file is durable). Token files are created once with ``O_EXCL`` semantics:
when several workers start together, the first one's token wins and the others read it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from deniable.client.secret_file import write_secret_file

__all__ = [
    "Tokens",
    "ensure_tokens",
    "issuer_key_path",
    "key_path",
    "read_secret",
    "token_paths",
    "write_secret",
]



@dataclass(frozen=True, slots=True)
class Tokens:
    """The three bearer tokens of a server, and which of them were generated into files by this call.

    ``issuer`` may only call the admission-token issuing route (the app's backend holds it).
    """

    admin: str
    analyst: str
    issuer: str
    generated: tuple[Path, ...] = ()


def write_secret(path: Path, data: bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` to ``path`` with mode 0600 atomically and durably (file and directory fsynced);
    return False if ``exclusive`` and it exists."""
    return write_secret_file(path, data, exclusive=exclusive)


def read_secret(path: Path) -> bytes:
    """The content of a secret file (raises ``FileNotFoundError`` when missing)."""
    return path.read_bytes()


def token_paths(data_dir: Path) -> dict[str, Path]:
    """Where the generated tokens live: ``{"admin": ..., "analyst": ..., "issuer": ...}``."""
    base = Path(data_dir) / "tokens"
    return {role: base / f"{role}.token" for role in ("admin", "analyst", "issuer")}


def key_path(data_dir: Path, campaign_id: str) -> Path:
    """The private-key file of a campaign (the id is a validated slug, safe as a file name)."""
    return Path(data_dir) / "keys" / f"{campaign_id}.key"


def issuer_key_path(data_dir: Path, campaign_id: str) -> Path:
    """The admission-token issuer key of a campaign (RSA, PKCS#8 PEM), next to its HPKE key."""
    return Path(data_dir) / "keys" / f"{campaign_id}.issuer.pem"


def ensure_tokens(
    data_dir: Path, *, admin: str | None = None, analyst: str | None = None, issuer: str | None = None
) -> Tokens:
    """The admin, analyst and issuer tokens: the given ones, else those stored in the data dir, else new ones.

    New tokens are ``secrets.token_urlsafe(32)`` (256 bits), written to ``tokens/<role>.token`` with mode
    0600. The caller prints the file location, never the token.
    """
    given = {"admin": admin, "analyst": analyst, "issuer": issuer}
    values: dict[str, str] = {}
    generated: list[Path] = []
    for role, path in token_paths(data_dir).items():
        token = given[role]
        if not token:
            if write_secret(path, secrets.token_urlsafe(32).encode(), exclusive=True):
                generated.append(path)
            token = read_secret(path).decode().strip()
        values[role] = token
    if len(set(values.values())) < len(values):
        raise ValueError("the admin, analyst and issuer tokens must all differ; set different tokens")
    return Tokens(values["admin"], values["analyst"], values["issuer"], tuple(generated))
