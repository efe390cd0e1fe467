"""Entry points of the child processes in the dreaming tests (started with the spawn method,
which imports this module by name: the test dir is on the sys.path the child is given)."""

from __future__ import annotations

from datetime import date
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

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
