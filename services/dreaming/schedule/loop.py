"""The wake loop both schedulers run (the nightly ``scheduler.Scheduler`` and the vault's weekly one):
plan, sleep until the plan's next instant or a ``replan()``, plan again; on stop, cancel what is in
flight and return (docs/concepts/dreaming.md "Schedule").

A subclass gives ``_tick(now)`` (start what is due; the instant to look again) and ``_in_flight()``
(the tasks to cancel at stop). A bug in ``_tick`` is logged under ``crashed_event`` and the plan is
tried again after ``REPLAN_EVERY``: it never ends the loop.
"""

from __future__ import annotations

import abc
import asyncio
from datetime import datetime, timedelta
from typing import ClassVar, Protocol

import structlog

log = structlog.get_logger()

REPLAN_EVERY = timedelta(minutes=10)  # the plan is refreshed at least this often


class Clock(Protocol):
    """Wall-clock time for the schedulers; tests inject a fake one."""

    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...

    async def sleep_until(self, deadline: datetime, wake: asyncio.Event) -> None:
        """Return once ``now() >= deadline`` or ``wake`` is set, whichever comes first
        (returning early is allowed: the scheduler re-plans on every return)."""
        ...


class WakeLoop(abc.ABC):
    """``serve`` and ``replan`` over a subclass's ``_tick`` and ``_in_flight`` (module docstring)."""

    crashed_event: ClassVar[str] = "scheduler_plan_crashed"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @abc.abstractmethod
    def _tick(self, now: datetime) -> datetime:
        """Start what is due at ``now``; the instant to plan again."""

    @abc.abstractmethod
    def _in_flight(self) -> list[asyncio.Task[None]]:
        """The tasks a stop cancels."""

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; then cancel what is in flight and return."""
        self._loop = asyncio.get_running_loop()
        stopper = asyncio.create_task(self._wake_on(stop))
        try:
            while not stop.is_set():
                self._wake.clear()
                now = self._clock.now()
                try:
                    deadline = self._tick(now)
                except Exception:  # a bug in planning must not end the loop
                    log.exception(self.crashed_event)
                    deadline = now + REPLAN_EVERY
                await self._clock.sleep_until(deadline, self._wake)
        finally:
            stopper.cancel()
            tasks = self._in_flight()
            for task in tasks:
                task.cancel()
            await asyncio.gather(stopper, *tasks, return_exceptions=True)

    def replan(self) -> None:
        """Plan again now (after a config change). Safe from any thread."""
        loop = self._loop
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()
