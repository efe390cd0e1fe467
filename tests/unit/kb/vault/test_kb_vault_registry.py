"""The KB's vaults manager: one write at a time per vault (also when a caller is cancelled), the vault GC
once per vault per day with the most cautious settings of its agents, and recall recording."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.config import build
from services.kb.vault import notes as vault, gc as vault_gc
from services.kb.vault.registry import Vaults


def make(tmp_path: Path, executor: ThreadPoolExecutor) -> Vaults:
    config = build({"agents": [{"id": "alfred"}, {"id": "bob"}]}, tmp_path)
    return Vaults(config.agents, executor)


def test_a_cancelled_write_holds_the_vault_until_its_worker_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An RPC cancelled (deadline, caller gone) while its worker thread writes must not let the next
    write run on the same connection beside it: the lock is held until the worker returns."""
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(store: Any, name: str, content: str, *, confirm: bool = False) -> vault.CreateResult:
        entered.set()
        assert release.wait(30)
        order.append("first write done")
        return vault.CreateResult(name, False, (), (), False, False, "held back")

    def second(store: Any, name: str) -> vault.DeleteResult:
        order.append("second write ran")
        return vault.DeleteResult(name, True)

    monkeypatch.setattr(vault, "create", slow)
    monkeypatch.setattr(vault, "delete", second)
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = make(tmp_path, executor)

    async def scenario() -> tuple[bool, bool]:
        first = asyncio.ensure_future(vaults.create("alfred", "n", "x", False))
        await asyncio.to_thread(entered.wait, 30)
        first.cancel()
        await asyncio.sleep(0)  # a yield: the cancellation reaches the write
        held = not first.done()
        follower = asyncio.ensure_future(vaults.delete("bob", "n"))
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await follower
        return held, first.cancelled()

    try:
        held, cancelled = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert held and cancelled
    assert order == ["first write done", "second write ran"]


NOW = datetime(2026, 6, 1, 3, 0, 0, tzinfo=UTC)
OLD = NOW.timestamp() - 300 * 86_400


def gc_vaults(tmp_path: Path, executor: ThreadPoolExecutor, agents: list[dict[str, Any]], clock: list[datetime]) -> Vaults:
    config = build({"agents": agents}, tmp_path)
    return Vaults(config.agents, executor, clock=lambda: clock[0], day_zone=UTC)


def old_note(vault_dir: Path, name: str) -> None:
    notes = vault_dir / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / f"{name}.md").write_text(f"The {name} note about marrowfin beacons.\n")
    os.utime(notes / f"{name}.md", (OLD, OLD))


def test_two_agents_of_one_vault_run_its_gc_once_a_day(tmp_path: Path) -> None:
    clock = [NOW]
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = gc_vaults(tmp_path, executor, [{"id": "alfred"}, {"id": "bob"}], clock)
    vault_dir = tmp_path / "shared" / "kb" / "global"
    old_note(vault_dir, "beacon")

    async def scenario() -> list[vault_gc.GcReport]:
        first = await asyncio.gather(vaults.collect("alfred"), vaults.collect("bob"))
        old_note(vault_dir, "lantern")
        later_that_day = [await vaults.collect("bob")]
        clock[0] = NOW + timedelta(days=1)
        return [*first, *later_that_day, await vaults.collect("bob"), await vaults.collect("alfred")]

    try:
        reports = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert sorted(r.outcome for r in reports[:2]) == ["already-ran", "ran"]
    ran = next(r for r in reports[:2] if r.outcome == "ran")
    assert ran.retired == ("beacon",) and reports[2].outcome == "already-ran" and reports[2].by == ran.by
    assert (reports[3].outcome, reports[3].retired, reports[3].day) == ("ran", ("lantern",), "2026-06-02")
    assert reports[4].outcome == "already-ran"


