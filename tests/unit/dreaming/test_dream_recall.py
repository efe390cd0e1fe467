"""The recall check: distinctive queries, and "found" meaning the hit's file holds the entry."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from services.dreaming.apply.commit import Pruned
from services.dreaming.apply.recall import Hit, check, check_moves, query_for


class GrepIndex:
    """A stand-in archive: every line of memory/**.md holding all query words is a hit (test seam)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.refreshed = 0
        self.queries: list[str] = []

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        self.refreshed += 1

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        self.queries += [q for _, q, _ in probes]
        return [path in self.files() and entry in (self.workspace / path).read_text() for path, _, entry in probes]

    def files(self) -> set[str]:
        return {str(p.relative_to(self.workspace)) for p in self.workspace.rglob("*.md")}

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        self.queries.append(query)
        words = query.split()
        hits = []
        for path in sorted(self.workspace.rglob("*.md")):
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                if all(w.casefold() in line.casefold() for w in words):
                    hits.append(Hit(str(path.relative_to(self.workspace)), number, number))
        return hits[:limit]


def test_query_takes_the_longest_distinctive_words_in_text_order() -> None:
    assert query_for("- The Kestrel deploy key rotates every 90 days on Tuesday") == "Kestrel deploy key rotates days Tuesday"
    assert query_for("- a to be or") == ""
    assert query_for("---") == ""
    assert query_for("北京 会议 mañana") == "北京 会议 mañana"


def test_query_words_are_the_text_as_search_splits_it() -> None:
    """Words run between spaces and ASCII controls, as they stand: punctuation, emoji, marks and glued
    CJK stay in the word that the index holds as one token (``\\w+`` split ``hmm🤔`` into ``hmm``, which
    no token of the index is), and case is kept (the ascii tokenizer folds ASCII only)."""
    assert query_for("- hmm🤔 thinking (zebra) deploy東京 Éclair") == "hmm🤔 thinking (zebra) deploy東京 Éclair"
    assert query_for("- **DONE** The snake_case_name is set") == "**DONE** snake_case_name set"
    # sections.entries splits after NEL, LS and PS too and joins with "\n", which the file does not hold there.
    assert query_for("- abcd\x85\nefgh ijkl\u2028\nmnop") == "abcd\x85efgh ijkl\u2028mnop"


def test_a_long_word_is_the_query_alone_and_fits_search_s_limit() -> None:
    blob = "QmFzZTY0" * 150  # 1,200 characters: longer than Search's 1,000
    assert query_for(f"- key {blob} rotated weekly") == blob
    words = [f"{n}" + "w" * 300 for n in range(6)]  # six 301-character words: only three fit in 1,000
    assert query_for(" ".join(words)) == " ".join(words[:3])


def test_found_in_the_archive_passes_and_missing_fails(tmp_path: Path) -> None:
    (tmp_path / "memory" / "archive").mkdir(parents=True)
    (tmp_path / "memory" / "archive" / "pruned.md").write_text("## Removed\n\n- Kestrel deploy key rotates every 90 days\n")
    index = GrepIndex(tmp_path)
    kept = Pruned("r/1", "MEMORY.md", "- Kestrel deploy key rotates every 90 days\n")
    lost = Pruned("r/2", "MEMORY.md", "- Osprey backups run at midnight\n\n---\n")
    missing = asyncio.run(check(index, "alfred", tmp_path, [kept, lost]))
    assert index.refreshed == 1
    assert [(m.op_id, m.entry) for m in missing] == [("r/2", "- Osprey backups run at midnight")]


def test_a_hit_that_does_not_hold_the_entry_is_not_enough(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "other.md").write_text("- kestrel deploy key rotates days (a different note)\n")
    entry = Pruned("r/1", "MEMORY.md", "- Kestrel deploy key rotates every 90 days\n")
    assert len(asyncio.run(check(GrepIndex(tmp_path), "alfred", tmp_path, [entry]))) == 1


def test_nothing_pruned_asks_nothing(tmp_path: Path) -> None:
    index = GrepIndex(tmp_path)
    assert asyncio.run(check(index, "alfred", tmp_path, [])) == [] and index.refreshed == 0


def test_moves_are_probed_in_their_destination_in_one_call(tmp_path: Path) -> None:
    (tmp_path / "memory" / "archive").mkdir(parents=True)
    (tmp_path / "memory" / "archive" / "completed.md").write_text("- [x] shipped the Osprey build\n")
    index = GrepIndex(tmp_path)
    moved = [("r/1", "memory/archive/completed.md", "- [x] shipped the Osprey build\n"),
             ("r/2", "memory/log.md", "- 2026-11-30 met Ada at the pier\n")]
    missing = asyncio.run(check_moves(index, "alfred", moved, ["MEMORY.md", "memory/archive/completed.md"]))
    assert index.refreshed == 1
    assert [(m.op_id, m.file) for m in missing] == [("r/2", "memory/log.md")]
