"""What follows a recall check, in one place: the pre-images go back when Search cannot vouch.

A step of a run that took text out of a file (the applier's commit, the passes' moves, the
staleness GC's moves) asks the KB whether every entry it took out is still found (``recall.py``).
When one is not, when the KB cannot answer, or when the run is cancelled before the answer, each
file the step wrote that ``Check`` blames gets its pre-image back, if it still holds what the step
wrote (compare-and-swap: a file changed since is kept, and the note says where its text is). For
each file put back, each file that keeps a copy of what it lost (``pruned.md``, a destination) gets
a line saying the entries are back, and the journal a ``restore`` record per op (so a revert never
undoes them again). Like a commit, a put-back is a multi-file write under a write-ahead intent
(``intent.py``): a kill at any step leaves the file put back with its lines and its ``restore``
records, or the file as the step wrote it with no line and its ops standing.

A cancellation is not raised here: the files are put back first and ``Verdict.cancelled`` says
so; the caller audits what it must and raises ``CancelledError`` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import AgentConfig
from services.dreaming.apply import intent, recall
from services.dreaming.apply.commit import PRUNED, CommitOutcome
from services.dreaming.apply.files import Unsafe, confined, read_text
from services.dreaming.model.archive import Index
from services.dreaming.model.edit import sha256
from services.dreaming.model.values import OpResult
from services.dreaming.records import journal

RESTORED_BY = intent.PUT_BACK_BY


@dataclass(frozen=True)
class Written:
    """One file a step wrote: its text before and after, the ops that wrote it, and the files
    that keep a copy of what it took out."""

    file: str
    before: str
    after: str
    ops: tuple[str, ...]
    copies: tuple[str, ...]


@dataclass(frozen=True)
class Check:
    """A caller's recall check: its ``name`` in the notes, the ``noun`` it looks for, and whether one
    entry not found puts back every file the step wrote (``together``) or only the files whose ops
    took it out."""

    name: str
    noun: str
    together: bool


APPLIED = Check("the recall check", "removed entry", together=False)


@dataclass
class Verdict:
    """What the check decided: ``lost`` (an entry not found, or no answer), the ops undone (op id →
    why), the notes for the run's report, and whether the run was cancelled meanwhile."""

    lost: bool = False
    undone: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cancelled: bool = False

    def applied_to(self, results: Sequence[OpResult]) -> list[OpResult]:
        """``results`` with each undone op ``restored`` (it changed nothing in the end)."""
        return [replace(r, status="restored", reason=self.undone[r.op_id], chars_removed=0, chars_inserted=0)
                if r.op_id in self.undone else r for r in results]


async def verify(workspace: Path, run_id: str, at: str, written: Sequence[Written],
                 check: Awaitable[Sequence[recall.Missing]], how: Check) -> Verdict:
    """Await ``check`` (the entries Search cannot find) and put back what it blames (module docstring)."""
    try:
        missing = await check
    except asyncio.CancelledError:
        verdict = put_back(workspace, run_id, at, written,
                           {w.file: f"the run was cancelled before {how.name} finished" for w in written})
        verdict.cancelled = True
        return verdict
    except Exception as exc:  # noqa: BLE001 - the KB could not answer: nothing taken out is known to be findable
        return put_back(workspace, run_id, at, written, {w.file: f"{how.name} could not run ({exc})" for w in written})
    return put_back(workspace, run_id, at, written, _blamed(missing, written, how))


def _blamed(missing: Sequence[recall.Missing], written: Sequence[Written], how: Check) -> dict[str, str]:
    """File → why, for each written file ``missing`` puts back (the first entry it lost)."""
    out: dict[str, str] = {}
    for m in missing:
        # The entry on one line, cut with "…", and not its query: a forget finds the text, or its cut
        # start, in that form, never in a query's picked words (docs/concepts/forget.md).
        flat = " ".join(m.entry.split())
        shown = flat if len(flat) <= 120 else flat[:119] + "…"
        why = f'{how.name} could not find a {how.noun} by Search: "{shown}"'
        for w in written:
            if how.together or m.op_id in w.ops:
                out.setdefault(w.file, why)
    return out


