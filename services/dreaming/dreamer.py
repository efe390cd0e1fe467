"""What the dreaming process does for one agent: scheduled nights, manual runs, accept, revert, status.

Every operation that can write an agent's memory holds the agent's run lock
(``state.RunLock``, a flock shared with other dreaming processes), so runs,
accepts and reverts of one agent never overlap: a second one is refused with
ABORTED while the first runs. At most ``MAX_CONCURRENT_RUNS`` runs go at once
across agents, scheduled and manual alike (reviewers cost money and CPU).

Scheduled nights (``check`` and ``run``, driven by ``scheduler.Scheduler``,
which holds the lock and claims the night) keep to the quiet window: the agent
is active when a session is busy now, or its last activity is less than
``quietMinutes`` ago, activity being the later of the watcher's last report
and the newest transcript file's mtime (the watcher forgets sessions when it
restarts; transcripts do not). A watcher that cannot answer means no run now:
the attempt is recorded (audit.jsonl ``skip``) and retried later. Manual runs
skip the quiet window and the once-a-night rule, and read the whole lookback
window. ``enabled: false`` or ``maxChangesPerRun: 0`` make every run a no-op
that writes nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Protocol

import structlog

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import AgentConfig, Config
from gateway.errors import Aborted, FailedPrecondition, NotFound, Unavailable
from services.dreaming import nightly
from services.dreaming.apply.files import BACKUPS, Unsafe, confined, read_text
from services.dreaming.history import explain, pending
from services.dreaming.model.budgets import budgets_of
from services.dreaming.model.values import (
    ACCEPT,
    AUTO,
    MANUAL,
    SCHEDULE,
    FileChange,
    OpResult,
    RunReport,
    VaultUndo,
    iso,
    new_run_id,
)
from services.dreaming.peer_client import Activity, PeerUnavailable
from services.dreaming.records import audit, journal
from services.dreaming.schedule.scheduler import Readiness, Scheduler, schedulable
from services.dreaming.schedule.state import Busy, RunLock, RunSummary, StateStore
from services.dreaming.vault import undo as vault_undo

log = structlog.get_logger()

MAX_CONCURRENT_RUNS = 2


class ActivitySource(Protocol):
    async def activity(self, agent_id: str) -> Activity: ...


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


@dataclass(frozen=True)
class RevertResult:
    """A revert: the ops undone now and before, the files changed, and each op's shared promotion."""

    agent_id: str
    run_id: str
    reverted: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    vault: list[VaultUndo] = field(default_factory=list)


def newest_transcript(folder: Path) -> datetime | None:
    """The newest ``*.jsonl`` mtime under ``folder`` (links are not followed); None when there is none."""
    newest: float | None = None
    for root, dirs, files in os.walk(folder):
        for name in files:
            if name.endswith(".jsonl"):
                try:
                    mtime = os.lstat(os.path.join(root, name)).st_mtime
                except OSError:
                    continue
                newest = mtime if newest is None else max(newest, mtime)
    return None if newest is None else datetime.fromtimestamp(newest).astimezone()


def why_not_scheduled(agent: AgentConfig) -> str:
    settings = agent.dreaming
    if not settings.enabled:
        return "dreaming is off for this agent (dreaming.enabled is false)"
    if settings.max_changes_per_run <= 0:
        return "dreaming makes no changes for this agent (dreaming.maxChangesPerRun is 0)"
    return ""


