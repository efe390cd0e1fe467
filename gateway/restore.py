"""``gateway restore DIR``: put a backup (``gateway.backup``) back, after checking every byte of it.

Order: the manifest is read and every file it lists is checked (present, same
size, same SHA-256) before anything is written, so a damaged backup is refused
with one line naming the first bad file and the target is untouched. The
targets are then the home and, for each folder the backup holds from outside
its old home, the folder the backup's config.json names for that setting,
resolved against the new home (an absolute ``workspace`` comes back where it
was; a relative one lands in the new home).

A restore never writes into a home a running process holds: it takes the
home's lock exclusively (``gateway.suite_lock``) for its whole run, and when
any ``gateway serve``, ``gateway up`` or ``gateway backup`` holds it, it is
refused with one line naming them (role and pid), before anything is written;
``force`` does not change that. While it runs, a process that starts on the
home refuses to.

A target must be missing or empty. ``force`` lets a restore write into
non-empty targets: each file the backup holds replaces the file of that name;
every other file stays. The one exception: a database that is replaced loses
its old ``-wal``/``-shm``/``-journal`` files, which belong to the old database
and would corrupt the restored one. Files are written through
``gateway.atomic.write_atomic``; config.json and the internal token get mode
0600; config.json is written last, so a restore that stops half-way leaves a
home no process takes for a whole one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.atomic import write_atomic
from gateway.backup import FORMAT, HOME_LABEL, MANIFEST, PRIVATE_FILES, SQLITE_SIDE_FILES, BackupError, Summary, sha256_file, trees
from gateway.config import build
from gateway.config_migrations import migrate
from gateway.errors import ConfigError
from gateway.suite_lock import RUNNING_DIR, HomeBusy, exclusive_home


def read_manifest(backup: Path) -> dict[str, Any]:
    """The manifest of a backup, its shape checked. Raises BackupError."""
    path = backup / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise BackupError(f"{backup} is not a backup: it has no {MANIFEST}") from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path} cannot be read as JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("version") != FORMAT:
        raise BackupError(f"{path}: not a backup manifest of version {FORMAT}")
    if not isinstance(manifest.get("files"), list) or not isinstance(manifest.get("trees"), list):
        raise BackupError(f"{path}: the manifest has no files or trees list")
    folders = {t.get("folder") for t in manifest["trees"] if isinstance(t, dict)}
    for entry in manifest["files"]:
        rel = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not _safe(rel) or not any(rel.startswith(f"{f}/") for f in folders if isinstance(f, str)):
            raise BackupError(f"{path}: bad file entry {rel!r}")
    return manifest


def _safe(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return not rel.startswith("/") and ".." not in parts and "." not in parts and len(parts) >= 2


def verify(backup: Path, manifest: dict[str, Any]) -> None:
    """Check every listed file's size and SHA-256; BackupError naming the first that differs."""
    for entry in manifest["files"]:
        path = backup / entry["path"]
        try:
            size, digest = sha256_file(path)
        except FileNotFoundError:
            raise BackupError(f"damaged backup: {entry['path']} is missing; nothing was restored") from None
        except OSError as exc:
            raise BackupError(f"damaged backup: {entry['path']} cannot be read ({exc.strerror}); nothing was restored") from None
        if size != entry.get("size") or digest != entry.get("sha256"):
            raise BackupError(f"damaged backup: {entry['path']} does not match its size and SHA-256 in {MANIFEST}; nothing was restored")


def targets(backup: Path, manifest: dict[str, Any], home: Path) -> dict[str, Path]:
    """Backup folder → where it goes: the home, and each outside folder as the backup's config names it."""
    config_path = backup / HOME_LABEL / "config.json"
    try:
        raw = json.loads(config_path.read_bytes())
        config = build(migrate(raw)[0], home)
    except (OSError, ValueError, ConfigError) as exc:
        raise BackupError(f"the backup's config.json cannot be loaded ({exc}); nothing was restored") from None
    by_label = {t.label: t for t in trees(config)}
    out: dict[str, Path] = {}
    for tree in manifest["trees"]:
        label, folder = tree.get("label"), tree.get("folder")
        found = by_label.get(label) if isinstance(label, str) else None
        if found is None or not isinstance(folder, str):
            raise BackupError(f"the backup holds {folder!r}, which its own config.json no longer names; nothing was restored")
        out[folder] = home if label == HOME_LABEL else found.path
    return out


def _occupied(path: Path, home: Path) -> bool:
    """Whether ``path`` holds anything (in the home, the lock folder of ``gateway.suite_lock`` does not count)."""
    try:
        return any(p.name != RUNNING_DIR or path != home for p in path.iterdir())
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return True


def restore_backup(backup: Path, home: Path, *, force: bool = False) -> Summary:
    """Restore ``backup`` into ``home`` (rules in the module docstring); what was written.

    Raises BackupError before writing anything when the backup is damaged or a
    target is not empty (without ``force``); OSError when a write fails.
    """
    backup, home = backup.absolute(), home.absolute()
    manifest = read_manifest(backup)
    verify(backup, manifest)
    where = targets(backup, manifest, home)
    made = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive_home(home):
            return _restore(backup, manifest, where, home, force=force)
    except HomeBusy as exc:
        raise BackupError(
            f"refused: {exc}; stop them first (the suite: Ctrl-C where gateway up runs, or docker compose stop), "
            "then run the restore again (--force does not override this); nothing was changed"
        ) from None
    except BackupError:
        if made:  # refused before writing: leave no trace of a home that was not there
            shutil.rmtree(home, ignore_errors=True)
        raise


def _restore(backup: Path, manifest: dict[str, Any], where: dict[str, Path], home: Path, *, force: bool) -> Summary:
    """The writes of ``restore_backup``, with the home held exclusively."""
    if not force:
        for root in where.values():
            if _occupied(root, home):
                raise BackupError(
                    f"{root} is not empty; restore into a new or empty home, or pass --force to replace the files "
                    "the backup holds (nothing else is deleted)"
                )
    databases = {d.get("path") for d in manifest.get("databases", []) if isinstance(d, dict)}
    entries = sorted(manifest["files"], key=lambda e: e["path"] == f"{HOME_LABEL}/config.json")  # config.json last
    summary = Summary(databases=len(databases))
    for root in where.values():
        root.mkdir(parents=True, exist_ok=True)
    for rel in manifest.get("dirs", []):
        if isinstance(rel, str) and _safe(rel):
            folder = _folder_of(rel, where)
            if folder is not None:
                (where[folder] / rel[len(folder) + 1:]).mkdir(parents=True, exist_ok=True)
    for entry in entries:
        folder = _folder_of(entry["path"], where)
        if folder is None:
            raise BackupError(f"{entry['path']} lies in no folder the backup lists")
        rel = entry["path"][len(folder) + 1:]
        target = where[folder] / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = (backup / entry["path"]).read_bytes()
        if entry["path"] in databases:
            for suffix in SQLITE_SIDE_FILES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{target}{suffix}")
        private = folder == HOME_LABEL and rel in PRIVATE_FILES
        write_atomic(target, data, mode=0o600 if private else _mode(entry), keep_mode=False)
        summary.files += 1
        summary.bytes += len(data)
    return summary


def _folder_of(rel: str, where: dict[str, Path]) -> str | None:
    """The backup folder (the longest, for ``external/...``) that ``rel`` lies in."""
    return next((f for f in sorted(where, key=len, reverse=True) if rel.startswith(f"{f}/")), None)


def _mode(entry: dict[str, Any]) -> int:
    try:
        return int(str(entry.get("mode", "0644")), 8) & 0o777
    except ValueError:
        return 0o644
