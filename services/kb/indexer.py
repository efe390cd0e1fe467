"""Refresh: bring ``kb.sqlite`` in line with the workspace's sources in one transaction.

Per source (SPEC.md "Knowledge archive": hash-guarded, fail-closed, prune only
the genuinely absent):

1. **Stat guard.** Same size and mtime_ns as stored, and the stored content was
   hashed at least 2 s after that mtime ⇒ skipped without reading. The 2 s rule
   covers "racily clean" files (a same-size rewrite within one mtime tick): a
   file modified just before it was hashed is re-read next time.
2. **Hash guard.** Otherwise the bytes are read and hashed; the same SHA-256 ⇒
   skipped (only the stat is updated).
3. **Index.** Otherwise the source is re-chunked: its chunks, FTS rows and
   entries are replaced.

Bytes are decoded as UTF-8 with replacement characters (a stray byte never
hides a whole file). A read error (permission, I/O, a dangling link, a
directory where a file was) is reported in ``errors`` and leaves the source's
existing rows untouched. A stored source that is missing from the listing is
pruned only when a fresh ``stat`` raises FileNotFoundError, and nothing is
pruned when the workspace itself cannot be listed (an unmounted volume is not
an empty memory); a listed symlink whose target leaves the workspace is pruned
as excluded.

Lifecycle (SPEC.md "Archive staleness GC"): lifecycle rows are written with
INSERT OR IGNORE for every entry of every source a refresh reads, the ones the
hash guard then skips included; ``first_seen`` is the source's stored mtime
(never later than now); an entry held by several sources is first seen under the
first of their paths in sorted order. A source skipped by the stat guard already has its rows
(written when it was indexed). When ``kb_entry_lifecycle`` is missing (an index
built before it existed, or a dropped table) it is created and flagged
(``kb_meta.lifecycle_backfill``), and that refresh writes rows for *every*
stored source, each first seen at its stored mtime: old sources keep their real
age instead of restarting it (issue #398). Writing every source's rows on every
refresh would cost a lookup per entry (about 0.13 s for 80,000 entries), which
the no-change goal (10,000 files in 0.5 s) cannot afford.

A changed tokenizer rebuilds the FTS table from the stored chunks; changed
chunk settings re-chunk every source. The generation counter moves only when a
refresh changed the index. The whole refresh is one ``BEGIN IMMEDIATE``
transaction: an exception (or a kill) mid-way leaves the previous index intact.

Speed (issue 4's goals: a full index at half the speed of a bare FTS5 insert,
a one-file refresh of 10,000 sources in 50 ms):

- The stat comparison runs against a per-connection copy of ``kb_sources``
  (``_STORED``), valid while the connection's ``total_changes()`` and ``PRAGMA
  data_version`` are unchanged (any write through this connection, or any commit
  by another, drops it); the rows a refresh writes are read back into it.
- From ``BULK_FILES`` sources to read (a first index, a re-chunk, a restored
  backup) a refresh takes the pipelined bulk path (``_index_bulk``): a producer
  thread parses while SQLite tokenises; lifecycle rows are then written once, in
  key order. Same rows, same ids as the one-by-one path (tests compare them).
- A bulk refresh commits without the automatic WAL checkpoint (which would copy
  the ~4x-corpus WAL into the database inside COMMIT) and checkpoints on a
  background thread instead (``_checkpoint_in_background``). Atomicity is
  unchanged (one transaction; WAL), and so is durability: with
  ``synchronous=NORMAL`` a WAL commit is synced by the checkpoint, never at COMMIT.

Which files are sources and their provenance come from a ``SourceProfile``
(the archive's by default; the shared vault passes its own). ``reindex_paths``
is the targeted variant a writer calls right after changing a few files: inside
its own ``BEGIN IMMEDIATE`` it reads each named file as it is *at that moment*
(no stat guard), so when several processes write and reindex the same file,
whichever reindexes last indexes the latest bytes; a named file that is
genuinely absent is pruned.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

import apsw

from gateway.config import ArchiveSettings
from services.kb.chunking import Chunk, chunk_lines, split_lines
from services.kb.entries import DEFAULT_IMPORTANCE, Entry, parse_entries, parse_frontmatter
from services.kb.query import has_unsegmented
from services.kb.schema import create_fts, ensure_lifecycle, generation, get_meta, set_meta
from services.kb.provenance import Provenance
from services.kb.sources import ARCHIVE_PROFILE, FileStat, Scan, SourceProfile, stat_source

RACY_WINDOW_NS: Final = 2_000_000_000
BULK_FILES: Final = 64  # from this many sources to read, a refresh takes the pipelined bulk path

_Classifier = Callable[[str, str | None], Provenance]


@dataclass
class RefreshReport:
    """What one refresh did. ``errors`` holds "path: reason" lines (paths workspace-relative)."""

    generation: int
    indexed: int = 0
    skipped: int = 0
    pruned: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rebuilt: bool = False


class _Stored(NamedTuple):
    size: int
    mtime_ns: int
    checked_ns: int
    id: int
    content_hash: str


def read_source(path: Path) -> bytes:
    """The bytes of one source (a seam: tests replace it to simulate read errors)."""
    return path.read_bytes()


def refresh(
    conn: apsw.Connection,
    workspace: Path,
    settings: ArchiveSettings,
    *,
    now_ns: Callable[[], int] = time.time_ns,
    profile: SourceProfile = ARCHIVE_PROFILE,
) -> RefreshReport:
    """Index what changed under ``workspace`` (rules in the module docstring).

    ``conn`` comes from ``schema.open_index``; ``profile`` says which files are
    sources and their provenance. Returns a RefreshReport; raises only what
    SQLite raises (busy past the timeout, disk full), after rolling back, so the
    previous index stays whole.
    """
    started = time.perf_counter()
    scan = profile.scan(workspace)
    conn.execute("BEGIN IMMEDIATE")
    try:
        report, stored = _refresh_in_transaction(conn, workspace, settings, scan, now_ns(), profile.classify)
        report.errors[:0] = scan.errors
        bulk = report.indexed >= BULK_FILES
        _commit(conn, defer_checkpoint=bulk)
    except BaseException:
        _STORED.pop(conn, None)
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    _STORED[conn] = _StoredRows(_marker(conn), stored)
    if bulk:
        _checkpoint_in_background(conn)
    report.seconds = time.perf_counter() - started
    return report


def _commit(conn: apsw.Connection, *, defer_checkpoint: bool) -> None:
    """COMMIT; with ``defer_checkpoint``, without the automatic WAL checkpoint that would
    otherwise run inside it (a full index leaves about 4x the corpus in the WAL)."""
    if not defer_checkpoint:
        conn.execute("COMMIT")
        return
    pages = int(str(conn.execute("PRAGMA wal_autocheckpoint").fetchall()[0][0]))
    conn.wal_autocheckpoint(0)
    try:
        conn.execute("COMMIT")
    finally:
        conn.wal_autocheckpoint(pages)


def _checkpoint_in_background(conn: apsw.Connection) -> None:
    """Copy the WAL into the database file on a thread of its own, off the refresh's clock.

    A PASSIVE checkpoint on a separate connection: it never blocks readers or the
    writer, and an interrupted checkpoint is harmless (the WAL stays authoritative).
    Durability is unchanged: with ``synchronous=NORMAL`` a committed transaction
    is synced by the checkpoint anyway, never at COMMIT. If the checkpoint cannot
    run (the file is gone, a lock), the next automatic checkpoint does the work.
    """
    filename = conn.filename

    def run() -> None:
        with contextlib.suppress(apsw.Error):  # best effort: the next commit checkpoints anyway
            other = apsw.Connection(filename, flags=apsw.SQLITE_OPEN_READWRITE)
            try:
                other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                other.close()

    threading.Thread(target=run, name="kb-checkpoint", daemon=True).start()


class _StoredRows(NamedTuple):
    """A connection's copy of ``kb_sources`` (path → size, mtime_ns, checked_ns, id,
    content_hash) as of ``marker``, kept between refreshes so that a no-change
    refresh does not read 10,000 rows back (about a fifth of its time)."""

    marker: tuple[int, int]
    rows: dict[str, tuple[int, int, int, int, str]]


# Valid while the connection's marker is unchanged: ``total_changes`` moves with any
# write through this connection (reindex_paths, a retrieval-log fold, settings
# reconciliation), ``PRAGMA data_version`` with any commit by another connection.
_STORED: weakref.WeakKeyDictionary[apsw.Connection, _StoredRows] = weakref.WeakKeyDictionary()


def _marker(conn: apsw.Connection) -> tuple[int, int]:
    return conn.total_changes(), int(str(conn.execute("PRAGMA data_version").fetchall()[0][0]))


def _stored_rows(conn: apsw.Connection) -> dict[str, tuple[int, int, int, int, str]]:
    cached = _STORED.pop(conn, None)
    if cached is not None and cached.marker == _marker(conn):
        return cached.rows
    return {
        str(row[0]): (int(row[1]), int(row[2]), int(row[3]), int(row[4]), str(row[5]))
        for row in conn.execute("SELECT path, size, mtime_ns, checked_ns, id, content_hash FROM kb_sources")
    }


def _refresh_in_transaction(
    conn: apsw.Connection,
    workspace: Path,
    settings: ArchiveSettings,
    scan: Scan,
    now: int,
    classify: _Classifier,
) -> tuple[RefreshReport, dict[str, tuple[int, int, int, int, str]]]:
    """The work of ``refresh``; also returns the stored rows as they are after it."""
    files = scan.files
    current = generation(conn)
    report = RefreshReport(generation=current)
    ensure_lifecycle(conn)
    report.rebuilt = _reconcile_settings(conn, settings)
    pending = current + 1
    stored = _stored_rows(conn)
    to_read: list[tuple[str, FileStat, _Stored | None]] = []
    listed = 0  # stored sources that are listed
    for rel, st in files.items():
        old = stored.get(rel)
        listed += old is not None
        if st is None:
            report.errors.append(f"{rel}: cannot stat (kept)" if old else f"{rel}: cannot stat")
        elif old is None:
            to_read.append((rel, st, None))
        elif old[0] == st[0] and old[1] == st[1] and st[1] + RACY_WINDOW_NS <= old[2]:
            report.skipped += 1
        else:
            to_read.append((rel, st, _Stored(*old)))
    gone = [(rel, old[3]) for rel, old in stored.items() if rel not in files] if listed < len(stored) else []
    to_read.sort(key=lambda item: item[0])
    if len(to_read) >= BULK_FILES:
        _index_bulk(conn, workspace, to_read, report, pending, now, settings, classify)
    for rel, st, old in to_read if len(to_read) < BULK_FILES else ():
        try:
            data = read_source(workspace / rel)
        except OSError as exc:
            report.errors.append(_unreadable(rel, exc, old))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if old is not None and old.content_hash == digest:
            conn.execute(
                "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ? WHERE id = ?",
                (st.size, st.mtime_ns, now, old.id),
            )
            _write_lifecycle(conn, now, old.id)
            report.skipped += 1
            continue
        _index_source(conn, rel, data, digest, st, old, pending, now, settings, classify)
        report.indexed += 1
    for rel, source_id in gone if scan.listed_root else ():
        if rel in scan.excluded:
            report.errors.append(f"{rel}: symlink leaves the workspace (dropped)")
        elif not _absent(workspace, rel):
            continue
        _delete_rows(conn, source_id)
        conn.execute("DELETE FROM kb_sources WHERE id = ?", (source_id,))
        del stored[rel]
        report.pruned += 1
    if to_read:  # the rows this refresh wrote (all of them have checked_ns = now)
        for row in conn.execute(
            "SELECT path, size, mtime_ns, checked_ns, id, content_hash FROM kb_sources WHERE checked_ns >= ?", (now,)
        ):
            stored[str(row[0])] = (int(row[1]), int(row[2]), int(row[3]), int(row[4]), str(row[5]))
    if get_meta(conn, "lifecycle_backfill") is not None:
        _write_lifecycle(conn, now)
        conn.execute("DELETE FROM kb_meta WHERE key = 'lifecycle_backfill'")
    if report.indexed or report.pruned or report.rebuilt:
        set_meta(conn, "generation", str(pending))
        report.generation = pending
    return report, stored


def reindex_paths(
    conn: apsw.Connection,
    root: Path,
    rels: list[str],
    settings: ArchiveSettings,
    *,
    profile: SourceProfile = ARCHIVE_PROFILE,
    now_ns: Callable[[], int] = time.time_ns,
) -> RefreshReport:
    """Reindex just ``rels`` (root-relative POSIX paths) in one ``BEGIN IMMEDIATE`` transaction.

    Each file is stat'ed and read inside the transaction, so the bytes indexed
    are the file's content at reindex time; unchanged bytes (same SHA-256) only
    refresh the stored stat. A genuinely absent file has its rows pruned; a
    read error is reported in ``errors`` and keeps the existing rows. The caller
    decides which paths are sources (this function indexes what it is given).
    Raises only what SQLite raises, after rolling back.
    """
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = now_ns()
        current = generation(conn)
        report = RefreshReport(generation=current)
        ensure_lifecycle(conn)
        report.rebuilt = _reconcile_settings(conn, settings)
        pending = current + 1
        for rel in dict.fromkeys(rels):
            _reindex_one(conn, root, rel, settings, profile.classify, report, pending, now)
        if report.indexed or report.pruned or report.rebuilt:
            set_meta(conn, "generation", str(pending))
            report.generation = pending
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    report.seconds = time.perf_counter() - started
    return report


def _reindex_one(
    conn: apsw.Connection,
    root: Path,
    rel: str,
    settings: ArchiveSettings,
    classify: _Classifier,
    report: RefreshReport,
    pending: int,
    now: int,
) -> None:
    row = conn.execute(
        "SELECT size, mtime_ns, checked_ns, id, content_hash FROM kb_sources WHERE path = ?", (rel,)
    ).fetchone()
    old = _Stored(*row) if row is not None else None
    try:
        st = stat_source(root, rel)
        data = read_source(root / rel) if st is not None else None
    except FileNotFoundError:
        st = data = None
    except OSError as exc:
        report.errors.append(_unreadable(rel, exc, old))
        return
    if st is None or data is None:
        if old is not None:
            _delete_rows(conn, old.id)
            conn.execute("DELETE FROM kb_sources WHERE id = ?", (old.id,))
            report.pruned += 1
        return
    digest = hashlib.sha256(data).hexdigest()
    if old is not None and old.content_hash == digest:
        conn.execute(
            "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ? WHERE id = ?",
            (st.size, st.mtime_ns, now, old.id),
        )
        report.skipped += 1
        return
    _index_source(conn, rel, data, digest, st, old, pending, now, settings, classify)
    report.indexed += 1


def _unreadable(rel: str, exc: OSError, old: _Stored | None) -> str:
    return f"{rel}: unreadable, {type(exc).__name__}" + (" (kept)" if old else "")


class _Batch(NamedTuple):
    """Rows for a run of consecutive sources (ids assigned as the sequential path would)."""

    sources: list[tuple[int, str, int, int, str, str]]  # (re)indexed: id, path, size, mtime_ns, hash, provenance
    replaced: list[int]  # stored sources among them, whose old rows go first
    rehashed: list[tuple[int, int, int]]  # id, size, mtime_ns: unchanged bytes (hash guard), only the stat moves
    entries: list[tuple[int, int, int, str, int]]  # source_id, start_line, end_line, entry_hash, importance
    chunks: list[tuple[int, int, int, int, str, str, int, str | None, int]]  # kb_chunks columns
    cjk: bool  # some chunk has has_cjk = 1
    errors: list[str]


_BATCH_CHUNKS: Final = 1024  # about 1.4 MB of chunk text: 40 batches for 50 MB


def _index_bulk(
    conn: apsw.Connection,
    workspace: Path,
    to_read: list[tuple[str, FileStat, _Stored | None]],
    report: RefreshReport,
    gen: int,
    now: int,
    settings: ArchiveSettings,
    classify: _Classifier,
) -> None:
    """Read, parse and write many sources, overlapping the Python parsing with SQLite's FTS work.

    A producer thread reads, hashes and parses the sources in path order, one batch
    (about ``_BATCH_CHUNKS`` chunks) at a time. The two threads take turns so that
    they never compete for the GIL in a tight loop: while this thread inserts a
    batch's rows (many short ``executemany`` steps, each handing the GIL over) the
    producer waits; then the producer parses the next batch while this thread runs
    the batch's FTS insert as one ``INSERT ... SELECT`` statement, during which apsw
    releases the GIL (tokenising is the largest SQLite cost). With a free second
    core the parsing is then mostly hidden; on a busy one it costs nothing extra.
    Letting both run freely was measured 3-5x slower for the row inserts. Lifecycle rows are
    written once at the end, in key order: random-order inserts into the lifecycle
    B-tree were the next largest cost. Everything stays inside the caller's
    transaction; an error on either side stops both and propagates, and the caller
    rolls back.
    """
    handoff: queue.Queue[_Batch | BaseException | None] = queue.Queue(maxsize=1)
    turn = threading.Semaphore(0)  # one release = the producer may parse one batch
    stop = threading.Event()
    batches = _batches(workspace, to_read, _next_id(conn, "kb_sources"), _next_id(conn, "kb_chunks"),
                       settings, classify, report)  # fmt: skip

    def produce() -> None:
        try:
            while True:
                turn.acquire()
                if stop.is_set():
                    return
                batch = next(batches, None)
                handoff.put(batch)
                if batch is None:
                    return
        except BaseException as exc:  # handed to the writer, which re-raises it
            handoff.put(exc)

    producer = threading.Thread(target=produce, name="kb-index-parse", daemon=True)
    producer.start()
    touched: list[int] = []
    try:
        turn.release()
        while (item := handoff.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            _write_rows(conn, item, gen, now)
            report.errors.extend(item.errors)
            touched.extend(row[0] for row in item.rehashed)
            touched.extend(row[0] for row in item.sources)
            turn.release()  # the producer parses the next batch meanwhile
            _write_fts(conn, item)
    finally:
        stop.set()
        turn.release()
        producer.join()
    touched.sort()
    _write_lifecycle(conn, now, touched)


def _batches(
    workspace: Path,
    to_read: list[tuple[str, FileStat, _Stored | None]],
    next_source: int,
    next_chunk: int,
    settings: ArchiveSettings,
    classify: _Classifier,
    report: RefreshReport,
) -> Iterator[_Batch]:
    batch = _Batch([], [], [], [], [], False, [])
    for position, (rel, st, old) in enumerate(to_read):
        try:
            data = read_source(workspace / rel)
        except OSError as exc:
            batch.errors.append(_unreadable(rel, exc, old))
            data = None
        if data is not None:
            digest = hashlib.sha256(data).hexdigest()
            if old is not None and old.content_hash == digest:
                batch.rehashed.append((old.id, st.size, st.mtime_ns))
                report.skipped += 1
            else:
                parsed = _parse(rel, data, settings, classify)
                if old is None:
                    source_id = next_source
                    next_source += 1
                else:
                    source_id = old.id
                    batch.replaced.append(source_id)
                provenance = parsed.provenance
                batch.sources.append((source_id, rel, st.size, st.mtime_ns, digest, provenance))
                batch.entries.extend([(source_id, e[0], e[1], e[3], e[4]) for e in parsed.entries])
                first = next_chunk
                batch.chunks.extend(
                    [(first + n, source_id, start, end, text, provenance, importance, dominant, cjk)
                     for n, (start, end, text, importance, dominant, cjk) in enumerate(parsed.chunks)]
                )  # fmt: skip
                next_chunk += len(parsed.chunks)
                if not batch.cjk and any(row[5] for row in parsed.chunks):
                    batch = batch._replace(cjk=True)
                report.indexed += 1
        if len(batch.chunks) >= _BATCH_CHUNKS or position == len(to_read) - 1:
            yield batch
            batch = _Batch([], [], [], [], [], False, [])


def _write_rows(conn: apsw.Connection, batch: _Batch, gen: int, now: int) -> None:
    for source_id in batch.replaced:
        _delete_rows(conn, source_id)
    conn.executemany(
        "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ? WHERE id = ?",
        [(size, mtime_ns, now, source_id) for source_id, size, mtime_ns in batch.rehashed],
    )
    conn.executemany(
        "INSERT INTO kb_sources(id, path, size, mtime_ns, checked_ns, content_hash, provenance, generation) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET size = excluded.size, "
        "mtime_ns = excluded.mtime_ns, checked_ns = excluded.checked_ns, content_hash = excluded.content_hash, "
        "provenance = excluded.provenance, generation = excluded.generation",
        [(source_id, rel, size, mtime_ns, now, digest, provenance, gen)
         for source_id, rel, size, mtime_ns, digest, provenance in batch.sources],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO kb_entries(source_id, start_line, end_line, entry_hash, importance) VALUES (?, ?, ?, ?, ?)",
        batch.entries,
    )
    conn.executemany(
        "INSERT INTO kb_chunks(id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        batch.chunks,
    )
    if batch.cjk:  # few rows (3% of a typical corpus)
        conn.executemany(
            "INSERT INTO kb_chunks_cjk(rowid, text) VALUES (?, ?)", [(c[0], c[4]) for c in batch.chunks if c[8]]
        )


def _write_fts(conn: apsw.Connection, batch: _Batch) -> None:
    """Index a batch's chunks (their ids are consecutive) in one statement."""
    if batch.chunks:
        conn.execute(
            "INSERT INTO kb_chunks_fts(rowid, text) SELECT id, text FROM kb_chunks WHERE id BETWEEN ? AND ?",
            (batch.chunks[0][0], batch.chunks[-1][0]),
        )


