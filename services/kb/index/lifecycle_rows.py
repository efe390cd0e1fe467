"""What the staleness GC reads from and records in an archive (docs/concepts/staleness.md "Staleness GC").

The dreaming process never opens a ``kb.sqlite``: it asks the KB, which answers
from here.

- ``list_entries``: every entry of every indexed source (MEMORY.md, USER.md,
  ``memory/**``) with its place (source path, 1-based inclusive lines as the
  indexer numbers them: ``\\n`` line ends, the frontmatter counted), its hash and
  importance, the source's provenance and content hash (SHA-256 of its bytes as
  indexed, so a reader can tell the file did not change since), and the entry's
  lifecycle row. Paged by whole sources in path order: a page holds the sources
  after ``after`` until it has at least ``page_size`` entries (one source larger
  than that is never split), and says the last path it holds (the next page's
  ``after``), or "" when it is the last page. An entry without a lifecycle row
  (the row of a table just created, before its backfill) reads as first seen at
  its source's stored mtime.
- ``lifecycle_of``: the places and lifecycle rows of given hashes, whether or not
  they stand in a source now (an entry taken out of every file keeps its row).
- ``update_lifecycle``: what the GC decided, in one transaction: the
  ``supersedes_key`` an entry names, ``invalid_at`` when it was moved to
  ``memory/archive/stale.md``, and on a restore ``invalid_at`` cleared and
  ``restored_at`` set. Ages are never touched: ``first_seen``,
  ``last_retrieved`` and ``retrieval_count`` belong to the indexer and the fold.
  Hashes with no lifecycle row are counted as missing and left alone.

Times are Unix epoch seconds (REAL); None where the row has none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import apsw

from gateway.errors import InvalidArgument
from services.kb.index.schema import (
    ENTRY_DIGEST_SQL,
    ENTRY_END_SQL,
    ENTRY_FIRST_SQL,
    ENTRY_HASH_SQL,
    ENTRY_IMPORTANCE_SQL,
    ENTRY_ROWS_SQL,
    ENTRY_START_SQL,
    PREFIX_BYTES,
    lifecycle_key,
)

MAX_PAGE: Final = 20_000
DEFAULT_PAGE: Final = 5_000
MAX_HASHES: Final = 1_000
MAX_UPDATES: Final = 20_000


@dataclass(frozen=True)
class Lifecycle:
    """One ``kb_entry_lifecycle`` row (``first_path``: the path it was first seen under)."""

    entry_hash: str
    first_path: str
    first_seen: float
    last_retrieved: float | None
    retrieval_count: int
    supersedes_key: str | None
    invalid_at: float | None
    restored_at: float | None


@dataclass(frozen=True)
class EntryRow:
    """One entry where it stands now, with its lifecycle."""

    path: str
    start_line: int
    end_line: int
    importance: int
    provenance: str
    life: Lifecycle


@dataclass(frozen=True)
class SourceRow:
    path: str
    content_hash: str
    provenance: str


@dataclass(frozen=True)
class Page:
    entries: list[EntryRow]
    sources: list[SourceRow]
    last_path: str  # "" on the last page


@dataclass(frozen=True)
class Update:
    """What to record for one entry. ``supersedes_key``: None leaves it, "" clears it.
    ``invalid_at``: set when given. ``clear_invalid``: clear invalid_at (a restore).
    ``restored_at``: set when given."""

    entry_hash: str
    supersedes_key: str | None = None
    invalid_at: float | None = None
    clear_invalid: bool = False
    restored_at: float | None = None


_HASH = re.compile(r"^[0-9a-f]{64}$")


def check_hashes(hashes: Sequence[str], limit: int, name: str) -> list[str]:
    """``hashes`` when each is an entry hash (64 lowercase hex digits) and there are at most
    ``limit``. Raises InvalidArgument naming ``name`` and the first bad one."""
    out = list(hashes)
    if len(out) > limit:
        raise InvalidArgument(f"{name}: {len(out)} hashes; at most {limit} in one call")
    for value in out:
        if not _HASH.fullmatch(value):
            raise InvalidArgument(f"{name}: {value[:70]!r} is not an entry hash (64 hex digits)")
    return out


# A ``kb_lifecycle AS l`` row and its first path (``LEFT JOIN kb_paths AS p ON p.id = l.path_id``), as ``_life`` reads them.
_LIFE_COLUMNS: Final = "p.path, l.first_seen, l.last_retrieved, l.retrieval_count, l.supersedes_key, l.invalid_at, l.restored_at"


def _life(entry_hash: str, fallback_path: str, fallback_seen: float, row: Sequence[object]) -> Lifecycle:
    first_path, first_seen, last, count, key, invalid, restored = row
    return Lifecycle(
        entry_hash=entry_hash,
        first_path=str(first_path) if first_path is not None else fallback_path,
        first_seen=float(str(first_seen)) if first_seen is not None else fallback_seen,
        last_retrieved=float(str(last)) if last is not None else None,
        retrieval_count=int(str(count)) if count is not None else 0,
        supersedes_key=str(key) if key is not None else None,
        invalid_at=float(str(invalid)) if invalid is not None else None,
        restored_at=float(str(restored)) if restored is not None else None,
    )


def _source_entries(conn: apsw.Connection, sql: str, params: tuple[object, ...], now: float) -> Iterable[tuple[SourceRow, list[EntryRow]]]:
    """Per source selected by ``sql`` (id, path, content_hash, provenance, mtime_ns), its entries."""
    for source_id, path, content_hash, provenance, mtime_ns in conn.execute(sql, params).fetchall():
        source = SourceRow(str(path), str(content_hash), str(provenance))
        seen = min(int(str(mtime_ns)) / 1e9, now)
        rows = conn.execute(
            f"SELECT {ENTRY_START_SQL}, {ENTRY_END_SQL}, {ENTRY_HASH_SQL}, {ENTRY_IMPORTANCE_SQL}, {_LIFE_COLUMNS} "
            f"FROM kb_source_entries AS e CROSS JOIN {ENTRY_ROWS_SQL} "
            f"LEFT JOIN kb_lifecycle AS l ON l.entry_hash = {ENTRY_DIGEST_SQL} LEFT JOIN kb_paths AS p ON p.id = l.path_id "
            f"WHERE e.source_id = ? AND {ENTRY_FIRST_SQL} ORDER BY j.key",
            (source_id,),
        ).fetchall()
        entries = [
            EntryRow(source.path, int(str(r[0])), int(str(r[1])), int(str(r[3])), source.provenance,
                     _life(str(r[2]), source.path, seen, r[4:]))
            for r in rows
            if r[2]  # an entry whose stored prefix names no single lifecycle row is left out (``schema.RESOLVE_SQL``)
        ]
        yield source, entries


def list_entries(conn: apsw.Connection, after: str, page_size: int, now: float) -> Page:
    """One page of entries (module docstring). ``page_size`` is clamped to 1..MAX_PAGE; ``now``
    bounds the fallback first-seen time. One read transaction, so the page is consistent."""
    size = min(max(page_size or DEFAULT_PAGE, 1), MAX_PAGE)
    entries: list[EntryRow] = []
    sources: list[SourceRow] = []
    last = ""
    with conn:  # a read transaction: every statement sees one snapshot
        selected = _source_entries(
            conn, "SELECT id, path, content_hash, provenance, mtime_ns FROM kb_sources WHERE path > ? ORDER BY path",
            (after,), now,
        )
        for source, rows in selected:
            if len(entries) >= size:
                last = sources[-1].path
                break
            sources.append(source)
            entries += rows
    return Page(entries, sources, last)


def lifecycle_of(conn: apsw.Connection, hashes: Sequence[str], now: float) -> tuple[list[EntryRow], list[Lifecycle]]:
    """``(places, rows)`` of ``hashes``: every place each stands in now, and each one's lifecycle
    row (hashes without a row have none)."""
    wanted = list(dict.fromkeys(hashes))
    if not wanted:
        return [], []
    places: list[EntryRow] = []
    with conn:
        # Candidates: the sources whose packed prefixes hold a wanted one's anywhere (a match
        # across two prefixes is a false candidate that the filter below drops).
        ids = conn.execute(
            "SELECT DISTINCT e.source_id FROM kb_source_entries AS e CROSS JOIN json_each(?) AS w "
            f"WHERE instr(e.hashes, substr(unhex(w.value), 1, {PREFIX_BYTES})) > 0",
            (json.dumps(wanted),),
        ).fetchall()
        if ids:
            selected = _source_entries(
                conn, "SELECT id, path, content_hash, provenance, mtime_ns FROM kb_sources "
                "WHERE id IN (SELECT value FROM json_each(?)) ORDER BY path",
                (json.dumps([int(str(r[0])) for r in ids]),), now,
            )
            keep = set(wanted)
            for _, rows in selected:
                places += [row for row in rows if row.life.entry_hash in keep]
        keys = {lifecycle_key(h): h for h in wanted}
        found = conn.execute(
            f"SELECT l.entry_hash, {_LIFE_COLUMNS} FROM kb_lifecycle AS l JOIN kb_paths AS p ON p.id = l.path_id "
            f"WHERE l.entry_hash IN ({','.join('?' * len(keys))})",
            list(keys),
        ).fetchall()
    lives = sorted((_life(keys[_key(r[0])], str(r[1]), 0.0, r[1:]) for r in found), key=lambda life: life.entry_hash)
    return places, lives


def _key(value: object) -> bytes | str:
    """A ``kb_lifecycle.entry_hash`` as read back (``schema.lifecycle_key``: raw bytes or text)."""
    return value if isinstance(value, bytes) else str(value)


def update_lifecycle(conn: apsw.Connection, updates: Sequence[Update]) -> tuple[int, list[str]]:
    """Record ``updates`` in one ``BEGIN IMMEDIATE`` transaction on the index's write connection.
    Returns ``(rows updated, hashes with no lifecycle row)``."""
    updated = 0
    missing: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for u in updates:
            sets: list[str] = []
            params: list[object] = []
            if u.supersedes_key is not None:
                sets.append("supersedes_key = ?")
                params.append(u.supersedes_key or None)
            if u.clear_invalid:
                sets.append("invalid_at = NULL")
            elif u.invalid_at is not None:
                sets.append("invalid_at = ?")
                params.append(u.invalid_at)
            if u.restored_at is not None:
                sets.append("restored_at = ?")
                params.append(u.restored_at)
            if not sets:
                continue
            conn.execute(f"UPDATE kb_lifecycle SET {', '.join(sets)} WHERE entry_hash = ?", (*params, lifecycle_key(u.entry_hash)))
            if conn.changes():
                updated += 1
            else:
                missing.append(u.entry_hash)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return updated, missing
