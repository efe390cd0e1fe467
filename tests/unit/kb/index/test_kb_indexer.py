"""Refresh: hash guard, re-chunking, pruning, read errors, rebuilds, lifecycle, crash safety."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest
from kb_helpers import OLD, settings, write

from gateway.errors import InvalidArgument, NotFound
from services.kb.index import indexer
from services.kb.index.indexer import refresh
from services.kb.index.meta import get_meta
from services.kb.index.schema import open_index
from services.kb.index.search import search


def chunk_rows(conn: apsw.Connection, path: str) -> list[tuple[int, int, str, str, int]]:
    return [
        (int(r[0]), int(r[1]), str(r[2]), str(r[3]), int(r[4]))
        for r in conn.execute(
            "SELECT c.start_line, c.end_line, c.text, c.provenance, c.importance FROM kb_chunks c "
            "JOIN kb_sources s ON s.id = c.source_id WHERE s.path = ? ORDER BY c.start_line",
            (path,),
        )
    ]


def source_paths(conn: apsw.Connection) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT path FROM kb_sources ORDER BY path")]


def test_indexes_core_files_and_memory_tree_only(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "MEMORY.md", "# Core\n\n- durable fact\n")
    write(workspace, "USER.md", "likes tea\n")
    write(workspace, "SOUL.md", "not a source\n")
    write(workspace, "memory/topic.md", "agent note\n")
    write(workspace, "memory/deep/er/x.md", "nested\n")
    write(workspace, "memory/notes.txt", "not markdown\n")
    write(workspace, "memory/.hidden.md", "hidden\n")
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, report.pruned, report.errors) == (4, 0, 0, [])
    assert report.generation == 1
    assert source_paths(conn) == ["MEMORY.md", "USER.md", "memory/deep/er/x.md", "memory/topic.md"]
    assert chunk_rows(conn, "MEMORY.md") == [(1, 3, "# Core\n\n- durable fact", "owner", 5)]


def test_provenance_and_importance_are_stored_per_chunk(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/inbox/mail.md", "---\nimportance: 9\n---\nclick here\n")
    write(workspace, "memory/archive/stale.md", "- old <!-- invalid_at: 2025-01-01 -->\n")
    write(workspace, "memory/a.md", "---\nprovenance: untrusted\n---\n- pasted\n")
    refresh(conn, workspace, settings())
    assert chunk_rows(conn, "memory/inbox/mail.md")[0][3:] == ("untrusted", 9)
    assert chunk_rows(conn, "memory/archive/stale.md")[0][3:] == ("system", 5)
    assert chunk_rows(conn, "memory/a.md")[0][3:] == ("untrusted", 5)


def test_unchanged_files_are_skipped_without_reading(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        write(workspace, f"memory/n{n}.md", f"note {n}\n")
    first = refresh(conn, workspace, settings())
    reads: list[Path] = []
    real = indexer.read_source

    def counting(path: Path) -> bytes:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(indexer, "read_source", counting)
    second = refresh(conn, workspace, settings())
    assert (second.indexed, second.skipped, second.pruned) == (0, 3, 0)
    assert reads == []
    assert second.generation == first.generation == 1


def test_touched_but_identical_file_is_hash_skipped(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "same\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "same\n", mtime=OLD + 60)
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, report.generation) == (0, 1, 1)
    stored = conn.execute("SELECT mtime_ns FROM kb_sources WHERE path = 'memory/a.md'").fetchall()
    assert stored[0][0] == (OLD + 60) * 1_000_000_000


def test_racily_clean_same_size_rewrite_is_caught(conn: apsw.Connection, workspace: Path) -> None:
    # A rewrite with the same size and the same mtime right after indexing: the
    # stat guard alone would miss it; the racy window makes the next refresh hash.
    now = 2_000_000_000
    write(workspace, "memory/a.md", "alpha\n", mtime=now)
    refresh(conn, workspace, settings(), now_ns=lambda: now * 1_000_000_000 + 1)
    write(workspace, "memory/a.md", "bravo\n", mtime=now)
    report = refresh(conn, workspace, settings(), now_ns=lambda: now * 1_000_000_000 + 2)
    assert report.indexed == 1
    assert chunk_rows(conn, "memory/a.md")[0][2] == "bravo"


def test_edit_rechunks(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- one\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "- one\n- two\n\nthree\n", mtime=OLD + 5)
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.generation) == (1, 2)
    assert chunk_rows(conn, "memory/a.md") == [(1, 4, "- one\n- two\n\nthree", "agent", 5)]
    assert conn.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] == 1
    assert [h.path for h in search(conn, workspace, "three").hits] == ["memory/a.md"]
    assert conn.execute("SELECT generation FROM kb_sources").fetchall()[0][0] == 2


def test_delete_prunes(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "zebra\n")
    write(workspace, "memory/b.md", "yak\n")
    refresh(conn, workspace, settings())
    (workspace / "memory/a.md").unlink()
    report = refresh(conn, workspace, settings())
    assert (report.pruned, report.skipped, report.generation) == (1, 1, 2)
    assert source_paths(conn) == ["memory/b.md"]
    assert search(conn, workspace, "zebra").hits == []
    # Lifecycle rows are not children of chunks: the entry keeps its age.
    assert conn.execute("SELECT count(*) FROM kb_entry_lifecycle").fetchall()[0][0] == 2


def test_read_error_keeps_the_source(conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, so chmod 000 would not block a read: the read seam raises instead.
    write(workspace, "memory/a.md", "zebra\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "changed text\n", mtime=OLD + 9)

    def denied(path: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(indexer, "read_source", denied)
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.pruned) == (0, 0)
    assert report.errors == ["memory/a.md: unreadable, PermissionError (kept)"]
    assert [h.path for h in search(conn, workspace, "zebra").hits] == ["memory/a.md"]


def test_dangling_symlink_and_directory_in_place_keep_the_source(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "zebra\n")
    write(workspace, "memory/b.md", "yak\n")
    refresh(conn, workspace, settings())
    (workspace / "memory/a.md").unlink()
    os.symlink(workspace / "memory/gone.md", workspace / "memory/a.md")  # dangling
    (workspace / "memory/b.md").unlink()
    (workspace / "memory/b.md").mkdir()  # a directory where the file was
    report = refresh(conn, workspace, settings())
    assert report.pruned == 0
    assert report.errors == ["memory/a.md: cannot stat (kept)"]
    assert source_paths(conn) == ["memory/a.md", "memory/b.md"]


def test_symlink_out_of_workspace_is_not_indexed(conn: apsw.Connection, workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("password hunter2\n")
    os.symlink(secret, workspace / "memory/leak.md")
    write(workspace, "memory/inside.md", "inside\n")
    os.symlink(workspace / "memory/inside.md", workspace / "memory/alias.md")
    report = refresh(conn, workspace, settings())
    assert source_paths(conn) == ["memory/alias.md", "memory/inside.md"]
    assert report.errors == []
    assert search(conn, workspace, "hunter2").hits == []


def test_a_targeted_reindex_of_a_link_out_of_the_workspace_indexes_nothing(conn: apsw.Connection, workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("password hunter2\n")
    os.symlink(secret, workspace / "memory/leak.md")
    write(workspace, "memory/inside.md", "inside\n")
    os.symlink(workspace / "memory/inside.md", workspace / "memory/alias.md")
    indexer.reindex_paths(conn, workspace, ["memory/leak.md", "memory/alias.md"], settings())
    assert source_paths(conn) == ["memory/alias.md"]
    assert search(conn, workspace, "hunter2").hits == []


def test_invalid_utf8_is_decoded_with_replacement(conn: apsw.Connection, workspace: Path) -> None:
    path = workspace / "memory/bin.md"
    path.write_bytes(b"caf\xe9 latte\n")
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.errors) == (1, [])
    assert chunk_rows(conn, "memory/bin.md")[0][2] == "caf\ufffd latte"


def test_tokenizer_switch_rebuilds(db_path: Path, workspace: Path) -> None:
    write(workspace, "memory/a.md", "the deployments were running\n")
    conn = open_index(db_path, settings("unicode61"))
    refresh(conn, workspace, settings("unicode61"))
    assert search(conn, workspace, "deployment").hits == []
    conn.close()
    conn = open_index(db_path, settings("porter"))
    report = refresh(conn, workspace, settings("porter"))
    assert report.rebuilt and report.generation == 2
    assert get_meta(conn, "tokenizer") == "porter"
    sql = str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'kb_chunks_fts'").fetchall()[0][0])
    assert "porter unicode61" in sql
    assert [h.path for h in search(conn, workspace, "deployment").hits] == ["memory/a.md"]
    again = refresh(conn, workspace, settings("porter"))
    assert (again.rebuilt, again.generation) == (False, 2)


def test_chunk_setting_change_rechunks(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "\n".join(f"line {n:04d}" for n in range(1, 11)) + "\n")
    refresh(conn, workspace, settings())
    assert len(chunk_rows(conn, "memory/a.md")) == 1
    report = refresh(conn, workspace, settings(chunk_tokens=10, chunk_overlap=0))
    assert report.rebuilt and report.indexed == 1
    assert [r[:2] for r in chunk_rows(conn, "memory/a.md")] == [(1, 4), (5, 8), (9, 10)]


def test_unknown_tokenizer_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="tokenizer"):
        open_index(tmp_path / "kb.sqlite", settings("klingon"))
    assert not (tmp_path / "kb.sqlite").exists()


def test_open_without_create_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "x" / "kb.sqlite"
    with pytest.raises(NotFound):
        open_index(path, settings(), create=False)
    assert not (tmp_path / "agents").exists()


def test_index_uses_wal_and_busy_timeout(conn: apsw.Connection) -> None:
    assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchall()[0][0] == 5000


def test_lifecycle_rows_for_every_entry_first_seen_at_mtime(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- one\n- two\n", mtime=OLD)
    refresh(conn, workspace, settings())
    rows = conn.execute("SELECT path, first_seen, retrieval_count FROM kb_entry_lifecycle").fetchall()
    assert sorted(rows) == [("memory/a.md", float(OLD), 0)] * 2
    # An edit keeps the unchanged entry's age and adds the new one.
    write(workspace, "memory/a.md", "- one\n- three\n", mtime=OLD + 100)
    refresh(conn, workspace, settings())
    ages = sorted(float(str(r[0])) for r in conn.execute("SELECT first_seen FROM kb_entry_lifecycle"))
    assert ages == [float(OLD), float(OLD), float(OLD + 100)]


def test_lifecycle_backfill_uses_file_mtime(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/old.md", "- an old fact\n", mtime=OLD)
    write(workspace, "MEMORY.md", "- core fact\n", mtime=OLD + 7)
    refresh(conn, workspace, settings())
    conn.execute("DROP TABLE kb_lifecycle")  # as if indexed before the table existed
    report = refresh(conn, workspace, settings())
    # The stored entries name their digests by prefixes only: both files are read again.
    assert (report.indexed, report.skipped) == (2, 0)
    rows = sorted(conn.execute("SELECT path, first_seen FROM kb_entry_lifecycle").fetchall())
    assert rows == [("MEMORY.md", float(OLD + 7)), ("memory/old.md", float(OLD))]
    assert rows[1][1] == os.stat(workspace / "memory/old.md").st_mtime_ns / 1e9
    assert get_meta(conn, "lifecycle_backfill") is None


def test_lifecycle_backfill_on_reopen_of_pre_lifecycle_index(db_path: Path, workspace: Path) -> None:
    write(workspace, "memory/old.md", "- an old fact\n", mtime=OLD)
    conn = open_index(db_path, settings())
    refresh(conn, workspace, settings())
    conn.execute("DROP TABLE kb_lifecycle")
    conn.close()
    conn = open_index(db_path, settings())
    assert get_meta(conn, "lifecycle_backfill") == "1"
    refresh(conn, workspace, settings())
    assert conn.execute("SELECT path, first_seen FROM kb_entry_lifecycle").fetchall() == [("memory/old.md", float(OLD))]


def test_crash_mid_refresh_leaves_previous_index(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(workspace, "memory/a.md", "alpha original\n")
    write(workspace, "memory/b.md", "bravo original\n")
    refresh(conn, workspace, settings())
    write(workspace, "memory/a.md", "alpha edited\n", mtime=OLD + 1)
    write(workspace, "memory/b.md", "bravo edited\n", mtime=OLD + 1)
    write(workspace, "memory/c.md", "charlie new\n")
    real = indexer._index_source
    calls = 0

    def crash_on_second(*args: object, **kwargs: object) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer, "_index_source", crash_on_second)
    with pytest.raises(RuntimeError):
        refresh(conn, workspace, settings())
    assert sorted(h.path for h in search(conn, workspace, "original").hits) == ["memory/a.md", "memory/b.md"]
    assert search(conn, workspace, "edited").hits == []
    assert source_paths(conn) == ["memory/a.md", "memory/b.md"]
    assert get_meta(conn, "generation") == "1"
    monkeypatch.setattr(indexer, "_index_source", real)
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.generation) == (3, 2)


def test_no_change_refresh_over_many_files_runs(conn: apsw.Connection, workspace: Path) -> None:
    for n in range(2000):
        write(workspace, f"memory/d{n % 20}/n{n}.md", f"# Note {n}\n\n- fact number {n}\n")
    assert refresh(conn, workspace, settings()).indexed == 2000
    report = refresh(conn, workspace, settings())
    assert (report.indexed, report.skipped, report.pruned, report.errors) == (0, 2000, 0, [])


def test_unlistable_workspace_prunes_nothing(conn: apsw.Connection, workspace: Path, tmp_path: Path) -> None:
    write(workspace, "memory/a.md", "zebra\n")
    refresh(conn, workspace, settings())
    moved = tmp_path / "elsewhere"
    workspace.rename(moved)  # as if the volume were unmounted
    report = refresh(conn, workspace, settings())
    assert (report.pruned, report.errors) == (0, [".: cannot list workspace (FileNotFoundError)"])
    assert source_paths(conn) == ["memory/a.md"]
    moved.rename(workspace)
    (workspace / "memory/a.md").unlink()
    assert refresh(conn, workspace, settings()).pruned == 1
