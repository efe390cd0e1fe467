"""gateway.watching: the one facade over file watching (the watcher's, the KB's and the live config's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gateway import inotify
from gateway.watching import Batch, Change, WatchTiming, batches, keep_watching

FAST = WatchTiming(debounce_ms=1, step_ms=5, tick_ms=50)
DEADLINE_S = 20.0


def test_a_watch_reports_every_file_unfiltered_and_ends_on_stop(tmp_path: Path) -> None:
    """Every event reaches the caller, even names watchfiles' default filter drops (dot and swap files)."""
    seen: list[tuple[Change, str]] = []

    async def main() -> None:
        stop = asyncio.Event()
        wanted = {str(tmp_path / ".note.md.swp"), str(tmp_path / "note.md")}

        async def writer() -> None:
            for name in sorted(wanted):
                Path(name).write_text("x", encoding="utf-8")

        async with batches([str(tmp_path)], stop, FAST) as stream:
            quiet = 0
            async for batch in stream:
                if not batch:
                    quiet += 1
                    if quiet == 1:  # the watch is up: a quiet tick passed
                        asyncio.get_running_loop().create_task(writer())
                seen.extend(batch)
                if wanted <= {path for _, path in seen}:
                    stop.set()  # the iteration ends at the next step

    asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    assert {(Change.added, str(tmp_path / ".note.md.swp")), (Change.added, str(tmp_path / "note.md"))} <= set(seen)


def test_a_flat_watch_sees_the_top_level_only(tmp_path: Path) -> None:
    """``recursive=False`` (the watcher's): a write under a sub-folder is not reported, one at the top is."""
    (tmp_path / "memory" / "deep").mkdir(parents=True)
    seen: list[tuple[Change, str]] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def writer() -> None:
            (tmp_path / "memory" / "deep" / "note.md").write_text("x", encoding="utf-8")
            (tmp_path / "memory" / "note.md").write_text("x", encoding="utf-8")
            (tmp_path / "SOUL.md").write_text("x", encoding="utf-8")  # last: a batch with it has the others, if seen

        async with batches([str(tmp_path)], stop, FAST, recursive=False) as stream:
            quiet = 0
            async for batch in stream:
                if not batch:
                    quiet += 1
                    if quiet == 1:
                        asyncio.get_running_loop().create_task(writer())
                seen.extend(batch)
                if str(tmp_path / "SOUL.md") in {path for _, path in seen}:
                    stop.set()

    asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    assert {path for _, path in seen} <= {str(tmp_path / "SOUL.md"), str(tmp_path / "memory")}


def test_an_os_error_is_logged_and_the_watch_planned_again_a_tick_later() -> None:
    calls: list[str] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def session() -> None:
            calls.append("session")
            if len(calls) == 1:
                raise OSError("inotify watch limit reached")
            stop.set()

        await keep_watching(session, stop, FAST, error_event="test_watch_error", after_error=lambda: calls.append("after"))

    with capture_logs() as logs:
        asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    assert calls == ["session", "after", "session"]
    assert [(e["event"], e["error"]) for e in logs if e["event"] == "test_watch_error"] == [
        ("test_watch_error", "inotify watch limit reached")]



async def _collect(stream: AsyncIterator[Batch], stop: asyncio.Event, act: Callable[[], None], done: Callable[[set[tuple[Change, str]]], bool]) -> set[tuple[Change, str]]:
    """Run ``act`` once the watch is up (at its first quiet tick), gather batches until ``done`` says so."""
    seen: set[tuple[Change, str]] = set()
    acted = False
    async for batch in stream:
        if not batch and not acted:
            acted = True
            act()
        seen |= batch
        if done(seen):
            stop.set()
    return seen


def test_a_recursive_watch_follows_folders_made_and_moved_away(tmp_path: Path) -> None:
    """A folder made under the root is watched from its creation on; one moved out of the root is not any more."""
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    (root / "old").mkdir(parents=True)
    outside.mkdir()

    def later() -> None:
        (root / "old").rename(outside / "old")
        (outside / "old" / "gone.md").write_text("x", encoding="utf-8")  # not under the root: not reported
        (root / "new" / "last.md").write_text("x", encoding="utf-8")

    async def main() -> set[tuple[Change, str]]:
        stop = asyncio.Event()
        seen: set[tuple[Change, str]] = set()
        async with batches([str(root)], stop, FAST) as stream:
            async for batch in stream:
                if not batch and not seen:
                    (root / "new").mkdir()
                seen |= batch
                if batch and {(Change.added, str(root / "new"))} == batch:
                    later()  # its watch was taken as its event was read
                if str(root / "new" / "last.md") in {p for _, p in seen}:
                    stop.set()
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    paths = {p for _, p in seen}
    assert (Change.deleted, str(root / "old")) in seen
    assert str(outside / "old" / "gone.md") not in paths and str(root / "old" / "gone.md") not in paths


def test_a_deleted_root_is_reported_as_deleted(tmp_path: Path) -> None:
    """The watcher re-plans when a workspace itself goes away: the root's own path comes as ``deleted``."""
    root = tmp_path / "ws"
    root.mkdir()

    async def main() -> set[tuple[Change, str]]:
        stop = asyncio.Event()
        async with batches([str(root)], stop, FAST, recursive=False) as stream:
            return await _collect(stream, stop, root.rmdir, lambda seen: (Change.deleted, str(root)) in seen)

    assert (Change.deleted, str(root)) in asyncio.run(asyncio.wait_for(main(), DEADLINE_S))


def test_without_inotify_watchfiles_watches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no inotify (not Linux) the same iterator comes from watchfiles."""
    monkeypatch.setattr(inotify, "available", lambda: False)

    async def main() -> set[tuple[Change, str]]:
        stop = asyncio.Event()
        async with batches([str(tmp_path)], stop, FAST) as stream:
            return await _collect(stream, stop, lambda: (tmp_path / "a.md").write_text("x", encoding="utf-8"),
                                  lambda seen: str(tmp_path / "a.md") in {p for _, p in seen})  # fmt: skip

    assert (Change.added, str(tmp_path / "a.md")) in asyncio.run(asyncio.wait_for(main(), DEADLINE_S))


def test_a_quiet_watch_does_not_wake_between_ticks(tmp_path: Path) -> None:
    """Nothing happens: the watch yields one empty batch per tick and nothing else (no step loop)."""
    slow = WatchTiming(debounce_ms=1, step_ms=5, tick_ms=300)
    yielded: list[Batch] = []

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.0, stop.set)
        async with batches([str(tmp_path)], stop, slow) as stream:
            async for batch in stream:
                yielded.append(batch)

    asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    assert yielded and all(not batch for batch in yielded) and len(yielded) <= 4
