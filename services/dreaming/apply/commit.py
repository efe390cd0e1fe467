"""Writing a run's plan: pruned archive first, then backup, compare-and-swap, journal.

For each memory file the plan changed (MEMORY.md, then USER.md):

1. The file is read again. If it differs from the text the plan started from
   (an agent or the file API wrote it during the run), the file is left alone
   and its ops are recorded as aborted. A file that does not exist yet reads
   as "" and is created by step 4 (unless someone else creates it first).
2. Every block the ops take out of it (a remove's text, a replace's old text)
   is appended to ``memory/archive/pruned.md`` under a heading naming the file,
   the section it stood in, the date, the run and the op, so it stays
   searchable. The block is the whole lines the removed text stood in, as they
   were: a replace of part of a line ("every 90 days" → "every 30 days")
   archives the line it changed, so the old fact is found in its own words, not
   only the fragment. All of a file's blocks go in one append (one durable
   write). Nothing is cut before it is archived.
3. The pre-image goes to ``.dreaming/backups/<file>.<run id>`` (newest
   ``BACKUPS_KEPT`` per file), only now that a change is about to commit.
4. The new text replaces the file through ``gateway.atomic.write_atomic``
   with the text read in step 1 as the expected content, or "must not exist"
   for a new file (a real CAS among the suite's writers; see
   gateway/atomic.py for the window that remains). A
   conflict aborts the file, and pruned.md gets a line saying those blocks were
   not removed after all.
5. The file's ops are appended to the journal under the folder lock, once the
   compare-and-swap has passed and just before the rename (``before_rename``),
   so a crash right after the rename still finds them there; a crash before it
   leaves them in the journal of a file still at their ``hashBefore``, which
   ``journal.settle`` marks undone when dreaming starts again.

Episodic adds are appended to their topic notes (confined to the workspace by
real path, never through a link) the same way, one CAS append each.

Memory files that are links are never written through: the run skips them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from services.dreaming.apply.applier import Plan
from services.dreaming.apply.files import Unsafe, append_text, backup, confined
from services.dreaming.model.edit import CONTEXT_CHARS, Edit, sha256
from services.dreaming.model.values import OpResult
from services.dreaming.records import journal

PRUNED = "memory/archive/pruned.md"


@dataclass(frozen=True)
class Pruned:
    """A block an op took out of a memory file, as archived (the recall check looks for it)."""

    op_id: str
    file: str
    text: str


@dataclass
class CommitOutcome:
    written: dict[str, tuple[str, str]] = field(default_factory=dict)  # file → (pre-image, new text)
    aborted: dict[str, str] = field(default_factory=dict)  # file → why it was left alone
    results: list[OpResult] = field(default_factory=list)
    pruned: list[Pruned] = field(default_factory=list)
    records: list[journal.Record] = field(default_factory=list)


def archived(edit: Edit) -> str:
    """What the pruned archive keeps of ``edit``: the whole lines its removed text stood in."""
    return edit.lines or edit.removed


def pruned_block(edit: Edit, run_id: str, date: str) -> str:
    where = " › ".join((edit.file, *edit.heading_path))
    text = archived(edit)
    body = text if text.endswith("\n") else text + "\n"
    number = edit.op_id.rsplit("/", 1)[-1]
    kind = edit.kind if text.rstrip("\r\n") == edit.removed.rstrip("\r\n") else f"{edit.kind} of part of this text"
    return f"\n## Removed from {where} · {date} · run {run_id} op {number} ({kind})\n\n{body}"


def _abort(out: CommitOutcome, plan: Plan, name: str, reason: str) -> None:
    out.aborted[name] = reason
    out.results = [
        OpResult(r.op_id, r.proposal, "skipped", f"aborted: {reason}", file=r.file) if r.file == name and r.status == "applied" else r
        for r in out.results
    ]


def _commit_file(workspace: Path, plan: Plan, name: str, run_id: str, now: str, out: CommitOutcome) -> None:
    edits = [e for e in plan.edits if e.file == name]
    original, new = plan.originals[name], plan.texts[name]
    try:
        path = confined(workspace, name)
        raw: bytes | None = path.read_bytes()
    except FileNotFoundError:
        raw = None  # not written yet: the write creates it (and fails if someone else did meanwhile)
    except Unsafe as exc:
        _abort(out, plan, name, str(exc))
        return
    try:
        current = "" if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _abort(out, plan, name, f"{name} is not valid UTF-8 (byte {exc.start}); dreaming does not rewrite it (fix it on disk)")
        return
    if current != original:
        _abort(out, plan, name, f"{name} changed on disk during the run (compare-and-swap); nothing written to it")
        return
    archive = confined(workspace, PRUNED)
    blocks = [e for e in edits if e.removed]
    if blocks:  # one append for the file's blocks: pruned.md is rewritten once, not once per block
        append_text(archive, "".join(pruned_block(edit, run_id, now[:10]) for edit in blocks))
    backup(workspace, name, original, run_id)
    records = [journal.edit_record(run_id, e, now) for e in edits]
    try:
        # Journaled under the folder lock once the compare-and-swap passed, just before the rename:
        # a crash after the rename still finds the edits; one before it leaves them in the journal
        # of a file still at their hashBefore, which journal.settle marks undone at the next start.
        write_atomic(path, new.encode("utf-8"), expected=None if raw is None else original.encode("utf-8"),
                     before_rename=lambda: journal.append(workspace, records))
    except WriteConflict:
        if blocks:
            ops = ", ".join(e.op_id for e in blocks)
            append_text(archive, f"\n(Run {run_id}: {name} changed during the run, so {ops} did not remove the blocks above; they are still in {name}.)\n")
        _abort(out, plan, name, f"{name} changed on disk just before the write (compare-and-swap); nothing written to it")
        return
    out.written[name] = (original, new)
    out.pruned += [Pruned(e.op_id, name, archived(e)) for e in blocks]
    out.records += records


def _append_episodic(workspace: Path, rel: str, block: str, result: OpResult, run_id: str, now: str, out: CommitOutcome) -> OpResult:
    try:
        before, inserted = append_text(confined(workspace, rel), block)
    except (Unsafe, WriteConflict, OSError) as exc:
        return OpResult(result.op_id, result.proposal, "skipped", f"not written: {exc}", file=rel)
    after = before + inserted
    edit = Edit(
        op_id=result.op_id, file=rel, kind="append", offset=len(before), removed="", inserted=inserted,
        before=before[-CONTEXT_CHARS:], after="", hash_before=sha256(before), hash_after=sha256(after),
        reason=result.proposal.reason, at_start=len(before) <= CONTEXT_CHARS, at_end=False,
    )
    out.records.append(journal.edit_record(run_id, edit, now))
    return result


def commit(workspace: Path, plan: Plan, run_id: str, now: str) -> CommitOutcome:
    """Write ``plan`` (module docstring). ``now``: the run's ISO time. Journal records are returned
    in ``records`` and appended to the journal here too (a memory file's just before its rename)."""
    out = CommitOutcome(results=list(plan.results))
    for name in plan.changed():
        _commit_file(workspace, plan, name, run_id, now, out)
    journaled = len(out.records)
    for rel, block, result in plan.appends:
        done = _append_episodic(workspace, rel, block, result, run_id, now, out)
        out.results = [done if r.op_id == result.op_id else r for r in out.results]
    journal.append(workspace, out.records[journaled:])
    return out
