"""ProbeRecall's check: an entry is found when a chunk of its file matches its query and holds it."""

from __future__ import annotations

from pathlib import Path

from gateway.config import build
from services.kb.archive.recall_probe import probe
from services.kb.index import indexer, schema


def index(tmp_path: Path, files: dict[str, str], **archive: object) -> tuple[Path, object]:
    raw = {"agents": [{"id": "a", "knowledge": {"archive": archive}}] if archive else [{"id": "a"}]}
    agent = build(raw, tmp_path).agents[0]
    for rel, text in files.items():
        path = agent.workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    agent.kb_path.parent.mkdir(parents=True, exist_ok=True)
    conn = schema.open_index(agent.kb_path, agent.knowledge.archive, create=True)
    indexer.refresh(conn, agent.workspace, agent.knowledge.archive)
    return agent.workspace, conn


def test_found_only_in_the_file_that_holds_it(tmp_path: Path) -> None:
    workspace, conn = index(tmp_path, {
        "MEMORY.md": "- the Osprey relay answers on channel nine\n",
        "memory/archive/completed.md": "- [x] calibrated the north pier gauge\n",
    })
    found = probe(conn, workspace, [  # type: ignore[arg-type]
        ("memory/archive/completed.md", "calibrated north pier gauge", "- [x] calibrated the north pier gauge"),
        ("MEMORY.md", "calibrated north pier gauge", "- [x] calibrated the north pier gauge"),  # not in that file
        ("memory/archive/completed.md", "osprey relay", "- the Osprey relay answers on channel nine"),
        ("memory/nowhere.md", "anything", "anything"),
        ("memory/archive/completed.md", "", "---"),  # nothing searchable: found by definition
    ])
    assert found == [True, False, False, False, True]


def test_an_entry_across_two_chunks_is_found_in_its_file(tmp_path: Path) -> None:
    long_entry = "- " + " ".join(f"harbourword{i}" for i in range(200))
    workspace, conn = index(tmp_path, {"memory/log.md": long_entry + "\n"}, chunkTokens=64, chunkOverlap=8)
    assert probe(conn, workspace, [("memory/log.md", "harbourword3 harbourword4", long_entry)]) == [True]  # type: ignore[arg-type]


def test_cjk_entries_use_the_trigram_table(tmp_path: Path) -> None:
    workspace, conn = index(tmp_path, {"memory/log.md": "- 東京の会議は金曜日です\n"})
    assert probe(conn, workspace, [("memory/log.md", "東京の会議", "- 東京の会議は金曜日です")]) == [True]  # type: ignore[arg-type]
