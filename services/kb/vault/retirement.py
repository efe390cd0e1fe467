"""Retiring shared notes to ``stale__<name>`` and back (docs/concepts/vault.md "Shared vault").

``retire`` writes ``notes/stale__<name>.md`` holding the live note's bytes
unchanged plus one marker line, then removes the live file::

    <!-- retired: 2026-11-30T12:00:00Z reason: not retrieved in 90 days -->

The marker is the first line, or the line right after the frontmatter when the
note has one (so the retired note's frontmatter, and a ``provenance:
untrusted`` in it, still counts). It uses the ``<!-- key: value -->`` form the
entry parser treats as metadata, so the note's entry hashes do not change. The
time is UTC to the second; the reason is cut to 200 chars with control chars
and ``>`` replaced by spaces (it must not end the comment). The marker's line
ending copies the note's first line (``\\r\\n`` or ``\\n``).

``restore`` removes exactly that marker line and writes the rest back to
``notes/<name>.md`` byte-for-byte (a twin with no marker, e.g. renamed by hand,
is restored as it is). Both refuse when the target already exists
(FailedPrecondition): retiring never overwrites a twin, and restoring never
overwrites a live note.

Folding (a recurrence under a retired name, on create and update): the twin's
body, marker removed, is appended to the new live content under a
``<!-- folded: retired body -->`` line, unless the new content already contains
it verbatim. The twin is deleted only after the live write landed.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Final

import apsw

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import FailedPrecondition, NotFound
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter
from services.kb.vault.names import NOTE_SUFFIX, NOTES_DIR, live_name, retired_name, validate_name
from services.kb.vault.note_index import reindex_notes

MAX_REASON_CHARS: Final = 200
FOLD_MARKER: Final = "<!-- folded: retired body -->"
_MARKER = re.compile(rb"<!-- retired: (\S+) reason: ([^>]*)-->(?:\r\n|\n)?")
_REASON_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029>]")


@dataclass(frozen=True)
class RetireResult:
    """``name`` was moved to ``retired_name``; ``marker`` is the line added."""

    name: str
    retired_name: str
    marker: str


@dataclass(frozen=True)
class RestoreResult:
    """``retired_name`` was moved back to ``name``."""

    name: str
    retired_name: str


def note_file(vault_dir: Path, name: str) -> Path:
    """The file of a validated note name."""
    return vault_dir / NOTES_DIR / f"{name}{NOTE_SUFFIX}"


def read_note(path: Path) -> bytes:
    """The bytes of the note file ``path`` (``note_file``'s answer), as ``read_bytes`` gives them.

    A symbolic link whose target leaves the vault is refused (FailedPrecondition), as the
    index leaves it out: the vault's API reads, updates and retires notes, never files elsewhere
    that a link in ``notes/`` points at. Raises FileNotFoundError when there is no such file.
    """
    if path.is_symlink():
        vault_real = os.path.realpath(path.parent.parent)
        if os.path.commonpath([os.path.realpath(path), vault_real]) != vault_real:
            raise FailedPrecondition(f"{NOTES_DIR}/{path.name} is a link to a file outside the vault; the vault does not follow it")
    return path.read_bytes()


def marker_line(now: datetime, reason: str) -> str:
    """The retirement marker (without line ending) for ``now`` and ``reason``."""
    stamp = (now if now.tzinfo else now.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    clean = " ".join(_REASON_UNSAFE.sub(" ", reason).split())[:MAX_REASON_CHARS] or "unspecified"
    return f"<!-- retired: {stamp.strftime('%Y-%m-%dT%H:%M:%SZ')} reason: {clean} -->"


def _frontmatter_offset(data: bytes) -> int | None:
    """Byte offset just after the frontmatter's closing line (its line end included; the end of
    ``data`` when that line ends the note without one); None without a complete frontmatter."""
    end_line = parse_frontmatter(split_lines(data.decode("utf-8", errors="replace"))).end_line
    if end_line == 0:
        return None
    offset = 0
    for _ in range(end_line):
        newline = data.find(b"\n", offset)
        if newline < 0:
            return len(data)  # the closing line is the last one, without a line end
        offset = newline + 1
    return offset


def add_marker(data: bytes, marker: str) -> bytes:
    """``data`` with the ``marker`` line inserted (rules in the module docstring)."""
    eol = b"\r\n" if data.split(b"\n", 1)[0].endswith(b"\r") else b"\n"
    at = _frontmatter_offset(data) or 0
    if at and at == len(data) and not data.endswith(b"\n"):
        # The note is its frontmatter, without a final line end: the marker goes on a line after it
        # (strip_marker takes that line end off again).
        return data + eol + marker.encode("utf-8")
    return data[:at] + marker.encode("utf-8") + eol + data[at:]


def _find_marker(data: bytes) -> re.Match[bytes] | None:
    """The marker line where ``add_marker`` puts it: first, or right after the frontmatter."""
    for at in (0, _frontmatter_offset(data)):
        if at is None:
            continue
        match = _MARKER.match(data, at)
        if match is not None:
            return match
    return None


def strip_marker(data: bytes) -> tuple[bytes, bool]:
    """``data`` without its retirement marker line, and whether one was found."""
    match = _find_marker(data)
    if match is None:
        return data, False
    start = match.start()
    if start and match.end() == len(data) and not match.group().endswith(b"\n"):
        # A last line with no line end: add_marker gave the line before it the one it lacked.
        start -= 2 if data.startswith(b"\r\n", start - 2) else 1 if data.startswith(b"\n", start - 1) else 0
    return data[:start] + data[match.end() :], True


@dataclass(frozen=True)
class Marker:
    """A retired note's marker: when (None if the stamp does not parse) and why."""

    at: datetime | None
    reason: str