def _absent(workspace: Path, rel: str) -> bool:
    try:
        return stat_source(workspace, rel) is None
    except OSError:
        return False


def _reconcile_settings(conn: apsw.Connection, settings: ArchiveSettings) -> bool:
    rebuilt = False
    if get_meta(conn, "tokenizer") != settings.tokenizer:
        conn.execute("DROP TABLE IF EXISTS kb_chunks_fts")
        create_fts(conn, settings.tokenizer)
        conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('rebuild')")
        rebuilt = True
    wanted = f"{settings.chunk_tokens}/{settings.chunk_overlap}"
    stored = get_meta(conn, "chunking")
    if stored != wanted:
        if stored is not None:
            # Force every source through the read + index path again.
            conn.execute("UPDATE kb_sources SET content_hash = '', checked_ns = 0")
            rebuilt = True
        set_meta(conn, "chunking", wanted)
    return rebuilt


def _delete_rows(conn: apsw.Connection, source_id: int) -> None:
    conn.execute(
        "INSERT INTO kb_chunks_fts(kb_chunks_fts, rowid, text) "
        "SELECT 'delete', id, text FROM kb_chunks WHERE source_id = ?",
        (source_id,),
    )
    conn.execute(
        "INSERT INTO kb_chunks_cjk(kb_chunks_cjk, rowid, text) "
        "SELECT 'delete', id, text FROM kb_chunks WHERE source_id = ? AND has_cjk = 1",
        (source_id,),
    )
    conn.execute("DELETE FROM kb_chunks WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM kb_entries WHERE source_id = ?", (source_id,))


