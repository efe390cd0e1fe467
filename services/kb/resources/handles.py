"""The KB's open databases, bounded: an LRU of archives and vaults under a cap (docs/concepts/archive.md "Open archives and files").

An open archive holds up to ``FILES_PER_ARCHIVE`` descriptors (its writer: the database, its WAL
and the shared-memory file; its reader: the database and its WAL; the database's descriptor of
the last retrieval-log batch, which SQLite keeps for the next batch's connection; worker threads
read on the reader) and the SQLite memory of its
connections (their page caches and schemas). None of them is closed while the archive is open
(SQLite would keep the file of one closed alone), and every one of them is closed with it. Every use of an archive's or a vault's connections
happens inside ``OpenHandles.use(holder)``: a search, a refresh, a fold, a lifecycle update, a
vault write. While one is inside, the holder is *pinned* and never closed. Opening one more
than ``cap`` closes the least recently used unpinned one first; when every open one is pinned,
the newcomer waits until one is released (a use ends in a bounded time: the work of one call).
The connections themselves are still opened lazily by their owner (``archives``, ``registry``)
inside a use; the cap counts holders, not connections. Closing starts a little before the cap
is reached (``_make_room``), so a newcomer seldom waits for one.

Closing (``_close``) detaches the holder's connections on the event loop (so nothing can use them
any more) and closes them in a thread of its own: the reader first, then the WAL checkpointed with
TRUNCATE on the writer (``index_files.close_connections``), so a closed archive leaves a WAL of 0
bytes. The rows queued for its retrieval log are written before those close, on the recorder's
thread (``retrieval_log.Recorder.release``). An archive used
again is simply opened again: the holder keeps everything else (generation, pending file events).

A holder unused for ``IDLE_CLOSE_S`` is closed by ``run`` (its memory and its WAL go back),
and after closing some, ``run`` asks the C allocator to return freed memory to the system
(``gateway.heap.give_back``, where the C library has it): SQLite's page caches are freed into the heap,
which would otherwise keep them.

Holders in steady use are never idle, and a connection's page cache keeps every page read until
its database changes: a writer's (bounded at 64 MiB, for a full index) and the vault's search
connection's (32 MiB) fill over hours toward the whole database, so the KB's memory would follow
the size of every database in use; an archive's search connection keeps 8 pages. Every
``RELEASE_S`` ``run`` hands back the page caches of every open holder not in
use at that moment (``Holder.release_caches``), drops the searches' memos (``on_release``: the KB passes ``search.forget_memos``)
and then gives back the freed memory: what stays cached is what the last minute's searches read. A
search after that reads its pages again from the system's file cache (a ``pread`` of a few
microseconds each), once a minute per archive, and its chunks' entries again into a new memo.

``run`` wakes only when one of those is due (at least ``MIN_SWEEP_S`` apart), and not at all while
nothing is open: a KB at rest with every archive closed sleeps until the next use opens one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Protocol

import structlog

from gateway.heap import give_back
from gateway.resources import open_files_limit

log = structlog.get_logger()

FILES_PER_ARCHIVE: Final = 7  # writer: db, WAL, shm; reader: db, WAL; the retrieval log's last batch: db; one spare
RESERVED_FILES: Final = 128  # sockets, the file watch, logs, worker pipes, a batch's connection
MIN_CAP: Final = 4
MAX_DEFAULT_CAP: Final = 4096  # a derived cap stops here: more open archives than this is memory, not speed
HEADROOM_DIVISOR: Final = 16  # past cap - cap/16 open (cap - 2 at least), closes start ahead of need
MIN_HEADROOM: Final = 2
IDLE_CLOSE_S: Final = 60.0
MIN_SWEEP_S: Final = 1.0  # a holder pinned past its idle time is looked at again after this
RELEASE_S: Final = 60.0


def default_cap(limit: int | None = None) -> int:
    """The cap derived from the open-files limit (``limit``, else the process's soft limit now):
    what is left after ``RESERVED_FILES``, ``FILES_PER_ARCHIVE`` per archive, between ``MIN_CAP``
    and ``MAX_DEFAULT_CAP`` (an unlimited limit gives the latter)."""
    limit = open_files_limit() if limit is None else limit
    if limit < 0:
        return MAX_DEFAULT_CAP
    return max(MIN_CAP, min(MAX_DEFAULT_CAP, (limit - RESERVED_FILES) // FILES_PER_ARCHIVE))


def files_needed(cap: int) -> int:
    """About how many open files a KB with ``cap`` open archives needs at most."""
    return cap * FILES_PER_ARCHIVE + RESERVED_FILES


class Holder(Protocol):
    """An archive or a vault: what it holds open, handed over to be closed."""

    def detach(self) -> Callable[[], None]:
        """Take the connections out of the holder (it has none open afterwards) and return what closes them."""

    def release_caches(self) -> None:
        """Hand back the page caches of its open connections (on the event loop, while not in use)."""


@dataclass(eq=False)
class _Slot:
    pins: int = 0
    last_used: float = 0.0


class OpenHandles:
    """The LRU (module docstring). Every method runs on the event loop."""

    def __init__(
        self, cap: int, *, clock: Callable[[], float] = time.monotonic, idle_s: float = IDLE_CLOSE_S,
        release_s: float = RELEASE_S, on_release: Callable[[], object] | None = None,
    ) -> None:
        self._cap = max(1, cap)
        self._on_release = on_release  # what else a release drops (the KB: the searches' memos, ``search.forget_memos``)
        self._clock = clock
        self._idle_s = idle_s
        self._release_s = release_s
        self._released_at = clock()
        self._open: OrderedDict[Holder, _Slot] = OrderedDict()  # least recently used first
        self._closing: dict[Holder, asyncio.Task[None]] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._opened = asyncio.Event()  # set when a holder opens: ``until_open`` waits for it
        self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-close")
        self.closed = 0  # archives closed so far (by the cap or idle): tests and the bench read it
        self._shut = False

    @property
    def cap(self) -> int:
        return self._cap

    @cap.setter
    def cap(self, value: int) -> None:
        """A new cap (a config reload, on the event loop): open ones beyond it that are not in use
        start closing now, those in use when they are released."""
        lower = value < self._cap
        self._cap = max(1, value)
        if lower:
            self._make_room()
        self._wake()

    def open_count(self) -> int:
        """Holders open now, those being closed included (their descriptors are not free yet)."""
        return len(self._open) + len(self._closing)

    def is_open(self, holder: Holder) -> bool:
        """Whether ``holder`` counts as open (its connections may be used from the event loop without
        a ``use``, synchronously: nothing closes it before the loop's next turn)."""
        return holder in self._open

    @contextlib.asynccontextmanager
    async def use(self, holder: Holder) -> AsyncIterator[None]:
        """Hold ``holder`` open (pinned) for the block; may wait for a slot (module docstring)."""
        slot = await self._acquire(holder)
        try:
            yield
        finally:
            slot.pins -= 1
            slot.last_used = self._clock()
            if slot.pins == 0 and holder in self._open and len(self._open) + len(self._closing) > self._cap:
                self._close_soon(holder)  # over a lowered cap: the one just released goes
            self._wake()

    async def _acquire(self, holder: Holder) -> _Slot:
        while True:
            slot = self._open.get(holder)
            if slot is not None:
                self._open.move_to_end(holder)
                slot.pins += 1
                return slot
            closing = self._closing.get(holder)
            if closing is not None:  # closed just now: opened again once that is done
                await asyncio.shield(closing)
                continue
            if len(self._open) + len(self._closing) < self._cap:
                slot = self._open[holder] = _Slot(pins=1, last_used=self._clock())
                self._opened.set()
                self._make_room()
                return slot
            victim = next((h for h, s in self._open.items() if s.pins == 0), None)
            if victim is not None:
                await asyncio.shield(self._close_soon(victim))
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def shed(self) -> int:
        """Files ran out although the cap was kept (the limit was lower than the cap assumed, or other
        files took them): lower the cap to three quarters of what is open now (``MIN_CAP`` at least)
        and start closing down to it, so the next calls find files free. The new cap; it holds until
        a config reload sets one again."""
        lowered = max(MIN_CAP, self.open_count() * 3 // 4)
        if lowered < self._cap:
            log.warning("kb_open_archives_lowered", cap=lowered, was=self._cap, open=self.open_count(),
                        detail="open files ran out: fewer archives are kept open from now on")
            self._cap = lowered
        self._make_room()
        return self._cap

    def _make_room(self) -> None:
        """Past ``cap - headroom`` open, start closing the least recently used unpinned ones without
        waiting: the next newcomer then finds a free slot instead of waiting for a close (a
        checkpoint and its fsync)."""
        excess = len(self._open) + len(self._closing) - (self._cap - max(MIN_HEADROOM, self._cap // HEADROOM_DIVISOR))
        if excess <= 0:
            return
        for victim in [h for h, s in self._open.items() if s.pins == 0][:excess]:
            self._close_soon(victim)

    def _wake(self) -> None:
        """Let every waiter look again (few wait, and only while every open holder is pinned)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _close_soon(self, holder: Holder) -> asyncio.Task[None]:
        """Close ``holder`` (unpinned, open) now: its connections are detached at once, closed in the
        closer thread; it counts as open until they are."""
        self._open.pop(holder)
        close = holder.detach()
        if self._shut:  # after close_all (a task still ending at shutdown): here and now
            close()
            return asyncio.ensure_future(asyncio.sleep(0))
        # Submitted now, not when the task first runs: close_all's shutdown then waits for it.
        done = self._closer.submit(close)
        task = asyncio.ensure_future(self._finish_close(holder, done))
        self._closing[holder] = task
        return task

    async def _finish_close(self, holder: Holder, done: Future[None]) -> None:
        try:
            await asyncio.wrap_future(done)
        except Exception:  # a close that failed leaves nothing to retry: the connections are gone either way
            log.exception("kb_close_failed")
        finally:
            self.closed += 1
            self._closing.pop(holder, None)
            self._wake()

    async def close_idle(self) -> int:
        """Close every unpinned holder unused for ``idle_s``; how many were closed."""
        now = self._clock()
        idle = [h for h, s in self._open.items() if s.pins == 0 and now - s.last_used >= self._idle_s]
        tasks = [self._close_soon(h) for h in idle]
        if tasks:
            await asyncio.gather(*(asyncio.shield(t) for t in tasks))
        return len(tasks)

    def release_caches(self) -> int:
        """Hand back the page caches of every open holder not in use now (module docstring); how many.
        Synchronous on the event loop: no use can begin on one of them meanwhile."""
        released = 0
        for holder, slot in self._open.items():
            if slot.pins == 0:
                try:
                    holder.release_caches()
                except Exception:  # a cache kept is only memory kept: the others are still released
                    log.exception("kb_release_caches_failed")
                released += 1
        return released

    async def until_open(self, stop: asyncio.Event) -> bool:
        """Wait until a holder is open (not at all when one is); False when ``stop`` came first."""
        while not self._open and not stop.is_set():
            self._opened.clear()
            await wait_any((self._opened, stop))
        return not stop.is_set()

    def next_due(self) -> float:
        """When ``run`` has something to do next (on the clock): the oldest open holder's idle
        close or the next release, whichever comes first (call with a holder open)."""
        oldest = min((s.last_used for s in self._open.values()), default=self._clock())
        return min(oldest + self._idle_s, self._released_at + self._release_s)

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: close idle holders and release the caches of the others every
        ``RELEASE_S``, each when due (module docstring); give freed memory back after either."""
        while True:
            rested = not self._open
            if not await self.until_open(stop):
                return
            if rested:  # nothing was open: the first release is a whole period after this open
                self._released_at = self._clock()
            await wait_any((stop,), max(MIN_SWEEP_S, self.next_due() - self._clock()))
            if stop.is_set():
                return
            freed = await self.close_idle()
            if self._clock() - self._released_at >= self._release_s:
                self._released_at = self._clock()
                freed += self.release_caches()
                if self._on_release is not None:
                    self._on_release()  # the searches' memos with the page caches: what the next minute finds
            if freed:
                await asyncio.get_running_loop().run_in_executor(self._closer, give_back)

    def close_all(self) -> None:
        """At shutdown (nothing is in use any more): close every open holder here, synchronously."""
        self._shut = True
        for holder in list(self._open):
            self._open.pop(holder)
            try:
                holder.detach()()
            except Exception:  # the others are still closed
                log.exception("kb_close_failed")
        self._closer.shutdown(wait=True)  # the closes already under way end first
        self._closing.clear()


async def wait_any(events: tuple[asyncio.Event, ...], timeout: float | None = None) -> None:
    """Return when one of ``events`` is set, or after ``timeout`` seconds (None: no timeout)."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
