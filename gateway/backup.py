"""``gateway backup DIR``: a copy of a home, taken while the suite runs, with a manifest.

What is copied: every regular file of the home, and of every folder the config
names outside it (an agent's ``workspace`` or ``transcriptsDir``, a
``knowledge.shared.root``), each such folder under ``external/<label>`` (see
``trees``). What is not: the atomic writer's temp files, SQLite's ``-wal``,
``-shm`` and ``-journal`` files, symlinks and other non-regular files, and
``admin-key.txt`` (a plain admin key meant to live only until the operator has
saved it; config.json holds its SHA-256, which is all a restored suite needs).

Consistency while the suite writes: every writer of the suite replaces a file
by renaming a complete temp file over it, so one read of a file gets either its
old or its new bytes, never a mix. A SQLite database is different: a live one is
its file *plus* its WAL, so each one (any file that starts with SQLite's header,
whatever its name: every ``kb.sqlite``, and any other database a user keeps in a
workspace) is copied with SQLite's online backup API in one step, which reads
one snapshot of it, and the copy must pass ``PRAGMA integrity_check``. The
command holds the home shared while it copies (``gateway.suite_lock``), so no
restore writes into it meanwhile.
Files are read one after another, so the copy is not one instant of the whole
home: an index may be a moment behind its notes, which the KB's refresh at start
repairs (it re-reads every source whose size, mtime or hash differs).

The copy is built in ``.<DIR name>.<hex>.partial`` beside DIR and renamed to DIR
at the end, so a backup that fails leaves nothing that looks whole. Restoring
is ``gateway.restore``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import apsw

from gateway.atomic import is_legacy_temp_name, is_temp_name
from gateway.config import SOCKETS_DIR, Config
from gateway.errors import CommandError
from gateway.home import ADMIN_KEY_FILE, INTERNAL_TOKEN_FILE
from gateway.suite_lock import RUNNING_DIR

MANIFEST: Final = "backup.json"
FORMAT: Final = 1
HOME_LABEL: Final = "home"
EXTERNAL_DIR: Final = "external"
PRIVATE_FILES: Final = ("config.json", INTERNAL_TOKEN_FILE)  # home-relative; always mode 0600
SQLITE_HEADER: Final = b"SQLite format 3\x00"
SQLITE_SIDE_FILES: Final = ("-wal", "-shm", "-journal")
BUSY_TIMEOUT_MS: Final = 10_000
_BUSY_ATTEMPTS: Final = 5
_CHUNK: Final = 1 << 20
# Home folders that hold no data: the KB's file-watch barrier markers (services/kb/main.py SYNC_DIR),
# made and removed as it runs, and the running processes' lock and records (gateway.suite_lock).
TRANSIENT_DIRS: Final = (".kb-sync", RUNNING_DIR)


class BackupError(CommandError):
    """A backup or restore refused or failed; one line, and nothing half-written is left behind."""


@dataclass(frozen=True)
class Tree:
    """One folder that is backed up: ``label`` names it in the backup (``home`` is the home;
    ``agents/<id>/workspace``, ``agents/<id>/sessions``, ``shared`` and ``agents/<id>/shared`` the
    folders of the config that lie outside it), ``path`` is where it is."""

    label: str
    path: Path

    @property
    def folder(self) -> str:
        """Its folder inside a backup."""
        return HOME_LABEL if self.label == HOME_LABEL else f"{EXTERNAL_DIR}/{self.label}"


@dataclass
class Summary:
    """What a backup (or restore) did, for the command's report."""

    files: int = 0
    bytes: int = 0
    databases: int = 0
    skipped: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)  # every folder copied, empty ones included


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def trees(config: Config) -> list[Tree]:
    """The home, then each configured folder outside it and outside every folder listed before it.

    The same function gives the targets of a restore (from the backup's config
    with the new home), so a label always means the same setting.
    """
    home = config.home.resolve()
    candidates: list[Tree] = [Tree(HOME_LABEL, home)]
    shared_roots = {config.knowledge.shared.root.resolve(): "shared"}
    for agent in config.agents:
        candidates.append(Tree(f"agents/{agent.id}/workspace", agent.workspace.resolve()))
        candidates.append(Tree(f"agents/{agent.id}/sessions", agent.transcripts_dir.resolve()))
        root = agent.knowledge.shared.root.resolve()
        shared_roots.setdefault(root, f"agents/{agent.id}/shared")
    candidates.extend(Tree(label, root) for root, label in shared_roots.items())
    kept: list[Tree] = []
    for tree in candidates:
        if not any(_inside(tree.path, earlier.path) for earlier in kept):
            kept.append(tree)
    return kept


