"""The bulk path of a refresh: many sources read, parsed and written in one pass.

``indexer.refresh`` takes it from ``indexer.BULK_FILES`` sources to read (a first
index, a re-chunk, a restored backup). It writes what the one-by-one path writes
(same rows, same ids: ids are handed out in path order, as that path would) inside
the caller's transaction; an error on any side stops everything and propagates,
and the caller rolls back. The goal is a full index at half the speed of a
bare FTS5 insert of the same chunk texts. The work splits into Python parsing
(``indexer_parse``) and SQLite writing, of about the same size, overlapped two ways:

- **Worker processes** (from ``PROCESS_BYTES`` to read, with the default reader,
  on a machine with 2 cores or more): the sources are cut into ``WORKERS *
  ROUNDS`` contiguous slices of about equal bytes, dealt out in turn to
  ``WORKERS`` spawned processes (``indexer_worker``), and this thread writes
  the slices in path order as their batches come. So the writer draws on every
  worker in turn and is never held to the pace of one of them (with one slice
  per worker it waited on the first worker while the second raced ahead: the
  writer is the critical path, and three busy processes share two cores). With no Python thread competing for the
  GIL here, chunk texts go into FTS5 one row at a time, which lets FTS5 keep
  ``schema.FTS_HASH_BYTES`` of postings in memory before it writes a segment:
  about a third cheaper than an ``INSERT ... SELECT`` per batch (a statement that
  flushes them at its end). A process that cannot be started falls back to:
- **Producer thread** (smaller bulk refreshes): the two threads take turns so that
  they never compete for the GIL in a tight loop. While this thread inserts a
  batch's rows (many short ``executemany`` steps, each handing the GIL over) the
  producer waits; then the producer parses the next batch while this thread runs
  the batch's FTS insert as one statement, during which apsw releases the GIL.
  Letting both run freely was measured 3-5x slower for the row inserts.

A batch is about ``BATCH_CHUNKS`` chunks. Lifecycle rows go in at the end
(``_Writer.write_lifecycle``), in key order: SQLite sorts the rows the workers
send, or the ones it reads back from ``kb_source_entries`` (about 0.5 s for
380,000 entries). Batch by
batch they would land all over a table larger than the page cache, several times
slower. Entries are stored one row per source (``kb_source_entries``, ``schema``):
a full index writes 10,000 rows, not 380,000.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, NamedTuple

import apsw

from gateway.config import ArchiveSettings
from services.kb.index.indexer_parse import Indexed, Outcome, Unchanged, Unreadable, parse_batches, read_source
from services.kb.index.indexer_worker import ParseWorker
from services.kb.index.provenance import Provenance
from services.kb.index.schema import ENTRY_DIGEST_SQL, ENTRY_FIRST_SQL, ENTRY_ROWS_SQL, short_digests
from services.kb.index.sources import FileStat

BATCH_CHUNKS: Final = 1024  # about 1.4 MB of chunk text: 40 batches for 50 MB
PROCESS_BYTES: Final = 4_000_000  # from this many bytes to read, parsing runs in worker processes
WORKERS: Final = min(2, os.cpu_count() or 1)  # worker processes
ROUNDS: Final = 4  # slices per worker, dealt out in turn (module docstring)

Classifier = Callable[[str, str | None], Provenance]


class Stored(NamedTuple):
    """A source's stored ``kb_sources`` row."""

    size: int
    mtime_ns: int
    checked_ns: int
    id: int
    content_hash: str


class BulkResult(NamedTuple):
    indexed: int
    skipped: int
    errors: list[str]
    paths: list[str]  # the sources indexed


