"""Entry points of the child processes in the dreaming tests (started with the spawn method,
which imports this module by name: the test dir is on the sys.path the child is given)."""

from __future__ import annotations

import asyncio
import os
from datetime import date, datetime
from multiprocessing.connection import Connection
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

from dreaming_fakes import FakeClock, FakeRunner, settle
from dreaming_helpers import settings

from services.dreaming.model import RunReport
from services.dreaming.scheduler import Scheduler
from services.dreaming.state import RUNNING, RunSummary, StateStore

WAIT = 60.0  # seconds a child waits for the parent before giving up (a deadline, not a pause)


def hold_run_lock(home: str, agent_id: str, held: Event, until: Connection) -> None:
    """Take the agent's run lock, claim a night as a running run, say so, and wait for a
    word on ``until`` (a pipe, not an Event: the parent may SIGKILL us while we wait, and a
    killed waiter would leave an Event's internal lock taken)."""
    with StateStore(Path(home)).lock(agent_id) as run:
        run.claim_night(date(2024, 6, 1), RunSummary("r-child", "schedule", "auto", RUNNING, night="2024-06-01"))
        held.set()
        until.poll(WAIT)


class _SharedRunner(FakeRunner):
    """Appends each run to a file shared by the processes; holds the run until ``release``,
    or ends the process mid-run when ``crash`` is set."""

    def __init__(self, clock: FakeClock, log: Path, release: Event | None, crash: bool) -> None:
        super().__init__(clock)
        self.log, self.release, self.crash = log, release, crash

    async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {agent_id} {night.isoformat()}\n")
        if self.crash:
            os._exit(3)  # dies with the lock held and the night claimed
        if self.release is not None:
            await asyncio.to_thread(self.release.wait, WAIT)
        return await super().run(agent_id, night, run_id)


def run_scheduler(home: str, now: str, log: str, out: Queue[tuple[int, int]], release: Event | None = None,
                  crash: bool = False) -> None:
    """A scheduler process for one agent ("alfred", 03:00 UTC, no stagger) whose clock stands
    at ``now``: it runs until the loop is idle, reports (pid, runs it started) and stops."""

    async def main() -> None:
        clock = FakeClock(datetime.fromisoformat(now))
        runner = _SharedRunner(clock, Path(log), release, crash)
        agents = {"alfred": settings(dream_hour=3, dream_minute=0, stagger_window_minutes=0)}
        scheduler = Scheduler(lambda: agents, runner, StateStore(Path(home)), clock)
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.serve(stop))
        await settle(scheduler, clock)
        out.put((os.getpid(), len(runner.runs)))
        stop.set()
        await task

    asyncio.run(main())
