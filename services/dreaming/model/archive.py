"""The agent's archive as the KB shows it to dreaming: ``Index``, the seam every KB call goes through
(the peer client over gRPC, a local index in tests), and the values it answers with and is told:
search hits, entries with their lifecycle rows (``ListArchiveEntries``) and the staleness GC's
decisions (``UpdateEntryLifecycle``). Times are Unix epoch seconds; None where there is none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class IndexedEntry:
    """One entry where the index says it stands now (1-based inclusive lines, split at ``\\n``),
    with its lifecycle row. ``path`` is "" for a row of an entry that stands in no source. ``text``:
    the entry as read from its file ("" until the staleness GC reads it)."""

    path: str
    start_line: int
    end_line: int
    entry_hash: str
    importance: int
    provenance: str
    first_seen: float
    first_path: str = ""
    text: str = ""
    last_retrieved: float | None = None
    retrieval_count: int = 0
    supersedes_key: str | None = None
    invalid_at: float | None = None
    restored_at: float | None = None

    @property
    def idle_since(self) -> float:
        return max(self.first_seen, self.last_retrieved or self.first_seen)


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


@dataclass(frozen=True)
class Hit:
    path: str
    start_line: int
    end_line: int
    entry_hash: str = ""  # the entry the hit most likely answers, when the KB says


class Index(Protocol):
    """The agent's archive as dreaming sees it (the KB over gRPC)."""

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        """Bring the archive up to date; ``paths``: the sources the caller wrote (the KB then need not
        wait for its file watch to see them)."""
        ...

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]: ...

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        """For each ``(path, query, text)``: whether the index finds the entry in that file."""
        ...

    async def fold(self, agent_id: str) -> None:
        """Fold the retrieval log into the lifecycle rows (the staleness GC reads fresh counts)."""
        ...

    async def entries(self, agent_id: str) -> Listing:
        """Every entry of the archive with its lifecycle row (every page)."""
        ...

    async def lifecycle(self, agent_id: str, hashes: Sequence[str]) -> tuple[list[IndexedEntry], list[IndexedEntry]]:
        """Where ``hashes`` stand now, and their lifecycle rows (``path`` "") wherever they stand."""
        ...

    async def update_lifecycle(self, agent_id: str, updates: Sequence[LifecycleUpdate]) -> list[str]:
        """Record the staleness GC's decisions; the hashes that had no lifecycle row."""
        ...