def test_the_gc_off_for_one_agent_of_the_vault_does_nothing(tmp_path: Path) -> None:
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = gc_vaults(tmp_path, executor, [{"id": "alfred"}, {"id": "bob", "knowledge": {"shared": {"gc": {"enabled": False}}}}], [NOW])
    vault_dir = tmp_path / "shared" / "kb" / "global"
    old_note(vault_dir, "beacon")
    try:
        report = asyncio.run(vaults.collect("alfred"))
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert report.outcome == "disabled" and "gc.enabled is false for agent bob" in report.message
    assert sorted(p.name for p in (vault_dir / "notes").iterdir()) == ["beacon.md"]
    assert not (vault_dir / "kb.sqlite").exists()  # nothing claimed, nothing opened


def test_a_vault_takes_the_most_cautious_settings_of_its_agents(tmp_path: Path) -> None:
    executor = ThreadPoolExecutor(max_workers=1)
    agents: list[dict[str, Any]] = [
        {"id": "alfred", "knowledge": {"shared": {"gc": {"staleDays": 30, "maxRetirementsPerRun": 80}}}},
        {"id": "bob", "knowledge": {"shared": {"gc": {"staleDays": 365, "maxRetirementsPerRun": 5}}}},
        {"id": "other", "knowledge": {"shared": {"project": "other", "gc": {"enabled": False}}}},
        {"id": "off", "knowledge": {"shared": {"enabled": False, "gc": {"staleDays": 9999}}}},
    ]
    vaults = gc_vaults(tmp_path, executor, agents, [NOW])
    try:
        settings, off = vaults.gc_settings(tmp_path / "shared" / "kb" / "global")
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert (settings.enabled, settings.stale_days, settings.max_retirements_per_run, off) == (True, 365, 5, [])


def test_an_empty_vault_is_not_created_by_its_gc(tmp_path: Path) -> None:
    executor = ThreadPoolExecutor(max_workers=1)
    vaults = gc_vaults(tmp_path, executor, [{"id": "alfred"}], [NOW])
    try:
        report = asyncio.run(vaults.collect("alfred"))
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert "no notes yet" in report.message and not (tmp_path / "shared").exists()


def test_recorded_retrievals_reach_the_gc_and_an_agent_without_recording_adds_none(tmp_path: Path) -> None:
    clock = [NOW]
    executor = ThreadPoolExecutor(max_workers=1)
    agents: list[dict[str, Any]] = [{"id": "alfred"}, {"id": "quiet", "dreaming": {"staleness": {"recordRetrievals": False}}}]
    vaults = gc_vaults(tmp_path, executor, agents, clock)
    vault_dir = tmp_path / "shared" / "kb" / "global"
    old_note(vault_dir, "beacon")
    old_note(vault_dir, "lantern")

    async def scenario() -> vault_gc.GcReport:
        result, _ = await vaults.search("alfred", "marrowfin beacon", 5, True)
        hits = [h for h in result.hits if h.path == "notes/beacon.md"]
        vaults.record("alfred", hits, "search")  # what the servicer hands over after replying
        vaults.record("quiet", [vault_gc.note_ref("lantern", "x")], "get")
        return await vaults.collect("alfred")

    try:
        report = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert report.folded == 1 and report.retired == ("lantern",)


def test_the_vault_writer_hands_its_page_cache_back_after_each_write(tmp_path: Path) -> None:
    """Kept across writes, the writer's page cache would grow with every page of the vault written (up
    to its 64 MiB): KB memory that grows for as long as notes are shared."""
    import apsw

    executor = ThreadPoolExecutor(max_workers=2)
    vaults = make(tmp_path, executor)
    body = " ".join(f"word{i}" for i in range(400))

    async def scenario() -> list[int]:
        used = []
        for n in range(60):
            assert (await vaults.create("alfred", f"note {n}", f"# Note {n}\n\n- {n} {body}\n", True)).created
            (v,) = vaults._vaults.values()
            assert v.writer is not None
            used.append(v.writer.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0])
        return used

    try:
        used = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    assert max(used) < 256 * 1024, used  # a few pages at most, not the vault (over 600 KB after these 60 before)


