"""File events: which sources changed, so a search can say "stale" and a refresh can skip the tree walk.

One watch (``gateway.watching``: one inotify instance read by the event loop; watchfiles where
there is no inotify) over every watched root: each
agent workspace with the archive on (``MEMORY.md``, ``USER.md``,
``memory/**.md`` count) and each shared vault's ``notes/`` folder (``*.md``
directly in it), plus a KB-owned ``sync`` folder. An event on a source calls
its root's ``changed(rel)``. The roots are re-checked every tick, so a folder
created later is picked up (the watch is then re-planned).

**Barrier** (``SourceWatch.sync``): a refresh that wants to rely on events must
first know that every event for a change made before it was asked has been
delivered. ``sync`` creates a uniquely named file in the sync folder and waits
until the watch reports it. The kernel queues the events of one inotify
instance in order, and the watch hands them over in that order (a batch holds
everything received before its last event), so once the marker is seen every
earlier change has gone through ``changed``. ``sync`` answers False when the
watch is not running or not yet proved live (its start marker not yet seen),
or after a timeout: the caller then walks the tree instead.

**Rescan** (``Root.rescan``): events cannot describe everything, so a root is
told to walk its tree at the next refresh when

- the watch (re)starts: changes made while nothing watched are unknown;
- a folder appears under a root where sources may live (recursive inotify
  adds a watch on a new folder only after it exists, so files written into it
  before then are never reported), or such a path disappears (moving a folder
  away reports the folder, not its files);
- the root itself is deleted;
- more than ``BURST_EVENTS`` events arrive within a second: the kernel queue
  (``fs.inotify.max_queued_events``, 16,384 by default) may be near overflowing;
- the watch reports an overflow (``gateway.inotify`` raises; the KB logs ``kb_watch_error``,
  restarts the watch, and the restart rescans).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import apsw
import structlog

from gateway.pids import alive
from gateway.watching import Change, WatchTiming, batches, keep_watching, wait_or_stop

log = structlog.get_logger()

TICK_MS = 2000
STEP_MS = 5
TIMING = WatchTiming(debounce_ms=STEP_MS, step_ms=STEP_MS, tick_ms=TICK_MS)
BURST_EVENTS = 2048  # events per second beyond which a rescan is forced (see the module docstring)
SYNC_TIMEOUT_S = 2.0


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Root:
    is_source: Callable[[str], bool]  # root-relative path → a source?
    changed: Callable[[str], None]  # a source changed (its root-relative path; "" = unknown which)
    may_hold_sources: Callable[[str], bool] = lambda rel: False  # a folder path under which sources may live
    rescan: Callable[[], None] = _nothing  # events may have been missed: walk the tree at the next refresh


def archive_source(rel: str) -> bool:
    """A per-agent archive source: MEMORY.md, USER.md or memory/**.md (no dot parts)."""
    if rel in ("MEMORY.md", "USER.md"):
        return True
    parts = rel.split(os.sep)
    return parts[0] == "memory" and rel.endswith(".md") and not any(p.startswith(".") for p in parts)


def archive_folder(rel: str) -> bool:
    """``memory`` or a folder path under it (no dot parts): where archive sources live."""
    parts = rel.split(os.sep)
    return parts[0] == "memory" and not any(p.startswith(".") for p in parts)


def vault_source(rel: str) -> bool:
    """A shared note: ``<name>.md`` directly in notes/ (temp files start with a dot)."""
    return os.sep not in rel and rel.endswith(".md") and not rel.startswith(".")


def index_matches_file(reader: apsw.Connection, indexed_path: str, file: str) -> bool:
    """Whether the index row of ``indexed_path`` (POSIX, as stored in kb_sources) has the
    size and mtime ``file`` has now; a missing row and a missing file match each other.
    ``file`` is a string, not a ``Path``: this runs for every changed note, and a ``Path``
    interns each part of its path (every new note's name, in the interpreter's table of
    interned strings, docs/capacity.md "Where the KB's memory goes")."""
    rows = list(reader.execute("SELECT size, mtime_ns FROM kb_sources WHERE path = ?", (indexed_path,)))
    indexed = (int(rows[0][0]), int(rows[0][1])) if rows else None
    try:
        st = os.stat(file)
        on_disk: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
    except OSError:
        on_disk = None
    return on_disk == indexed


def plain_source(workspace: Path, rel: str) -> bool:
    """Whether ``rel`` (POSIX, workspace-relative) is what the tree walk would list or prune as a
    plain source: every folder on the way a real folder (no symlink), the file a regular file,
    or absent. Anything else (a symlinked file or folder, a folder named like a source, an error)
    is left to a full walk, which applies the confinement rules of ``sources``."""
    path = os.fspath(workspace)
    parts = rel.split("/")
    for name in parts[:-1]:
        path = os.path.join(path, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return True  # the folder is gone, so is the file: pruned as absent
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
    try:
        st = os.lstat(os.path.join(path, parts[-1]))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)


class SourceWatch:
    """The watch over ``roots()`` (real path → Root) with a barrier in ``sync_dir`` (created if missing)."""

    def __init__(self, roots: Callable[[], dict[str, Root]], sync_dir: Path) -> None:
        self._roots = roots
        self._sync_dir = os.path.realpath(sync_dir)
        self._tag = f"{os.getpid()}."  # several KB processes may share a home
        self._counter = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[bool]] = {}
        self._live = False
        self._went_live = asyncio.Event()
        self._starting = True  # the watch is (about to be) started and has not yet proved live
        self._burst_window = 0
        self._sync_dir_failed = False
        self._burst_count = 0

    @property
    def live(self) -> bool:
        """Whether the watch is running and has proved it sees events (its start marker came back)."""
        return self._live

    async def sync(self, timeout: float = SYNC_TIMEOUT_S) -> bool:
        """True once every file event that happened before this call has been delivered; False when
        that cannot be known (the watch is not live, the marker could not be written, timeout)."""
        if not self._live:
            if not self._starting:
                return False
            with contextlib.suppress(TimeoutError):  # the watch is coming up (milliseconds after start)
                await asyncio.wait_for(self._went_live.wait(), timeout)
            if not self._live:
                return False
        number = next(self._counter)
        future = asyncio.get_running_loop().create_future()
        self._waiters[number] = future
        try:
            if not self._write_marker(number):
                return False
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            log.warning("kb_watch_sync_timeout", timeout_s=timeout)
            return False
        finally:
            self._waiters.pop(number, None)

    def _write_marker(self, number: int) -> bool:
        try:
            os.close(os.open(os.path.join(self._sync_dir, f"{self._tag}{number}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError as exc:
            log.warning("kb_watch_marker_failed", error=str(exc))
            return False
        return True

    def _prepare_sync_dir(self) -> None:
        """Create the sync folder and remove markers left by processes that are gone."""
        os.makedirs(self._sync_dir, exist_ok=True)
        with os.scandir(self._sync_dir) as entries:
            for entry in entries:
                pid = entry.name.partition(".")[0]
                if entry.name.startswith(self._tag) or not (pid.isdecimal() and alive(int(pid))):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver events to the roots until ``stop`` is set (re-planning when roots appear or vanish)."""
        await keep_watching(lambda: self._session(stop), stop, TIMING, error_event="kb_watch_error")

    async def _session(self, stop: asyncio.Event) -> None:
        """One watch over the roots that exist now; returns when it must be re-planned (or on stop)."""
        all_roots = self._roots()
        existing = sorted(r for r in all_roots if os.path.isdir(r))
        if not existing:
            self._starting = False
            await wait_or_stop(stop, TIMING.tick_s)
            return
        try:
            self._prepare_sync_dir()
            self._sync_dir_failed = False
        except OSError as exc:  # refreshes then walk the tree; said once, not at every re-plan
            if not self._sync_dir_failed:
                log.warning("kb_watch_sync_dir_error", error=str(exc))
            self._sync_dir_failed = True
        paths = existing + ([self._sync_dir] if os.path.isdir(self._sync_dir) else [])
        try:
            await self._stream(paths, existing, all_roots, stop)
        finally:
            self._live = self._starting = False
            self._went_live.clear()
            for future in self._waiters.values():
                if not future.done():
                    future.set_result(False)

    async def _stream(self, paths: list[str], existing: list[str], all_roots: dict[str, Root], stop: asyncio.Event) -> None:
        for root in existing:  # whatever happened while nothing watched is unknown
            all_roots[root].rescan()
        async with batches(paths, stop, TIMING) as stream:
            start_marker = next(self._counter)
            self._starting = paths[-1] == self._sync_dir  # without the folder there is no barrier: sync answers False
            if self._starting:
                # Runs once the iteration below has created its watch (its first step is synchronous).
                asyncio.get_running_loop().call_soon(self._write_marker, start_marker)
            async for changes in stream:
                if not changes:
                    if sorted(r for r in self._roots() if os.path.isdir(r)) != existing:
                        return  # a watched folder appeared or vanished: re-plan
                    continue
                self._burst(len(changes), existing, all_roots)
                markers: list[int] = []
                for change, path in changes:
                    if path.startswith(self._sync_dir + os.sep):
                        name = path[len(self._sync_dir) + 1 :]
                        if change == Change.added and name.startswith(self._tag) and name[len(self._tag):].isdecimal():
                            markers.append(int(name[len(self._tag) :]))
                        continue
                    for root in existing:
                        if path.startswith(root + os.sep):
                            _deliver(all_roots[root], change, os.path.relpath(path, root), path)
                        elif path == root and change == Change.deleted:
                            all_roots[root].rescan()
                            all_roots[root].changed("")
                if markers:  # after the source events of this batch: a waiter resumes with them applied
                    self._passed(markers, start_marker)

    def _passed(self, markers: list[int], start_marker: int) -> None:
        """Markers came back: every waiter up to the highest one has its events delivered."""
        number = max(markers)
        if number >= start_marker and not self._live:
            self._live, self._starting = True, False
            self._went_live.set()
        for waiting, future in self._waiters.items():
            if waiting <= number and not future.done():
                future.set_result(True)
        for seen in markers:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self._sync_dir, f"{self._tag}{seen}"))

    def _burst(self, count: int, existing: list[str], all_roots: dict[str, Root]) -> None:
        window = int(time.monotonic())
        if window != self._burst_window:
            self._burst_window, self._burst_count = window, 0
        before = self._burst_count
        self._burst_count += count
        if before < BURST_EVENTS <= self._burst_count:
            log.info("kb_watch_burst", events=self._burst_count)
            for root in existing:
                all_roots[root].rescan()


def _deliver(root: Root, change: Change, rel: str, path: str) -> None:
    if root.is_source(rel):
        root.changed(rel)
    elif root.may_hold_sources(rel) and (change == Change.deleted or (change == Change.added and os.path.isdir(path))):
        root.rescan()  # a folder of sources appeared or went away: its files were not reported one by one
        root.changed("")
