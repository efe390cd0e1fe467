"""``gateway dream revert AGENT RUN[/OP]``: a run, or one op of it, undone in the files, then in the
shared vault.

The files first, by inverse splice from the journal (``records.journal.plan_revert``: every file
computed in memory before any is written; a file changed meanwhile stops the revert there, and the
ops reverted so far are journaled). The pre-image of MEMORY.md and USER.md goes to the backups.
Then the shared promotions of the ops it covers, through the KB (``vault.undo``). One DREAMS.md
entry and one audit.jsonl ``revert`` record say what was undone and what was left in the vault.
The caller holds the agent's run lock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import datetime

import structlog

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import AgentConfig
from gateway.errors import FailedPrecondition, NotFound
from services.dreaming.apply import intent
from services.dreaming.apply.files import Unsafe, backup, confined, read_text
from services.dreaming.model.values import MEMORY_FILES, FileChange, VaultUndo, iso, new_run_id
from services.dreaming.records import audit, journal
from services.dreaming.vault import undo as vault_undo
from services.dreaming.vault.promotion import Promoter

log = structlog.get_logger()


@dataclass(frozen=True)
class RevertResult:
    """A revert: the ops undone now and before, the files changed, and each op's shared promotion."""

    agent_id: str
    run_id: str
    reverted: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    vault: list[VaultUndo] = field(default_factory=list)


async def revert_run(agent: AgentConfig, promoter: Promoter | None, run_id: str, op_id: str | None, now: datetime) -> RevertResult:
    """Undo ``run_id`` (or just ``op_id``) as the revert of ``now`` (module docstring). Raises
    FailedPrecondition when refused, NotFound when the run or op is unknown."""
    revert_id, at = new_run_id(now), iso(now)
    result, ops = await asyncio.to_thread(_revert_files, agent, run_id, op_id, revert_id, at)
    writes = vault_undo.pending(await asyncio.to_thread(journal.read, agent.workspace), run_id, ops)
    if not result.reverted and not writes:
        return result
    result = replace(result, vault=await vault_undo.undo_all(promoter, agent.id, run_id, writes))
    await asyncio.to_thread(_audit, agent, result, revert_id, at)
    return result


def _revert_files(agent: AgentConfig, run_id: str, op_id: str | None, revert_id: str, at: str) -> tuple[RevertResult, list[str]]:
    """The local part of a revert: ``(result, every op it covers: undone now or before)``."""
    ws = agent.workspace
    intent.recover(ws, at)  # a relocation or commit a killed process left open: made or undone before a revert reads it
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
            if name in MEMORY_FILES:
                backup(ws, name, before, revert_id)
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


def _audit(agent: AgentConfig, result: RevertResult, revert_id: str, at: str) -> None:
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
