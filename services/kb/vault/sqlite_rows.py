"""The SQLite vault store's rows beside the index: authors, the retrieval log, the GC's lifecycle and its day,
the answers of promotion requests (docs/concepts/vault.md "Shared vault", Listing the notes, The vault's GC
and Promotion requests).

``kb_note_authors``: one row per live name, the write that created the note and the latest that changed
it; a retired note shares its live name's row. ``kb_retrieval_log`` (the archive's table) is folded by
``claim_day`` into ``kb_note_lifecycle`` (per live name: last retrieved, count, when the GC retired it)
in the transaction that claims the day in ``kb_meta``, rows above ``kb_meta.vault_gc_folded_id`` only,
so nothing is counted twice; the rows folded are deleted. ``kb_promotions``: one row per promotion request
id that got an answer (the PostgreSQL vault's ``promotions`` table).

Each table is made by the first call that writes it (``CREATE TABLE IF NOT EXISTS``): that is how this
index adds a table without a schema-version change, which would drop and rebuild the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import json

import apsw

from services.kb.archive.retrieval_log import FOLD_AT_ROWS, KINDS, Retrieved, unfolded_rows
from services.kb.index.meta import get_meta, set_meta
from services.kb.vault.names import live_name, name_from_path, note_path
from services.kb.vault.store import Authors, Claim, NoteState, PromotionRecord, Writer

AUTHORS_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_note_authors(
    name TEXT PRIMARY KEY,
    created_agent TEXT, created_key TEXT, created_run TEXT, created_at REAL,
    changed_agent TEXT NOT NULL, changed_key TEXT NOT NULL, changed_run TEXT NOT NULL, changed_at REAL NOT NULL
) WITHOUT ROWID;
"""
LIFECYCLE_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_note_lifecycle(
    name TEXT PRIMARY KEY,
    last_retrieved REAL,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    retired_at REAL
) WITHOUT ROWID;
"""
PROMOTIONS_DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_promotions(
    request_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL, run_id TEXT NOT NULL, outcome TEXT NOT NULL, note TEXT NOT NULL,
    write TEXT, promoted_at REAL NOT NULL, undone_at REAL, undo_outcome TEXT
) WITHOUT ROWID;
"""
DAY_KEY: Final = "vault_gc_day"
LAST_KEY: Final = "vault_gc_last"
FOLDED_KEY: Final = "vault_gc_folded_id"


def record_author(conn: apsw.Connection, name: str, writer: Writer, *, created: bool) -> None:
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


def forget_author(conn: apsw.Connection, name: str) -> None:
    conn.execute(AUTHORS_DDL)
    conn.execute("DELETE FROM kb_note_authors WHERE name = ?", (name,))


def authors(conn: apsw.Connection, names: Iterable[str]) -> dict[str, Authors]:
    """The rows of live ``names``; ``conn`` may be read-only; an index without the table has no rows."""
    lives = sorted(set(names))
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
    return found


def log_retrievals(conn: apsw.Connection, hits: Iterable[Retrieved], kind: str, at: float) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown retrieval kind {kind!r}")
    rows = [(hit.entry_hash, hit.path, at, kind) for hit in hits if hit.entry_hash]
    with conn:
        conn.executemany("INSERT INTO kb_retrieval_log(entry_hash, path, at, kind) VALUES (?, ?, ?, ?)", rows)
    if unfolded_rows(conn) >= FOLD_AT_ROWS:  # the log's bound, as the recorder keeps it (``retrieval_log``)
        fold_retrievals(conn)
    return len(rows)


def _fold(conn: apsw.Connection) -> int:
    """Fold new log rows into the lifecycle rows by live name; the rows folded (in the caller's transaction)."""
    last = int(get_meta(conn, FOLDED_KEY) or 0)
    groups = conn.execute(
        "SELECT path, count(*), max(at), max(id) FROM kb_retrieval_log WHERE id > ? GROUP BY path", (last,)
    ).fetchall()
    by_name: dict[str, tuple[int, float]] = {}
    newest, folded = last, 0
    for path, count, at, max_id in groups:
        newest = max(newest, int(str(max_id)))
        name = name_from_path(str(path))
        if name is None:
            continue
        seen, latest = by_name.get(live_name(name), (0, 0.0))
        by_name[live_name(name)] = (seen + int(str(count)), max(latest, float(str(at))))
        folded += int(str(count))
    conn.executemany(
        "INSERT INTO kb_note_lifecycle(name, last_retrieved, retrieval_count) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET retrieval_count = retrieval_count + excluded.retrieval_count, "
        "last_retrieved = max(coalesce(last_retrieved, 0), excluded.last_retrieved)",
        [(name, latest, seen) for name, (seen, latest) in sorted(by_name.items())],
    )
    set_meta(conn, FOLDED_KEY, str(newest))
    # Folded rows are counted for good (the archive's fold says why they go).
    conn.execute("DELETE FROM kb_retrieval_log WHERE id <= ?", (newest,))
    return folded


