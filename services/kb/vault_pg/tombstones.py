"""The PostgreSQL vault store's tombstones (docs/concepts/forget.md "Shared tombstones across hosts"; the
SQLite store's are ``vault.sqlite_tombstones``).

``vault_tombstones``: one row per tombstone of a shared forget, kept after a lift (``lifted_at`` set) so that
``mark`` (how many rows, how many lifted) changes with every add and every lift. Every function runs in the
caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.forgetting import SHARED_SCOPE, Tombstone
from services.kb.vault_pg.pool import Conn


def share(conn: Conn, project: str, rows: Sequence[Tombstone]) -> int:
    """Insert each tombstone not kept yet (by id); a known one gets its ``places``. How many were new."""
    new = 0
    for t in rows:
        found = conn.execute(
            "INSERT INTO vault_tombstones (project, id, digest, salt, lead, words, at, by, places) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, id) DO UPDATE SET places = excluded.places "
            "RETURNING (xmax = 0)", (project, t.id, t.digest, t.salt, t.lead, t.words, t.at, t.by, t.places)).fetchone()
        new += 1 if found and found[0] else 0
    return new


def lift(conn: Conn, project: str, tombstone_id: str, at: str) -> int:
    """Mark ``tombstone_id`` and its ``.N`` siblings lifted at ``at``; how many were held."""
    cur = conn.execute(
        "UPDATE vault_tombstones SET lifted_at = %s WHERE project = %s AND lifted_at = '' "
        "AND (id = %s OR starts_with(id, %s))", (at, project, tombstone_id, tombstone_id + "."))
    return cur.rowcount


def held(conn: Conn, project: str, lifted: bool = False) -> list[Tombstone]:
    """The tombstones held (with ``lifted``: the lifted ones), oldest first."""
    rows = conn.execute(
        "SELECT id, digest, words, at, by, places, lead, salt FROM vault_tombstones "
        f"WHERE project = %s AND lifted_at {'<>' if lifted else '='} '' ORDER BY at, id", (project,)).fetchall()
    return [Tombstone(str(i), str(d), int(w), SHARED_SCOPE, str(a), str(b), int(p), str(ld), str(s))
            for i, d, w, a, b, p, ld, s in rows]


def mark(conn: Conn, project: str) -> tuple[int, int]:
    found = conn.execute("SELECT count(*), count(*) FILTER (WHERE lifted_at <> '') FROM vault_tombstones "
                         "WHERE project = %s", (project,)).fetchone()
    return (int(found[0]), int(found[1])) if found else (0, 0)