def index_bulk(
    conn: apsw.Connection,
    root: Path,
    to_read: list[tuple[str, FileStat, Stored | None]],
    gen: int,
    now: int,
    settings: ArchiveSettings,
    classify: Classifier,
    read: Callable[[Path], bytes],
) -> BulkResult:
    """Read, parse and write ``to_read`` (in path order) inside the caller's transaction."""
    files = [(rel, None if old is None else old.content_hash, st.mtime_ns) for rel, st, old in to_read]
    writer = _Writer(conn, to_read, gen, now, classify)
    tokens, overlap = settings.chunk_tokens, settings.chunk_overlap
    if read is read_source and WORKERS > 1 and sum(st.size for _, st, _ in to_read) >= PROCESS_BYTES:
        with contextlib.ExitStack() as stack:
            slices = _slices([st.size for _, st, _ in to_read], WORKERS * ROUNDS)
            count = min(WORKERS, len(slices))
            workers: list[ParseWorker] = []
            try:
                for first in range(count):
                    mine = slices[first::count]  # slices first, first + count, …: dealt out in turn
                    part_files = [file for start, end in mine for file in files[start:end]]
                    parts = [end - start for start, end in mine]
                    workers.append(ParseWorker(root, part_files, tokens, overlap, BATCH_CHUNKS, parse_batches, parts))
                    stack.callback(workers[-1].close)
            except OSError:  # no process to be had (limits, no executable): parse on a thread instead
                stack.close()
            else:
                for index, (start, _) in enumerate(slices):
                    for batch in workers[index % count].batches():
                        writer.write_fts_rows(writer.write_rows(batch, start))
                writer.write_lifecycle([worker.finish() for worker in workers])
                return writer.result()
    _write_threaded(writer, parse_batches(root, files, tokens, overlap, BATCH_CHUNKS, None if read is read_source else read))
    writer.write_lifecycle()
    return writer.result()


def _slices(sizes: list[int], count: int) -> list[tuple[int, int]]:
    """``count`` (at most) contiguous, non-empty [start, end) slices of about equal bytes."""
    weights = [size + 512 for size in sizes]  # a file costs something even when empty
    total = sum(weights)
    slices: list[tuple[int, int]] = []
    start = done = 0
    for index, weight in enumerate(weights[:-1]):
        done += weight
        if len(slices) < count - 1 and done * count >= total * (len(slices) + 1):
            slices.append((start, index + 1))
            start = index + 1
    slices.append((start, len(weights)))
    return slices


