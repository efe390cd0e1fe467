"""SourceWatch on real folders: event delivery, the sync barrier, and when it asks for a rescan."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.kb import file_watch as freshness
from services.kb.file_watch import Root, SourceWatch, archive_folder, archive_source


@dataclass
class Seen:
    changed: list[str] = field(default_factory=list)
    rescans: int = 0

    def root(self) -> Root:
        return Root(archive_source, self.changed.append, may_hold_sources=archive_folder, rescan=self.rescan)

    def rescan(self) -> None:
        self.rescans += 1


@dataclass
class Running:
    watch: SourceWatch
    seen: Seen
    workspace: Path
    sync_dir: Path


@contextlib.asynccontextmanager
async def watching(tmp_path: Path) -> AsyncIterator[Running]:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    seen = Seen()
    roots = {os.path.realpath(workspace): seen.root()}
    watch = SourceWatch(lambda: roots, tmp_path / "sync")
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    try:
        yield Running(watch, seen, workspace, tmp_path / "sync")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def run_with_watch(tmp_path: Path, scenario: Callable[[Running], Awaitable[None]]) -> None:
    async def main() -> None:
        async with watching(tmp_path) as running:
            await scenario(running)

    asyncio.run(main())


async def poll_until(done: Callable[[], object], step: Callable[[], object] = lambda: None,
                     deadline_s: float = 30.0) -> bool:
    """Run ``step`` and yield to the loop until ``done()`` holds or the deadline passes."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not done():
        if loop.time() > end:
            return False
        step()
        await asyncio.sleep(0.01)
    return True


def test_sync_is_false_when_the_watch_is_not_running(tmp_path: Path) -> None:
    watch = SourceWatch(lambda: {}, tmp_path / "sync")
    assert asyncio.run(watch.sync(timeout=0.2)) is False


def test_every_write_before_sync_is_delivered_when_it_returns(tmp_path: Path) -> None:
    async def scenario(running: Running) -> None:
        assert await running.watch.sync()  # waits for the watch to come up
        assert running.seen.rescans == 1  # the stream's start: whatever happened before is unknown
        memory = running.workspace / "memory"
        for n in range(20):
            (memory / f"n{n}.md").write_text("x")
            (running.workspace / "SOUL.md").write_text("not a source")
            assert await running.watch.sync()
            assert f"memory{os.sep}n{n}.md" in running.seen.changed, n
        assert not any("SOUL" in rel for rel in running.seen.changed)
        assert os.listdir(running.sync_dir) == []  # markers are removed once seen

    run_with_watch(tmp_path, scenario)


def test_a_new_or_vanished_folder_of_sources_asks_for_a_rescan(tmp_path: Path) -> None:
    async def scenario(running: Running) -> None:
        assert await running.watch.sync()
        before = running.seen.rescans
        (running.workspace / "memory" / "new" / "deeper").mkdir(parents=True)
        assert await running.watch.sync()
        assert running.seen.rescans > before
        before = running.seen.rescans
        (running.workspace / "memory" / "new" / "deeper").rmdir()
        assert await running.watch.sync()
        assert running.seen.rescans > before
        before = running.seen.rescans
        (running.workspace / "elsewhere").mkdir()  # not where sources live
        assert await running.watch.sync()
        assert running.seen.rescans == before

    run_with_watch(tmp_path, scenario)


def test_an_event_burst_asks_for_a_rescan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(freshness, "BURST_EVENTS", 10)

    async def scenario(running: Running) -> None:
        assert await running.watch.sync()
        before = running.seen.rescans
        for n in range(12):
            (running.workspace / "memory" / f"b{n}.md").write_text("x")
        assert await running.watch.sync()
        assert running.seen.rescans > before

    run_with_watch(tmp_path, scenario)


def test_markers_of_dead_processes_are_cleaned_and_live_ones_kept(tmp_path: Path) -> None:
    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    (sync_dir / "999999999.4").write_text("")  # no such pid
    (sync_dir / "1.7").write_text("")  # pid 1 is alive (another KB on this home)

    async def scenario(running: Running) -> None:
        assert await running.watch.sync()
        assert sorted(os.listdir(sync_dir)) == ["1.7"]

    run_with_watch(tmp_path, scenario)


def test_without_a_sync_folder_sync_answers_false_at_once_and_events_still_flow(tmp_path: Path) -> None:
    (tmp_path / "sync").write_text("a file where the folder should be")
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    seen = Seen()
    watch = SourceWatch(lambda: {os.path.realpath(workspace): seen.root()}, tmp_path / "sync")

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            # The stream has begun once it asked for its start-of-stream rescan.
            assert await poll_until(lambda: seen.rescans >= 1)
            # No waiting for a barrier that cannot come: a sync that waited would outlast wait_for.
            assert await asyncio.wait_for(watch.sync(timeout=3600), 30) is False
            # The watch may not be set up yet: write until the first event comes through.
            assert await poll_until(lambda: seen.changed, lambda: (workspace / "memory" / "a.md").write_text("x"))
            assert set(seen.changed) == {f"memory{os.sep}a.md"}
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    asyncio.run(main())