def test_a_statement_left_open_on_the_vault_writer_does_not_lock_every_later_write(tmp_path: Path) -> None:
    """A statement never reset pins the writer's read snapshot: once another connection commits,
    each ``BEGIN IMMEDIATE`` on that writer fails at once with SQLITE_BUSY_SNAPSHOT, and every shared
    write would answer an error from then on. The next write finds the writer holding a transaction,
    closes it and opens a fresh one."""
    import apsw

    from services.kb.vault import note_index

    executor = ThreadPoolExecutor(max_workers=2)
    vaults = make(tmp_path, executor)

    async def scenario() -> tuple[Any, Any, list[str]]:
        assert (await vaults.create("alfred", "first", "# First\n\nmarrowfin beacons\n", True)).created
        (v,) = vaults._vaults.values()
        stuck = v.writer
        assert stuck is not None
        left_open = stuck.execute("SELECT path FROM kb_sources, (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3)")
        next(left_open)  # one row of three read: the statement stays active, its snapshot with it
        other = apsw.Connection(str(v.directory / note_index.INDEX_FILE))
        other.execute("UPDATE kb_sources SET checked_ns = checked_ns + 1")  # a commit elsewhere
        other.close()
        with pytest.raises(apsw.BusyError):  # what every write met before the writer was checked
            stuck.execute("BEGIN IMMEDIATE")
        assert (await vaults.create("bob", "second", "# Second\n\nkelpwise lanterns\n", True)).created
        assert (await vaults.update("alfred", "first", "# First\n\nmarrowfin beacons, twice\n", True)).updated
        result, _ = await vaults.search("alfred", "kelpwise", 5, True)
        return stuck, v.writer, [h.path for h in result.hits]

    try:
        stuck, writer, paths = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    assert writer is not stuck
    assert paths == ["notes/second.md"]


def test_a_reflection_snapshot_holds_no_write_lock_and_a_failed_plan_gives_its_claim_up(tmp_path: Path) -> None:
    """The weekly reflection's slow read (``reflect_read``: every note read, the similarity search) runs
    with a connection of its own and no lock: a create made meanwhile is written at once, not after it.
    A plan given up (``planning.release``) frees the vault for the next run at once."""
    from services.kb.vault.reflection import plan as planning

    entered, release = threading.Event(), threading.Event()
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = make(tmp_path, executor)

    def slow_snapshot(store: Any) -> planning.Snapshot:
        entered.set()
        assert release.wait(30)
        return planning.snapshot(store)

    async def scenario() -> tuple[bool, str, str, str]:
        await vaults.create("alfred", "kiln", "# Kiln\n\n- The kiln fires at cone 10.\n", False)
        now = lambda: datetime.now(UTC).timestamp()  # noqa: E731 - the reflection steps take epoch seconds
        assert await vaults.reflect("global", lambda store, _: planning.claim(store, "R-1", now())) == ""
        reading = asyncio.ensure_future(vaults.reflect_read("global", slow_snapshot))
        await asyncio.to_thread(entered.wait, 30)
        created = await vaults.create("bob", "glaze", "# Glaze\n\n- Celadon, cone 10.\n", False)
        written_while_reading = created.created and not reading.done()
        release.set()
        snap = await reading
        plan = await vaults.reflect("global", lambda store, _: planning.commit(store, "R-1", snap))
        busy = await vaults.reflect("global", lambda store, _: planning.claim(store, "R-2", now()))
        await vaults.reflect("global", lambda store, _: planning.release(store, "R-1", now()))
        free = await vaults.reflect("global", lambda store, _: planning.claim(store, "R-2", now()))
        # the snapshot's connection weighs the seed words as the writer's does (its term counts work)
        counts = await vaults.reflect_read("global", lambda store: store.term_counts(["kiln", "glaze"]))
        assert counts == await vaults.reflect("global", lambda store, _: store.term_counts(["kiln", "glaze"])) == {
            "kiln": 1, "glaze": 1}
        return written_while_reading, plan.busy_with, busy, free

    try:
        written, plan_busy, busy, free = asyncio.run(scenario())
    finally:
        release.set()
        vaults.close()
        executor.shutdown(wait=True)
    assert written, "the create waited for the reflection's snapshot"
    assert plan_busy == "" and busy == "R-1" and free == ""
