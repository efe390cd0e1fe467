"""A forget in one agent's workspace: ``scan`` reports every place of the target, ``apply`` replaces
each with the marker (docs/concepts/forget.md).

**One file at a time, each old or new.** ``apply`` rewrites each file that holds the target through
``gateway.atomic.write_atomic`` against the bytes it read (compare-and-swap), so a process killed at
any point leaves every file either as it was or scrubbed. A file that changed between the read and
the rename is read again and scrubbed again (``WRITE_TRIES`` times), never clobbered; one that keeps
changing is reported as left, and running the same forget again finishes it, since a scrubbed file
holds no match and is not written again.

**The record.** ``audit.jsonl`` is scrubbed like every other file, then the forget's own line is
appended to it: ``kind: "forget"``, the tombstone's ``id``, the key's name (``by``), when
(``at``), how many files were rewritten (``places``) and places replaced (``matches``), and the
files left (``left``, by path). Never the text.

The caller holds the agent's run lock: a dreaming run in between could journal the text again.
Bytes that are not UTF-8 are kept as they are (decoded with ``surrogateescape``): the target is
found in the UTF-8 text around them, and they are written back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Final, Protocol

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import AgentConfig
from gateway.forgetting import Target
from services.dreaming.forget.places import MAX_LINES, File, Place, WorkspaceReport, files
from services.dreaming.forget.scrub import Scrubbed, scrub_json, scrub_text
from services.dreaming.records import audit

WRITE_TRIES: Final = 5
KEPT_CHANGING: Final = "it kept changing while the forget rewrote it: run the same forget again"
SCAN_ID: Final = "F-scan"  # a scan counts what an apply would replace; its text is thrown away
NAME_WITHHELD: Final = "[…]"
NAME_HOLDS_IT: Final = "its name holds the text: rename it by hand"


class Write(Protocol):
    """How ``apply`` replaces a file: ``data`` only if it still holds ``expected`` (else WriteConflict)."""

    def __call__(self, path: Path, data: bytes, *, expected: bytes) -> None: ...


def _write_atomic(path: Path, data: bytes, *, expected: bytes) -> None:
    write_atomic(path, data, expected=expected)


def _is_json_lines(name: str) -> bool:
    return name.endswith(".jsonl") or ".jsonl." in name


def _is_json(name: str) -> bool:
    return name.endswith(".json") or ".json." in name


def scrub_file(name: str, data: bytes, target: Target, tombstone_id: str) -> tuple[bytes, Scrubbed]:
    """A file's bytes with the target replaced, searched by its ``name``: ``.json`` (and copies
    kept aside, ``.json.<suffix>``) as one JSON document, ``.jsonl`` a record per line, anything
    else as plain text."""
    text = data.decode("utf-8", "surrogateescape")
    if _is_json(name):
        done = scrub_json(text, target, tombstone_id)
    elif _is_json_lines(name):
        out, count, lines = [], 0, []
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            body = line.rstrip("\r\n")
            one = scrub_json(body, target, tombstone_id)
            out.append(one.text + line[len(body):])
            count += one.count
            lines += [number] * bool(one.count)
        done = Scrubbed("".join(out), count, tuple(lines))
    else:
        done = scrub_text(text, target, tombstone_id)
    return done.text.encode("utf-8", "surrogateescape"), done


def _place(f: File, target: Target, done: Scrubbed, *, changed: bool, left: str = "") -> Place:
    """The report of one file; a path that itself holds the target is shown with it cut out."""
    rel, why = f.rel, left or f.left
    if any(True for _ in target.finditer(f.rel)):
        rel, why = target.replace(f.rel, NAME_WITHHELD), why or NAME_HOLDS_IT
    return Place(f.store, rel, done.count, done.lines[:MAX_LINES], changed=changed, left=why)


def scan(workspace: Path, target: Target, *, episodic_dir: str = "memory", state_dir: Path | None = None,
         transcripts_dir: Path | None = None) -> WorkspaceReport:
    """Every place the target occurs in the agent's files (``places.files``), changing nothing.
    Raises OSError when a file cannot be read."""
    found = []
    for f in files(workspace, episodic_dir=episodic_dir, state_dir=state_dir, transcripts_dir=transcripts_dir):
        try:
            data = f.path.read_bytes()
        except FileNotFoundError:
            continue
        done = scrub_file(f.path.name, data, target, SCAN_ID)[1]
        if done.count:
            found.append(_place(f, target, done, changed=False))
    return WorkspaceReport(tuple(found))


def _apply_one(f: File, target: Target, tombstone_id: str, write: Write) -> Place | None:
    """Scrub one file (CAS, retried); its place, or None when it holds no match (or is gone)."""
    done: Scrubbed | None = None
    for _ in range(WRITE_TRIES):
        try:
            old = f.path.read_bytes()
        except FileNotFoundError:
            return None
        new, done = scrub_file(f.path.name, old, target, tombstone_id)
        if not done.count:
            return None
        if f.left:
            return _place(f, target, done, changed=False)
        try:
            write(f.path, new, expected=old)
        except WriteConflict:
            continue
        return _place(f, target, done, changed=True)
    assert done is not None
    return _place(f, target, done, changed=False, left=KEPT_CHANGING)


def apply(workspace: Path, target: Target, tombstone_id: str, *, by: str, at: str, episodic_dir: str = "memory",
          state_dir: Path | None = None, transcripts_dir: Path | None = None,
          write: Write = _write_atomic, record: bool = True) -> WorkspaceReport:
    """Replace every place of the target with ``marker(tombstone_id)`` (module docstring), then
    audit the forget (``by``: the key's name; ``at``: ISO 8601), unless ``record`` is false (the
    caller audits it with the other stores' places: ``record_forget``). Raises OSError when a file
    cannot be read or written (the files done so far stay done; running it again finishes the rest)."""
    places = []
    for f in files(workspace, episodic_dir=episodic_dir, state_dir=state_dir, transcripts_dir=transcripts_dir):
        place = _apply_one(f, target, tombstone_id, write)
        if place is not None:
            places.append(place)
    report = WorkspaceReport(tuple(places))
    if record:
        record_forget(workspace, tombstone_id, by=by, at=at, places=report.changed, matches=report.matches,
                      left=report.left)
    return report


def record_forget(workspace: Path, tombstone_id: str, *, by: str, at: str, places: int, matches: int,
                  left: Iterable[Place], extra: Mapping[str, object] | None = None) -> None:
    """Append the forget's own line to ``audit.jsonl`` (module docstring): never the text; ``extra``
    adds fields (the places per store, whether it was shared)."""
    audit.append_records(workspace, [{
        "kind": "forget", "id": tombstone_id, "by": by, "at": at, "places": places, "matches": matches,
        "left": [{"store": p.store, "path": p.path, "count": p.count, "why": p.left} for p in left], **(extra or {}),
    }])


def _strings(name: str, text: str) -> Iterator[str]:
    """The texts of one file as its writer stored them: a JSON file's (or line's) string values
    decoded, with the raw text as well (a line that is not JSON); plain text as it is."""
    yield text
    if not (_is_json(name) or _is_json_lines(name)):
        return
    for line in text.splitlines() if _is_json_lines(name) else [text]:
        try:
            stack = [json.loads(line)]
        except (json.JSONDecodeError, RecursionError):
            continue
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                yield value
            elif isinstance(value, dict):
                stack += value.values()
            elif isinstance(value, list):
                stack += value


def matched_texts(agent: AgentConfig, target: Target) -> set[str]:
    """The distinct strings the target matches in ``agent``'s files (as ``scan_agent`` searches
    them), for a pattern's tombstones. Never reported: the caller hashes them. Raises OSError."""
    found: set[str] = set()
    for f in files(agent.workspace, episodic_dir=agent.memory.episodic_archive_dir, state_dir=agent.agent_dir,
                   transcripts_dir=agent.transcripts_dir):
        try:
            text = f.path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        for each in _strings(f.path.name, text):
            found.update(m.group(0) for m in target.finditer(each))
    return found


def scan_agent(agent: AgentConfig, target: Target) -> WorkspaceReport:
    """``scan`` over ``agent``'s files: its workspace, episodic folder, state folder and transcripts."""
    return scan(agent.workspace, target, episodic_dir=agent.memory.episodic_archive_dir, state_dir=agent.agent_dir,
                transcripts_dir=agent.transcripts_dir)


def apply_agent(agent: AgentConfig, target: Target, tombstone_id: str, *, by: str, at: str,
                write: Write = _write_atomic, record: bool = True) -> WorkspaceReport:
    """``apply`` over ``agent``'s files (as ``scan_agent``). The caller holds the agent's run lock."""
    return apply(agent.workspace, target, tombstone_id, by=by, at=at, episodic_dir=agent.memory.episodic_archive_dir,
                 state_dir=agent.agent_dir, transcripts_dir=agent.transcripts_dir, write=write, record=record)