class Dreamer:
    """The dreaming process's work (module docstring). ``config()`` gives the config in force."""

    def __init__(
        self,
        config: Callable[[], Config],
        store: StateStore,
        deps: nightly.Deps,
        activity: ActivitySource,
    ) -> None:
        self._config = config
        self._store = store
        self._deps = deps
        self._activity = activity
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_RUNS)
        self._reverts: set[asyncio.Future[RevertResult]] = set()  # running reverts (shielded from their callers)
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
        now = self._deps.now()
        quiet = timedelta(minutes=agent.dreaming.quiet_minutes)
        try:
            seen = await self._activity.activity(agent_id)
        except Exception as exc:  # noqa: BLE001 - the watcher could not answer: not run now, tried again later
            reason = f"the watcher could not say whether the agent is active ({exc}); not run now, tried again later"
            self._record_skip(agent, night, reason)
            return Readiness.retry(reason)
        last = [datetime.fromtimestamp(seen.last_activity_ms / 1000).astimezone()] if seen.last_activity_ms else []
        newest = await asyncio.to_thread(newest_transcript, agent.transcripts_dir)
        if newest is not None:
            last.append(newest)
        if seen.busy_sessions:
            reason = f"{seen.busy_sessions} session(s) busy now"
            self._record_skip(agent, night, reason)
            return Readiness.retry(reason)
        if last and now - max(last) < quiet:
            since = int((now - max(last)).total_seconds() // 60)
            reason = f"active {since} min ago (quietMinutes is {agent.dreaming.quiet_minutes})"
            self._record_skip(agent, night, reason)
            return Readiness.retry(reason, not_before=max(last) + quiet)
        return Readiness.go()

    async def run(self, agent_id: str, night: date, run_id: str) -> RunReport:
        agent = self._agent(agent_id)
        async with self._slots:
            return await nightly.run(agent, self._deps, mode=agent.dreaming.mode, trigger=SCHEDULE, run_id=run_id)

    def _record_skip(self, agent: AgentConfig, night: date, reason: str) -> None:
        log.info("dream_not_now", agent=agent.id, night=night.isoformat(), reason=reason)
        try:
            audit.append_records(agent.workspace, [{"kind": "skip", "at": iso(self._deps.now()),
                                                    "night": night.isoformat(), "trigger": SCHEDULE, "reason": reason}])
        except OSError as exc:
            log.warning("dream_audit_failed", agent=agent.id, error=str(exc))

    # --- operations of the RPCs ---------------------------------------------------

    async def _locked(self, agent: AgentConfig):  # type: ignore[no-untyped-def]
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
            async with self._slots:
                report = await nightly.run(agent, self._deps, mode=mode, trigger=MANUAL)
            await asyncio.to_thread(lock.record_run, RunSummary.from_report(report))
            return report
        finally:
            lock.release()

    async def accept(self, agent: AgentConfig, ids: list[str]) -> RunReport:
        """Apply chosen pending proposals (``pending.py``) through the applier. An id that is not
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
            report = await nightly.run(agent, self._deps, mode=AUTO, trigger=ACCEPT, accepted=chosen)
            await asyncio.to_thread(lock.record_run, RunSummary.from_report(report))
        finally:
            lock.release()
        notes = [f"not applied, {pending.NOT_PENDING}: {line}" for line in known]
        notes += [f"not a pending proposal: {', '.join(unknown)}"] if unknown else []
        return replace(report, notes=report.notes + tuple(notes))

    async def revert(self, agent: AgentConfig, run_id: str, op_id: str | None) -> RevertResult:
        """Undo a run, or one op of it, by inverse splice (journal.py), then the shared promotions of
        those ops through the KB (vault_undo.py). Raises FailedPrecondition when refused, NotFound when
        the run or op is unknown, Aborted when a run is in progress. Once begun, a revert runs to its
        end and is audited even if its caller goes away (the vault and the journal then agree)."""
        if op_id is not None and "/" not in op_id:
            op_id = f"{run_id}/{op_id}"
        lock = await self._locked(agent)
        task = asyncio.ensure_future(self._revert_locked(agent, lock, run_id, op_id))
        self._reverts.add(task)
        task.add_done_callback(self._reverts.discard)
        return await asyncio.shield(task)

    async def _revert_locked(self, agent: AgentConfig, lock: RunLock, run_id: str, op_id: str | None) -> RevertResult:
        try:
            now = self._deps.now()
            revert_id, at = new_run_id(now), iso(now)
            result, ops = await asyncio.to_thread(self._revert_files, agent, run_id, op_id, revert_id, at)
            writes = vault_undo.pending(await asyncio.to_thread(journal.read, agent.workspace), run_id, ops)
            if not result.reverted and not writes:
                return result
            result = replace(result, vault=await vault_undo.undo_all(self._deps.promoter, agent.id, run_id, writes))
            await asyncio.to_thread(self._audit_revert, agent, result, revert_id, at)
            return result
        finally:
            lock.release()

    def _revert_files(self, agent: AgentConfig, run_id: str, op_id: str | None, revert_id: str, at: str) -> tuple[RevertResult, list[str]]:
        """The local part of a revert: ``(result, every op it covers: undone now or before)``."""
        ws = agent.workspace
        records = journal.read(ws)
        edits = [r for r in records if r.get("kind") == "edit" and r.get("run") == run_id]
        if not edits:
            raise NotFound(f"no applied op of run {run_id!r} in the journal of agent {agent.id!r}")
        if op_id is not None and not any(r.get("op") == op_id for r in edits):
            raise NotFound(f"{op_id}: no applied op with this id in run {run_id!r} of agent {agent.id!r} "
                           "(see DREAMS.md for the run's ops)")
        try:
            planned = journal.plan_revert(records, run_id, op_id, lambda rel: read_text(ws, rel))
        except (journal.RevertRefused, Unsafe) as exc:
            raise FailedPrecondition(str(exc)) from None
        result = RevertResult(agent.id, run_id, already=list(planned.already))
        ops = list(dict.fromkeys(r["op"] for r in planned.undone))  # a move has a record per file
        if not planned.undone:
            return result, result.already
        done: set[str] = set()
        for name, text in planned.texts.items():
            before = planned.originals[name]
            try:
                path = confined(ws, name)
                if name in ("MEMORY.md", "USER.md"):
                    (ws / BACKUPS).mkdir(parents=True, exist_ok=True)
                    write_atomic(ws / BACKUPS / f"{name}.{revert_id}", before.encode("utf-8"), mode=0o600)
                write_atomic(path, text.encode("utf-8"), expected=before.encode("utf-8"))
            except (WriteConflict, Unsafe) as exc:
                reverted = list(dict.fromkeys(r["op"] for r in planned.undone if r["file"] in done))
                journal.append(ws, [journal.undo_record("revert", run_id, op, at, by=revert_id) for op in reverted])
                raise FailedPrecondition(
                    f"{name} changed while reverting ({exc}); reverted so far: {', '.join(reverted) or 'nothing'}"
                ) from None
            done.add(name)
            result.files.append(FileChange(name, len(before), len(text)))
        journal.append(ws, [journal.undo_record("revert", run_id, op, at, by=revert_id) for op in ops])
        result.reverted.extend(ops)
        return result, ops + result.already

    def _audit_revert(self, agent: AgentConfig, result: RevertResult, revert_id: str, at: str) -> None:
        """Journal the promotions undone, then one DREAMS.md entry and one audit.jsonl ``revert`` record."""
        ws, run_id = agent.workspace, result.run_id
        left = [u for u in result.vault if u.outcome == vault_undo.LEFT]
        entry = f"## {at[:16].replace('T', ' ')} UTC · revert {revert_id} of run {run_id}\n\n"
        entry += f"- **Reverted:** {', '.join(result.reverted) or 'nothing more in the files'}\n"
        if result.already:
            entry += f"- **Already undone before:** {', '.join(result.already)}\n"
        entry += "".join(f"- **{f.file}:** {f.chars_before:,} → {f.chars_after:,} chars\n" for f in result.files)
        entry += "".join(f"- {vault_undo.line(u)}\n" for u in result.vault)
        if left:
            entry += f"- **Left in the shared vault:** {', '.join(repr(u.note) for u in left)}\n"
        try:
            journal.append(ws, vault_undo.done_records(run_id, result.vault, at, revert_id))
            audit.write_entry(ws, entry)
            audit.append_records(ws, [{
                "kind": "revert", "run": run_id, "by": revert_id, "at": at, "ops": result.reverted, "already": result.already,
                "vault": [{"op": u.op_id, "note": u.note, "project": u.project, "outcome": u.outcome, "reason": u.reason,
                           "deleted": u.deleted} for u in result.vault],
                "notesLeft": [u.note for u in left],
            }])
        except OSError as exc:  # the revert stands (an undo not journaled is only reported again next time); say so loudly
            log.error("dream_audit_failed", agent=agent.id, run=run_id, error=str(exc))
        log.info("dream_reverted", agent=agent.id, run=run_id, ops=result.reverted,
                 vault_undone=[u.note for u in result.vault if u.outcome != vault_undo.LEFT] or None,
                 vault_left=[u.note for u in left] or None)

    async def explain(self, agent: AgentConfig, query: str, limit: int) -> list[explain.Explained]:
        """An entry's history (``explain.explain``): read-only, no lock. Raises Unavailable when the KB
        cannot answer."""
        try:
            return await explain.explain(agent, self._deps.index, query, limit)
        except PeerUnavailable as exc:
            raise Unavailable(str(exc)) from None

    def status(self, agent: AgentConfig) -> Status:
        state = self._store.read(agent.id)
        nxt = self.scheduler.next_run(agent.id) if self.scheduler is not None else None
        ledger = pending.read_ledger(audit.read_records(agent.workspace))
        waiting = pending.pending(ledger, pending.current_texts(agent), budgets_of(agent))
        proposals = [OpResult(f"{w.run}/-", w.proposal, "proposed", w.note, file=w.proposal.file) for w in waiting.values()]
        return Status(
            agent_id=agent.id, scheduled=schedulable(agent.dreaming) and nxt is not None, mode=agent.dreaming.mode,
            next_run_at=iso(nxt) if nxt is not None else "", last_run=state.last_run, pending=proposals,
            last_night=state.last_night.isoformat() if state.last_night else "", why_not=why_not_scheduled(agent),
        )

