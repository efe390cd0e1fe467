"""Recall recording: fire-and-forget log appends and the idempotent fold."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw
import pytest
from kb_helpers import settings, write

from services.kb.archive import retrieval_log
from services.kb.archive.retrieval_log import Recorder, fold_retrievals, record_retrievals
from services.kb.index.excerpt import EntryRef
from services.kb.index.indexer import refresh
from services.kb.index.search import search


def log_rows(conn: apsw.Connection) -> list[tuple[str, str, float, str]]:
    return [tuple(r) for r in conn.execute("SELECT entry_hash, path, at, kind FROM kb_retrieval_log ORDER BY id")]  # type: ignore[misc]


def test_log_growth_and_fold(conn: apsw.Connection, db_path: Path, workspace: Path) -> None:
    write(workspace, "memory/a.md", "- zebra crossing\n- yak shaving\n")
    refresh(conn, workspace, settings())
    hits = search(conn, workspace, "zebra").hits
    assert record_retrievals(db_path, hits, "search", clock=lambda: 1000.0) == 1
    assert record_retrievals(db_path, hits, "search", clock=lambda: 2000.0) == 1
    ref = EntryRef("memory/a.md", hits[0].entry_hash or "", 1, 1)
    assert record_retrievals(db_path, [ref], "get", clock=lambda: 1500.0) == 1
    rows = log_rows(conn)
    assert [(r[2], r[3]) for r in rows] == [(1000.0, "search"), (2000.0, "search"), (1500.0, "get")]

    report = fold_retrievals(conn)
    assert (report.folded, report.entries, report.last_id) == (3, 1, 3)
    row = conn.execute(
        "SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash = ?", (hits[0].entry_hash,)
    ).fetchall()
    assert row == [(3, 2000.0)]
    # Idempotent: a second fold adds nothing; new rows fold on top.
    assert fold_retrievals(conn).folded == 0
    record_retrievals(db_path, hits, "search", clock=lambda: 500.0)
    assert fold_retrievals(conn).folded == 1
    row = conn.execute(
        "SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash = ?", (hits[0].entry_hash,)
    ).fetchall()
    assert row == [(4, 2000.0)]  # last_retrieved never moves back
    untouched = conn.execute("SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE entry_hash != ?",
                             (hits[0].entry_hash,)).fetchall()
    assert untouched == [(0, None)]
    # Counted rows are deleted: the log holds only what is not folded yet, and an id is never reused,
    # so a row written after the log was emptied is still above the watermark.
    assert log_rows(conn) == []
    record_retrievals(db_path, hits, "search", clock=lambda: 3000.0)
    assert [r[2] for r in log_rows(conn)] == [3000.0]
    assert fold_retrievals(conn).folded == 1 and log_rows(conn) == []


def test_fold_creates_missing_lifecycle_rows(conn: apsw.Connection, db_path: Path) -> None:
    record_retrievals(db_path, [EntryRef("memory/x.md", "abc", 1, 1)], "get", clock=lambda: 42.0)
    fold_retrievals(conn)
    assert conn.execute("SELECT path, first_seen, retrieval_count, last_retrieved FROM kb_entry_lifecycle").fetchall() == [
        ("memory/x.md", 42.0, 1, 42.0)
    ]


def test_hits_without_entry_are_not_logged(conn: apsw.Connection, db_path: Path) -> None:
    assert record_retrievals(db_path, [EntryRef("memory/x.md", "", 1, 1)], "search") == 0
    assert log_rows(conn) == []


def test_record_never_raises(tmp_path: Path, conn: apsw.Connection, db_path: Path) -> None:
    ref = [EntryRef("memory/x.md", "abc", 1, 1)]
    missing = tmp_path / "nope" / "kb.sqlite"
    assert record_retrievals(missing, ref, "search") == 0
    assert not missing.exists() and not missing.parent.exists()
    assert record_retrievals(db_path, ref, "browse") == 0
    conn.execute("DROP TABLE kb_retrieval_log")
    assert record_retrievals(db_path, ref, "search") == 0


def test_record_gives_up_on_a_locked_database(conn: apsw.Connection, db_path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        assert record_retrievals(db_path, [EntryRef("memory/x.md", "abc", 1, 1)], "search", busy_timeout_ms=10) == 0
    finally:
        conn.execute("ROLLBACK")
    assert log_rows(conn) == []


# --- the batching recorder -------------------------------------------------------------


def refs(n: int, prefix: str = "h") -> list[EntryRef]:
    return [EntryRef(f"memory/{prefix}{i}.md", f"{prefix}{i}", 1, 1) for i in range(n)]


def test_recorder_batches_many_searches_into_one_transaction(
    conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real = retrieval_log._append

    def counting(c: apsw.Connection, rows: list) -> None:  # type: ignore[type-arg]
        writes.append(len(rows))
        real(c, rows)

    monkeypatch.setattr(retrieval_log, "_append", counting)
    recorder = Recorder(linger_s=3600, clock=lambda: 7.0)  # a flush that waited out the linger would time out
    try:
        for n in range(50):
            assert recorder.submit(db_path, refs(3, f"s{n}-"), "search") == 3
        assert log_rows(conn) == []  # nothing written on the caller's thread
        assert recorder.flush(timeout=10)  # flush() does not wait out the linger
        assert writes == [150]  # one transaction for all 50 searches
        assert len(log_rows(conn)) == 150 and {r[2:] for r in log_rows(conn)} == {(7.0, "search")}
        recorder.submit(db_path, refs(1), "get")
        assert recorder.flush(timeout=10)
        assert writes == [150, 1]
    finally:
        recorder.close()


def test_recorder_submit_never_blocks_on_a_locked_database_and_retries(
    conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: list[int] = []  # the threads that tried to write: never the caller's
    real = retrieval_log._append

    def tracking(c: apsw.Connection, rows: list) -> None:  # type: ignore[type-arg]
        writers.append(threading.get_ident())
        real(c, rows)

    monkeypatch.setattr(retrieval_log, "_append", tracking)
    recorder = Recorder(linger_s=0.05, busy_timeout_ms=20)
    conn.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        assert recorder.submit(db_path, refs(2), "search") == 2
        assert threading.get_ident() not in writers  # queued, not written (or waited for) on this thread
        assert recorder.flush(timeout=10)  # the write was refused (locked) ...
    finally:
        conn.execute("ROLLBACK")
    deadline = time.monotonic() + 10
    while len(log_rows(conn)) < 2 and time.monotonic() < deadline:  # ... and retried once the lock is gone
        time.sleep(0.02)
    recorder.close()
    assert [r[0] for r in log_rows(conn)] == ["h0", "h1"]
    assert writers and threading.get_ident() not in writers


def test_recorder_close_writes_what_is_queued(conn: apsw.Connection, db_path: Path) -> None:
    recorder = Recorder(linger_s=3600)  # close() must not wait for the linger
    recorder.submit(db_path, refs(4), "search")
    deadline = time.monotonic() + 30
    while not recorder._queue.empty() and time.monotonic() < deadline:  # the thread took the batch: it lingers
        time.sleep(0.01)
    recorder.close(timeout=60)
    assert recorder._thread is not None and not recorder._thread.is_alive()  # done, not given up on
    assert len(log_rows(conn)) == 4
    assert recorder.submit(db_path, refs(1), "search") == 0  # closed: a no-op, not an error


def test_release_writes_the_rows_queued_for_the_database(conn: apsw.Connection, db_path: Path) -> None:
    """An archive being closed: what was recorded for it is written before it closes, without
    waiting for the linger; the recorder goes on for the next rows."""
    recorder = Recorder(linger_s=3600)  # a release that waited out the linger would time out
    try:
        recorder.submit(db_path, refs(3), "search")
        assert recorder.release(db_path, timeout=60)
        assert len(log_rows(conn)) == 3
        assert recorder.release(db_path, timeout=60)  # nothing queued: a no-op
        recorder.submit(db_path, refs(2), "get")
        assert recorder.flush(timeout=60)
        assert len(log_rows(conn)) == 5
    finally:
        recorder.close()
    assert recorder.release(db_path)  # the thread has ended: nothing to wait for


def test_recorder_never_raises_and_never_creates_the_database(tmp_path: Path, conn: apsw.Connection, db_path: Path) -> None:
    recorder = Recorder(linger_s=0.01)
    try:
        missing = tmp_path / "nope" / "kb.sqlite"
        assert recorder.submit(missing, refs(1), "search") == 1  # queued; the writer gives up quietly
        assert recorder.submit(db_path, refs(1), "browse") == 0
        assert recorder.submit(db_path, [EntryRef("memory/x.md", "", 1, 1)], "search") == 0
        assert recorder.flush(timeout=10)
        assert not missing.exists() and not missing.parent.exists()
        conn.execute("DROP TABLE kb_retrieval_log")
        assert recorder.submit(db_path, refs(1), "search") == 1
        assert recorder.flush(timeout=10)  # the failed write is logged and dropped; the recorder lives on
        conn.execute("CREATE TABLE kb_retrieval_log(id INTEGER PRIMARY KEY AUTOINCREMENT, entry_hash TEXT NOT NULL, "
                     "path TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL)")
        recorder.submit(db_path, refs(1), "get")
        assert recorder.flush(timeout=10)
        assert [(r[0], r[3]) for r in log_rows(conn)] == [("h0", "get")]
    finally:
        recorder.close()


def test_recorder_reopens_a_replaced_database(tmp_path: Path, db_path: Path) -> None:
    from services.kb.index.schema import open_index

    recorder = Recorder(linger_s=0.01)
    try:
        first = open_index(db_path, settings())
        recorder.submit(db_path, refs(1), "search")
        assert recorder.flush(timeout=10)
        assert len(log_rows(first)) == 1
        first.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        second = open_index(db_path, settings())  # a new file at the same path
        recorder.submit(db_path, refs(2), "search")
        assert recorder.flush(timeout=10)
        assert len(log_rows(second)) == 2
        second.close()
    finally:
        recorder.close()
