"""Recall recording: the append-only ``kb_retrieval_log`` and its fold into lifecycle rows.

docs/concepts/staleness.md "Staleness GC": the read path appends one row per retrieved
entry through a *dedicated* write connection (never the reader's, never a
read-modify-write of chunk rows), fire-and-forget. Two ways in:

- ``Recorder`` (what the KB service uses): ``submit`` only puts the rows, stamped
  with the retrieval time, on a queue and returns; one writer thread with one
  connection per database appends whatever queued up during the
  last ``linger_s`` (0.5 s) in one transaction. A read never waits for a write,
  a commit per search is avoided, and ``close`` writes what is still queued.
  A batch refused because the database stayed locked for ``busy_timeout_ms``
  is retried with the next one (at most ``MAX_PENDING_ROWS`` rows are kept;
  the oldest are dropped beyond that); any other error drops the batch. A
  database file that disappeared or was replaced is reopened, never created.
  Rows still queued when the process dies (kill -9) are lost: at most one
  linger's worth of recall counts.
  Each batch goes through a connection of its own, opened for it and closed
  right after (about 0.3 ms more per batch than a connection kept open, on the
  recorder's thread): a connection kept per open archive held about 150 KB and
  a descriptor each (docs/capacity.md "Where the KB's memory goes"). While the
  archive's own connections have the file open, SQLite's unix layer keeps the
  closed connection's descriptor and hands it to the next batch's open, so one
  is held per archive at most, closed with the archive. An archive's close calls
  ``release`` first: the rows queued for that database are written before its
  own connections close (and its WAL is checkpointed to 0 bytes).
- ``record_retrievals``: one short-lived connection and one transaction per
  call (scripts, tests).

Both swallow and log every error (``kb_retrieval_log_failed``) and never create
the database file.

``fold_retrievals`` folds rows with an id above ``kb_meta.last_folded_log_id``
into ``kb_entry_lifecycle`` (``retrieval_count += n``, ``last_retrieved = max``)
and advances that id in the same transaction, so folding twice counts nothing
twice. An entry with no lifecycle row yet (retrieved before its file was
indexed) gets one, first seen at its first retrieval. The folded rows are
deleted in that transaction: the log holds only what is not yet counted, so its
size follows the searches since the last fold (a night's), not every search ever.

The log is bounded even where no fold comes (dreaming off for the agent, a vault whose GC never
runs): after a batch, when the rows not yet folded reach ``FOLD_AT_ROWS`` (10,000), the
``Recorder`` folds them at once through the batch's connection. A fold only adds counts and keeps
the latest time, so folding early or late leaves the same lifecycle rows, and the staleness GC
decides the same (docs/concepts/archive.md, its Recall entries). A fold that finds the database locked is
tried again after a later batch.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import apsw
import structlog

from services.kb.index.index_files import close_quietly
from services.kb.index.meta import get_meta, set_meta
from services.kb.index.schema import STATEMENT_CACHE, lifecycle_key, path_id, stable_plans, tune_writer

KINDS: Final = ("search", "get")
RECORD_BUSY_TIMEOUT_MS: Final = 250
LINGER_S: Final = 0.5
MAX_PENDING_ROWS: Final = 10_000
FOLD_AT_ROWS: Final = 10_000  # the log's bound: a batch that leaves this many unfolded rows folds them
RELEASE_TIMEOUT_S: Final = 5.0  # an archive's close waits at most this for its rows to be written
_INSERT: Final = "INSERT INTO kb_retrieval_log(entry_hash, path, at, kind) VALUES (?, ?, ?, ?)"

log = structlog.get_logger()


class Retrieved(Protocol):
    """Anything naming a retrieved entry: SearchHit and excerpt.EntryRef both do."""

    @property
    def path(self) -> str: ...

    @property
    def entry_hash(self) -> str | None: ...


@dataclass(frozen=True)
class FoldReport:
    """``folded`` log rows over ``entries`` distinct entries; ``last_id`` is the new watermark."""

    folded: int
    entries: int
    last_id: int


def record_retrievals(
    db_path: Path,
    hits: Iterable[Retrieved],
    kind: str,
    *,
    clock: Callable[[], float] = time.time,
    busy_timeout_ms: int = RECORD_BUSY_TIMEOUT_MS,
) -> int:
    """Append one log row per hit that names an entry; the number written (0 on any failure).

    Never raises: every error is logged as ``kb_retrieval_log_failed`` and swallowed.
    """
    try:
        if kind not in KINDS:
            raise ValueError(f"unknown retrieval kind {kind!r}")
        at = clock()
        rows = [(hit.entry_hash, hit.path, at, kind) for hit in hits if hit.entry_hash]
        if not rows:
            return 0
        conn = _open_writer(db_path, busy_timeout_ms)
        try:
            _append(conn, rows)
        finally:
            conn.close()
        return len(rows)
    except Exception as exc:  # noqa: BLE001 - fire-and-forget: a failure never fails the read
        log.warning("kb_retrieval_log_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")
        return 0


_Row = tuple[str, str, float, str]  # entry_hash, path, at, kind


def _open_writer(db_path: Path, busy_timeout_ms: int) -> apsw.Connection:
    conn = apsw.Connection(  # never creates the file
        os.fspath(db_path), flags=apsw.SQLITE_OPEN_READWRITE, statementcachesize=STATEMENT_CACHE
    )
    conn.setbusytimeout(busy_timeout_ms)
    stable_plans(conn)
    tune_writer(conn)  # as the index's own writer: no fsync per commit, a bounded WAL
    conn.execute("PRAGMA cache_size=-512")  # it appends a few rows: a small page cache is plenty
    return conn


def _append(conn: apsw.Connection, rows: list[_Row]) -> None:
    with conn:
        conn.executemany(_INSERT, rows)


def unfolded_rows(conn: apsw.Connection) -> int:
    """The log's rows not folded yet, at most (a fold deletes what it counts; ids only grow)."""
    row = conn.execute("SELECT coalesce(max(id) - min(id) + 1, 0) FROM kb_retrieval_log").fetchone()
    return int(str(row[0])) if row else 0


