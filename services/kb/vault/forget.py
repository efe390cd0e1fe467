"""A forget in a shared vault (docs/concepts/vault.md "Forget").

What a vault keeps of a note's text, and what happens to each on an apply:

- **The notes**, live and retired (``stale__<name>``): each one holding the target is written again
  with the marker in place of each match, through the store (compare-and-swap against the bytes read,
  read again and retried on a conflict, never clobbered; the store reindexes it in the same call).
  A note the vault will not read (a link out of the vault) or that kept changing is ``left``.
- **Promotion records** (``kb_promotions`` / ``promotions``): the ``write`` a promotion reported keeps
  the text it removed and added, its block and a folded twin; those fields are scrubbed the same way
  (``scrub_write``). Their hashes then name text that is no longer anywhere: an undo of such a
  promotion takes the scrubbed block out when it still stands verbatim, else leaves the note.
- **The weekly reflection's journal and audit** (``kb_reflection_merges`` and ``kb_reflection_audit`` /
  ``reflection_merges`` and ``reflection_audit``): every text in a merge's entry (the notes' bytes
  before and after, the lines pruned) and in a run's record (proposals' content, reasons) is scrubbed
  the same way (``scrub_json``); a revert then puts back the scrubbed bytes.
- **The graph reports** (``reports/*.md``, SQLite backend): scrubbed like notes; a vault with
  ``graph: true`` rebuilds them after the writes anyway.
- **The index's bytes**: the backend's purge (``purge.purge_bytes``; ``VACUUM (FULL)`` for PostgreSQL).

- **Names**: a note whose name holds the target is renamed, its twin and every row keyed by its name
  with it, and the links to it rewritten (``forget_names``); each is a place of kind ``name``, and
  the rows renamed one place (``note names``, kind ``table``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import FailedPrecondition
from gateway.forgetting import Target
from services.kb.index.purge import Place, StoreForget, index_places, named, scrub_old_paths, text_place
from services.kb.vault import forget_names, sqlite_reflection, sqlite_rows
from services.kb.vault.names import name_from_path, note_path
from services.kb.vault.note_index import REPORTS_DIR, reindex_notes
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import VaultStore

WRITE_TRIES: Final = 5
NAME_ROWS: Final = "note names"  # the place of the rows keyed by a note name that a forget renamed
WRITE_TEXT_FIELDS: Final = ("removed", "added", "block", "folded_twin")  # a PromotionWrite's text; the rest are names and hashes


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")  # a byte that is no UTF-8 comes back as it was


def _scrub_file(read: Callable[[], bytes | None], write: Callable[[bytes, bytes], None], where: str, kind: str,
                target: Target, scrub: Callable[[str], str], apply: bool,
                matched: set[str] | None = None) -> tuple[Place | None, bool]:
    """``(where the target was found, whether it is still there)`` for one file-like thing, rewritten
    through ``scrub`` on ``apply`` (``write(new, expected)`` raising WriteConflict when it changed); the
    strings a pattern matched are added to ``matched`` when given."""
    found: Place | None = None
    for _ in range(WRITE_TRIES):
        data = read()
        if data is None:
            return found, False
        place = text_place(where, kind, _text(data), target)
        if place is None:
            return found, False
        found = found or place
        if matched is not None and target.pattern is not None:
            matched.update(m.group(0) for m in target.finditer(_text(data)))
        if not apply:
            return found, False
        new = scrub(_text(data))
        try:
            write(new.encode("utf-8", errors="surrogateescape"), data)
        except WriteConflict:
            continue
        return found, False
    return found, True


Read = Callable[[], bytes | None]  # a note's or a report's bytes; None when it is gone
Rewrite = Callable[[bytes, bytes], None]  # (new, expected): WriteConflict when it changed


def _scrub_all(items: Iterable[tuple[str, Read, Rewrite]], kind: str, target: Target, scrub: Callable[[str], str],
               apply: bool, matched: set[str] | None = None) -> tuple[list[Place], list[Place]]:
    """``(places, left)`` over ``items`` (where, read, write), each through ``_scrub_file``; one the store
    will not read (FailedPrecondition: a link out of the vault) is ``left`` with no count."""
    places: list[Place] = []
    left: list[Place] = []
    for where, read, write in items:
        try:
            place, kept = _scrub_file(read, write, where, kind, target, scrub, apply, matched)
        except FailedPrecondition:  # not read, and not the vault's to rewrite
            left.append(Place(where, kind, 0))
            continue
        if place is not None:
            places.append(place)
            if kept:
                left.append(place)
    return places, left


def forget_notes(store: VaultStore, target: Target, tombstone_id: str, *, apply: bool,
                 matched: set[str] | None = None) -> tuple[list[Place], list[Place]]:
    """``(places, left)`` over every note of ``store``, live and retired (module docstring); a pattern's
    matched strings go to ``matched`` when given (``StoreForget.matched``). A link to a note whose name
    holds the target is rewritten to the name the note is given (``forget_names.scrub_links``)."""
    def note(name: str) -> tuple[str, Read, Rewrite]:
        return note_path(name), lambda: store.read(name), lambda new, old: store.write(name, new, expected=old)

    names = store.names(include_retired=True)
    scrub = forget_names.note_scrub(target, tombstone_id, forget_names.plan(names, target, tombstone_id))
    return _scrub_all((note(name) for name in names), "note", target, scrub, apply, matched)


def forget_reports(reports: Path, target: Target, tombstone_id: str, *, apply: bool) -> tuple[list[Place], list[Place]]:
    """``(places, left)`` over the graph reports in the folder ``reports`` (SQLite backend)."""
    def read(path: Path) -> bytes | None:
        with contextlib.suppress(FileNotFoundError):
            return path.read_bytes()
        return None

    def report(path: Path) -> tuple[str, Read, Rewrite]:
        return (f"{reports.name}/{path.name}", lambda: read(path),
                lambda new, old: write_atomic(path, new, expected=old))

    files = sorted(reports.glob("*.md")) if reports.is_dir() else []
    return _scrub_all((report(path) for path in files), "report", target,
                      lambda text: target.scrub(text, tombstone_id)[0], apply)


def scrub_write(raw: str, target: Target, tombstone_id: str, matched: set[str] | None = None) -> tuple[str, int]:
    """A promotion record's ``write`` (JSON, ``PromotionWrite``'s fields) with its text fields scrubbed,
    and how many matches were replaced; ``raw`` unchanged when none. A pattern's matched strings go to
    ``matched`` when given."""
    write: dict[str, Any] = json.loads(raw)
    total = 0
    for field in WRITE_TEXT_FIELDS:
        value = write.get(field)
        if isinstance(value, str):
            if matched is not None and target.pattern is not None:
                matched.update(m.group(0) for m in target.finditer(value))
            write[field], count = target.scrub(value, tombstone_id)
            total += count
    return (json.dumps(write) if total else raw), total


def scrub_json(raw: str, target: Target, tombstone_id: str) -> tuple[str, int]:
    """A JSON document (a merge's journal entry, a run's record) with every string value scrubbed, and
    how many matches were replaced; ``raw`` unchanged when none. Keys (note names) are kept."""
    total = 0

    def walk(value: Any) -> Any:
        nonlocal total
        if isinstance(value, str):
            new, count = target.scrub(value, tombstone_id)
            total += count
            return new
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    scrubbed = walk(json.loads(raw))
    return (json.dumps(scrubbed) if total else raw), total


def forget_sqlite(store: SqliteVaultStore, target: Target, tombstone_id: str, apply: bool) -> StoreForget:
    """The SQLite vault's notes, promotion records and graph reports (module docstring), and the notes
    only its index still holds (changed or removed by hand since), which an apply reindexes; ``left``
    also names the notes whose index rows still hold the target afterwards. The bytes are purged after."""
    result = StoreForget(f"vault:{store.project}")
    indexed = index_places(store.conn, target, "note")  # before the notes' writes reindex them
    for found, left in (forget_notes(store, target, tombstone_id, apply=apply, matched=result.matched),
                        forget_reports(store.directory / REPORTS_DIR, target, tombstone_id, apply=apply)):
        result.places += found
        result.left += left
    seen = {p.where for p in result.places}
    result.places += [p for p in indexed if p.where not in seen]  # only the index holds it: a note gone by hand
    note_names(store, target, tombstone_id, apply, result)
    count = sqlite_rows.forget_promotions(store.conn, lambda raw: scrub_write(raw, target, tombstone_id, result.matched),
                                          apply)
    if count:
        result.places.append(Place("kb_promotions", "table", count))
    count = sqlite_reflection.forget(store.conn, lambda raw: scrub_json(raw, target, tombstone_id), apply)
    if count:
        result.places.append(Place("kb_reflection", "table", count))
    if apply:  # the index agrees with the files again (a note changed or removed by hand since it was indexed)
        stale = [name for name in (name_from_path(p.where) for p in index_places(store.conn, target, "note")) if name]
        if stale:
            reindex_notes(store.conn, store.directory, stale)
        scrub_old_paths(store.conn, target, tombstone_id)
        known = {p.where for p in result.left}
        result.left += [p for p in index_places(store.conn, target, "note") if p.where not in known]
    return result


def note_names(store: VaultStore, target: Target, tombstone_id: str, apply: bool, result: StoreForget) -> None:
    """Notes whose own name holds ``target`` (a place of kind ``name`` each), renamed on ``apply`` with
    every row keyed by their names (``forget_names``, ``VaultStore.forget_names``); one that could not be
    moved is ``left``. The rows renamed are one place (``note names``, kind ``table``)."""
    names = store.names(include_retired=True)
    found = named([note_path(name) for name in names], target)
    if target.pattern is not None:  # a pattern's tombstones: what it matched in the names too
        result.matched.update(m.group(0) for name in names for m in target.finditer(name))
    rename = forget_names.renamer(forget_names.plan(names, target, tombstone_id or "F-scan"), target,
                                  tombstone_id or "F-scan")
    _, left, rows = store.forget_names(rename, apply)
    result.places += found
    result.left += [p for p in found if name_from_path(p.where) in left]
    if rows:
        result.places.append(Place(NAME_ROWS, "table", rows))
