"""Reads of an archive's index for worker threads, on a connection other than the searches'.

The archive's shared reader belongs to the event loop (searches run there); work
that runs in a worker thread (a recall probe over thousands of entries, a page of
lifecycle rows, the first staleness check) runs on the archive's worker connection
(``ArchiveState.on_worker``, which WAL lets read beside the writer). Each function
here takes that connection and leaves no transaction open on it.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from services.kb.archive import recall_probe
from services.kb.index import meta
from services.kb.index.search import is_stale as index_is_stale


def probe_recall(conn: apsw.Connection, workspace: Path, probes: list[tuple[str, str, str]]) -> tuple[list[bool], int]:
    """``recall_probe.probe`` in one read transaction: (found per probe, the generation it saw)."""
    conn.execute("BEGIN")
    try:
        return recall_probe.probe(conn, workspace, probes), meta.generation(conn)
    finally:
        conn.execute("COMMIT")


def is_stale(conn: apsw.Connection, workspace: Path) -> bool:
    """Whether the index differs from the files (``search.is_stale``: the full check, a tree walk)."""
    return index_is_stale(conn, workspace)


def counts(conn: apsw.Connection) -> dict[str, object]:
    """The index's generation and how many sources and chunks it holds (``GetStatus``)."""
    return {
        "generation": meta.generation(conn),
        "sources": next(conn.execute("SELECT count(*) FROM kb_sources"))[0],
        "chunks": next(conn.execute("SELECT count(*) FROM kb_chunks"))[0],
    }
