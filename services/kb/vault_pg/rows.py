"""The PostgreSQL vault store's rows beside the notes' text: authors, the retrieval log, the GC's lifecycle
and its day, the answers of promotion requests (docs/concepts/vault.md "PostgreSQL schema"; the SQLite store's are ``vault.sqlite_rows``).

Authors live on the note's row (``created_*`` with ``created_at``; ``changed_*`` with ``updated_at``), so a
record needs its note; a retired twin shares its live name's record, which a move carries to the row it
writes (``carry_authors``), and a name held only retired keeps its record on the retired row (where an
import records it). The retrieval log is folded into ``note_lifecycle`` by one statement that
deletes the rows it counts (``claim_day``; and ``fold_retrievals`` when the store's log reaches its bound),
so rows other hosts commit meanwhile wait for the next fold.
A promotion's answer is a ``promotions`` row keyed by (project, request id), inserted in the transaction
that wrote the note (``writing``), so the note and its answer land together or not at all.
Every function runs in the caller's transaction; times are epoch seconds in and out.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Final

from psycopg.types.json import Jsonb

from services.kb.archive.retrieval_log import KINDS, Retrieved
from services.kb.vault.names import live_name, name_from_path, retired_name
from services.kb.vault.store import Authors, Claim, NoteState, PromotionRecord, Writer
from services.kb.vault_pg.pool import Conn

_AUTHOR_COLUMNS: Final = (
    "name, retired, created_agent, created_key, created_run, extract(epoch FROM created_at), "
    "changed_agent, changed_key, changed_run, extract(epoch FROM updated_at)"
)
FOLD_SQL: Final = """
WITH gone AS (DELETE FROM retrieval_log WHERE project = %(project)s RETURNING name, at),
grouped AS (SELECT name, count(*) AS hits, max(at) AS latest FROM gone GROUP BY name),
folded AS (
    INSERT INTO note_lifecycle (project, name, last_retrieved, retrieval_count)
    SELECT %(project)s, name, latest, hits FROM grouped
    ON CONFLICT (project, name) DO UPDATE SET
        retrieval_count = note_lifecycle.retrieval_count + excluded.retrieval_count,
        last_retrieved = greatest(note_lifecycle.last_retrieved, excluded.last_retrieved)
)
SELECT coalesce(sum(hits), 0) FROM grouped
"""


def record_author(conn: Conn, project: str, name: str, writer: Writer, *, created: bool) -> None:
    values = (writer.agent_id, writer.key, writer.run_id, writer.at)
    created_sql = ", created_agent = %s, created_key = %s, created_run = %s, created_at = to_timestamp(%s)" if created else ""
    conn.execute(
        "UPDATE notes SET changed_agent = %s, changed_key = %s, changed_run = %s, updated_at = to_timestamp(%s)"
        f"{created_sql} WHERE project = %s AND name = %s AND retired = NOT EXISTS "
        "(SELECT 1 FROM notes AS live WHERE live.project = %s AND live.name = %s AND NOT live.retired)",
        (*values, *(values if created else ()), project, name, project, name))


def forget_author(conn: Conn, project: str, name: str) -> None:
    conn.execute(
        "UPDATE notes SET created_agent = NULL, created_key = NULL, created_run = NULL, changed_agent = NULL, "
        "changed_key = NULL, changed_run = NULL WHERE project = %s AND name = %s", (project, name))


def carry_authors(conn: Conn, project: str, source: tuple[str, bool], target: tuple[str, bool]) -> None:
    """Give row ``target`` (name, retired) the record of row ``source`` when both hold one live name and the
    target has none of its own."""
    if source[0] != target[0]:
        return
    conn.execute(
        "UPDATE notes AS t SET created_agent = f.created_agent, created_key = f.created_key, "
        "created_run = f.created_run, created_at = f.created_at, changed_agent = f.changed_agent, "
        "changed_key = f.changed_key, changed_run = f.changed_run FROM notes AS f "
        "WHERE f.project = %s AND f.name = %s AND f.retired = %s AND f.changed_agent IS NOT NULL "
        "AND t.project = f.project AND t.name = %s AND t.retired = %s AND t.changed_agent IS NULL",
        (project, *source, *target))


def authors(conn: Conn, project: str, names: list[str]) -> dict[str, Authors]:
    found: dict[str, Authors] = {}
    rows = conn.execute(
        f"SELECT {_AUTHOR_COLUMNS} FROM notes WHERE project = %s AND name = ANY(%s) AND changed_agent IS NOT NULL "
        "ORDER BY retired DESC", (project, names)).fetchall()
    for name, _, c_agent, c_key, c_run, c_at, agent, key, run, at in rows:  # the live row last: it wins
        created = None if c_agent is None else Writer(str(c_agent), str(c_key), str(c_run), float(c_at))
        found[str(name)] = Authors(created, Writer(str(agent), str(key), str(run), float(at)))
    return found


def log_retrievals(conn: Conn, project: str, hits: Iterable[Retrieved], kind: str, at: float) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown retrieval kind {kind!r}")
    named = ((name_from_path(hit.path), hit.entry_hash) for hit in hits if hit.entry_hash)
    rows = [(project, live_name(name), digest, at, kind) for name, digest in named if name is not None]
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO retrieval_log (project, name, entry_hash, at, kind) VALUES (%s, %s, %s, to_timestamp(%s), %s)",
            rows)
    return len(rows)


def logged_rows(conn: Conn, project: str) -> int:
    """The project's rows in the retrieval log (all of them are not folded yet: a fold deletes what it counts)."""
    row = conn.execute("SELECT count(*) FROM retrieval_log WHERE project = %s", (project,)).fetchone()
    return int(row[0]) if row else 0


