"""``deniable backup`` and ``deniable restore``: a consistent online snapshot of a data dir, in one 0600 file.

A copy of ``deniable.sqlite3`` is not a backup: in WAL mode committed transactions live in
``deniable.sqlite3-wal`` until a checkpoint, so the main file alone can miss acknowledged reports (after a
SIGKILL it held 11,300 of 11,700), and a file copied while a writer runs can be torn. :func:`backup_data_dir`
instead

1. snapshots the database with **SQLite's online backup API** (``sqlite3.Connection.backup``, all pages in
   one step, so one read transaction: the copy is the database as of one instant, with every transaction
   committed before it, WAL included, while the server keeps accepting reports);
2. checks the copy (``PRAGMA integrity_check``) and the key of every campaign in it against the
   campaign's public key (a key file is made durable before its campaign row is committed, and never
   changes afterwards, so every campaign of the snapshot has its key on disk when step 3 reads it);
3. writes one tar archive ``FILE`` holding ``manifest.json`` (format, time, schema version, campaigns,
   SHA-256 of every member), ``deniable.sqlite3``, ``keys/*.key`` (and the admission-token issuer keys
   ``keys/*.issuer.pem`` of campaigns that have one) and ``tokens/*.token``. It is created
   with mode 0600 (it holds every secret of the data dir), fsynced, renamed into place and its directory
   fsynced.

:func:`restore_data_dir` unpacks such a file into a data dir that holds no database yet, checking every
member's SHA-256 and accepting only the members a backup has (no paths outside the data dir), with the
same modes (dirs 0700, files 0600) and the same durable writes. Then ``deniable verify`` recounts every
tally and checks every key. Guarantee: a restored data dir serves every report acknowledged before the
backup started; reports acknowledged while it ran may or may not be in it (devices that sent them keep no
copy, so take backups often enough for your tolerance, and keep the device outboxes' retention in mind).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import io
import json
import os
import sqlite3
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from deniable.aggregator.store import DATABASE_NAME
from deniable.client.secret_file import DIR_MODE, SECRET_MODE, write_secret_file, write_secret_stream
from deniable.shared.errors import BackupError
from deniable.shared.fields import plural
from deniable.shared.limits import DATABASE_BUSY_TIMEOUT_MS

__all__ = ["backup_data_dir", "register", "restore_data_dir"]

BACKUP_FORMAT = "deniable-backup/1"
_MANIFEST = "manifest.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class BackupSummary:
    """What a backup holds (or a restore wrote)."""

    path: Path
    campaigns: int
    reports: int
    keys: int
    tokens: int
    key_problems: tuple[str, ...] = ()


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _snapshot(database: Path, target: Path) -> None:
    """Copy ``database`` to ``target`` with SQLite's online backup API, as of one instant."""
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30.0)
    try:
        source.execute(f"PRAGMA busy_timeout = {DATABASE_BUSY_TIMEOUT_MS}")
        dest = sqlite3.connect(target)
        try:
            source.backup(dest, pages=-1)  # one step: one read transaction, one consistent snapshot
            dest.execute("PRAGMA journal_mode = DELETE")  # a self-contained file, no -wal beside it
            check = dest.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                raise BackupError(f"the database snapshot fails SQLite's integrity check: {check}")
        finally:
            dest.close()
    finally:
        source.close()


def _contents(database: Path) -> tuple[dict[str, bytes], int]:
    """``({campaign id: descriptor public key}, number of reports)`` of a database file."""
    from deniable.aggregator.service import config_of
    from deniable.aggregator.store import Store

    store = Store(database)  # migrates an older snapshot to this code's schema, like the server would
    try:
        keys = {record.id: config_of(record).public_key_bytes for record in store.list_campaigns()}
        reports = sum(store.count_reports(campaign_id) for campaign_id in keys)
    finally:
        store.close()
    return keys, reports