def fold_retrievals(conn: apsw.Connection) -> int:
    """Fold the log now, outside a day's claim (the recorder's bound, ``retrieval_log``); the rows folded."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(LIFECYCLE_DDL)
        folded = _fold(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return folded


def claim_day(conn: apsw.Connection, day: str, started: str) -> Claim:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(LIFECYCLE_DDL)
        if get_meta(conn, DAY_KEY) == day:
            summary = get_meta(conn, LAST_KEY) or ""
            conn.execute("ROLLBACK")
            return Claim(summary, 0)
        set_meta(conn, DAY_KEY, day)
        set_meta(conn, LAST_KEY, started)
        folded = _fold(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return Claim(None, folded)


def lifecycle(conn: apsw.Connection) -> dict[str, NoteState]:
    """Every row; ``conn`` may be read-only (an export's); an index without the table has no rows."""
    try:
        rows = list(conn.execute("SELECT name, last_retrieved, retrieval_count, retired_at FROM kb_note_lifecycle"))
    except apsw.SQLError:  # the table is made by the GC's first run or the first retirement
        return {}
    return {str(n): NoteState(last, int(count), retired) for n, last, count, retired in rows}


def set_retired(conn: apsw.Connection, name: str, at: float | None) -> None:
    with conn:
        conn.execute(LIFECYCLE_DDL)
        conn.execute(
            "INSERT INTO kb_note_lifecycle(name, retired_at) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET retired_at = excluded.retired_at",
            (name, at),
        )


def finish_day(conn: apsw.Connection, summary: str) -> None:
    with conn:
        set_meta(conn, LAST_KEY, summary)


def promotion(conn: apsw.Connection, request_id: str) -> PromotionRecord | None:
    """``request_id``'s row; ``conn`` may be read-only; an index without the table has none."""
    try:
        rows = conn.execute("SELECT agent_id, run_id, outcome, note, write, promoted_at, undone_at, undo_outcome "
                            "FROM kb_promotions WHERE request_id = ?", (request_id,)).fetchall()
    except apsw.SQLError:  # the table is made by the first promotion recorded
        return None
    if not rows:
        return None
    agent, run, outcome, note, write, at, undone_at, undo_outcome = rows[0]
    return PromotionRecord(request_id, str(agent), str(run), str(outcome), str(note),
                           None if write is None else json.loads(str(write)), float(str(at)),
                           None if undone_at is None else float(str(undone_at)), str(undo_outcome or ""))


def record_promotion(conn: apsw.Connection, record: PromotionRecord) -> bool:
    with conn:
        conn.execute(PROMOTIONS_DDL)
        conn.execute(
            "INSERT INTO kb_promotions VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL) ON CONFLICT(request_id) DO NOTHING",
            (record.request_id, record.agent_id, record.run_id, record.outcome, record.note,
             None if record.write is None else json.dumps(record.write), record.at))
        added = conn.changes() > 0
    return added


def promotion_undone(conn: apsw.Connection, request_id: str, outcome: str, at: float) -> None:
    with conn:
        conn.execute(PROMOTIONS_DDL)
        conn.execute("UPDATE kb_promotions SET undone_at = ?, undo_outcome = ? WHERE request_id = ?",
                     (at, outcome, request_id))


def forget_promotions(conn: apsw.Connection, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
    """The matches in the ``write`` of every promotion record (``scrub``: a write's JSON → the scrubbed
    JSON and the matches it replaced, ``vault.forget.scrub_write``), the records rewritten on ``apply``
    in one transaction."""
    try:
        rows = conn.execute("SELECT request_id, write FROM kb_promotions WHERE write IS NOT NULL").fetchall()
    except apsw.SQLError:  # no promotion recorded yet: the table is made by the first
        return 0
    total = 0
    changed = []
    for request_id, raw in rows:
        new, count = scrub(str(raw))
        if count:
            total += count
            changed.append((new, request_id))
    if apply and changed:
        with conn:
            conn.executemany("UPDATE kb_promotions SET write = ? WHERE request_id = ?", changed)
    return total


def rename_rows(conn: apsw.Connection, rename: Callable[[str], str | None], apply: bool) -> int:
    """The rows keyed by a note name that ``rename`` renames (``VaultStore.forget_names``): authors and
    lifecycle by name, the retrieval log by path, promotion records by ``note`` and their write's ``note``;
    rewritten on ``apply`` in one transaction (a row already under the new name is replaced); how many."""
    def path_of(path: str) -> str | None:
        name = name_from_path(path)
        new = rename(name) if name is not None else None
        return None if new is None else note_path(new)

    def write_of(raw: str) -> str | None:
        write = json.loads(raw)
        new = rename(str(write.get("note", "")))
        if new is None:
            return None
        write["note"] = new
        return json.dumps(write)

    columns = (("kb_note_authors", "name", rename), ("kb_note_lifecycle", "name", rename),
               ("kb_retrieval_log", "path", path_of), ("kb_promotions", "note", rename), ("kb_promotions", "write", write_of))
    changes: list[tuple[str, str, str, str]] = []
    for table, column, new_of in columns:
        try:
            rows = conn.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL").fetchall()
        except apsw.SQLError:  # the table is made by its first write
            continue
        changes += [(table, column, str(old), new) for (old,) in rows if (new := new_of(str(old))) is not None]
    if apply and changes:
        with conn:
            for table, column, old, new in changes:
                conn.execute(f"UPDATE OR REPLACE {table} SET {column} = ? WHERE {column} = ?", (new, old))
    return len(changes)
