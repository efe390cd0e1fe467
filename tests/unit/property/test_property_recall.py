"""Properties of the recall check against the real KB (indexer, Search, ``ProbeRecall``'s probe) in-process.

Whatever the words of MEMORY.md's entries (any length, from a letter to a 2,500-character key;
Latin, decomposed marks, CJK, Thai, Hangul, emoji, private use; punctuation FTS5 splits on;
controls, a NUL, and the line separators Python splits lines at but the index does not),
under every tokenizer and chunk size:

- the compactor's and the route-out's moves pass the recall check: every moved entry is found
  through the index in its destination, so a run is never rolled back for a word the index
  holds (docs/concepts/archive.md "Knowledge archive (KB)" › Long words);
- an entry is found by the recall probe with its distinctive words and by Search with them, and
  each of its words alone finds it by Search (a word longer than Search reads, by its first
  characters).

The KB is its own domain code on a temporary ``kb.sqlite`` (apsw): no process, no gRPC.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming.apply import recall
from services.dreaming.model.archive import IndexedEntry, LifecycleUpdate, Listing
from services.dreaming.model.values import AUTO
from services.dreaming.passes.deterministic import run_passes
from services.kb.archive import recall_probe
from services.kb.index import indexer, schema
from services.kb.index.search import search

TOKENIZERS = ("unicode61", "porter", "ascii", "trigram")
CHUNK_TOKENS = (16, 64, 400)  # 64, 256 and 1,600 characters: under and over Search's 1,000

# Words in every script the rules are about, and separators inside words.
SHORT = st.text(
    st.sampled_from(
        list("abcxyzKQ019") + ["é", "\u0301", "ß", "İ", "東", "京", "ไ", "ท", "한", "🙂", "🤔", "\ue000", "-", "_", ".",
                                 "/", ":", "'", '"', "*", "(", "+", "\u3001", "\u00a0", "\t", "\x00", "\x0b", "\x85", "\u2028"]
    ),
    min_size=1, max_size=14,
)
KEY = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="), min_size=40, max_size=2500)
LONG = st.one_of(
    KEY,  # a base64 blob or a long key
    st.integers(min_value=990, max_value=1210).map(lambda n: "k" * n),  # around Search's 1,000
    st.text(st.sampled_from("東京大学研究ภาษาไทย한국어"), min_size=3, max_size=1300),  # CJK and Thai, no spaces
    st.text(st.sampled_from("abcé\u0301🙂-"), min_size=60, max_size=1300),
)
WORD = st.one_of(SHORT, SHORT, SHORT, LONG)
ENTRY = st.lists(WORD, min_size=1, max_size=6).map(" ".join).filter(lambda t: re.search(r"[^\W_]", t) is not None)
_LETTER = re.compile(r"[^\W_]")


class Kb:
    """``recall.Index`` over the KB's own code: the indexer, the probe and Search on one connection."""

    def __init__(self, agent: AgentConfig) -> None:
        self.agent = agent
        agent.kb_path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = schema.open_index(agent.kb_path, agent.knowledge.archive)

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        indexer.refresh(self.conn, self.agent.workspace, self.agent.knowledge.archive)

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[recall.Hit]:
        hits = search(self.conn, self.agent.workspace, query, limit).hits
        return [recall.Hit(h.path, h.start_line, h.end_line) for h in hits]

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        return recall_probe.probe(self.conn, self.agent.workspace, probes)

    async def fold(self, agent_id: str) -> None:  # the staleness GC is off (``agent_in``)
        raise AssertionError("not used")

    async def entries(self, agent_id: str) -> Listing:
        raise AssertionError("not used")

    async def lifecycle(self, agent_id: str, hashes: Sequence[str]) -> tuple[list[IndexedEntry], list[IndexedEntry]]:
        raise AssertionError("not used")

    async def update_lifecycle(self, agent_id: str, updates: Sequence[LifecycleUpdate]) -> list[str]:
        raise AssertionError("not used")


