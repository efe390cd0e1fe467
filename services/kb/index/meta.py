"""The ``kb_meta`` key-value store of an index (docs in ``schema``), and whether a table exists."""

from __future__ import annotations

import apsw


def table_exists(conn: apsw.Connection, name: str) -> bool:
    """Whether ``conn``'s main database has a table, view or index called ``name``."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None


def get_meta(conn: apsw.Connection, key: str) -> str | None:
    """The ``kb_meta`` value of ``key``, or None."""
    row = conn.execute("SELECT value FROM kb_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: apsw.Connection, key: str, value: str) -> None:
    """Store ``key`` = ``value`` in ``kb_meta`` (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO kb_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def generation(conn: apsw.Connection) -> int:
    """The index generation: 0 before the first refresh that indexed anything."""
    value = get_meta(conn, "generation")
    return int(value) if value is not None else 0
