"""The shared cross-agent vault: create, get, update, delete notes (docs/concepts/vault.md "Shared vault").

Pure domain code: functions take the vault dir (``SharedSettings.vault_dir``)
and an open index connection (``note_index.open_vault_index``), return typed
results and raise ``gateway.errors`` types. Layout, sources, search and the
twin rule are in ``note_index``; names in ``names``; the near-duplicate
check in ``similar``; retire/restore and folding in ``retirement``.

Rules:

- **Size cap.** A note's content is at most ``MAX_NOTE_BYTES`` = 102,400 bytes
  of UTF-8 (docs/architecture.md "Limits and defaults": 100 KB); more is InvalidArgument. The cap applies to the
  caller's content and to the note as written with its ``Related:`` links.
- **create** fails with ``NoteExists`` (AlreadyExists) on an exact-name
  collision. Then it runs the near-duplicate check; when related notes are
  found and ``confirm`` is false it writes nothing and returns them
  (``created=False``). With ``confirm`` it writes, ending the note with one
  ``Related: [[a]], [[b]]`` line naming each related note the content does not
  already link (``[[a]]`` or ``[[a|…]]``).
- **update** fails with ``NoteMissing`` (NotFound) when the note is missing,
  and replaces the full content. Line-drop guard: the old
  content's non-blank lines are counted, and one is *dropped* when no line of
  the new content equals it (both compared with surrounding whitespace
  trimmed; each old occurrence counts). When ``2 * dropped >= total`` (50% or
  more) and ``confirm`` is false, it writes nothing and returns a warning. An
  old note with no non-blank line never warns. The write is compare-and-swap
  against the content read: when another writer changed the note in between,
  the note is read again and the guard judged again (up to ``UPDATE_ATTEMPTS``
  = 8 times, with a jittered pause of up to 5 ms × attempt in between, then
  FailedPrecondition), so the guard never judges a stale copy and concurrent
  full replacements end as "last writer wins". Retired notes
  (``stale__*``) are read-only here.
- **Recurrence folding** (create and update): when ``stale__<name>`` exists,
  its body is folded into the new live note (``retirement.fold``) and the
  twin is deleted once the write landed. When the folded note would exceed the
  cap, or the twin is not valid UTF-8 (folding would replace the bytes it cannot
  read, and the twin would then be deleted), the caller's content is written
  unfolded, the twin is kept (the search twin rule hides it) and a warning is
  logged; the result says ``folded=False, twin_kept=True``.
- **get** returns the full current content; a ``stale__<name>`` is readable.
- **delete** removes the note file and its index rows (a live note's retired
  twin stays); NotFound when missing.
- Every write and delete reindexes the touched notes at once (one short
  transaction), so the next search sees the change.

Messages are transport-neutral: they say what happened, never which tool,
route or field to use next. Each transport words that itself from the
structured fields (the KB servicer for gRPC and REST, ``gateway_mcp`` for MCP).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import apsw
import structlog

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import AlreadyExists, InvalidArgument, NotFound
from services.kb.vault.names import is_retired, live_name, retired_name, validate_name
from services.kb.vault.note_index import reindex_notes
from services.kb.vault.retirement import fold, note_file, read_note
from services.kb.vault.similar import RelatedNote, find_similar

MAX_NOTE_BYTES: Final = 102_400
UPDATE_ATTEMPTS: Final = 8
BACKOFF_SECONDS: Final = 0.005


def _jittered_sleep(attempt: int) -> None:
    time.sleep(random.uniform(0, BACKOFF_SECONDS * attempt))


backoff: Callable[[int], None] = _jittered_sleep
"""Pause before retry ``attempt`` of a conflicted update (a seam: tests replace it).
Random jitter breaks the lockstep of writers that keep conflicting."""

log = structlog.get_logger()


class NoteExists(AlreadyExists):
    """create: a note named ``name`` exists already. ``message`` defaults to the plain fact."""

    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"a shared note named {name!r} already exists")
        self.name = name


class NoteMissing(NotFound):
    """update: no note is named ``name``. ``message`` defaults to the plain fact."""

    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"no shared note named {name!r}")
        self.name = name


@dataclass(frozen=True)
class Note:
    """A note's full current content. ``retired`` for a ``stale__`` note."""

    name: str
    content: str
    size_bytes: int
    retired: bool