def fold_retrievals(conn: Conn, project: str) -> int:
    """Fold the project's log now, outside a day's claim (the log's bound); the rows folded."""
    folded = conn.execute(FOLD_SQL, {"project": project}).fetchone()
    return int(folded[0]) if folded else 0


def claim_day(conn: Conn, project: str, day: str, started: str) -> Claim:
    inserted = conn.execute(
        "INSERT INTO vault_gc (project, day, claimed_by, last_report) VALUES (%s, %s, %s, to_jsonb(%s::text)) "
        "ON CONFLICT DO NOTHING RETURNING project", (project, day, socket.gethostname(), started)).fetchone()
    if inserted is None:
        row = conn.execute("SELECT day, last_report #>> '{}' FROM vault_gc WHERE project = %s FOR UPDATE",
                           (project,)).fetchone()
        if row is not None and row[0] == day:
            return Claim(str(row[1] or ""), 0)
        conn.execute(
            "UPDATE vault_gc SET day = %s, claimed_by = %s, claimed_at = now(), last_report = to_jsonb(%s::text) "
            "WHERE project = %s", (day, socket.gethostname(), started, project))
    return Claim(None, fold_retrievals(conn, project))


def lifecycle(conn: Conn, project: str) -> dict[str, NoteState]:
    rows = conn.execute(
        "SELECT name, extract(epoch FROM last_retrieved), retrieval_count, extract(epoch FROM retired_at) "
        "FROM note_lifecycle WHERE project = %s", (project,))
    return {str(name): NoteState(_epoch(last), int(count), _epoch(retired)) for name, last, count, retired in rows}


def _epoch(value: object) -> float | None:
    return None if value is None else float(str(value))


def set_retired(conn: Conn, project: str, name: str, at: float | None) -> None:
    conn.execute(
        "INSERT INTO note_lifecycle (project, name, retired_at) VALUES (%s, %s, to_timestamp(%s)) "
        "ON CONFLICT (project, name) DO UPDATE SET retired_at = excluded.retired_at", (project, name, at))


def finish_day(conn: Conn, project: str, summary: str) -> None:
    conn.execute("UPDATE vault_gc SET last_report = to_jsonb(%s::text) WHERE project = %s", (summary, project))


