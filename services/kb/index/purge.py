"""Where a forget's target sits in an index, and making its bytes leave the file (docs/concepts/archive.md "Forget").

An index (an agent's ``kb.sqlite`` or a vault's) holds the text of its sources in one place:
``kb_chunk_rows.text``, read whole through the ``kb_chunks`` view; the two FTS5 tables hold its words.
``index_places`` finds the target there, per source, with the source's line numbers (a match in the overlap
two chunks share is counted once).

Deleting rows does not remove bytes: SQLite leaves a deleted row's bytes in free pages and in the WAL,
and FTS5 records a deletion as a new segment that *masks* the old postings, which keep the words until
the segments are merged. ``purge_bytes`` makes them leave, on a connection of its own that every other
connection of this process has given up (the caller closes them first: a reader's open snapshot would
keep the WAL from being reset): ``secure_delete`` (freed pages are zeroed), FTS5 ``optimize`` on every
FTS5 table (one segment, the masked postings dropped), a TRUNCATE checkpoint (the WAL's old frames
gone), ``VACUUM`` (the file rebuilt from its live rows: no free page, no stale byte), and a TRUNCATE
checkpoint again (the VACUUM's own frames copied in, the WAL cut to 0 bytes). Each step is a
transaction of its own or none: a process killed in the middle leaves a whole database, and the same
purge run again finishes the job. The hashes an index keeps (a source's SHA-256, an entry's) and the
lifecycle and retrieval-log rows of entries that are gone stay: they hold no text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import apsw

from gateway.errors import Aborted
from gateway.forgetting import Target
from services.kb.index.index_files import close_quietly

PURGE_BUSY_TIMEOUT_MS: Final = 10_000
_CHUNKS_SQL: Final = (
    "SELECT s.path, c.start_line, c.text FROM kb_chunks AS c JOIN kb_sources AS s ON s.id = c.source_id "
    "ORDER BY s.path, c.id"
)


@dataclass(frozen=True)
class Place:
    """One place a target was found: ``where`` (a workspace- or vault-relative path, or a table),
    ``kind`` (``source``, ``note``, ``report``, ``table``, or ``name``: the path itself holds it), how
    many matches, and their line numbers (1-based, in a file's text; empty otherwise)."""

    where: str
    kind: str
    count: int
    lines: tuple[int, ...] = ()


@dataclass
class Purge:
    """What ``purge_bytes`` did: the file's bytes (database and WAL) before and after, and how long it took."""

    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0


@dataclass
class StoreForget:
    """One store's part of a forget (``store``: ``archive`` or ``vault:<project>``): where the target
    was found (``places``), where it is still found after an apply (``left``: files the KB does not
    rewrite), and the byte purge (None on a dry run). ``matched``: for a pattern, the distinct strings
    it matched in the vault's notes, for the caller's tombstones (never shown in a reply to a user)."""

    store: str
    places: list[Place] = field(default_factory=list)
    left: list[Place] = field(default_factory=list)
    purge: Purge | None = None
    matched: set[str] = field(default_factory=set)


def file_bytes(path: Path) -> int:
    """The size of the database ``path`` and its WAL (0 for either that is not there)."""
    total = 0
    for each in (path, path.with_name(path.name + "-wal")):
        try:
            total += each.stat().st_size
        except OSError:
            continue
    return total


def index_places(conn: apsw.Connection, target: Target, kind: str = "source") -> list[Place]:
    """Every source of the index on ``conn`` whose chunks hold ``target``, in path order, with the
    lines of its matches. Reads every chunk (tens of megabytes for a large archive): a regular
    expression, not the FTS index, decides, so a text is found whatever the tokenizer."""
    found: dict[str, set[tuple[int, int]]] = {}
    for path, start_line, text in conn.execute(_CHUNKS_SQL):
        body = str(text)
        for match in target.finditer(body):  # non-empty matches, under the search's time limit
            before = body[: match.start()]
            line = int(start_line) + before.count("\n")
            column = match.start() - (before.rfind("\n") + 1)
            found.setdefault(str(path), set()).add((line, column))  # the overlap's copy lands on the same spot
    return [Place(path, kind, len(spots), tuple(sorted({line for line, _ in spots})))
            for path, spots in sorted(found.items())]


def named(paths: Iterable[str], target: Target) -> list[Place]:
    """The paths in ``paths`` whose own name holds ``target`` (kind ``name``): a forget rewrites
    contents, not names, so these stay and are answered (their ``where`` shown scrubbed, ``shown``)."""
    found = []
    for path in paths:
        count = sum(1 for _ in target.finditer(path))
        if count:
            found.append(Place(path, "name", count))
    return found


def shown(place: Place, target: Target, tombstone_id: str) -> Place:
    """``place`` as a reply may show it: its ``where`` with the marker in place of any match (a path
    or a note's name may hold the text itself)."""
    return replace(place, where=target.scrub(place.where, tombstone_id)[0])


def scrub_old_paths(conn: apsw.Connection, target: Target, tombstone_id: str) -> int:
    """The paths an index keeps of files it no longer indexes (``kb_paths``: a lifecycle row's first path;
    ``kb_retrieval_log``) that hold ``target``, scrubbed in one transaction on the writer ``conn``; how
    many rows. Their rows stay (ids, hashes, times). A current source's path is left: it would be added
    again by its next reindex (``named`` answers it); once the file is renamed, the same forget again
    scrubs its old path here."""
    changed = 0
    with conn:
        current = {str(path) for (path,) in conn.execute("SELECT path FROM kb_sources")}
        for table in ("kb_paths", "kb_retrieval_log"):
            for row_id, path in conn.execute(f"SELECT id, path FROM {table}").fetchall():
                new, count = target.scrub(str(path), tombstone_id)
                if not count or str(path) in current:
                    continue
                if table == "kb_paths" and conn.execute("SELECT 1 FROM kb_paths WHERE path = ?", (new,)).fetchone():
                    new = f"{new}#{row_id}"  # the path is unique: two old names that scrub alike stay two rows
                conn.execute(f"UPDATE {table} SET path = ? WHERE id = ?", (new, row_id))
                changed += 1
    return changed


def text_place(where: str, kind: str, text: str, target: Target) -> Place | None:
    """The place ``where`` when ``text`` (a file's whole text) holds ``target``: its matches and their lines."""
    starts = [m.start() for m in target.finditer(text)]
    if not starts:
        return None
    return Place(where, kind, len(starts), tuple(sorted({text.count("\n", 0, s) + 1 for s in starts})))


def fts5_tables(conn: apsw.Connection) -> list[str]:
    """The FTS5 tables of the database on ``conn`` (their shadow tables come with them)."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' "
        "AND lower(sql) LIKE '%using fts5%' ORDER BY name"
    )
    return [str(name) for (name,) in rows]


def _checkpoint(conn: apsw.Connection, path: Path) -> None:
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    if busy:
        raise Aborted(f"{path.name}: another connection kept reading an older snapshot; the WAL could not be "
                      "reset (run the same forget again)")


def purge_bytes(path: Path, *, busy_timeout_ms: int = PURGE_BUSY_TIMEOUT_MS) -> Purge:
    """Make the bytes of deleted rows leave the database ``path`` and its WAL (module docstring); nothing
    when there is no file. Raises Aborted when another connection holds an old snapshot past
    ``busy_timeout_ms`` (the purge can be run again), and what SQLite raises."""
    report = Purge(bytes_before=file_bytes(path))
    if not path.is_file():
        return report
    started = time.perf_counter()
    conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.setbusytimeout(busy_timeout_ms)
        conn.execute("PRAGMA secure_delete=ON").fetchall()
        for table in fts5_tables(conn):
            conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
        _checkpoint(conn, path)
        conn.execute("VACUUM")
        _checkpoint(conn, path)
    finally:
        close_quietly(conn)
    report.bytes_after = file_bytes(path)
    report.seconds = time.perf_counter() - started
    return report
