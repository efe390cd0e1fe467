"""The nightly loop: each agent's scheduled run at its slot, at most once a night.

Rules (the arithmetic is in ``schedule``):

- An agent with ``enabled: false`` or ``maxChangesPerRun: 0`` is not scheduled.
- A night is attempted from its slot until ``CATCH_UP`` (6 h) after it. A
  process that starts, wakes from a suspend, or sees the clock jump forward
  inside that window runs the night late; a night missed by more is not run,
  and only the latest night is ever considered (never a burst of old nights).
- The scheduler holds the agent's run lock (``state.RunLock``) for the whole
  attempt: check, claim, run, record. So runs of one agent never overlap,
  whether the other holder is a task here, RunNow, or another process.
- ``runner.check`` decides first. ``go``: the night is claimed (persisted)
  and only then ``runner.run`` is called. ``retry`` (the agent was active
  within ``quietMinutes``, or the check failed): nothing is claimed and the
  night is tried again after ``max(quietMinutes, 5 min)`` (or the checker's
  ``not_before``, never sooner than 5 min), only within the catch-up window.
  ``skip``: the night is claimed as skipped and not tried again. A run lock
  held elsewhere counts as ``retry`` after 5 min.
- At most ``max_concurrent`` agents' attempts at once (an asyncio.Semaphore).
- The plan is recomputed on ``replan()`` (call it from the config reload
  listener), after every attempt, and at least every ``REPLAN_EVERY``. A clock
  stepped backwards after a run finds the claim and waits for the next night; a
  clock stepped forwards gives at most the one catch-up run.
- Setting the stop event cancels attempts in flight (a run cut short is
  recorded ``interrupted``; its night stays claimed) and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Protocol, TypeVar

import structlog

from gateway.config import DreamingSettings
from services.dreaming.model.values import INTERRUPTED, SCHEDULE, RunReport, new_run_id
from services.dreaming.records.metrics import observe_outcome
from services.dreaming.schedule.loop import REPLAN_EVERY, Clock, WakeLoop
from services.dreaming.schedule.slots import InvalidTimezone, next_slot, night_of, slot
from services.dreaming.schedule.state import RUNNING, Busy, RunLock, RunSummary, StateStore

log = structlog.get_logger()

CATCH_UP = timedelta(hours=6)  # how late a missed or retried night may still run
RETRY_FLOOR = timedelta(minutes=5)  # never two attempts of one night closer than this
T = TypeVar("T")

Agents = Callable[[], Mapping[str, DreamingSettings]]


class SystemClock:
    """The real clock. Sleeps in naps of at most ``MAX_NAP`` seconds and re-reads the
    wall clock after each, so a suspend or a stepped clock is noticed within a nap
    (asyncio's own timers run on the monotonic clock and would not notice). A step
    of more than ``MAX_STEP`` seconds either way ends the sleep early, so the
    scheduler re-plans from the new time."""

    MAX_NAP = 30.0
    MAX_STEP = 60.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime, wake: asyncio.Event) -> None:
        skew = time.time() - time.monotonic()
        while not wake.is_set():
            left = (deadline - self.now()).total_seconds()
            if left <= 0 or abs(time.time() - time.monotonic() - skew) > self.MAX_STEP:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(left, self.MAX_NAP))


class Verdict(Enum):
    GO = "go"
    RETRY = "retry"
    SKIP = "skip"


@dataclass(frozen=True)
class Readiness:
    """What ``NightlyRunner.check`` says about running a night now.

    ``RETRY`` may carry ``not_before`` (e.g. last activity + quietMinutes).
    """

    verdict: Verdict
    reason: str = ""
    not_before: datetime | None = None

    @classmethod
    def go(cls) -> Readiness:
        return cls(Verdict.GO)

    @classmethod
    def retry(cls, reason: str, not_before: datetime | None = None) -> Readiness:
        return cls(Verdict.RETRY, reason, not_before)

    @classmethod
    def skip(cls, reason: str) -> Readiness:
        return cls(Verdict.SKIP, reason)


class NightlyRunner(Protocol):
    """The dreaming pipeline as the scheduler drives it. Both are called with the
    agent's run lock held by the scheduler; neither may take it again."""

    async def check(self, agent_id: str, night: date) -> Readiness:
        """Whether to run ``night`` now (the quiet-window check). Must not change anything."""
        ...

    async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
        """Run the night (already claimed) as run ``run_id``; the report's status is recorded."""
        ...


@dataclass(frozen=True)
class _Plan:
    night: date
    slot: datetime  # when the night is due
    at: datetime  # when it is next attempted (the slot, or a retry)


def schedulable(settings: DreamingSettings) -> bool:
    """Enabled false or maxChangesPerRun 0 makes dreaming a no-op (nothing is scheduled)."""
    return settings.enabled and settings.max_changes_per_run > 0


class Scheduler(WakeLoop):
    """Fires each agent's nightly run; see the module docstring for the rules.

    ``agents`` is called at every re-plan and must return the current settings
    by agent id (the config can reload). Runs go through ``runner``; state lives
    in ``store``; time comes from ``clock``.
    """

    crashed_event = "dreaming_plan_crashed"

    def __init__(
        self, agents: Agents, runner: NightlyRunner, store: StateStore, clock: Clock, *, max_concurrent: int = 2
    ) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        super().__init__(clock)
        self._agents = agents
        self._runner = runner
        self._store = store
        self._sem = asyncio.Semaphore(max_concurrent)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._retry: dict[str, tuple[date, datetime]] = {}  # agent -> (night, next attempt)
        self._done: dict[str, date] = {}  # latest night known claimed, per agent
        self._noted: dict[str, str] = {}  # agent -> the last note logged (not repeated at every re-plan)
        self._settings: Mapping[str, DreamingSettings] = {}

    def next_run(self, agent_id: str) -> datetime | None:
        """When ``agent_id``'s next scheduled attempt is (UTC); None when it is not scheduled
        (unknown, disabled, maxChangesPerRun 0, bad time zone). A past instant means due now
        or in progress."""
        settings = self._current_agents().get(agent_id)
        if settings is None or not schedulable(settings):
            return None
        try:
            return self._plan(agent_id, settings, self._clock.now()).at
        except InvalidTimezone:
            return None

    def kept(self) -> frozenset[str]:
        """The agents this scheduler keeps anything for (a retry, a claimed night, a note)."""
        return frozenset(self._retry) | frozenset(self._done) | frozenset(self._noted)

    def running(self) -> frozenset[str]:
        """The agents with an attempt in flight in this process."""
        return frozenset(self._tasks)

    def in_flight(self) -> list[asyncio.Task[None]]:
        """The attempt tasks in flight (for shutdown and tests)."""
        return list(self._tasks.values())

    def _in_flight(self) -> list[asyncio.Task[None]]:
        return list(self._tasks.values())

    def _current_agents(self) -> Mapping[str, DreamingSettings]:
        try:
            self._settings = dict(self._agents())
        except Exception:  # a broken source keeps the last good plan rather than stopping the loop
            log.exception("dreaming_agents_unavailable")
        return self._settings

    def _tick(self, now: datetime) -> datetime:
        """Start every attempt that is due; the instant of the next one (or of the next re-plan)."""
        agents = self._current_agents()
        deadline = now + REPLAN_EVERY
        for kept in (self._retry, self._done, self._noted):  # an agent removed from the config leaves nothing here
            for agent_id in [a for a in kept if a not in agents]:
                del kept[agent_id]
        for agent_id, settings in agents.items():
            if not schedulable(settings) or agent_id in self._tasks:
                continue  # a finished attempt wakes the loop, which plans the agent again
            try:
                plan = self._plan(agent_id, settings, now)
            except InvalidTimezone as exc:
                self._note(agent_id, "dreaming_bad_timezone", error=str(exc))
                continue
            except (OSError, ValueError) as exc:  # e.g. an id the store refuses
                self._note(agent_id, "dreaming_plan_failed", error=str(exc))
                continue
            if plan.at <= now:
                task = asyncio.create_task(self._attempt(agent_id, settings, plan))
                self._tasks[agent_id] = task
                task.add_done_callback(functools.partial(self._attempt_done, agent_id))
            else:
                deadline = min(deadline, plan.at)
        return deadline

    def _plan(self, agent_id: str, settings: DreamingSettings, now: datetime) -> _Plan:
        done = self._claimed(agent_id)
        night = night_of(now, settings, agent_id)
        due = slot(night, settings, agent_id)
        retry = self._retry.get(agent_id)
        if retry is not None and retry[0] != night:
            del self._retry[agent_id]
            retry = None
        if done is None or night > done:
            if now < due + CATCH_UP:
                at = retry[1] if retry else due
                if at < due + CATCH_UP:
                    return _Plan(night, due, at)
                self._note(agent_id, "dreaming_night_given_up", night=night.isoformat(),
                           reason="still not ready when the catch-up window closed")
            else:
                self._note(agent_id, "dreaming_night_missed", night=night.isoformat(),
                           reason=f"more than {CATCH_UP} late: not run")
        # The next night after the later of now and the last claimed night.
        base = now if done is None or done < night else max(now, slot(done, settings, agent_id))
        nxt, at = next_slot(base, settings, agent_id)
        return _Plan(nxt, at, at)

    def _claimed(self, agent_id: str) -> date | None:
        known = self._done.get(agent_id)
        on_disk = self._store.read(agent_id).last_night  # another process may have claimed
        if known is None or (on_disk is not None and on_disk > known):
            return on_disk
        return known

    def _mark_done(self, agent_id: str, night: date | None) -> None:
        if night is not None and (agent_id not in self._done or self._done[agent_id] < night):
            self._done[agent_id] = night
        self._retry.pop(agent_id, None)

    def _attempt_done(self, agent_id: str, task: asyncio.Task[None]) -> None:
        self._tasks.pop(agent_id, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("dreaming_attempt_crashed", agent=agent_id, error=repr(task.exception()))
        self._wake.set()

    def _note(self, agent_id: str, event: str, **fields: str) -> None:
        """Log ``event`` unless it is the agent's last note again (the plan is recomputed often)."""
        key = event + repr(sorted(fields.items()))
        if self._noted.get(agent_id) != key:
            self._noted[agent_id] = key
            log.info(event, agent=agent_id, **fields)

    async def _attempt(self, agent_id: str, settings: DreamingSettings, plan: _Plan) -> None:
        async with self._sem:
            now = self._clock.now()
            if now >= plan.slot + CATCH_UP:  # waited for a free place past the window
                self._note(agent_id, "dreaming_night_missed", night=plan.night.isoformat(),
                           reason="the concurrency limit held it past the catch-up window")
                return
            run = self._store.lock(agent_id)
            try:
                try:
                    await _in_thread(run.acquire)
                except Busy:
                    log.info("dreaming_busy", agent=agent_id, night=plan.night.isoformat(), retry_in=str(RETRY_FLOOR))
                    self._retry[agent_id] = (plan.night, now + RETRY_FLOOR)
                    return
                await self._attempt_locked(run, settings, plan)
            except Exception:
                # State not writable, a pipeline bug...: whatever was claimed stays claimed;
                # an unclaimed night is tried again later, never in a tight loop.
                log.exception("dreaming_attempt_failed", agent=agent_id, night=plan.night.isoformat())
                self._retry[agent_id] = (plan.night, self._clock.now() + RETRY_FLOOR)
            finally:
                run.release()

    async def _attempt_locked(self, run: RunLock, settings: DreamingSettings, plan: _Plan) -> None:
        agent_id, night = run.agent_id, plan.night
        last = run.state.last_night
        if last is not None and last >= night:
            self._mark_done(agent_id, last)
            return
        try:
            ready = await self._runner.check(agent_id, night)
        except Exception as exc:  # the check's own failure: try again later, claim nothing
            log.exception("dreaming_check_failed", agent=agent_id, night=night.isoformat())
            ready = Readiness.retry(f"the check failed: {type(exc).__name__}")
        now = self._clock.now()
        if ready.verdict is Verdict.RETRY:
            at = now + max(timedelta(minutes=settings.quiet_minutes), RETRY_FLOOR)
            if ready.not_before is not None:
                at = max(now + RETRY_FLOOR, ready.not_before)
            self._retry[agent_id] = (night, at)
            log.info("dreaming_retry_later", agent=agent_id, night=night.isoformat(), reason=ready.reason,
                     at=at.isoformat())
            return
        run_id = new_run_id(now)
        started = RunSummary(run_id=run_id, trigger=SCHEDULE, mode=settings.mode, status=RUNNING,
                             started_at=now.isoformat(), night=night.isoformat())
        if ready.verdict is Verdict.SKIP:
            skipped = replace(started, status="skipped", reason=ready.reason, finished_at=now.isoformat())
            await _in_thread(run.claim_night, night, skipped)
            self._mark_done(agent_id, run.state.last_night)
            log.info("dreaming_skipped", agent=agent_id, night=night.isoformat(), reason=ready.reason)
            observe_outcome("skipped")
            return
        claimed = await _in_thread(run.claim_night, night, started)
        self._mark_done(agent_id, run.state.last_night)
        if not claimed:
            return
        log.info("dreaming_run_started", agent=agent_id, night=night.isoformat(), run_id=run_id)
        await self._run_claimed(run, started)

    async def _run_claimed(self, run: RunLock, started: RunSummary) -> None:
        night = date.fromisoformat(started.night)
        try:
            report = await self._runner.run(run.agent_id, night, started.run_id)
            summary = replace(RunSummary.from_report(report, night), run_id=started.run_id)
        except asyncio.CancelledError:
            stopped = replace(started, status=INTERRUPTED, reason="the dreaming service stopped mid-run",
                              finished_at=self._clock.now().isoformat())
            with contextlib.suppress(OSError):
                await _in_thread(run.record_run, stopped)
            raise
        except Exception as exc:  # the pipeline's bug: recorded as failed; the night stays claimed
            log.exception("dreaming_run_failed", agent=run.agent_id, night=started.night, run_id=started.run_id)
            observe_outcome("failed")
            summary = replace(started, status="failed", reason=f"the run raised {type(exc).__name__}",
                              finished_at=self._clock.now().isoformat())
        await _in_thread(run.record_run, summary)
        log.info("dreaming_run_finished", agent=run.agent_id, night=started.night, run_id=started.run_id,
                 status=summary.status)


async def _in_thread(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a worker thread. When cancelled, wait for the thread to end before
    re-raising, so the caller's ``finally`` (which drops the run lock) never runs while
    the thread is still writing under that lock."""
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise
