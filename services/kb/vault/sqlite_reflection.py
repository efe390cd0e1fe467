"""The SQLite vault store's rows of the weekly reflection (docs/concepts/vault.md "Weekly reflection"; the
PostgreSQL vault's are ``vault_pg.reflection``).

``kb_reflection``: one row (id 1) holding the claim (the run and until when), the plan of the run that
holds it, the watermark and the signatures of the clusters reviewed and left. ``kb_reflection_audit``:
the vault's reflection audit, one row per run and per revert, appended. ``kb_reflection_merges``: the
merge journal, one row per applied merge with what undoes it. A claim is taken in one ``BEGIN IMMEDIATE``
transaction, so two KB processes on one vault never both hold it. As ``sqlite_rows``' tables, each is made
by the first call that writes it; a read of a table not made yet finds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

import apsw

from services.kb.vault.store import MergeJournal, ReflectionAudit, ReflectionState

DDL: Final = """
CREATE TABLE IF NOT EXISTS kb_reflection(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    claim_run TEXT NOT NULL DEFAULT '', claim_expires REAL NOT NULL DEFAULT 0,
    plan TEXT NOT NULL DEFAULT '{}', watermark TEXT NOT NULL DEFAULT '', reviewed TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS kb_reflection_audit(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL, run_id TEXT NOT NULL, at REAL NOT NULL, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kb_reflection_merges(
    merge_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, run_id TEXT NOT NULL, at REAL NOT NULL, entry TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kb_reflection_merges_run ON kb_reflection_merges(run_id, seq);
"""


def _ensure(conn: apsw.Connection) -> None:
    conn.execute(DDL)
    conn.execute("INSERT OR IGNORE INTO kb_reflection(id) VALUES (1)")


def claim(conn: apsw.Connection, run_id: str, now: float, expires_at: float) -> str:
    conn.execute("BEGIN IMMEDIATE")
    try:
        _ensure(conn)
        holder, until = conn.execute("SELECT claim_run, claim_expires FROM kb_reflection WHERE id = 1").fetchone() or ("", 0)
        if holder and holder != run_id and float(str(until)) > now:
            conn.execute("ROLLBACK")
            return str(holder)
        plan_sql = "" if holder == run_id else ", plan = '{}'"
        conn.execute(f"UPDATE kb_reflection SET claim_run = ?, claim_expires = ?{plan_sql} WHERE id = 1",
                     (run_id, expires_at))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return ""


def state(conn: apsw.Connection) -> ReflectionState:
    try:
        row = conn.execute("SELECT claim_run, claim_expires, plan, watermark, reviewed FROM kb_reflection "
                           "WHERE id = 1").fetchone()
    except apsw.SQLError:  # no claim yet: the table is made by the first
        return ReflectionState()
    if row is None:
        return ReflectionState()
    run, until, plan, watermark, reviewed = row
    return ReflectionState(str(run), float(until), json.loads(str(plan)), str(watermark),
                           tuple(json.loads(str(reviewed))))


def set_plan(conn: apsw.Connection, run_id: str, plan: dict[str, dict[str, object]]) -> None:
    with conn:
        _ensure(conn)
        conn.execute("UPDATE kb_reflection SET plan = ? WHERE id = 1 AND claim_run = ?", (json.dumps(plan), run_id))


def _append(conn: apsw.Connection, record: ReflectionAudit) -> None:
    conn.execute("INSERT INTO kb_reflection_audit(kind, run_id, at, record) VALUES (?, ?, ?, ?)",
                 (record.kind, record.run_id, record.at, json.dumps(record.record)))


def finish(conn: apsw.Connection, run: ReflectionAudit, watermark: str | None, reviewed: Sequence[str]) -> None:
    with conn:
        _ensure(conn)
        _append(conn, run)
        if watermark is not None:
            conn.execute("UPDATE kb_reflection SET watermark = ? WHERE id = 1", (watermark,))
        conn.execute("UPDATE kb_reflection SET reviewed = ? WHERE id = 1", (json.dumps(list(reviewed)),))
        conn.execute("UPDATE kb_reflection SET claim_run = '', claim_expires = 0, plan = '{}' "
                     "WHERE id = 1 AND claim_run = ?", (run.run_id,))


def add_audit(conn: apsw.Connection, record: ReflectionAudit) -> None:
    with conn:
        _ensure(conn)
        _append(conn, record)


def audit(conn: apsw.Connection, limit: int, run_id: str = "") -> list[ReflectionAudit]:
    where, args = ("WHERE run_id = ?", (run_id, limit)) if run_id else ("", (limit,))
    try:
        rows = conn.execute(f"SELECT kind, run_id, at, record FROM kb_reflection_audit {where} "
                            "ORDER BY id DESC LIMIT ?", args).fetchall()
    except apsw.SQLError:  # no record yet
        return []
    return [ReflectionAudit(str(k), str(r), float(str(at)), json.loads(str(rec))) for k, r, at, rec in rows]


def journal(conn: apsw.Connection, merge: MergeJournal) -> None:
    with conn:
        _ensure(conn)
        seq = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM kb_reflection_merges").fetchone() or (1,)
        conn.execute("INSERT OR REPLACE INTO kb_reflection_merges VALUES (?, ?, ?, ?, ?)",
                     (merge.merge_id, seq[0], merge.run_id, merge.at, json.dumps(merge.entry)))


def drop(conn: apsw.Connection, merge_id: str) -> None:
    with conn:
        _ensure(conn)
        conn.execute("DELETE FROM kb_reflection_merges WHERE merge_id = ?", (merge_id,))


def merges(conn: apsw.Connection, run_id: str) -> list[MergeJournal]:
    try:
        rows = conn.execute("SELECT merge_id, run_id, at, entry FROM kb_reflection_merges WHERE run_id = ? "
                            "ORDER BY seq", (run_id,)).fetchall()
    except apsw.SQLError:  # no merge yet
        return []
    return [MergeJournal(str(m), str(r), float(str(at)), json.loads(str(e))) for m, r, at, e in rows]


def forget(conn: apsw.Connection, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
    """The matches in the journal's entries and the audit's records (``scrub``: a JSON document → the
    scrubbed document and the matches it replaced, ``vault.forget.scrub_json``), rewritten on ``apply``
    in one transaction."""
    total = 0
    changed: list[tuple[str, str, str, object]] = []
    for table, column, key in (("kb_reflection_merges", "entry", "merge_id"), ("kb_reflection_audit", "record", "id")):
        try:
            rows = conn.execute(f"SELECT {key}, {column} FROM {table}").fetchall()
        except apsw.SQLError:  # not made yet
            continue
        for row_id, raw in rows:
            new, count = scrub(str(raw))
            if count:
                total += count
                changed.append((table, column, new, row_id))
    if apply and changed:
        with conn:
            for table, column, new, row_id in changed:
                key = "merge_id" if table == "kb_reflection_merges" else "id"
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (new, row_id))
    return total
