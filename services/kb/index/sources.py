"""Which workspace files the archive indexes, found with one cheap stat each.

Sources are ``MEMORY.md`` and ``USER.md`` at the workspace root plus every
``memory/**/*.md`` (docs/concepts/archive.md "Knowledge archive (KB)"). The walk skips names starting
with ``.``, never descends into a symlinked directory (no loops, no escape) and
treats a symlinked file as a source only when its real path stays inside the
workspace; an escaping link is reported in ``excluded``. A directory that cannot
be listed is reported in ``errors`` and its files are simply not *listed*, which
is why the indexer never prunes on absence from the listing alone.

A ``SourceProfile`` bundles "which files are sources" (a scan) with "what
provenance they get" (a classifier), so the same indexer and search serve the
per-agent archive (``ARCHIVE_PROFILE``, the default everywhere) and the shared
vault (``vault.note_index.VAULT_PROFILE``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from services.kb.index.provenance import Provenance, classify

CORE_FILES: Final = ("MEMORY.md", "USER.md")
MEMORY_DIR: Final = "memory"


class FileStat(NamedTuple):
    """The two cheap facts the fast path compares."""

    size: int
    mtime_ns: int


@dataclass
class Scan:
    """One walk of the source tree.

    ``files`` maps each listed source (workspace-relative POSIX path) to its stat,
    or to None when the name is listed but stat failed (a dangling link, a
    permission error). ``excluded`` holds symlinks whose target leaves the
    workspace; ``errors`` holds "path: reason" lines. ``listed_root`` is False
    when the workspace itself could not be listed (unmounted, permission): then
    nothing may be pruned.
    """

    files: dict[str, FileStat | None] = field(default_factory=dict)
    listed_root: bool = True
    excluded: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def add_entry(scan: Scan, rel: str, entry: os.DirEntry[str], root_real: str) -> None:
    """Record one listed file in ``scan``: its stat, None when stat fails, or ``excluded``
    when it is a symlink whose real path leaves ``root_real``. Non-regular files are skipped."""
    try:
        if entry.is_symlink() and not _inside(os.path.realpath(entry.path), root_real):
            scan.excluded.add(rel)
            return
        st = entry.stat()
    except OSError:
        scan.files[rel] = None
        return
    if not stat.S_ISREG(st.st_mode):
        return
    scan.files[rel] = FileStat(st.st_size, st.st_mtime_ns)


def scan_sources(workspace: Path) -> Scan:
    """List and stat every source under ``workspace`` (rules in the module docstring)."""
    scan = Scan()
    root = os.fspath(workspace)
    root_real = os.path.realpath(root)
    try:
        with os.scandir(root) as top:
            for entry in top:
                if entry.name in CORE_FILES and not entry.is_dir():
                    add_entry(scan, entry.name, entry, root_real)
    except OSError as exc:
        scan.errors.append(f".: cannot list workspace ({type(exc).__name__})")
        scan.listed_root = False
        return scan
    memory_real = os.path.realpath(os.path.join(root, MEMORY_DIR))
    if not _inside(memory_real, root_real):
        scan.errors.append(f"{MEMORY_DIR}: symlink leaves the workspace, not indexed")
        return scan
    stack = [MEMORY_DIR]
    files = scan.files
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                entries = list(it)
        except FileNotFoundError:
            continue
        except OSError as exc:
            scan.errors.append(f"{rel_dir}: cannot list ({type(exc).__name__})")
            continue
        for entry in entries:
            # The hot loop of a no-change refresh (one stat per file, no other call
            # unless the entry is a directory or a symlink).
            name = entry.name
            if name[0] == ".":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append(f"{rel_dir}/{name}")
                continue
            if not name.endswith(".md"):
                continue
            rel = f"{rel_dir}/{name}"
            try:
                is_link = entry.is_symlink()
            except OSError:
                is_link = False
            if is_link:
                add_entry(scan, rel, entry, root_real)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                files[rel] = None
                continue
            if stat.S_ISREG(st.st_mode):
                files[rel] = FileStat(st.st_size, st.st_mtime_ns)
    return scan


def stat_source(workspace: Path, rel: str) -> FileStat | None:
    """A fresh stat of one source; None when it is genuinely absent, or when its real path
    leaves ``workspace`` through a link (a walk leaves such a file out; a targeted refresh
    must not index it either).

    Raises OSError for any other failure (permission, I/O), which callers read
    as "present but unreadable".
    """
    root = os.fspath(workspace)
    path = os.path.join(root, rel)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not _inside(os.path.realpath(path), os.path.realpath(root)):
        return None
    return FileStat(st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class SourceProfile:
    """Which files under a root are sources (``scan``) and what provenance each gets
    (``classify(rel_path, frontmatter_provenance)``)."""

    name: str
    scan: Callable[[Path], Scan]
    classify: Callable[[str, str | None], Provenance]


ARCHIVE_PROFILE: Final = SourceProfile("archive", scan_sources, classify)
