"""Refresh coalescing and staleness in the KB's per-agent archive manager."""

from __future__ import annotations

import asyncio
from pathlib import Path

import apsw
import pytest

from gateway.config import build
from gateway.errors import FailedPrecondition, InvalidArgument
from services.kb.archive.archives import Archives
from services.kb.index import indexer, schema


def make(tmp_path: Path, **archive: object) -> Archives:
    raw = {"agents": [{"id": "a", "knowledge": {"archive": archive}}] if archive else [{"id": "a"}]}
    config = build(raw, tmp_path)
    (tmp_path / "agents" / "a" / "workspace" / "memory").mkdir(parents=True)
    return Archives(config.agents)


def test_concurrent_refreshes_coalesce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archives = make(tmp_path)
    runs: list[int] = []
    real = indexer.refresh

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexer, "refresh", counting)

    async def scenario() -> list[int]:
        first = archives.refresh("a")
        followers = [archives.refresh("a") for _ in range(10)]  # all arrive while the first is queued/running
        reports = await asyncio.gather(first, *followers)
        return [r.generation for r in reports]

    try:
        generations = asyncio.run(scenario())
    finally:
        archives.close()
    assert len(runs) <= 2  # one run, plus at most one follow-up for those who arrived meanwhile
    assert len(set(generations)) <= 2


def test_search_says_stale_after_a_change_event(tmp_path: Path) -> None:
    archives = make(tmp_path)
    note = tmp_path / "agents" / "a" / "workspace" / "memory" / "n.md"
    note.write_text("# N\n\nquokka facts\n")

    async def scenario() -> tuple[bool, bool, bool]:
        first, _ = await archives.search("a", "quokka", 5, False)
        archives.mark_dirty("a")
        second, _ = await archives.search("a", "quokka", 5, False)
        third, refreshed = await archives.search("a", "quokka", 5, True)
        return first.stale, second.stale, third.stale and refreshed

    try:
        assert asyncio.run(scenario()) == (False, True, False)
    finally:
        archives.close()


def test_disabled_archive_and_bad_corpus(tmp_path: Path) -> None:
    archives = make(tmp_path, enabled=False)

    async def scenario() -> None:
        report = await archives.refresh("a")
        assert report.generation == 0
        with pytest.raises(FailedPrecondition, match="disabled"):
            await archives.search("a", "x", 5, False)

    try:
        asyncio.run(scenario())
    finally:
        archives.close()
    assert not (tmp_path / "agents" / "a" / "kb.sqlite").exists()
    from services.kb.archive.arguments import check_corpus

    assert check_corpus("") == "memory" and check_corpus("all") == "all"
    with pytest.raises(InvalidArgument, match="corpus"):
        check_corpus("everything")


def test_recorded_retrievals_are_folded_and_flushed_on_close(tmp_path: Path) -> None:
    import apsw

    archives = make(tmp_path)
    note = tmp_path / "agents" / "a" / "workspace" / "memory" / "n.md"
    note.write_text("# N\n\n- quokka facts\n")
    db = tmp_path / "agents" / "a" / "kb.sqlite"

    async def scenario() -> tuple[int, int]:
        for _ in range(3):
            result, _ = await archives.search("a", "quokka", 5, False)
            archives.record("a", result.hits, "search")  # queued, not written yet
        folded = await archives.fold("a")  # a fold first writes what was recorded before it
        result, _ = await archives.search("a", "quokka", 5, False)
        archives.record("a", result.hits, "search")
        return folded.folded, len(result.hits)

    try:
        folded, hits = asyncio.run(scenario())
    finally:
        archives.close()  # writes the last search's row
    assert (folded, hits) == (3, 1)
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("SELECT count(*) FROM kb_retrieval_log").fetchall() == [(1,)]  # the fold took the first 3
    finally:
        conn.close()


def test_a_refresh_that_names_its_sources_does_not_wait_for_the_barrier(tmp_path: Path) -> None:
    """The caller says what it wrote: those sources are reindexed at once (targeted), with no
    wait for the watch; a refresh without names still passes the barrier."""
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    workspace = tmp_path / "agents" / "a" / "workspace"
    (workspace / "memory" / "archive").mkdir(parents=True)
    barriers: list[int] = []
    held = asyncio.Event()

    async def slow_sync() -> bool:
        barriers.append(1)
        await held.wait()  # a barrier that does not come back until the test lets it
        return True

    archives = Archives(config.agents, sync=slow_sync)

    async def scenario() -> tuple[int, int, int]:
        held.set()
        await archives.refresh("a")  # the first refresh walks (and passes the barrier)
        held.clear()
        (workspace / "memory" / "archive" / "pruned.md").write_text("- the lighthouse keeper is Ines\n")
        report = await asyncio.wait_for(archives.refresh("a", ["memory/archive/pruned.md"]), 5)
        result, _ = await archives.search("a", "lighthouse keeper", 5, False)
        waited = len(barriers)
        held.set()
        await archives.refresh("a")
        return report.indexed, len(result.hits), waited

    try:
        indexed, hits, barriers_before = asyncio.run(scenario())
    finally:
        archives.close()
    assert (indexed, hits) == (1, 1)
    assert barriers_before == 1 and len(barriers) == 2  # the named refresh took none; the plain one did


