"""A vault written out to a folder, every note and what the notes alone would lose (docs/how-to/move-vault.md).

The folder holds ``notes/<name>.md`` (each note's bytes as the store keeps them, live and retired
``stale__`` twins alike, frontmatter and retirement marker included), ``vault.json`` (per note its last
change; per live name its authors and its GC lifecycle row) and, written last, ``manifest.json``
(format version, project, counts, the sha256 of every other file). Everything is read through
``store.VaultStore``, so the same export serves every backend; nothing is written to the store. The
files hold no time of the export, so exporting an unchanged vault twice gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway.atomic import write_atomic
from gateway.errors import CommandError, GatewayError
from services.kb.vault.names import NOTE_SUFFIX, NOTES_DIR, is_retired, live_name, validate_name
from services.kb.vault.store import Authors, VaultStore, Writer

FORMAT: Final = 1
MANIFEST: Final = "manifest.json"
METADATA: Final = "vault.json"


@dataclass
class Exported:
    """What an export wrote: the counts the manifest keeps, and the notes it left out (with why)."""

    counts: dict[str, int]
    left_out: list[str] = field(default_factory=list)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dump_json(value: Any) -> bytes:
    """The export's JSON: sorted keys, so the same vault gives the same bytes."""
    return (json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode("utf-8")


def writer_json(writer: Writer | None) -> dict[str, Any] | None:
    return None if writer is None else asdict(writer)


def authors_json(authors: Authors) -> dict[str, Any]:
    return {"created": writer_json(authors.created), "changed": writer_json(authors.changed)}


def note_rel(name: str) -> str:
    return f"{NOTES_DIR}/{name}{NOTE_SUFFIX}"


def refuse_non_empty(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise CommandError(f"vault export: {folder} is not an empty folder; nothing was written")


def _notes(store: VaultStore, out: Path, exported: Exported) -> tuple[dict[str, Any], dict[str, str]]:
    """Each note the store keeps, copied into ``out/notes``; its metadata and the sha256 of its file."""
    meta: dict[str, Any] = {}
    hashes: dict[str, str] = {}
    (out / NOTES_DIR).mkdir(parents=True)
    for name in store.names(include_retired=True):
        try:
            if validate_name(name, allow_retired=True) != name:
                raise CommandError("not in the canonical form of a note name")
            data = store.read(name)
            stat = store.stat(name, 0)
        except GatewayError as exc:
            exported.left_out.append(f"{name}: {exc}")
            continue
        if data is None or stat is None:  # removed since the listing
            continue
        write_atomic(out / note_rel(name), data)
        hashes[note_rel(name)] = sha256(data)
        meta[name] = {"updated_at": stat.updated_at}
    return meta, hashes


def export_vault(store: VaultStore, out: Path) -> Exported:
    """Write ``store``'s vault into the new or empty folder ``out`` (module docstring)."""
    refuse_non_empty(out)
    exported = Exported({})
    notes, hashes = _notes(store, out, exported)
    lives = sorted({live_name(name) for name in notes})
    authors = {name: authors_json(a) for name, a in sorted(store.authors(lives).items())}
    lifecycle = {name: asdict(state) for name, state in sorted(store.lifecycle().items())}
    metadata = dump_json({"notes": notes, "authors": authors, "lifecycle": lifecycle})
    write_atomic(out / METADATA, metadata)
    hashes[METADATA] = sha256(metadata)
    retired = sum(1 for name in notes if is_retired(name))
    exported.counts = {"live": len(notes) - retired, "retired": retired, "authors": len(authors),
                       "lifecycle": len(lifecycle)}
    manifest = {"format": FORMAT, "project": store.project, "counts": exported.counts,
                "files": dict(sorted(hashes.items()))}
    write_atomic(out / MANIFEST, dump_json(manifest))  # last: a folder without it is an export that did not finish
    return exported
