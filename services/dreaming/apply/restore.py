"""What follows a recall check, in one place: the pre-images go back when Search cannot vouch.

A step of a run that took text out of a file (the applier's commit, the passes' moves, the
staleness GC's moves) asks the KB whether every entry it took out is still found (``recall.py``).
When one is not, when the KB cannot answer, or when the run is cancelled before the answer, each
file the step wrote that ``Check`` blames gets its pre-image back, if it still holds what the step
wrote (compare-and-swap: a file changed since is kept, and the note says where its text is). For
each file put back, the journal gets a ``restore`` record per op (so a revert never undoes them
again, and ``journal.settle`` finds a crash between the two), and each file that keeps a copy of
what it lost (``pruned.md``, a destination) gets a line saying the entries are back.

A cancellation is not raised here: the files are put back first and ``Verdict.cancelled`` says
so; the caller audits what it must and raises ``CancelledError`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gateway.config import AgentConfig
from services.dreaming.apply import recall
from services.dreaming.apply.commit import PRUNED, CommitOutcome
from services.dreaming.apply.files import append_text, confined, restore
from services.dreaming.model.archive import Index
from services.dreaming.model.values import OpResult
from services.dreaming.records import journal

RESTORED_BY = "recall check"


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
    Synchronous: it also runs while the run is cancelled."""
    verdict = Verdict(lost=bool(why))
    for w in written:
        reason = why.get(w.file)
        if reason is None:
            continue
        if not restore(workspace, w.file, w.before, w.after):
            verdict.notes.append(f"{w.file}: {reason}, but it changed since the run wrote it, so it was kept; "
                                 f"what it lost is in {', '.join(w.copies)}.")
            continue
        verdict.notes.append(f"{w.file} restored to its pre-image: {reason}.")
        verdict.undone.update(dict.fromkeys(w.ops, reason))
        journal.append(workspace, [journal.undo_record("restore", run_id, op, at, by=RESTORED_BY) for op in w.ops])
        for copy in w.copies:
            append_text(confined(workspace, copy), f"\n(Run {run_id}: {w.file} was restored after the recall check; "
                                                   f"{', '.join(w.ops)} are undone, so the entries above are back in it.)\n")
    return verdict


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
