"""Fakes for the dreaming scheduler tests (imported by name: the test dir is on sys.path).

The fake clock that the test moves by hand (bench/harness/clock.py), a fake pipeline that records what the
scheduler asked of it, and ``settle``: run the loop until it is parked on the
clock with no attempt in flight. Nothing here sleeps for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

from bench_modules import bench

from gateway.config import DreamingSettings
from services.dreaming.model.values import RunReport
from services.dreaming.schedule.scheduler import Readiness, Scheduler
from services.dreaming.schedule.state import StateStore

FakeClock = bench("harness.clock").FakeClock  # the one fake clock, the dream fidelity bench's too


async def settle(scheduler: Scheduler, clock: FakeClock) -> None:
    """Let the loop run until it sleeps on the clock and no attempt is in flight."""
    for _ in range(100_000):
        tasks = scheduler.in_flight()
        if tasks:
            await asyncio.wait(tasks)
            continue
        if clock.parked():
            return
        await asyncio.sleep(0)  # a yield to the loop, not a wait
    raise AssertionError("the scheduler never parked on the clock")


class FakeRunner:
    """A ``NightlyRunner`` that records calls. ``verdicts`` decides each check (default: go);
    ``gate``, when set, holds every run until it is set."""

    def __init__(self, clock: FakeClock | None = None, verdicts: Callable[[str, date], Readiness] | None = None) -> None:
        self.clock = clock or FakeClock(datetime.min)  # Harness gives it the clock it drives
        self.verdicts = verdicts or (lambda _agent, _night: Readiness.go())
        self.checks: list[tuple[str, date, datetime]] = []
        self.runs: list[tuple[str, date, datetime]] = []
        self.gate: asyncio.Event | None = None
        self.active = 0
        self.peak = 0
        self.started = asyncio.Condition()
        self.fail: BaseException | None = None

    async def check(self, agent_id: str, night: date) -> Readiness:
        self.checks.append((agent_id, night, self.clock.now()))
        return self.verdicts(agent_id, night)

    async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
        self.runs.append((agent_id, night, self.clock.now()))
        self.active += 1
        self.peak = max(self.peak, self.active)
        async with self.started:
            self.started.notify_all()
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.fail is not None:
                raise self.fail
        finally:
            self.active -= 1
        now = self.clock.now().isoformat()
        return RunReport(run_id=run_id, agent_id=agent_id, mode="auto", trigger="schedule", status="applied",
                         started_at=now, finished_at=now)

    def nights(self, agent_id: str = "alfred") -> list[date]:
        return [night for agent, night, _ in self.runs if agent == agent_id]


class Harness:
    """A scheduler on a temp home with a fake clock and pipeline, driven by the test."""

    def __init__(self, home: Path, agents: dict[str, DreamingSettings], start: datetime, *,
                 max_concurrent: int = 2, runner: FakeRunner | None = None) -> None:
        self.home = home
        self.agents = agents
        self.clock = FakeClock(start)
        self.runner = runner or FakeRunner(self.clock)
        self.runner.clock = self.clock
        self.store = StateStore(home)
        self.scheduler = Scheduler(lambda: self.agents, self.runner, self.store, self.clock,
                                   max_concurrent=max_concurrent)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Harness:
        self._task = asyncio.create_task(self.scheduler.serve(self._stop))
        await self.settle()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def settle(self) -> None:
        await settle(self.scheduler, self.clock)

    async def advance_to(self, end: datetime) -> None:
        """Let time pass up to ``end``, waking the loop at every deadline it set on the way."""
        await self.settle()
        while True:
            deadline = self.clock.next_deadline()
            if deadline is None or deadline > end:
                break
            self.clock.set(deadline)
            await self.settle()
        self.clock.set(end)
        await self.settle()

    async def step(self, now: datetime) -> None:
        """Step the wall clock to ``now``."""
        await self.settle()
        self.clock.step(now)
        await self.settle()
