"""The forget bench's floor: the same work done bare, without the suite, on copies taken before the
forget (bench/forget.py's docstring, "Floor").

- **Files**: each file known to hold the text is read, the text replaced by a marker (``str.replace``,
  exact case) and written back through a temp file, ``fsync`` and ``rename``.
- **Databases**: with apsw on the copy, ``synchronous=NORMAL`` (the KB's setting) and ``secure_delete`` on; in one transaction, for every chunk
  whose text holds the text (``instr``), its FTS5 rows deleted, its text replaced (SQL ``replace``)
  and its FTS5 rows inserted again; then FTS5 ``optimize``, a TRUNCATE checkpoint, ``VACUUM`` and a
  TRUNCATE checkpoint: the purge's own steps, without the reindex, the regular-expression scan of
  every chunk and note, the tombstone, the record and the RPCs.

Nothing here decides a verdict.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = "[forgotten F-floor]"


@dataclass
class Copies:
    """Copies of the databases and files one forget will touch, in a folder outside the home."""

    databases: list[Path]
    files: list[Path]


def copy(dest: Path, databases: list[Path], files: list[Path]) -> Copies:
    """``databases`` (each with its -wal, while no one writes to it) and ``files`` copied under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    out = Copies([], [])
    for n, db in enumerate(databases):
        target = dest / f"db{n}" / db.name
        target.parent.mkdir()
        shutil.copyfile(db, target)
        wal = db.with_name(db.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, target.with_name(target.name + "-wal"))
        out.databases.append(target)
    for n, path in enumerate(files):
        target = dest / "files" / f"{n:05d}-{path.name}"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, target)
        out.files.append(target)
    return out


def rewrite_file(path: Path, text: str) -> bool:
    """``path`` with ``text`` replaced by the marker, written durably; whether it held it."""
    data = path.read_text(encoding="utf-8")
    if text not in data:
        return False
    tmp = path.with_name(f".{path.name}.floor")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(data.replace(text, MARKER))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return True


def _fts_tables(conn: object) -> list[str]:
    rows = conn.execute(  # type: ignore[attr-defined]
        "SELECT name FROM sqlite_master WHERE type = 'table' AND lower(sql) LIKE '%using fts5%' ORDER BY name")
    return [str(name) for (name,) in rows]


def purge_database(path: Path, text: str) -> int:
    """The database floor (module docstring) on ``path``; how many chunks held the text."""
    import apsw

    conn = apsw.Connection(os.fspath(path))
    try:
        conn.setbusytimeout(10_000)
        conn.execute("PRAGMA synchronous=NORMAL").fetchall()  # as the KB's connections: WAL commits synced by the checkpoint
        conn.execute("PRAGMA secure_delete=ON").fetchall()
        fts = _fts_tables(conn)  # kb_chunks_fts holds every chunk, kb_chunks_cjk those with has_cjk
        with conn:
            rows = conn.execute("SELECT id, text, has_cjk FROM kb_chunks WHERE instr(text, ?)", (text,)).fetchall()
            held = {table: [(r, t) for r, t, cjk in rows if cjk or table != "kb_chunks_cjk"] for table in fts}
            for table, chunks in held.items():
                conn.executemany(f'INSERT INTO "{table}"("{table}", rowid, text) VALUES (\'delete\', ?, ?)', chunks)
            conn.executemany("UPDATE kb_chunk_rows SET text = replace(text, ?, ?) WHERE id = ?",
                             [(text, MARKER, row_id) for row_id, _, _ in rows])
            for table, chunks in held.items():
                conn.executemany(f'INSERT INTO "{table}"(rowid, text) SELECT id, text FROM kb_chunks WHERE id = ?',
                                 [(row_id,) for row_id, _ in chunks])
        for table in fts:
            conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return len(rows)


@dataclass
class Floor:
    seconds: float
    files: int  # files that held the text
    chunks: int  # chunks that held it
    bytes_before: int
    bytes_after: int


def run(copies: Copies, text: str) -> Floor:
    """The floor over ``copies``, timed whole."""
    from forget_home import db_bytes

    before = sum(db_bytes(db) for db in copies.databases)
    t0 = time.perf_counter()
    files = sum(rewrite_file(path, text) for path in copies.files)
    chunks = sum(purge_database(db, text) for db in copies.databases)
    seconds = time.perf_counter() - t0
    return Floor(seconds, files, chunks, before, sum(db_bytes(db) for db in copies.databases))