@pytest.mark.parametrize("bad", ["SOUL.md", "../MEMORY.md", "memory/../x.md", "memory/.hidden/x.md", "memory/x.txt", "memory//x.md", "/etc/passwd"])
def test_named_sources_must_be_sources_of_the_archive(bad: str) -> None:
    from services.kb.archive.arguments import check_sources

    with pytest.raises(InvalidArgument, match="not a source"):
        check_sources([bad])
    assert check_sources(["MEMORY.md", "memory/a/b.md"]) == ["MEMORY.md", "memory/a/b.md"]


def test_a_fold_waits_for_a_refresh_running_on_the_same_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer is one connection: a fold (or a lifecycle update) issued while a refresh runs in a
    worker thread would begin a transaction inside the refresh's. It waits for it instead."""
    import threading

    from services.kb.archive import retrieval_log

    archives = make(tmp_path)
    (tmp_path / "agents" / "a" / "workspace" / "memory" / "n.md").write_text("- a fact\n")
    release = threading.Event()
    inside = threading.Event()
    order: list[str] = []
    real_refresh, real_fold = indexer.refresh, retrieval_log.fold_retrievals

    def slow_refresh(*args, **kwargs):  # type: ignore[no-untyped-def]
        inside.set()
        assert release.wait(10)
        order.append("refresh")
        return real_refresh(*args, **kwargs)

    def fold(conn):  # type: ignore[no-untyped-def]
        order.append("fold")
        return real_fold(conn)

    async def scenario() -> None:
        await archives.refresh("a")  # the writer exists
        monkeypatch.setattr(indexer, "refresh", slow_refresh)
        monkeypatch.setattr(retrieval_log, "fold_retrievals", fold)
        archives.rescan("a")
        refreshing = archives.refresh("a")
        deadline = asyncio.get_running_loop().time() + 10
        while not inside.is_set():  # the refresh is in its worker thread, held until released
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        folding = asyncio.ensure_future(archives.fold("a"))
        for _ in range(50):
            await asyncio.sleep(0)  # the fold gets every chance to start (yields, no wait)
        release.set()
        await asyncio.gather(refreshing, folding)

    try:
        asyncio.run(scenario())
    finally:
        archives.close()
    assert order == ["refresh", "fold"]


def test_a_cancelled_fold_holds_the_writer_until_its_worker_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FoldRetrievals cancelled while its worker thread folds must not let a refresh use the same
    writer connection beside it: the archive's lock is held until the worker returns."""
    import threading

    from services.kb.archive import retrieval_log

    archives = make(tmp_path)
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    real_fold, real_refresh = retrieval_log.fold_retrievals, indexer.refresh

    def slow_fold(conn):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(30)
        order.append("fold done")
        return real_fold(conn)

    def refresh(*args, **kwargs):  # type: ignore[no-untyped-def]
        order.append("refresh ran")
        return real_refresh(*args, **kwargs)

    async def scenario() -> bool:
        await archives.refresh("a")  # the index exists
        monkeypatch.setattr(retrieval_log, "fold_retrievals", slow_fold)
        monkeypatch.setattr(indexer, "refresh", refresh)
        order.clear()
        fold = asyncio.ensure_future(archives.fold("a"))
        await asyncio.to_thread(entered.wait, 30)
        fold.cancel()
        await asyncio.sleep(0)
        held = not fold.done()
        archives.rescan("a")
        follower = archives.refresh("a")
        await asyncio.sleep(0.05)  # the follower gets every chance to run early (it must not)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await fold
        await follower
        return held

    try:
        assert asyncio.run(scenario())
    finally:
        archives.close()
    assert order == ["fold done", "refresh ran"]


