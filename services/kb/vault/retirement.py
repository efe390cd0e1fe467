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

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Final

from gateway.atomic import WriteConflict
from gateway.errors import FailedPrecondition, NotFound
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter
from services.kb.vault.names import live_name, retired_name, validate_name
from services.kb.vault.store import VaultStore

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


def retire(store: VaultStore, name: str, reason: str, now: datetime) -> RetireResult:
    """Move live note ``name`` to ``stale__<name>`` with a marker line (both indexed).

    InvalidArgument for a bad (or already retired) name, NotFound when the note
    is missing, FailedPrecondition when ``stale__<name>`` already exists or the
    note changed while it was being moved (then nothing is moved).
    """
    name = validate_name(name)
    data = store.read(name)
    if data is None:
        raise NotFound(f"no shared note named {name!r}")
    if store.exists(retired_name(name)):
        raise FailedPrecondition(f"{retired_name(name)!r} already exists; delete or restore it first")
    marker = marker_line(now, reason)
    try:
        store.move(name, retired_name(name), add_marker(data, marker), expected=data)
    except WriteConflict:
        if store.read(name) == data:
            raise
        raise WriteConflict(f"shared note {name!r} changed while it was being retired; nothing was moved") from None
    return RetireResult(name, retired_name(name), marker)


def restore(store: VaultStore, name: str) -> RestoreResult:
    """Move ``stale__<name>`` back to ``name`` without its marker line (both indexed).

    ``name`` may be given with or without the ``stale__`` prefix. NotFound when
    there is no retired note, FailedPrecondition when a live note of that name
    exists (it would be overwritten).
    """
    name = live_name(validate_name(name, allow_retired=True))
    validate_name(name)
    data = store.read(retired_name(name))
    if data is None:
        raise NotFound(f"no retired shared note named {retired_name(name)!r}")
    refusal = f"a live shared note named {name!r} exists; update it instead of restoring"
    if store.exists(name):
        raise FailedPrecondition(refusal)
    try:
        store.move(retired_name(name), name, strip_marker(data)[0], expected=data)
    except WriteConflict:
        if store.exists(name):
            raise FailedPrecondition(refusal) from None
        raise
    return RestoreResult(name, retired_name(name))