@dataclass(frozen=True)
class CreateResult:
    """``created=False``: near-duplicates in ``related`` and nothing written (call again with confirm).
    ``linked``: the names a ``Related:`` line added. ``folded``: a retired twin was folded in."""

    name: str
    created: bool
    related: tuple[RelatedNote, ...]
    linked: tuple[str, ...]
    folded: bool
    twin_kept: bool
    message: str


@dataclass(frozen=True)
class UpdateResult:
    """``updated=False`` with ``warning``: the line-drop guard held the write back."""

    name: str
    updated: bool
    dropped_lines: int
    total_lines: int
    warning: str | None
    folded: bool
    twin_kept: bool
    message: str


@dataclass(frozen=True)
class DeleteResult:
    name: str
    deleted: bool


def check_size(content: str, what: str = "a shared note") -> bytes:
    """``content`` as UTF-8; InvalidArgument when it exceeds MAX_NOTE_BYTES."""
    data = content.encode("utf-8")
    if len(data) > MAX_NOTE_BYTES:
        raise InvalidArgument(f"{what} is at most {MAX_NOTE_BYTES} bytes of UTF-8; this one is {len(data)}")
    return data


def line_drop(old: str, new: str) -> tuple[int, int]:
    """``(dropped, total)``: the old non-blank lines and how many of them the new content lacks."""
    kept = {line.strip() for line in new.splitlines()}
    old_lines = [line.strip() for line in old.splitlines() if line.strip()]
    return sum(1 for line in old_lines if line not in kept), len(old_lines)


def with_links(content: str, names: list[str]) -> tuple[str, tuple[str, ...]]:
    """``content`` ending in a ``Related: [[a]], [[b]]`` line for each name not already linked."""
    missing = [n for n in names if f"[[{n}]]" not in content and f"[[{n}|" not in content]
    if not missing:
        return content, ()
    line = "Related: " + ", ".join(f"[[{n}]]" for n in missing)
    head = content.rstrip("\n")
    return (head + "\n\n" if head else "") + line + "\n", tuple(missing)


def _fold_twin(vault_dir: Path, name: str, content: str) -> tuple[str, bool, bool]:
    """``(content to write, folded, twin_kept)`` for a write of ``content`` under ``name``."""
    twin = note_file(vault_dir, retired_name(name))
    try:
        retired = read_note(twin)
    except FileNotFoundError:
        return content, False, False
    try:
        retired.decode("utf-8")
    except UnicodeDecodeError:  # folding it in would replace the bytes it cannot read, then drop the twin
        log.warning("vault_fold_refused", note=name, reason="the retired twin is not valid UTF-8; twin kept")
        return content, False, True
    merged = fold(content, retired)
    if len(merged.encode("utf-8")) > MAX_NOTE_BYTES:
        log.warning("vault_fold_refused", note=name, reason="the folded note would exceed the size cap; twin kept")
        return content, False, True
    return merged, True, False


def _land(conn: apsw.Connection, vault_dir: Path, name: str, folded: bool) -> None:
    """After the live write landed: drop a folded twin, then reindex what changed."""
    names = [name]
    if folded:
        note_file(vault_dir, retired_name(name)).unlink(missing_ok=True)
        names.append(retired_name(name))
    reindex_notes(conn, vault_dir, names)


