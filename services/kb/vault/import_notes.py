"""A folder written by ``export`` read back into a vault through its store (docs/how-to/move-vault.md).

First the whole folder is checked: the manifest's format and project, every file it names present
with its sha256, no file it does not name, every note name valid. Then every note is compared with
the store: absent (to write), holding the same bytes (written by an earlier run: nothing to do),
holding other bytes (a conflict) or unreadable (a link out of the vault: refused, naming it).
Conflicts refuse the whole import before anything is written, unless ``skip_existing``: then the live
name's notes, authors and lifecycle row are left as the vault has them, and named. Nothing is written
until all of that passed.

Then, per live name (its note and its ``stale__`` twin): each note created through ``store.write``
(create-if-absent: atomic per note), its authors recorded as exported, its GC retirement time set,
then its last change kept (``store.keep_time``; last, since recording an author is a change on some
backends). A live name none of whose notes existed before this run also gets its retrievals back:
``retrieval_count`` rows in the retrieval log at its ``last_retrieved``, which the vault's next GC run
folds into the lifecycle row. A run killed midway is completed by running it again: notes already
there are recognised by their bytes, authors and retirement times are set to the same values again,
and retrievals are never logged twice (a live name caught midway by the kill keeps its notes, not its
retrievals).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.atomic import WriteConflict
from gateway.errors import CommandError, GatewayError
from services.kb.vault.export import FORMAT, MANIFEST, METADATA, note_rel, sha256
from services.kb.vault.gc import note_ref
from services.kb.vault.names import live_name, validate_name
from services.kb.vault.store import VaultStore, Writer

SHOWN: int = 10  # conflicts named in the refusal; the rest are counted


@dataclass
class Imported:
    """What an import did, by note name."""

    written: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # the same bytes were there already
    skipped: list[str] = field(default_factory=list)  # other bytes there (``skip_existing``)


@dataclass(frozen=True)
class Folder:
    """A checked export: note bytes by name and ``vault.json``'s sections."""

    project: str
    notes: dict[str, bytes]
    meta: dict[str, Any]


def _refuse(line: str) -> CommandError:
    return CommandError(f"vault import: {line}; nothing was written")


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((folder / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise _refuse(f"{folder / MANIFEST} is missing (not a finished gateway vault export)") from None
    except ValueError as exc:
        raise _refuse(f"{folder / MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse(f"{folder / MANIFEST} is not a vault export of format {FORMAT}")
    return manifest


def _checked_files(folder: Path, files: dict[str, str]) -> dict[str, bytes]:
    found = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir()}
    for rel in sorted(found - set(files) - {MANIFEST}):
        raise _refuse(f"{rel} is not in the manifest (added after the export)")
    contents: dict[str, bytes] = {}
    for rel, digest in sorted(files.items()):
        if rel not in found:
            raise _refuse(f"{rel} is missing")
        contents[rel] = (folder / rel).read_bytes()
        if sha256(contents[rel]) != digest:
            raise _refuse(f"{rel} changed since the export (its sha256 is not the manifest's)")
    return contents


def read_folder(folder: Path) -> Folder:
    """The export in ``folder``, checked (module docstring); CommandError naming the first fault."""
    manifest = _manifest(folder)
    contents = _checked_files(folder, dict(manifest.get("files", {})))
    meta = json.loads(contents.pop(METADATA, b"null"))
    if not isinstance(meta, dict):
        raise _refuse(f"{METADATA} is missing from the manifest")
    notes: dict[str, bytes] = {}
    for name in meta.get("notes", {}):
        try:
            valid = validate_name(name, allow_retired=True) == name
        except GatewayError:
            valid = False
        if not valid or note_rel(name) not in contents:
            raise _refuse(f"{METADATA} names a note {name!r} the export does not hold as a valid note")
        notes[name] = contents.pop(note_rel(name))
    for rel in contents:
        raise _refuse(f"{rel} is not a note {METADATA} names")
    return Folder(str(manifest.get("project", "")), notes, meta)


def _groups(notes: dict[str, bytes]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name in sorted(notes):
        groups.setdefault(live_name(name), []).append(name)
    return groups


def _writer(raw: dict[str, Any] | None) -> Writer | None:
    if raw is None:
        return None
    return Writer(str(raw["agent_id"]), str(raw["key"]), str(raw["run_id"]), float(raw["at"]))


def _restore_rows(store: VaultStore, live: str, meta: dict[str, Any], fresh: bool, text: str) -> None:
    authors = meta.get("authors", {}).get(live)
    if authors is not None:
        created, changed = _writer(authors["created"]), _writer(authors["changed"])
        if created is not None:
            store.record_author(live, created, created=True)
        if changed is not None:
            store.record_author(live, changed, created=False)
    state = meta.get("lifecycle", {}).get(live)
    if state is None:
        return
    if state.get("retired_at") is not None:
        store.set_retired(live, float(state["retired_at"]))
    if fresh and state.get("last_retrieved") is not None and int(state.get("retrieval_count", 0)) > 0:
        hit = note_ref(live, text)
        store.log_retrievals([hit] * int(state["retrieval_count"]), "get", float(state["last_retrieved"]))


def _held(store: VaultStore, name: str) -> bytes | None:
    """What the vault holds as note ``name``; a refusal naming it when the vault will not read it (a link
    to a file outside the vault)."""
    try:
        return store.read(name)
    except GatewayError as exc:
        raise _refuse(f"the vault's note {name!r} cannot be compared with the export's ({exc})") from None


def _plan(store: VaultStore, export: Folder, skip_existing: bool, done: Imported) -> dict[str, list[str]]:
    """The live names to import; the notes already there sorted into ``done``. Refuses conflicts."""
    groups = _groups(export.notes)
    conflicts = [name for name, data in export.notes.items() if _held(store, name) not in (None, data)]
    if conflicts and not skip_existing:
        shown = ", ".join(repr(n) for n in sorted(conflicts)[:SHOWN])
        more = f" and {len(conflicts) - SHOWN} more" if len(conflicts) > SHOWN else ""
        raise _refuse(f"{len(conflicts)} note(s) exist in the vault with other content: {shown}{more} "
                      "(pass --skip-existing to import the rest)")
    for live in sorted({live_name(name) for name in conflicts}):
        done.skipped.extend(groups.pop(live))
    return groups


def import_vault(store: VaultStore, export: Folder, *, skip_existing: bool = False) -> Imported:
    """Write ``export`` into ``store`` (module docstring)."""
    done = Imported()
    groups = _plan(store, export, skip_existing, done)
    times = export.meta.get("notes", {})
    for live, names in groups.items():
        fresh = all(not store.exists(name) for name in names)
        for name in names:
            data = export.notes[name]
            with store.writing():
                try:
                    store.write(name, data, expected=None)
                    done.written.append(name)
                except WriteConflict:
                    if _held(store, name) != data:
                        raise CommandError(f"vault import: note {name!r} was created meanwhile with other "
                                           f"content; the notes before it were imported, run the import again") from None
                    done.present.append(name)
        with store.writing():
            _restore_rows(store, live, export.meta, fresh, export.notes[names[0]].decode("utf-8", "replace"))
            for name in names:
                store.keep_time(name, float(times[name]["updated_at"]))
    return done
