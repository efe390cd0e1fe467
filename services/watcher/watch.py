"""The one file watch for every agent's workspace (through ``gateway.watching``).

One ``awatch`` over all workspace roots (their top level only: one OS watch
per workspace, not one per folder under it), with a 5 ms step and a 1 ms
debounce instead of watchfiles' defaults (the default debounce alone costs
70 ms to 1.6 s): an event reaches the recomposer within a step, and bursts
are coalesced there, not here. The step is the trade: watchfiles' loop wakes
once per step, so 1 ms cost over 2% of a core at idle over 1,000 agents,
5 ms about 1.3% (bench/watcher_latency.py). Every ``TICK_MS`` the watch checks its roots: a workspace that
appeared, vanished or was deleted and recreated (new inode) restarts the
watch over the new set. Only the six identity files at a workspace's top
level count; CLAUDE.md, dot files and dot folders (temp files, .dreaming/)
never do.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import structlog

from gateway.watching import Change, WatchTiming, batches, keep_watching, wait_or_stop
from services.watcher.compose import IDENTITY_FILES

log = structlog.get_logger()

STEP_MS = 5
DEBOUNCE_MS = 1
TICK_MS = 1000
TIMING = WatchTiming(debounce_ms=DEBOUNCE_MS, step_ms=STEP_MS, tick_ms=TICK_MS)

Roots = dict[str, str]  # real workspace path → agent id


def _root_state(roots: Roots) -> dict[str, int]:
    """Real workspace path → inode, for the roots that exist now."""
    state = {}
    for path in roots:
        try:
            state[path] = os.stat(path).st_ino
        except OSError:
            continue
    return state


class WorkspaceWatch:
    """Calls ``on_files(agent, names)`` for identity-file changes and ``on_root_change(agent)``
    when a workspace appeared, vanished or was recreated (or the roots changed with the config).
    """

    def __init__(
        self,
        roots: Callable[[], Roots],
        on_files: Callable[[str, set[str]], None],
        on_root_change: Callable[[str], None],
    ) -> None:
        self._roots = roots
        self._on_files = on_files
        self._on_root_change = on_root_change
        # Agents to recompose once the next watch is up: their folder changed
        # while no watch covered it, so an event may have been missed.
        self._recheck: set[str] = set()

    def _dispatch(self, changes: set[tuple[Change, str]], roots: Roots) -> bool:
        """Route events to agents; True when a watched root itself went away (re-plan now:
        a folder recreated before the next tick may even reuse the inode)."""
        by_agent: dict[str, set[str]] = {}
        root_gone = False
        for change, path in changes:
            if path in roots:
                if change == Change.deleted:
                    root_gone = True
                    self._on_root_change(roots[path])
                    self._recheck.add(roots[path])
                continue
            parent, name = os.path.split(path)
            agent_id = roots.get(parent)
            if agent_id is not None and name in IDENTITY_FILES:
                by_agent.setdefault(agent_id, set()).add(name)
        for agent_id, names in by_agent.items():
            self._on_files(agent_id, names)
        return root_gone

    def _tick(self, roots: Roots, state: dict[str, int]) -> bool:
        """Periodic checks; True when the watch must be re-planned."""
        new_roots = self._roots()
        new_state = _root_state(new_roots)
        if new_roots == roots and new_state == state:
            return False
        changed = {p for p in set(new_state) | set(state) if new_state.get(p) != state.get(p)}
        for path in sorted(changed):
            agent_id = new_roots.get(path) or roots.get(path)
            if agent_id:
                self._on_root_change(agent_id)
                self._recheck.add(agent_id)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Watch until ``stop`` is set, re-planning the watch whenever its roots change."""
        await keep_watching(lambda: self._session(stop), stop, TIMING, error_event="watch_error", after_error=self._replanned)

    async def _session(self, stop: asyncio.Event) -> None:
        """One watch over the roots that exist now; returns when it must be re-planned (or on stop)."""
        roots = self._roots()
        state = _root_state(roots)
        if not state:
            # Nothing to watch yet: tick until a workspace appears.
            await wait_or_stop(stop, TIMING.tick_s)
            if not stop.is_set():
                self._tick(roots, state)
            return
        last_tick = asyncio.get_running_loop().time()
        # Only each workspace's top level: its six identity files, and the folder itself. A recursive
        # watch also walked every memory/ tree at each (re)plan and took an OS watch per folder.
        async with batches(sorted(state), stop, TIMING, recursive=False) as stream:
            async for changes in stream:
                while self._recheck:  # the new watch is live now
                    self._on_root_change(self._recheck.pop())
                if changes and self._dispatch(changes, roots):
                    break
                now = asyncio.get_running_loop().time()
                if not changes or now - last_tick >= TIMING.tick_s:
                    last_tick = now
                    if self._tick(roots, state):
                        break
            else:
                return  # stopped
        self._replanned()

    def _replanned(self) -> None:
        log.info("watch_replanned", workspaces=len(_root_state(self._roots())))
