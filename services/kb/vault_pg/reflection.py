"""The PostgreSQL vault store's rows of the weekly reflection (docs/concepts/vault.md "Weekly reflection" and
"PostgreSQL schema"; the SQLite store's are ``vault.sqlite_reflection``).

``vault_reflection``: one row per vault (the claim, the plan, the watermark, the reviewed clusters); a
claim locks it (``FOR UPDATE``), so of two hosts claiming at once one waits and then finds the other's
claim. ``reflection_audit``: one row per run and per revert. ``reflection_merges``: the merge journal.
Every function runs in the caller's transaction; times are epoch seconds in and out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg.types.json import Jsonb

from services.kb.vault.store import MergeJournal, ReflectionAudit, ReflectionState
from services.kb.vault_pg.pool import Conn


def _row(conn: Conn, project: str) -> None:
    conn.execute("INSERT INTO vault_reflection (project) VALUES (%s) ON CONFLICT DO NOTHING", (project,))


def claim(conn: Conn, project: str, run_id: str, now: float, expires_at: float) -> str:
    _row(conn, project)
    holder, until = conn.execute(
        "SELECT claim_run, extract(epoch FROM claim_expires) FROM vault_reflection WHERE project = %s FOR UPDATE",
        (project,)).fetchone() or ("", 0.0)
    if holder and holder != run_id and float(until) > now:
        return str(holder)
    conn.execute(
        "UPDATE vault_reflection SET claim_run = %s, claim_expires = to_timestamp(%s), "
        "plan = CASE WHEN claim_run = %s THEN plan ELSE '{}'::jsonb END WHERE project = %s",
        (run_id, expires_at, run_id, project))
    return ""


def state(conn: Conn, project: str) -> ReflectionState:
    found = conn.execute(
        "SELECT claim_run, extract(epoch FROM claim_expires), plan, watermark, reviewed FROM vault_reflection "
        "WHERE project = %s", (project,)).fetchone()
    if found is None:
        return ReflectionState()
    run, until, plan, watermark, reviewed = found
    return ReflectionState(str(run), float(until), dict(plan), str(watermark), tuple(reviewed))


def set_plan(conn: Conn, project: str, run_id: str, plan: dict[str, dict[str, object]]) -> None:
    conn.execute("UPDATE vault_reflection SET plan = %s WHERE project = %s AND claim_run = %s",
                 (Jsonb(plan), project, run_id))


def add_audit(conn: Conn, project: str, record: ReflectionAudit) -> None:
    conn.execute("INSERT INTO reflection_audit (project, kind, run_id, at, record) "
                 "VALUES (%s, %s, %s, to_timestamp(%s), %s)",
                 (project, record.kind, record.run_id, record.at, Jsonb(record.record)))


def finish(conn: Conn, project: str, run: ReflectionAudit, watermark: str | None, reviewed: Sequence[str]) -> None:
    _row(conn, project)
    add_audit(conn, project, run)
    conn.execute(
        "UPDATE vault_reflection SET watermark = coalesce(%s, watermark), reviewed = %s, "
        "claim_run = CASE WHEN claim_run = %s THEN '' ELSE claim_run END, "
        "claim_expires = CASE WHEN claim_run = %s THEN 'epoch' ELSE claim_expires END, "
        "plan = CASE WHEN claim_run = %s THEN '{}'::jsonb ELSE plan END WHERE project = %s",
        (watermark, Jsonb(list(reviewed)), run.run_id, run.run_id, run.run_id, project))


def audit(conn: Conn, project: str, limit: int, run_id: str = "") -> list[ReflectionAudit]:
    where, args = ("AND run_id = %s", (project, run_id, limit)) if run_id else ("", (project, limit))
    rows = conn.execute(
        f"SELECT kind, run_id, extract(epoch FROM at), record FROM reflection_audit WHERE project = %s {where} "
        "ORDER BY id DESC LIMIT %s", args).fetchall()
    return [ReflectionAudit(str(k), str(r), float(at), dict(rec)) for k, r, at, rec in rows]


def journal(conn: Conn, project: str, merge: MergeJournal) -> None:
    conn.execute(
        "INSERT INTO reflection_merges (project, merge_id, run_id, at, entry) VALUES (%s, %s, %s, to_timestamp(%s), %s) "
        "ON CONFLICT (project, merge_id) DO UPDATE SET run_id = excluded.run_id, at = excluded.at, entry = excluded.entry",
        (project, merge.merge_id, merge.run_id, merge.at, Jsonb(merge.entry)))


def drop(conn: Conn, project: str, merge_id: str) -> None:
    conn.execute("DELETE FROM reflection_merges WHERE project = %s AND merge_id = %s", (project, merge_id))


def merges(conn: Conn, project: str, run_id: str) -> list[MergeJournal]:
    rows = conn.execute(
        "SELECT merge_id, run_id, extract(epoch FROM at), entry FROM reflection_merges "
        "WHERE project = %s AND run_id = %s ORDER BY seq", (project, run_id)).fetchall()
    return [MergeJournal(str(m), str(r), float(at), dict(e)) for m, r, at, e in rows]


def forget(conn: Conn, project: str, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
    """The matches in ``project``'s journal entries and audit records (``sqlite_reflection.forget``), the
    rows rewritten on ``apply`` (in the caller's transaction)."""
    total = 0
    for table, column, key in (("reflection_merges", "entry", "merge_id"), ("reflection_audit", "record", "id")):
        rows = conn.execute(f"SELECT {key}, {column}::text FROM {table} WHERE project = %s", (project,)).fetchall()
        for row_id, raw in rows:
            new, count = scrub(str(raw))
            total += count
            if count and apply:
                conn.execute(f"UPDATE {table} SET {column} = %s::jsonb WHERE project = %s AND {key} = %s",
                             (new, project, row_id))
    return total
