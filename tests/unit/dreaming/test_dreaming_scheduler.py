"""The nightly loop, driven by a fake clock: one run per night whatever happens to the
process or the clock, catch-up and quiet-window retries, the concurrency limit, re-plans."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Coroutine
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from dreaming_fakes import FakeRunner, Harness
from dreaming_helpers import settings, utc
from dreaming_procs import WAIT, reap, spawn

from services.dreaming.model.values import INTERRUPTED
from services.dreaming.schedule.scheduler import CATCH_UP, Readiness, SystemClock
from services.dreaming.schedule.slots import slot
from services.dreaming.schedule.state import StateStore

T = TypeVar("T")
N1, N2 = date(2024, 6, 1), date(2024, 6, 2)
PLAIN = settings(dream_hour=3, dream_minute=0, stagger_window_minutes=0)  # 03:00 UTC sharp


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def scripted(*answers: Readiness) -> Any:
    """A check that gives ``answers`` in turn, then go."""
    queue = list(answers)
    return lambda _agent, _night: queue.pop(0) if queue else Readiness.go()


# --- every night once ------------------------------------------------------------------------


def test_one_run_per_night_over_a_month_across_a_dst_change(tmp_path: Path) -> None:
    s = settings(dream_timezone="Europe/Berlin", dream_hour=3, dream_minute=0, stagger_window_minutes=30)

    async def scenario() -> list[tuple[str, date, datetime]]:
        async with Harness(tmp_path, {"alfred": s}, utc(2024, 3, 15, 12)) as h:
            await h.advance_to(utc(2024, 4, 14, 12))
            return h.runner.runs

    runs = run(scenario())
    assert [night for _, night, _ in runs] == [date(2024, 3, 16) + timedelta(days=i) for i in range(30)]
    assert all(when == slot(night, s, "alfred") for _, night, when in runs)
    assert StateStore(tmp_path).read("alfred").runs_total == 30


def test_a_restart_during_the_night_does_not_run_it_again(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int, datetime | None]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2)) as first:
            await first.advance_to(utc(2024, 6, 1, 3, 30))
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 4)) as second:
            await second.advance_to(utc(2024, 6, 1, 8))
            return len(first.runner.runs), len(second.runner.checks), second.scheduler.next_run("alfred")

    assert run(scenario()) == (1, 0, utc(2024, 6, 2, 3))


def test_a_process_that_dies_mid_run_never_gets_a_second_run(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    crashed = spawn("schedule", str(tmp_path), "2024-06-01T03:00:00+00:00", str(log), "crash")
    try:
        assert crashed.wait(WAIT) == 3 and len(log.read_text().splitlines()) == 1
    finally:
        reap(crashed)
    # Restarted (a crash loop would do this again and again) within the catch-up window.
    for minute in (1, 10, 59):
        again = spawn("schedule", str(tmp_path), f"2024-06-01T03:{minute:02d}:00+00:00", str(log))
        try:
            assert again.stdout is not None and again.stdout.readline() == "runs 0\n"
        finally:
            reap(again)
    assert len(log.read_text().splitlines()) == 1
    state = StateStore(tmp_path).read("alfred")
    assert state.last_night == N1 and state.last_run is not None and state.last_run.status == INTERRUPTED


def test_two_scheduler_processes_on_one_home_run_the_night_once(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    procs = [spawn("schedule", str(tmp_path), "2024-06-01T03:00:30+00:00", str(log), "hold") for _ in range(2)]
    try:
        outs = {proc.stdout: proc for proc in procs if proc.stdout is not None}
        # The winner holds its run until told, so the first to report is the one that
        # found the lock taken (or the night claimed) while the other was running.
        ready, _, _ = select.select(list(outs), [], [], WAIT)
        assert ready, "neither scheduler reported"
        loser = outs[ready[0]]
        winner = next(proc for proc in procs if proc is not loser)
        assert ready[0].readline() == "runs 0\n"
        assert winner.stdin is not None and winner.stdout is not None
        winner.stdin.write("go\n")
        winner.stdin.flush()
        assert winner.stdout.readline() == "runs 1\n"
    finally:
        for proc in procs:
            reap(proc)
    assert len(log.read_text().splitlines()) == 1
    assert StateStore(tmp_path).read("alfred").runs_total == 1


# --- missed slots -----------------------------------------------------------------------------


def test_a_late_start_within_the_catch_up_window_runs_the_night_at_once(tmp_path: Path) -> None:
    late = utc(2024, 6, 1, 3) + CATCH_UP - timedelta(seconds=1)

    async def scenario() -> list[tuple[str, date, datetime]]:
        async with Harness(tmp_path, {"alfred": PLAIN}, late) as h:
            await h.advance_to(utc(2024, 6, 1, 12))
            return h.runner.runs

    assert run(scenario()) == [("alfred", N1, late)]


def test_a_start_past_the_catch_up_window_waits_for_the_next_night(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, datetime | None]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 3) + CATCH_UP) as h:
            await h.advance_to(utc(2024, 6, 2, 2))
            return len(h.runner.checks), h.scheduler.next_run("alfred")

    assert run(scenario()) == (0, utc(2024, 6, 2, 3))


def test_several_missed_nights_give_one_catch_up_run_not_a_burst(tmp_path: Path) -> None:
    with StateStore(tmp_path).lock("alfred") as held:
        held.claim_night(N1)

    async def scenario() -> list[date]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 5, 4)) as h:  # down for four nights
            await h.advance_to(utc(2024, 6, 5, 23))
            return h.runner.nights()

    assert run(scenario()) == [date(2024, 6, 5)]


# --- quiet-window retries -----------------------------------------------------------------------


def test_an_active_agent_is_retried_after_quiet_minutes_and_the_skip_claims_nothing(tmp_path: Path) -> None:
    s = settings(dream_hour=3, dream_minute=0, stagger_window_minutes=0, quiet_minutes=30)

    async def scenario() -> tuple[list[datetime], date | None, list[tuple[str, date, datetime]]]:
        runner = FakeRunner(verdicts=scripted(Readiness.retry("session active")))
        async with Harness(tmp_path, {"alfred": s}, utc(2024, 6, 1, 2), runner=runner) as h:
            await h.advance_to(utc(2024, 6, 1, 3, 10))
            claimed_meanwhile = h.store.read("alfred").last_night
            await h.advance_to(utc(2024, 6, 1, 9))
            return [when for _, _, when in runner.checks], claimed_meanwhile, runner.runs

    checks, claimed_meanwhile, runs = run(scenario())
    assert checks == [utc(2024, 6, 1, 3), utc(2024, 6, 1, 3, 30)]
    assert claimed_meanwhile is None
    assert runs == [("alfred", N1, utc(2024, 6, 1, 3, 30))]


def test_a_retry_honours_not_before_but_never_comes_sooner_than_five_minutes(tmp_path: Path) -> None:
    answers = scripted(Readiness.retry("active", not_before=utc(2024, 6, 1, 3, 1)),
                       Readiness.retry("active", not_before=utc(2024, 6, 1, 3, 47)))

    async def scenario() -> list[datetime]:
        runner = FakeRunner(verdicts=answers)
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2), runner=runner) as h:
            await h.advance_to(utc(2024, 6, 1, 9))
            return [when for _, _, when in runner.checks]

    assert run(scenario()) == [utc(2024, 6, 1, 3), utc(2024, 6, 1, 3, 5), utc(2024, 6, 1, 3, 47)]


def test_retries_stop_when_the_catch_up_window_closes(tmp_path: Path) -> None:
    s = settings(dream_hour=3, dream_minute=0, stagger_window_minutes=0, quiet_minutes=60)

    async def scenario() -> tuple[list[datetime], datetime | None, int]:
        runner = FakeRunner(verdicts=lambda _a, _n: Readiness.retry("always busy"))
        async with Harness(tmp_path, {"alfred": s}, utc(2024, 6, 1, 2), runner=runner) as h:
            await h.advance_to(utc(2024, 6, 1, 12))
            return [when for _, _, when in runner.checks], h.scheduler.next_run("alfred"), len(runner.runs)

    checks, next_run, runs = run(scenario())
    assert checks == [utc(2024, 6, 1, hour) for hour in range(3, 9)]  # 03:00 .. 08:00, all before 09:00
    assert next_run == utc(2024, 6, 2, 3) and runs == 0


def test_a_final_skip_claims_the_night(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        runner = FakeRunner(verdicts=lambda _a, _n: Readiness.skip("no transcripts"))
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2), runner=runner) as h:
            await h.advance_to(utc(2024, 6, 1, 9))
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 4)) as again:
            await again.advance_to(utc(2024, 6, 1, 9))
        return len(runner.checks) + len(again.runner.checks), len(runner.runs) + len(again.runner.runs)

    assert run(scenario()) == (1, 0)
    state = StateStore(tmp_path).read("alfred")
    assert state.last_night == N1 and state.last_run is not None
    assert (state.last_run.status, state.last_run.reason) == ("skipped", "no transcripts")


def test_a_run_lock_held_elsewhere_is_retried_five_minutes_later(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, datetime | None, list[tuple[str, date, datetime]]]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2)) as h:
            manual = h.store.lock("alfred").acquire()  # e.g. a RunNow in progress
            await h.advance_to(utc(2024, 6, 1, 3, 1))
            checks, next_run = len(h.runner.checks), h.scheduler.next_run("alfred")
            manual.release()
            await h.advance_to(utc(2024, 6, 1, 4))
            return checks, next_run, h.runner.runs

    assert run(scenario()) == (0, utc(2024, 6, 1, 3, 5), [("alfred", N1, utc(2024, 6, 1, 3, 5))])


# --- clock steps ----------------------------------------------------------------------------------


def test_a_clock_stepped_back_after_a_run_does_not_run_the_night_again(tmp_path: Path) -> None:
    async def scenario() -> tuple[datetime | None, list[date]]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 3, 30))
            await h.step(utc(2024, 5, 31, 2))  # back by more than a day
            next_run = h.scheduler.next_run("alfred")
            await h.advance_to(utc(2024, 6, 2, 4))
            return next_run, h.runner.nights()

    assert run(scenario()) == (utc(2024, 6, 2, 3), [N1, N2])


def test_a_clock_stepped_forward_gives_at_most_the_one_catch_up_run(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[date], datetime | None]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 3, 30))
            await h.step(utc(2024, 6, 4, 5))  # three nights on, inside the 4th's window
            await h.step(utc(2024, 6, 7, 10))  # three more, past the 7th's window
            return h.runner.nights(), h.scheduler.next_run("alfred")

    assert run(scenario()) == ([N1, date(2024, 6, 4)], utc(2024, 6, 8, 3))


# --- which agents, how many at once, config changes ------------------------------------------------------


def test_disabled_agents_and_zero_max_changes_are_never_scheduled(tmp_path: Path) -> None:
    agents = {
        "off": settings(enabled=False, stagger_window_minutes=0),
        "zero": settings(max_changes_per_run=0, stagger_window_minutes=0),
        "alfred": PLAIN,
    }

    async def scenario() -> tuple[set[str], list[datetime | None]]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 4, 4))
            nexts = [h.scheduler.next_run(a) for a in ("off", "zero", "nobody")]
            return {agent for agent, _, _ in h.runner.checks}, nexts

    assert run(scenario()) == ({"alfred"}, [None, None, None])
    assert not (tmp_path / "agents" / "off").exists() and not (tmp_path / "agents" / "zero").exists()


def test_at_most_max_concurrent_runs_at_once(tmp_path: Path) -> None:
    agents = {f"agent-{i}": PLAIN for i in range(5)}

    async def scenario() -> tuple[int, int, int]:
        runner = FakeRunner()
        runner.gate = asyncio.Event()
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2), runner=runner, max_concurrent=2) as h:
            h.clock.set(utc(2024, 6, 1, 3))
            async with runner.started:
                await asyncio.wait_for(runner.started.wait_for(lambda: runner.active == 2), WAIT)
            for _ in range(200):  # give a third run every chance to start
                await asyncio.sleep(0)
            active = runner.active
            runner.gate.set()
            await h.settle()
            return active, runner.peak, len(runner.runs)

    assert run(scenario()) == (2, 2, 5)


def test_a_changed_dream_hour_is_followed_on_replan(tmp_path: Path) -> None:
    agents = {"alfred": PLAIN}

    async def scenario() -> tuple[datetime | None, list[tuple[str, date, datetime]]]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            agents["alfred"] = settings(dream_hour=5, dream_minute=0, stagger_window_minutes=0)
            h.scheduler.replan()
            await h.settle()
            planned = h.scheduler.next_run("alfred")
            await h.advance_to(utc(2024, 6, 1, 6))
            return planned, h.runner.runs

    assert run(scenario()) == (utc(2024, 6, 1, 5), [("alfred", N1, utc(2024, 6, 1, 5))])


def test_a_new_agent_is_picked_up_without_replan_within_the_replan_interval(tmp_path: Path) -> None:
    agents = {"alfred": PLAIN}

    async def scenario() -> list[tuple[str, date, datetime]]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 5, 30))
            agents["bertha"] = settings(dream_hour=6, dream_minute=0, stagger_window_minutes=0)
            await h.advance_to(utc(2024, 6, 1, 7))
            return h.runner.runs

    assert run(scenario()) == [("alfred", N1, utc(2024, 6, 1, 3)), ("bertha", N1, utc(2024, 6, 1, 6))]


def test_moving_the_hour_later_after_tonights_run_does_not_run_tonight_again(tmp_path: Path) -> None:
    agents = {"alfred": PLAIN}

    async def scenario() -> list[date]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 4))
            agents["alfred"] = settings(dream_hour=5, dream_minute=0, stagger_window_minutes=0)
            h.scheduler.replan()
            await h.advance_to(utc(2024, 6, 2, 6))
            return h.runner.nights()

    assert run(scenario()) == [N1, N2]


def test_an_agent_removed_from_the_config_leaves_nothing_in_the_scheduler(tmp_path: Path) -> None:
    agents = {"alfred": PLAIN, "bertha": PLAIN, "bad": settings(dream_timezone="Mars/Olympus")}

    async def scenario() -> tuple[frozenset[str], frozenset[str]]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 4))  # both nights claimed, the bad zone noted
            before = h.scheduler.kept()
            del agents["bertha"], agents["bad"]
            h.scheduler.replan()
            await h.settle()
            return before, h.scheduler.kept()

    assert run(scenario()) == ({"alfred", "bertha", "bad"}, {"alfred"})


def test_an_agent_with_a_bad_time_zone_is_not_scheduled_and_the_others_are(tmp_path: Path) -> None:
    agents = {"bad": settings(dream_timezone="Mars/Olympus"), "alfred": PLAIN}

    async def scenario() -> tuple[set[str], datetime | None]:
        async with Harness(tmp_path, agents, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 1, 4))
            return {agent for agent, _, _ in h.runner.runs}, h.scheduler.next_run("bad")

    assert run(scenario()) == ({"alfred"}, None)


# --- failures and stopping ------------------------------------------------------------------------


def test_a_run_that_raises_is_recorded_failed_and_not_retried(tmp_path: Path) -> None:
    async def scenario() -> int:
        runner = FakeRunner()
        runner.fail = RuntimeError("reviewer exploded")
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2), runner=runner) as h:
            await h.advance_to(utc(2024, 6, 1, 10))
            return len(runner.runs)

    assert run(scenario()) == 1
    state = StateStore(tmp_path).read("alfred")
    assert state.last_night == N1 and state.last_run is not None and state.last_run.status == "failed"


def test_stopping_mid_run_records_it_interrupted_and_keeps_the_claim(tmp_path: Path) -> None:
    async def scenario() -> int:
        runner = FakeRunner()
        runner.gate = asyncio.Event()  # never set: the run is in progress when we stop
        h = Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2), runner=runner)
        await h.__aenter__()
        h.clock.set(utc(2024, 6, 1, 3))
        async with runner.started:
            await asyncio.wait_for(runner.started.wait_for(lambda: runner.active == 1), WAIT)
        await h.stop()
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 3, 20)) as again:
            await again.advance_to(utc(2024, 6, 1, 9))
            return len(again.runner.checks)

    assert run(scenario()) == 0
    state = StateStore(tmp_path).read("alfred")
    assert state.last_night == N1 and state.last_run is not None and state.last_run.status == INTERRUPTED


def test_a_corrupt_state_file_skips_that_night_and_the_next_one_runs(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "alfred" / "dreaming.json"
    path.parent.mkdir(parents=True)
    path.write_text("{ truncated")

    async def scenario() -> list[date]:
        async with Harness(tmp_path, {"alfred": PLAIN}, utc(2024, 6, 1, 2)) as h:
            await h.advance_to(utc(2024, 6, 2, 4))
            return h.runner.nights()

    assert run(scenario()) == [N2]
    assert path.with_name("dreaming.json.corrupt-1").read_text() == "{ truncated"


def test_the_system_clock_returns_at_a_past_deadline_or_a_wake() -> None:
    async def scenario() -> None:
        clock, wake = SystemClock(), asyncio.Event()
        await clock.sleep_until(clock.now() - timedelta(seconds=1), wake)
        wake.set()
        await clock.sleep_until(clock.now() + timedelta(days=1), wake)

    run(scenario())
