"""The per-agent ``kb.sqlite``: tables, connections and the ``kb_meta`` store.

Tables (docs/concepts/archive.md "Knowledge archive (KB)" and "Staleness GC"):

- ``kb_meta(key, value)``: ``schema_version``, ``tokenizer``, ``chunking``
  (``"<chunkTokens>/<chunkOverlap>"``), ``generation`` (bumped by every refresh
  that changed the index), ``last_folded_log_id`` (see ``retrieval_log``) and,
  while a lifecycle backfill is due, ``lifecycle_backfill``.
- ``kb_sources``: one row per indexed file (workspace-relative path, size,
  mtime_ns, ``checked_ns`` = when its content was last hashed, SHA-256 of its
  bytes, provenance, the generation that last indexed it).
- ``kb_chunk_rows`` (child of a source): line range, text, provenance, importance,
  the entry hash of the entry that covers most of the chunk, ``has_cjk``. A chunk
  begins with the last lines of the one before it (the overlap, ``chunking``);
  those are stored once: ``carried`` > 0 says the chunk's text starts with the
  last ``carried`` characters of the stored text of chunk ``id - 1`` (the one
  before it in the same source: a source's chunks have consecutive ids and are
  replaced together), and ``text`` holds the rest (``indexer_parse.carry``).
  The overlap is 7.9 MB of the 57.6 MB of chunk text of the 50 MB benchmark corpus.
  ``kb_chunks`` is a view with every chunk's whole text, for reading (the FTS
  tables' content too); writes go to ``kb_chunk_rows``.
- ``kb_source_entries`` (child of a source): one row per source holding all its
  entries in line order, packed in two columns: ``lines``, a flat JSON array of
  ``start_line, end_line, importance`` per entry, and ``hashes``, the first
  ``PREFIX_BYTES`` (8) bytes of each entry's SHA-256 digest, in the same order
  (entry ``k`` is ``lines[3k..3k+2]`` and ``hashes[8k..8k+7]``). The prefix names
  the entry's ``kb_lifecycle`` row, which holds the whole digest (``RESOLVE_SQL``,
  ``resolve_prefixes``): every write of a source's entries writes their rows in the
  same transaction, and rows are never deleted. The whole digests stored here too
  would take 11 MB of the 50 MB benchmark corpus. A prefix that names
  several rows (two digests agreeing in 64 bits: not seen by chance, but text can be
  crafted to) resolves to nothing: the entry is left out of listings and of a hit's
  entry choice rather than given another entry's hash. It lets a refresh write
  lifecycle rows for skipped files without reading them, and a search find the
  entries a hit overlaps. One row per source rather than one per entry: a full
  index of 10,000 files writes 10,000 rows instead of 380,000 (a fifth of its
  SQLite time). One JSON array of ``[start, end, "<64 hex digits>",
  importance]`` would take 77 bytes an entry, 35 MB of the 50 MB
  benchmark corpus's 377,000 entries, where the packed form takes about 45
  (``ENTRY_HASH_SQL`` and the other ``ENTRY_*`` fragments unpack it in SQL). ``kb_entries`` is a view with
  the per-entry rows (source_id, start_line, end_line, entry_hash, importance),
  for reading only (it cannot use an index: look sources up in
  ``kb_source_entries`` by id).
- ``kb_chunks_fts``: FTS5 over chunk text with the configured tokenizer;
  ``kb_chunks_cjk``: FTS5 with the trigram tokenizer over the chunks that hold
  CJK/Thai text (see ``query``). Both are external-content tables on kb_chunks.
  Both buffer up to ``FTS_HASH_BYTES`` of postings in memory before they write a
  segment (FTS5's ``hashsize`` option, 1 MB by default): a bulk load of rows one by
  one writes fewer, larger segments and merges them less (a third less FTS5 work).
- ``kb_lifecycle``: entry_hash PRIMARY KEY (``lifecycle_key``: the 32 raw bytes of
  a SHA-256 hex digest; any other value, as a retrieval log may hold, as its
  text), path_id (``kb_paths``: where the entry was first seen, never updated when
  its text moves to another file), first_seen, last_retrieved, retrieval_count,
  supersedes_key, invalid_at, restored_at (the staleness GC's, ``lifecycle_rows``).
  ``kb_paths(id, path)`` holds each path once and is never pruned (a lifecycle
  row keeps its first path after the file is gone). ``kb_entry_lifecycle`` is a
  view with the rows as they read (hex hash, path text), for reading only: its
  hash is computed, so a lookup through it cannot use the key. Until version 5
  ``kb_entry_lifecycle`` was the table itself, keyed by the hex text with the path
  in every row: 52 MB for the 50 MB benchmark corpus's 377,000 entries, about
  twice what this layout takes. Such a table (with or without restored_at) is
  moved into this one, row for row, whatever the schema version
  (``lifecycle_schema.ensure_lifecycle``). Deliberately *not* a child of chunks, entries or
  sources: ages survive re-chunking, edits and rebuilds.
- ``kb_retrieval_log``: append-only (id, entry_hash, path, at, kind).

Times in the lifecycle and log tables are Unix epoch seconds (REAL).
A schema-version change drops and rebuilds the index tables, never the
lifecycle or log tables; from version 6 to 7 (long lines cut between words) only
the sources with a line longer than a chunk are read again (``_resegment``).

Pages are ``PAGE_BYTES`` (16 KiB; SQLite's default is 4 KiB). A chunk row holds
about 1.4 KB of text, so a 4 KiB page fits two and leaves a fifth of the table
empty: on the 50 MB benchmark corpus ``kb_chunks`` took 77 MB of pages for 61 MB
of rows at 4 KiB and 65 MB at 16 KiB. A new file gets
them at creation; an older file is VACUUMed to them (``_repage``) while its index
tables are empty, that is right after a schema-version change dropped them and
before the refresh that fills them again, so the VACUUM copies only the
lifecycle and log tables.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import apsw

from gateway.config import ArchiveSettings
from gateway.errors import InvalidArgument, NotFound
from services.kb.index.index_files import close_quietly, create_whole
from services.kb.index.lifecycle_schema import ensure_lifecycle
from services.kb.index.meta import get_meta, set_meta, table_exists

# 2: kb_entries keyed by (source_id, start_line), WITHOUT ROWID; 3: entries packed per source
# (kb_source_entries, the kb_entries view), FTS hashsize; 4: chunks hold no frontmatter
# (indexer_parse.body_chunks), so older indexes are rebuilt; 5: 16 KiB pages (``_repage`` VACUUMs the
# file while the dropped index tables are empty), entries packed as line numbers and raw digests, chunk overlap
# stored once (kb_chunk_rows.carried); 6: entries name their digests by an 8-byte prefix, resolved in kb_lifecycle;
# 7: a line longer than a chunk is cut between words (``chunking``), and a NUL in a chunk's text is a space, so
# the sources with such a line or a NUL are read again (``_resegment``: a version-6 index keeps everything else).
SCHEMA_VERSION: Final = 7
RESEGMENTED_FROM: Final = "6"  # the version whose index only needs its long lines cut again
PAGE_BYTES: Final = 16384

# SQL over one ``kb_source_entries AS e`` row's entries (``ENTRY_ROWS``, filtered by ``ENTRY_FIRST``: one
# row per entry, ``j.key`` = 3 * its position): its start, end, hex hash and importance. The view
# ``kb_entries`` is the same; statements that look a source up by id use these directly.
ENTRY_ROWS_SQL: Final = "json_each(e.lines) AS j"
ENTRY_FIRST_SQL: Final = "j.key % 3 = 0"
ENTRY_START_SQL: Final = "j.value"
ENTRY_END_SQL: Final = "e.lines ->> (j.key + 1)"
PREFIX_BYTES: Final = 8
ENTRY_PREFIX_SQL: Final = "substr(e.hashes, j.key / 3 * 8 + 1, 8)"
# The one ``kb_lifecycle`` key whose digest starts with the 8 bytes ``{0}``; NULL when none or several do.
RESOLVE_SQL: Final = (
    "(SELECT CASE WHEN count(*) = 1 THEN max(c.entry_hash) END FROM (SELECT lc.entry_hash FROM kb_lifecycle AS lc "
    "WHERE lc.entry_hash BETWEEN {0} AND unhex(hex({0}) || '" + "ff" * 24 + "') LIMIT 2) AS c)"
)
ENTRY_DIGEST_SQL: Final = RESOLVE_SQL.format(ENTRY_PREFIX_SQL)  # raw: a ``kb_lifecycle`` key, or NULL
ENTRY_HASH_SQL: Final = f"lower(hex({ENTRY_DIGEST_SQL}))"  # "" when unresolved
ENTRY_IMPORTANCE_SQL: Final = "e.lines ->> (j.key + 2)"
FTS_HASH_BYTES: Final = 16 * 1024 * 1024
BUSY_TIMEOUT_MS: Final = 5000
# Prepared statements a long-lived connection keeps (apsw's default is 100). A statement over the
# FTS tables holds 10-20 KB, and the KB keeps three connections per open archive: the statements
# every search or refresh runs stay cached within this bound, and the SQL of the hot paths does not
# vary with its input (lists are passed as one JSON array, ``json_each(?)``), so a cache of 100
# per connection only filled up, over hours, with statements run once.
STATEMENT_CACHE: Final = 64
# docs/concepts/archive.md "Bounded WAL": a WAL is checkpointed into the database once it holds WAL_CHECKPOINT_BYTES
# (SQLite's default, 1,000 pages, is 16 MB at 16 KiB pages) and cut back to WAL_LIMIT_BYTES when it
# restarts; closing an index checkpoints it with TRUNCATE (``index_files.close_connections``).
WAL_CHECKPOINT_BYTES: Final = 4 * 1024 * 1024
WAL_LIMIT_BYTES: Final = 4 * 1024 * 1024

TOKENIZERS: Final = {
    "unicode61": "unicode61",
    "trigram": "trigram",
    "porter": "porter unicode61",
    "ascii": "ascii",
}

# Dropped (in this order) when the schema version changes; kb_entries is a table before version 3.
# kb_chunks is a table before version 5.
_INDEX_TABLES: Final = (
    "kb_chunks_fts", "kb_chunks_cjk", "kb_chunks", "kb_chunk_rows", "kb_entries", "kb_source_entries", "kb_sources",
)

_HEX_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


def lifecycle_key(entry_hash: str) -> bytes | str:
    """The ``kb_lifecycle`` key of ``entry_hash``: the raw digest of 64 lowercase hex digits, else the text."""
    return bytes.fromhex(entry_hash) if _HEX_DIGEST.fullmatch(entry_hash) else entry_hash


def short_digests(digests: bytes) -> bytes:
    """The ``kb_source_entries.hashes`` of raw 32-byte ``digests`` end to end: each one's first ``PREFIX_BYTES``."""
    return b"".join([digests[k : k + PREFIX_BYTES] for k in range(0, len(digests), 32)])


