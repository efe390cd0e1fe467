"""Reads of an archive's index on a connection of their own, for worker threads.

The archive's shared reader belongs to the event loop (searches run there); work
that runs in a worker thread (a recall probe over thousands of entries, a page of
lifecycle rows, the first staleness check) opens its own read-only connection,
which WAL lets run beside the writer, and closes it when done.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import apsw

from services.kb.archive import recall_probe
from services.kb.index import schema
from services.kb.index.search import is_stale as index_is_stale

_T = TypeVar("_T")


def read(kb_path: Path, work: Callable[[apsw.Connection], _T]) -> _T:
    """``work`` on a read connection of its own (the index file must exist)."""
    conn = schema.open_reader(kb_path)
    try:
        return work(conn)
    finally:
        conn.close()


def probe_recall(kb_path: Path, workspace: Path, probes: list[tuple[str, str, str]]) -> tuple[list[bool], int]:
    """``recall_probe.probe`` in one read transaction: (found per probe, the generation it saw)."""
    conn = schema.open_reader(kb_path)
    try:
        conn.execute("BEGIN")
        try:
            return recall_probe.probe(conn, workspace, probes), schema.generation(conn)
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()


def is_stale(kb_path: Path, workspace: Path) -> bool:
    """Whether the index differs from the files (``search.is_stale``: the full check, a tree walk)."""
    return read(kb_path, lambda conn: index_is_stale(conn, workspace))
