"""The workspace files dreaming reads and writes, and how: confined to the workspace by real path
(never through a link), read only as UTF-8, appended by compare-and-swap, backed up
before a change (``.dreaming/backups/``, the newest ``BACKUPS_KEPT`` per file)."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Callable
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic

BACKUPS = ".dreaming/backups"
BACKUPS_KEPT = 20
APPEND_ATTEMPTS = 8


class Unsafe(Exception):
    """A path dreaming must not write (a link, or outside the workspace)."""


def confined(workspace: Path, rel: str) -> Path:
    """``workspace/rel`` when its real location is inside the workspace and it is not a link.

    Creates missing parent folders. Raises Unsafe."""
    real_ws = os.path.realpath(workspace)
    target = os.path.join(real_ws, rel)
    if os.path.commonpath([real_ws, os.path.realpath(target)]) != real_ws:
        raise Unsafe(f"{rel} resolves outside the workspace")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.commonpath([real_ws, os.path.realpath(os.path.dirname(target))]) != real_ws:
        raise Unsafe(f"{rel} resolves outside the workspace")
    try:
        is_link = stat.S_ISLNK(os.lstat(target).st_mode)
    except FileNotFoundError:
        is_link = False
    if is_link:
        raise Unsafe(f"{rel} is a link; dreaming never writes through links")
    return Path(target)


def read_text(workspace: Path, rel: str) -> str:
    """A workspace file's text ("" when missing). Raises Unsafe for a link, a path outside, or bytes
    that are not UTF-8: such a file is never rewritten, since decoding it would replace the bytes
    it cannot read and a rewrite would lose them."""
    path = confined(workspace, rel)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unsafe(f"{rel} is not valid UTF-8 (byte {exc.start}); dreaming does not rewrite it (fix it on disk)") from None


def append_text(path: Path, block: str, before_rename: Callable[[str, str], None] | None = None) -> tuple[str, str]:
    """Append ``block`` to ``path`` by CAS (retrying on a concurrent writer).

    Returns ``(text before, what was appended)`` (a newline is added first when
    the file did not end with one). ``before_rename(text before, what is appended)`` runs
    under the folder lock once the compare-and-swap passed, just before the rename
    (``write_atomic``): an exception from it aborts the append. Raises WriteConflict after
    APPEND_ATTEMPTS."""
    for _ in range(APPEND_ATTEMPTS):
        try:
            current: bytes | None = path.read_bytes()
        except FileNotFoundError:
            current = None
        before = (current or b"").decode("utf-8", errors="replace")  # for the journal's context only
        inserted = ("\n" if current and not current.endswith(b"\n") else "") + block
        hook = None if before_rename is None else functools.partial(before_rename, before, inserted)
        try:  # the file's own bytes are kept as they are, readable or not
            write_atomic(path, (current or b"") + inserted.encode("utf-8"), expected=current, before_rename=hook)
        except WriteConflict:
            continue
        return before, inserted
    raise WriteConflict(f"{path.name} kept changing; could not append")


def backup(workspace: Path, name: str, text: str, run_id: str) -> None:
    """The pre-image of ``name`` (workspace-relative: ``memory/x.md`` goes to
    ``.dreaming/backups/memory/x.md.<run>``), keeping the newest BACKUPS_KEPT per file."""
    rel = Path(name)
    folder = workspace / BACKUPS / rel.parent
    base = rel.name
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{base}.{run_id}", text.encode("utf-8"), mode=0o600)
    kept = sorted(p for p in os.listdir(folder) if p.startswith(f"{base}.") and not p.startswith("."))
    for old in kept[:-BACKUPS_KEPT]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / old)
