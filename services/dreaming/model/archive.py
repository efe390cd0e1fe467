"""The agent's archive as the KB lists it to dreaming (``ListArchiveEntries``), and what dreaming
records back (``UpdateEntryLifecycle``). Plain values: the peer client fills them from the replies,
the staleness GC and ``explain`` read them. Times are Unix epoch seconds; None where there is none."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexedEntry:
    """One entry where the index says it stands now (1-based inclusive lines, split at ``\\n``),
    with its lifecycle row. ``path`` is "" for a row of an entry that stands in no source."""

    path: str
    start_line: int
    end_line: int
    entry_hash: str
    importance: int
    provenance: str
    first_path: str
    first_seen: float
    last_retrieved: float | None = None
    retrieval_count: int = 0
    supersedes_key: str | None = None
    invalid_at: float | None = None
    restored_at: float | None = None


@dataclass(frozen=True)
class IndexedSource:
    """A source as indexed: ``content_hash`` is the SHA-256 (hex) of the bytes the index holds."""

    path: str
    content_hash: str
    provenance: str


@dataclass(frozen=True)
class Listing:
    entries: list[IndexedEntry]
    sources: dict[str, IndexedSource]


@dataclass(frozen=True)
class LifecycleUpdate:
    """``supersedes_key``: None leaves it ("" clears it); ``invalid_at`` sets it; ``clear_invalid``
    clears it (a restore); ``restored_at`` sets it."""

    entry_hash: str
    supersedes_key: str | None = None
    invalid_at: float | None = None
    clear_invalid: bool = False
    restored_at: float | None = None