def backup_data_dir(data_dir: Path, target: Path) -> BackupSummary:
    """Write a backup of ``data_dir`` (the server may be running) to ``target``; see the module docstring."""
    from deniable.aggregator.keyring import Keyring
    from deniable.aggregator.secret_files import issuer_key_path, key_path, token_paths

    data_dir = Path(data_dir).resolve()
    target = Path(target).resolve()
    database = data_dir / DATABASE_NAME
    if not database.is_file():
        raise BackupError(f"no aggregator database at {database}; pass the data dir with --data-dir")
    if target.is_relative_to(data_dir):
        raise BackupError(f"write the backup outside the data dir it copies ({data_dir}), e.g. --to /backups/...")
    target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".deniable-backup-", dir=target.parent) as tmp_name:
        tmp = Path(tmp_name)
        snapshot = tmp / DATABASE_NAME
        _snapshot(database, snapshot)
        campaigns, reports = _contents(snapshot)
        keyring = Keyring(data_dir)
        problems = tuple(
            str(problem)
            for campaign_id, public in campaigns.items()
            if (problem := keyring.problem(campaign_id, public)) is not None
        )
        members: list[tuple[str, Path]] = [(DATABASE_NAME, snapshot)]
        key_files = [(f"keys/{cid}.key", key_path(data_dir, cid)) for cid in campaigns]
        key_files += [(f"keys/{cid}.issuer.pem", issuer_key_path(data_dir, cid)) for cid in campaigns]
        members += [(name, path) for name, path in key_files if path.is_file()]
        members += [(f"tokens/{p.name}", p) for p in token_paths(data_dir).values() if p.is_file()]
        manifest = {
            "format": BACKUP_FORMAT,
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "campaigns": sorted(campaigns),
            "reports": reports,
            "files": {name: _sha256_file(path) for name, path in members},
        }

        def write(handle: BinaryIO) -> None:
            with tarfile.open(fileobj=handle, mode="w") as archive:
                _add_bytes(archive, _MANIFEST, json.dumps(manifest, indent=1).encode())
                for name, path in members:
                    _add_file(archive, name, path)

        write_secret_stream(target, write)
    keys = sum(name.startswith("keys/") for name, _ in members)
    tokens = sum(name.startswith("tokens/") for name, _ in members)
    return BackupSummary(target, len(campaigns), reports, keys, tokens, problems)


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, SECRET_MODE, int(dt.datetime.now(dt.UTC).timestamp())
    return info


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    archive.addfile(_tarinfo(name, len(data)), io.BytesIO(data))


def _add_file(archive: tarfile.TarFile, name: str, path: Path) -> None:
    with open(path, "rb") as handle:
        archive.addfile(_tarinfo(name, os.fstat(handle.fileno()).st_size), handle)


def _allowed(name: str) -> bool:
    """Only the members a backup writes: no absolute paths, no '..', nothing else."""
    parts = name.split("/")
    if name in (_MANIFEST, DATABASE_NAME):
        return True
    return (
        len(parts) == 2
        and parts[0] in ("keys", "tokens")
        and parts[1].endswith((".key", ".issuer.pem") if parts[0] == "keys" else ".token")
        and not parts[1].startswith(".")
        and "\\" not in parts[1]
    )


def restore_data_dir(source: Path, data_dir: Path) -> BackupSummary:
    """Unpack the backup ``source`` into ``data_dir``, which must hold no database; see the module docstring."""
    data_dir = Path(data_dir).resolve()
    database = data_dir / DATABASE_NAME
    if database.exists() or database.with_name(DATABASE_NAME + "-wal").exists():
        raise BackupError(
            f"{data_dir} already holds a database; restore into a new or empty data dir (and point the "
            "server at it), so that nothing is overwritten"
        )
    try:
        archive = tarfile.open(source, mode="r")  # noqa: SIM115 - closed by the with below
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(f"{source} is not a deniable backup: {exc}") from exc
    with archive:
        names = archive.getnames()
        bad = [name for name in names if not _allowed(name)]
        if bad or _MANIFEST not in names or DATABASE_NAME not in names:
            raise BackupError(f"{source} is not a deniable backup (unexpected or missing members: {bad[:5]})")
        manifest = json.loads(_read_member(archive, _MANIFEST))
        if manifest.get("format") != BACKUP_FORMAT:
            raise BackupError(f"{source} is a {manifest.get('format')!r} file, not {BACKUP_FORMAT!r}")
        files: dict[str, str] = manifest.get("files", {})
        if sorted(files) != sorted(n for n in names if n != _MANIFEST):
            raise BackupError(f"{source}: the manifest does not list exactly the files of the archive")
        data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(data_dir, DIR_MODE)
        for name in names:
            if name == _MANIFEST:
                continue
            if name == DATABASE_NAME:
                _restore_database(archive, name, database, files[name])
                continue
            data = _read_member(archive, name)
            if hashlib.sha256(data).hexdigest() != files[name]:
                raise BackupError(f"{source}: {name} does not match its checksum; the backup is damaged")
            write_secret_file(data_dir / name, data)
    campaigns, reports = _contents(database)
    from deniable.aggregator.keyring import Keyring

    keyring = Keyring(data_dir)
    problems = tuple(str(p) for cid, key in campaigns.items() if (p := keyring.problem(cid, key)) is not None)
    keys = sum(n.startswith("keys/") for n in names)
    tokens = sum(n.startswith("tokens/") for n in names)
    return BackupSummary(data_dir, len(campaigns), reports, keys, tokens, problems)