def put_back(workspace: Path, run_id: str, at: str, written: Sequence[Written], why: Mapping[str, str]) -> Verdict:
    """Restore each written file ``why`` names (file → reason) that still holds what was written.
    Synchronous: it also runs while the run is cancelled. Raises OSError when the journal cannot be
    written."""
    verdict = Verdict(lost=bool(why))
    for w in written:
        reason = why.get(w.file)
        if reason is None:
            continue
        if not _put_back(workspace, run_id, at, w):
            verdict.notes.append(f"{w.file}: {reason}, but it changed since the run wrote it, so it was kept; "
                                 f"what it lost is in {', '.join(w.copies)}.")
            continue
        verdict.notes.append(f"{w.file} restored to its pre-image: {reason}.")
        verdict.undone.update(dict.fromkeys(w.ops, reason))
    return verdict


def _put_back(workspace: Path, run_id: str, at: str, w: Written) -> bool:
    """Put ``w``'s pre-image back under a write-ahead intent (``intent.py``, a ``putBack``): the
    journal first, then a line in each copy saying the entries are back, then the file by
    compare-and-swap (the commit point), then a ``restore`` record per op with the close. False,
    and the lines taken back off, when the file (or a copy) changed since."""
    line = f"\n(Run {run_id}: {w.file} was restored after the recall check; {', '.join(w.ops)} are undone, so the entries above are back in it.)\n"
    copies: dict[str, tuple[str | None, str, list[journal.Record]]] = {}  # copy → (its text or None: missing, added, records)
    for copy in w.copies:
        with contextlib.suppress(Unsafe, OSError):  # a copy that cannot be read gets no line (as a failed append did not)
            text = read_text(workspace, copy) if confined(workspace, copy).exists() else None
            copies[copy] = (text, *intent.appended(copy, text or "", [intent.Piece(w.ops[0] if w.ops else w.file, line, RESTORED_BY)],
                                                   run_id, at, kind=intent.ARCHIVE))
    records = [r for _, _, mine in copies.values() for r in mine]
    ahead = intent.Intent(run_id, f"{w.ops[0] if w.ops else w.file}/put-back", w.ops, len(records), (
        intent.Image(w.file, sha256(w.after), sha256(w.before)),
        *(intent.Image(c, sha256(t or ""), sha256((t or "") + added), len(added), t is None) for c, (t, added, _) in copies.items()),
    ), intent.PUT_BACK)
    intent.begin(workspace, ahead, records, at)
    try:
        for copy, (text, added, _) in copies.items():
            write_atomic(confined(workspace, copy), ((text or "") + added).encode("utf-8"),
                         expected=None if text is None else text.encode("utf-8"))
        write_atomic(confined(workspace, w.file), w.before.encode("utf-8"), expected=w.after.encode("utf-8"))  # the commit point
    except (WriteConflict, Unsafe, OSError):
        intent.roll_back(workspace, ahead, records, at, RESTORED_BY, frozenset(w.ops))
        return False
    intent.finish(workspace, ahead, at, [journal.undo_record("restore", run_id, op, at, by=RESTORED_BY) for op in w.ops])
    return True


async def check_commit(agent: AgentConfig, index: Index, run_id: str, at: str, done: CommitOutcome) -> Verdict:
    """The recall check of what the applier's commit ``done`` removed: a file whose removed entries
    Search does not all find gets its pre-image back (its removed text stays in ``pruned.md``)."""
    if not done.pruned:
        return Verdict()
    if not agent.knowledge.archive.enabled:
        return Verdict(notes=[f"Recall not checked: the knowledge archive is off for this agent; removed text is in {PRUNED}."])
    files = sorted({p.file for p in done.pruned})
    written = [Written(name, *done.written[name], tuple(r.op_id for r in done.results if r.file == name and r.status == "applied"),
                       (PRUNED,)) for name in files]
    verdict = await verify(agent.workspace, run_id, at, written,
                           recall.check(index, agent.id, agent.workspace, done.pruned), APPLIED)
    if not verdict.lost:
        chars = sum(len(p.text) for p in done.pruned)
        verdict.notes.append(f"Recall checked: every removed entry ({chars:,} chars) is found by Search.")
    return verdict
