"""The notes of a vault as a list a person reads (docs/concepts/vault.md "Shared vault", Listing the notes).

Pure domain code over the vault's store: every note whose name is a valid note name (``names``;
others cannot be read by name, so they are not listed) but the vault's pruned archive (``names.PRUNED_ARCHIVE``), sorted by name in code point order,
paged by the last name of the previous page. Each note on the page is read once, its first
``HEAD_BYTES`` only: its title (the frontmatter ``title``, else the first ``# `` heading),
its provenance as the index gives it (``note_index.classify_note``) and, for a retired note,
its marker (when and why). Size and time are the store's (``VaultStore.stat``). Who wrote it
is the store's ``authors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gateway.errors import GatewayError
from services.kb.graph.parse import parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter
from services.kb.vault.names import is_reserved, is_retired, note_path, validate_name
from services.kb.vault.note_index import classify_note
from services.kb.vault.retirement import read_marker
from services.kb.vault.store import VaultStore

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


def names(store: VaultStore, *, include_retired: bool) -> list[str]:
    """Every listable note name of the vault, sorted (module docstring)."""
    return [name for name in store.names(include_retired=include_retired) if _listable(name)]


def _listable(name: str) -> bool:
    try:
        return validate_name(name, allow_retired=True) == name and not is_reserved(name)
    except GatewayError:
        return False


def page(store: VaultStore, size: int, token: str, *, include_retired: bool) -> NotePage:
    """The notes after ``token`` (a name; empty: from the first), at most ``size`` (0: the default)."""
    size = min(size or DEFAULT_PAGE, MAX_PAGE)
    every = names(store, include_retired=include_retired)
    after = [name for name in every if name > token] if token else every
    shown = after[:size]
    facts = [f for f in (_facts(store, name) for name in shown) if f is not None]
    return NotePage(facts, shown[-1] if len(after) > size else "", len(every))


def _facts(store: VaultStore, name: str) -> NoteFacts | None:
    stat = store.stat(name, HEAD_BYTES)
    if stat is None:
        return None
    head = stat.head
    text = head.decode("utf-8", errors="replace")
    front = parse_frontmatter(split_lines(text))
    marker = read_marker(head) if is_retired(name) else None
    return NoteFacts(
        name=name,
        title=parse_note(name, text).title or _heading(text, front.end_line),
        updated_at=stat.updated_at,
        size_bytes=stat.size_bytes,
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
