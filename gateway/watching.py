"""The one facade over watchfiles: a watch over some folders, its batches, and its re-planning.

Three callers watch files: the watcher (identity files of every workspace), the KB
(its sources, for freshness) and every process's live config (``gateway.live_config``:
config.json in the home folder). All want the same thing from watchfiles: every event,
unfiltered (each caller decides what counts), a short step so an event is seen within
milliseconds, a wake-up every tick even when nothing happens (so the caller can check
whether its roots changed, or its file), and permission errors on a folder ignored rather
than fatal. The watcher and the KB also run the same outer loop: plan a watch over the folders that exist
now, run it until the caller wants a new plan or ``stop`` is set, and when the watch
fails with an ``OSError`` (a root vanished while the watch was set up, the inotify
limit) log it and try again a tick later instead of dying.

``batches`` holds the first part and ``keep_watching`` the second. Stopping is by the
``stop`` event, which watchfiles checks at each step; cancelling the task instead is
also clean, because the generator is closed on the way out (``aclosing``), which stops
watchfiles' thread and releases its inotify instance.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from watchfiles import Change, awatch

__all__ = ["Batch", "Change", "WatchTiming", "batches", "keep_watching", "wait_or_stop"]

log = structlog.get_logger()

Batch = set[tuple[Change, str]]  # (what happened, absolute path); empty when a tick passed quietly


@dataclass(frozen=True)
class WatchTiming:
    """How watchfiles paces a watch: ``step_ms`` between its checks for events, ``debounce_ms``
    over which it gathers one batch, and ``tick_ms`` after which a quiet watch yields an empty batch."""

    debounce_ms: int
    step_ms: int
    tick_ms: int

    @property
    def tick_s(self) -> float:
        return self.tick_ms / 1000


@contextlib.asynccontextmanager
async def batches(
    paths: Sequence[str], stop: asyncio.Event, timing: WatchTiming, *, recursive: bool = True
) -> AsyncIterator[AsyncIterator[Batch]]:
    """One watch over ``paths`` (folders, watched recursively unless ``recursive`` is False: then
    only what happens directly in each folder, one OS watch per folder), as an iterator of batches.

    Use it as ``async with batches(...) as stream: async for batch in stream: ...``. The
    iteration ends when ``stop`` is set; leaving the block (a break, an exception, a
    cancellation) closes the watch. An ``OSError`` from watchfiles reaches the caller.
    """
    stream = awatch(
        *paths,
        watch_filter=None,
        debounce=timing.debounce_ms,
        step=timing.step_ms,
        stop_event=stop,
        rust_timeout=timing.tick_ms,
        yield_on_timeout=True,
        ignore_permission_denied=True,
        recursive=recursive,
    )
    async with contextlib.aclosing(stream):
        yield stream


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
