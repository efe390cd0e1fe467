"""File events that make an archive stale, so a search can say so without walking the tree.

One watchfiles watch over every workspace with the archive on; any change to
``MEMORY.md``, ``USER.md`` or ``memory/**.md`` marks that agent dirty. The
roots are re-checked every tick, so a workspace created later is picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import structlog
from watchfiles import Change, awatch

log = structlog.get_logger()

TICK_MS = 2000


def _source_of(root: str, path: str) -> bool:
    rel = os.path.relpath(path, root)
    if rel in ("MEMORY.md", "USER.md"):
        return True
    parts = rel.split(os.sep)
    return parts[0] == "memory" and path.endswith(".md") and not any(p.startswith(".") for p in parts)


async def watch_sources(roots: Callable[[], dict[str, str]], on_change: Callable[[str], None], stop: asyncio.Event) -> None:
    """Call ``on_change(agent_id)`` for every source event until ``stop`` is set."""
    while not stop.is_set():
        all_roots = roots()
        existing = sorted(r for r in all_roots if os.path.isdir(r))
        if not existing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_MS / 1000)
            continue
        stream = awatch(*existing, watch_filter=None, debounce=5, step=1, stop_event=stop,
                        rust_timeout=TICK_MS, yield_on_timeout=True, ignore_permission_denied=True)
        try:
            async with contextlib.aclosing(stream):
                async for changes in stream:
                    for change, path in changes:
                        for root in existing:
                            if path.startswith(root + os.sep) and _source_of(root, path):
                                on_change(all_roots[root])
                            elif path == root and change == Change.deleted:
                                on_change(all_roots[root])
                    if not changes and sorted(r for r in roots() if os.path.isdir(r)) != existing:
                        break  # a workspace appeared or vanished: re-plan
        except OSError as exc:
            log.warning("kb_watch_error", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_MS / 1000)
