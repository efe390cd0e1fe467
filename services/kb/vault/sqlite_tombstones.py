"""The SQLite vault store's tombstones (docs/concepts/forget.md "Shared tombstones across hosts"; the
PostgreSQL vault's are ``vault_pg.tombstones``).

``kb_tombstones``: one row per tombstone of a shared forget, kept after a lift (``lifted_at`` set) so that
``mark`` (how many rows, how many lifted) changes with every add and every lift. As ``sqlite_rows``' tables,
it is made by the first call that writes it; a read before finds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import apsw

from gateway.forgetting import SHARED_SCOPE, Tombstone

DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_tombstones(
    id TEXT PRIMARY KEY, digest TEXT NOT NULL, salt TEXT NOT NULL, lead TEXT NOT NULL DEFAULT '',
    words INTEGER NOT NULL, at TEXT NOT NULL, by TEXT NOT NULL DEFAULT '', places INTEGER NOT NULL DEFAULT 0,
    lifted_at TEXT NOT NULL DEFAULT ''
);
"""


def share(conn: apsw.Connection, rows: Sequence[Tombstone]) -> int:
    """Insert each tombstone not kept yet (by id); a known one gets its ``places``. How many were new."""
    new = 0
    with conn:
        conn.execute(DDL)
        for t in rows:
            if conn.execute("SELECT 1 FROM kb_tombstones WHERE id = ?", (t.id,)).fetchone():
                conn.execute("UPDATE kb_tombstones SET places = ? WHERE id = ?", (t.places, t.id))
                continue
            conn.execute("INSERT INTO kb_tombstones(id, digest, salt, lead, words, at, by, places) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (t.id, t.digest, t.salt, t.lead, t.words, t.at, t.by, t.places))
            new += 1
    return new


def lift(conn: apsw.Connection, tombstone_id: str, at: str) -> int:
    """Mark ``tombstone_id`` and its ``.N`` siblings lifted at ``at``; how many were held."""
    with conn:
        conn.execute(DDL)
        conn.execute("UPDATE kb_tombstones SET lifted_at = ? WHERE lifted_at = '' AND (id = ? OR substr(id, 1, ?) = ?)",
                     (at, tombstone_id, len(tombstone_id) + 1, tombstone_id + "."))
        lifted = int(conn.changes())
    return lifted


def held(conn: apsw.Connection, lifted: bool = False) -> list[Tombstone]:
    """The tombstones held (with ``lifted``: the lifted ones), oldest first."""
    try:
        rows = conn.execute("SELECT id, digest, words, at, by, places, lead, salt FROM kb_tombstones "
                            f"WHERE lifted_at {'<>' if lifted else '='} '' ORDER BY at, id").fetchall()
    except apsw.SQLError:  # no shared forget yet: the table is made by the first
        return []
    return [Tombstone(str(i), str(d), int(str(w)), SHARED_SCOPE, str(a), str(b), int(str(p)), str(ld), str(s))
            for i, d, w, a, b, p, ld, s in rows]


def mark(conn: apsw.Connection) -> tuple[int, int]:
    try:
        found = conn.execute("SELECT count(*), count(CASE WHEN lifted_at <> '' THEN 1 END) FROM kb_tombstones").fetchone()
    except apsw.SQLError:
        return (0, 0)
    return (int(str(found[0])), int(str(found[1]))) if found else (0, 0)
