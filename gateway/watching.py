"""The one facade over file watching: a watch over some folders, its batches, and its re-planning.

Three callers watch files: the watcher (identity files of every workspace), the KB
(its sources, for freshness) and every process's live config (``gateway.live_config``:
config.json in the home folder). All want the same thing: every event, unfiltered
(each caller decides what counts), seen within milliseconds, an empty batch when a
tick passes quietly (so the caller can check whether its roots changed, or its file),
and permission errors on a folder ignored rather than fatal. The watcher and the KB
also run the same outer loop: plan a watch over the folders that exist now, run it
until the caller wants a new plan or ``stop`` is set, and when the watch fails with an
``OSError`` (a root vanished while the watch was set up, the inotify limit, a queue
overflow) log it and try again a tick later instead of dying.

On Linux a watch is an inotify instance (``gateway.inotify``) whose descriptor the
event loop reads: nothing runs between events, and a batch is what arrives within
``debounce_ms`` of its first event. Elsewhere watchfiles does the watching, with its
thread checking for events every ``step_ms``; it is imported only there, so a process on Linux
never loads it (docs/operations.md "Memory at rest").

``batches`` holds the first part and ``keep_watching`` the second. Stopping is by the
``stop`` event; cancelling the task instead is also clean, because the generator is
closed on the way out (``aclosing``), which releases the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from gateway import inotify

__all__ = ["Batch", "Change", "WatchTiming", "batches", "keep_watching", "wait_or_stop"]

log = structlog.get_logger()


class Change(enum.IntEnum):
    """What happened to a path: watchfiles' ``Change``, with its values, without importing watchfiles."""

    added = 1
    modified = 2
    deleted = 3


Batch = set[tuple[Change, str]]  # (what happened, absolute path); empty when a tick passed quietly
FALLBACK_TICK_MS = 1000  # the longest quiet tick where watchfiles watches (a nudge waits for it)


@dataclass(frozen=True)
class WatchTiming:
    """How a watch is paced: ``debounce_ms`` over which one batch is gathered, ``tick_ms`` after which
    a quiet watch yields an empty batch, and ``step_ms`` between watchfiles' checks for events (where
    there is no inotify)."""

    debounce_ms: int
    step_ms: int
    tick_ms: int

    @property
    def tick_s(self) -> float:
        return self.tick_ms / 1000


@contextlib.asynccontextmanager
async def batches(
    paths: Sequence[str], stop: asyncio.Event, timing: WatchTiming, *, recursive: bool = True,
    nudge: asyncio.Event | None = None,
) -> AsyncIterator[AsyncIterator[Batch]]:
    """One watch over ``paths`` (folders, watched recursively unless ``recursive`` is False: then
    only what happens directly in each folder, one OS watch per folder), as an iterator of batches.

    Use it as ``async with batches(...) as stream: async for batch in stream: ...``. The watch is
    set up on entering the block (watchfiles': at the first step of the iteration); the iteration
    ends when ``stop`` is set; leaving the block (a break, an exception, a cancellation) closes the
    watch. An ``OSError`` reaches the caller.
    Setting ``nudge`` (it is cleared here) yields a batch at once, empty when nothing happened:
    a caller that waits a long tick is woken that way when it has something to check. Without
    inotify, ticks come at least every ``FALLBACK_TICK_MS`` and a nudge waits for the next one.
    """
    if not inotify.available():
        stream = _watchfiles_batches(paths, stop, timing, recursive)
        async with contextlib.aclosing(stream):
            yield stream
        return
    notify = inotify.Inotify(recursive=recursive)
    try:
        for path in paths:
            notify.add_root(path)
        batched = _inotify_batches(notify, stop, timing, nudge)
        async with contextlib.aclosing(batched):
            yield batched
    finally:
        notify.close()


async def _watchfiles_batches(paths: Sequence[str], stop: asyncio.Event, timing: WatchTiming,
                              recursive: bool) -> AsyncGenerator[Batch, None]:  # fmt: skip
    from watchfiles import awatch  # only where there is no inotify: see the module

    stream = awatch(*paths, watch_filter=None, debounce=timing.debounce_ms, step=timing.step_ms, stop_event=stop,
                    rust_timeout=min(timing.tick_ms, FALLBACK_TICK_MS), yield_on_timeout=True,
                    ignore_permission_denied=True, recursive=recursive)  # fmt: skip
    async with contextlib.aclosing(stream):
        async for changes in stream:
            yield {(Change(int(change)), path) for change, path in changes}


def _change(event: inotify.Event) -> Change:
    if event.root or event.mask & inotify.DELETED:
        return Change.deleted
    return Change.added if event.mask & inotify.ADDED else Change.modified


class _Reader:
    """Drains the instance whenever its descriptor is readable (so the loop never spins on it) and wakes the batcher."""

    def __init__(self, notify: inotify.Inotify) -> None:
        self.notify = notify
        self.pending: Batch = set()
        self.failure: OSError | None = None
        self.wake = asyncio.Event()

    def readable(self) -> None:
        try:
            self.pending.update((_change(e), e.path) for e in self.notify.read())
        except OSError as exc:
            self.failure = exc
        if self.pending or self.failure is not None:
            self.wake.set()

    def take(self) -> Batch:
        if self.failure is not None:
            raise self.failure
        batch, self.pending = self.pending, set()
        self.wake.clear()
        return batch


async def _relay(source: asyncio.Event, target: asyncio.Event, *, clear: bool) -> None:
    while True:
        await source.wait()
        if clear:
            source.clear()
        target.set()
        if not clear:
            return


async def _inotify_batches(notify: inotify.Inotify, stop: asyncio.Event, timing: WatchTiming,
                           nudge: asyncio.Event | None) -> AsyncGenerator[Batch, None]:  # fmt: skip
    loop = asyncio.get_running_loop()
    reader = _Reader(notify)
    relays = [loop.create_task(_relay(stop, reader.wake, clear=False))]
    if nudge is not None:
        relays.append(loop.create_task(_relay(nudge, reader.wake, clear=True)))
    loop.add_reader(notify.fd, reader.readable)
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reader.wake.wait(), timing.tick_s)
            if stop.is_set():
                return
            if reader.pending and timing.debounce_ms:
                await asyncio.sleep(timing.debounce_ms / 1000)  # gather the rest of the burst
            yield reader.take()
    finally:
        loop.remove_reader(notify.fd)
        for relay in relays:
            relay.cancel()


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def keep_watching(
    session: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    timing: WatchTiming,
    *,
    error_event: str,
    after_error: Callable[[], None] | None = None,
) -> None:
    """Run ``session`` (one planned watch: it returns when it wants a new plan) until ``stop`` is set.

    An ``OSError`` out of a session is logged as ``error_event`` and the next session starts a
    tick later; ``after_error`` (if given) runs once that tick has passed.
    """
    while not stop.is_set():
        try:
            await session()
        except OSError as exc:
            log.warning(error_event, error=str(exc))
            await wait_or_stop(stop, timing.tick_s)
            if after_error is not None:
                after_error()
