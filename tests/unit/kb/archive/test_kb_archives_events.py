"""Indexing on file events: a stale archive refreshes itself, coalesced, in bounded batches.

The file watch is played by calling ``mark_dirty`` as ``file_watch.SourceWatch``
would; ``sync`` is a barrier that always passes, so event-driven refreshes are
targeted once the first walk has built the index. The indexer is wrapped (not
replaced) where a test must hold a refresh open or count its transactions.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from gateway.config import build
from services.kb.archive import archives as archives_module
from services.kb.archive.archives import Archives
from services.kb.index import indexer


async def passing_barrier() -> bool:
    return True


def make(tmp_path: Path) -> tuple[Archives, Path]:
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    memory = tmp_path / "agents" / "a" / "workspace" / "memory"
    memory.mkdir(parents=True)
    (memory / "seed.md").write_text("# Seed\n\n- the first note\n")
    return Archives(config.agents, sync=passing_barrier), memory


async def settle(archives: Archives, agent: str = "a") -> None:
    """Until no refresh is queued or running (bounded)."""
    state = archives._state(agent)
    for _ in range(2000):
        if state.next_run is None and (state.drain is None or state.drain.done()):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("refreshes did not settle")


def test_a_change_event_indexes_the_note_and_stale_holds_until_it_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archives, memory = make(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real = indexer.reindex_paths

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    async def scenario() -> tuple[bool, bool, bool, list[str]]:
        await archives.refresh("a")  # the first refresh walks and opens the writer
        monkeypatch.setattr(indexer, "reindex_paths", held)
        (memory / "new.md").write_text("# New\n\n- the quokka census\n")
        archives.mark_dirty("a", "memory/new.md")  # nobody asks for a refresh
        pending, _ = await archives.search("a", "quokka", 5, False)
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        running, _ = await archives.search("a", "quokka", 5, False)
        release.set()
        await settle(archives)
        done, refreshed = await archives.search("a", "quokka", 5, False)
        return pending.stale, running.stale, done.stale or refreshed, [h.path for h in done.hits]

    try:
        assert asyncio.run(scenario()) == (True, True, False, ["memory/new.md"])
    finally:
        release.set()
        archives.close()


def test_many_events_coalesce_into_one_running_and_one_queued_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archives, memory = make(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real = indexer.reindex_paths

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    async def scenario() -> tuple[int, int]:
        await archives.refresh("a")
        monkeypatch.setattr(indexer, "reindex_paths", held)
        before = archives.refreshes("a")
        (memory / "n0.md").write_text("- wombat 0\n")
        archives.mark_dirty("a", "memory/n0.md")
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        for n in range(1, 50):  # events while the first refresh runs
            (memory / f"n{n}.md").write_text(f"- wombat {n}\n")
            archives.mark_dirty("a", f"memory/n{n}.md")
            archives.mark_dirty("a", f"memory/n{n}.md")  # a write reports more than one event
        release.set()
        await settle(archives)
        result, _ = await archives.search("a", "wombat", 5, False)
        assert not result.stale
        return archives.refreshes("a") - before, int(str((await archives.status("a"))["sources"]))

    try:
        runs, hits = asyncio.run(scenario())
    finally:
        release.set()
        archives.close()
    assert (runs, hits) == (2, 51)  # the one running, and one follow-up for everything after it


def test_a_burst_is_reindexed_in_bounded_batches_while_searches_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archives, memory = make(tmp_path)
    batches: list[int] = []
    real = indexer.reindex_paths

    def counting(conn, root, rels, *args, **kwargs):  # type: ignore[no-untyped-def]
        batches.append(len(rels))
        return real(conn, root, rels, *args, **kwargs)

    async def scenario() -> tuple[int, int, bool]:
        await archives.refresh("a")
        monkeypatch.setattr(indexer, "reindex_paths", counting)
        count = 3 * archives_module.EVENT_BATCH + 5
        for n in range(count):
            (memory / f"b{n:04}.md").write_text(f"- burst note {n} about kelp\n")
        for n in range(count):
            archives.mark_dirty("a", f"memory/b{n:04}.md")
        answered = 0
        state = archives._state("a")
        while state.drain is not None and not state.drain.done():
            result, _ = await archives.search("a", "kelp", 5, False)  # the old index answers meanwhile
            answered += 1 if result.stale else 0
            await asyncio.sleep(0)
        await settle(archives)
        result, _ = await archives.search("a", "kelp", 5, False)
        return answered, int(str((await archives.status("a"))["sources"])) - 1, result.stale

    try:
        answered, hits, stale = asyncio.run(scenario())
    finally:
        archives.close()
    assert max(batches) <= archives_module.EVENT_BATCH and len(batches) == 4
    assert answered > 0 and (hits, stale) == (3 * archives_module.EVENT_BATCH + 5, False)


def test_a_walk_over_many_files_commits_in_batches_while_searches_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event burst forces a walk (the watch asks for a rescan): its new files are reindexed in
    EVENT_BATCH transactions, searches answer (stale, seeing the index grow) between them, then one
    walk closes it; the waiting caller gets its answer only after that walk."""
    archives, memory = make(tmp_path)
    os.utime(memory / "seed.md", (1_600_000_000, 1_600_000_000))  # not racy: the walk's plan leaves it alone
    batches: list[int] = []
    walks: list[int] = []
    real_reindex, real_refresh = indexer.reindex_paths, indexer.refresh

    def counting(conn, root, rels, *args, **kwargs):  # type: ignore[no-untyped-def]
        batches.append(len(rels))
        return real_reindex(conn, root, rels, *args, **kwargs)

    def walking(*args, **kwargs):  # type: ignore[no-untyped-def]
        walks.append(len(batches))
        return real_refresh(*args, **kwargs)

    count = 3 * archives_module.EVENT_BATCH + 5

    async def scenario() -> tuple[set[int], bool, int, int, bool]:
        await archives.refresh("a")
        monkeypatch.setattr(indexer, "reindex_paths", counting)
        monkeypatch.setattr(indexer, "refresh", walking)
        for n in range(count):
            (memory / f"w{n:04}.md").write_text(f"- walked note {n} about kelp\n")
        for n in range(count):
            archives.mark_dirty("a", f"memory/w{n:04}.md")
        archives.rescan("a")  # as the watch does after a burst
        waiter = archives.refresh("a")  # a caller waiting for its writes (coalesced with the events' refresh)
        seen: set[int] = set()  # sources the reader saw while the walk ran
        always_stale = True
        while not waiter.done():
            result, _ = await archives.search("a", "kelp", 5, False)
            always_stale = always_stale and result.stale
            seen.add(int(str((await archives.status("a"))["sources"])))
            await asyncio.sleep(0)
        report = await waiter
        after, _ = await archives.search("a", "kelp", 5, False)
        return seen, always_stale, report.indexed, int(str((await archives.status("a"))["sources"])), after.stale

    try:
        seen, always_stale, indexed, sources, stale_after = asyncio.run(scenario())
    finally:
        archives.close()
    assert batches == [64, 64, 64, 5] == [min(archives_module.EVENT_BATCH, count - k) for k in range(0, count, 64)]
    assert walks == [len(batches)]  # one walk, after every batch
    assert any(1 < n < 1 + count for n in seen)  # a search answered between two commits
    assert always_stale and not stale_after
    assert (indexed, sources) == (count, count + 1)


