"""gateway.watching: the one facade over watchfiles (the watcher's and the KB's file watch)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from structlog.testing import capture_logs

from gateway.watching import Change, WatchTiming, batches, keep_watching

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

