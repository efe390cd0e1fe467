"""The fake clock of the dreaming scheduler, moved by hand: the dream fidelity bench simulates its
nights on it, and the dreaming unit tests drive the scheduler with it (through tests/bench_modules.py).
Nothing here sleeps for real.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass
class _Sleeper:
    deadline: datetime
    wake: asyncio.Event
    done: asyncio.Future[None]


class FakeClock:
    """A scheduler ``Clock`` (services/dreaming/scheduler.py) that moves only when told: ``set``,
    time passes; ``step``, the wall clock is stepped and every sleeper notices."""

    def __init__(self, now: datetime) -> None:
        self._now = now
        self._sleepers: list[_Sleeper] = []

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, deadline: datetime, wake: asyncio.Event) -> None:
        if wake.is_set() or deadline <= self._now:
            await asyncio.sleep(0)  # a yield, not a wait: the loop must never spin without one
            return
        sleeper = _Sleeper(deadline, wake, asyncio.get_running_loop().create_future())
        self._sleepers.append(sleeper)
        woken: asyncio.Future[Any] = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({sleeper.done, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            self._sleepers.remove(sleeper)

    def set(self, now: datetime) -> None:
        """Time passes up to ``now``: sleepers whose deadline came are woken."""
        self._now = now
        for sleeper in self._sleepers:
            if sleeper.deadline <= now and not sleeper.done.done():
                sleeper.done.set_result(None)

    def step(self, now: datetime) -> None:
        """The wall clock is stepped to ``now`` (either way): every sleeper notices, as
        SystemClock's naps do."""
        self._now = now
        for sleeper in self._sleepers:
            if not sleeper.done.done():
                sleeper.done.set_result(None)

    def parked(self) -> bool:
        """Someone sleeps on this clock and nothing is about to wake them."""
        return any(not s.done.done() and not s.wake.is_set() for s in self._sleepers)

    def next_deadline(self) -> datetime | None:
        pending = [s.deadline for s in self._sleepers if not s.done.done()]
        return min(pending) if pending else None
