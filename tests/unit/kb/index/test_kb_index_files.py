"""An index file is whole before anyone can open it, and its WAL stays bounded (services.kb.index.index_files)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import apsw
import pytest
from kb_helpers import settings

from gateway.errors import NotFound
from services.kb.archive.retrieval_log import Recorder
from services.kb.index import index_files, schema
from services.kb.index.index_files import close_connections, wal_bytes
from services.kb.index.meta import get_meta
from services.kb.index.schema import open_index, open_reader


def test_readers_racing_the_creation_of_an_index_never_find_it_half_made(tmp_path: Path) -> None:
    """A reader that finds the file reads every table: an index made in place would be an empty
    file, then a database without tables, and a search in between would fail ("no such table")."""
    errors: list[str] = []
    answered = 0
    done = threading.Event()
    paths = [tmp_path / f"agent{i}" / "kb.sqlite" for i in range(40)]

    def read() -> None:
        nonlocal answered
        while not done.is_set():
            for path in paths:
                if not path.exists():
                    continue
                try:
                    conn = open_reader(path)
                except NotFound:
                    continue
                except apsw.Error as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                try:
                    get_meta(conn, "schema_version")
                    conn.execute("SELECT count(*) FROM kb_sources").fetchall()
                    answered += 1
                except apsw.Error as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                finally:
                    conn.close()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for path in paths:
            open_index(path, settings()).close()
    finally:
        done.set()
        for t in readers:
            t.join()
    assert errors == []
    assert answered > 0
    assert not [p.name for p in tmp_path.rglob("*") if p.name.endswith(".gwtmp")]  # no temp file left


def test_a_file_without_tables_is_not_an_index_to_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty" / "kb.sqlite"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    bare = tmp_path / "bare" / "kb.sqlite"
    bare.parent.mkdir()
    conn = apsw.Connection(os.fspath(bare))
    conn.execute("PRAGMA journal_mode=WAL").fetchall()  # what opening an index in place did first
    conn.close()
    for path in (empty, bare):
        with pytest.raises(NotFound):
            open_reader(path)
    open_index(bare, settings()).close()  # the writer makes it whole; then it reads
    open_reader(bare).close()


def test_an_index_that_exists_is_kept_when_another_creator_links_second(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    first = open_index(path, settings())
    first.execute("INSERT INTO kb_meta(key, value) VALUES ('mark', 'first')")
    first.close()
    second = open_index(path, settings())
    assert get_meta(second, "mark") == "first"
    second.close()


def _grow(conn: apsw.Connection, mib: int) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS filler(b BLOB)")
    for _ in range(mib * 4):
        with conn:
            conn.execute("INSERT INTO filler VALUES (randomblob(262144))")


def test_the_wal_is_checkpointed_early_and_emptied_when_the_index_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    writer = open_index(path, settings())
    reader = open_reader(path)
    reader.execute("SELECT count(*) FROM kb_sources").fetchall()
    _grow(writer, 24)  # 24 MiB of commits: SQLite's default checkpoint would let the WAL reach 16 MiB
    assert wal_bytes(path) <= schema.WAL_CHECKPOINT_BYTES + 2 * 1024 * 1024
    close_connections(path, writer, reader)  # the reader (which cannot checkpoint) is closed first
    assert wal_bytes(path) == 0
    assert path.stat().st_size > 24 * 1024 * 1024  # everything went into the database


def test_a_wal_left_by_another_connection_is_emptied_by_a_close_without_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    writer = open_index(path, settings())
    writer.wal_autocheckpoint(0)  # as a bulk refresh commits
    _grow(writer, 4)
    reader = open_reader(path)
    reader.execute("SELECT count(*) FROM filler").fetchall()
    other = apsw.Connection(os.fspath(path))  # held open: closing the writer alone checkpoints nothing
    writer.close()
    assert wal_bytes(path) > 4 * 1024 * 1024
    close_connections(path, None, reader)
    other.close()
    assert wal_bytes(path) == 0


def test_the_recorder_writes_each_batch_through_a_connection_closed_with_it(tmp_path: Path) -> None:
    """No connection outlives its batch (``retrieval_log.Recorder``): each database the recorder
    wrote to is left with no WAL, as closed by its last connection."""
    paths = []
    for i in range(12):
        path = tmp_path / f"a{i}" / "kb.sqlite"
        open_index(path, settings()).close()
        paths.append(path)

    class Hit:
        def __init__(self, n: int) -> None:
            self.path, self.entry_hash = f"memory/n{n}.md", f"{n:064x}"

    recorder = Recorder(linger_s=0.01)
    try:
        for _ in range(3):
            for path in paths:
                recorder.submit(path, [Hit(n) for n in range(200)], "search")
            assert recorder.flush(10)
        assert all(recorder.release(path) for path in paths)
    finally:
        recorder.close()
    counts = [apsw.Connection(os.fspath(p)).execute("SELECT count(*) FROM kb_retrieval_log").fetchall()[0][0] for p in paths]
    assert counts == [600] * len(paths)
    assert [wal_bytes(p) for p in paths] == [0] * len(paths)  # each closed as the last connection: WAL gone


def test_a_writer_holding_a_transaction_between_writes_is_closed_and_an_idle_one_kept(tmp_path: Path) -> None:
    """``idle_or_closed``: a statement left open (a read snapshot) or a transaction never ended makes
    the connection unfit to begin the next write; an idle one is kept as it is."""
    path = tmp_path / "kb.sqlite"
    idle = apsw.Connection(str(path))
    idle.execute("PRAGMA journal_mode=WAL").fetchall()
    idle.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)")
    assert index_files.idle_or_closed(idle, path) is idle
    assert index_files.idle_or_closed(None, path) is None

    reading = apsw.Connection(str(path))
    left_open = reading.execute("SELECT x FROM t")
    next(left_open)
    assert index_files.idle_or_closed(reading, path) is None
    with pytest.raises(apsw.ConnectionClosedError):
        reading.execute("SELECT 1")

    writing = apsw.Connection(str(path))
    writing.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (4)")
    assert index_files.idle_or_closed(writing, path) is None  # rolled back, closed: the lock is free
    idle.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (5); COMMIT")
    assert [r[0] for r in idle.execute("SELECT x FROM t ORDER BY x")] == [1, 2, 3, 5]
