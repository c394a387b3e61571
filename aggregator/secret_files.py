"""Secret files in the data dir: bearer tokens and campaign private keys, always mode 0600.

A secret is written to a temporary file created with mode 0600 (never world-readable, not even for an
instant), fsynced, then renamed into place, so that a crash leaves either the old file or the new one.
Token files are created once with ``O_EXCL`` semantics: when several workers start together, the first
one's token wins and the others read it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Tokens",
    "ensure_tokens",
    "key_path",
    "read_secret",
    "token_paths",
    "write_secret",
]

SECRET_MODE = 0o600
_DIR_MODE = 0o700


@dataclass(frozen=True, slots=True)
class Tokens:
    """The two bearer tokens of a server, and which of them were generated into files by this call."""

    admin: str
    analyst: str
    generated: tuple[Path, ...] = ()


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    return path


def write_secret(path: Path, data: bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` to ``path`` with mode 0600 atomically; return False if ``exclusive`` and it exists."""
    _private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            try:
                os.link(tmp, path)  # atomic create-if-absent
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def read_secret(path: Path) -> bytes:
    """The content of a secret file (raises ``FileNotFoundError`` when missing)."""
    return path.read_bytes()


def token_paths(data_dir: Path) -> dict[str, Path]:
    """Where the generated tokens live: ``{"admin": ..., "analyst": ...}``."""
    base = Path(data_dir) / "tokens"
    return {"admin": base / "admin.token", "analyst": base / "analyst.token"}


def key_path(data_dir: Path, campaign_id: str) -> Path:
    """The private-key file of a campaign (the id is a validated slug, safe as a file name)."""
    return Path(data_dir) / "keys" / f"{campaign_id}.key"


def ensure_tokens(data_dir: Path, *, admin: str | None = None, analyst: str | None = None) -> Tokens:
    """The admin and analyst tokens: the given ones, else those stored in the data dir, else new ones.

    New tokens are ``secrets.token_urlsafe(32)`` (256 bits), written to ``tokens/<role>.token`` with mode
    0600. The caller prints the file location, never the token.
    """
    given = {"admin": admin, "analyst": analyst}
    values: dict[str, str] = {}
    generated: list[Path] = []
    for role, path in token_paths(data_dir).items():
        token = given[role]
        if not token:
            if write_secret(path, secrets.token_urlsafe(32).encode(), exclusive=True):
                generated.append(path)
            token = read_secret(path).decode().strip()
        values[role] = token
    if values["admin"] == values["analyst"]:
        raise ValueError("the admin and analyst tokens must differ; set two different tokens")
    return Tokens(values["admin"], values["analyst"], tuple(generated))
