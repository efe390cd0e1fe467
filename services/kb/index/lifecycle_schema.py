"""The lifecycle tables of an index (``kb_paths``, ``kb_lifecycle`` and the ``kb_entry_lifecycle`` view;
``schema``'s docstring describes them) and the move of the table layout before version 5 into them."""

from __future__ import annotations

from typing import Final

import apsw

from services.kb.index.meta import set_meta, table_exists

LIFECYCLE_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_paths(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS kb_lifecycle(
    entry_hash BLOB PRIMARY KEY,
    path_id INTEGER NOT NULL,
    first_seen REAL NOT NULL,
    last_retrieved REAL,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    supersedes_key TEXT,
    invalid_at REAL,
    restored_at REAL
) WITHOUT ROWID;
"""

# The hex text of a ``kb_lifecycle`` key ``{0}`` (``lifecycle_key`` undone).
HASH_TEXT_SQL: Final = "CASE WHEN typeof({0}) = 'blob' THEN lower(hex({0})) ELSE {0} END"
# ``lifecycle_key`` in SQL, of the text ``{0}``.
HASH_KEY_SQL: Final = "CASE WHEN length({0}) = 64 AND {0} = lower({0}) AND unhex({0}) IS NOT NULL THEN unhex({0}) ELSE {0} END"

_LIFECYCLE_VIEW: Final = (
    "CREATE VIEW IF NOT EXISTS kb_entry_lifecycle(entry_hash, path, first_seen, last_retrieved, retrieval_count, "
    "supersedes_key, invalid_at, restored_at) AS SELECT " + HASH_TEXT_SQL.format("l.entry_hash") + ", p.path, "
    "l.first_seen, l.last_retrieved, l.retrieval_count, l.supersedes_key, l.invalid_at, l.restored_at "
    "FROM kb_lifecycle AS l JOIN kb_paths AS p ON p.id = l.path_id"
)
_LIFECYCLE_COLUMNS: Final = "first_seen, last_retrieved, retrieval_count, supersedes_key, invalid_at"


def ensure_lifecycle(conn: apsw.Connection) -> None:
    """Create ``kb_lifecycle`` if it is missing, and then flag a backfill.

    The next refresh sees ``lifecycle_backfill`` in ``kb_meta`` and writes rows for
    every stored source, first seen at the source's stored mtime, so old sources keep their age.
    A ``kb_entry_lifecycle`` *table* (the layout before version 5) is first moved
    into ``kb_lifecycle`` row for row (``_move_old_lifecycle``), so nothing needs a
    backfill. Runs inside the caller's transaction.
    """
    row = conn.execute("SELECT type FROM sqlite_master WHERE name = 'kb_entry_lifecycle'").fetchone()
    kind = None if row is None else str(row[0])
    if kind == "table":
        _move_old_lifecycle(conn)
    elif not table_exists(conn, "kb_lifecycle"):
        conn.execute(LIFECYCLE_DDL)
        if table_exists(conn, "kb_meta"):
            set_meta(conn, "lifecycle_backfill", "1")
        if table_exists(conn, "kb_sources"):
            # The stored entries name their digests by prefixes the new table cannot resolve:
            # every source is read again (as changed), and its rows written at its mtime.
            conn.execute("UPDATE kb_sources SET size = -1, content_hash = ''")
    elif kind == "view":
        return
    conn.execute(_LIFECYCLE_VIEW)


def _move_old_lifecycle(conn: apsw.Connection) -> None:
    """Copy the old ``kb_entry_lifecycle`` table into ``kb_paths`` and ``kb_lifecycle`` and drop it."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(kb_entry_lifecycle)")}
    restored = "o.restored_at" if "restored_at" in columns else "NULL"
    conn.execute(LIFECYCLE_DDL)
    conn.execute("INSERT OR IGNORE INTO kb_paths(path) SELECT DISTINCT path FROM kb_entry_lifecycle ORDER BY path")
    conn.execute(
        f"INSERT OR IGNORE INTO kb_lifecycle(entry_hash, path_id, {_LIFECYCLE_COLUMNS}, restored_at) "
        f"SELECT {HASH_KEY_SQL.format('o.entry_hash')}, p.id, "
        + ", ".join(f"o.{c}" for c in _LIFECYCLE_COLUMNS.split(", "))
        + f", {restored} FROM kb_entry_lifecycle AS o JOIN kb_paths AS p ON p.path = o.path ORDER BY 1"
    )
    conn.execute("DROP TABLE kb_entry_lifecycle")
