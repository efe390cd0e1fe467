"""What the staleness GC reads from and records in an archive: entries with lifecycle rows, paged by
source; rows of entries that stand nowhere; updates that never touch ages; the restored_at column."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw
import pytest
from kb_helpers import OLD, settings, write

from gateway.errors import InvalidArgument
from services.kb.archive.retrieval_log import fold_retrievals, record_retrievals
from services.kb.index.entries import entry_hash
from services.kb.index.indexer import refresh
from services.kb.index.lifecycle_rows import Update, check_hashes, lifecycle_of, list_entries, update_lifecycle
from services.kb.index.schema import open_index
from services.kb.index.search import search

NOW = 2_000_000_000.0


def test_entries_carry_their_place_source_and_lifecycle(conn: apsw.Connection, db_path: Path, workspace: Path) -> None:
    write(workspace, "MEMORY.md", "# Memory\n\n- the owner's fact\n")
    body = "---\nimportance: 3\n---\n# Notes\n\n- zebra crossing\n  continued here\n\nA paragraph <!-- importance: 9 -->\n"
    write(workspace, "memory/a.md", body)
    refresh(conn, workspace, settings())
    page = list_entries(conn, "", 100, NOW)
    assert page.last_path == ""
    assert [(s.path, s.provenance) for s in page.sources] == [("MEMORY.md", "owner"), ("memory/a.md", "agent")]
    assert page.sources[1].content_hash == hashlib.sha256(body.encode()).hexdigest()
    rows = [(e.path, e.start_line, e.end_line, e.importance) for e in page.entries]
    assert rows == [("MEMORY.md", 3, 3, 5), ("memory/a.md", 6, 7, 3), ("memory/a.md", 9, 9, 9)]
    zebra = page.entries[1].life
    assert zebra.entry_hash == entry_hash("- zebra crossing\n  continued here")
    assert (zebra.first_path, zebra.first_seen, zebra.last_retrieved, zebra.retrieval_count) == ("memory/a.md", OLD, None, 0)
    assert (zebra.supersedes_key, zebra.invalid_at, zebra.restored_at) == (None, None, None)

    hits = search(conn, workspace, "zebra").hits
    record_retrievals(db_path, hits, "search", clock=lambda: OLD + 50.0)
    fold_retrievals(conn)
    zebra = list_entries(conn, "", 100, NOW).entries[1].life
    assert (zebra.last_retrieved, zebra.retrieval_count) == (OLD + 50.0, 1)


def test_pages_hold_whole_sources_in_path_order(conn: apsw.Connection, workspace: Path) -> None:
    for name in "abcde":
        write(workspace, f"memory/{name}.md", "".join(f"- {name} fact {i}\n" for i in range(3)))
    refresh(conn, workspace, settings())
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        page = list_entries(conn, after, 4, NOW)  # 4 entries: two sources of 3 a page
        pages += 1
        assert len({e.path for e in page.entries}) == len(page.sources)
        seen += [s.path for s in page.sources]
        if not page.last_path:
            break
        assert page.last_path == page.sources[-1].path
        after = page.last_path
    assert seen == [f"memory/{n}.md" for n in "abcde"] and pages == 3


def test_a_moved_entry_keeps_its_row_and_first_path(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- the heron nests by the weir\n- other\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "- other\n", mtime=OLD + 500)
    write(workspace, "memory/archive/stale.md", "## Stale\n\n- the heron nests by the weir\n", mtime=OLD + 500)
    refresh(conn, workspace, settings())
    digest = entry_hash("- the heron nests by the weir")
    places, lives = lifecycle_of(conn, [digest], NOW)
    assert [(p.path, p.start_line, p.provenance) for p in places] == [("memory/archive/stale.md", 3, "system")]
    assert [(r.first_path, r.first_seen) for r in lives] == [("memory/a.md", OLD)]  # its age went with it
    (workspace / "memory/archive/stale.md").unlink()
    refresh(conn, workspace, settings())
    places, lives = lifecycle_of(conn, [digest, "0" * 64], NOW)
    assert places == [] and [r.entry_hash for r in lives] == [digest]  # standing nowhere, the row stays


def test_updates_record_decisions_and_never_ages(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- #42: old\n- #43: replaces #42\n")
    refresh(conn, workspace, settings())
    old, new = entry_hash("- #42: old"), entry_hash("- #43: replaces #42")
    updated, missing = update_lifecycle(conn, [Update(old, invalid_at=NOW), Update(new, supersedes_key="#42"), Update("f" * 64, invalid_at=NOW)])
    assert (updated, missing) == (2, ["f" * 64])
    lives = {r.entry_hash: r for r in lifecycle_of(conn, [old, new], NOW)[1]}
    assert (lives[old].invalid_at, lives[old].first_seen, lives[new].supersedes_key) == (NOW, OLD, "#42")
    update_lifecycle(conn, [Update(old, clear_invalid=True, restored_at=NOW + 1), Update(new, supersedes_key="")])
    lives = {r.entry_hash: r for r in lifecycle_of(conn, [old, new], NOW)[1]}
    assert (lives[old].invalid_at, lives[old].restored_at, lives[new].supersedes_key) == (None, NOW + 1, None)
    assert lives[old].retrieval_count == 0 and lives[old].first_seen == OLD


def test_a_lifecycle_table_without_restored_at_gets_the_column(tmp_path: Path, workspace: Path) -> None:
    path = tmp_path / "kb.sqlite"
    raw = apsw.Connection(str(path))
    raw.execute(  # the table before restored_at (and before version 5 moved it to kb_lifecycle)
        "CREATE TABLE kb_entry_lifecycle(entry_hash TEXT PRIMARY KEY, path TEXT NOT NULL, first_seen REAL NOT NULL, "
        "last_retrieved REAL, retrieval_count INTEGER NOT NULL DEFAULT 0, supersedes_key TEXT, invalid_at REAL) WITHOUT ROWID"
    )
    raw.execute("INSERT INTO kb_entry_lifecycle(entry_hash, path, first_seen) VALUES (?, 'memory/a.md', 5.0)", ("a" * 64,))
    raw.close()
    conn = open_index(path, settings())
    try:
        columns = [str(r[1]) for r in conn.execute("PRAGMA table_info(kb_entry_lifecycle)")]
        assert columns[-1] == "restored_at"
        assert [r.first_seen for r in lifecycle_of(conn, ["a" * 64], NOW)[1]] == [5.0]
    finally:
        conn.close()


def test_hashes_are_checked() -> None:
    assert check_hashes(["a" * 64], 1, "x") == ["a" * 64]
    with pytest.raises(InvalidArgument, match="at most 1"):
        check_hashes(["a" * 64, "b" * 64], 1, "x")
    with pytest.raises(InvalidArgument, match="not an entry hash"):
        check_hashes(["A" * 64], 5, "x")
