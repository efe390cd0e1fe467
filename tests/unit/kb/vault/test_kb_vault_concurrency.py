"""Concurrent writers in separate processes share one vault without an in-process lock
(docs/concepts/vault.md "Shared vault": temp-then-atomic-rename note files, busy_timeout on the index)."""

from __future__ import annotations

import multiprocessing
import traceback
from multiprocessing.synchronize import Barrier
from pathlib import Path

from gateway.atomic import WriteConflict
from services.kb.vault.note_index import open_vault_index, search_vault
from services.kb.vault.notes import create, get, update
from services.kb.vault.sqlite_store import SqliteVaultStore

WORKERS = 3
NOTES_EACH = 25
CAS_TRIES = 50


def unique_word(worker: int, n: int) -> str:
    return f"qz{worker}x{n}zq"


def _writer(vault_dir: str, worker: int, count: int, barrier: Barrier, errors: multiprocessing.Queue[str]) -> None:
    try:
        barrier.wait(timeout=30)  # every process opens and writes at the same moment
        conn = open_vault_index(Path(vault_dir))
        try:
            for n in range(count):
                content = (
                    f"Worker {worker} note {n} records the deployment fact {unique_word(worker, n)}.\n"
                    "Shared filler about the staging cluster and its nightly backups.\n"
                )
                result = create(SqliteVaultStore(Path(vault_dir), conn), f"w{worker}-note-{n}", content, confirm=True)
                assert result.created
                # Every worker also rewrites one shared note. An update is compare-and-swap against what it
                # read: one that lost the race to another process is refused whole (WriteConflict, nothing
                # written) and the worker reads and writes again, as a caller told to retry does.
                for _ in range(CAS_TRIES):
                    try:
                        update(SqliteVaultStore(Path(vault_dir), conn), "shared-counter", f"last writer {worker} at {n}\n",
                               confirm=True)
                        break
                    except WriteConflict:
                        continue
                else:
                    raise AssertionError(f"shared-counter refused {CAS_TRIES} times in a row")
        finally:
            conn.close()
    except BaseException:
        errors.put(f"worker {worker}: {traceback.format_exc()}")
        raise


def test_processes_writing_one_vault_at_once_lose_nothing(vault_dir: Path) -> None:
    setup = open_vault_index(vault_dir)
    create(SqliteVaultStore(vault_dir, setup), "shared-counter", "start\n")
    setup.close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    errors: multiprocessing.Queue[str] = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(vault_dir), w, NOTES_EACH, barrier, errors)) for w in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=90)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert not failures, "\n".join(failures)
    assert [proc.exitcode for proc in procs] == [0] * WORKERS

    total = WORKERS * NOTES_EACH
    notes = sorted(p.name for p in (vault_dir / "notes").iterdir())
    assert len(notes) == total + 1  # + shared-counter; no temp file left behind
    assert not [n for n in notes if n.startswith(".")]
    conn = open_vault_index(vault_dir)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT count(*) FROM kb_sources").fetchall()[0][0] == total + 1
        fts_check = conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('integrity-check')")
        assert fts_check.fetchall() == []
        for w in range(WORKERS):
            for n in range(NOTES_EACH):
                hits = search_vault(conn, unique_word(w, n), 5).hits
                assert [h.path for h in hits] == [f"notes/w{w}-note-{n}.md"], (w, n)
        # The index holds the counter's final bytes (whoever reindexed last read the latest file).
        final = get(SqliteVaultStore(vault_dir, None), "shared-counter").content
        stored = conn.execute(
            "SELECT c.text FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id WHERE s.path = 'notes/shared-counter.md'"
        ).fetchall()
        assert [row[0] for row in stored] == [final.rstrip("\n")]
    finally:
        conn.close()
