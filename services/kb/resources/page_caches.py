"""One budget for SQLite's page caches over every connection the KB holds (docs/capacity.md "Where the KB's memory goes").

Each connection's page cache has a bound of its own (the vault's search connection's is 32 MiB,
a writer's 64 MiB for a full index; an archive's search connection keeps only 8 pages), far above
what one archive needs, and ``handles`` empties the idle ones once a minute. Between two releases
the caches hold what a minute of searches read, which grows with the archives and the vault:
under steady traffic the KB's memory followed the data.
``keep_within`` holds them to ``CACHE_BUDGET_BYTES`` in all: every ``EVERY_S`` it sets SQLite's
soft heap limit to what SQLite holds besides the page caches, plus the budget. Past that limit a
cache reuses its own least recently used pages instead of taking new memory (a read then comes
from the system's file cache, a ``pread`` of a few microseconds); nothing fails, and what SQLite
holds besides page caches (connections, statements, schemas) is not limited. While no archive
or vault is open there are no page caches to hold: ``keep_within`` sleeps until one opens.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

import apsw

CACHE_BUDGET_BYTES: Final = 32 * 2**20
EVERY_S: Final = 5.0


def connections_bytes(op: int) -> int:
    """``op`` (an ``SQLITE_DBSTATUS_*`` measured in bytes) summed over the open connections; one
    busy in another thread at this moment is left out."""
    total = 0
    for conn in apsw.connections():
        with contextlib.suppress(apsw.Error):  # ThreadingViolationError: in use elsewhere
            total += conn.status(op)[0]
    return total


def apply_budget(budget: int = CACHE_BUDGET_BYTES) -> int:
    """Set SQLite's soft heap limit to what it holds now outside page caches plus ``budget``; the limit."""
    outside = apsw.memory_used() - connections_bytes(apsw.SQLITE_DBSTATUS_CACHE_USED)
    limit = max(1, outside + budget)
    apsw.soft_heap_limit(limit)
    return limit


async def keep_within(
    stop: asyncio.Event, until_open: Callable[[asyncio.Event], Awaitable[bool]],
    budget: int = CACHE_BUDGET_BYTES, every_s: float = EVERY_S,
) -> None:
    """``apply_budget`` every ``every_s`` until ``stop`` (on the event loop, where searches run: no
    search is under way meanwhile) while something is open (``until_open``: ``OpenHandles.until_open``,
    False once ``stop`` is set), then lift the limit."""
    try:
        while await until_open(stop):
            apply_budget(budget)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
    finally:
        apsw.soft_heap_limit(0)
