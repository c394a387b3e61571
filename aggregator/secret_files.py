"""Secret files in the data dir: bearer tokens, campaign and issuer private keys, always mode 0600.

A secret is written by the device client's one atomic writer,
:func:`deniable.client.secret_file.write_secret_file`: a temporary file created with mode 0600 (never
world-readable, not even for an instant), fsynced, renamed into place, then the directory fsynced, so that a
crash leaves either the old file or the new one and a written key survives a power cut (the campaign is
acknowledged only after its key file is durable). Token files are created once with ``O_EXCL`` semantics:
when several workers start together, the first one's token wins and the others read it.
"""

from __future__ import annotations

import math
import secrets
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from deniable.client.secret_file import write_secret_file
from deniable.shared.limits import GENERATED_TOKEN_BYTES, MIN_TOKEN_BITS, MIN_TOKEN_OBSERVED_BITS

__all__ = [
    "GENERATE_HINT",
    "Tokens",
    "ensure_tokens",
    "issuer_key_path",
    "key_path",
    "read_secret",
    "token_bits",
    "token_paths",
    "weak_token_reason",
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


#: How to make a good token, quoted by every refusal of a weak one.
GENERATE_HINT = "generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"

#: The usual token alphabets, smallest first: a token is rated by the smallest one holding all its characters.
_ALPHABETS: tuple[frozenset[str], ...] = tuple(
    frozenset(chars)
    for chars in (
        string.digits,
        "0123456789abcdef",
        "0123456789ABCDEF",
        string.ascii_lowercase,
        string.ascii_uppercase,
        string.ascii_lowercase + string.digits,
        string.ascii_uppercase + string.digits,
        string.ascii_letters + string.digits,
        string.ascii_letters + string.digits + "-_",
        string.ascii_letters + string.digits + "+/=",
        "".join(chr(c) for c in range(0x21, 0x7F)),
    )
)


def token_bits(token: str) -> tuple[float, float]:
    """Two entropy figures of a token, in bits: ``(alphabet bound, observed)``.

    The alphabet bound is ``len · log2 |A|`` for the smallest usual alphabet ``A`` holding every character
    (digits, hex, letters, base64url, printable ASCII): an upper bound, reached by a uniformly random token.
    The observed figure is ``len · H`` with ``H = −Σ f·log2 f`` over the token's own character frequencies:
    it is low for long tokens of few symbols (``aaaa…``, ``abab…``) that the bound overrates.
    Neither can prove a token random (``password-password-2024`` rates well enough on both), which is why
    generated tokens are the advice.
    """
    if not token:
        return 0.0, 0.0
    chars = set(token)
    size = next((len(a) for a in _ALPHABETS if chars <= a), 0)
    bound = len(token) * math.log2(size) if size else 0.0
    counts = Counter(token)
    observed = -sum(n * math.log2(n / len(token)) for n in counts.values())
    return bound, observed


def weak_token_reason(token: str) -> str | None:
    """Why ``token`` is too weak to guard the aggregator (at least 128 bits), or None when it is strong enough."""
    if any(not 0x21 <= ord(c) < 0x7F for c in token):
        return "must be printable ASCII without spaces (it travels in an HTTP header)"
    bound, observed = token_bits(token)
    if bound < MIN_TOKEN_BITS:
        return (
            f"has at most {bound:.0f} bits of entropy ({len(token)} characters); at least {MIN_TOKEN_BITS} are needed"
        )
    if observed < MIN_TOKEN_OBSERVED_BITS:
        return (
            f"repeats too few characters ({len(set(token))} distinct in {len(token)}: "
            f"{observed + 0.0:.0f} bits observed, at least {MIN_TOKEN_OBSERVED_BITS} needed)"
        )
    return None


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
            if write_secret(path, secrets.token_urlsafe(GENERATED_TOKEN_BYTES).encode(), exclusive=True):
                generated.append(path)
            token = read_secret(path).decode().strip()
        values[role] = token
    if len(set(values.values())) < len(values):
        raise ValueError("the admin, analyst and issuer tokens must all differ; set different tokens")
    return Tokens(values["admin"], values["analyst"], values["issuer"], tuple(generated))
