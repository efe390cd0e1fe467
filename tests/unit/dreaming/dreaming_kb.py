"""An in-process KB for dreaming tests (imported by name): ``recall.Index`` over the KB's own domain
code on a temp ``kb.sqlite`` (the real indexer, search, probes, fold and lifecycle rows; no process,
no gRPC). Retrievals are recorded at a time the test names."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config import AgentConfig
from services.dreaming.apply.recall import Hit
from services.dreaming.model.archive import IndexedEntry, IndexedSource, LifecycleUpdate, Listing
from services.kb.archive import recall_probe, retrieval_log
from services.kb.index import indexer, lifecycle_rows, schema
from services.kb.index.search import search


def _indexed(e: lifecycle_rows.EntryRow | None, life: lifecycle_rows.Lifecycle) -> IndexedEntry:
    return IndexedEntry(
        path=e.path if e else "", start_line=e.start_line if e else 0, end_line=e.end_line if e else 0,
        entry_hash=life.entry_hash, importance=e.importance if e else 0, provenance=e.provenance if e else "",
        first_path=life.first_path, first_seen=life.first_seen, last_retrieved=life.last_retrieved,
        retrieval_count=life.retrieval_count, supersedes_key=life.supersedes_key, invalid_at=life.invalid_at,
        restored_at=life.restored_at,
    )


class LocalKb:
    def __init__(self, agent: AgentConfig, now: float = 2_000_000_000.0) -> None:
        self.agent = agent
        self.now = now
        self.conn = schema.open_index(agent.kb_path, agent.knowledge.archive)
        self.calls: list[str] = []

    def close(self) -> None:
        self.conn.close()

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        self.calls.append("refresh")
        indexer.refresh(self.conn, self.agent.workspace, self.agent.knowledge.archive)

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return [Hit(h.path, h.start_line, h.end_line, h.entry_hash or "") for h in search(self.conn, self.agent.workspace, query, limit).hits]

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        self.calls.append("probe")
        return recall_probe.probe(self.conn, self.agent.workspace, probes)

    async def fold(self, agent_id: str) -> None:
        self.calls.append("fold")
        retrieval_log.fold_retrievals(self.conn)

    async def entries(self, agent_id: str) -> Listing:
        self.calls.append("entries")
        out: list[IndexedEntry] = []
        sources: dict[str, IndexedSource] = {}
        after = ""
        while True:
            page = lifecycle_rows.list_entries(self.conn, after, 3, self.now)  # small pages: paging is exercised
            out += [_indexed(e, e.life) for e in page.entries]
            sources.update((s.path, IndexedSource(s.path, s.content_hash, s.provenance)) for s in page.sources)
            if not page.last_path:
                return Listing(out, sources)
            after = page.last_path

    async def lifecycle(self, agent_id: str, hashes: Sequence[str]) -> tuple[list[IndexedEntry], list[IndexedEntry]]:
        places, lives = lifecycle_rows.lifecycle_of(self.conn, list(hashes), self.now)
        return [_indexed(e, e.life) for e in places], [_indexed(None, life) for life in lives]

    async def update_lifecycle(self, agent_id: str, updates: Sequence[LifecycleUpdate]) -> list[str]:
        self.calls.append("update")
        rows = [lifecycle_rows.Update(u.entry_hash, u.supersedes_key, u.invalid_at, u.clear_invalid, u.restored_at) for u in updates]
        return lifecycle_rows.update_lifecycle(self.conn, rows)[1]

    def retrieve(self, query: str, at: float) -> int:
        """A Search hit recorded at ``at`` (as the KB's read path records it)."""
        indexer.refresh(self.conn, self.agent.workspace, self.agent.knowledge.archive)
        hits = search(self.conn, self.agent.workspace, query).hits
        return retrieval_log.record_retrievals(self.agent.kb_path, hits, "search", clock=lambda: at)

    def life(self, entry_hash: str) -> lifecycle_rows.Lifecycle:
        return lifecycle_rows.lifecycle_of(self.conn, [entry_hash], self.now)[1][0]
