"""Schedule arithmetic: slots across time zones, DST gaps and folds, the stagger, nights."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dreaming_helpers import settings, utc

from services.dreaming.schedule.slots import (
    InvalidTimezone,
    check_timezone,
    next_slot,
    night_of,
    slot,
    stagger_seconds,
)

EXACT = {"stagger_window_minutes": 0}


def at(tz: str, hour: int, minute: int = 0, **kw: int) -> object:
    return settings(dream_timezone=tz, dream_hour=hour, dream_minute=minute, **{**EXACT, **kw})


# --- stagger ---------------------------------------------------------------------------


def test_stagger_is_pinned_so_every_process_and_machine_agrees() -> None:
    # sha256 of the id, not hash(): these values must never change between releases.
    assert stagger_seconds("alfred", 30) == 390
    assert stagger_seconds("bertha", 30) == 132
    assert stagger_seconds("agent-42", 55) == 1713
    assert stagger_seconds("c", 30) == 1730


def test_stagger_stays_inside_its_window() -> None:
    for window in (1, 7, 30, 55):
        values = {stagger_seconds(f"agent-{i}", window) for i in range(300)}
        assert min(values) >= 0 and max(values) < window * 60
        assert len(values) > 1  # it actually spreads


def test_stagger_window_is_clamped_and_zero_means_the_exact_minute() -> None:
    assert stagger_seconds("alfred", 90) == stagger_seconds("alfred", 55)
    assert stagger_seconds("alfred", 0) == 0
    assert stagger_seconds("alfred", -5) == 0
    assert slot(date(2024, 6, 1), at("UTC", 3, 7), "alfred") == utc(2024, 6, 1, 3, 7)


def test_stagger_is_added_to_the_slot_as_elapsed_seconds() -> None:
    s = settings(dream_timezone="UTC", dream_hour=3, dream_minute=0, stagger_window_minutes=30)
    assert slot(date(2024, 6, 1), s, "alfred") == utc(2024, 6, 1, 3, 6, 30)  # 390 s


def test_stagger_across_a_dst_gap_is_real_elapsed_time() -> None:
    # New York, 2024-03-10: 01:50 EST + 28 min 50 s of stagger lands after the 02:00 jump.
    s = at("America/New_York", 1, 50, stagger_window_minutes=30)
    assert slot(date(2024, 3, 10), s, "c") == utc(2024, 3, 10, 6, 50) + timedelta(seconds=1730)


# --- time zones --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "night", "hour", "minute", "expected"),
    [
        ("UTC", date(2024, 6, 1), 3, 0, utc(2024, 6, 1, 3, 0)),
        ("America/New_York", date(2024, 1, 15), 3, 0, utc(2024, 1, 15, 8, 0)),  # EST
        ("America/New_York", date(2024, 7, 15), 3, 0, utc(2024, 7, 15, 7, 0)),  # EDT
        ("Europe/Berlin", date(2024, 1, 15), 3, 0, utc(2024, 1, 15, 2, 0)),
        ("Europe/Berlin", date(2024, 7, 15), 3, 0, utc(2024, 7, 15, 1, 0)),
        ("Asia/Kolkata", date(2024, 6, 1), 3, 0, utc(2024, 5, 31, 21, 30)),  # +5:30, the day before in UTC
        ("Pacific/Chatham", date(2024, 6, 1), 3, 0, utc(2024, 5, 31, 14, 15)),  # +12:45
        ("Pacific/Chatham", date(2024, 1, 15), 3, 0, utc(2024, 1, 14, 13, 15)),  # +13:45
        ("Australia/Lord_Howe", date(2024, 6, 7), 1, 45, utc(2024, 6, 6, 15, 15)),  # +10:30
        ("Australia/Lord_Howe", date(2024, 1, 7), 1, 45, utc(2024, 1, 6, 14, 45)),  # +11
    ],
)
def test_slot_is_local_time_in_the_configured_zone(tz: str, night: date, hour: int, minute: int,
                                                   expected: datetime) -> None:
    due = slot(night, at(tz, hour, minute), "alfred")
    assert due == expected
    assert due.utcoffset() == timedelta(0)
    local = due.astimezone(ZoneInfo(tz))
    assert (local.date(), local.hour, local.minute) == (night, hour, minute)


# --- DST gap: the wall time moves forward by the gap's length ------------------------------


@pytest.mark.parametrize(
    ("tz", "night", "hour", "minute", "expected", "local_after"),
    [
        # 02:00 EST -> 03:00 EDT: 02:30 runs at 03:30 EDT.
        ("America/New_York", date(2024, 3, 10), 2, 30, utc(2024, 3, 10, 7, 30), (3, 30)),
        # 02:00 CET -> 03:00 CEST: 02:30 runs at 03:30 CEST.
        ("Europe/Berlin", date(2024, 3, 31), 2, 30, utc(2024, 3, 31, 1, 30), (3, 30)),
        # 02:45 -> 03:45: 03:00 runs at 04:00.
        ("Pacific/Chatham", date(2024, 9, 29), 3, 0, utc(2024, 9, 28, 14, 15), (4, 0)),
        # 02:00 -> 02:30 (a 30-minute shift): 02:15 runs at 02:45.
        ("Australia/Lord_Howe", date(2024, 10, 6), 2, 15, utc(2024, 10, 5, 15, 45), (2, 45)),
    ],
)
def test_a_time_in_a_dst_gap_is_shifted_forward_by_the_gap(tz: str, night: date, hour: int, minute: int,
                                                           expected: datetime, local_after: tuple[int, int]) -> None:
    due = slot(night, at(tz, hour, minute), "alfred")
    assert due == expected
    local = due.astimezone(ZoneInfo(tz))
    assert (local.date(), local.hour, local.minute) == (night, *local_after)


# --- DST fold: the first occurrence, once ---------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "night", "hour", "minute", "expected"),
    [
        ("America/New_York", date(2024, 11, 3), 1, 30, utc(2024, 11, 3, 5, 30)),  # 01:30 EDT, not EST
        ("Europe/Berlin", date(2024, 10, 27), 2, 30, utc(2024, 10, 27, 0, 30)),  # 02:30 CEST
        ("Pacific/Chatham", date(2024, 4, 7), 3, 0, utc(2024, 4, 6, 13, 15)),  # 03:00 +13:45
        ("Australia/Lord_Howe", date(2024, 4, 7), 1, 45, utc(2024, 4, 6, 14, 45)),  # 01:45 +11
    ],
)
def test_a_time_in_a_dst_fold_runs_at_its_first_occurrence(tz: str, night: date, hour: int, minute: int,
                                                           expected: datetime) -> None:
    s = at(tz, hour, minute)
    due = slot(night, s, "alfred")
    assert due == expected
    # The second occurrence of the same wall time is an hour (Lord Howe: 30 min) later and is not a slot.
    second = due.astimezone(ZoneInfo(tz)).replace(fold=1).astimezone(ZoneInfo("UTC"))
    assert second > due
    assert night_of(second, s, "alfred") == night
    assert next_slot(due, s, "alfred") == (night + timedelta(days=1), slot(night + timedelta(days=1), s, "alfred"))


# --- nights ---------------------------------------------------------------------------------


def test_a_stagger_past_midnight_still_belongs_to_the_earlier_night() -> None:
    s = at("Europe/Berlin", 23, 50, stagger_window_minutes=30)  # "c": +28 min 50 s -> 00:18:50
    night = date(2024, 6, 1)
    due = slot(night, s, "c")
    assert due == utc(2024, 6, 1, 22, 18, 50)  # 00:18:50 CEST on June 2
    assert night_of(due, s, "c") == night
    assert night_of(due - timedelta(seconds=1), s, "c") == date(2024, 5, 31)
    assert next_slot(utc(2024, 6, 1, 22, 0), s, "c") == (night, due)


def test_a_zone_far_east_of_utc_names_nights_by_its_local_date() -> None:
    s = at("Pacific/Chatham", 3, 0)
    # 14:15 UTC on May 31 is 03:00 on June 1 in Chatham.
    assert night_of(utc(2024, 5, 31, 14, 15), s, "alfred") == date(2024, 6, 1)
    assert night_of(utc(2024, 5, 31, 14, 14), s, "alfred") == date(2024, 5, 31)


def test_a_day_the_zone_skipped_gives_one_slot_for_two_nights() -> None:
    # Samoa skipped 2011-12-30. Both nights land on one instant; the later one names it.
    s = at("Pacific/Apia", 3, 0)
    due = slot(date(2011, 12, 31), s, "alfred")
    assert slot(date(2011, 12, 30), s, "alfred") == due
    assert night_of(due, s, "alfred") == date(2011, 12, 31)
    assert next_slot(slot(date(2011, 12, 29), s, "alfred"), s, "alfred") == (date(2011, 12, 31), due)


@pytest.mark.parametrize(
    "tz", ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe"]
)
@pytest.mark.parametrize(("hour", "minute", "window"), [(0, 0, 55), (2, 30, 0), (3, 0, 30), (23, 45, 55)])
def test_night_of_and_next_slot_agree_over_a_year(tz: str, hour: int, minute: int, window: int) -> None:
    s = settings(dream_timezone=tz, dream_hour=hour, dream_minute=minute, stagger_window_minutes=window)
    t = utc(2024, 1, 1)
    while t < utc(2025, 1, 1):
        night = night_of(t, s, "c")
        assert slot(night, s, "c") <= t < slot(night + timedelta(days=1), s, "c")
        following, due = next_slot(t, s, "c")
        assert due > t and following == night + timedelta(days=1) and due == slot(following, s, "c")
        t += timedelta(hours=7, minutes=13)


def test_consecutive_slots_are_a_day_apart_except_across_a_transition() -> None:
    s = at("Australia/Lord_Howe", 3, 0)
    gaps = set()
    night = date(2024, 1, 1)
    while night < date(2025, 1, 1):
        gaps.add(slot(night + timedelta(days=1), s, "alfred") - slot(night, s, "alfred"))
        night += timedelta(days=1)
    assert gaps == {timedelta(days=1), timedelta(hours=23, minutes=30), timedelta(hours=24, minutes=30)}


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "/usr/share/zoneinfo/UTC", "utc", "localtime",
                                  "America"])
def test_an_invalid_time_zone_is_a_clear_error(name: str) -> None:
    problem = check_timezone(name)
    assert problem is not None and repr(name) in problem and "IANA" in problem
    with pytest.raises(InvalidTimezone, match="IANA"):
        slot(date(2024, 6, 1), at(name, 3), "alfred")


def test_valid_time_zones_have_no_problem() -> None:
    for name in ("UTC", "Etc/UTC", "Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe"):
        assert check_timezone(name) is None


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        night_of(datetime(2024, 6, 1, 3, 0), at("UTC", 3), "alfred")
