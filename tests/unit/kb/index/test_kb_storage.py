"""The archive's storage layout: overlap stored once, packed entries, compact lifecycle
rows, 16 KiB pages, and the version-5 migration.

A version-4 index is made from a real one: its chunks, entries and lifecycle
rows rewritten as version 4 stored them, the file VACUUMed back to 4 KiB pages
and labelled version 4. Opening it drops the index tables, VACUUMs the
file to ``PAGE_BYTES`` while they are empty and keeps the lifecycle and log
tables; the refresh after it answers every search exactly as before (hits,
order, snippets, shown scores) and the staleness GC's listing is unchanged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apsw
from kb_helpers import settings, write

from services.kb.archive.retrieval_log import fold_retrievals, record_retrievals
from services.kb.index import lifecycle_rows
from services.kb.index.excerpt import EntryRef
from services.kb.index.hits import shown_score
from services.kb.index.indexer import refresh
from services.kb.index.indexer_parse import parse_source, read_source
from services.kb.index.meta import get_meta
from services.kb.index.schema import PAGE_BYTES, PREFIX_BYTES, SCHEMA_VERSION, open_index
from services.kb.index.search import search

NOW = 1_700_000_000.0
QUERIES = ("zebra", "river delta", "alpha OR omega", '"quiet harbour"', "lamp*", "deploy-plan", "東京", "nothing-like-this")


def corpus(workspace: Path) -> None:
    """A few sources: frontmatter, importance markers, a long note (several chunks), CJK."""
    write(workspace, "MEMORY.md", "# MEMORY\n\n- zebra crossing at the river delta\n- alpha and omega\n")
    write(workspace, "memory/people/ana.md", "---\ntitle: Ana\nimportance: 8\n---\n# Ana\n\n- likes the quiet harbour\n")
    long = "\n".join(f"- line {n}: the lamp by the river delta, zebra {n % 7}, deploy-plan step {n}" for n in range(120))
    write(workspace, "memory/log/2024/long.md", "# Log\n\n" + long + "\n")
    write(workspace, "memory/topics/omega.md", "# Omega\n\n- omega point <!-- importance: 9 -->\n- lamplight\n")
    write(workspace, "memory/topics/tokyo.md", "# 東京\n\n- 東京の川と港について\n- zebra in Tokyo\n")


def answers(conn: apsw.Connection, workspace: Path) -> list[list[tuple[object, ...]]]:
    """Every query's hits as a reply shows them (score rounded)."""
    out = []
    for query in QUERIES:
        hits = search(conn, workspace, query, 20, check_stale=False).hits
        out.append([(*dataclasses.astuple(dataclasses.replace(h, score=shown_score(h.score))),) for h in hits])
    return out


def listing(conn: apsw.Connection) -> lifecycle_rows.Page:
    return lifecycle_rows.list_entries(conn, "", 0, NOW)


def lifecycle_table(conn: apsw.Connection) -> list[tuple[object, ...]]:
    return [tuple(r) for r in conn.execute("SELECT * FROM kb_entry_lifecycle ORDER BY entry_hash")]


def page_size(db: Path) -> int:
    conn = apsw.Connection(str(db))
    try:
        return int(str(conn.execute("PRAGMA page_size").fetchall()[0][0]))
    finally:
        conn.close()


