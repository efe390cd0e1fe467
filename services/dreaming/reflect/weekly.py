"""When a vault's weekly reflection is due: pure arithmetic, as the nightly slots' (``schedule.slots``).

A **week** is named by the local date of its slot's day (a date whose weekday is the configured
one) in the configured time zone. Its slot is the local ``hour:minute`` of that day, resolved as
the nightly slot is (a DST gap shifts it forward by the gap's length, a fold takes the first
occurrence), plus the vault's stagger: the nightly stagger of the key ``vault:<project>`` in
the first agent's ``staggerWindowMinutes`` (so the vaults of one host do not all start at once).

``week_of(t)`` is the week whose slot is the latest at or before ``t``; ``next_slot(t)`` the first
slot strictly after ``t``. Pure: no clock, no file. Instants are aware; results are in UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from gateway.config import VaultReflectionSettings
from services.dreaming.schedule.slots import stagger_seconds, zone

ONE_WEEK = timedelta(days=7)


def stagger_key(project: str) -> str:
    return f"vault:{project}"


def slot(week: date, settings: VaultReflectionSettings, project: str, window_minutes: int) -> datetime:
    """The UTC instant the run of ``week`` (a local date on the configured weekday) is due. Raises
    InvalidTimezone; ValueError when ``week`` is not on the configured weekday."""
    if week.weekday() != settings.weekday:
        raise ValueError(f"{week.isoformat()} is not on weekday {settings.weekday}")
    local = datetime.combine(week, time(settings.hour, settings.minute), tzinfo=zone(settings.timezone))  # fold=0
    return local.astimezone(UTC) + timedelta(seconds=stagger_seconds(stagger_key(project), window_minutes))


def week_of(instant: datetime, settings: VaultReflectionSettings, project: str, window_minutes: int) -> date:
    """The week whose slot is the latest at or before ``instant``. Raises InvalidTimezone;
    ValueError for a naive instant."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError("instant must be an aware datetime (UTC), not a naive one")
    local = instant.astimezone(zone(settings.timezone)).date()
    week = local - timedelta(days=(local.weekday() - settings.weekday) % 7) + ONE_WEEK
    while slot(week, settings, project, window_minutes) > instant:
        week -= ONE_WEEK
    return week


def next_slot(after: datetime, settings: VaultReflectionSettings, project: str,
              window_minutes: int) -> tuple[date, datetime]:
    """The first slot strictly after ``after`` and its week."""
    week = week_of(after, settings, project, window_minutes) + ONE_WEEK
    due = slot(week, settings, project, window_minutes)
    while due <= after:  # only guards the arithmetic
        week += ONE_WEEK
        due = slot(week, settings, project, window_minutes)
    return week, due