def promotion(conn: Conn, project: str, request_id: str) -> PromotionRecord | None:
    found = conn.execute(
        "SELECT agent_id, run_id, outcome, coalesce(note, ''), write, extract(epoch FROM promoted_at), "
        "extract(epoch FROM undone_at), coalesce(undo_outcome, '') FROM promotions "
        "WHERE project = %s AND request_id = %s", (project, request_id)).fetchone()
    if found is None:
        return None
    agent, run, outcome, note, write, at, undone_at, undo_outcome = found
    return PromotionRecord(request_id, str(agent), str(run), str(outcome), str(note),
                           None if write is None else dict(write), float(at), _epoch(undone_at), str(undo_outcome))


def record_promotion(conn: Conn, project: str, record: PromotionRecord) -> bool:
    return conn.execute(
        "INSERT INTO promotions (project, request_id, agent_id, run_id, outcome, note, write, promoted_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, to_timestamp(%s)) ON CONFLICT DO NOTHING",
        (project, record.request_id, record.agent_id, record.run_id, record.outcome, record.note or None,
         None if record.write is None else Jsonb(record.write), record.at)).rowcount > 0


def promotion_undone(conn: Conn, project: str, request_id: str, outcome: str, at: float) -> None:
    conn.execute("UPDATE promotions SET undone_at = to_timestamp(%s), undo_outcome = %s "
                 "WHERE project = %s AND request_id = %s", (at, outcome, project, request_id))


def forget_promotions(conn: Conn, project: str, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
    """The matches in the ``write`` of ``project``'s promotion records (``sqlite_rows.forget_promotions``),
    the records rewritten on ``apply`` (in the caller's transaction)."""
    rows = conn.execute("SELECT request_id, write::text FROM promotions WHERE project = %s AND write IS NOT NULL",
                        (project,)).fetchall()
    total = 0
    for request_id, raw in rows:
        new, count = scrub(str(raw))
        total += count
        if count and apply:
            conn.execute("UPDATE promotions SET write = %s::jsonb WHERE project = %s AND request_id = %s",
                         (new, project, request_id))
    return total


def rename_rows(conn: Conn, project: str, rename: Callable[[str], str | None], apply: bool) -> tuple[list[tuple[str, str]], int]:
    """A forget of text in note names in ``project`` (``VaultStore.forget_names``), in the caller's transaction:
    each note whose (live) name ``rename`` renames, both its rows (live and retired) renamed on ``apply``
    (their authors and versions kept), and the rows keyed by a name (lifecycle, retrieval log, the promotion
    records' note and their write's); the notes moved (API names) and the other rows renamed."""
    moved: list[tuple[str, str]] = []
    for name, retired in conn.execute("SELECT name, retired FROM notes WHERE project = %s ORDER BY name, retired",
                                      (project,)).fetchall():
        new = rename(str(name))
        if new is not None:
            moved.append((retired_name(str(name)) if retired else str(name), retired_name(new) if retired else new))
    changes: list[tuple[str, str, str, str]] = []
    for table, column in (("note_lifecycle", "name"), ("retrieval_log", "name"), ("promotions", "note")):
        rows = conn.execute(f"SELECT DISTINCT {column} FROM {table} WHERE project = %s AND {column} IS NOT NULL",
                            (project,)).fetchall()
        changes += [(table, column, str(old), new) for (old,) in rows if (new := rename(str(old))) is not None]
    writes = [(str(old), new) for (old,) in conn.execute(
        "SELECT DISTINCT write->>'note' FROM promotions WHERE project = %s AND write ? 'note'", (project,)).fetchall()
        if (new := rename(str(old))) is not None]
    if apply:
        for old, new in sorted({(live_name(o), live_name(n)) for o, n in moved}):
            conn.execute("UPDATE notes SET name = %s WHERE project = %s AND name = %s", (new, project, old))
        for table, column, old, new in changes:
            if table == "note_lifecycle":  # its key: a row already under the new name gives way
                conn.execute("DELETE FROM note_lifecycle WHERE project = %s AND name = %s", (project, new))
            conn.execute(f"UPDATE {table} SET {column} = %s WHERE project = %s AND {column} = %s", (new, project, old))
        for old, new in writes:
            conn.execute("UPDATE promotions SET write = jsonb_set(write, '{note}', to_jsonb(%s::text)) "
                         "WHERE project = %s AND write->>'note' = %s", (new, project, old))
    return moved, len(changes) + len(writes)
