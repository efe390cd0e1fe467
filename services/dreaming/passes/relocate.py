"""Writing the moves of a deterministic pass: journal first, then archive, backup, compare-and-swap.

For a source file (MEMORY.md) and the moves planned from its text:

1. The source and every destination are read again; if the source changed since the text the
   moves were planned from, nothing is written (the run records why).
2. The journal gets, in one fsynced append, the relocation's write-ahead intent
   (``apply/intent.py``: every file with the SHA-256 of its text before and after) and, per move
   (one op id each), an ``append`` record for its piece of the destination and a ``move`` record
   for the span taken out of the source (with its offset and context in the text as it was when
   that span went, in order; the hashes of a pass's records are of the files before and after the
   whole pass, which may move thousands of entries).
3. Each destination gets its moves appended (``moves.archive_block``: a heading naming the file,
   the heading path, the date and the run, then the entries byte for byte), one compare-and-swap
   write per destination against the text read in step 1, confined to the workspace. Nothing
   leaves the source before it stands in its destination.
4. The source's pre-image goes to the backups; the source is replaced by compare-and-swap with the
   moved spans taken out. This is the commit point: an ``intentDone`` record closes the intent.
   A conflict or a failed write before it rolls the destinations back at once; a kill anywhere is
   finished forward or back by ``intent.recover`` at the next start or run.

So ``gateway dream revert`` undoes a pass like any other run, and one op alone too: its entry goes
back where it stood and its piece comes off the destination, together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from services.dreaming.apply import intent
from services.dreaming.apply.files import Unsafe, backup, confined, read_text
from services.dreaming.model.edit import CONTEXT_CHARS, Edit, sha256
from services.dreaming.passes.moves import Move, archive_pieces, take
from services.dreaming.records import journal


@dataclass
class Relocated:
    """What a pass wrote: the source's pre-image and new text, the moves per op id, the journal records."""

    source: str
    before: str = ""
    after: str = ""
    aborted: str = ""  # why nothing was written ("" when it was)
    ops: list[tuple[str, Move]] = field(default_factory=list)
    records: list[journal.Record] = field(default_factory=list)


def _removals(text: str, numbered: Sequence[tuple[str, Move]], source: str, at: str, run_id: str, after_all: str) -> list[journal.Record]:
    """One journal ``move`` record per span, taken out in order: its offset and context in the text as
    it was when that span went. Built in one pass without rebuilding the text per move (a pass can
    move thousands of entries); the hashes are the file's before and after the whole pass."""
    out = []
    shift = 0  # chars taken out before the current span
    kept_end = 0  # where the kept text before the current span resumes in ``text``
    tail = ""  # the last CONTEXT_CHARS chars of what is kept so far
    before_hash, after_hash = sha256(text), sha256(after_all)
    for op_id, move in sorted(numbered, key=lambda item: item[1].start):
        before = (tail + text[kept_end : move.start])[-CONTEXT_CHARS:]
        offset = move.start - shift
        remaining = len(text) - shift - len(move.text)  # the text's length once this span is out
        edit = Edit(
            op_id=op_id, file=source, kind="move", offset=offset, removed=move.text, inserted="",
            before=before, after=text[move.end : move.end + CONTEXT_CHARS],
            hash_before=before_hash, hash_after=after_hash, reason=f"{move.reason} → {move.target}",
            heading_path=move.heading_path, at_start=offset <= CONTEXT_CHARS, at_end=offset + CONTEXT_CHARS >= remaining,
        )
        out.append(journal.edit_record(run_id, edit, at))
        tail, kept_end, shift = before, move.end, shift + len(move.text)
    return out


Render = Callable[[Sequence[Move], str, str], list[tuple[Move, str]]]


@dataclass(frozen=True)
class _Destination:
    """What one destination gets: its path, its text before (None: it does not exist yet), what is
    appended (a newline first when it lacked one), and the journal records of its pieces."""

    path: Path
    before: str | None
    inserted: str
    records: list[journal.Record]

    def image(self, name: str) -> intent.Image:
        before = self.before or ""
        return intent.Image(name, sha256(before), sha256(before + self.inserted), len(self.inserted), self.before is None)


def _destination(workspace: Path, target: str, pieces: Sequence[tuple[Move, str]], op_of: dict[int, str], source: str,
                 run_id: str, at: str) -> _Destination:
    """Read ``target`` and plan its append and its ``append`` records. Raises Unsafe or OSError."""
    path = confined(workspace, target)
    before = read_text(workspace, target) if path.exists() else None
    inserted, records = intent.appended(target, before or "", [
        intent.Piece(op_of[id(move)], piece, f"from {source}: {move.reason}", move.heading_path) for move, piece in pieces], run_id, at)
    return _Destination(path, before, inserted, records)


def relocate(workspace: Path, source: str, planned_from: str, numbered: Sequence[tuple[str, Move]], run_id: str, at: str,
             render: Render = archive_pieces) -> Relocated:
    """Write ``numbered`` moves (``(op id, move)``, planned from ``planned_from``) of ``source``
    (module docstring). ``render(moves, run id, date)`` gives what each destination gets, piece by
    piece (``moves.archive_pieces`` by default; the staleness GC renders its own blocks). Never
    raises for a changed or unsafe file: ``aborted`` says why. Raises OSError only when the journal
    cannot be written after a destination was (the next recovery finishes the intent)."""
    out = Relocated(source=source, before=planned_from)
    if not numbered:
        return out
    op_of = {id(move): op_id for op_id, move in numbered}
    by_target: dict[str, list[Move]] = {}
    for _, move in numbered:
        by_target.setdefault(move.target, []).append(move)
    try:
        path = confined(workspace, source)
        if read_text(workspace, source) != planned_from:
            out.aborted = f"{source} changed on disk during the run; nothing was moved"
            return out
        dests = {target: _destination(workspace, target, render(moves, run_id, at[:10]), op_of, source, run_id, at)
                 for target, moves in by_target.items()}
    except (Unsafe, OSError) as exc:
        out.aborted = str(exc)
        return out
    new = take(planned_from, [move for _, move in numbered])
    records = [r for d in dests.values() for r in d.records] + _removals(planned_from, numbered, source, at, run_id, new)
    ahead = intent.Intent(
        run_id, numbered[0][0], tuple(op for op, _ in numbered), len(records),
        (intent.Image(source, sha256(planned_from), sha256(new)), *(d.image(t) for t, d in dests.items())),
    )
    try:
        intent.begin(workspace, ahead, records, at)
    except OSError as exc:
        out.aborted = f"the journal could not be written ({exc}); nothing was moved"
        return out
    writing = source
    try:
        for writing, dest in dests.items():  # nothing leaves the source before it stands in its destination
            before = None if dest.before is None else dest.before.encode("utf-8")
            write_atomic(dest.path, ((dest.before or "") + dest.inserted).encode("utf-8"), expected=before)
        writing = source
        backup(workspace, source, planned_from, run_id)
        write_atomic(path, new.encode("utf-8"), expected=planned_from.encode("utf-8"))
    except (WriteConflict, OSError) as exc:
        why = f"{writing} changed on disk just before the write (compare-and-swap)" if isinstance(exc, WriteConflict) else str(exc)
        intent.roll_back(workspace, ahead, records, at, f"{why}: rolled back")
        out.aborted = f"{why}; nothing was moved"
        return out
    intent.finish(workspace, ahead, at)
    out.after = new
    out.ops = list(numbered)
    out.records = records
    return out
