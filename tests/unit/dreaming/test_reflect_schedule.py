"""The vault reflection's weekly slot and loop (services/dreaming/reflect/weekly.py, scheduler.py): the slot
on the configured weekday and time in its zone with the vault's stagger, DST, the week of an instant, the
next slot; a vault first seen waits for its next slot, a missed week runs once, never twice, a disabled
vault never, a failed run is tried again while its week lasts, a busy one is not."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from reflect_fakes import vault

from gateway.config import VaultReflectionSettings
from gateway.errors import Aborted, FailedPrecondition
from services.dreaming.reflect.scheduler import RETRY, STATE_FILE, WeeklyScheduler, WeekState
from services.dreaming.reflect.vaults import Vault
from services.dreaming.reflect.weekly import next_slot, slot, stagger_key, week_of
from services.dreaming.schedule.slots import InvalidTimezone, stagger_seconds

SUNDAY_4 = VaultReflectionSettings()  # sunday 04:00 UTC
SUNDAY = date(2026, 12, 6)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_default_slot_is_sunday_at_four_utc() -> None:
    assert SUNDAY.weekday() == 6 == SUNDAY_4.weekday
    assert slot(SUNDAY, SUNDAY_4, "team", 0) == at("2026-12-06T04:00:00")
    with pytest.raises(ValueError, match="not on weekday 6"):
        slot(SUNDAY + timedelta(days=1), SUNDAY_4, "team", 0)


def test_the_week_of_an_instant_is_the_latest_slot_at_or_before_it() -> None:
    assert week_of(at("2026-12-06T04:00:00"), SUNDAY_4, "team", 0) == SUNDAY
    assert week_of(at("2026-12-06T03:59:59"), SUNDAY_4, "team", 0) == SUNDAY - timedelta(days=7)
    assert week_of(at("2026-12-12T23:00:00"), SUNDAY_4, "team", 0) == SUNDAY
    assert next_slot(at("2026-12-06T04:00:00"), SUNDAY_4, "team", 0) == (SUNDAY + timedelta(days=7), at("2026-12-13T04:00:00"))
    assert next_slot(at("2026-12-02T10:00:00"), SUNDAY_4, "team", 0) == (SUNDAY, at("2026-12-06T04:00:00"))
    with pytest.raises(ValueError, match="aware"):
        week_of(datetime(2026, 12, 6), SUNDAY_4, "team", 0)


def test_a_zone_and_weekday_and_the_vaults_stagger_move_the_slot() -> None:
    berlin = replace(SUNDAY_4, weekday=0, hour=23, minute=30, timezone="Europe/Berlin")
    monday = date(2026, 12, 7)
    assert slot(monday, berlin, "team", 0) == at("2026-12-07T22:30:00")  # CET is UTC+1
    offset = stagger_seconds(stagger_key("team"), 30)
    assert 0 < offset < 1800 and stagger_seconds(stagger_key("other"), 30) != offset
    assert slot(monday, berlin, "team", 30) == at("2026-12-07T22:30:00") + timedelta(seconds=offset)
    assert week_of(at("2026-12-07T22:30:00") + timedelta(seconds=offset), berlin, "team", 30) == monday
    with pytest.raises(InvalidTimezone):
        slot(monday, replace(berlin, timezone="Mars/Olympus"), "team", 0)


def test_a_dst_gap_shifts_the_slot_forward_as_the_nightly_does() -> None:
    new_york = replace(SUNDAY_4, hour=2, minute=30, timezone="America/New_York")
    spring_forward = date(2027, 3, 14)  # a Sunday; 02:30 does not exist
    assert slot(spring_forward, new_york, "team", 0) == at("2027-03-14T07:30:00")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now_at = now

    def now(self) -> datetime:
        return self.now_at

    async def sleep_until(self, deadline: datetime, wake: asyncio.Event) -> None:
        raise AssertionError("not used: the tests call tick")


class Runner:
    def __init__(self, error: Exception | None = None) -> None:
        self.ran: list[str] = []
        self.error = error

    async def __call__(self, v: Vault) -> object:
        self.ran.append(v.project)
        if self.error is not None:
            raise self.error
        return None


def loop(home: Path, now: datetime, vaults: dict[str, Vault], runner: Runner) -> tuple[WeeklyScheduler, Clock]:
    clock = Clock(now)
    return WeeklyScheduler(lambda: vaults, runner, WeekState(home), clock), clock


def ticks(scheduler: WeeklyScheduler, clock: Clock, *moments: datetime) -> list[datetime]:
    async def go() -> list[datetime]:
        out = []
        for moment in moments:
            clock.now_at = moment
            out.append(scheduler._tick(moment))
            task = scheduler._task
            if task is not None:
                await task
        return out

    return asyncio.run(go())


def test_a_vault_first_seen_waits_for_its_next_slot_then_runs_once_that_week(tmp_path: Path) -> None:
    runner = Runner()
    scheduler, clock = loop(tmp_path, at("2026-12-08T12:00:00"), {"team": vault()}, runner)
    [deadline] = ticks(scheduler, clock, at("2026-12-08T12:00:00"))
    assert runner.ran == [] and WeekState(tmp_path).weeks() == {"team": SUNDAY}
    assert deadline <= at("2026-12-08T12:10:00")
    ticks(scheduler, clock, at("2026-12-13T03:59:00"), at("2026-12-13T04:00:00"), at("2026-12-13T05:00:00"))
    assert runner.ran == ["team"] and WeekState(tmp_path).weeks() == {"team": date(2026, 12, 13)}


def test_a_missed_week_runs_once_at_start_and_only_the_latest(tmp_path: Path) -> None:
    WeekState(tmp_path).claim("team", SUNDAY - timedelta(days=21))  # three weeks down
    runner = Runner()
    scheduler, clock = loop(tmp_path, at("2026-12-10T09:00:00"), {"team": vault()}, runner)
    ticks(scheduler, clock, at("2026-12-10T09:00:00"), at("2026-12-10T09:10:00"))
    assert runner.ran == ["team"] and WeekState(tmp_path).weeks()["team"] == SUNDAY
    again, clock = loop(tmp_path, at("2026-12-10T10:00:00"), {"team": vault()}, runner)  # a restart
    ticks(again, clock, at("2026-12-10T10:00:00"))
    assert runner.ran == ["team"]


def test_a_disabled_vault_is_not_scheduled(tmp_path: Path) -> None:
    WeekState(tmp_path).claim("team", SUNDAY - timedelta(days=7))
    off = replace(vault(), settings=replace(vault().settings, enabled=False))
    runner = Runner()
    scheduler, clock = loop(tmp_path, at("2026-12-10T09:00:00"), {"team": off}, runner)
    ticks(scheduler, clock, at("2026-12-10T09:00:00"))
    assert runner.ran == []


def test_a_failed_run_is_tried_again_after_the_retry_delay_and_a_busy_or_vaultless_one_is_not(tmp_path: Path) -> None:
    WeekState(tmp_path).claim("team", SUNDAY - timedelta(days=7))
    runner = Runner(RuntimeError("kb: UNAVAILABLE"))
    start = at("2026-12-06T04:00:00")
    scheduler, clock = loop(tmp_path, start, {"team": vault()}, runner)
    ticks(scheduler, clock, start, start + RETRY - timedelta(seconds=1), start + RETRY)
    assert runner.ran == ["team", "team"]
    for project, error in (("other", Aborted("a reflection of vault 'other' is in progress")),
                           ("empty", FailedPrecondition("kb: project 'empty' has no vault"))):
        skipped = Runner(error)
        WeekState(tmp_path).claim(project, SUNDAY - timedelta(days=7))
        scheduler, clock = loop(tmp_path, start, {project: vault(project)}, skipped)
        ticks(scheduler, clock, start, start + RETRY, start + 2 * RETRY)
        assert skipped.ran == [project]


def test_an_unreadable_state_file_is_taken_as_empty(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json")
    assert WeekState(tmp_path).weeks() == {}
    assert WeekState(tmp_path).claim("team", SUNDAY) and not WeekState(tmp_path).claim("team", SUNDAY)
    assert (tmp_path / STATE_FILE).stat().st_mode & 0o777 == 0o600


def test_a_retry_left_from_last_week_does_not_let_the_new_week_run_twice(tmp_path: Path) -> None:
    WeekState(tmp_path).claim("team", SUNDAY - timedelta(days=7))
    runner = Runner(RuntimeError("kb: UNAVAILABLE"))
    late = at("2026-12-12T23:00:00")  # the week's last hours: its retry falls in the next week
    scheduler, clock = loop(tmp_path, late, {"team": vault()}, runner)
    ticks(scheduler, clock, late)
    runner.error = None
    next_week = at("2026-12-13T04:00:00")
    ticks(scheduler, clock, next_week, next_week + RETRY, next_week + 2 * RETRY)
    assert runner.ran == ["team", "team"] and WeekState(tmp_path).weeks()["team"] == date(2026, 12, 13)
