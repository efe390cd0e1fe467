"""One dreaming run of one agent, in the nightly order: each step one call into a wing.

The order (docs/concepts/dreaming.md "A run, in order"):

1. the quiet window: scheduled runs only, checked before the night is claimed
   (``schedule.quiet.check``, through ``dreamer.check``);
2. ``apply.files.read_text``: MEMORY.md and USER.md as the run began, the base of the applier's
   bounded-loss cap (a share of each file as the run began, 90% when it began over budget),
   whatever the passes then move out;
3. ``passes.deterministic.run_passes``: the compactor, the staleness GC and, over budget, the
   route-out, each written through ``relocate`` and the journal and recall-checked;
4. ``review.transcripts.gather``: the agent's transcripts of the lookback window;
5. ``review.ask.ask``: the reviewer (zero proposals on any failure; the run goes on), not called
   on a quiet night (``review.ask.quiet_night``);
6. ``history.pending.drop_rejected``: a proposal whose text was rejected is skipped; then
   ``apply.selection.select``: ``maxChangesPerRun``, more shrink ops over budget;
7. ``apply.applier.plan`` (pure), then in auto mode ``apply.commit.commit`` (pruned archive,
   backup, compare-and-swap, journal); in propose mode nothing is written but the audit, and
   ``history.pending.proposed`` says what the applier would do with each proposal now;
8. ``apply.restore.check_commit``: the recall check, every removed entry found by Search, else
   the file's pre-image is restored;
9. ``vault.promotion.promote_applied``: shared promotion of the promotions kept by earlier runs
   (the KB was unavailable), then of the applied durable adds (only when the agent's shared KB is
   on and in ``auto`` mode; it never fails the run), each write journaled so a revert can take it out;
10. ``vault.gc.after_run``: a scheduled run in auto mode asks the KB for the shared vault's GC;
11. ``records.audit.record_run``: one DREAMS.md entry, the audit.jsonl records, the metrics.

A run cancelled during a step that waits (its caller went away, the service stopped) is audited
``interrupted``, with what it did and put back, before the cancellation goes on.

Writing memory restarts no session: MEMORY.md and USER.md are memory files to
the watcher, and memory/ and .dreaming/ are not composed at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar

from gateway.config import AgentConfig
from gateway.forget_guard import checker
from services.dreaming.apply import applier, commit, files, intent, restore, selection
from services.dreaming.apply.files import Unsafe
from services.dreaming.history import pending
from services.dreaming.model.archive import Index
from services.dreaming.forget.run import KbForgetter
from services.dreaming.model.budgets import budgets_of, over_budget
from services.dreaming.model.values import (
    FAILED,
    INTERRUPTED,
    MEMORY_FILE,
    MEMORY_FILES,
    PROPOSE,
    SCHEDULE,
    FileChange,
    OpResult,
    Proposal,
    ReviewerOutcome,
    RunReport,
    iso,
    new_run_id,
)
from services.dreaming.passes import deterministic
from services.dreaming.records import audit
from services.dreaming.review import ask, transcripts
from services.dreaming.review.ask import Review
from services.dreaming.vault import gc, promotion
from services.dreaming.vault.kept import count as kept_count

T = TypeVar("T")


@dataclass(frozen=True)
class Deps:
    """What a run needs from outside: the KB (recall; ``promoter``: shared promotion, none: never
    promoted; ``vault``: the shared vault's GC, none to skip it; ``forgetter``: a forget's part in the
    KB), the reviewer, and the time."""

    index: Index
    review: Review
    now: Callable[[], datetime]
    promoter: promotion.Promoter | None = None
    vault: gc.Vault | None = None
    forgetter: KbForgetter | None = None  # the KB's part of a forget (none: a forget is refused)


async def run(
    agent: AgentConfig,
    deps: Deps,
    *,
    mode: str,
    trigger: str,
    accepted: Sequence[Proposal] | None = None,
    run_id: str | None = None,
    on_step: Callable[[str], None] = lambda step: None,
) -> RunReport:
    """One run (module docstring). ``accepted``: apply these proposals instead of asking the reviewer
    (``gateway dream accept``): no passes, no reviewer. ``run_id``: the id the scheduler claimed the
    night under (else a new one). ``on_step`` is told each step as it begins (``DreamStatus.running``).
    Never raises for a reviewer's or a file's trouble: the report says it."""
    started = deps.now()
    run_id, at, ws = run_id or new_run_id(started), iso(started), agent.workspace
    base = RunReport(run_id=run_id, agent_id=agent.id, mode=mode, trigger=trigger, status=FAILED, started_at=at)
    try:
        recovered = intent.recover(ws, at)  # a relocation or commit a killed process left open is finished first
        texts = {name: files.read_text(ws, name) for name in MEMORY_FILES}  # (2)
    except (Unsafe, OSError) as exc:
        return _finish(agent, replace(base, reason=str(exc)), deps)
    began, budgets = dict(texts), budgets_of(agent)
    ledger = pending.read_ledger(audit.read_records(ws))
    passes = deterministic.PassOutcome(text=texts[MEMORY_FILE], steps=[])
    if accepted is None:
        on_step("deterministic-passes")
        passes = await _or_interrupted(deterministic.run_passes(  # (3)
            agent, deps.index, run_id, at, texts[MEMORY_FILE], mode, now=lambda: deps.now().timestamp(),
        ), agent, deps, replace(base, reason="cancelled during the recall check of the deterministic passes (MEMORY.md was put back)"))
        texts[MEMORY_FILE] = passes.text
    over = [name for name in MEMORY_FILES if over_budget(texts[name], budgets.of(name))]
    steps = ["quiet-window"] if trigger == SCHEDULE else []
    steps += passes.steps
    outcome: ReviewerOutcome | None = None
    quiet = ""
    proposals: Sequence[Proposal] = accepted or ()
    chosen: list[Proposal] = list(proposals)
    left: list[tuple[Proposal, str]] = []
    if accepted is None:
        gathered = transcripts.gather(agent.transcripts_dir, started, agent.dreaming.lookback_days)  # (4)
        quiet = ask.quiet_night(agent, gathered, over) if trigger == SCHEDULE else ""
    if accepted is None and not quiet:
        steps += ["reviewer", "selection"]
        on_step("reviewer")
        outcome = await _or_interrupted(ask.ask(agent, deps.review, texts, over, budgets, gathered), agent, deps, replace(  # (5)
            base, reason="cancelled while the reviewer ran (its caller went away or the service stopped); nothing was changed"))
        proposals = outcome.reply.proposals
        kept, left = pending.drop_rejected(ledger, list(proposals))
        chosen, over_limit = selection.select(kept, agent.dreaming.max_changes_per_run, over)  # (6)
        left += over_limit
    steps.append("applier")
    on_step("applier")
    first = passes.ops + 1
    numbered = {id(p): f"{run_id}/{first + i}" for i, p in enumerate(proposals)}
    forgotten = checker(agent.home, agent.id)  # the tombstones (docs/concepts/forget.md)
    planned = applier.plan(texts, [(numbered[id(p)], p) for p in chosen], budgets, began=began, forgotten=forgotten)  # (7)
    left_out = [OpResult(numbered[id(p)], applier.withheld(p, forgotten), "skipped", why, file=p.file) for p, why in left]
    summary = outcome.reply.summary if outcome else ""
    report = replace(base, reason=outcome.reason if outcome is not None and not outcome.ok else quiet, summary=summary,
                     reviewer=outcome, notes=(*intent.notes(recovered), *passes.notes))
    if mode == PROPOSE:
        results = passes.results + pending.proposed(planned, ledger) + left_out
        report = replace(report, status="proposed" if results else "nothing")
    else:
        done = commit.commit(ws, planned, run_id, at)
        if done.pruned:
            steps.append("recall-check")
            on_step("recall-check")
        verdict = await restore.check_commit(agent, deps.index, run_id, at, done)  # (8)
        results = verdict.applied_to(done.results) + left_out
        notes = [*report.notes, *(f"{name} left alone: {why}" for name, why in done.aborted.items()), *verdict.notes]
        if verdict.cancelled:
            _finish(agent, replace(
                report, status=INTERRUPTED, reason="cancelled during the recall check (its caller went away or the service "
                "stopped)", ops=tuple(_in_order(results)), notes=tuple(notes), files=_changes(agent, began, set(done.written)),
            ), deps)
            raise asyncio.CancelledError
        results = passes.results + results
        changed = set(done.written) | ({MEMORY_FILE} if any(r.status == "applied" for r in passes.results) else set())
        status = "applied" if any(r.status == "applied" for r in results) else "nothing"
        report = replace(report, status=status, notes=tuple(notes), files=_changes(agent, began, changed))
    results = _in_order(results)
    if deps.promoter is not None and agent.knowledge.shared.enabled and (promotion.promotable(results) or kept_count(ws)):
        on_step("promotion")
    promoted = await promotion.promote_applied(agent, deps.promoter, run_id, at, results)  # (9)
    report = replace(report, ops=tuple(results), notes=(*report.notes, *promoted.notes), promotions=tuple(promoted.promotions),
                     steps=(*steps, *promoted.steps, "audit"),
                     not_promoted=promotion.not_promoted(agent, deps.promoter, mode, results, promoted.promotions))
    if promoted.cancelled:  # audited, then the cancellation goes on
        _finish(agent, report, deps)
        raise asyncio.CancelledError
    if deps.vault is not None and gc.asks(agent, report):
        on_step("vault-gc")
    report = await gc.after_run(deps.vault, agent, report, lambda cut: _finish(agent, cut, deps))  # (10)
    on_step("audit")
    return _finish(agent, report, deps)  # (11)


async def _or_interrupted(step: Awaitable[T], agent: AgentConfig, deps: Deps, report: RunReport) -> T:
    """What ``step`` gives; when the run is cancelled during it, ``report`` is audited as
    ``interrupted`` before the cancellation goes on."""
    try:
        return await step
    except asyncio.CancelledError:
        _finish(agent, replace(report, status=INTERRUPTED), deps)
        raise


def _in_order(results: Sequence[OpResult]) -> list[OpResult]:
    return sorted(results, key=lambda r: int(r.op_id.rsplit("/", 1)[1]))


def _changes(agent: AgentConfig, began: dict[str, str], changed: set[str]) -> tuple[FileChange, ...]:
    """Each memory file in ``changed``: its size as the run began and now."""
    return tuple(FileChange(name, len(began[name]), len(files.read_text(agent.workspace, name)))
                 for name in MEMORY_FILES if name in changed)


def _finish(agent: AgentConfig, report: RunReport, deps: Deps) -> RunReport:
    """``report`` finished now and audited (step 11); one that ended before step 9 says so as why nothing was
    promoted."""
    report = replace(report, finished_at=iso(deps.now()))
    if not report.promotions and not report.not_promoted and report.status in (FAILED, INTERRUPTED):
        report = replace(report, not_promoted=f"the run ended ({report.status}) before its promotion step")
    audit.record_run(agent.workspace, report)
    return report
