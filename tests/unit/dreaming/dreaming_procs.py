"""Child processes of the dreaming tests, run as a script (``python dreaming_procs.py ...``).

Plain subprocesses talking over stdin/stdout, not multiprocessing: its Events and
Queues start a resource-tracker process that outlives the test, and other tests
check that no child process is left behind.

- ``hold HOME AGENT``: take the agent's run lock, claim a night as a running run,
  print ``held``, then wait for a line on stdin (the parent may SIGKILL it first).
- ``schedule HOME NOW LOG [hold|crash]``: a scheduler for agent ``alfred``
  (03:00 UTC, no stagger) whose fake clock stands at NOW. Each run is appended to
  LOG; ``hold`` keeps a run going until a line arrives on stdin, ``crash`` ends
  the process mid-run (lock held, night claimed). Once the loop is idle it prints
  ``runs N`` (runs it started) and exits.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

WAIT = 60.0  # seconds either side waits for the other (a deadline, not a pause)
SCRIPT = Path(__file__)


def spawn(*args: str) -> subprocess.Popen[str]:
    """Start this script with ``args``; its stdin and stdout are pipes (text)."""
    return subprocess.Popen([sys.executable, str(SCRIPT), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, wait for it, close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(WAIT)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def _hold(home: str, agent_id: str) -> None:
    from services.dreaming.schedule.state import RUNNING, RunSummary, StateStore

    with StateStore(Path(home)).lock(agent_id) as run:
        run.claim_night(date(2024, 6, 1), RunSummary("r-child", "schedule", "auto", RUNNING, night="2024-06-01"))
        print("held", flush=True)
        sys.stdin.readline()


def _schedule(home: str, now: str, log: str, how: str) -> None:
    from dreaming_fakes import FakeClock, FakeRunner, settle
    from dreaming_helpers import settings

    from services.dreaming.model.values import RunReport
    from services.dreaming.schedule.scheduler import Scheduler
    from services.dreaming.schedule.state import StateStore

    class SharedRunner(FakeRunner):
        async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{os.getpid()} {agent_id} {night.isoformat()}\n")
            if how == "crash":
                os._exit(3)  # dies with the lock held and the night claimed
            if how == "hold":
                await asyncio.to_thread(sys.stdin.readline)
            return await super().run(agent_id, night, run_id)

    async def main() -> None:
        clock = FakeClock(datetime.fromisoformat(now))
        runner = SharedRunner(clock)
        agents = {"alfred": settings(dream_hour=3, dream_minute=0, stagger_window_minutes=0)}
        scheduler = Scheduler(lambda: agents, runner, StateStore(Path(home)), clock)
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.serve(stop))
        await settle(scheduler, clock)
        print(f"runs {len(runner.runs)}", flush=True)
        stop.set()
        await task

    asyncio.run(main())


if __name__ == "__main__":
    import structlog

    sys.path.insert(1, str(SCRIPT.parents[2]))  # tests/, as pytest has it: dreaming_fakes imports bench_modules

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is our reply channel
    command, *rest = sys.argv[1:]
    if command == "hold":
        _hold(rest[0], rest[1])
    else:
        _schedule(rest[0], rest[1], rest[2], rest[3] if len(rest) > 3 else "")