_RETRY: Final = threading.Event()  # a queue item that only wakes the writer to retry kept rows


@dataclass(frozen=True)
class _Rows:
    db_path: Path
    rows: list[_Row]


@dataclass(frozen=True)
class _Release:
    db_path: Path
    done: threading.Event


_Item = _Rows | _Release | threading.Event | None  # rows; a release; a flush waiter; None = stop


class Recorder:
    """The batching, fire-and-forget retrieval-log writer (module docstring).

    ``submit`` may be called from any thread (the event loop); everything else
    happens on the recorder's own thread, started on the first submit: each
    batch's connection is opened, used and closed there.
    """

    def __init__(
        self,
        *,
        linger_s: float = LINGER_S,
        busy_timeout_ms: int = RECORD_BUSY_TIMEOUT_MS,
        clock: Callable[[], float] = time.time,
        max_pending_rows: int = MAX_PENDING_ROWS,
        fold: Callable[[apsw.Connection], object] | None = None,
        fold_at_rows: int = FOLD_AT_ROWS,
    ) -> None:
        """``fold``: what folds a database's log in one transaction (the archive's ``fold_retrievals``
        by default; a vault's index folds by note name). ``fold_at_rows``: the log's bound."""
        self._fold = fold if fold is not None else fold_retrievals
        self._fold_at_rows = fold_at_rows
        self._linger_s = linger_s
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._max_pending = max_pending_rows
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._start_lock = threading.Lock()  # also orders a release against the thread's end
        self._thread: threading.Thread | None = None
        self._ended = False
        self._closed = False
        self._pending: dict[Path, list[_Row]] = {}  # the rows not yet written (the recorder thread's own)

    def submit(self, db_path: Path, hits: Iterable[Retrieved], kind: str) -> int:
        """Queue one row per hit that names an entry; the number queued. Never raises, never blocks."""
        try:
            if kind not in KINDS:
                raise ValueError(f"unknown retrieval kind {kind!r}")
            if self._closed:
                raise RuntimeError("the retrieval recorder is closed")
            at = self._clock()
            rows = [(hit.entry_hash, hit.path, at, kind) for hit in hits if hit.entry_hash]
            if not rows:
                return 0
            self._ensure_thread()
            self._queue.put(_Rows(db_path, rows))
            return len(rows)
        except Exception as exc:  # noqa: BLE001 - fire-and-forget: a failure never fails the read
            log.warning("kb_retrieval_log_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")
            return 0

    def flush(self, timeout: float | None = None) -> bool:
        """Block until everything submitted before this call was written (or given up); False on timeout."""
        if self._thread is None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        self._hurry.set()
        return done.wait(timeout)

    def release(self, db_path: Path, timeout: float = RELEASE_TIMEOUT_S) -> bool:
        """The caller is closing ``db_path`` (any thread but the recorder's): block until the rows
        queued for it so far are written (or kept for a retry). False when that took longer than
        ``timeout`` (it still happens, later)."""
        with self._start_lock:
            if self._thread is None or self._ended:
                return True
            done = threading.Event()
            self._queue.put(_Release(db_path, done))
        self._hurry.set()
        if done.wait(timeout):
            return True
        log.warning("kb_retrieval_log_slow_release", db=str(db_path), timeout_s=timeout)
        return False

    def close(self, timeout: float | None = 10.0) -> None:
        """Write what is still queued and stop the thread."""
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        self._queue.put(None)
        self._hurry.set()
        thread.join(timeout)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="kb-retrieval-log", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:  # rows kept after a busy database are retried after a linger even if nothing new comes
                    item = self._queue.get(timeout=self._linger_s if self._pending else None)
                except queue.Empty:
                    item = _RETRY
                if isinstance(item, _Rows) and not self._stop.is_set():
                    self._hurry.wait(self._linger_s)  # let a batch gather; flush(), release() and close() cut it short
                self._hurry.clear()
                items = [item]
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                for each in items:
                    if isinstance(each, _Rows):
                        self._pending.setdefault(each.db_path, []).extend(each.rows)
                self._write_pending()
                for each in items:
                    if isinstance(each, _Release):  # after the writes: its rows went first
                        each.done.set()
                    elif isinstance(each, threading.Event) and each is not _RETRY:
                        each.set()  # a flush() waiter
                if self._stop.is_set() and None in items:
                    return
        finally:
            with self._start_lock:
                self._ended = True  # no release waits for this thread from now on
            while True:  # waiters that came with the stop
                try:
                    left = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(left, _Release):
                    left.done.set()
                elif isinstance(left, threading.Event):
                    left.set()

    def _write_pending(self) -> None:
        for db_path in list(self._pending):
            rows = self._pending.pop(db_path)
            conn: apsw.Connection | None = None
            try:
                conn = _open_writer(db_path, self._busy_timeout_ms)  # CantOpenError when it is gone: dropped
                _append(conn, rows)
                self._bound(conn, db_path)
            except apsw.BusyError as exc:  # locked past busy_timeout_ms: keep the rows for the next batch
                log.warning("kb_retrieval_log_failed", rows=len(rows), retry=True, error=f"{type(exc).__name__}: {exc}")
                if not self._stop.is_set():
                    self._pending[db_path] = rows[-self._max_pending :]
            except Exception as exc:  # noqa: BLE001 - fire-and-forget: a failure never fails the read
                log.warning("kb_retrieval_log_failed", rows=len(rows), error=f"{type(exc).__name__}: {exc}")
            finally:
                if conn is not None:
                    close_quietly(conn)


    def _bound(self, conn: apsw.Connection, db_path: Path) -> None:
        """Fold the log when it reached the bound (module docstring); the rows just written stay
        written whatever happens here."""
        try:
            if unfolded_rows(conn) >= self._fold_at_rows:
                self._fold(conn)
        except Exception as exc:  # noqa: BLE001 - the next batch tries again; the rows are not lost
            log.warning("kb_retrieval_log_fold_failed", db=str(db_path), error=f"{type(exc).__name__}: {exc}")


