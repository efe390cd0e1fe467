"""The KB and the tombstones (services/kb/archive/forgotten.py): an agent's own write of forgotten text
is flagged as it is indexed, never with the text, and search does not return its chunks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from structlog.testing import capture_logs

from gateway.config import build
from gateway.forgetting import Tombstones
from services.kb.archive.archives import Archives
from services.kb.metrics import FORGOTTEN_INDEXED

TEXT = "Dana Whitlock's locker code is 4471"


def make(tmp_path: Path) -> tuple[Archives, Path]:
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    memory = tmp_path / "agents" / "a" / "workspace" / "memory"
    memory.mkdir(parents=True)
    return Archives(config.agents), memory


def indexed_count() -> float:
    return float(FORGOTTEN_INDEXED._value.get())


def test_a_direct_write_of_forgotten_text_is_flagged_and_kept_out_of_search(tmp_path: Path) -> None:
    archives, memory = make(tmp_path)
    Tombstones(tmp_path).add("F-0a1b2c", [TEXT], scope="a", at="t", by="k", places=1)
    (memory / "lockers.md").write_text("# Lockers\n\nquokka: the lockers are on deck 2.\n")
    (memory / "codes.md").write_text(f"# Codes\n\nquokka: {TEXT.lower()}.\n")
    before = indexed_count()

    async def scenario() -> tuple[list[str], list[str]]:
        await archives.refresh("a")
        found, _ = await archives.search("a", "quokka", 10, False)
        Tombstones(tmp_path).lift("F-0a1b2c")
        again, _ = await archives.search("a", "quokka", 10, False)
        return [h.path for h in found.hits], sorted(h.path for h in again.hits)

    try:
        with capture_logs() as logs:
            shown, after_lift = asyncio.run(scenario())
    finally:
        archives.close()
    assert shown == ["memory/lockers.md"]
    assert after_lift == ["memory/codes.md", "memory/lockers.md"]  # lifted: served again
    flags = [e for e in logs if e["event"] == "kb_forgotten_text_indexed"]
    assert [(e["agent"], e["path"], e["tombstone"]) for e in flags] == [("a", "memory/codes.md", "F-0a1b2c")]
    assert indexed_count() == before + 1
    assert "4471" not in repr(logs)


def test_without_a_tombstone_nothing_is_read_again_nor_hidden(tmp_path: Path) -> None:
    archives, memory = make(tmp_path)
    Tombstones(tmp_path).add("F-0a1b2d", [TEXT], scope="someone-else", at="t", by="k", places=1)
    (memory / "codes.md").write_text(f"# Codes\n\nquokka: {TEXT}.\n")

    async def scenario() -> list[str]:
        await archives.refresh("a")
        found, _ = await archives.search("a", "quokka", 10, False)
        return [h.path for h in found.hits]

    try:
        with capture_logs() as logs:
            assert asyncio.run(scenario()) == ["memory/codes.md"]
    finally:
        archives.close()
    assert not [e for e in logs if e["event"] == "kb_forgotten_text_indexed"]
