"""An index file's life outside its tables: made whole before it is visible, closed with its WAL emptied.

- **Creation** (``create_whole``): a new ``kb.sqlite`` is built in a temp file of the same folder
  (``gateway.atomic.open_temp``: locked, so a start-up sweep never takes it while it is built),
  its tables committed and the file closed, then linked into place (``gateway.atomic.link_new``). A reader that
  finds the file finds every table. (An index opened in place is an empty file first, then a
  database without tables, then one with them: searches racing the first refresh read it in
  between and failed with "no such table: kb_meta".) When another creator linked its file first,
  that one stays: it is whole too.
- **A writer between writes** (``idle_or_closed``) holds no transaction. One that does (a
  statement of an earlier call never reset, which pins the read snapshot it began with) would
  fail every later ``BEGIN IMMEDIATE`` at once with ``SQLITE_BUSY_SNAPSHOT`` as soon as another
  connection commits, without waiting: it is closed, and the next write opens a fresh one.
- **Closing** (``close_connections``, docs/concepts/archive.md "Bounded WAL"): the reader first, then a TRUNCATE
  checkpoint on the writer, so a closed index leaves its WAL at 0 bytes (a read-only connection
  cannot checkpoint: closed last, it left a full WAL behind).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

import apsw
import structlog

from gateway.atomic import discard_temp, link_new, open_temp

log = structlog.get_logger()

CLOSE_BUSY_TIMEOUT_MS: Final = 250  # a TRUNCATE checkpoint waits this long for another connection, then gives up
_CREATE_ATTEMPTS: Final = 3


def create_whole(path: Path, build: Callable[[apsw.Connection], None]) -> None:
    """Make the index file ``path``: ``build`` (which creates every table and commits) runs on a
    connection to a new, empty temp file, which is then linked into place (module docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(_CREATE_ATTEMPTS):
        fd, tmp = open_temp(path.parent, path.name)
        try:
            conn = apsw.Connection(os.fspath(tmp), flags=apsw.SQLITE_OPEN_READWRITE)
            try:
                build(conn)
            finally:
                close_quietly(conn)
        except BaseException:
            discard_temp(fd, tmp)
            raise
        # Our descriptor goes before the file is visible: closing a descriptor drops every POSIX lock
        # the process holds on the file, and a connection to ``path`` may take such locks from the link on.
        os.close(fd)
        try:
            link_new(tmp, path)  # when another creator's file is there, that one stays (it is whole too)
        except FileNotFoundError:  # swept in the instant it was unlocked: build another
            continue
        return
    raise FileNotFoundError(errno.ENOENT, "the new index file disappeared before it was linked, three times", os.fspath(path))


def close_connections(path: Path, writer: apsw.Connection | None, reader: apsw.Connection | None) -> None:
    """Close an index's connections, its WAL checkpointed into the database and cut to 0 bytes first:
    the reader, then a TRUNCATE checkpoint on the writer (or on a connection of its own when there
    is no writer and the WAL holds something). A checkpoint that cannot run at once (another
    process reading an older snapshot) is left for the next close or automatic checkpoint. SQLite
    errors are not raised: the connections are closed either way."""
    if reader is not None:
        close_quietly(reader)
    checkpoint = writer
    if checkpoint is None and wal_bytes(path) > 0:
        with contextlib.suppress(apsw.Error):
            checkpoint = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READWRITE)
    if checkpoint is not None:
        with contextlib.suppress(apsw.Error):
            checkpoint.setbusytimeout(CLOSE_BUSY_TIMEOUT_MS)
            checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        close_quietly(checkpoint)


def idle_or_closed(conn: apsw.Connection | None, path: Path) -> apsw.Connection | None:
    """``conn`` when it holds no transaction (or is None); else None, after closing it (module
    docstring), logged as ``kb_writer_reopened``."""
    if conn is None:
        return None
    state = conn.txn_state("main")
    if state == apsw.SQLITE_TXN_NONE:
        return conn
    log.warning("kb_writer_reopened", index=os.fspath(path), autocommit=conn.getautocommit(),
                transaction="write" if state == apsw.SQLITE_TXN_WRITE else "read")
    with contextlib.suppress(apsw.Error):
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
    close_quietly(conn)
    return None


def release_caches(*conns: apsw.Connection | None) -> None:
    """Hand back the page caches of the open ones of ``conns`` (``handles.Holder.release_caches``)."""
    for conn in conns:
        if conn is not None:
            conn.execute("PRAGMA shrink_memory")


def close_quietly(conn: apsw.Connection) -> None:
    """Close ``conn``, forcing it when SQLite objects (a statement left open by an error)."""
    try:
        conn.close()
    except apsw.Error:
        conn.close(True)


def wal_bytes(path: Path) -> int:
    """The size of ``path``'s WAL (0 when there is none)."""
    try:
        return path.with_name(path.name + "-wal").stat().st_size
    except OSError:
        return 0