def fold_retrievals(conn: apsw.Connection) -> FoldReport:
    """Fold new log rows into ``kb_entry_lifecycle`` idempotently (see the module docstring).

    ``conn`` is the index's write connection (``schema.open_index``); the fold is
    one transaction.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        last = int(get_meta(conn, "last_folded_log_id") or 0)
        groups = conn.execute(
            "SELECT entry_hash, min(path), count(*), min(at), max(at), max(id) "
            "FROM kb_retrieval_log WHERE id > ? GROUP BY entry_hash",
            (last,),
        ).fetchall()
        folded = 0
        newest = last
        for entry_hash, path, count, first_at, last_at, max_id in groups:
            key = lifecycle_key(str(entry_hash))
            conn.execute(
                "INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, first_seen) VALUES (?, ?, ?)",
                (key, path_id(conn, str(path)), first_at),
            )
            conn.execute(
                "UPDATE kb_lifecycle SET retrieval_count = retrieval_count + ?, "
                "last_retrieved = max(coalesce(last_retrieved, 0), ?) WHERE entry_hash = ?",
                (count, last_at, key),
            )
            folded += int(str(count))
            newest = max(newest, int(str(max_id)))
        set_meta(conn, "last_folded_log_id", str(newest))
        # Folded rows are counted for good: keeping them would grow the file by every search
        # ever made. AUTOINCREMENT never hands out an id again, so the watermark stays sound.
        conn.execute("DELETE FROM kb_retrieval_log WHERE id <= ?", (newest,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return FoldReport(folded=folded, entries=len(groups), last_id=newest)