def create(conn: apsw.Connection, vault_dir: Path, name: str, content: str, *, confirm: bool = False) -> CreateResult:
    """Create note ``name`` (rules in the module docstring).

    Raises InvalidArgument (name, size), NoteExists (collision, also when a
    concurrent writer created it first).
    """
    name = validate_name(name)
    check_size(content)
    path = note_file(vault_dir, name)
    if path.exists():
        raise NoteExists(name)
    related = tuple(find_similar(conn, vault_dir, content, exclude={name}))
    path.parent.mkdir(parents=True, exist_ok=True)
    if related and not confirm:
        names = ", ".join(repr(r.name) for r in related)
        return CreateResult(
            name, False, related, (), False, False,
            f"nothing was written: {len(related)} similar shared note(s) exist ({names})",
        )
    text, linked = with_links(content, [r.name for r in related])
    check_size(text, "the note with its Related: links")
    text, folded, twin_kept = _fold_twin(vault_dir, name, text)
    try:
        write_atomic(path, text.encode("utf-8"), expected=None)
    except WriteConflict:
        raise NoteExists(name) from None
    _land(conn, vault_dir, name, folded)
    message = f"created shared note {name!r}" + (f", linked to {', '.join(linked)}" if linked else "")
    message += ", folding its retired twin back in" if folded else ""
    return CreateResult(name, True, related, linked, folded, twin_kept, message)


def get(vault_dir: Path, name: str) -> Note:
    """The full current content of note ``name`` (``stale__<name>`` reads a retired note).

    InvalidArgument for a bad name, NotFound when missing.
    """
    name = validate_name(name, allow_retired=True)
    try:
        data = read_note(note_file(vault_dir, name))
    except (FileNotFoundError, IsADirectoryError):
        hint = ""
        if not is_retired(name) and note_file(vault_dir, retired_name(name)).exists():
            hint = f"; it was retired: read it as {retired_name(name)!r}"
        raise NotFound(f"no shared note named {name!r}{hint}") from None
    return Note(name, data.decode("utf-8", errors="replace"), len(data), is_retired(name))


def update(conn: apsw.Connection, vault_dir: Path, name: str, content: str, *, confirm: bool = False) -> UpdateResult:
    """Replace the full content of note ``name`` (rules in the module docstring).

    Raises InvalidArgument (name, size, a retired name), NoteMissing (missing),
    FailedPrecondition (the note changed on disk while being updated).
    """
    name = validate_name(name, allow_retired=True)
    if is_retired(name):
        raise InvalidArgument(
            f"{name!r} is a retired note and read-only; create or update {live_name(name)!r} to bring it back"
        )
    check_size(content)
    path = note_file(vault_dir, name)
    for attempt in range(1, UPDATE_ATTEMPTS + 1):
        try:
            old_bytes = read_note(path)
        except (FileNotFoundError, IsADirectoryError):
            raise NoteMissing(name) from None
        dropped, total = line_drop(old_bytes.decode("utf-8", errors="replace"), content)
        if total and 2 * dropped >= total and not confirm:
            warning = (
                f"nothing was written: this update would drop {dropped} of the note's {total} non-blank lines "
                "(50% or more)"
            )
            return UpdateResult(name, False, dropped, total, warning, False, False, warning)
        text, folded, twin_kept = _fold_twin(vault_dir, name, content)
        try:
            write_atomic(path, text.encode("utf-8"), expected=old_bytes)
            break
        except WriteConflict:
            if attempt == UPDATE_ATTEMPTS:
                raise
            backoff(attempt)
    _land(conn, vault_dir, name, folded)
    message = f"updated shared note {name!r}" + (", folding its retired twin back in" if folded else "")
    return UpdateResult(name, True, dropped, total, None, folded, twin_kept, message)


def delete(conn: apsw.Connection, vault_dir: Path, name: str) -> DeleteResult:
    """Remove note ``name`` (``stale__<name>`` removes a retired note) and its index rows.

    InvalidArgument for a bad name, NotFound when missing.
    """
    name = validate_name(name, allow_retired=True)
    try:
        note_file(vault_dir, name).unlink()
    except (FileNotFoundError, IsADirectoryError):
        raise NotFound(f"no shared note named {name!r}") from None
    reindex_notes(conn, vault_dir, [name])
    return DeleteResult(name, True)