def test_a_failed_refresh_leaves_the_archive_stale_without_retrying_in_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archives, memory = make(tmp_path)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk on fire")

    async def scenario() -> tuple[int, bool]:
        await archives.refresh("a")
        monkeypatch.setattr(indexer, "reindex_paths", broken)
        monkeypatch.setattr(indexer, "refresh", broken)
        before = archives.refreshes("a")
        (memory / "x.md").write_text("- xylophone\n")
        archives.mark_dirty("a", "memory/x.md")
        await settle(archives)
        for _ in range(20):
            await asyncio.sleep(0)
        result, _ = await archives.search("a", "xylophone", 5, False)  # queues one more try
        await settle(archives)
        return archives.refreshes("a") - before, result.stale

    try:
        runs, stale = asyncio.run(scenario())
    finally:
        archives.close()
    assert (runs, stale) == (2, True)


def test_a_refresh_asked_for_after_the_watch_indexed_the_write_reports_nothing_left_to_index(tmp_path: Path) -> None:
    """The kb_archive bench's one-file Refresh that "indexed 0": an append, then at once Refresh(wait).
    When the write's event reaches the KB first, the refresh it queues indexes the note; the caller's
    refresh, asked for after that run began, passes the barrier and finds nothing left. Its report
    counts what its own run indexed (docs/concepts/archive.md "Knowledge archive (KB)", Read-your-writes):
    0, the note searchable."""
    archives, memory = make(tmp_path)

    async def scenario() -> tuple[int, list[str], int]:
        await archives.refresh("a")
        (memory / "seed.md").write_text("# Seed\n\n- the first note\n- an aardvark census\n")
        archives.mark_dirty("a", "memory/seed.md")  # the event wins the race with the call
        await settle(archives)
        before = archives.refreshes("a")
        report = await archives.refresh("a")  # the caller's Refresh(wait), no paths: the barrier
        result, _ = await archives.search("a", "aardvark", 5, False)
        return report.indexed, [h.path for h in result.hits], archives.refreshes("a") - before

    try:
        assert asyncio.run(scenario()) == (0, ["memory/seed.md"], 1)
    finally:
        archives.close()


