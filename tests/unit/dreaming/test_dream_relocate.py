"""Writing a deterministic pass's moves, and undoing them (a whole run, or one move alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.dreaming.passes.moves import COMPACT, COMPLETED, ROUTE, Move, archive_block, take
from services.dreaming.passes.relocate import relocate
from services.dreaming.records import journal

TEXT = "# Memory\n\n## Tasks\n- [x] ship the beta\n- keep the docs fresh\n- [x] rotate the keys\n\n## Log\n- 2026-11-30 met Ada\n"


def move(kind: str, line: str, target: str, path: tuple[str, ...]) -> Move:
    start = TEXT.index(line)
    end = start + len(line) + 1
    return Move(kind, start, end, TEXT[start:end], target, path, reason=f"{kind} rule")


MOVES = [
    ("run/1", move(COMPACT, "- [x] ship the beta", COMPLETED, ("Memory", "Tasks"))),
    ("run/2", move(COMPACT, "- [x] rotate the keys", COMPLETED, ("Memory", "Tasks"))),
    ("run/3", move(ROUTE, "- 2026-11-30 met Ada", "memory/log.md", ("Memory", "Log"))),
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "MEMORY.md").write_text(TEXT)
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "log.md").write_text("# Log\n- older entry")  # no final newline
    return tmp_path


def read(ws: Path, rel: str) -> str:
    return (ws / rel).read_text()


def test_moves_land_verbatim_with_their_heading_path_and_leave_the_source(ws: Path) -> None:
    done = relocate(ws, "MEMORY.md", TEXT, MOVES, "run", "2026-12-01T03:00:00Z")
    assert done.aborted == ""
    assert read(ws, "MEMORY.md") == take(TEXT, [m for _, m in MOVES]) == done.after
    completed = read(ws, COMPLETED)
    assert completed == archive_block([m for _, m in MOVES[:2]], "run", "2026-12-01")
    assert "## Completed in MEMORY.md › Memory › Tasks · 2026-12-01 · run run" in completed
    assert "- [x] ship the beta\n- [x] rotate the keys\n" in completed
    assert read(ws, "memory/log.md").startswith("# Log\n- older entry\n\n## Moved from MEMORY.md › Memory › Log")
    assert read(ws, ".dreaming/backups/MEMORY.md.run") == TEXT
    records = journal.read(ws)
    assert [r["kind"] for r in records] == ["intent"] + ["edit"] * 6 + ["intentDone"]  # the intent first, closed last
    kinds = [(r["op"], r["opKind"], r["file"]) for r in records if r["kind"] == "edit"]
    assert sorted(kinds) == sorted([("run/1", "append", COMPLETED), ("run/2", "append", COMPLETED), ("run/3", "append", "memory/log.md"),
                                    ("run/1", "move", "MEMORY.md"), ("run/2", "move", "MEMORY.md"), ("run/3", "move", "MEMORY.md")])


def test_a_whole_run_reverts_to_the_exact_bytes_everywhere(ws: Path) -> None:
    relocate(ws, "MEMORY.md", TEXT, MOVES, "run", "2026-12-01T03:00:00Z")
    undone = journal.plan_revert(journal.read(ws), "run", None, lambda rel: read(ws, rel))
    assert undone.texts["MEMORY.md"] == TEXT
    assert undone.texts[COMPLETED] == ""
    assert undone.texts["memory/log.md"] == "# Log\n- older entry"  # the newline the append added goes too


def test_one_move_reverts_alone_taking_only_its_piece_off_the_archive(ws: Path) -> None:
    relocate(ws, "MEMORY.md", TEXT, MOVES, "run", "2026-12-01T03:00:00Z")
    undone = journal.plan_revert(journal.read(ws), "run", "run/3", lambda rel: read(ws, rel))
    assert undone.texts["MEMORY.md"].endswith("## Log\n- 2026-11-30 met Ada\n")
    assert "ship the beta" not in undone.texts["MEMORY.md"]
    assert undone.texts["memory/log.md"] == "# Log\n- older entry"
    # a move whose neighbours the same run moved too has lost its context: refused, never guessed
    with pytest.raises(journal.RevertRefused, match="run/2"):
        journal.plan_revert(journal.read(ws), "run", "run/2", lambda rel: read(ws, rel))


def test_a_source_changed_since_the_plan_moves_nothing(ws: Path) -> None:
    (ws / "MEMORY.md").write_text(TEXT + "- the agent wrote this\n")
    done = relocate(ws, "MEMORY.md", TEXT, MOVES, "run", "2026-12-01T03:00:00Z")
    assert "changed on disk" in done.aborted
    assert not (ws / COMPLETED).exists() and journal.read(ws) == []
    assert read(ws, "memory/log.md") == "# Log\n- older entry"
