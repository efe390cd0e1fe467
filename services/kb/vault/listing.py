"""The notes of a vault as a list a person reads (docs/concepts/vault.md "Shared vault", Listing the notes).

Pure domain code over ``notes/``: every note whose file name is a valid note name (``names``;
others cannot be read by name, so they are not listed), sorted by name in code point order,
paged by the last name of the previous page. Each note on the page is read once, its first
``HEAD_BYTES`` only: its title (the frontmatter ``title``, else the first ``# `` heading),
its provenance as the index gives it (``note_index.classify_note``) and, for a retired note,
its marker (when and why). Size and time are the file's. Who wrote it is ``authors``'
business. A symbolic link that leaves the vault is not a note here (``retirement.read_note``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway.errors import GatewayError
from services.kb.graph.parse import parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter
from services.kb.vault.names import NOTE_SUFFIX, NOTES_DIR, is_retired, note_path, validate_name
from services.kb.vault.note_index import classify_note
from services.kb.vault.retirement import read_marker

DEFAULT_PAGE: Final = 100
MAX_PAGE: Final = 500
HEAD_BYTES: Final = 68 * 1024  # the graph layer's frontmatter bound (64 KB) and the line after it


@dataclass(frozen=True)
class NoteFacts:
    name: str
    title: str
    updated_at: float
    size_bytes: int
    retired: bool
    provenance: str
    retired_at: float  # 0 when unknown or live
    retired_reason: str


@dataclass(frozen=True)
class NotePage:
    notes: list[NoteFacts]
    next_token: str  # empty on the last page
    total: int


def names(vault_dir: Path, *, include_retired: bool) -> list[str]:
    """Every listable note name of the vault, sorted (module docstring)."""
    found: list[str] = []
    with contextlib.suppress(FileNotFoundError), os.scandir(vault_dir / NOTES_DIR) as entries:
        for entry in entries:
            name = entry.name[: -len(NOTE_SUFFIX)]
            if not entry.name.endswith(NOTE_SUFFIX) or (is_retired(name) and not include_retired):
                continue
            try:
                if validate_name(name, allow_retired=True) != name or entry.is_dir():
                    continue
            except (GatewayError, OSError):
                continue
            found.append(name)
    return sorted(found)


def page(vault_dir: Path, size: int, token: str, *, include_retired: bool) -> NotePage:
    """The notes after ``token`` (a name; empty: from the first), at most ``size`` (0: the default)."""
    size = min(size or DEFAULT_PAGE, MAX_PAGE)
    every = names(vault_dir, include_retired=include_retired)
    after = [name for name in every if name > token] if token else every
    shown = after[:size]
    facts = [f for f in (_facts(vault_dir, name) for name in shown) if f is not None]
    return NotePage(facts, shown[-1] if len(after) > size else "", len(every))


def _facts(vault_dir: Path, name: str) -> NoteFacts | None:
    path = vault_dir / NOTES_DIR / f"{name}{NOTE_SUFFIX}"
    real = os.path.realpath(vault_dir)
    try:
        if os.path.commonpath([os.path.realpath(path), real]) != real:
            return None
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
            stat = os.fstat(handle.fileno())
    except OSError:  # gone since the listing, or unreadable
        return None
    text = head.decode("utf-8", errors="replace")
    front = parse_frontmatter(split_lines(text))
    marker = read_marker(head) if is_retired(name) else None
    return NoteFacts(
        name=name,
        title=parse_note(name, text).title or _heading(text, front.end_line),
        updated_at=stat.st_mtime,
        size_bytes=stat.st_size,
        retired=is_retired(name),
        provenance=classify_note(note_path(name), front.provenance),
        retired_at=marker.at.timestamp() if marker is not None and marker.at is not None else 0.0,
        retired_reason=marker.reason if marker is not None else "",
    )


def _heading(text: str, skip: int) -> str:
    for line in text.split("\n")[skip:]:
        if line.startswith("# "):
            return line[2:].strip()
    return ""
