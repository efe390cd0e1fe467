"""What the dreaming process does for one agent: scheduled nights, manual runs, accept, reject, revert, status.

Every operation that can write an agent's memory holds the agent's run lock
(``state.RunLock``, a flock shared with other dreaming processes), so runs,
accepts and reverts of one agent never overlap: a second one is refused with
ABORTED while the first runs. At most ``MAX_CONCURRENT_RUNS`` runs go at once
across agents, scheduled and manual alike (reviewers cost money and CPU).

Scheduled nights (``check`` and ``run``, driven by ``scheduler.Scheduler``,
which holds the lock and claims the night) keep to the quiet window
(``schedule.quiet``). Manual runs skip the quiet window and the once-a-night
rule, and read the whole lookback window. ``enabled: false`` or
``maxChangesPerRun: 0`` make every run a no-op that writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, datetime

import structlog

from gateway.config import AgentConfig, Config
from gateway.errors import Aborted, NotFound, Unavailable
from gateway.forgetting import Target, Tombstones
from services.dreaming import nightly
from services.dreaming.forget import run as forget_run
from services.dreaming.history import explain, pending, reject, runs
from services.dreaming.history.digest import AuditDigests
from services.dreaming.history.health import Health, OpCounts, health_of
from services.dreaming.history.revert import RevertResult, revert_run
from services.dreaming.model.budgets import budgets_of
from services.dreaming.model.values import (
    ACCEPT,
    AUTO,
    MANUAL,
    SCHEDULE,
    OpResult,
    RunReport,
    iso,
)
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.records import audit
from services.dreaming.schedule import quiet
from services.dreaming.schedule.quiet import ActivitySource
from services.dreaming.schedule.scheduler import Readiness, Scheduler, schedulable
from services.dreaming.schedule.state import Busy, RunLock, RunSummary, StateStore
from services.dreaming.vault import kept

log = structlog.get_logger()

MAX_CONCURRENT_RUNS = 2


@dataclass(frozen=True)
class Status:
    agent_id: str
    scheduled: bool
    mode: str
    next_run_at: str
    last_run: RunSummary | None
    pending: list[OpResult]
    last_night: str
    why_not: str = ""
    last_ops: OpCounts = OpCounts()
    health: Health = Health()
    running: str = ""
    kept_promotions: int = 0


def why_not_scheduled(agent: AgentConfig) -> str:
    settings = agent.dreaming
    if not settings.enabled:
        return "dreaming is off for this agent (dreaming.enabled is false)"
    if settings.max_changes_per_run <= 0:
        return "dreaming makes no changes for this agent (dreaming.maxChangesPerRun is 0)"
    return ""


class Dreamer:
    """The dreaming process's work (module docstring). ``config()`` gives the config in force;
    ``digests`` keeps what statuses read of each audit.jsonl (``history/digest.py``)."""

    def __init__(
        self,
        config: Callable[[], Config],
        store: StateStore,
        deps: nightly.Deps,
        activity: ActivitySource,
        digests: AuditDigests | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._deps = deps
        self._activity = activity
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_RUNS)
        self._reverts: set[asyncio.Future[RevertResult]] = set()  # running reverts (shielded from their callers)
        self._forgets: set[asyncio.Future[forget_run.Forgotten]] = set()  # running forgets (shielded alike)
        self._running: dict[str, str] = {}  # agent id -> the step its run in progress is at
        self._digests = digests if digests is not None else AuditDigests()
        self.scheduler: Scheduler | None = None

    def _agent(self, agent_id: str) -> AgentConfig:
        agent = self._config().agent(agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found")
        return agent

    # --- the scheduler's side (it holds the lock and claims the night) ------------

    async def check(self, agent_id: str, night: date) -> Readiness:
        agent = self._config().agent(agent_id)
        if agent is None:
            return Readiness.skip("the agent is no longer configured")
        return await quiet.check(agent, night, self._deps.now(), self._activity)

    async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
        agent = self._agent(agent_id)
        with self._tracked(agent.id) as on_step:
            async with self._slots:
                return await nightly.run(agent, self._deps, mode=agent.dreaming.mode, trigger=SCHEDULE, run_id=run_id,
                                         on_step=on_step)

    @contextmanager
    def _tracked(self, agent_id: str) -> Iterator[Callable[[str], None]]:
        """While the block runs, ``status`` says a run of ``agent_id`` is at the step last given to
        the callable it yields (``starting`` until the first)."""
        self._running[agent_id] = "starting"
        try:
            yield lambda step: self._running.__setitem__(agent_id, step)
        finally:
            self._running.pop(agent_id, None)

    # --- operations of the RPCs ---------------------------------------------------

    async def _locked(self, agent: AgentConfig) -> RunLock:
        lock = self._store.lock(agent.id)
        try:
            await asyncio.to_thread(lock.acquire)
        except Busy:
            raise Aborted(f"a dreaming run of agent {agent.id!r} is in progress; try again when it ends") from None
        return lock

    def _noop(self, agent: AgentConfig, mode: str, trigger: str, reason: str) -> RunReport:
        at = iso(self._deps.now())
        return RunReport(run_id="", agent_id=agent.id, mode=mode, trigger=trigger, status="nothing", reason=reason,
                         started_at=at, finished_at=at)

    async def run_now(self, agent: AgentConfig, mode: str) -> RunReport:
        """A manual run (always allowed; never the night's scheduled run). Raises Aborted when busy."""
        mode = mode or agent.dreaming.mode
        why = why_not_scheduled(agent)
        if why:
            return self._noop(agent, mode, MANUAL, why + "; nothing was done")
        lock = await self._locked(agent)
        try:
            with self._tracked(agent.id) as on_step:
                async with self._slots:
                    report = await nightly.run(agent, self._deps, mode=mode, trigger=MANUAL, on_step=on_step)
            await asyncio.to_thread(lock.record_run, RunSummary.from_report(report))
            return report
        finally:
            lock.release()

    async def accept(self, agent: AgentConfig, ids: list[str]) -> RunReport:
        """Apply chosen pending proposals (``history/pending.py``) through the applier. An id that is not
        pending (applied already, already in effect, reverted, a move) is reported, never applied.
        Raises NotFound when no id is pending and one was never proposed, Aborted when a run of the
        agent is in progress."""
        lock = await self._locked(agent)
        try:
            budgets = budgets_of(agent)
            ledger = pending.read_ledger(audit.read_records(agent.workspace))
            texts = pending.current_texts(agent)
            waiting = pending.pending(ledger, texts, budgets)
            wanted = list(dict.fromkeys(ids))
            chosen = [waiting[i].proposal for i in wanted if i in waiting]
            why = {i: pending.why_not(ledger, i, texts, budgets) for i in wanted if i not in waiting}
            unknown = [i for i, reason in why.items() if not reason]
            known = [f"{i}: {reason}" for i, reason in why.items() if reason]
            if not chosen and unknown:
                raise NotFound(f"no pending proposal {', '.join(unknown)} for agent {agent.id!r} "
                               f"(see `gateway dream status {agent.id}`)")
            if not chosen:
                return self._noop(agent, AUTO, ACCEPT, f"{'; '.join(known)}; nothing changed")
            with self._tracked(agent.id) as on_step:
                report = await nightly.run(agent, self._deps, mode=AUTO, trigger=ACCEPT, accepted=chosen, on_step=on_step)
            await asyncio.to_thread(lock.record_run, RunSummary.from_report(report))
        finally:
            lock.release()
        notes = [f"not applied, {pending.NOT_PENDING}: {line}" for line in known]
        notes += [f"not a pending proposal: {', '.join(unknown)}"] if unknown else []
        return replace(report, notes=report.notes + tuple(notes))

    async def reject(self, agent: AgentConfig, ids: list[str], by: str) -> list[reject.Rejection]:
        """Reject chosen pending proposals (``history.reject``), recorded as by ``by`` now. Raises
        FailedPrecondition naming the ids not pending (nothing recorded), Aborted when a run is in progress."""
        lock = await self._locked(agent)
        try:
            return await asyncio.to_thread(reject.reject, agent, ids, by, iso(self._deps.now()))
        finally:
            lock.release()

    async def revert(self, agent: AgentConfig, run_id: str, op_id: str | None) -> RevertResult:
        """Undo a run, or one op of it (``history.revert``): by inverse splice in the files, then the
        shared promotions of those ops through the KB. Raises FailedPrecondition when refused, NotFound
        when the run or op is unknown, Aborted when a run is in progress. Once begun, a revert runs to
        its end and is audited even if its caller goes away (the vault and the journal then agree)."""
        if op_id is not None and "/" not in op_id:
            op_id = f"{run_id}/{op_id}"
        lock = await self._locked(agent)
        task = asyncio.ensure_future(self._revert_locked(agent, lock, run_id, op_id))
        self._reverts.add(task)
        task.add_done_callback(self._reverts.discard)
        return await asyncio.shield(task)

    async def _revert_locked(self, agent: AgentConfig, lock: RunLock, run_id: str, op_id: str | None) -> RevertResult:
        try:
            return await revert_run(agent, self._deps.promoter, run_id, op_id, self._deps.now())
        finally:
            lock.release()

    async def forget(self, agent: AgentConfig, target: Target, *, shared: bool, apply: bool, by: str) -> forget_run.Forgotten:
        """A forget (``forget.run``) under the agent's run lock, so no run journals the text meanwhile.
        Raises Aborted when a run is in progress, Unavailable when the KB could not do its part (the
        message says what was done: running the same forget again finishes it), FailedPrecondition for
        a shared forget of an agent whose shared KB is off. Once begun, it runs to its end (the KB's
        part, the tombstone, the record) even if its caller goes away."""
        forgetter = self._deps.forgetter
        if forgetter is None:
            raise Unavailable("this dreaming process has no KB to forget in")
        lock = await self._locked(agent)
        task = asyncio.ensure_future(self._forget_locked(agent, lock, forgetter, target, shared, apply, by))
        self._forgets.add(task)
        task.add_done_callback(self._forgets.discard)
        return await asyncio.shield(task)

    async def _forget_locked(self, agent: AgentConfig, lock: RunLock, forgetter: forget_run.KbForgetter, target: Target,
                             shared: bool, apply: bool, by: str) -> forget_run.Forgotten:
        try:
            with self._tracked(agent.id) as on_step:
                on_step("forget")
                return await forget_run.forget(agent, target, forgetter, Tombstones(agent.home), shared=shared,
                                               apply=apply, by=by, now=lambda: iso(self._deps.now()))
        except forget_run.KbUnavailable as exc:
            done = exc.report
            raise Unavailable(
                f"the KB could not do its part of forget {done.tombstone_id} ({exc}); the agent's files were "
                f"scrubbed ({done.changed} rewritten) and the tombstone recorded: run the same forget again to finish"
            ) from None
        finally:
            lock.release()

    async def lift_in_vault(self, agent: AgentConfig, tombstone_id: str) -> None:
        """Lift a shared tombstone in the agent's vault (``ShareTombstones``), before the home's copy: every
        host's KB takes it out of its mirror at its next check. Unavailable when the KB cannot answer."""
        forgetter = self._deps.forgetter
        if forgetter is None:
            raise Unavailable("this dreaming process has no KB to lift a shared tombstone in")
        try:
            await forgetter.share_tombstones(agent.id, [], tombstone_id)
        except PeerUnavailable as exc:
            raise Unavailable(f"the KB could not lift {tombstone_id} in the shared vault ({exc}); nothing was "
                              "lifted: try again") from None

    async def explain(self, agent: AgentConfig, query: str, limit: int) -> list[explain.Explained]:
        """An entry's history (``explain.explain``): read-only, no lock. Raises Unavailable when the KB
        cannot answer."""
        try:
            return await explain.explain(agent, self._deps.index, query, limit)
        except PeerUnavailable as exc:
            raise Unavailable(str(exc)) from None

    async def list_runs(self, agent: AgentConfig, size: int, token: str) -> runs.Page:
        """A page of the agent's runs (``history.runs``): read-only, no lock. Raises InvalidArgument
        for a page token that names no run."""
        return await asyncio.to_thread(runs.list_runs, agent, size, token)

    def status(self, agent: AgentConfig) -> Status:
        """The agent's dreaming status, read here (on the caller's thread)."""
        return self._status(agent, self._next_run(agent), self._running.get(agent.id, ""))

    async def statuses(self, agents: Sequence[AgentConfig]) -> list[Status]:
        """The status of each of ``agents``, in order, read in one worker thread (the files are
        read there; what the scheduler and the runs in progress say is taken here first)."""
        live = [(agent, self._next_run(agent), self._running.get(agent.id, "")) for agent in agents]
        return await asyncio.to_thread(lambda: [self._status(*each) for each in live])

    def _next_run(self, agent: AgentConfig) -> datetime | None:
        return self.scheduler.next_run(agent.id) if self.scheduler is not None else None

    def _status(self, agent: AgentConfig, nxt: datetime | None, running: str) -> Status:
        state = self._store.read(agent.id)
        last = state.last_run
        digest = self._digests.get(agent.id, agent.workspace, last.run_id if last is not None else "")
        texts = pending.current_texts(agent) if digest.ledger.proposed else None  # nothing to judge: no read
        waiting = pending.pending(digest.ledger, texts, budgets_of(agent))
        proposals = [OpResult(f"{w.run}/-", w.proposal, "proposed", w.note, file=w.proposal.file) for w in waiting.values()]
        return Status(
            agent_id=agent.id, scheduled=schedulable(agent.dreaming) and nxt is not None, mode=agent.dreaming.mode,
            next_run_at=iso(nxt) if nxt is not None else "", last_run=last, pending=proposals,
            last_night=state.last_night.isoformat() if state.last_night else "", why_not=why_not_scheduled(agent),
            last_ops=digest.facts.ops if last is not None else OpCounts(),
            health=health_of(digest.facts, last, self._deps.now()),
            running=running, kept_promotions=kept.count(agent.workspace),
        )