def is_side_file(path: Path) -> bool:
    """Whether ``path`` is a ``-wal``/``-shm``/``-journal`` file beside an existing file."""
    name = path.name
    return any(name.endswith(s) and (path.parent / name[: -len(s)]).is_file() for s in SQLITE_SIDE_FILES)


def _skip_reason(path: Path, home: Path) -> str | None:
    name = path.name
    if is_temp_name(name) or is_legacy_temp_name(name):
        return "temp file"
    if path == home / ADMIN_KEY_FILE:
        return "the unconfirmed admin key"
    if is_side_file(path):
        return "SQLite side file"
    return None


def walk(tree: Tree, home: Path, prune: list[Path], summary: Summary) -> Iterator[tuple[str, Path]]:
    """Every file of ``tree`` to copy: (path relative to the tree, path), in a stable order.

    Skips (and notes in ``summary.skipped``) what is not data; never enters a
    folder of ``prune`` (another tree, the backup being written).
    """
    if not tree.path.is_dir():
        return
    for top, dirs, files in os.walk(tree.path, followlinks=False):
        here = Path(top)
        kept = []
        for name in sorted(dirs):
            if (here / name).is_symlink():
                summary.skipped.append(f"{tree.folder}/{(here / name).relative_to(tree.path).as_posix()} (a symlink)")
            elif not any(_inside(here / name, p) for p in prune):
                kept.append(name)
                summary.dirs.append(f"{tree.folder}/{(here / name).relative_to(tree.path).as_posix()}")
        dirs[:] = kept
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(tree.path).as_posix()
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue  # removed since the listing
            if stat.S_ISSOCK(st.st_mode) and here == home / SOCKETS_DIR:
                continue  # a running service's socket (gateway.grpc.transport): not data
            if not stat.S_ISREG(st.st_mode):
                kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                summary.skipped.append(f"{tree.folder}/{rel} ({kind})")
                continue
            reason = _skip_reason(path, home)
            if reason:
                if reason not in ("temp file", "SQLite side file"):  # routine: not worth a line
                    summary.skipped.append(f"{tree.folder}/{rel} ({reason})")
                continue
            yield rel, path


def is_database(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's file header (SQLite writes it when it creates a
    database, in WAL mode too, so this finds every database whatever its name)."""
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _copy_database(src: Path, out: Path) -> None:
    """Copy a live database through SQLite's backup API: one step, so one snapshot of it."""
    source = apsw.Connection(os.fspath(src), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        source.setbusytimeout(BUSY_TIMEOUT_MS)
        for attempt in range(_BUSY_ATTEMPTS):
            target = apsw.Connection(os.fspath(out))
            try:
                with target.backup("main", source, "main") as step:
                    while not step.done:
                        step.step(-1)
                target.execute("PRAGMA journal_mode=DELETE").fetchall()  # a single file, no WAL beside it
                return
            except apsw.BusyError:
                if attempt == _BUSY_ATTEMPTS - 1:
                    raise
            finally:
                target.close()
    finally:
        source.close()


def check_database(path: Path) -> str | None:
    """``PRAGMA integrity_check`` of a database file, and its ``kb_meta`` schema version (None when
    it has none). Raises BackupError naming the file when the check fails."""
    conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        if rows != ["ok"]:
            raise BackupError(f"fails PRAGMA integrity_check: {rows[0] if rows else 'no answer'}")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kb_meta'").fetchone() is None:
            return None
        row = conn.execute("SELECT value FROM kb_meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else str(row[0])
    finally:
        conn.close()


def sha256_file(path: Path) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _write_new(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_mode(tree: Tree, rel: str, st_mode: int) -> int:
    if tree.label == HOME_LABEL and rel in PRIVATE_FILES:
        return 0o600
    return st_mode & 0o777


def _empty_or_missing(path: Path) -> bool:
    try:
        return not any(path.iterdir())
    except FileNotFoundError:
        return True
    except NotADirectoryError:
        return False


def _check_destination(dest: Path, found: list[Tree]) -> None:
    if not _empty_or_missing(dest):
        raise BackupError(f"{dest} exists and is not an empty folder; give a new or empty folder for the backup")
    if not dest.parent.is_dir():
        raise BackupError(f"{dest.parent} does not exist; create it first")
    for tree in found:
        if _inside(dest, tree.path) or _inside(tree.path, dest):
            raise BackupError(f"{dest} is inside {tree.path}, which is backed up; put the backup outside the home and the workspaces")


def create_backup(config: Config, dest: Path, now: Callable[[], float] = time.time) -> Summary:
    """Write a backup of ``config.home`` (and the configured folders outside it) to ``dest``.

    ``dest`` must not exist or be an empty folder. Returns what was copied.
    Raises BackupError (nothing is left at ``dest`` or beside it) or OSError.
    """
    dest = dest.absolute()
    home = config.home.resolve()
    found = trees(config)
    _check_destination(dest, found)
    staging = dest.parent / f".{dest.name}.{secrets.token_hex(5)}.partial"
    staging.mkdir(mode=0o700)
    try:
        summary, manifest = _copy_trees(found, home, staging, now)
        _write_new(staging / MANIFEST, json.dumps(manifest, indent=2).encode() + b"\n", 0o600)
        if dest.is_dir():
            dest.rmdir()  # empty (checked); renaming over it would need it empty at that instant anyway
        os.rename(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    with contextlib.suppress(OSError):
        fd = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return summary


def _copy_trees(found: list[Tree], home: Path, staging: Path, now: Callable[[], float]) -> tuple[Summary, dict[str, Any]]:
    summary = Summary()
    files: list[dict[str, Any]] = []
    databases: list[dict[str, Any]] = []
    prune = [t.path for t in found] + [staging] + [home / name for name in TRANSIENT_DIRS]
    for tree in found:
        others = [p for p in prune if p != tree.path]
        for rel, path in walk(tree, home, others, summary):
            out = staging / tree.folder / rel
            try:
                mode = _file_mode(tree, rel, path.stat().st_mode)
                if is_database(path):
                    out.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        _copy_database(path, out)
                        version = check_database(out)
                    except apsw.Error as exc:
                        if not path.exists():  # removed by its owner meanwhile (a pruned vault): as for any file
                            out.unlink(missing_ok=True)
                            continue
                        raise BackupError(f"{path} cannot be copied as a SQLite database ({exc}); no backup was written") from None
                    except BackupError as exc:
                        raise BackupError(f"the copy of {path} {exc}; no backup was written") from None
                    os.chmod(out, mode)
                    databases.append({"path": f"{tree.folder}/{rel}", "schema_version": version, "integrity": "ok"})
                else:
                    _write_new(out, path.read_bytes(), mode)
            except FileNotFoundError:
                continue  # removed by its owner since the listing: not part of the home any more
            size, digest = sha256_file(out)
            files.append({"path": f"{tree.folder}/{rel}", "size": size, "sha256": digest, "mode": f"{mode:04o}"})
            summary.files += 1
            summary.bytes += size
    summary.databases = len(databases)
    manifest = {
        "version": FORMAT,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now())),
        "home": str(home),
        "trees": [{"label": t.label, "folder": t.folder, "source": str(t.path)} for t in found],
        "dirs": summary.dirs,
        "files": files,
        "databases": databases,
        "skipped": summary.skipped,
    }
    return summary, manifest
