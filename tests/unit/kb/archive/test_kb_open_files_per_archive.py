"""The KB's open files per open archive: the same from the first recorded search on, whatever the
retrieval log's writer or a worker thread's read does, at most ``FILES_PER_ARCHIVE``, and none left
once the archive is closed.

SQLite keeps the descriptor of a connection closed while another connection of the process has the
same file open (it is reused by the next open, and closed only with the last connection): a
retrieval-log connection closed on its own while the archive stays open would leave one behind, and
so would a worker's read on a connection of its own.
The archives and the vault here are the real ones, sharing one ``OpenHandles`` as in the KB; the
files counted are this process's descriptors (``/proc/self/fd``) on the ``kb.sqlite`` files.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import pytest

from gateway.config import build
from services.kb.archive import retrieval_log
from services.kb.archive.archives import Archives
from services.kb.resources.handles import FILES_PER_ARCHIVE, OpenHandles
from services.kb.vault.registry import Vaults

AGENTS = 6
ROUNDS = 3
IDLE_S = 0.05  # the retrieval log's idle close, where it has one: short, so the rounds see it happen


def kb_files(home: Path) -> Counter[str]:
    """This process's open descriptors per database under ``home`` (``…/kb.sqlite`` with its -wal and -shm)."""
    held: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith(str(home)) and "kb.sqlite" in target:
            held[target.split("kb.sqlite")[0]] += 1
    return held


def test_open_files_per_archive_stay_flat_and_none_outlive_the_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval_log, "IDLE_S", IDLE_S, raising=False)
    ids = [f"a{i}" for i in range(AGENTS)]
    config = build({"agents": [{"id": agent} for agent in ids]}, tmp_path)
    for agent in ids:
        memory = tmp_path / "agents" / agent / "workspace" / "memory"
        memory.mkdir(parents=True)
        (memory / "notes.md").write_text(f"# Notes\n\n- the lighthouse code of {agent} is kestrel\n")
    notes = tmp_path / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True)
    (notes / "harbour.md").write_text("# Harbour\n\n- the harbour opens at dawn for every kestrel\n")
    handles = OpenHandles(64, idle_s=0.0)  # nothing closed by the cap; close_idle closes every one not in use
    archives = Archives(config.agents, handles=handles)
    vaults = Vaults(config.agents, archives.executor, handles=handles)

    async def one_round(n: int) -> None:
        for agent in ids:
            mine, _ = await archives.search(agent, "kestrel", 5, False)
            shared, _ = await vaults.search(agent, "kestrel", 5, False)
            assert mine.hits and shared.hits
            if n > 0:  # worker threads' reads (as a dream's) only after the first round: they add no file
                assert (await archives.entries(agent, "", 10)).entries
                found, _ = await archives.probe_recall(agent, [("memory/notes.md", "kestrel", "kestrel")])
                assert found == [True]
            archives.record(agent, mine.hits, "search")  # as the servicer does once it has replied
            vaults.record(agent, shared.hits, "search")
        await archives.fold(ids[0])  # a fold writes every archive's queued rows first
        await vaults.collect(ids[0])  # and the vault GC the vault's

    async def idle() -> None:
        # Longer than the retrieval log's idle time: a writer that closes its connections on its own
        # has closed them by now (the archives stay open: nothing here closes them).
        await asyncio.sleep(IDLE_S * 6)

    async def scenario() -> tuple[list[Counter[str]], Counter[str]]:
        seen: list[Counter[str]] = []
        for n in range(ROUNDS):
            await one_round(n)
            seen.append(kb_files(tmp_path))
            await idle()
            seen.append(kb_files(tmp_path))
        assert handles.open_count() == AGENTS + 1
        await handles.close_idle()  # every archive and the vault closed, as the cap or 60 s idle would
        return seen, kb_files(tmp_path)

    try:
        seen, after_close = asyncio.run(scenario())
    finally:
        vaults.close()
        archives.close()
        handles.close_all()
    totals = [sum(counts.values()) for counts in seen]
    assert len(seen[0]) == AGENTS + 1, seen[0]  # every archive and the vault hold files
    assert all(counts == seen[0] for counts in seen), totals  # flat: the same files per database throughout
    assert max(seen[0].values()) <= FILES_PER_ARCHIVE, seen[0]
    assert totals[0] <= FILES_PER_ARCHIVE * (AGENTS + 1)
    assert after_close == Counter(), after_close  # closing an archive closes every file it held
