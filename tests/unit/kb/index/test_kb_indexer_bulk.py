"""Refresh fast paths: the bulk path (producer thread or worker process) writes what the one-by-one path writes, the cached stored rows stay true, a schema bump rebuilds."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Literal

import apsw
import pytest
from kb_helpers import OLD, settings, write

from services.kb.index import indexer, indexer_bulk, indexer_parse
from services.kb.index.indexer import refresh
from services.kb.index.schema import open_index
from services.kb.index.sources import ARCHIVE_PROFILE, Scan, SourceProfile, scan_sources

Mode = Literal["one", "thread", "process"]
BULK: tuple[Mode, ...] = ("thread", "process")

NOW = 1_760_000_000_000_000_000

NOTES = {
    "MEMORY.md": "# Core\n\n- durable fact\n- shared line\n",
    "USER.md": "---\nimportance: 8\n---\nlikes tea\n",
    "memory/inbox/mail.md": "---\nprovenance: untrusted\n---\n- click here\n- shared line\n",
    "memory/archive/stale.md": "- old <!-- invalid_at: 2025-01-01 -->\n",
    "memory/cjk.md": "# 会議\n\n- 明日の会議は東京で行います\n- english bullet here\n",
    "memory/mixed.md": "plain ascii\n\nthen 项目 discussion of the 数据库 migration\n",
    "memory/giant.md": "word " * 700 + "\n\n- after the giant line\n",
    "memory/fence.md": "- item\n\n```\ncode [importance: 3]\n\nmore code\n```\n- next <!-- importance: 9 -->\n",
    "memory/empty.md": "",
    "memory/markers.md": "<!-- importance: 7 -->\n\n- marked entry\n[importance: 2] bracketed\n",
}


def corpus(workspace: Path, variant: int = 0) -> None:
    for rel, text in NOTES.items():
        write(workspace, rel, text)
    for n in range(40):
        body = "\n".join(f"- fact {n}.{k} about topic{k % 7} and item{(n * k) % 13} variant{variant if k % 5 == 0 else 0}"
                         for k in range(n % 9 + 1))  # fmt: skip
        write(workspace, f"memory/d{n % 4}/note{n:02}.md", f"# Note {n}\n\n{body}\n\nshared line\n")


def dump(conn: apsw.Connection) -> dict[str, list[tuple[object, ...]]]:
    queries = {
        "sources": "SELECT id, path, size, mtime_ns, checked_ns, content_hash, provenance, generation FROM kb_sources",
        "chunks": "SELECT id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk FROM kb_chunks",
        "entries": "SELECT source_id, start_line, end_line, entry_hash, importance FROM kb_entries",
        "lifecycle": "SELECT entry_hash, path, first_seen, retrieval_count FROM kb_entry_lifecycle",
        "fts": "SELECT rowid FROM kb_chunks_fts WHERE kb_chunks_fts MATCH 'shared OR fact OR item3 OR variant1 OR word'",
        "cjk": "SELECT rowid FROM kb_chunks_cjk WHERE kb_chunks_cjk MATCH '\"会議は\" OR \"数据库\"'",
        "meta": "SELECT key, value FROM kb_meta WHERE key NOT IN ('schema_version')",
    }
    out = {name: sorted(conn.execute(sql).fetchall(), key=repr) for name, sql in queries.items()}
    conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('integrity-check')")
    conn.execute("INSERT INTO kb_chunks_cjk(kb_chunks_cjk) VALUES ('integrity-check')")
    return out


def run(
    conn: apsw.Connection,
    workspace: Path,
    mode: Mode,
    monkeypatch: pytest.MonkeyPatch,
    profile: SourceProfile = ARCHIVE_PROFILE,
    **kw: int,
) -> indexer.RefreshReport:
    """A refresh one source at a time, or by the bulk path on a thread or in a worker process."""
    monkeypatch.setattr(indexer, "BULK_FILES", 10**9 if mode == "one" else 1)
    monkeypatch.setattr(indexer_bulk, "PROCESS_BYTES", 0 if mode == "process" else 10**12)
    monkeypatch.setattr(indexer_bulk, "BATCH_CHUNKS", 3)  # many batches
    return refresh(conn, workspace, settings(**kw), now_ns=lambda: NOW, profile=profile)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, apsw.Connection, Path, apsw.Connection]:
    one, many = tmp_path / "one", tmp_path / "many"
    for ws in (one, many):
        (ws / "memory").mkdir(parents=True)
    return one, open_index(tmp_path / "one.sqlite", settings()), many, open_index(tmp_path / "many.sqlite", settings())


@pytest.mark.parametrize("mode", BULK)
def test_bulk_full_index_equals_sequential(
    pair: tuple[Path, apsw.Connection, Path, apsw.Connection], monkeypatch: pytest.MonkeyPatch, mode: Mode
) -> None:
    ws_a, conn_a, ws_b, conn_b = pair
    corpus(ws_a)
    corpus(ws_b)
    a = run(conn_a, ws_a, "one", monkeypatch)
    b = run(conn_b, ws_b, mode, monkeypatch)
    assert (a.indexed, a.skipped, a.errors, a.generation) == (b.indexed, b.skipped, b.errors, b.generation)
    assert b.indexed == len(NOTES) + 40
    assert dump(conn_a) == dump(conn_b)
    assert conn_b.execute("SELECT count(*) FROM kb_chunks WHERE has_cjk = 1").fetchall()[0][0] == 2


@pytest.mark.parametrize("mode", BULK)
def test_bulk_reindex_edits_touches_and_rechunks_equal_sequential(
    pair: tuple[Path, apsw.Connection, Path, apsw.Connection], monkeypatch: pytest.MonkeyPatch, mode: Mode
) -> None:
    ws_a, conn_a, ws_b, conn_b = pair
    for ws, conn, bulk in ((ws_a, conn_a, "one"), (ws_b, conn_b, mode)):
        corpus(ws)
        run(conn, ws, bulk, monkeypatch)
        corpus(ws, variant=1)  # a fifth of the notes change, the rest only get a new mtime below
        for path in sorted((ws / "memory").rglob("*.md")):
            path.touch()
            write(ws, path.relative_to(ws).as_posix(), path.read_text(), mtime=OLD + 5)
        (ws / "memory" / "d1" / "note01.md").unlink()
    a = run(conn_a, ws_a, "one", monkeypatch)
    b = run(conn_b, ws_b, mode, monkeypatch)
    assert (a.indexed, a.skipped, a.pruned) == (b.indexed, b.skipped, b.pruned)
    assert a.skipped > 0 and a.indexed > 0 and a.pruned == 1
    assert dump(conn_a) == dump(conn_b)
    # New chunk settings re-chunk every source (each stored source is replaced in place).
    a = run(conn_a, ws_a, "one", monkeypatch, chunk_tokens=20, chunk_overlap=5)
    b = run(conn_b, ws_b, mode, monkeypatch, chunk_tokens=20, chunk_overlap=5)
    assert (a.indexed, a.rebuilt) == (b.indexed, b.rebuilt) == (len(NOTES) + 39, True)
    assert dump(conn_a) == dump(conn_b)


def test_bulk_read_error_keeps_the_source(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(workspace)
    run(conn, workspace, "thread", monkeypatch)
    corpus(workspace, variant=1)
    real = indexer.read_source

    def denied(path: Path) -> bytes:
        if path.name == "note05.md":
            raise PermissionError(13, "denied")
        return real(path)

    monkeypatch.setattr(indexer, "read_source", denied)
    for path in (workspace / "memory").rglob("note*.md"):
        write(workspace, path.relative_to(workspace).as_posix(), path.read_text(), mtime=OLD + 9)
    # A replaced reader cannot be handed to a worker process: this runs on the thread.
    report = run(conn, workspace, "process", monkeypatch)
    assert report.errors == ["memory/d1/note05.md: unreadable, PermissionError (kept)"]
    assert conn.execute("SELECT count(*) FROM kb_sources WHERE path = 'memory/d1/note05.md'").fetchall()[0][0] == 1


def test_bulk_read_error_in_the_worker_keeps_the_source(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(workspace)
    run(conn, workspace, "process", monkeypatch)
    victim = workspace / "memory" / "d1" / "note05.md"
    before = conn.execute("SELECT id, content_hash FROM kb_sources WHERE path = 'memory/d1/note05.md'").fetchall()
    write(workspace, "memory/d1/note05.md", "edited\n", mtime=OLD + 9)

    def scan_then_break(root: Path) -> Scan:
        scan = scan_sources(root)
        victim.unlink()
        victim.mkdir()  # listed as a file, read as a directory: IsADirectoryError in the worker
        return scan

    profile = SourceProfile("archive", scan_then_break, ARCHIVE_PROFILE.classify)
    report = run(conn, workspace, "process", monkeypatch, profile=profile)
    assert report.errors == ["memory/d1/note05.md: unreadable, IsADirectoryError (kept)"]
    after = conn.execute("SELECT id, content_hash FROM kb_sources WHERE path = 'memory/d1/note05.md'").fetchall()
    assert after == before


@pytest.mark.parametrize(
    ("mode", "owner", "where"),
    [
        ("thread", indexer_parse, "parse_source"),
        ("thread", indexer_bulk._Writer, "write_rows"),
        ("thread", indexer_bulk._Writer, "write_fts_select"),
        ("process", indexer_bulk._Writer, "write_rows"),
        ("process", indexer_bulk._Writer, "write_fts_rows"),
    ],
)
def test_bulk_crash_leaves_previous_index_and_no_thread_or_process(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: Mode, owner: object, where: str
) -> None:
    corpus(workspace)
    run(conn, workspace, mode, monkeypatch)
    before = dump(conn)
    corpus(workspace, variant=1)
    for path in (workspace / "memory").rglob("note*.md"):
        write(workspace, path.relative_to(workspace).as_posix(), path.read_text() + "edited\n", mtime=OLD + 9)
    real = getattr(owner, where)
    calls = 0

    def crash_on_third(*args: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("simulated crash")
        return real(*args)

    monkeypatch.setattr(owner, where, crash_on_third)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(conn, workspace, mode, monkeypatch)
    assert not any(t.name == "kb-index-parse" for t in threading.enumerate())
    assert multiprocessing.active_children() == []
    assert dump(conn) == before
    monkeypatch.setattr(owner, where, real)
    assert run(conn, workspace, mode, monkeypatch).indexed == 40


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = indexer.read_source

    def counting(path: Path | str) -> bytes:
        reads.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(indexer, "read_source", counting)
    return reads


def test_stored_rows_cache_sees_another_connections_commit(
    conn: apsw.Connection, workspace: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(workspace, "memory/a.md", "alpha\n")
    write(workspace, "memory/b.md", "bravo\n")
    refresh(conn, workspace, settings())
    reads = counting_reads(monkeypatch)
    assert refresh(conn, workspace, settings()).skipped == 2 and reads == []
    other = open_index(db_path, settings())
    other.execute("UPDATE kb_sources SET checked_ns = 0 WHERE path = 'memory/b.md'")  # racily clean now
    other.close()
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, reads) == (0, 2, ["b.md"])


def test_stored_rows_cache_sees_this_connections_other_writes(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(workspace, "memory/a.md", "alpha\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "alpha two\n", mtime=OLD + 3)
    assert indexer.reindex_paths(conn, workspace, ["memory/a.md"], settings()).indexed == 1
    reads = counting_reads(monkeypatch)
    report = refresh(conn, workspace, settings())  # the stored stat moved with reindex_paths
    assert (report.indexed, report.skipped, reads) == (0, 1, [])
    conn.execute("DELETE FROM kb_sources")  # any write through the connection invalidates the copy
    assert refresh(conn, workspace, settings()).indexed == 1


def test_stored_rows_cache_follows_edits_and_prunes(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(5):
        write(workspace, f"memory/n{n}.md", f"note {n}\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/n1.md", "note one edited\n", mtime=OLD + 1)
    (workspace / "memory" / "n2.md").unlink()
    write(workspace, "memory/n9.md", "new note\n")
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, report.pruned) == (2, 3, 1)
    reads = counting_reads(monkeypatch)
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, report.pruned, reads) == (0, 5, 0, [])
    rows = dict(conn.execute("SELECT path, size FROM kb_sources").fetchall())
    assert rows == {f"memory/n{n}.md": (workspace / f"memory/n{n}.md").stat().st_size for n in (0, 1, 3, 4, 9)}


def test_older_schema_version_is_rebuilt_and_lifecycle_kept(
    conn: apsw.Connection, workspace: Path, db_path: Path
) -> None:
    write(workspace, "memory/a.md", "- alpha fact\n- bravo fact\n")
    refresh(conn, workspace, settings(), now_ns=lambda: NOW)
    lifecycle = conn.execute("SELECT entry_hash, path, first_seen FROM kb_entry_lifecycle ORDER BY 1").fetchall()
    # Turn it into a version-2 index: kb_entries a table with one row per entry, no kb_source_entries.
    conn.execute("DROP VIEW kb_entries")
    conn.execute("DROP TABLE kb_source_entries")
    conn.execute(
        "CREATE TABLE kb_entries(source_id INTEGER NOT NULL REFERENCES kb_sources(id) ON DELETE CASCADE, "
        "start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, entry_hash TEXT NOT NULL, "
        "importance INTEGER NOT NULL, PRIMARY KEY (source_id, start_line)) WITHOUT ROWID"
    )
    conn.execute("UPDATE kb_meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    reopened = open_index(db_path, settings())
    try:
        kinds = dict(reopened.execute("SELECT name, type FROM sqlite_master WHERE name LIKE 'kb_%entries'").fetchall())
        assert kinds == {"kb_entries": "view", "kb_source_entries": "table"}
        assert reopened.execute("SELECT count(*) FROM kb_sources").fetchall()[0][0] == 0  # index tables rebuilt
        assert refresh(reopened, workspace, settings()).indexed == 1
        assert reopened.execute("SELECT count(*) FROM kb_entries").fetchall()[0][0] == 2
        after = reopened.execute("SELECT entry_hash, path, first_seen FROM kb_entry_lifecycle ORDER BY 1").fetchall()
        assert after == lifecycle  # ages survive the rebuild
    finally:
        reopened.close()
    again = open_index(db_path, settings())  # the current version: nothing dropped
    try:
        assert again.execute("SELECT count(*) FROM kb_entries").fetchall()[0][0] == 2
    finally:
        again.close()


def test_entries_are_one_row_per_source(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "# Title\n\n- alpha fact\n  more\n- bravo fact <!-- importance: 9 -->\n")
    refresh(conn, workspace, settings())
    assert conn.execute("SELECT count(*) FROM kb_source_entries").fetchall()[0][0] == 1
    view = conn.execute("SELECT start_line, end_line, importance FROM kb_entries ORDER BY start_line").fetchall()
    assert view == [(3, 4, 5), (5, 5, 9)]
