"""A forget in a PostgreSQL vault (docs/concepts/vault.md "Forget"): the notes, promotion records and the
weekly reflection's journal and audit as
the SQLite vault does them (``vault.forget``), then the bytes.

A row PostgreSQL updates is a new row version; the old one stays in the table's pages (and its TOAST
and index pages) until a vacuum reclaims it, and a plain ``VACUUM`` only marks the space reusable.
``VACUUM (FULL)`` of the tables that held the text (``TABLES``) rewrites them from their live rows:
the old versions leave the table files. It takes an exclusive lock on each table while it runs
(every vault's notes, not only this project's: they share the tables), and needs the tables' owner.
What it cannot reach is named in docs/concepts/vault.md "Forget": the WAL segments not yet recycled,
WAL archives, replicas' and backups' copies.
"""

from __future__ import annotations

import time
from typing import Final

import psycopg

from gateway.errors import FailedPrecondition
from gateway.forgetting import Target
from services.kb.index.purge import Place, Purge, StoreForget
from services.kb.vault.forget import forget_notes, note_names, scrub_json, scrub_write
from services.kb.vault_pg.store import PostgresVaultStore

TABLES: Final = ("notes", "promotions", "note_lifecycle", "retrieval_log", "reflection_merges", "reflection_audit")  # the rest (GC days) holds dates and summaries


def forget_postgres(store: PostgresVaultStore, target: Target, tombstone_id: str, apply: bool) -> StoreForget:
    """The vault's notes and promotion records (``vault.forget``), inside one write decision."""
    result = StoreForget(f"vault:{store.project}")
    result.places, result.left = forget_notes(store, target, tombstone_id, apply=apply, matched=result.matched)
    note_names(store, target, tombstone_id, apply, result)
    count = store.forget_promotions(lambda raw: scrub_write(raw, target, tombstone_id, result.matched), apply)
    if count:
        result.places.append(Place("promotions", "table", count))
    count = store.forget_reflection(lambda raw: scrub_json(raw, target, tombstone_id), apply)
    if count:
        result.places.append(Place("reflection", "table", count))
    return result


def vacuum(store: PostgresVaultStore) -> Purge:
    """``VACUUM (FULL)`` of ``TABLES`` (module docstring): their sizes before and after, and the time it took.
    FailedPrecondition saying what to run when the role may not."""
    started = time.perf_counter()
    try:
        before, after = store.vacuum_full(TABLES)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise FailedPrecondition(
            f"the shared vault of project {store.project!r} was scrubbed, but this role may not run VACUUM (FULL) "
            f"on {', '.join(TABLES)}: the old row versions stay in the table files until the schema's owner runs it "
            "(docs/concepts/vault.md \"Forget\")") from exc
    return Purge(bytes_before=before, bytes_after=after, seconds=time.perf_counter() - started)
