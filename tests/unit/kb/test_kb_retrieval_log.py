"""Recall recording: fire-and-forget log appends and the idempotent fold."""

from __future__ import annotations

from pathlib import Path

import apsw
from kb_helpers import settings, write

from services.kb.excerpt import EntryRef
from services.kb.indexer import refresh
from services.kb.retrieval_log import fold_retrievals, record_retrievals
from services.kb.search import search


def log_rows(conn: apsw.Connection) -> list[tuple[str, str, float, str]]:
    return [tuple(r) for r in conn.execute("SELECT entry_hash, path, at, kind FROM kb_retrieval_log ORDER BY id")]  # type: ignore[misc]


def test_log_growth_and_fold(conn: apsw.Connection, db_path: Path, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- zebra crossing\n- yak shaving\n")
    refresh(conn, workspace, settings())
    hits = search(conn, workspace, "zebra").hits
    assert record_retrievals(db_path, hits, "search", clock=lambda: 1000.0) == 1
    assert record_retrievals(db_path, hits, "search", clock=lambda: 2000.0) == 1
    ref = EntryRef("memory/a.md", hits[0].entry_hash or "", 1, 1)
    assert record_retrievals(db_path, [ref], "get", clock=lambda: 1500.0) == 1
    rows = log_rows(conn)
    assert [(r[2], r[3]) for r in rows] == [(1000.0, "search"), (2000.0, "search"), (1500.0, "get")]

    report = fold_retrievals(conn)
    assert (report.folded, report.entries, report.last_id) == (3, 1, 3)
    row = conn.execute(
        "SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash = ?", (hits[0].entry_hash,)
    ).fetchall()
    assert row == [(3, 2000.0)]
    # Idempotent: a second fold adds nothing; new rows fold on top.
    assert fold_retrievals(conn).folded == 0
    record_retrievals(db_path, hits, "search", clock=lambda: 500.0)
    assert fold_retrievals(conn).folded == 1
    row = conn.execute(
        "SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash = ?", (hits[0].entry_hash,)
    ).fetchall()
    assert row == [(4, 2000.0)]  # last_retrieved never moves back
    untouched = conn.execute("SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash != ?",
                             (hits[0].entry_hash,)).fetchall()
    assert untouched == [(0, None)]
    assert len(log_rows(conn)) == 4  # append-only: folding deletes nothing


def test_fold_creates_missing_lifecycle_rows(conn: apsw.Connection, db_path: Path) -> None:
    record_retrievals(db_path, [EntryRef("memory/x.md", "abc", 1, 1)], "get", clock=lambda: 42.0)
    fold_retrievals(conn)
    assert conn.execute("SELECT path, first_seen, retrieval_count, last_retrieved FROM kb_entry_lifecycle").fetchall() == [
        ("memory/x.md", 42.0, 1, 42.0)
    ]


def test_hits_without_entry_are_not_logged(conn: apsw.Connection, db_path: Path) -> None:
    assert record_retrievals(db_path, [EntryRef("memory/x.md", "", 1, 1)], "search") == 0
    assert log_rows(conn) == []


def test_record_never_raises(tmp_path: Path, conn: apsw.Connection, db_path: Path) -> None:
    ref = [EntryRef("memory/x.md", "abc", 1, 1)]
    missing = tmp_path / "nope" / "kb.sqlite"
    assert record_retrievals(missing, ref, "search") == 0
    assert not missing.exists() and not missing.parent.exists()
    assert record_retrievals(db_path, ref, "browse") == 0
    conn.execute("DROP TABLE kb_retrieval_log")
    assert record_retrievals(db_path, ref, "search") == 0


def test_record_gives_up_on_a_locked_database(conn: apsw.Connection, db_path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        assert record_retrievals(db_path, [EntryRef("memory/x.md", "abc", 1, 1)], "search", busy_timeout_ms=10) == 0
    finally:
        conn.execute("ROLLBACK")
    assert log_rows(conn) == []
