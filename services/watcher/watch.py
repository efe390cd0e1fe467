"""The one file watch for every agent's workspace (through ``gateway.watching``).

One watch over all workspace roots (their top level only: one OS watch per
workspace, not one per folder under it), with a 5 ms debounce: an event
reaches the recomposer 5 ms after it happened, with whatever else came in
those 5 ms (an editor's write-then-rename, a burst of writes: one
composition), and later bursts are coalesced there. The roots are checked again when the config changes (the watch is
nudged), every ``TICK_MS`` while a configured workspace does not exist yet,
and every ``REST_TICK_MS`` otherwise (a safety net: a workspace that goes
away is reported by its own event). A workspace that appeared, vanished or
was deleted and recreated (new inode) restarts the watch over the new set.
Only the six identity files at a workspace's top level count; CLAUDE.md, dot
files and dot folders (temp files, .dreaming/) never do. ``STEP_MS`` paces
watchfiles where there is no inotify: 5 ms costs about 1.3% of a core at
idle over 1,000 agents there (bench/watcher_latency.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import structlog

from gateway.watching import Change, WatchTiming, batches, keep_watching
from services.watcher.compose import IDENTITY_FILES

log = structlog.get_logger()

STEP_MS = 5
DEBOUNCE_MS = 5
TICK_MS = 1000
REST_TICK_MS = 60_000
TIMING = WatchTiming(debounce_ms=DEBOUNCE_MS, step_ms=STEP_MS, tick_ms=TICK_MS)
AT_REST = WatchTiming(debounce_ms=DEBOUNCE_MS, step_ms=STEP_MS, tick_ms=REST_TICK_MS)

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
        self._nudge = asyncio.Event()
        self._roots_changed = False

    def roots_changed(self) -> None:
        """The configured roots may have changed (a config reload): check them now, not at the next tick."""
        self._roots_changed = True
        self._nudge.set()

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
            # Nothing to watch yet: tick until a workspace appears (no agent at all: until the config changes).
            await self._nap(stop, TIMING.tick_s if roots else AT_REST.tick_s)
            if not stop.is_set():
                self._tick(roots, state)
            return
        last_tick = asyncio.get_running_loop().time()
        timing = AT_REST if len(state) == len(roots) else TIMING
        # Only each workspace's top level: its six identity files, and the folder itself. A recursive
        # watch also walked every memory/ tree at each (re)plan and took an OS watch per folder.
        async with batches(sorted(state), stop, timing, recursive=False, nudge=self._nudge) as stream:
            async for changes in stream:
                while self._recheck:  # the new watch is live now
                    self._on_root_change(self._recheck.pop())
                if changes and self._dispatch(changes, roots):
                    break
                now = asyncio.get_running_loop().time()
                if not changes or self._roots_changed or now - last_tick >= timing.tick_s:
                    last_tick = now
                    self._roots_changed = False
                    if self._tick(roots, state):
                        break
            else:
                return  # stopped
        self._replanned()

    async def _nap(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait ``seconds``, or less if ``stop`` is set or the watch is nudged meanwhile."""
        waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._nudge.wait())}
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        self._nudge.clear()

    def _replanned(self) -> None:
        log.info("watch_replanned", workspaces=len(_root_state(self._roots())))