def _write_threaded(writer: _Writer, batches: Iterator[list[Outcome]]) -> None:
    """Parse on a producer thread, taking turns with this one (module docstring)."""
    handoff: queue.Queue[list[Outcome] | BaseException | None] = queue.Queue(maxsize=1)
    turn = threading.Semaphore(0)  # one release = the producer may parse one batch
    stop = threading.Event()

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
        except BaseException as exc:  # noqa: BLE001 - handed to the writer, which re-raises it
            handoff.put(exc)

    producer = threading.Thread(target=produce, name="kb-index-parse", daemon=True)
    producer.start()
    try:
        turn.release()
        while (item := handoff.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            written = writer.write_rows(item)
            turn.release()  # the producer parses the next batch meanwhile
            writer.write_fts_select(written)
    finally:
        stop.set()
        turn.release()
        producer.join()




class _Writer:
    """Turns outcome batches into rows, handing out ids in path order, and writes them."""

    def __init__(
        self,
        conn: apsw.Connection,
        to_read: list[tuple[str, FileStat, Stored | None]],
        gen: int,
        now: int,
        classify: Classifier,
    ) -> None:
        self.conn, self.to_read, self.gen, self.now, self.classify = conn, to_read, gen, now, classify
        self.next_source = next_id(conn, "kb_sources")
        self.next_chunk = next_id(conn, "kb_chunk_rows")
        self.indexed = self.skipped = 0
        self.errors: list[str] = []
        self.fresh: list[tuple[bytes, str, int]] = []  # (digests, path, mtime_ns) of the sources indexed
        self.paths: list[str] = []  # every source indexed

    def result(self) -> BulkResult:
        return BulkResult(self.indexed, self.skipped, self.errors, self.paths)

    def write_lifecycle(self, runs: list[str] | None = None) -> None:
        """Write the lifecycle rows of the sources written since the last call, all at once
        and in key order: then they are cheap B-tree appends (batch by batch they land all
        over a table larger than the page cache, several times slower). ``runs`` hold them
        (each worker's ``indexer_parse.lifecycle_json``), sorted here by hash and then path.
        Without them they come from the digests the writer kept (``fresh``), sorted the same
        way. Either way the first path in sorted order wins an entry held twice. Unchanged
        sources (their stored content hash) need none: their rows were written with their
        entries, and a lifecycle table made anew has every source read again
        (``lifecycle_schema.ensure_lifecycle``)."""
        if runs:
            # jsonb_each over jsonb(): its elements are read without parsing their text again
            # (about a third cheaper than json_each for 380,000 rows).
            select = "SELECT value ->> 0 AS h, value ->> 1 AS path, min(value ->> 2, ?1) / 1e9 AS seen FROM jsonb_each(jsonb(?{}))"
            merged = " UNION ALL ".join(select.format(n + 2) for n in range(len(runs)))
            self.conn.execute("INSERT OR IGNORE INTO kb_paths(path) SELECT path FROM kb_sources ORDER BY path")
            self.conn.execute(
                "INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, first_seen) SELECT unhex(r.h), p.id, r.seen "
                f"FROM ({merged}) AS r JOIN kb_paths AS p ON p.path = r.path ORDER BY r.h, r.path",
                (self.now, *runs),
            )
        elif self.fresh:
            now = self.now
            rows = sorted(
                (digests[k : k + 32], path, min(mtime_ns, now) / 1e9)
                for digests, path, mtime_ns in self.fresh
                for k in range(0, len(digests), 32)
            )
            self.conn.executemany("INSERT OR IGNORE INTO kb_paths(path) VALUES (?)", [(p,) for p in sorted({r[1] for r in rows})])
            self.conn.executemany(
                "INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, first_seen) "
                "VALUES (?, (SELECT id FROM kb_paths WHERE path = ?), ?)",
                rows,
            )
        self.fresh.clear()

    def write_rows(self, batch: list[Outcome], offset: int = 0) -> list[tuple[int, str]]:
        """Everything but the FTS and lifecycle rows of ``batch`` (whose positions count from
        ``offset`` in ``to_read``); returns the chunks' (id, text), ids consecutive."""
        conn, now, gen = self.conn, self.now, self.gen
        sources: list[tuple[int, str, int, int, int, str, str, int]] = []
        replaced: list[int] = []
        rehashed: list[tuple[int, int, int, int]] = []
        entries: list[tuple[int, str, bytes]] = []
        chunks: list[tuple[int, int, int, int, str, str, int, str | None, int, int]] = []
        for outcome in batch:
            rel, st, old = self.to_read[offset + outcome.position]
            if isinstance(outcome, Unreadable):
                self.errors.append(unreadable(rel, outcome.error, old is not None))
            elif isinstance(outcome, Unchanged):
                assert old is not None
                rehashed.append((st.size, st.mtime_ns, now, old.id))
                self.skipped += 1
            else:
                assert isinstance(outcome, Indexed)
                if old is None:
                    source_id = self.next_source
                    self.next_source += 1
                else:
                    source_id = old.id
                    replaced.append(source_id)
                provenance = self.classify(rel, outcome.provenance)
                sources.append((source_id, rel, st.size, st.mtime_ns, now, outcome.digest, provenance, gen))
                entries.append((source_id, outcome.entry_lines, short_digests(outcome.entry_hashes)))
                self.fresh.append((outcome.entry_hashes, rel, st.mtime_ns))
                first = self.next_chunk
                chunks.extend(
                    [(first + n, source_id, start, end, text, provenance, importance, dominant, cjk, carried)
                     for n, (start, end, text, importance, dominant, cjk, carried) in enumerate(outcome.chunks)]
                )  # fmt: skip
                self.next_chunk += len(outcome.chunks)
                self.indexed += 1
                self.paths.append(rel)
        for source_id in replaced:
            delete_rows(conn, source_id)
        conn.executemany("UPDATE kb_sources SET size = ?, mtime_ns = ?, checked_ns = ? WHERE id = ?", rehashed)
        conn.executemany(
            "INSERT INTO kb_sources(id, path, size, mtime_ns, checked_ns, content_hash, provenance, generation) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, checked_ns = excluded.checked_ns, content_hash = excluded.content_hash, "
            "provenance = excluded.provenance, generation = excluded.generation",
            sources,
        )
        conn.executemany(INSERT_ENTRIES, entries)
        conn.executemany(INSERT_CHUNK, [(*c[:4], c[4][c[9] :], *c[5:]) for c in chunks])
        cjk_rows = [(c[0], c[4]) for c in chunks if c[8]]  # few (3% of a typical corpus)
        if cjk_rows:
            conn.executemany("INSERT INTO kb_chunks_cjk(rowid, text) VALUES (?, ?)", cjk_rows)
        return [(c[0], c[4]) for c in chunks]

    def write_fts_rows(self, chunks: list[tuple[int, str]]) -> None:
        """FTS rows one by one: FTS5 buffers them (``schema.FTS_HASH_BYTES``)."""
        self.conn.executemany("INSERT INTO kb_chunks_fts(rowid, text) VALUES (?, ?)", chunks)

    def write_fts_select(self, chunks: list[tuple[int, str]]) -> None:
        """FTS rows in one statement (GIL-free in apsw)."""
        if chunks:
            self.conn.execute(
                "INSERT INTO kb_chunks_fts(rowid, text) SELECT id, text FROM kb_chunks WHERE id BETWEEN ? AND ?",
                (chunks[0][0], chunks[-1][0]),
            )


INSERT_CHUNK: Final = (
    "INSERT INTO kb_chunk_rows(id, source_id, start_line, end_line, text, provenance, importance, entry_hash, has_cjk, "
    "carried) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_ENTRIES: Final = "INSERT INTO kb_source_entries(source_id, lines, hashes) VALUES (?, ?, ?)"


def unreadable(rel: str, error: str, kept: bool) -> str:
    """The ``errors`` line of a source that could not be read (``error``: the exception's type name)."""
    return f"{rel}: unreadable, {error}" + (" (kept)" if kept else "")


def next_id(conn: apsw.Connection, table: str) -> int:
    return int(str(conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchall()[0][0]))


def delete_rows(conn: apsw.Connection, source_id: int) -> None:
    """Remove a source's chunks (with their FTS rows) and entries; the kb_sources row stays."""
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
    conn.execute("DELETE FROM kb_chunk_rows WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM kb_source_entries WHERE source_id = ?", (source_id,))


_LIFECYCLE_INSERT: Final = (
    f"INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, first_seen) SELECT {ENTRY_DIGEST_SQL}, p.id, "
    "min(s.mtime_ns, ?) / 1e9 "
)
_ENTRIES: Final = (
    "CROSS JOIN kb_paths AS p ON p.path = s.path "
    f"CROSS JOIN kb_source_entries AS e ON e.source_id = s.id CROSS JOIN {ENTRY_ROWS_SQL} WHERE {ENTRY_FIRST_SQL}"
)


def write_lifecycle(conn: apsw.Connection, now: int, sources: list[int] | None = None) -> None:
    """INSERT OR IGNORE the lifecycle rows of the entries of ``sources`` (ids) or, with
    None, of every source, first seen at the source's stored mtime (never later than
    ``now``). Rows go in (entry_hash, path) order: cheap B-tree appends, and where
    several sources hold an entry the first path in sorted order wins."""
    order = " ORDER BY 1, s.path"
    if sources is None:
        conn.execute("INSERT OR IGNORE INTO kb_paths(path) SELECT path FROM kb_sources ORDER BY path")
        conn.execute(_LIFECYCLE_INSERT + "FROM kb_sources AS s " + _ENTRIES + order, (now,))
    elif sources:
        # CROSS JOIN fixes the loop order: per listed source, its row, its path id, then its entries.
        listed = "FROM json_each(?) AS ids CROSS JOIN kb_sources AS s ON s.id = ids.value "
        conn.execute("INSERT OR IGNORE INTO kb_paths(path) SELECT s.path " + listed, (json.dumps(sources),))
        conn.execute(_LIFECYCLE_INSERT + listed + _ENTRIES + order, (now, json.dumps(sources)))
