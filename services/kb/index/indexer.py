"""Refresh: bring ``kb.sqlite`` in line with the workspace's sources in one transaction.

Per source (docs/concepts/archive.md "Knowledge archive (KB)": hash-guarded, fail-closed, prune only
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

Lifecycle (docs/concepts/staleness.md "Staleness GC"): lifecycle rows are written with
INSERT OR IGNORE for every entry of every source a refresh reads, the ones the
hash guard then skips included; ``first_seen`` is the source's stored mtime
(never later than now); an entry held by several sources is first seen under the
first of their paths in sorted order. A source skipped by the stat guard already has its rows
(written when it was indexed). When ``kb_entry_lifecycle`` is missing (an index
built before it existed, or a dropped table) it is created and flagged
(``kb_meta.lifecycle_backfill``), and that refresh writes rows for *every*
stored source, each first seen at its stored mtime: old sources keep their real
age instead of restarting it. Writing every source's rows on every
refresh would cost a lookup per entry (about 0.13 s for 80,000 entries), which
the no-change goal (10,000 files in 0.5 s) cannot afford.

A changed tokenizer rebuilds the FTS table from the stored chunks; changed
chunk settings re-chunk every source. The generation counter moves only when a
refresh changed the index. The whole refresh is one ``BEGIN IMMEDIATE``
transaction: an exception (or a kill) mid-way leaves the previous index intact.

Speed (the goals: a full index at half the speed of a bare FTS5 insert,
a one-file refresh of 10,000 sources in 50 ms):

- The stat comparison runs against a per-connection copy of ``kb_sources``
  (``_STORED``), valid while the connection's ``total_changes()`` and ``PRAGMA
  data_version`` are unchanged (any write through this connection, or any commit
  by another, drops it); the rows a refresh writes are read back into it.
- From ``BULK_FILES`` sources to read (a first index, a re-chunk, a restored
  backup) a refresh takes the bulk path (``indexer_bulk``): parsing
  (``indexer_parse``) overlaps with SQLite's writing, in spawned worker processes
  (``indexer_worker``) from ``indexer_bulk.PROCESS_BYTES`` to read, else on a
  producer thread; lifecycle rows are written in key order, not batch by batch.
  Same rows, same ids as the one-by-one path (tests compare them).
- Entries are stored one row per source (``kb_source_entries``, packed),
  not one per entry, and the FTS tables buffer ``schema.FTS_HASH_BYTES`` of
  postings before writing a segment; ``entries.parse_entries`` is a tuned line
  loop (a differential test holds it to the original).
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
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

import apsw

from gateway.config import ArchiveSettings
from services.kb.index.indexer_bulk import (
    INSERT_CHUNK,
    INSERT_ENTRIES,
    Classifier,
    Stored,
    delete_rows,
    index_bulk,
    next_id,
    unreadable,
    write_lifecycle,
)
from services.kb.index.indexer_parse import parse_source, read_source
from services.kb.index.lifecycle_schema import ensure_lifecycle
from services.kb.index.meta import generation, get_meta, set_meta
from services.kb.index.schema import create_fts, path_id, short_digests
from services.kb.index.sources import ARCHIVE_PROFILE, FileStat, Scan, SourceProfile, stat_source

__all__ = ["BULK_FILES", "RACY_WINDOW_NS", "RefreshReport", "read_source", "refresh", "reindex_paths", "walk_reads"]

RACY_WINDOW_NS: Final = 2_000_000_000
BULK_FILES: Final = 64  # from this many sources to read, a refresh takes the bulk path (indexer_bulk)


@dataclass
class RefreshReport:
    """What one refresh did. ``errors`` holds "path: reason" lines (paths workspace-relative);
    ``paths`` the sources it (re)indexed, workspace-relative."""

    generation: int
    indexed: int = 0
    skipped: int = 0
    pruned: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rebuilt: bool = False
    paths: list[str] = field(default_factory=list)


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


def walk_reads(
    conn: apsw.Connection, workspace: Path, *, profile: SourceProfile = ARCHIVE_PROFILE
) -> list[str]:
    """The listed sources a walk would read now (new, or not matching their stored size,
    mtime and check time), in path order; nothing is written. A caller facing many can
    reindex them in bounded transactions first (``reindex_paths``, as ``archives`` does
    after an event burst) and then walk: the walk finds them done and is short."""
    scan = profile.scan(workspace)
    stored = _stored_rows(conn)
    due = []
    for rel, st in scan.files.items():
        old = stored.get(rel)
        if st is not None and (old is None or not (old[0] == st[0] and old[1] == st[1] and st[1] + RACY_WINDOW_NS <= old[2])):
            due.append(rel)
    return sorted(due)


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
    classify: Classifier,
) -> tuple[RefreshReport, dict[str, tuple[int, int, int, int, str]]]:
    """The work of ``refresh``; also returns the stored rows as they are after it."""
    files = scan.files
    current = generation(conn)
    report = RefreshReport(generation=current)
    ensure_lifecycle(conn)
    report.rebuilt = _reconcile_settings(conn, settings)
    pending = current + 1
    stored = _stored_rows(conn)
    to_read: list[tuple[str, FileStat, Stored | None]] = []
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
            to_read.append((rel, st, Stored(*old)))
    gone = [(rel, old[3]) for rel, old in stored.items() if rel not in files] if listed < len(stored) else []
    to_read.sort(key=lambda item: item[0])
    if len(to_read) >= BULK_FILES:
        # read_source is looked up now: a test may have replaced it (only the default reader
        # can be handed to a worker process).
        bulk = index_bulk(conn, workspace, to_read, pending, now, settings, classify, read_source)
        report.indexed += bulk.indexed
        report.skipped += bulk.skipped
        report.errors.extend(bulk.errors)
        report.paths.extend(bulk.paths)
    for rel, st, old in to_read if len(to_read) < BULK_FILES else ():
        try:
            data = read_source(os.path.join(workspace, rel))
        except OSError as exc:
            report.errors.append(unreadable(rel, type(exc).__name__, old is not None))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if old is not None and old.content_hash == digest:
            conn.execute(
                "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ? WHERE id = ?",
                (st.size, st.mtime_ns, now, old.id),
            )
            write_lifecycle(conn, now, [old.id])
            report.skipped += 1
            continue
        _index_source(conn, rel, data, digest, st, old, pending, now, settings, classify)
        report.indexed += 1
        report.paths.append(rel)
    for rel, source_id in gone if scan.listed_root else ():
        if rel in scan.excluded:
            report.errors.append(f"{rel}: symlink leaves the workspace (dropped)")
        elif not _absent(workspace, rel):
            continue
        delete_rows(conn, source_id)
        conn.execute("DELETE FROM kb_sources WHERE id = ?", (source_id,))
        del stored[rel]
        report.pruned += 1
    if to_read:  # the rows this refresh wrote (all of them have checked_ns = now)
        for row in conn.execute(
            "SELECT path, size, mtime_ns, checked_ns, id, content_hash FROM kb_sources WHERE checked_ns >= ?", (now,)
        ):
            stored[str(row[0])] = (int(row[1]), int(row[2]), int(row[3]), int(row[4]), str(row[5]))
    if get_meta(conn, "lifecycle_backfill") is not None:
        write_lifecycle(conn, now)
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
    classify: Classifier,
    report: RefreshReport,
    pending: int,
    now: int,
) -> None:
    row = conn.execute(
        "SELECT size, mtime_ns, checked_ns, id, content_hash FROM kb_sources WHERE path = ?", (rel,)
    ).fetchone()
    old = Stored(*row) if row is not None else None
    try:
        st = stat_source(root, rel)
        data = read_source(os.path.join(root, rel)) if st is not None else None
    except FileNotFoundError:
        st = data = None
    except OSError as exc:
        report.errors.append(unreadable(rel, type(exc).__name__, old is not None))
        return
    if st is None or data is None:
        if old is not None:
            delete_rows(conn, old.id)
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
    report.paths.append(rel)


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


def _index_source(
    conn: apsw.Connection,
    rel: str,
    data: bytes,
    digest: str,
    st: FileStat,
    old: Stored | None,
    gen: int,
    now: int,
    settings: ArchiveSettings,
    classify: Classifier,
) -> int:
    parsed = parse_source(data, settings.chunk_tokens, settings.chunk_overlap)
    provenance = classify(rel, parsed.provenance)
    values = (st.size, st.mtime_ns, now, digest, provenance, gen)
    if old is None:
        conn.execute(
            "INSERT INTO kb_sources(size, mtime_ns, checked_ns, content_hash, provenance, generation, path) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*values, rel),
        )
        source_id = conn.last_insert_rowid()
    else:
        source_id = old.id
        delete_rows(conn, source_id)
        conn.execute(
            "UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ?, content_hash = ?, "
            "provenance = ?, generation = ? WHERE id = ?",
            (*values, source_id),
        )
    conn.execute(INSERT_ENTRIES, (source_id, parsed.entry_lines, short_digests(parsed.entry_hashes)))
    first_id = next_id(conn, "kb_chunk_rows")
    rows = [
        (first_id + n, source_id, start, end, text, provenance, importance, dominant, cjk, carried)
        for n, (start, end, text, importance, dominant, cjk, carried) in enumerate(parsed.chunks)
    ]
    conn.executemany(INSERT_CHUNK, [(*row[:4], row[4][row[9] :], *row[5:]) for row in rows])
    conn.executemany("INSERT INTO kb_chunks_fts(rowid, text) VALUES (?, ?)", [(row[0], row[4]) for row in rows])
    cjk_rows = [(row[0], row[4]) for row in rows if row[8]]
    if cjk_rows:
        conn.executemany("INSERT INTO kb_chunks_cjk(rowid, text) VALUES (?, ?)", cjk_rows)
    first_seen = min(st.mtime_ns, now) / 1e9
    if parsed.entries:
        first_path = path_id(conn, rel)
        conn.executemany(
            "INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, first_seen) VALUES (?, ?, ?)",
            [(bytes.fromhex(e.entry_hash), first_path, first_seen) for e in parsed.entries],
        )
    return source_id