def agent_in(home: Path, tokenizer: str, chunk_tokens: int, budget: int = 8000) -> AgentConfig:
    raw = {
        "configVersion": CURRENT_VERSION,
        "agents": [{
            "id": "alfred",
            "memory": {"memoryBudgetChars": budget},
            "dreaming": {"staleness": {"enabled": False}},
            "knowledge": {"archive": {"tokenizer": tokenizer, "chunkTokens": chunk_tokens, "chunkOverlap": chunk_tokens // 4}},
        }],
    }
    agent = build(raw, home).agents[0]
    agent.workspace.mkdir(parents=True)
    return agent


@settings(max_examples=60)
@given(
    finished=st.lists(ENTRY, min_size=1, max_size=5),
    dated=st.lists(ENTRY, max_size=4),
    tokenizer=st.sampled_from(TOKENIZERS),
    chunk_tokens=st.sampled_from(CHUNK_TOKENS),
)
def test_every_entry_the_compactor_or_route_out_moves_passes_the_recall_check(
    finished: list[str], dated: list[str], tokenizer: str, chunk_tokens: int
) -> None:
    lines = [f"- [x] {entry}" for entry in finished]
    lines += [f"- 2025-0{1 + n % 9}-1{n % 10} {entry}" for n, entry in enumerate(dated)]  # episodic: routed out
    text = "# Memory\n\n## Tasks\n\n" + "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as home:
        agent = agent_in(Path(home), tokenizer, chunk_tokens, budget=1)  # over budget: the route-out moves all it can
        (agent.workspace / "MEMORY.md").write_text(text, encoding="utf-8")
        kb = Kb(agent)
        try:
            out = asyncio.run(run_passes(agent, kb, "r1", "2026-01-01T03:00:00Z", text, AUTO))
        finally:
            kb.conn.close()
        statuses = {r.op_id: r.status for r in out.results}
        assert len(statuses) == len(lines), out.results
        assert set(statuses.values()) == {"applied"}, out.notes
        assert any(note.startswith("Moves recall-checked: all") for note in out.notes), out.notes
        left = (agent.workspace / "MEMORY.md").read_text(encoding="utf-8")
        assert not any(line in left for line in lines)


def _index_one(home: Path, tokenizer: str, chunk_tokens: int, body: str) -> tuple[AgentConfig, apsw.Connection]:
    agent = agent_in(home, tokenizer, chunk_tokens)
    path = agent.workspace / "memory" / "archive" / "completed.md"
    path.parent.mkdir(parents=True)
    path.write_text(body, encoding="utf-8")
    agent.kb_path.parent.mkdir(parents=True, exist_ok=True)
    conn = schema.open_index(agent.kb_path, agent.knowledge.archive)
    indexer.refresh(conn, agent.workspace, agent.knowledge.archive)
    return agent, conn


@settings(max_examples=150)
@given(entry=ENTRY, tokenizer=st.sampled_from(TOKENIZERS), chunk_tokens=st.sampled_from(CHUNK_TOKENS))
def test_an_entry_is_found_by_its_query_and_by_each_of_its_words(entry: str, tokenizer: str, chunk_tokens: int) -> None:
    item = f"- {entry}"
    body = "# Completed\n\n- an unrelated neighbour above\n" + item + "\n- an unrelated neighbour below\n"
    line = 4
    with tempfile.TemporaryDirectory() as home:
        agent, conn = _index_one(Path(home), tokenizer, chunk_tokens, body)
        try:
            query = recall.query_for(item)
            rel = "memory/archive/completed.md"
            assert recall_probe.probe(conn, agent.workspace, [(rel, query, item)]) == [True], query[:80]
            if query:  # else nothing to search for: the check passes it (a rule, a lone symbol)
                hits = search(conn, agent.workspace, query, 20).hits
                assert any(h.path == rel and h.start_line <= line <= h.end_line for h in hits), query[:80]
            for word in entry.split(" "):  # the words as written (a no-break space is inside one)
                if not _LETTER.search(word):
                    continue  # nothing to search: Search drops it
                hits = search(conn, agent.workspace, word, 20).hits
                assert any(h.start_line <= line <= h.end_line for h in hits), (word[:80], len(word))
        finally:
            conn.close()
