"""Who wrote each shared note through the API (docs/concepts/vault.md "Shared vault", Listing the notes).

The vault's index keeps one ``kb_note_authors`` row per live name: the first write that
created the note and the latest write that changed it (a create, an update or a nightly
promotion), each as the agent it was written for, the caller's key name, the dream run
for a promotion, and the time. Rows are written by the KB in the same worker turn as the
note, under the vault's write lock; a retired note (``stale__<name>``) shares its live
name's row, so retiring and restoring keep it. A delete drops the row once neither the
note nor its retired twin is left. Notes put in ``notes/`` by hand have no row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import apsw

from services.kb.vault.names import live_name, retired_name
from services.kb.vault.retirement import note_file

AUTHORS_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_note_authors(
    name TEXT PRIMARY KEY,
    created_agent TEXT, created_key TEXT, created_run TEXT, created_at REAL,
    changed_agent TEXT NOT NULL, changed_key TEXT NOT NULL, changed_run TEXT NOT NULL, changed_at REAL NOT NULL
) WITHOUT ROWID;
"""
MAX_LOOKUP: Final = 500  # names per lookup (a page of ListSharedNotes)


@dataclass(frozen=True)
class Writer:
    """One write: for which agent, by which key (its name), in which dream run (or ""), when (epoch s)."""

    agent_id: str
    key: str
    run_id: str
    at: float


@dataclass(frozen=True)
class Authors:
    """A note's first write (None when it was created outside the API) and its latest."""

    created: Writer | None
    changed: Writer


def record(conn: apsw.Connection, name: str, writer: Writer, *, created: bool) -> None:
    """Record a write of note ``name`` (a live name): as its creation too when ``created``."""
    conn.execute(AUTHORS_DDL)
    w = (writer.agent_id, writer.key, writer.run_id, writer.at)
    if created:
        conn.execute("INSERT OR REPLACE INTO kb_note_authors VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (name, *w, *w))
        return
    conn.execute(
        "INSERT INTO kb_note_authors(name, changed_agent, changed_key, changed_run, changed_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET changed_agent = excluded.changed_agent, changed_key = excluded.changed_key, "
        "changed_run = excluded.changed_run, changed_at = excluded.changed_at",
        (name, *w),
    )


def forget_if_gone(conn: apsw.Connection, vault_dir: Path, name: str) -> None:
    """After a delete of ``name``: drop its row when neither the live note nor its twin is left."""
    live = live_name(name)
    if note_file(vault_dir, live).exists() or note_file(vault_dir, retired_name(live)).exists():
        return
    conn.execute(AUTHORS_DDL)
    conn.execute("DELETE FROM kb_note_authors WHERE name = ?", (live,))


def lookup(conn: apsw.Connection, names: Iterable[str]) -> dict[str, Authors]:
    """The rows of ``names`` (live or retired; at most ``MAX_LOOKUP``) by the name asked.
    ``conn`` may be read-only; an index without the table has no rows."""
    asked = {n: live_name(n) for n in names}
    lives = sorted(set(asked.values()))
    if not lives:
        return {}
    marks = ",".join("?" * len(lives))
    try:
        rows = conn.execute(f"SELECT * FROM kb_note_authors WHERE name IN ({marks})", lives).fetchall()
    except apsw.SQLError:  # no write recorded yet: the table is made by the first
        return {}
    found: dict[str, Authors] = {}
    for name, c_agent, c_key, c_run, c_at, agent, key, run, at in rows:
        created = None if c_at is None else Writer(str(c_agent), str(c_key), str(c_run), float(str(c_at)))
        found[str(name)] = Authors(created, Writer(str(agent), str(key), str(run), float(str(at))))
    return {n: found[live] for n, live in asked.items() if live in found}