class _Parsed(NamedTuple):
    """One source turned into rows, without touching the database."""

    provenance: Provenance
    entries: list[Entry]
    chunks: list[tuple[int, int, str, int, str | None, int]]  # start, end, text, importance, entry hash, has_cjk


def _parse(rel: str, data: bytes, settings: ArchiveSettings, classify: _Classifier) -> _Parsed:
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = split_lines(text)
    frontmatter = parse_frontmatter(lines)
    provenance = classify(rel, frontmatter.provenance)
    entries = parse_entries(lines, frontmatter)
    chunks = chunk_lines(lines, settings.chunk_tokens, settings.chunk_overlap)
    default = frontmatter.importance if frontmatter.importance is not None else DEFAULT_IMPORTANCE
    # One check for the whole file: most files hold no CJK/Thai, so their chunks need none.
    cjk = not text.isascii() and has_unsegmented(text)
    rows = [
        (c.start_line, c.end_line, c.text, importance, dominant, int(cjk and has_unsegmented(c.text)))
        for c, (importance, dominant) in zip(chunks, _attribute(chunks, entries, default))
    ]
    return _Parsed(provenance, entries, rows)


def _index_source(
    conn: apsw.Connection,
    rel: str,
    data: bytes,
    digest: str,
    st: FileStat,
    old: _Stored | None,
    gen: int,
    now: int,
    settings: ArchiveSettings,
    classify: _Classifier,
) -> int:
    parsed = _parse(rel, data, settings, classify)
    entries = parsed.entries
    values = (st.size, st.mtime_ns, now, digest, parsed.provenance, gen)
    if old is None:
        conn.execute(
            "INSERT INTO kb_sources(size, mtime_ns, checked_ns, content_hash, provenance, generation, path) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*values, rel),
        )
        source_id = conn.last_insert_rowid()
    else:
        source_id = old.id
        _delete_rows(conn, source_id)
        conn.execute(
            "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ?, content_hash = ?, "
            "provenance = ?, generation = ? WHERE id = ?",
            (*values, source_id),
        )
    conn.executemany(
        "INSERT INTO kb_entries(source_id, start_line, end_line, entry_hash, importance) VALUES (?, ?, ?, ?, ?)",
        [(source_id, e.start_line, e.end_line, e.entry_hash, e.importance) for e in entries],
    )
    first_id = _next_id(conn, "kb_chunks")
    provenance = parsed.provenance
    rows = [
        (first_id + n, source_id, start, end, text, provenance, importance, dominant, cjk)
        for n, (start, end, text, importance, dominant, cjk) in enumerate(parsed.chunks)
    ]
    conn.executemany(
        "INSERT INTO kb_chunks(id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany("INSERT INTO kb_chunks_fts(rowid, text) VALUES (?, ?)", [(row[0], row[4]) for row in rows])
    cjk_rows = [(row[0], row[4]) for row in rows if row[8]]
    if cjk_rows:
        conn.executemany("INSERT INTO kb_chunks_cjk(rowid, text) VALUES (?, ?)", cjk_rows)
    first_seen = min(st.mtime_ns, now) / 1e9
    conn.executemany(
        "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) VALUES (?, ?, ?)",
        [(e.entry_hash, rel, first_seen) for e in entries],
    )
    return source_id


def _next_id(conn: apsw.Connection, table: str) -> int:
    return int(str(conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchall()[0][0]))


def _attribute(chunks: list[Chunk], entries: list[Entry], default: int) -> list[tuple[int, str | None]]:
    """Per chunk: the highest importance among the entries it touches (so an important
    entry is never diluted by its neighbours) and the hash of the entry covering most
    of its lines (earliest on a tie)."""
    result: list[tuple[int, str | None]] = []
    count = len(entries)
    first = 0
    for chunk_start, chunk_end, _ in chunks:
        while first < count and entries[first][1] < chunk_start:
            first += 1
        importance = -1
        dominant: str | None = None
        best = 0
        index = first
        while index < count:
            entry_start, entry_end, _, digest, entry_importance = entries[index]
            if entry_start > chunk_end:
                break
            overlap = (entry_end if entry_end < chunk_end else chunk_end) - (
                entry_start if entry_start > chunk_start else chunk_start
            ) + 1
            if overlap > best:
                best, dominant = overlap, digest
            if entry_importance > importance:
                importance = entry_importance
            index += 1
        result.append((importance if importance >= 0 else default, dominant))
    return result


_LIFECYCLE_INSERT: Final = (
    "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) "
    "SELECT e.entry_hash, s.path, min(s.mtime_ns, ?) / 1e9 "
    "FROM kb_entries e JOIN kb_sources s ON s.id = e.source_id"
)


def _write_lifecycle(conn: apsw.Connection, now: int, sources: int | list[int] | None = None) -> None:
    """INSERT OR IGNORE lifecycle rows for the entries of one source, of a list of sources
    or (None) of all sources. Rows go in key order (cheap B-tree appends), and where two
    sources hold the same entry the first path in sorted order wins, as when the sources
    are written one by one in path order."""
    order = " ORDER BY e.entry_hash, s.path"
    if sources is None:
        conn.execute(_LIFECYCLE_INSERT + order, (now,))
    elif isinstance(sources, int):
        conn.execute(_LIFECYCLE_INSERT + " WHERE e.source_id = ?", (now, sources))
    elif sources:
        # CROSS JOIN fixes the loop order: per listed source, its entries by primary key.
        conn.execute(
            "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) "
            "SELECT e.entry_hash, s.path, min(s.mtime_ns, ?) / 1e9 FROM json_each(?) AS j "
            "CROSS JOIN kb_sources AS s ON s.id = j.value CROSS JOIN kb_entries AS e ON e.source_id = j.value" + order,
            (now, json.dumps(sources)),
        )