V4_LAYOUT = """
CREATE TABLE v4_entries AS SELECT source_id, json_group_array(json_array(start_line, end_line, entry_hash, importance))
    AS entries FROM (SELECT * FROM kb_entries ORDER BY source_id, start_line) GROUP BY source_id;
DROP VIEW kb_entries;
DROP TABLE kb_source_entries;
CREATE TABLE kb_source_entries(
    source_id INTEGER PRIMARY KEY REFERENCES kb_sources(id) ON DELETE CASCADE,
    entries TEXT NOT NULL
);
INSERT INTO kb_source_entries SELECT * FROM v4_entries;
DROP TABLE v4_entries;
CREATE VIEW kb_entries(source_id, start_line, end_line, entry_hash, importance) AS
    SELECT e.source_id, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3
    FROM kb_source_entries AS e, json_each(e.entries) AS j;
CREATE TABLE v4_life AS SELECT * FROM kb_entry_lifecycle;
DROP VIEW kb_entry_lifecycle;
DROP TABLE kb_lifecycle;
DROP TABLE kb_paths;
CREATE TABLE kb_entry_lifecycle(
    entry_hash TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    first_seen REAL NOT NULL,
    last_retrieved REAL,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    supersedes_key TEXT,
    invalid_at REAL,
    restored_at REAL
) WITHOUT ROWID;
INSERT INTO kb_entry_lifecycle SELECT * FROM v4_life;
DROP TABLE v4_life;
CREATE TABLE v4_chunks AS SELECT * FROM kb_chunks;
DROP VIEW kb_chunks;
DROP TABLE kb_chunk_rows;
CREATE TABLE kb_chunks(
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES kb_sources(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    provenance TEXT NOT NULL,
    importance INTEGER NOT NULL,
    entry_hash TEXT,
    has_cjk INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX kb_chunks_source ON kb_chunks(source_id);
CREATE INDEX kb_chunks_cjk_ids ON kb_chunks(id) WHERE has_cjk = 1;
INSERT INTO kb_chunks SELECT * FROM v4_chunks;
DROP TABLE v4_chunks;
"""


def make_version_4(db: Path) -> None:
    """Turn the index at ``db`` into what version 4 left: whole chunk texts in the ``kb_chunks`` table,
    entries as one JSON array per source, the lifecycle table keyed by hex text with its paths,
    4 KiB pages, ``schema_version`` 4."""
    conn = apsw.Connection(str(db))
    try:
        entries = conn.execute("SELECT * FROM kb_entries ORDER BY source_id, start_line").fetchall()
        life = lifecycle_table(conn)
        chunks = conn.execute("SELECT * FROM kb_chunks ORDER BY id").fetchall()
        conn.execute(V4_LAYOUT)
        assert conn.execute("SELECT * FROM kb_entries ORDER BY source_id, start_line").fetchall() == entries
        assert lifecycle_table(conn) == life
        assert conn.execute("SELECT * FROM kb_chunks ORDER BY id").fetchall() == chunks
        assert integrity_problems(conn) == []
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
        conn.execute("PRAGMA page_size=4096")
        conn.execute("VACUUM")
        conn.execute("UPDATE kb_meta SET value = '4' WHERE key = 'schema_version'")
        conn.execute("PRAGMA journal_mode=WAL").fetchall()
    finally:
        conn.close()
    assert page_size(db) == 4096


