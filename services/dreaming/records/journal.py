"""The per-op journal (``.dreaming/journal.jsonl``) and reverts by inverse splice.

Every op a run applies is one ``edit`` record: run id, op id, file, kind, the
exact text removed and inserted, its offset, up to 48 chars of context on each
side, the reason, and the SHA-256 of the file before and after the op. A
revert (``gateway dream revert AGENT RUN[/OP]``) undoes ops from these records:

- The inserted text is found again with its context: at the recorded offset
  when the text there still matches, else the one place in the file where
  context + inserted text + context occur (context that reached the start or
  end of the file must still stand there; an append to an episodic note
  records no end, since later appends follow it). Not found, or found more than once:
  the text around the op changed since, and the revert is refused with that
  reason. Nothing is ever clobbered.
- The inverse splice puts the removed text back in place of the inserted text.
- A whole run is undone newest op first, every file computed in memory first:
  if any op cannot be undone, nothing is written.
- A ``revert`` record is appended for each undone op, so reverting twice
  changes nothing the second time. Ops the recall check already undid
  (``restore`` records) count as undone.

**After a crash.** The applier's commit of a memory file, a pass's moves and
the recall check's put-back are journaled under a write-ahead intent before any
file is written (``apply/intent.py`` finishes one a kill left open). An episodic
append journals its edit just before its rename (``apply/commit.py``), and so
did a commit of an older version: a process killed in between leaves edits in
the journal that are not in their file, which is then still exactly as before them (its SHA-256
is the first edit's ``hashBefore``). ``settle``, run when dreaming starts,
finds such edits and appends a ``restore`` record for each (by ``SETTLED_BY``),
so the journal matches the files again and a revert has nothing to undo there.
An op is settled only when every file it touched is in that state, except a
pass's move: the recall check puts back only its source, and its destinations
keep their copies, so a move is settled when its source is in that state.

**The shared vault.** A run's shared promotions are journaled too (``promotion``
records: what the KB wrote, exactly), and a revert undoes those of the ops it
covers through the KB once the files are done (``vault.undo``), marking each
undone one with an ``unpromote`` record. Only ``edit``, ``revert`` and
``restore`` records matter here; the ``intent``, ``intentDone`` and ``archive``
records of a relocation or a commit are read by ``apply/intent.py``.

The journal is capped (``MAX_BYTES``): past it, the oldest records are dropped
(whole lines) down to ``KEEP_BYTES``, and runs that old can no longer be reverted
by op (their backups may still hold the pre-images).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from services.dreaming.model.edit import Edit, sha256
from services.dreaming.records import jsonl

JOURNAL = ".dreaming/journal.jsonl"
SETTLED_BY = "start-up: the process ended before the write"
MAX_BYTES = 8 * 1024 * 1024
KEEP_BYTES = 4 * 1024 * 1024
UNCAPPED = 1 << 62

Record = jsonl.Record


def edit_record(run_id: str, edit: Edit, at: str) -> Record:
    return {
        "kind": "edit", "run": run_id, "op": edit.op_id, "file": edit.file, "opKind": edit.kind,
        "offset": edit.offset, "removed": edit.removed, "inserted": edit.inserted,
        "before": edit.before, "after": edit.after, "atStart": edit.at_start, "atEnd": edit.at_end,
        "hashBefore": edit.hash_before,
        "hashAfter": edit.hash_after, "reason": edit.reason, "headingPath": list(edit.heading_path), "at": at,
    }


def undo_record(kind: str, run_id: str, op_id: str, at: str, by: str = "") -> Record:
    """A ``revert`` (an operator's) or ``restore`` (the recall check's) record for one op."""
    return {"kind": kind, "run": run_id, "op": op_id, "at": at, "by": by}


def append(workspace: Path, records: Iterable[Record], *, durable: bool = True, capped: bool = True) -> None:
    """Append ``records`` (one write, fsynced), then cap the journal (unless ``capped`` is False: a
    relocation's open intent must not be trimmed away before it is closed)."""
    jsonl.append(workspace / JOURNAL, records, max_bytes=MAX_BYTES if capped else UNCAPPED, keep_bytes=KEEP_BYTES, durable=durable)


def read(workspace: Path) -> list[Record]:
    """Every journal record, oldest first; broken lines are skipped."""
    return jsonl.read(workspace / JOURNAL)


class RevertRefused(Exception):
    """An op cannot be undone; ``str()`` says which and why."""


def locate(text: str, record: Record) -> int:
    """Where ``record``'s inserted text stands in ``text`` now. Raises RevertRefused."""
    before, inserted, after = record["before"], record["inserted"], record["after"]
    at_start, at_end = bool(record.get("atStart")), bool(record.get("atEnd"))
    pattern = before + inserted + after

    def fits(start: int) -> bool:  # context cut by the file's start or end must still stand there
        return (not at_start or start == 0) and (not at_end or start + len(pattern) == len(text))

    offset = int(record["offset"])
    start = offset - len(before)
    if start >= 0 and text.startswith(pattern, start) and fits(start):
        return offset
    found = []
    start = text.find(pattern)
    while start >= 0:
        if fits(start):
            found.append(start + len(before))
        start = text.find(pattern, start + 1)
    if len(found) == 1:
        return found[0]
    where = "no longer there" if not found else f"found {len(found)} times"
    raise RevertRefused(f"{record['op']}: the text around this op in {record['file']} changed since ({where}); not reverted")


def undo(text: str, record: Record) -> str:
    """``text`` with ``record``'s splice undone. Raises RevertRefused."""
    at = locate(text, record)
    removed: str = record["removed"]
    return text[:at] + removed + text[at + len(record["inserted"]) :]


@dataclass
class RevertPlan:
    """What reverting would do: new text per file, the ops undone, and those already undone."""

    texts: dict[str, str] = field(default_factory=dict)
    originals: dict[str, str] = field(default_factory=dict)
    undone: list[Record] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


def plan_revert(records: list[Record], run_id: str, op_id: str | None, read_file: Callable[[str], str]) -> RevertPlan:
    """Undo the ops of ``run_id`` (or just ``op_id``), newest first, against the files' current text.

    ``read_file(path) -> str`` gives a workspace file's current content. Raises
    RevertRefused when the run or op is unknown or any op cannot be undone.
    """
    edits = [r for r in records if r.get("kind") == "edit" and r.get("run") == run_id]
    if op_id is not None:
        edits = [r for r in edits if r.get("op") == op_id]
    if not edits:
        target = op_id or run_id
        raise RevertRefused(f"{target}: no applied op with this id in the journal (it may be older than the journal keeps)")
    undone_ops = {r.get("op") for r in records if r.get("kind") in ("revert", "restore") and r.get("run") == run_id}
    out = RevertPlan()
    for record in reversed(edits):
        if record["op"] in undone_ops:
            out.already.append(record["op"])
            continue
        name = record["file"]
        if name not in out.texts:
            out.originals[name] = out.texts[name] = read_file(name)
        out.texts[name] = undo(out.texts[name], record)
        out.undone.append(record)
    return out


def settle(workspace: Path, read_file: Callable[[str], str | None], at: str) -> list[str]:
    """Mark undone the journaled edits that never reached their file (module docstring).

    ``read_file(path)`` gives a workspace file's current text ("" when it does
    not exist), or None when it cannot be read (then its edits are left as
    they are). Appends one ``restore`` record per op settled; returns their ids.
    """
    records = read(workspace)
    undone = {(r.get("run"), r.get("op")) for r in records if r.get("kind") in ("revert", "restore")}
    moves = {(str(r.get("run")), str(r.get("op"))) for r in records if r.get("kind") == "edit" and r.get("opKind") == "move"}
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if r.get("kind") == "edit" and (r.get("run"), r.get("op")) not in undone:
            groups.setdefault((str(r.get("run")), str(r.get("file"))), []).append(r)
    absent: dict[tuple[str, str], bool] = {}  # (run, op) -> every file of it lacks its edits
    for (run, name), group in groups.items():
        text = read_file(name)
        current = None if text is None else sha256(text)
        not_there = current is not None and current == group[0].get("hashBefore") and current != group[-1].get("hashAfter")
        for r in group:
            key = (run, str(r.get("op")))
            if key in moves and r.get("opKind") != "move":
                continue  # a move's destination keeps its copy when its source is put back (module docstring)
            absent[key] = absent.get(key, True) and not_there
    settled = [key for key, yes in absent.items() if yes]
    append(workspace, [undo_record("restore", run, op, at, by=SETTLED_BY) for run, op in settled])
    return [op for _, op in settled]
