"""Shared-vault index: layout, which files are sources, targeted reindex, search, merging."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
from kb_helpers import settings, write

from services.kb.index.hits import shown_score
from services.kb.index.indexer import refresh
from services.kb.index.schema import open_index
from services.kb.index.search import SearchHit, search
from services.kb.vault.note_index import (
    BUSY_TIMEOUT_MS,
    CorpusHit,
    classify_note,
    merge_hits,
    open_vault_index,
    refresh_vault,
    reindex_notes,
    scan_notes,
    search_vault,
    shadowed_twins,
)
from services.kb.vault.notes import create
from services.kb.vault.sqlite_store import SqliteVaultStore


def paths(conn: apsw.Connection, query: str) -> list[str]:
    return sorted(h.path for h in search_vault(conn, query, 20).hits)


def test_open_creates_the_layout(vault_dir: Path) -> None:
    conn = open_vault_index(vault_dir)
    try:
        assert (vault_dir / "notes").is_dir() and (vault_dir / "reports").is_dir()
        assert (vault_dir / "kb.sqlite").is_file()
        assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchall()[0][0] == BUSY_TIMEOUT_MS == 10_000
    finally:
        conn.close()


def test_only_top_level_notes_are_sources(vconn: apsw.Connection, vault_dir: Path) -> None:
    write(vault_dir, "notes/kept.md", "vaultword kept\n")
    write(vault_dir, "notes/.hidden.md", "vaultword hidden\n")
    write(vault_dir, "notes/.kept.md.abc123.tmp", "vaultword temp\n")
    write(vault_dir, "notes/plain.txt", "vaultword text\n")
    write(vault_dir, "notes/sub/deep.md", "vaultword deep\n")
    write(vault_dir, "reports/backlinks.md", "vaultword report\n")
    write(vault_dir, "loose.md", "vaultword loose\n")
    outside = vault_dir.parent / "outside.md"
    outside.write_text("vaultword outside\n", encoding="utf-8")
    os.symlink(outside, vault_dir / "notes" / "escape.md")
    assert set(scan_notes(vault_dir).files) == {"notes/kept.md"}
    report = refresh_vault(vconn, vault_dir)
    assert report.indexed == 1
    assert paths(vconn, "vaultword") == ["notes/kept.md"]


def test_notes_get_provenance_agent_fail_closed() -> None:
    assert classify_note("notes/a.md") == "agent"
    assert classify_note("notes/stale__a.md") == "agent"
    assert classify_note("notes/a.md", "untrusted") == "untrusted"
    assert classify_note("notes/a.md", "owner") == "agent"  # cannot claim more trust
    assert classify_note("reports/a.md") == "untrusted"
    assert classify_note("notes/sub/a.md") == "untrusted"
    assert classify_note("MEMORY.md") == "untrusted"


def test_refresh_vault_indexes_hand_dropped_notes_and_prunes_deleted_ones(vconn: apsw.Connection, vault_dir: Path) -> None:
    write(vault_dir, "notes/dropped.md", "a person dropped this quokka note\n")
    assert refresh_vault(vconn, vault_dir).indexed == 1
    assert search_vault(vconn, "quokka", 5, vault_dir=vault_dir).stale is False
    (vault_dir / "notes" / "dropped.md").unlink()
    assert search_vault(vconn, "quokka", 5, vault_dir=vault_dir).stale is True
    assert refresh_vault(vconn, vault_dir).pruned == 1
    assert paths(vconn, "quokka") == []


def test_reindex_reads_the_file_as_it_is_at_reindex_time(vconn: apsw.Connection, vault_dir: Path) -> None:
    note = vault_dir / "notes" / "race.md"
    note.write_text("first version mentions walrus\n", encoding="utf-8")
    note.write_text("second version mentions narwhal\n", encoding="utf-8")  # a later writer
    report = reindex_notes(vconn, vault_dir, ["race"])
    assert report.indexed == 1
    assert paths(vconn, "narwhal") == ["notes/race.md"] and paths(vconn, "walrus") == []
    # Unchanged bytes: nothing re-chunked, generation unchanged.
    again = reindex_notes(vconn, vault_dir, ["race"])
    assert (again.indexed, again.skipped, again.generation) == (0, 1, report.generation)
    # A missing note is pruned; a never-indexed missing note is a no-op.
    note.unlink()
    assert reindex_notes(vconn, vault_dir, ["race", "never"]).pruned == 1
    assert vconn.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] == 0


def test_the_vault_index_is_the_archive_schema(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "otter", "Otters hold hands while sleeping.\n")
    # The plain archive search works on the vault index unchanged.
    hits = search(vconn, vault_dir, "otters", 5, check_stale=False).hits
    assert [h.path for h in hits] == ["notes/otter.md"]
    tables = {r[0] for r in vconn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert {"kb_sources", "kb_chunks", "kb_chunks_fts", "kb_source_entries", "kb_entries", "kb_entry_lifecycle"} <= tables


def test_shadowed_twins_needs_both_indexed(vconn: apsw.Connection, vault_dir: Path) -> None:
    for name in ("a", "stale__a", "stale__b", "stale_c", "c"):
        write(vault_dir, f"notes/{name}.md", f"{name} body\n")
    refresh_vault(vconn, vault_dir)
    assert shadowed_twins(vconn) == frozenset({"notes/stale__a.md"})


def hit(path: str, score: float) -> SearchHit:
    return SearchHit(path, 1, 1, "snippet", score, "agent", 5, None)


def test_merge_hits_is_by_relevance_not_interleaved() -> None:
    memory = [hit("memory/a.md", 1.9), hit("memory/b.md", 0.3), hit("memory/c.md", 0.2)]
    shared = [hit("notes/x.md", 1.5), hit("notes/y.md", 1.4), hit("notes/z.md", 0.1)]
    merged = merge_hits(memory, shared, 5)
    assert [(c.corpus, c.hit.path) for c in merged] == [
        ("memory", "memory/a.md"),
        ("shared", "notes/x.md"),
        ("shared", "notes/y.md"),
        ("memory", "memory/b.md"),
        ("memory", "memory/c.md"),
    ]
    assert merge_hits([hit("memory/t.md", 1.0)], [hit("notes/t.md", 1.0)], 6) == [
        CorpusHit("memory", hit("memory/t.md", 1.0)),
        CorpusHit("shared", hit("notes/t.md", 1.0)),
    ]
    assert len(merge_hits(memory, shared, None)) == 6
    assert len(merge_hits(memory * 10, shared * 10, 100)) == 20


def test_merge_orders_by_exact_scores_that_show_alike() -> None:
    """Scores are rounded for the reply only after the merge: 0.0000032 and 0.0000021 both show as 0.0,
    yet the shared hit that scored higher comes first (a merge of rounded scores would put memory first)."""
    memory = [hit("memory/a.md", 1.0000041), hit("memory/b.md", 0.0000021)]
    shared = [hit("notes/x.md", 1.0000052), hit("notes/y.md", 0.0000032)]
    merged = merge_hits(memory, shared, 6)
    assert [c.hit.path for c in merged] == ["notes/x.md", "memory/a.md", "notes/y.md", "memory/b.md"]
    assert [shown_score(c.hit.score) for c in merged] == [1.0, 1.0, 0.0, 0.0]


def test_merge_of_real_archive_and_vault_hits(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, workspace: Path, db_path: Path) -> None:
    write(workspace, "memory/own.md", "My own note about the pelican migration.\n")
    archive = open_index(db_path, settings())
    try:
        refresh(archive, workspace, settings())
        create(vstore, "pelicans", "Pelican migration pelican pelican colonies.\n")
        mine = search(archive, workspace, "pelican migration", 6).hits
        ours = search_vault(vconn, "pelican migration", 6).hits
        merged = merge_hits(mine, ours, 6)
        assert {c.corpus for c in merged} == {"memory", "shared"}
        assert [c.hit.score for c in merged] == sorted((c.hit.score for c in merged), reverse=True)
    finally:
        archive.close()