def read_marker(data: bytes) -> Marker | None:
    """The retirement marker of a retired note's bytes, or None when it has none."""
    match = _find_marker(data)
    if match is None:
        return None
    try:
        at: datetime | None = datetime.strptime(match.group(1).decode("ascii"), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (UnicodeDecodeError, ValueError):
        at = None
    return Marker(at, match.group(2).decode("utf-8", errors="replace").strip())


def fold(content: str, retired: bytes) -> str:
    """``content`` with the retired note's body (marker removed) appended under FOLD_MARKER."""
    body = strip_marker(retired)[0].decode("utf-8", errors="replace").removeprefix("\ufeff")
    if not body.strip() or body.strip() in content:
        return content
    head = content.rstrip("\n")
    joined = (head + "\n\n" if head else "") + FOLD_MARKER + "\n" + body
    return joined if joined.endswith("\n") else joined + "\n"


def retire(conn: apsw.Connection, vault_dir: Path, name: str, reason: str, now: datetime) -> RetireResult:
    """Move live note ``name`` to ``stale__<name>`` with a marker line, and reindex both.

    InvalidArgument for a bad (or already retired) name, NotFound when the note
    is missing, FailedPrecondition when ``stale__<name>`` already exists or the
    note changed while it was being moved (then nothing is moved).
    """
    name = validate_name(name)
    live, twin = note_file(vault_dir, name), note_file(vault_dir, retired_name(name))
    try:
        data = read_note(live)
    except FileNotFoundError:
        raise NotFound(f"no shared note named {name!r}") from None
    if twin.exists():
        raise FailedPrecondition(f"{retired_name(name)!r} already exists; delete or restore it first")
    marker = marker_line(now, reason)
    write_atomic(twin, add_marker(data, marker), expected=None)
    if _read_or_none(live) != data:
        twin.unlink(missing_ok=True)
        raise WriteConflict(f"shared note {name!r} changed while it was being retired; nothing was moved")
    live.unlink(missing_ok=True)
    reindex_notes(conn, vault_dir, [name, retired_name(name)])
    return RetireResult(name, retired_name(name), marker)


def restore(conn: apsw.Connection, vault_dir: Path, name: str) -> RestoreResult:
    """Move ``stale__<name>`` back to ``name`` without its marker line, and reindex both.

    ``name`` may be given with or without the ``stale__`` prefix. NotFound when
    there is no retired note, FailedPrecondition when a live note of that name
    exists (it would be overwritten).
    """
    name = live_name(validate_name(name, allow_retired=True))
    validate_name(name)
    live, twin = note_file(vault_dir, name), note_file(vault_dir, retired_name(name))
    try:
        data = read_note(twin)
    except FileNotFoundError:
        raise NotFound(f"no retired shared note named {retired_name(name)!r}") from None
    refusal = f"a live shared note named {name!r} exists; update it instead of restoring"
    if live.exists():
        raise FailedPrecondition(refusal)
    try:
        write_atomic(live, strip_marker(data)[0], expected=None)
    except WriteConflict:
        raise FailedPrecondition(refusal) from None
    twin.unlink(missing_ok=True)
    reindex_notes(conn, vault_dir, [name, retired_name(name)])
    return RestoreResult(name, retired_name(name))


def _read_or_none(path: Path) -> bytes | None:
    with contextlib.suppress(FileNotFoundError):
        return read_note(path)
    return None
