"""Recall recording: the append-only ``kb_retrieval_log`` and its fold into lifecycle rows.

SPEC.md "Archive staleness GC": the read path appends one row per retrieved
entry through a *dedicated* short-lived write connection (never the reader's,
never a read-modify-write of chunk rows), fire-and-forget: ``record_retrievals``
swallows and logs every error, and waits on a locked database for at most
``busy_timeout_ms``. It never creates the database file.

``fold_retrievals`` folds rows with an id above ``kb_meta.last_folded_log_id``
into ``kb_entry_lifecycle`` (``retrieval_count += n``, ``last_retrieved = max``)
and advances that id in the same transaction, so folding twice counts nothing
twice. An entry with no lifecycle row yet (retrieved before its file was
indexed) gets one, first seen at its first retrieval.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import apsw
import structlog

from services.kb.schema import get_meta, set_meta

KINDS: Final = ("search", "get")
RECORD_BUSY_TIMEOUT_MS: Final = 250

log = structlog.get_logger()


class Retrieved(Protocol):
    """Anything naming a retrieved entry: SearchHit and excerpt.EntryRef both do."""

    @property
    def path(self) -> str: ...

    @property
    def entry_hash(self) -> str | None: ...


@dataclass(frozen=True)
class FoldReport:
    """``folded`` log rows over ``entries`` distinct entries; ``last_id`` is the new watermark."""

    folded: int
    entries: int
    last_id: int


def record_retrievals(
    db_path: Path,
    hits: Iterable[Retrieved],
    kind: str,
    *,
    clock: Callable[[], float] = time.time,
    busy_timeout_ms: int = RECORD_BUSY_TIMEOUT_MS,
) -> int:
    """Append one log row per hit that names an entry; the number written (0 on any failure).

    Never raises: every error is logged as ``kb_retrieval_log_failed`` and swallowed.
    """
    try:
        if kind not in KINDS:
            raise ValueError(f"unknown retrieval kind {kind!r}")
        at = clock()
        rows = [(hit.entry_hash, hit.path, at, kind) for hit in hits if hit.entry_hash]
        if not rows:
            return 0
        conn = apsw.Connection(os.fspath(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.setbusytimeout(busy_timeout_ms)
            with conn:
                conn.executemany(
                    "INSERT INTO kb_retrieval_log(entry_hash, path, at, kind) VALUES (?, ?, ?, ?)", rows
                )
        finally:
            conn.close()
        return len(rows)
    except Exception as exc:  # fire-and-forget: a failure never fails the read
        log.warning("kb_retrieval_log_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")
        return 0


def fold_retrievals(conn: apsw.Connection) -> FoldReport:
    """Fold new log rows into ``kb_entry_lifecycle`` idempotently (see the module docstring).

    ``conn`` is the index's write connection (``schema.open_index``); the fold is
    one transaction.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        last = int(get_meta(conn, "last_folded_log_id") or 0)
        groups = conn.execute(
            "SELECT entry_hash, min(path), count(*), min(at), max(at), max(id) "
            "FROM kb_retrieval_log WHERE id > ? GROUP BY entry_hash",
            (last,),
        ).fetchall()
        folded = 0
        newest = last
        for entry_hash, path, count, first_at, last_at, max_id in groups:
            conn.execute(
                "INSERT OR IGNORE INTO kb_entry_lifecycle(entry_hash, path, first_seen) VALUES (?, ?, ?)",
                (entry_hash, path, first_at),
            )
            conn.execute(
                "UPDATE kb_entry_lifecycle SET retrieval_count = retrieval_count + ?, "
                "last_retrieved = max(coalesce(last_retrieved, 0), ?) WHERE entry_hash = ?",
                (count, last_at, entry_hash),
            )
            folded += int(str(count))
            newest = max(newest, int(str(max_id)))
        set_meta(conn, "last_folded_log_id", str(newest))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return FoldReport(folded=folded, entries=len(groups), last_id=newest)
