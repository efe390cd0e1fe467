"""The shared cross-agent vault: create, get, update, delete notes (docs/concepts/vault.md "Shared vault").

Pure domain code: functions take the vault's store (``store.VaultStore``),
return typed results and raise ``gateway.errors`` types. Names are in
``names``; the near-duplicate check in ``similar``; retire/restore and folding
in ``retirement``; how notes and their index are kept is the store's.

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
- **delete** removes the note and its index rows (a live note's retired
  twin stays); NotFound when missing. Who wrote it is forgotten once
  neither the note nor its twin is left.
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
from typing import Final

import structlog

from gateway.atomic import WriteConflict
from gateway.errors import AlreadyExists, InvalidArgument, NotFound
from services.kb.vault.names import is_reserved, is_retired, live_name, retired_name, validate_name
from services.kb.vault.retirement import fold
from services.kb.vault.similar import RelatedNote, find_similar
from services.kb.vault.store import VaultStore

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


def _fold_twin(store: VaultStore, name: str, content: str) -> tuple[str, bool, bool]:
    """``(content to write, folded, twin_kept)`` for a write of ``content`` under ``name``."""
    retired = store.read(retired_name(name))
    if retired is None:
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


def _dropped(name: str, folded: bool) -> tuple[str, ...]:
    """The twin a write removes once it landed: the one it folded in."""
    return (retired_name(name),) if folded else ()


def create(store: VaultStore, name: str, content: str, *, confirm: bool = False) -> CreateResult:
    """Create note ``name`` (rules in the module docstring).

    Raises InvalidArgument (name, size), NoteExists (collision, also when a
    concurrent writer created it first).
    """
    name = validate_name(name)
    check_size(content)
    if store.exists(name):
        raise NoteExists(name)
    related = tuple(find_similar(store, content, exclude={name}))
    if related and not confirm:
        names = ", ".join(repr(r.name) for r in related)
        return CreateResult(
            name, False, related, (), False, False,
            f"nothing was written: {len(related)} similar shared note(s) exist ({names})",
        )
    text, linked = with_links(content, [r.name for r in related])
    check_size(text, "the note with its Related: links")
    text, folded, twin_kept = _fold_twin(store, name, text)
    try:
        store.write(name, text.encode("utf-8"), expected=None, drop=_dropped(name, folded))
    except WriteConflict:
        raise NoteExists(name) from None
    message = f"created shared note {name!r}" + (f", linked to {', '.join(linked)}" if linked else "")
    message += ", folding its retired twin back in" if folded else ""
    return CreateResult(name, True, related, linked, folded, twin_kept, message)


def get(store: VaultStore, name: str) -> Note:
    """The full current content of note ``name`` (``stale__<name>`` reads a retired note).

    InvalidArgument for a bad name, NotFound when missing.
    """
    name = validate_name(name, allow_retired=True)
    data = store.read(name)
    if data is None:
        hint = ""
        if not is_retired(name) and store.exists(retired_name(name)):
            hint = f"; it was retired: read it as {retired_name(name)!r}"
        raise NotFound(f"no shared note named {name!r}{hint}")
    return Note(name, data.decode("utf-8", errors="replace"), len(data), is_retired(name))


def update(store: VaultStore, name: str, content: str, *, confirm: bool = False) -> UpdateResult:
    """Replace the full content of note ``name`` (rules in the module docstring).

    Raises InvalidArgument (name, size, a retired name), NoteMissing (missing),
    FailedPrecondition (the note changed on disk while being updated).
    """
    name = validate_name(name, allow_retired=True)
    if is_retired(name):
        raise InvalidArgument(
            f"{name!r} is a retired note and read-only; create or update {live_name(name)!r} to bring it back"
        )
    if is_reserved(name):
        raise InvalidArgument(f"{name!r} is the vault's pruned archive: the weekly reflection appends to it, "
                              "nothing else writes it")
    check_size(content)
    for attempt in range(1, UPDATE_ATTEMPTS + 1):
        old_bytes = store.read(name)
        if old_bytes is None:
            raise NoteMissing(name)
        dropped, total = line_drop(old_bytes.decode("utf-8", errors="replace"), content)
        if total and 2 * dropped >= total and not confirm:
            warning = (
                f"nothing was written: this update would drop {dropped} of the note's {total} non-blank lines "
                "(50% or more)"
            )
            return UpdateResult(name, False, dropped, total, warning, False, False, warning)
        text, folded, twin_kept = _fold_twin(store, name, content)
        try:
            store.write(name, text.encode("utf-8"), expected=old_bytes, drop=_dropped(name, folded))
            break
        except WriteConflict:
            if attempt == UPDATE_ATTEMPTS:
                raise
            backoff(attempt)
    message = f"updated shared note {name!r}" + (", folding its retired twin back in" if folded else "")
    return UpdateResult(name, True, dropped, total, None, folded, twin_kept, message)


def delete(store: VaultStore, name: str) -> DeleteResult:
    """Remove note ``name`` (``stale__<name>`` removes a retired note) and its index rows; who wrote it
    is forgotten once neither the note nor its retired twin is left.

    InvalidArgument for a bad name, NotFound when missing.
    """
    name = validate_name(name, allow_retired=True)
    if not store.delete(name):
        raise NotFound(f"no shared note named {name!r}")
    live = live_name(name)
    if not store.exists(live) and not store.exists(retired_name(live)):
        store.forget_author(live)
    return DeleteResult(name, True)
