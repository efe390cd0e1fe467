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
(never later than now). A source skipped by the stat guard already has its rows
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

Which files are sources and their provenance come from a ``SourceProfile``
(the archive's by default; the shared vault passes its own). ``reindex_paths``
is the targeted variant a writer calls right after changing a few files: inside
its own ``BEGIN IMMEDIATE`` it reads each named file as it is *at that moment*
(no stat guard), so when several processes write and reindex the same file,
whichever reindexes last indexes the latest bytes; a named file that is
genuinely absent is pruned.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
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
        report = _refresh_in_transaction(conn, workspace, settings, scan, now_ns(), profile.classify)
        report.errors[:0] = scan.errors
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    report.seconds = time.perf_counter() - started
    return report


def _refresh_in_transaction(
    conn: apsw.Connection,
    workspace: Path,
    settings: ArchiveSettings,
    scan: Scan,
    now: int,
    classify: _Classifier,
) -> RefreshReport:
    files = scan.files
    current = generation(conn)
    report = RefreshReport(generation=current)
    ensure_lifecycle(conn)
    report.rebuilt = _reconcile_settings(conn, settings)
    pending = current + 1
    stored = {
        row[0]: _Stored(*row[1:])
        for row in conn.execute("SELECT path, size, mtime_ns, checked_ns, id, content_hash FROM kb_sources")
    }
    to_read: list[tuple[str, FileStat, _Stored | None]] = []
    for rel, st in files.items():
        old = stored.get(rel)
        if st is None:
            report.errors.append(f"{rel}: cannot stat (kept)" if old else f"{rel}: cannot stat")
        elif old is not None and old[:2] == st and st[1] + RACY_WINDOW_NS <= old[2]:
            report.skipped += 1
        else:
            to_read.append((rel, st, old))
    for rel, st, old in sorted(to_read, key=lambda item: item[0]):
        try:
            data = read_source(workspace / rel)
        except OSError as exc:
            report.errors.append(f"{rel}: unreadable, {type(exc).__name__}" + (" (kept)" if old else ""))
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
    for rel, old in stored.items():
        if rel in files or not scan.listed_root:
            continue
        if rel in scan.excluded:
            report.errors.append(f"{rel}: symlink leaves the workspace (dropped)")
        elif not _absent(workspace, rel):
            continue
        _delete_rows(conn, old.id)
        conn.execute("DELETE FROM kb_sources WHERE id = ?", (old.id,))
        report.pruned += 1
    if get_meta(conn, "lifecycle_backfill") is not None:
        _write_lifecycle(conn, now)
        conn.execute("DELETE FROM kb_meta WHERE key = 'lifecycle_backfill'")
    if report.indexed or report.pruned or report.rebuilt:
        set_meta(conn, "generation", str(pending))
        report.generation = pending
    return report


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
        report.errors.append(f"{rel}: unreadable, {type(exc).__name__}" + (" (kept)" if old else ""))
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
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = split_lines(text)
    frontmatter = parse_frontmatter(lines)
    provenance = classify(rel, frontmatter.provenance)
    entries = parse_entries(lines, frontmatter)
    chunks = chunk_lines(lines, settings.chunk_tokens, settings.chunk_overlap)
    default = frontmatter.importance if frontmatter.importance is not None else DEFAULT_IMPORTANCE
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
    first_id = int(str(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM kb_chunks").fetchall()[0][0]))
    rows = [
        (first_id + n, source_id, c.start_line, c.end_line, c.text, provenance, importance, dominant, has_unsegmented(c.text))
        for n, (c, (importance, dominant)) in enumerate(zip(chunks, _attribute(chunks, entries, default)))
    ]
    conn.executemany(
        "INSERT INTO kb_chunks(id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany("INSERT INTO kb_chunks_fts(rowid, text) VALUES (?, ?)", [(row[0], row[4]) for row in rows])
    cjk = [(row[0], row[4]) for row in rows if row[8]]
    if cjk:
        conn.executemany("INSERT INTO kb_chunks_cjk(rowid, text) VALUES (?, ?)", cjk)
    first_seen = min(st.mtime_ns, now) / 1e9
    conn.executemany(
        "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) VALUES (?, ?, ?)",
        [(e.entry_hash, rel, first_seen) for e in entries],
    )
    return source_id


def _attribute(chunks: list[Chunk], entries: list[Entry], default: int) -> list[tuple[int, str | None]]:
    """Per chunk: the highest importance among the entries it touches (so an important
    entry is never diluted by its neighbours) and the hash of the entry covering most
    of its lines (earliest on a tie)."""
    result: list[tuple[int, str | None]] = []
    first = 0
    for chunk in chunks:
        while first < len(entries) and entries[first].end_line < chunk.start_line:
            first += 1
        importance: int | None = None
        dominant: str | None = None
        best = 0
        index = first
        while index < len(entries) and entries[index].start_line <= chunk.end_line:
            entry = entries[index]
            overlap = min(entry.end_line, chunk.end_line) - max(entry.start_line, chunk.start_line) + 1
            if overlap > best:
                best, dominant = overlap, entry.entry_hash
            importance = entry.importance if importance is None else max(importance, entry.importance)
            index += 1
        result.append((importance if importance is not None else default, dominant))
    return result


_LIFECYCLE_INSERT: Final = (
    "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) "
    "SELECT e.entry_hash, s.path, min(s.mtime_ns, ?) / 1e9 "
    "FROM kb_entries e JOIN kb_sources s ON s.id = e.source_id"
)


def _write_lifecycle(conn: apsw.Connection, now: int, source_id: int | None = None) -> None:
    """INSERT OR IGNORE lifecycle rows for one source's entries (all sources when None)."""
    if source_id is None:
        conn.execute(_LIFECYCLE_INSERT, (now,))
    else:
        conn.execute(_LIFECYCLE_INSERT + " WHERE e.source_id = ?", (now, source_id))
