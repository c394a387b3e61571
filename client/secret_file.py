"""The one atomic, durable writer of secret files (device secret, campaign keys, tokens), mode 0600.

Used by the device client (its secret) and by the aggregator (campaign private keys and bearer tokens,
through ``deniable.aggregator.secret_files``): ``shared/`` does no I/O and the client never imports the
aggregator, so the writer lives here, standard library only.

The guarantee, step by step:

1. the data goes to a temporary file in the same directory, created ``O_EXCL`` with mode 0600 (never
   readable by others, not even for an instant), written completely and ``fsync``-ed;
2. it is renamed into place (``os.replace``), or for ``exclusive=True`` hard-linked (``os.link``, which
   fails if the name exists: the first of several concurrent writers wins and the others keep theirs);
3. the **directory** is ``fsync``-ed, so the new name survives a power cut (a rename is a change to the
   directory; without this a file whose data was synced may still vanish on reboot, ext4 and XFS alike).

So when :func:`write_secret_file` returns, either the old content or the new one is on disk under
``path``, never a truncated file, and the new one survives a power cut. A crash before step 3 may leave
the old file (or none); a crash can never leave a partial file under ``path``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["DIR_MODE", "SECRET_MODE", "write_secret_file", "write_secret_stream"]

SECRET_MODE = 0o600
DIR_MODE = 0o700


def fsync_directory(path: Path) -> None:
    """Flush a directory's entries (names created, renamed or removed in it) to stable storage."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_secret_file(path: Path, data: bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` to ``path`` (mode 0600) atomically and durably; see the module docstring.

    The parent directory is created with mode 0700 if missing. With ``exclusive=True`` an existing file
    is left untouched and False is returned; otherwise the file is replaced and True returned. Raises
    ``OSError`` (the caller turns it into an error of its own layer).
    """
    return write_secret_stream(path, lambda handle: handle.write(data), exclusive=exclusive)


def write_secret_stream(path: Path, write: Callable[[BinaryIO], object], *, exclusive: bool = False) -> bool:
    """:func:`write_secret_file` for content too large to hold in memory: ``write(handle)`` writes it to the
    temporary file. If ``write`` raises, nothing is put in place and the exception propagates."""
    path = Path(path)
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
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
    fsync_directory(path.parent)
    return True
