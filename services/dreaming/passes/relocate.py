"""Writing the moves of a deterministic pass: archive first, then backup, compare-and-swap, journal.

For a source file (MEMORY.md) and the moves planned from its text:

1. The source is read again; if it changed since the text the moves were
   planned from, nothing is written (the run records why).
2. Each destination gets its moves appended (``moves.archive_block``: a heading
   naming the file, the heading path, the date and the run, then the entries
   byte for byte), one compare-and-swap append per destination, confined to the
   workspace. Nothing leaves the source before it stands in its destination.
3. The source's pre-image goes to the backups; the source is replaced by
   compare-and-swap with the moved spans taken out.
4. The journal gets, per move (one op id each), an ``append`` record for its
   piece of the destination and a ``move`` record for the span taken out of
   the source (with its offset and context in the text as it was when that
   span went, in order; the hashes of a pass's records are of the files before
   and after the whole pass, which may move thousands of entries). So ``gateway dream revert`` undoes a pass like any
   other run, and one op alone too: its entry goes back where it stood and its
   piece comes off the destination, together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from services.dreaming.apply.files import Unsafe, append_text, backup, confined, read_text
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


def relocate(workspace: Path, source: str, planned_from: str, numbered: Sequence[tuple[str, Move]], run_id: str, at: str,
             render: Render = archive_pieces) -> Relocated:
    """Write ``numbered`` moves (``(op id, move)``, planned from ``planned_from``) of ``source``
    (module docstring). ``render(moves, run id, date)`` gives what each destination gets, piece by
    piece (``moves.archive_pieces`` by default; the staleness GC renders its own blocks). Never
    raises for a changed or unsafe file: ``aborted`` says why."""
    out = Relocated(source=source, before=planned_from)
    if not numbered:
        return out
    try:
        path = confined(workspace, source)
        current = read_text(workspace, source)
        targets = {move.target: confined(workspace, move.target) for _, move in numbered}
    except (Unsafe, OSError) as exc:
        out.aborted = str(exc)
        return out
    if current != planned_from:
        out.aborted = f"{source} changed on disk during the run; nothing was moved"
        return out
    new = take(planned_from, [move for _, move in numbered])
    op_of = {id(move): op_id for op_id, move in numbered}
    for target, target_path in targets.items():
        pieces = render([m for _, m in numbered if m.target == target], run_id, at[:10])
        before, inserted = append_text(target_path, "".join(piece for _, piece in pieces))
        after = before + inserted
        offset = len(after) - sum(len(piece) for _, piece in pieces)
        lead = inserted[: offset - len(before)]  # a newline append_text put first, if the file lacked one
        target_before, target_after = sha256(before), sha256(after)  # the destination before and after the pass
        for i, (move, piece) in enumerate(pieces):
            text = (lead + piece) if i == 0 else piece
            start = offset - (len(lead) if i == 0 else 0)
            end = start + len(text)
            edit = Edit(
                op_id=op_of[id(move)], file=target, kind="append", offset=start, removed="", inserted=text,
                # as each piece was when it went in: at the end (later pieces and appends follow it)
                before=after[max(0, start - CONTEXT_CHARS) : start], after="",
                hash_before=target_before, hash_after=target_after, reason=f"from {source}: {move.reason}",
                heading_path=move.heading_path, at_start=start <= CONTEXT_CHARS, at_end=False,
            )
            out.records.append(journal.edit_record(run_id, edit, at))
            offset = end
    backup(workspace, source, planned_from, run_id)
    try:
        write_atomic(path, new.encode("utf-8"), expected=planned_from.encode("utf-8"))
    except WriteConflict:
        for target, target_path in targets.items():
            append_text(target_path, f"\n(Run {run_id}: {source} changed during the run, so the entries above were not taken out of it; they are still there.)\n")
        out.aborted = f"{source} changed on disk just before the write (compare-and-swap); nothing was moved"
        out.records = []
        return out
    out.after = new
    out.ops = list(numbered)
    out.records += _removals(planned_from, numbered, source, at, run_id, new)
    journal.append(workspace, out.records)
    return out
