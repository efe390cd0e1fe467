"""Writing a run's plan: journal first, then the pruned archive, backup, compare-and-swap.

For each memory file the plan changed (MEMORY.md, then USER.md):

1. The file is read again. If it differs from the text the plan started from
   (an agent or the file API wrote it during the run), the file is left alone
   and its ops are recorded as aborted. A file that does not exist yet reads
   as "" and is created by step 5 (unless someone else creates it first).
2. The journal gets, in one fsynced append, the commit's write-ahead intent
   (``intent.py``: the file and ``pruned.md`` with the SHA-256 of each before
   and after), the file's ``edit`` records, and one ``archive`` record per
   block that goes to ``pruned.md`` (its text and offset there, so a roll-back
   can take it back off). Nothing is written before the journal says what will be.
3. Every block the ops take out of the file (a remove's text, a replace's old
   text) is appended to ``memory/archive/pruned.md`` under a heading naming the
   file, the section it stood in, the date, the run and the op, so it stays
   searchable. The block is the whole lines the removed text stood in, as they
   were: a replace of part of a line ("every 90 days" → "every 30 days")
   archives the line it changed, so the old fact is found in its own words, not
   only the fragment. All of a file's blocks go in one compare-and-swap write
   against the text read for step 2. Nothing is cut before it is archived.
4. The pre-image goes to ``.dreaming/backups/<file>.<run id>`` (newest
   ``BACKUPS_KEPT`` per file), only now that a change is about to commit.
5. The new text replaces the file through ``gateway.atomic.write_atomic``
   with the text read in step 1 as the expected content, or "must not exist"
   for a new file (a real CAS among the suite's writers; see
   gateway/atomic.py for the window that remains). This is the commit point:
   an ``intentDone`` record closes the intent. A conflict (the file, or
   ``pruned.md``, changed just before its write) or a failed write rolls back at
   once: the blocks come back off ``pruned.md`` and the ops get ``restore``
   records. A kill anywhere is finished forward or back by ``intent.recover``
   at the next start or run, so each removed block ends up in the memory file
   or in ``pruned.md``, never both and never neither, with a journal that says
   which (docs/concepts/guards.md).

Episodic adds are appended to their topic notes (confined to the workspace by
real path, never through a link), one CAS append each, each journaled under the
folder lock once its compare-and-swap passed, just before its rename: a kill
after the rename finds it in the journal, and one before it leaves a record of
a note still at its ``hashBefore``, which ``journal.settle`` marks undone when
dreaming starts again.

Memory files that are links are never written through: the run skips them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from services.dreaming.apply import intent
from services.dreaming.apply.applier import Plan
from services.dreaming.apply.files import Unsafe, append_text, backup, confined, read_text
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


@dataclass(frozen=True)
class _Read:
    """A memory file read again just before its commit: its path and bytes (None: it does not exist),
    and pruned.md's path and text (None: it does not exist, or the commit archives nothing)."""

    path: Path
    raw: bytes | None
    archive: Path
    kept: str | None


def _read_again(workspace: Path, plan: Plan, name: str, archives: bool, out: CommitOutcome) -> _Read | None:
    """``name`` and pruned.md as they are now; None, the file aborted, when it changed since the plan
    began from it or either cannot be read or written."""
    try:
        path = confined(workspace, name)
        raw: bytes | None = path.read_bytes()
    except FileNotFoundError:
        raw = None  # not written yet: the write creates it (and fails if someone else did meanwhile)
    except Unsafe as exc:
        _abort(out, plan, name, str(exc))
        return None
    try:
        current = "" if raw is None else raw.decode("utf-8")
        archive = confined(workspace, PRUNED)
        kept = read_text(workspace, PRUNED) if archives and archive.exists() else None
    except UnicodeDecodeError as exc:
        _abort(out, plan, name, f"{name} is not valid UTF-8 (byte {exc.start}); dreaming does not rewrite it (fix it on disk)")
        return None
    except (Unsafe, OSError) as exc:
        _abort(out, plan, name, f"{PRUNED} cannot take the removed blocks ({exc}); nothing written to {name}")
        return None
    if current != plan.originals[name]:
        _abort(out, plan, name, f"{name} changed on disk during the run (compare-and-swap); nothing written to it")
        return None
    return _Read(path, raw, archive, kept)