def _read_member(archive: tarfile.TarFile, name: str) -> bytes:
    member = archive.extractfile(name)
    if member is None:
        raise BackupError(f"backup member {name} is not a regular file")
    return member.read()


def _restore_database(archive: tarfile.TarFile, name: str, database: Path, digest: str) -> None:
    member = archive.extractfile(name)
    if member is None:
        raise BackupError(f"backup member {name} is not a regular file")

    def write(handle: BinaryIO) -> None:
        sha = hashlib.sha256()
        while chunk := member.read(_CHUNK):
            sha.update(chunk)
            handle.write(chunk)
        if sha.hexdigest() != digest:  # raised before the file is put in place
            raise BackupError(f"backup member {name} does not match its checksum; the backup is damaged")

    write_secret_stream(database, write)


# ------------------------------------------------------------------------------------------ CLI


def register(subparsers: Any) -> None:
    """Add ``backup`` and ``restore`` to the ``deniable`` parser."""
    from deniable.aggregator.cli import needs
    from deniable.aggregator.commands import _data_dir_arg

    backup = subparsers.add_parser(
        "backup",
        help=needs("aggregator") + "write a consistent online snapshot of a data dir (database, keys, tokens) "
        "to one 0600 file",
        description="Snapshot the database with SQLite's online backup API (safe while the server runs), "
        "check it and every campaign key, and write it with the keys and tokens to FILE (mode 0600). "
        "Exit status 0 on success, 1 if a campaign key is unusable (the backup is still written), 2 if "
        "nothing could be backed up.",
    )
    _data_dir_arg(backup)
    backup.add_argument("--to", type=Path, required=True, metavar="FILE", help="the backup file to write")
    backup.set_defaults(func=backup_command)
    restore = subparsers.add_parser(
        "restore",
        help=needs("aggregator") + "unpack a backup into a new data dir (then run deniable verify)",
        description="Unpack FILE (written by deniable backup) into --data-dir, which must not hold a "
        "database yet. Every file's checksum is checked; directories are 0700, files 0600. Exit status 0 "
        "on success, 1 if a campaign key in it is unusable, 2 if nothing was restored.",
    )
    restore.add_argument("--from", dest="source", type=Path, required=True, metavar="FILE", help="the backup file")
    _data_dir_arg(restore)
    restore.set_defaults(func=restore_command)


def _report(summary: BackupSummary, verb: str) -> int:
    counts = (plural(summary.campaigns, "campaign"), plural(summary.reports, "report"),
              plural(summary.keys, "key file"), plural(summary.tokens, "token file"))  # fmt: skip
    print(f"{verb} {summary.path}: {', '.join(counts)}")
    for problem in summary.key_problems:
        print(f"WARNING   {problem}", file=sys.stderr)
    return 1 if summary.key_problems else 0


def backup_command(args: argparse.Namespace) -> int:
    try:
        summary = backup_data_dir(args.data_dir, args.to)
    except (BackupError, OSError, sqlite3.Error) as exc:
        print(f"deniable backup: {exc}", file=sys.stderr)
        return 2
    return _report(summary, "backed up to")


def restore_command(args: argparse.Namespace) -> int:
    try:
        summary = restore_data_dir(args.source, args.data_dir)
    except (BackupError, OSError, sqlite3.Error, ValueError) as exc:
        print(f"deniable restore: {exc}", file=sys.stderr)
        return 2
    code = _report(summary, "restored into")
    print(f"next: deniable verify --data-dir {summary.path}, then deniable serve --data-dir {summary.path}")
    return code
