"""One dreaming run of one agent, in the nightly order.

The order (docs/concepts/dreaming.md "A run, in order"):

1. quiet-window check — scheduled runs only, done by the caller (``dreamer.py``)
   before the night is claimed;
2. read MEMORY.md and USER.md: as they are now, they are the base of the
   applier's bounded-loss cap (a share of each file as the run began, 90%
   when it began over budget), whatever the passes then move out;
3. the deterministic passes (``passes.py``): the terminal compactor, the
   staleness GC (``staleness_run.py``: superseded and aged-out ``memory/**``
   entries to ``memory/archive/stale.md``, retrieved stale entries back) and the
   route-out of episodic blocks when over budget, each written through
   ``relocate`` and the journal and recall-checked;
4. gather the agent's transcripts of the lookback window;
5. the reviewer (zero proposals on any failure; the run goes on);
6. selection (``maxChangesPerRun``; more shrink ops over budget);
7. the applier: ``plan`` (pure), then, in auto mode, ``commit`` (pruned
   archive, backup, CAS, journal); in propose mode nothing is written but the
   audit, and each proposal says what the applier would do with it now;
8. the recall check: every removed entry must be found by Search, else the
   file's pre-image is restored (also when the run is cancelled during the
   check: the run is then audited ``interrupted`` before the cancellation goes on);
9. shared promotion of the applied durable adds (``promotion.py``; only when
   the agent's shared KB is on and in ``auto`` mode; it never fails the run),
   each write journaled so a revert can take it out (``vault_undo.py``);
10. the shared vault's GC: a scheduled run in auto mode asks the KB, which
    runs it once per vault per day (``vault_gc.py``); one note of the run;
11. the audit: one DREAMS.md entry and the audit.jsonl records.

Writing memory restarts no session: MEMORY.md and USER.md are memory files to
the watcher, and memory/ and .dreaming/ are not composed at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from gateway.config import AgentConfig
from services.dreaming.apply import recall
from services.dreaming.apply.applier import Plan, plan
from services.dreaming.apply.commit import (
    PRUNED,
    CommitOutcome,
    Unsafe,
    append_text,
    commit,
    confined,
    read_text,
    restore,
)
from services.dreaming.apply.selection import select
from services.dreaming.history import pending
from services.dreaming.model.budgets import budgets_of, over_budget
from services.dreaming.model.values import (
    ACCEPT,
    INTERRUPTED,
    MEMORY_FILE,
    MEMORY_FILES,
    PROPOSE,
    SCHEDULE,
    FileChange,
    OpResult,
    Promotion,
    Proposal,
    ReviewerOutcome,
    RunReport,
    iso,
    new_run_id,
)
from services.dreaming.passes.run import run_passes
from services.dreaming.records import audit, journal
from services.dreaming.records.metrics import observe_run
from services.dreaming.review.prompt import MemoryFile, build_prompt
from services.dreaming.review.transcripts import gather, read_bounded
from services.dreaming.vault import gc as vault_gc
from services.dreaming.vault import promotion
from services.dreaming.vault import undo as vault_undo

log = structlog.get_logger()

PROMPT_FILE_CHARS = 60_000  # of MEMORY.md / USER.md shown to the reviewer

Review = Callable[[AgentConfig, str], Awaitable[ReviewerOutcome]]


@dataclass(frozen=True)
class Deps:
    """What a run needs from outside: the KB (recall; ``promoter``: shared promotion, none: never
    promoted; ``vault``: the shared vault's GC, none to skip it), the reviewer, and the time."""

    index: recall.Index
    review: Review
    now: Callable[[], datetime]
    promoter: promotion.Promoter | None = None
    vault: vault_gc.Vault | None = None


def _proposed(result: Plan, ledger: pending.Ledger) -> list[OpResult]:
    """Propose mode: each op as a proposal, with what the applier would say now; one that a run
    already applied, or that is already in effect, is ``skipped`` and says why (``pending.py``)."""
    out = []
    for r in result.results:
        why_not = pending.in_propose_mode(ledger, r.proposal, r.reason if r.op_id in result.done else "")
        if why_not:
            out.append(replace(r, status="skipped", reason=why_not, chars_removed=0, chars_inserted=0))
            continue
        reason = "" if r.status == "applied" else f"the applier would skip it now: {r.reason}"
        out.append(replace(r, status="proposed", reason=reason, chars_removed=0, chars_inserted=0))
    return out


async def _recall(agent: AgentConfig, deps: Deps, run_id: str, at: str, done: CommitOutcome, notes: list[str]) -> list[OpResult]:
    """Check recall of what ``done`` removed; restore files whose removals Search cannot find."""
    results = done.results
    if not done.pruned:
        return results
    if not agent.knowledge.archive.enabled:
        notes.append(f"Recall not checked: the knowledge archive is off for this agent; removed text is in {PRUNED}.")
        return results
    try:
        missing = await recall.check(deps.index, agent.id, agent.workspace, done.pruned)
        why = {m.file: f"the recall check could not find a removed entry by Search ({m.query!r}): {m.entry[:120]!r}" for m in missing}
    except Exception as exc:  # noqa: BLE001 - the KB could not answer: nothing removed is known to be findable
        why = {p.file: f"the recall check could not run ({exc})" for p in done.pruned}
    if not why:
        notes.append(f"Recall checked: every removed entry ({sum(len(p.text) for p in done.pruned):,} chars) is found by Search.")
        return results
    return _restore(agent, run_id, at, done, results, why, notes)


def _restore(agent: AgentConfig, run_id: str, at: str, done: CommitOutcome, results: list[OpResult],
             why: dict[str, str], notes: list[str]) -> list[OpResult]:
    """Put back the pre-image of each file in ``why`` (file → reason) that still holds what the run
    wrote; its applied ops become ``restored``. Synchronous: it also runs while the run is cancelled."""
    undo: list[journal.Record] = []
    for name, reason in sorted(why.items()):
        pre_image, written = done.written[name]
        if restore(agent.workspace, name, pre_image, written):
            ops = [r.op_id for r in results if r.file == name and r.status == "applied"]
            notes.append(f"{name} restored to its pre-image: {reason}.")
            undo += [journal.undo_record("restore", run_id, op, at, by="recall check") for op in ops]
            results = [replace(r, status="restored", reason=reason) if r.op_id in ops else r for r in results]
            archive = confined(agent.workspace, PRUNED)
            append_text(archive, f"\n(Run {run_id}: {name} was restored after the recall check; {', '.join(ops)} are undone.)\n")
        else:
            notes.append(f"{name}: {reason}, but {name} changed since the run wrote it, so it was kept; the removed text is in {PRUNED}.")
    journal.append(agent.workspace, undo)
    return results


async def run(
    agent: AgentConfig,
    deps: Deps,
    *,
    mode: str,
    trigger: str,
    accepted: Sequence[Proposal] | None = None,
    run_id: str | None = None,
) -> RunReport:
    """One run (module docstring). ``accepted``: apply these proposals instead of asking the reviewer
    (``gateway dream accept``). ``run_id``: the id the scheduler claimed the night under (else a new
    one). Never raises for a reviewer's or a file's trouble: the report says it."""
    started = deps.now()
    run_id, at = run_id or new_run_id(started), iso(started)
    workspace = agent.workspace
    notes: list[str] = []
    base = RunReport(run_id=run_id, agent_id=agent.id, mode=mode, trigger=trigger, status="failed", started_at=at)
    try:
        texts = {name: read_text(workspace, name) for name in MEMORY_FILES}
    except (Unsafe, OSError) as exc:
        return _finish(agent, replace(base, reason=str(exc)), deps)
    originals = dict(texts)  # as the run began: the bounded-loss base (applier.py, guard 4)
    budgets = budgets_of(agent)
    steps = ["quiet-window"] if trigger == SCHEDULE else []
    moved: list[OpResult] = []
    first_op = 1
    if accepted is None:  # (3) the deterministic passes; an accept applies chosen proposals only
        try:
            passes = await run_passes(agent, deps.index, run_id, at, texts[MEMORY_FILE], mode, now=lambda: deps.now().timestamp())
        except asyncio.CancelledError:
            _finish(agent, replace(base, status=INTERRUPTED, reason="cancelled during the recall check of the "
                                   "deterministic passes (MEMORY.md was put back)"), deps)
            raise
        texts[MEMORY_FILE] = passes.text
        notes += passes.notes
        steps += passes.steps
        moved, first_op = passes.results, passes.ops + 1
    # Over budget after the passes, as the reviewer is shown the files: the prompt, the selection and
    # the net-shrink guard follow this; the bounded-loss cap follows ``originals`` (applier.py).
    over = [name for name in MEMORY_FILES if over_budget(texts[name], budgets.of(name))]
    outcome: ReviewerOutcome | None = None
    quiet_night = ""
    if accepted is None:
        settings = agent.dreaming
        gathered = gather(agent.transcripts_dir, started, settings.lookback_days)
        if trigger == SCHEDULE and not gathered.sessions and not over:
            quiet_night = f"no session transcripts in the last {settings.lookback_days} days and nothing over budget; the reviewer was not called"
    chosen: list[Proposal] = []
    left: list[tuple[Proposal, str]] = []
    if accepted is None and quiet_night:
        proposals: Sequence[Proposal] = ()
    elif accepted is None:
        steps += ["reviewer", "selection"]
        memory_file, user_file = (
            MemoryFile(name, read_bounded(workspace / name, PROMPT_FILE_CHARS), len(texts[name]), budgets.of(name), name in over)
            for name in MEMORY_FILES
        )
        prompt = build_prompt(
            agent_id=agent.id, memory=memory_file, user=user_file, write_routing=budgets.write_routing,
            episodic_dir=budgets.episodic_dir, max_changes=settings.max_changes_per_run, transcripts=gathered,
        )
        try:
            outcome = await deps.review(agent, prompt)
        except asyncio.CancelledError:  # nothing was written yet: say so in the audit, then go on
            _finish(agent, replace(base, status=INTERRUPTED, reason="cancelled while the reviewer ran (its caller "
                                   "went away or the service stopped); nothing was changed"), deps)
            raise
        proposals = outcome.reply.proposals
        chosen, left = select(proposals, settings.max_changes_per_run, over)
    else:
        outcome = None
        proposals, chosen, left = accepted, list(accepted), []
    steps.append("applier")
    numbered = {id(p): f"{run_id}/{first_op + i}" for i, p in enumerate(proposals)}
    result = plan(texts, [(numbered[id(p)], p) for p in chosen], budgets, began=originals)
    left_out = [OpResult(numbered[id(p)], p, "skipped", why, file=p.file) for p, why in left]
    if mode == PROPOSE:
        results = moved + _proposed(result, pending.read_ledger(audit.read_records(workspace))) + left_out
        status = "proposed" if results else "nothing"
        files: list[FileChange] = []
    else:
        done = commit(workspace, result, run_id, at)
        if done.pruned:
            steps.append("recall-check")
        notes += [f"{name} left alone: {why}" for name, why in done.aborted.items()]
        try:
            results = await _recall(agent, deps, run_id, at, done, notes) + left_out
        except asyncio.CancelledError:
            # The caller went away (or the service stops) while the KB was asked: what the run
            # removed was never found by Search, so it is put back, as when the KB cannot answer.
            why = {p.file: "the run was cancelled before its recall check finished" for p in done.pruned}
            results = _restore(agent, run_id, at, done, list(done.results), why, notes) + left_out
            results.sort(key=lambda r: int(r.op_id.rsplit("/", 1)[1]))
            _finish(agent, replace(
                base, status=INTERRUPTED, reason="cancelled during the recall check (its caller went away or the service stopped)",
                summary=outcome.reply.summary if outcome else "", reviewer=outcome, ops=tuple(results), notes=tuple(notes),
                files=tuple(FileChange(name, len(originals[name]), len(read_text(workspace, name))) for name in done.written),
            ), deps)
            raise
        results = moved + results
        status = "applied" if any(r.status == "applied" for r in results) else "nothing"
        changed = set(done.written) | ({MEMORY_FILE} if any(r.status == "applied" for r in moved) else set())
        files = [FileChange(name, len(originals[name]), len(read_text(workspace, name))) for name in MEMORY_FILES if name in changed]
    results.sort(key=lambda r: int(r.op_id.rsplit("/", 1)[1]))
    promoted = await promotion.promote_applied(agent, deps.promoter, run_id, results)  # (9)
    notes += _journal_promotions(agent, run_id, at, promoted.promotions)
    reason = outcome.reason if outcome is not None and not outcome.ok else quiet_night
    steps += [*promoted.steps, "audit"]
    report = replace(
        base, status=status, reason=reason, summary=outcome.reply.summary if outcome else "",
        reviewer=outcome, ops=tuple(results), files=tuple(files), notes=tuple(notes + promoted.notes), steps=tuple(steps),
        promotions=tuple(promoted.promotions),
    )
    if promoted.cancelled:  # audited below; then the cancellation goes on
        report = _finish(agent, report, deps)
        raise asyncio.CancelledError
    report = await vault_gc.after_run(deps.vault, agent, report, lambda cut: _finish(agent, cut, deps))  # (10)
    return _finish(agent, report, deps)


def _journal_promotions(agent: AgentConfig, run_id: str, at: str, promotions: Sequence[Promotion]) -> list[str]:
    """Journal what each promotion wrote to the vault, so a revert can take it out (``vault_undo``);
    a note of the run when that fails."""
    records = [vault_undo.write_record(run_id, p, at) for p in promotions if p.write is not None]
    try:
        journal.append(agent.workspace, records)
    except OSError as exc:
        log.error("dream_promotion_not_journaled", agent=agent.id, run=run_id, error=str(exc))
        return [f"The shared promotions of this run could not be journaled ({exc}); a revert cannot take them "
                "out of the vault."]
    return []


def _finish(agent: AgentConfig, report: RunReport, deps: Deps) -> RunReport:
    report = replace(report, finished_at=iso(deps.now()))
    try:
        audit.write_entry(agent.workspace, audit.render(report))
        records = audit.run_records(report)
        if report.trigger == ACCEPT:
            records += [{"kind": "accepted", "run": report.run_id, "id": r.proposal.id} for r in report.ops if r.status == "applied"]
        audit.append_records(agent.workspace, records)
    except OSError as exc:  # the run's outcome stands; say so loudly
        log.error("dream_audit_failed", agent=agent.id, run=report.run_id, error=str(exc))
    log.info("dream_run", agent=agent.id, run=report.run_id, mode=report.mode, trigger=report.trigger,
             status=report.status, reason=report.reason or None,
             applied=sum(1 for r in report.ops if r.status == "applied"), ops=len(report.ops))
    observe_run(report)
    return report


