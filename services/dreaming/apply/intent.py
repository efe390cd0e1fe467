"""A multi-file write's write-ahead intent: a kill at any step leaves it made or not made, never half.

Three writes of a run change several files, each with one source whose compare-and-swap is the
commit point: a relocation (``passes/relocate.py``) writes each destination, the source's backup,
then the source; the applier's commit of a memory file (``commit.py``) writes ``pruned.md``, the
backup, then the memory file; the recall check's put-back (``restore.py``) writes a line saying
the entries are back in each file that keeps a copy, then the file's pre-image. Before the first
file is written, one journal append (fsynced, never trimmed) holds an ``intent`` record, then
every record of the write: the ``edit`` records (a revert undoes them) and the ``archive``
records, one per piece appended to an archive (a block in ``pruned.md``, a put-back's line: kept
as it was, which a revert leaves alone; an edit's fields, no context). The intent says which write
it is (``write``: ``relocation``, ``commit`` or ``putBack``) and names the source and each
destination with the SHA-256 of its text before and after, and how many chars each destination
gets. Once the source is written, an ``intentDone`` record (``outcome`` forward) closes it, after
a put-back's ``restore`` records in the same append. A write that stops before its commit point
(the source changed meanwhile, a write failed) rolls back at once (``roll_back``).

``recover`` finishes every intent the journal holds without its ``intentDone`` (a process was
killed in between); it runs at dreaming's start and at the start of each run, each revert and each
``gateway migrate-memory --apply``, under the agent's run lock:

- **Forward** when the source holds its post-image: every moved entry is in its destination and
  no longer in the source, every removed block is in ``pruned.md`` and no longer in the memory
  file; the edit records say so and stand.
- **Back** when the source holds its pre-image, or when the intent's records are not all in the
  journal (its append was cut, so no file was written after it): each destination that holds its
  post-image gets its pre-image back (it is removed when the write created it), and one
  changed since loses only the write's pieces, found by their context (``journal.undo``).
  Then a ``restore`` record per op, so a revert has nothing left to undo (none for a put-back:
  its file still holds what the run wrote, its ops stand). A put-back rolled forward gets its
  ``restore`` records then.
- A source someone else changed since (neither image): back when every piece the write took out of
  it still stands in it (for a commit that took nothing out: when not all it added stands in it;
  for a put-back, always), else forward, so an entry is never taken out of both places.

Recovery is itself made of such steps (compare-and-swap writes, then one append), so a kill during
it leaves what the next recovery finishes. A destination changed since in a way that hides the
pieces (the context around them is gone) keeps them, with a line saying they are back in the
source, and the log names it: nothing is ever clobbered.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.atomic import WriteConflict, remove_atomic, write_atomic
from services.dreaming.apply.files import Unsafe, append_text, confined, read_text
from services.dreaming.model.edit import CONTEXT_CHARS, Edit, sha256
from services.dreaming.records import journal

INTENT = "intent"
DONE = "intentDone"
ARCHIVE = "archive"  # a block a write copies to an archive: undone by a roll-back, never by a revert
FORWARD = "forward"
BACK = "back"
RELOCATION = "relocation"
COMMIT = "commit"
PUT_BACK = "putBack"  # the recall check putting a file's pre-image back, with a line in each file keeping a copy
PUT_BACK_BY = "recall check"
RECOVERED_BY = "recovery: the relocation was cut short before its source was written"
COMMIT_RECOVERED_BY = "recovery: the applier's commit was cut short before its memory file was written"
_PIECES = ("edit", ARCHIVE)  # the records of a write that follow its intent


@dataclass(frozen=True)
class Image:
    """A file of a write: the SHA-256 of its text before and after it; a destination's ``cut``
    (the chars appended to it) and whether the write creates it."""

    file: str
    before: str
    after: str
    cut: int = 0
    created: bool = False


@dataclass(frozen=True)
class Intent:
    """What a write is about to do: its run, its id (its first op's), its ops, how many records
    follow the intent in the journal, its files (the source first), and which write it is."""

    run: str
    id: str
    ops: tuple[str, ...]
    records: int
    files: tuple[Image, ...]
    write: str = RELOCATION

    @property
    def source(self) -> Image:
        return self.files[0]

    def record(self, at: str) -> journal.Record:
        return {"kind": INTENT, "run": self.run, "intent": self.id, "at": at, "write": self.write, "ops": list(self.ops),
                "records": self.records,
                "files": [{"file": f.file, "hashBefore": f.before, "hashAfter": f.after, "cut": f.cut, "created": f.created}
                          for f in self.files]}

    @staticmethod
    def from_record(raw: journal.Record) -> Intent:
        """Raises KeyError, TypeError or ValueError for a record that is not a whole intent (one
        without ``write`` is a relocation's: it was the only kind)."""
        files = tuple(Image(str(f["file"]), str(f["hashBefore"]), str(f["hashAfter"]), int(f["cut"]), bool(f["created"]))
                      for f in raw["files"])
        if not files:
            raise ValueError("an intent without files")
        return Intent(str(raw["run"]), str(raw["intent"]), tuple(str(op) for op in raw["ops"]), int(raw["records"]), files,
                      str(raw.get("write", RELOCATION)))


@dataclass(frozen=True)
class Piece:
    """One piece a write appends to a destination: its op, its text, why, and the heading path it
    stood under."""

    op_id: str
    text: str
    reason: str
    heading_path: tuple[str, ...] = ()


def appended(target: str, text: str, pieces: Sequence[Piece], run_id: str, at: str,
             kind: str = "edit") -> tuple[str, list[journal.Record]]:
    """What appending ``pieces`` to ``target``, whose text is ``text``, adds (a newline first when
    it lacked one) and one journal record (``kind``) per piece, each with its context as it was when
    it went in: at the end (later pieces and appends follow it). An ``archive`` record keeps no
    context: its piece names its run and op, so it is found by itself, and a context would keep a
    cut piece of the archived text before it, which a forget does not look for there
    (docs/concepts/forget.md)."""
    lead = "\n" if text and not text.endswith("\n") else ""
    inserted = lead + "".join(piece.text for piece in pieces)
    after = text + inserted
    records = []
    offset = len(text)
    for i, piece in enumerate(pieces):
        piece_text = (lead + piece.text) if i == 0 else piece.text
        edit = Edit(
            op_id=piece.op_id, file=target, kind="append", offset=offset, removed="", inserted=piece_text,
            before=after[max(0, offset - CONTEXT_CHARS) : offset] if kind == "edit" else "", after="", hash_before=sha256(text),
            hash_after=sha256(after), reason=piece.reason, heading_path=piece.heading_path,
            at_start=offset <= CONTEXT_CHARS and kind == "edit", at_end=False,
        )
        records.append({**journal.edit_record(run_id, edit, at), "kind": kind})
        offset += len(piece_text)
    return inserted, records


def done_record(intent: Intent, outcome: str, at: str, left: Sequence[str] = ()) -> journal.Record:
    return {"kind": DONE, "run": intent.run, "intent": intent.id, "at": at, "outcome": outcome, "left": list(left)}


def begin(workspace: Path, intent: Intent, records: Sequence[journal.Record], at: str) -> None:
    """Journal ``intent`` and then its ``records`` in one fsynced append, before any file is
    written (uncapped: a trim must not drop an open intent). Raises OSError."""
    journal.append(workspace, [intent.record(at), *records], capped=False)


def finish(workspace: Path, intent: Intent, at: str, records: Sequence[journal.Record] = ()) -> None:
    """Close ``intent``: its source is written, its write is made; ``records`` go first, in the same
    append (a put-back's ``restore`` records). Raises OSError."""
    journal.append(workspace, [*records, done_record(intent, FORWARD, at)])


def roll_back(workspace: Path, intent: Intent, records: Sequence[journal.Record], at: str, by: str,
              undone: frozenset[str] = frozenset(), written: bool = True) -> list[str]:
    """Take every destination of ``intent`` back to what it was (module docstring; none when not
    ``written``: the intent's append was cut, so none was), then journal a ``restore`` record
    (``by``) for each op not in ``undone`` and the ``intentDone``. The source is not written: it
    still holds its entries. Returns the destinations that keep their pieces (each gets a line
    saying so). Raises OSError, the intent left open for the next recovery."""
    left = []
    for image in intent.files[1:] if written else ():
        mine = [r for r in records if r.get("kind") in _PIECES and r.get("file") == image.file]
        if not _take_back(workspace, image, mine):
            left.append(image.file)
    for name in left:
        with contextlib.suppress(Unsafe, WriteConflict):  # a file that cannot take the line is named in the log
            append_text(confined(workspace, name), f"\n(Run {intent.run}: {', '.join(intent.ops)} did not finish, so the "
                        f"entries above are back in {intent.source.file}; they were left here because this file changed since.)\n")
    restores = [journal.undo_record("restore", intent.run, op, at, by=by) for op in intent.ops if op not in undone]
    journal.append(workspace, [*restores, done_record(intent, BACK, at, left)])
    return left


def _take_back(workspace: Path, image: Image, records: Sequence[journal.Record]) -> bool:
    """Put ``image``'s destination back to its pre-image; False when it changed since in a way that
    hides the write's pieces, or cannot be read."""
    try:
        path = confined(workspace, image.file)
        text = read_text(workspace, image.file)
    except (Unsafe, OSError):
        return False
    digest = sha256(text)
    if digest == image.before:
        return True  # never written, or written back already
    try:
        if digest == image.after:
            pre = text[: len(text) - image.cut]
            if image.created and not pre:
                remove_atomic(path, expected=text.encode("utf-8"))
            else:
                write_atomic(path, pre.encode("utf-8"), expected=text.encode("utf-8"))
            return True
        new = text
        for record in reversed(records):
            new = journal.undo(new, record)
        write_atomic(path, new.encode("utf-8"), expected=text.encode("utf-8"))
    except journal.RevertRefused:
        # changed since by someone else: left alone, and kept only if a piece of ours is in it
        return not any(str(r.get("inserted", "")) in text for r in records)
    except WriteConflict:
        return False
    return True


@dataclass
class Recovered:
    """One open intent ``recover`` found: its run and id, ``forward``, ``back`` or "" (left open: its
    source could not be read), the destinations that kept their pieces, which write it was and its
    source."""

    run: str
    intent: str
    outcome: str
    left: list[str] = field(default_factory=list)
    write: str = RELOCATION
    source: str = ""


def _decide(text: str, intent: Intent, edits: Sequence[journal.Record]) -> str:
    if len(edits) < intent.records:
        return BACK  # the begin append was cut: no file was written after it
    digest = sha256(text)
    if digest == intent.source.after:
        return FORWARD
    if digest == intent.source.before:
        return BACK
    mine = [r for r in edits if r.get("kind") == "edit" and r.get("file") == intent.source.file]
    taken = [str(r.get("removed", "")) for r in mine if r.get("removed")]
    if taken:
        return BACK if all(piece in text for piece in taken) else FORWARD
    added = [str(r.get("inserted", "")) for r in mine if r.get("inserted")]
    return FORWARD if added and all(piece in text for piece in added) else BACK


def open_intents(records: Sequence[journal.Record]) -> list[tuple[Intent, list[journal.Record]]]:
    """Each intent of the journal ``records`` without its ``intentDone``, with the records that
    follow it (fewer than it says when its append was cut). Intents that do not parse are skipped."""
    closed = {(r.get("run"), r.get("intent")) for r in records if r.get("kind") == DONE}
    out = []
    for i, raw in enumerate(records):
        if raw.get("kind") != INTENT or (raw.get("run"), raw.get("intent")) in closed:
            continue
        try:
            intent = Intent.from_record(raw)
        except (KeyError, TypeError, ValueError):
            continue
        following = records[i + 1 : i + 1 + intent.records]
        edits = [r for r in following if r.get("kind") in _PIECES and r.get("run") == intent.run and r.get("op") in intent.ops]
        out.append((intent, edits))
    return out


def recover(workspace: Path, at: str) -> list[Recovered]:
    """Finish every open intent of the workspace's journal (module docstring), oldest first. The
    caller holds the agent's run lock. Raises OSError (what was finished stays finished)."""
    records = journal.read(workspace)
    found = open_intents(records)
    if not found:
        return []
    undone = {(r.get("run"), r.get("op")) for r in records if r.get("kind") in ("revert", "restore")}
    out = []
    for intent, edits in found:
        seen = Recovered(intent.run, intent.id, "", write=intent.write, source=intent.source.file)
        out.append(seen)
        try:
            text = read_text(workspace, intent.source.file)
        except (Unsafe, OSError):
            continue
        if _decide(text, intent, edits) == FORWARD:
            restores = [journal.undo_record("restore", intent.run, op, at, by=PUT_BACK_BY)
                        for op in intent.ops if (intent.run, op) not in undone] if intent.write == PUT_BACK else []
            finish(workspace, intent, at, restores)
            seen.outcome = FORWARD
            continue
        # a put-back rolled back leaves its file as the run wrote it: its ops stand, nothing to restore
        mine = frozenset(intent.ops if intent.write == PUT_BACK else (op for op in intent.ops if (intent.run, op) in undone))
        by = COMMIT_RECOVERED_BY if intent.write == COMMIT else RECOVERED_BY
        seen.left = roll_back(workspace, intent, edits, at, by, mine, written=len(edits) == intent.records)
        seen.outcome = BACK
    return out


def summary(found: Sequence[Recovered]) -> dict[str, Any]:
    """The log fields of a recovery: the intents rolled forward, back, or left open."""
    return {way or "left_open": [f"{r.run}:{r.intent}" for r in found if r.outcome == way] for way in (FORWARD, BACK, "")
            if any(r.outcome == way for r in found)}


def notes(found: Sequence[Recovered]) -> list[str]:
    """One line for a run's report per intent ``recover`` finished."""
    return [_note(r) for r in found]


def _note(r: Recovered) -> str:
    if r.write == COMMIT:
        said = {FORWARD: f"rolled forward (its changes stand in {r.source}; the blocks it removed are in pruned.md)",
                BACK: f"rolled back ({r.source} keeps what it would have removed)",
                "": f"left open ({r.source} could not be read)"}
        head = f"The commit of {r.source} by run {r.run} (ops from {r.intent})"
    elif r.write == PUT_BACK:
        said = {FORWARD: f"rolled forward ({r.source} is as before the run; its ops are undone)",
                BACK: f"rolled back ({r.source} keeps what the run wrote; its ops stand)",
                "": f"left open ({r.source} could not be read)"}
        head = f"The recall check's put-back of {r.source} by run {r.run}"
    else:
        said = {FORWARD: "rolled forward (its moves were made)", BACK: "rolled back (its entries are in their source)",
                "": "left open (its source could not be read)"}
        head = f"Relocation {r.intent} of run {r.run}"
    return (f"{head}, cut short by a killed process: {said[r.outcome]}"
            + (f"; its pieces stay in {', '.join(r.left)}, which changed since" if r.left else "") + ".")