def test_a_refresh_asked_for_while_the_events_refresh_runs_waits_for_it_and_reports_its_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race, the call arriving while the event's refresh is still indexing the note: the call
    cannot join a run whose sources were fixed before it was asked, so it waits for a follow-up run,
    which finds the note indexed (0); the two reports add up to the one note."""
    archives, memory = make(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real = indexer.reindex_paths
    indexed: list[int] = []

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(10)
        report = real(*args, **kwargs)
        indexed.append(report.indexed)
        return report

    async def scenario() -> tuple[int, list[str]]:
        await archives.refresh("a")
        monkeypatch.setattr(indexer, "reindex_paths", held)
        (memory / "seed.md").write_text("# Seed\n\n- the first note\n- an aardvark census\n")
        archives.mark_dirty("a", "memory/seed.md")
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        waiter = archives.refresh("a")  # asked for while the event's run holds the note
        release.set()
        report = await waiter
        result, _ = await archives.search("a", "aardvark", 5, False)
        return report.indexed, [h.path for h in result.hits]

    try:
        assert asyncio.run(scenario()) == (0, ["memory/seed.md"])
    finally:
        release.set()
        archives.close()
    assert indexed == [1]  # the event's run indexed it; the caller's run had no source to read


def test_a_refresh_asked_for_before_the_events_refresh_began_shares_it_and_reports_the_note(tmp_path: Path) -> None:
    """The other order of the same race: the call arrives in the same turn as the event, before its
    refresh began, and coalesces into it: one run, 1 indexed."""
    archives, memory = make(tmp_path)

    async def scenario() -> tuple[int, int]:
        await archives.refresh("a")
        before = archives.refreshes("a")
        (memory / "seed.md").write_text("# Seed\n\n- the first note\n- an aardvark census\n")
        archives.mark_dirty("a", "memory/seed.md")
        report = await archives.refresh("a")
        await settle(archives)
        return report.indexed, archives.refreshes("a") - before

    try:
        assert asyncio.run(scenario()) == (1, 1)
    finally:
        archives.close()
