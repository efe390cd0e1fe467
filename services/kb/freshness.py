"""File events that make an index stale, so a search can say so without walking the tree.

One watchfiles watch over every watched root: each agent workspace with the
archive on (``MEMORY.md``, ``USER.md``, ``memory/**.md`` count) and each
shared vault's ``notes/`` folder (``*.md`` directly in it). An event on a
source calls that root's callback. The roots are re-checked every tick, so a
folder created later is picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import apsw

import structlog
from watchfiles import Change, awatch

log = structlog.get_logger()

TICK_MS = 2000


@dataclass(frozen=True)
class Root:
    is_source: Callable[[str], bool]  # workspace-relative path → counts?
    changed: Callable[[str], None]  # called with the source's root-relative path


def archive_source(rel: str) -> bool:
    """A per-agent archive source: MEMORY.md, USER.md or memory/**.md (no dot parts)."""
    if rel in ("MEMORY.md", "USER.md"):
        return True
    parts = rel.split(os.sep)
    return parts[0] == "memory" and rel.endswith(".md") and not any(p.startswith(".") for p in parts)


def vault_source(rel: str) -> bool:
    """A shared note: ``<name>.md`` directly in notes/ (temp files start with a dot)."""
    return os.sep not in rel and rel.endswith(".md") and not rel.startswith(".")


def index_matches_file(reader: apsw.Connection, indexed_path: str, file: Path) -> bool:
    """Whether the index row of ``indexed_path`` (POSIX, as stored in kb_sources) has the
    size and mtime ``file`` has now; a missing row and a missing file match each other."""
    rows = list(reader.execute("SELECT size, mtime_ns FROM kb_sources WHERE path = ?", (indexed_path,)))
    indexed = (int(rows[0][0]), int(rows[0][1])) if rows else None
    try:
        st = file.stat()
        on_disk: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
    except OSError:
        on_disk = None
    return on_disk == indexed


async def watch_sources(roots: Callable[[], dict[str, Root]], stop: asyncio.Event) -> None:
    """Call each root's ``changed()`` for every source event until ``stop`` is set."""
    while not stop.is_set():
        all_roots = roots()
        existing = sorted(r for r in all_roots if os.path.isdir(r))
        if not existing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_MS / 1000)
            continue
        stream = awatch(*existing, watch_filter=None, debounce=5, step=5, stop_event=stop,
                        rust_timeout=TICK_MS, yield_on_timeout=True, ignore_permission_denied=True)
        try:
            async with contextlib.aclosing(stream):
                async for changes in stream:
                    for change, path in changes:
                        for root in existing:
                            if path.startswith(root + os.sep):
                                rel = os.path.relpath(path, root)
                                if all_roots[root].is_source(rel):
                                    all_roots[root].changed(rel)
                            elif path == root and change == Change.deleted:
                                all_roots[root].changed("")
                    if not changes and sorted(r for r in roots() if os.path.isdir(r)) != existing:
                        break  # a watched folder appeared or vanished: re-plan
        except OSError as exc:
            log.warning("kb_watch_error", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_MS / 1000)