def integrity_problems(conn: apsw.Connection) -> list[str]:
    problems = [str(row[0]) for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
    for table in ("kb_chunks_fts", "kb_chunks_cjk"):
        try:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        except apsw.Error as exc:
            problems.append(f"{table}: {exc}")
    return problems


def test_a_new_index_has_16k_pages(conn: apsw.Connection, db_path: Path) -> None:
    assert PAGE_BYTES == 16384
    assert int(str(conn.execute("PRAGMA page_size").fetchall()[0][0])) == PAGE_BYTES
    assert get_meta(conn, "schema_version") == str(SCHEMA_VERSION) == "7"


def test_version_4_index_migrates_with_the_same_answers(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    corpus(workspace)
    refresh(conn, workspace, settings(), now_ns=lambda: int(NOW * 1e9))
    hits = search(conn, workspace, "zebra").hits
    record_retrievals(db_path, hits[:2], "search", clock=lambda: NOW + 5)
    record_retrievals(db_path, [EntryRef(hits[0].path, hits[0].entry_hash or "", 1, 1)], "get", clock=lambda: NOW + 9)
    record_retrievals(db_path, [EntryRef("memory/gone.md", "not-a-digest", 1, 1)], "get", clock=lambda: NOW + 3)
    fold_retrievals(conn)  # counts the rows and deletes them
    record_retrievals(db_path, hits[:1], "search", clock=lambda: NOW + 11)  # not folded yet: the log keeps it
    marked = listing(conn).entries[0].life.entry_hash
    lifecycle_rows.update_lifecycle(conn, [lifecycle_rows.Update(marked, supersedes_key="k1", invalid_at=NOW + 1)])
    before_answers, before_listing, before_life = answers(conn, workspace), listing(conn), lifecycle_table(conn)
    log = conn.execute("SELECT * FROM kb_retrieval_log ORDER BY id").fetchall()
    assert before_answers[0] and before_listing.entries and len(log) == 1
    assert ("not-a-digest", "memory/gone.md", NOW + 3, NOW + 3, 1, None, None, None) in before_life
    conn.close()
    make_version_4(db_path)

    migrated = open_index(db_path, settings())
    try:
        assert int(str(migrated.execute("PRAGMA page_size").fetchall()[0][0])) == PAGE_BYTES
        assert str(migrated.execute("PRAGMA journal_mode").fetchall()[0][0]) == "wal"
        assert get_meta(migrated, "schema_version") == str(SCHEMA_VERSION)
        assert migrated.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] == 0  # rebuilt from the sources
        assert lifecycle_table(migrated) == before_life  # ages, retrievals and the GC's marks survive
        assert get_meta(migrated, "lifecycle_backfill") is None  # moved row for row: nothing to backfill
        kind = migrated.execute("SELECT type FROM sqlite_master WHERE name = 'kb_entry_lifecycle'").fetchall()
        assert kind == [("view",)]
        keys = {type(r[0]) for r in migrated.execute("SELECT entry_hash FROM kb_lifecycle")}
        assert keys == {bytes, str}  # raw digests, and the one value that is not a digest as its text
        assert migrated.execute("SELECT * FROM kb_retrieval_log ORDER BY id").fetchall() == log
        assert refresh(migrated, workspace, settings(), now_ns=lambda: int(NOW * 1e9) + 60).indexed == 5
        assert answers(migrated, workspace) == before_answers
        assert listing(migrated) == before_listing
        assert lifecycle_table(migrated) == before_life
        assert integrity_problems(migrated) == []
    finally:
        migrated.close()


def test_the_vacuum_waits_for_other_connections(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    corpus(workspace)
    refresh(conn, workspace, settings())
    life = lifecycle_table(conn)
    conn.close()
    make_version_4(db_path)
    other = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    other.execute("SELECT count(*) FROM kb_meta").fetchall()
    try:
        busy = open_index(db_path, settings())  # migrated, but the file is shared: its pages stay
        try:
            assert get_meta(busy, "schema_version") == str(SCHEMA_VERSION)
            assert int(str(busy.execute("PRAGMA page_size").fetchall()[0][0])) == 4096
            assert str(busy.execute("PRAGMA journal_mode").fetchall()[0][0]) == "wal"
            assert lifecycle_table(busy) == life
        finally:
            busy.close()
    finally:
        other.close()
    again = open_index(db_path, settings())  # still empty, now alone: VACUUMed
    try:
        assert int(str(again.execute("PRAGMA page_size").fetchall()[0][0])) == PAGE_BYTES
        assert lifecycle_table(again) == life
        assert refresh(again, workspace, settings()).indexed == 5
        assert integrity_problems(again) == []
    finally:
        again.close()


def test_a_filled_index_is_never_vacuumed_on_open(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    corpus(workspace)
    refresh(conn, workspace, settings())
    conn.close()
    make_version_4(db_path)
    back = apsw.Connection(str(db_path))
    back.execute("UPDATE kb_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))  # current version, old pages
    back.close()
    reopened = open_index(db_path, settings())
    try:
        assert int(str(reopened.execute("PRAGMA page_size").fetchall()[0][0])) == 4096
        assert reopened.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] > 0
        assert refresh(reopened, workspace, settings()).indexed == 0
    finally:
        reopened.close()


def test_entries_are_packed(conn: apsw.Connection, workspace: Path) -> None:
    """Line numbers as one flat JSON array, digests as their first 8 bytes each; the view and the listing resolve
    them in the lifecycle table."""
    corpus(workspace)
    refresh(conn, workspace, settings())
    row = conn.execute(
        "SELECT e.lines, e.hashes FROM kb_source_entries e JOIN kb_sources s ON s.id = e.source_id WHERE s.path = 'MEMORY.md'"
    ).fetchone()
    assert row is not None
    lines, hashes = row
    view = conn.execute(
        "SELECT start_line, end_line, entry_hash, importance FROM kb_entries e JOIN kb_sources s ON s.id = e.source_id "
        "WHERE s.path = 'MEMORY.md' ORDER BY start_line"
    ).fetchall()
    assert len(view) == 2 and len(hashes) == 2 * PREFIX_BYTES == 16 and lines == "[3,3,5,4,4,5]"
    assert [(a, b, c) for a, b, _, c in view] == [(3, 3, 5), (4, 4, 5)]
    assert [h[:16] for _, _, h, _ in view] == [hashes[:8].hex(), hashes[8:].hex()]
    parsed = parse_source(read_source(workspace / "MEMORY.md"), 60, 30)
    assert [h for _, _, h, _ in view] == [e.entry_hash for e in parsed.entries]
    listed = [(e.start_line, e.end_line, e.life.entry_hash, e.importance) for e in listing(conn).entries if e.path == "MEMORY.md"]
    assert listed == view
    places, lives = lifecycle_rows.lifecycle_of(conn, [view[1][2]], NOW)
    assert [(p.path, p.start_line) for p in places] == [("MEMORY.md", 4)] and [x.entry_hash for x in lives] == [view[1][2]]


def test_overlap_is_stored_once(conn: apsw.Connection, workspace: Path) -> None:
    """A chunk's carried lines come from the row before it; the ``kb_chunks`` view gives every whole text back."""
    corpus(workspace)
    long = "\n".join(f"- {n:03d} " + "word " * (n % 40) for n in range(400))  # lines of many lengths
    write(workspace, "memory/uneven.md", long + "\n")
    refresh(conn, workspace, settings(chunk_tokens=60, chunk_overlap=30))
    for rel in ("memory/log/2024/long.md", "memory/uneven.md", "MEMORY.md"):
        parsed = parse_source(read_source(workspace / rel), 60, 30)
        stored = conn.execute(
            "SELECT c.start_line, c.end_line, c.text FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id "
            "WHERE s.path = ? ORDER BY c.id", (rel,)
        ).fetchall()
        assert stored == [(row[0], row[1], row[2]) for row in parsed.chunks], rel
    carried, rows, whole, kept = conn.execute(
        "SELECT sum(carried), count(*), (SELECT sum(length(text)) FROM kb_chunks), sum(length(text)) FROM kb_chunk_rows"
    ).fetchall()[0]
    assert rows > 20 and carried > 0 and kept + carried == whole
    assert integrity_problems(conn) == []


def make_version_5(db: Path) -> None:
    """Turn the index at ``db`` into what version 5 left: each source's entries with their whole
    32-byte digests (not prefixes naming lifecycle rows), ``schema_version`` 5."""
    conn = apsw.Connection(str(db))
    try:
        entries = conn.execute("SELECT * FROM kb_entries ORDER BY source_id, start_line").fetchall()
        whole: dict[int, bytes] = {}
        for source_id, _, _, entry_hash, _ in entries:
            whole[int(source_id)] = whole.get(int(source_id), b"") + bytes.fromhex(str(entry_hash))
        conn.executemany("UPDATE kb_source_entries SET hashes = ? WHERE source_id = ?", [(v, k) for k, v in whole.items()])
        conn.execute("UPDATE kb_meta SET value = '5' WHERE key = 'schema_version'")
        stored = conn.execute("SELECT sum(length(hashes)) FROM kb_source_entries").fetchall()[0][0]
        assert stored == 32 * len(entries)
    finally:
        conn.close()


def test_version_5_index_is_rebuilt_keeping_lifecycle_and_log(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    corpus(workspace)
    refresh(conn, workspace, settings(), now_ns=lambda: int(NOW * 1e9))
    hits = search(conn, workspace, "zebra").hits
    record_retrievals(db_path, hits[:2], "search", clock=lambda: NOW + 5)
    fold_retrievals(conn)  # counts the rows and deletes them
    record_retrievals(db_path, hits[:1], "search", clock=lambda: NOW + 11)  # not folded yet: the log keeps it
    marked = listing(conn).entries[0].life.entry_hash
    lifecycle_rows.update_lifecycle(conn, [lifecycle_rows.Update(marked, supersedes_key="k1", invalid_at=NOW + 1)])
    before_answers, before_listing, before_life = answers(conn, workspace), listing(conn), lifecycle_table(conn)
    log = conn.execute("SELECT * FROM kb_retrieval_log ORDER BY id").fetchall()
    assert any(row[4] for row in before_life) and len(log) == 1
    conn.close()
    make_version_5(db_path)

    migrated = open_index(db_path, settings())
    try:
        assert get_meta(migrated, "schema_version") == str(SCHEMA_VERSION)
        assert migrated.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] == 0  # rebuilt from the sources
        assert lifecycle_table(migrated) == before_life
        assert migrated.execute("SELECT * FROM kb_retrieval_log ORDER BY id").fetchall() == log
        assert refresh(migrated, workspace, settings(), now_ns=lambda: int(NOW * 1e9) + 60).indexed == 5
        assert answers(migrated, workspace) == before_answers
        assert listing(migrated) == before_listing
        assert lifecycle_table(migrated) == before_life  # first seen, retrievals and the GC's marks kept
        entries = migrated.execute("SELECT count(*) FROM kb_entries").fetchall()[0][0]
        stored = migrated.execute("SELECT sum(length(hashes)) FROM kb_source_entries").fetchall()[0][0]
        assert stored == PREFIX_BYTES * entries
        assert integrity_problems(migrated) == []
    finally:
        migrated.close()


def test_a_prefix_naming_two_rows_is_never_guessed(conn: apsw.Connection, workspace: Path) -> None:
    """Two lifecycle rows whose digests share the stored 8 bytes: the entry is left out of the listing
    rather than given the other row's hash, a hit never names the other row (it falls back to the chunk's
    dominant entry, stored whole), and the entry's own row is still found by its hash."""
    corpus(workspace)
    refresh(conn, workspace, settings())
    real = [e for e in listing(conn).entries if e.path == "memory/topics/omega.md"][0].life.entry_hash
    assert [h.entry_hash for h in search(conn, workspace, "omega point").hits][:1] == [real]
    twin = real[:16] + ("0" if real[16] != "0" else "1") + real[17:]
    conn.execute(
        "INSERT INTO kb_lifecycle(entry_hash, path_id, first_seen) SELECT ?, id, 1.0 FROM kb_paths LIMIT 1",
        (bytes.fromhex(twin),),
    )
    hashes = {h.entry_hash for h in search(conn, workspace, "omega point").hits}
    assert twin not in hashes and hashes
    listed = {e.life.entry_hash for e in listing(conn).entries}
    assert real not in listed and twin not in listed and len(listed) > 3
    _, lives = lifecycle_rows.lifecycle_of(conn, [real], NOW)
    assert [life.entry_hash for life in lives] == [real]