def test_a_search_connection_maps_no_file_and_caches_at_most_its_bound(tmp_path: Path) -> None:
    """What a search connection holds does not grow with its database: no memory map of the index
    (a mapped page a search touches stays resident while the connection lives) and a page cache
    of at most ``READER_CACHE_PAGES``, over an archive many times that size, between commits."""
    from services.kb.index import search as search_module

    archives = make(tmp_path)
    memory = tmp_path / "agents" / "a" / "workspace" / "memory"
    words = [f"w{i:05d}" for i in range(20_000)]
    for n in range(60):  # about 2 MB of distinct words: more pages than the bound, in the test below
        (memory / f"n{n}.md").write_text(f"# N{n}\n\n" + " ".join(words[(n * 331 + k) % 20_000] for k in range(6_000)) + "\n")
    kb = tmp_path / "agents" / "a" / "kb.sqlite"

    async def scenario() -> tuple[int, int, int]:
        await archives.refresh("a")
        found = 0
        for k in range(0, 20_000, 97):
            result, _ = await archives.search("a", words[k], 5, False)
            found += bool(result.hits)
        reader = archives._state("a").reader
        assert reader is not None
        used = reader.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0]
        mapped = int(reader.execute("PRAGMA mmap_size").fetchall()[0][0])
        return found, used, mapped

    bound = search_module.READER_CACHE_PAGES * schema.PAGE_BYTES
    try:
        found, used, mapped = asyncio.run(scenario())
        maps = [line for line in Path("/proc/self/maps").read_text().splitlines() if line.endswith(str(kb))]
    finally:
        archives.close()
    assert found == len(range(0, 20_000, 97))
    assert kb.stat().st_size > 8 * bound  # the database is far larger than the bound
    assert mapped == 0 and maps == []
    assert used <= bound * 1.1, used  # the bound, with SQLite's per-page headers



def test_an_archive_in_steady_use_hands_its_page_caches_back_when_released(tmp_path: Path) -> None:
    """Between commits a search connection keeps every page its searches read: an archive searched
    all day is never idle, so ``release_caches`` (called by the handles once a minute) empties the
    caches of its connections, and the next search still answers, from pages read again."""
    archives = make(tmp_path)
    memory = tmp_path / "agents" / "a" / "workspace" / "memory"
    words = [f"w{i:05d}" for i in range(8_000)]
    for n in range(20):
        (memory / f"n{n}.md").write_text(f"# N{n}\n\n" + " ".join(words[(n * 331 + k) % 8_000] for k in range(3_000)) + "\n")

    async def scenario() -> tuple[int, int, int, bool]:
        await archives.refresh("a")
        for k in range(0, 8_000, 61):
            await archives.search("a", words[k], 5, False)
        state = archives._state("a")
        assert state.reader is not None
        before = state.reader.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0]
        state.release_caches()
        after = state.reader.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0]
        writer_after = state.writer.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0] if state.writer is not None else 0
        result, _ = await archives.search("a", words[4_321], 5, False)
        return before, after, writer_after, bool(result.hits)

    try:
        before, after, writer_after, found = asyncio.run(scenario())
    finally:
        archives.close()
    from services.kb.index.search import READER_CACHE_PAGES

    assert before >= READER_CACHE_PAGES * schema.PAGE_BYTES, before  # over a hundred searches filled it
    assert after < before // 4 and writer_after < 64 * 1024, (before, after, writer_after)
    assert found

def test_searches_run_the_same_few_statements_whatever_their_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statements are cached per connection (``STATEMENT_CACHE`` of them, 2-15 KB each): the SQL a
    search or a recall probe runs does not carry its input (how many hits, which sources, which
    lines), so once every kind of search has run no new statement appears. (SQL that spelled
    out a list's length or a line range filled every connection's cache with statements run once.)"""
    seen: list[set[str]] = []
    opened = schema.open_reader

    def traced(path: Path) -> apsw.Connection:
        conn = opened(path)
        conn.exec_trace = lambda _cursor, sql, _bindings: seen[-1].add(sql) or True
        return conn

    monkeypatch.setattr(schema, "open_reader", traced)
    archives = make(tmp_path)
    memory = tmp_path / "agents" / "a" / "workspace" / "memory"
    for n in range(40):
        lines = "\n".join(f"- fact {n}-{k}: heron{k % 7} otter{n % 5} 東京{k % 3} zx{n}{k}" for k in range(30))
        (memory / f"n{n}.md").write_text(f"# Notes {n}\n\n{lines}\n")
    queries = ["heron1", "otter2 heron3", "東京", "zx37", "otter4 nothinghere", "heron5 otter1 東京2", "fact 3-1"]

    async def scenario() -> int:
        await archives.refresh("a")
        for round_ in range(40):
            seen.append(set())
            for q in queries:
                await archives.search("a", q, 1 + (round_ % 20), False)
            n = round_ % 40
            await archives.probe_recall("a", [(f"memory/n{n}.md", f"zx{n}{round_}", f"zx{n}{round_}")])
        reader = archives._state("a").reader
        assert reader is not None
        return int(reader.cache_stats()["size"])

    seen.append(set())
    try:
        size = asyncio.run(scenario())
    finally:
        archives.close()
    first = set().union(*seen[:21])  # every limit from 1 to 20 once, recall probes on notes 0-19
    later = set().union(*seen[21:])  # the same searches again, probes on notes 20-39
    assert size == schema.STATEMENT_CACHE
    assert len(first) <= 24, sorted(first)
    assert later <= first, sorted(later - first)  # nothing new: the input is in the bindings
