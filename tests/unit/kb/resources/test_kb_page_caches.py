"""The page caches' budget (services.kb.resources.page_caches) and the memory trace that reads the same counters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from services.kb.resources import memory_trace
from services.kb.resources.handles import wait_any
from services.kb.resources.page_caches import apply_budget, connections_bytes, keep_within

MiB = 2**20


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Path]:
    """A database of about 8 MiB in 16 KiB pages; SQLite's soft heap limit lifted afterwards."""
    path = tmp_path / "t.sqlite"
    conn = apsw.Connection(str(path))
    for sql in ("PRAGMA page_size=16384", "PRAGMA journal_mode=WAL", "CREATE TABLE t(x)"):
        conn.execute(sql).fetchall()
    with conn:
        conn.executemany("INSERT INTO t VALUES(randomblob(4000))", [() for _ in range(2000)])
    conn.close()
    yield path
    apsw.soft_heap_limit(0)


def caches_after_reads(path: Path, budget: int | None) -> int:
    conns = [apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY) for _ in range(4)]
    try:
        for conn in conns:
            conn.execute("PRAGMA cache_size=-32768")
        if budget is not None:
            apply_budget(budget)
        for conn in conns:
            assert conn.execute("SELECT count(*) FROM t WHERE length(x) = 4000").fetchall() == [(2000,)]
        return sum(conn.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0] for conn in conns)
    finally:
        for conn in conns:
            conn.close()


def test_without_a_budget_each_cache_holds_what_it_read(table: Path) -> None:
    assert caches_after_reads(table, None) > 24 * MiB  # four caches of the whole 8 MiB table


def test_the_caches_stay_within_the_budget_and_every_read_is_answered(table: Path) -> None:
    assert caches_after_reads(table, 2 * MiB) <= 3 * MiB


def test_the_limit_is_what_sqlite_holds_outside_page_caches_plus_the_budget(table: Path) -> None:
    conn = apsw.Connection(str(table))
    try:
        conn.execute("SELECT count(*) FROM t").fetchall()
        outside = apsw.memory_used() - connections_bytes(apsw.SQLITE_DBSTATUS_CACHE_USED)
        limit = apply_budget(MiB)
        assert abs(limit - (outside + MiB)) < 64 * 1024
        assert apsw.soft_heap_limit(-1) == limit  # a negative figure reads the limit without changing it
    finally:
        conn.close()


def test_keep_within_applies_the_budget_only_while_something_is_open_and_lifts_it_when_stopped(table: Path) -> None:
    """Nothing open: no page cache to hold, no timer (it waits for an open); then the budget every
    ``every_s``; at the stop, no limit."""

    async def scenario() -> tuple[int, int]:
        stop, opened = asyncio.Event(), asyncio.Event()

        async def until_open(stop: asyncio.Event) -> bool:
            await wait_any((opened, stop))
            return not stop.is_set()

        task = asyncio.create_task(keep_within(stop, until_open, MiB, every_s=0.01))
        await asyncio.sleep(0.05)
        at_rest = apsw.soft_heap_limit(-1)
        opened.set()
        await asyncio.sleep(0.05)
        during = apsw.soft_heap_limit(-1)
        stop.set()
        await task
        return at_rest, during

    at_rest, during = asyncio.run(scenario())
    assert at_rest == 0 and during > 0
    assert apsw.soft_heap_limit(-1) == 0


def test_the_memory_trace_is_off_unless_asked() -> None:
    assert memory_trace.TraceSettings.from_environ({}) is None
    settings = memory_trace.TraceSettings.from_environ({"KB_MEMORY_TRACE": "/x/kb.jsonl", "KB_MEMORY_TRACE_S": "2"})
    assert settings == memory_trace.TraceSettings(Path("/x/kb.jsonl"), every_s=2.0)


def test_a_trace_line_names_the_process_heap_and_sqlite(table: Path) -> None:
    conn = apsw.Connection(str(table))
    try:
        line = memory_trace.sample(0.0)
    finally:
        conn.close()
    json.dumps(line)
    assert line["connections"] >= 1 and line["sqlite"] > 0
    assert {"sqlite_cache", "sqlite_stmt", "sqlite_schema", "py_blocks"} <= set(line)


def test_a_trace_line_counts_pythons_own_arenas() -> None:
    before = memory_trace.pymalloc_mb()
    held: list[object] = []
    # Small blocks, 3 MB at a time, until pymalloc maps new arenas: the free pools earlier tests left in
    # this process (under xdist, whichever ran on this worker) are taken first. At most 48 MB.
    while memory_trace.pymalloc_mb()["py_arenas"] < before["py_arenas"] + 2 and len(held) < 3_200_000:
        held.extend(object() for _ in range(200_000))
    after = memory_trace.pymalloc_mb()
    assert after["py_arenas"] >= before["py_arenas"] + 2
    assert after["py_used_mb"] >= before["py_used_mb"] + 2 and after["py_free_blocks_mb"] >= 0


def test_a_trace_line_holds_each_arena_of_the_c_heap() -> None:
    xml = memory_trace.malloc_info_xml()
    assert xml, "malloc_info(3) gave nothing: the suite's machines (Debian) have glibc, which has it"
    arenas = memory_trace.arenas_mb(xml)
    assert arenas and all(held >= free >= 0 for held, free in arenas)
    assert memory_trace.sample(0.0)["arenas"]


def test_arenas_are_read_from_malloc_info() -> None:
    heap = ('<heap nr="{n}">\n<sizes>\n</sizes>\n<total type="fast" count="1" size="{fast}"/>\n'
            '<total type="rest" count="2" size="{rest}"/>\n<system type="current" size="{held}"/>\n</heap>\n')
    xml = ('<malloc version="1">\n' + heap.format(n=0, fast=0, rest=2**20, held=3 * 2**20)
           + heap.format(n=1, fast=2**19, rest=2**19, held=2**21) + '<total type="mmap" count="3" size="9"/>\n</malloc>\n')
    assert memory_trace.arenas_mb(xml) == [[3.0, 1.0], [2.0, 1.0]]