def resolve_prefixes(conn: apsw.Connection, prefixes: Iterable[bytes]) -> dict[bytes, str]:
    """The hex entry hash of each stored prefix that names exactly one ``kb_lifecycle`` row
    (``RESOLVE_SQL``); a prefix naming none or several is left out."""
    wanted = sorted(set(prefixes))
    if not wanted:
        return {}
    sql = (
        f"SELECT w.value, lower(hex({RESOLVE_SQL.format('unhex(w.value)')})) FROM json_each(?) AS w"
    )
    rows = conn.execute(sql, (json.dumps([p.hex() for p in wanted]),)).fetchall()
    return {bytes.fromhex(str(key)): str(digest) for key, digest in rows if digest}


def path_id(conn: apsw.Connection, path: str) -> int:
    """The ``kb_paths`` id of ``path``, added when new (inside the caller's transaction)."""
    conn.execute("INSERT OR IGNORE INTO kb_paths(path) VALUES (?)", (path,))
    return int(str(conn.execute("SELECT id FROM kb_paths WHERE path = ?", (path,)).fetchall()[0][0]))


_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kb_sources(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    checked_ns INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    provenance TEXT NOT NULL,
    generation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kb_chunk_rows(
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES kb_sources(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    carried INTEGER NOT NULL DEFAULT 0,
    provenance TEXT NOT NULL,
    importance INTEGER NOT NULL,
    entry_hash TEXT,
    has_cjk INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS kb_chunks_source ON kb_chunk_rows(source_id);
CREATE INDEX IF NOT EXISTS kb_chunks_cjk_ids ON kb_chunk_rows(id) WHERE has_cjk = 1;
CREATE VIEW IF NOT EXISTS kb_chunks(id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk) AS
    SELECT r.id, r.source_id, r.start_line, r.end_line,
        CASE WHEN r.carried = 0 THEN r.text
        ELSE (SELECT substr(p.text, -r.carried) FROM kb_chunk_rows AS p WHERE p.id = r.id - 1) || r.text END,
        r.provenance, r.importance, r.entry_hash, r.has_cjk
    FROM kb_chunk_rows AS r;
CREATE TABLE IF NOT EXISTS kb_source_entries(
    source_id INTEGER PRIMARY KEY REFERENCES kb_sources(id) ON DELETE CASCADE,
    lines TEXT NOT NULL,
    hashes BLOB NOT NULL
);
CREATE VIEW IF NOT EXISTS kb_entries(source_id, start_line, end_line, entry_hash, importance) AS
    SELECT e.source_id, j.value, e.lines ->> (j.key + 1), """ + ENTRY_HASH_SQL + """,
        e.lines ->> (j.key + 2)
    FROM kb_source_entries AS e, json_each(e.lines) AS j WHERE j.key % 3 = 0;
CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_cjk USING fts5(
    text, content='kb_chunks', content_rowid='id', tokenize='trigram');
CREATE TABLE IF NOT EXISTS kb_retrieval_log(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_hash TEXT NOT NULL,
    path TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('search', 'get'))
);
"""


def fts_tokenize(tokenizer: str) -> str:
    """The FTS5 ``tokenize=`` value for a config tokenizer name; InvalidArgument if unknown."""
    try:
        return TOKENIZERS[tokenizer]
    except KeyError:
        names = ", ".join(sorted(TOKENIZERS))
        raise InvalidArgument(f"unknown archive tokenizer {tokenizer!r} (use one of {names})") from None


def create_fts(conn: apsw.Connection, tokenizer: str) -> None:
    """Create ``kb_chunks_fts`` with ``tokenizer`` (and ``FTS_HASH_BYTES``) and record it in ``kb_meta``."""
    tokenize = fts_tokenize(tokenizer)
    conn.execute(
        "CREATE VIRTUAL TABLE kb_chunks_fts USING fts5("
        f"text, content='kb_chunks', content_rowid='id', tokenize='{tokenize}')"
    )
    conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))
    set_meta(conn, "tokenizer", tokenizer)


def _configure(conn: apsw.Connection, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    conn.setbusytimeout(busy_timeout_ms)
    conn.execute("PRAGMA foreign_keys=ON")
    stable_plans(conn)


def stable_plans(conn: apsw.Connection) -> None:
    """Plans that never depend on a bound value (SQLite's query planner stability guarantee).

    Without it, a statement whose plan SQLite may adjust to a bound value (a ``LIMIT ?``, a
    ``LIKE ?``) expires whenever that parameter is bound again, and is prepared again at its next
    step, cached or not: every FTS5 query did so, in the statements FTS5 runs inside itself,
    about 70 allocations (10 KB) prepared anew per MATCH, a third of its time, and the new
    statement kept in the cache among short-lived allocations (docs/capacity.md "Where the KB's
    memory goes"). Our statements gain nothing from value-dependent plans: no LIKE of ours can
    use an index and no table has STAT4 samples.
    """
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)


def open_index(
    path: Path, settings: ArchiveSettings, create: bool = True, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> apsw.Connection:
    """Open (and with ``create``, create) the read-write archive index at ``path``.

    Sets WAL (``tune_writer``) and a busy timeout and makes sure every table exists. A
    missing file is built whole under a temp name and linked into place (``index_files.create_whole``),
    so no reader ever opens a file without its tables. A missing FTS table is created with
    ``settings.tokenizer``; a different stored tokenizer is left for ``indexer.refresh`` to
    rebuild; a schema-version change is one transaction (``_ensure_schema``). With
    ``create=False`` nothing is created on disk and a missing file raises NotFound.
    InvalidArgument for an unknown tokenizer. ``busy_timeout_ms`` bounds every wait for
    another connection's (or process's) lock.
    """
    fts_tokenize(settings.tokenizer)
    if create and not path.is_file():
        create_whole(path, lambda conn: _build(conn, settings, busy_timeout_ms))
    elif not path.is_file():
        raise NotFound("the knowledge archive has not been built yet")
    try:
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READWRITE, statementcachesize=STATEMENT_CACHE)
    except apsw.CantOpenError:
        if path.is_file():
            raise  # there, yet it cannot be opened: out of descriptors (gateway.resources), permissions
        raise NotFound("the knowledge archive has not been built yet") from None
    _configure(conn, busy_timeout_ms)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    tune_writer(conn)
    conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: a full index inserts in random key order
    _ensure_schema(conn, settings)
    _repage(conn)
    return conn


def _build(conn: apsw.Connection, settings: ArchiveSettings, busy_timeout_ms: int) -> None:
    """Every table of a new index, in ``conn`` to a new, empty file (``index_files.create_whole``)."""
    _configure(conn, busy_timeout_ms)
    conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
    conn.execute("PRAGMA journal_mode=MEMORY").fetchall()  # no journal file: the temp file is all or nothing
    _ensure_schema(conn, settings)


def tune_writer(conn: apsw.Connection) -> None:
    """Settings of every connection that writes an index (its writer, the retrieval log's, a
    checkpoint's): no fsync per commit (``synchronous=NORMAL``: WAL commits are synced by the
    checkpoint), and a bounded WAL (docs/concepts/archive.md "Bounded WAL"): checkpointed once it holds
    ``WAL_CHECKPOINT_BYTES`` and cut back to ``WAL_LIMIT_BYTES`` whenever it restarts."""
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}").fetchall()
    conn.wal_autocheckpoint(max(1, WAL_CHECKPOINT_BYTES // PAGE_BYTES))


def _repage(conn: apsw.Connection) -> None:
    """VACUUM the file to ``PAGE_BYTES`` pages when it has other pages and its index tables are empty.

    SQLite changes the page size of an existing file only by a VACUUM outside WAL
    mode, which needs the file to itself: when another connection has it open the
    journal mode stays WAL (or the switch is busy) and nothing changes; a later
    open tries again while the index is still empty. Once the index holds chunks
    the file keeps its page size: a VACUUM would then copy the whole index inside
    ``open_index`` (seconds for 200 MB). The VACUUM is one transaction of a
    rollback journal, so a crash in it leaves the file as it was.
    """
    if int(str(conn.execute("PRAGMA page_size").fetchall()[0][0])) == PAGE_BYTES:
        return
    if conn.execute("SELECT 1 FROM kb_chunks LIMIT 1").fetchone() is not None:
        return
    try:
        if str(conn.execute("PRAGMA journal_mode=DELETE").fetchall()[0][0]).lower() != "delete":
            return
        conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
        conn.execute("VACUUM")
    except apsw.BusyError:
        return  # another connection: next time
    finally:
        conn.execute("PRAGMA journal_mode=WAL").fetchall()


def open_reader(path: Path) -> apsw.Connection:
    """A read-only connection to an existing index; NotFound when there is none, or when the file
    there has no tables yet (a file an older version, or another tool, made and had not filled:
    the KB's own are whole before they are visible, ``index_files.create_whole``)."""
    if not path.is_file():
        raise NotFound("the knowledge archive has not been built yet")
    try:
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY, statementcachesize=STATEMENT_CACHE)
    except apsw.CantOpenError:
        if path.is_file():
            raise
        raise NotFound("the knowledge archive has not been built yet") from None
    try:
        _configure(conn)
        conn.execute("PRAGMA query_only=ON")
        built = table_exists(conn, "kb_meta") and get_meta(conn, "schema_version") is not None
    except BaseException:
        close_quietly(conn)
        raise
    if not built:
        close_quietly(conn)
        raise NotFound("the knowledge archive has not been built yet")
    return conn


def _ensure_schema(conn: apsw.Connection, settings: ArchiveSettings) -> None:
    if _schema_current(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if table_exists(conn, "kb_meta"):
            version = get_meta(conn, "schema_version")
            if version == RESEGMENTED_FROM and table_exists(conn, "kb_chunk_rows"):
                _resegment(conn)
            elif version is not None and version != str(SCHEMA_VERSION):
                for table in _INDEX_TABLES:
                    row = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
                    if row is not None:
                        conn.execute(f"DROP {'VIEW' if row[0] == 'view' else 'TABLE'} {table}")
        ensure_lifecycle(conn)
        new_cjk = not table_exists(conn, "kb_chunks_cjk")
        conn.execute(_DDL)
        if new_cjk:
            conn.execute("INSERT INTO kb_chunks_cjk(kb_chunks_cjk, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))
        if not table_exists(conn, "kb_chunks_fts"):
            create_fts(conn, settings.tokenizer)
            # Existing chunks (if the FTS table alone was lost) are indexed again.
            conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('rebuild')")
        if get_meta(conn, "schema_version") is None or get_meta(conn, "schema_version") != str(SCHEMA_VERSION):
            set_meta(conn, "schema_version", str(SCHEMA_VERSION))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# Every table, index and view of a current index (the FTS tables' shadow tables come with them).
_CURRENT_NAMES: Final = frozenset((
    "kb_meta", "kb_sources", "kb_chunk_rows", "kb_chunks_source", "kb_chunks_cjk_ids", "kb_chunks", "kb_source_entries",
    "kb_entries", "kb_chunks_cjk", "kb_chunks_fts", "kb_retrieval_log", "kb_paths", "kb_lifecycle", "kb_entry_lifecycle",
))


def _schema_current(conn: apsw.Connection) -> bool:
    """Whether ``_ensure_schema`` has nothing to do: every name there, ``kb_entry_lifecycle`` the view,
    the version current. One read, no write transaction: what an archive opened again (``handles``)
    costs, where the full check takes the write lock and parses the whole DDL."""
    kinds = {str(name): str(kind) for name, kind in conn.execute("SELECT name, type FROM sqlite_master")}
    if not _CURRENT_NAMES <= kinds.keys() or kinds["kb_entry_lifecycle"] != "view":
        return False
    return get_meta(conn, "schema_version") == str(SCHEMA_VERSION)


def _resegment(conn: apsw.Connection) -> None:
    """Have the next refresh read again every source that has a line cut into segments or a NUL.

    Version 7 changed only where a line longer than a chunk is cut (``chunking``), and stores a
    NUL of a chunk's text as a space (``indexer_parse``). Such a line is the only thing
    that gives a source two chunks of the same single line, so those sources are found from their
    chunks, and those with a NUL from their texts' bytes, and marked changed (as a chunking change
    marks every source: ``indexer``); the next refresh re-chunks them. Everything else stays,
    rows and ids alike. Runs inside the caller's transaction.
    """
    conn.execute(
        "UPDATE kb_sources SET content_hash = '', checked_ns = 0 WHERE id IN (SELECT source_id FROM kb_chunk_rows "
        "WHERE start_line = end_line GROUP BY source_id, start_line HAVING count(*) > 1) "
        "OR id IN (SELECT source_id FROM kb_chunk_rows WHERE instr(CAST(text AS BLOB), x'00') > 0)"
    )