def _commit_file(workspace: Path, plan: Plan, name: str, run_id: str, now: str, out: CommitOutcome) -> None:
    edits = [e for e in plan.edits if e.file == name]
    original, new = plan.originals[name], plan.texts[name]
    blocks = [e for e in edits if e.removed]
    now_read = _read_again(workspace, plan, name, bool(blocks), out)
    if now_read is None:
        return
    path, raw, archive, kept = now_read.path, now_read.raw, now_read.archive, now_read.kept
    pieces = [intent.Piece(e.op_id, pruned_block(e, run_id, now[:10]), e.reason, e.heading_path) for e in blocks]
    inserted, copies = intent.appended(PRUNED, kept or "", pieces, run_id, now, kind=intent.ARCHIVE)
    records = [journal.edit_record(run_id, e, now) for e in edits]
    images = [intent.Image(name, sha256(original), sha256(new))]
    if blocks:
        images.append(intent.Image(PRUNED, sha256(kept or ""), sha256((kept or "") + inserted), len(inserted), kept is None))
    ahead = intent.Intent(run_id, edits[0].op_id, tuple(dict.fromkeys(e.op_id for e in edits)), len(records) + len(copies),
                          tuple(images), intent.COMMIT)
    try:
        intent.begin(workspace, ahead, [*records, *copies], now)
    except OSError as exc:
        _abort(out, plan, name, f"the journal could not be written ({exc}); nothing written to {name}")
        return
    writing = PRUNED
    try:
        if blocks:  # one write for the file's blocks: pruned.md is rewritten once, not once per block
            write_atomic(archive, ((kept or "") + inserted).encode("utf-8"), expected=None if kept is None else kept.encode("utf-8"))
        writing = name
        backup(workspace, name, original, run_id)
        write_atomic(path, new.encode("utf-8"), expected=None if raw is None else raw)  # the commit point
    except (WriteConflict, OSError) as exc:
        why = f"{writing} changed on disk just before the write (compare-and-swap)" if isinstance(exc, WriteConflict) else str(exc)
        with contextlib.suppress(OSError):  # left open, the intent is rolled back by the next recovery
            intent.roll_back(workspace, ahead, [*records, *copies], now, f"{why}: rolled back")
        _abort(out, plan, name, f"{why}; nothing written to {name}")
        return
    with contextlib.suppress(OSError):  # left open, the intent is rolled forward by the next recovery
        intent.finish(workspace, ahead, now)
    out.written[name] = (original, new)
    out.pruned += [Pruned(e.op_id, name, archived(e)) for e in blocks]
    out.records += records


def _append_episodic(workspace: Path, rel: str, block: str, result: OpResult, run_id: str, now: str, out: CommitOutcome) -> OpResult:
    def journaled(before: str, inserted: str) -> None:
        # under the folder lock once the compare-and-swap passed, just before the rename: a kill after
        # the rename finds the append in the journal; one before it, a record that journal.settle undoes
        after = before + inserted
        edit = Edit(
            op_id=result.op_id, file=rel, kind="append", offset=len(before), removed="", inserted=inserted,
            before=before[-CONTEXT_CHARS:], after="", hash_before=sha256(before), hash_after=sha256(after),
            reason=result.proposal.reason, at_start=len(before) <= CONTEXT_CHARS, at_end=False,
        )
        record = journal.edit_record(run_id, edit, now)
        journal.append(workspace, [record])
        records.append(record)

    records: list[journal.Record] = []
    try:
        append_text(confined(workspace, rel), block, before_rename=journaled)
    except (Unsafe, WriteConflict, OSError) as exc:
        if records:  # journaled, then the rename failed: the journal says so at once
            with contextlib.suppress(OSError):  # else journal.settle says so at the next start
                journal.append(workspace, [journal.undo_record("restore", run_id, result.op_id, now, by=f"the write failed ({exc})")])
        return OpResult(result.op_id, result.proposal, "skipped", f"not written: {exc}", file=rel)
    out.records += records
    return result


def commit(workspace: Path, plan: Plan, run_id: str, now: str) -> CommitOutcome:
    """Write ``plan`` (module docstring). ``now``: the run's ISO time. Journal records are returned
    in ``records`` (the edits: each is in the journal before its file changes)."""
    out = CommitOutcome(results=list(plan.results))
    for name in plan.changed():
        _commit_file(workspace, plan, name, run_id, now, out)
    for rel, block, result in plan.appends:
        done = _append_episodic(workspace, rel, block, result, run_id, now, out)
        out.results = [done if r.op_id == result.op_id else r for r in out.results]
    return out
