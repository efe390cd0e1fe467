"""When an agent's nightly dreaming run is due: pure arithmetic over IANA time zones.

The inputs: ``dreamHour``/``dreamMinute`` in
``dreamTimezone``, plus a deterministic per-agent stagger in
``[0, staggerWindowMinutes * 60)`` seconds, the window clamped to
[0, 55] and 0 meaning the exact HH:MM. This module turns them into instants:

- **Night.** A night is a calendar date in ``dreamTimezone``: the local date of
  the configured HH:MM, before the stagger. ``slot(night)`` is the instant its
  run is due; ``night_of(t)`` is the night whose slot is the latest one at or
  before ``t``. A 23:50 run with a 20-minute stagger fires at 00:10 on the next
  local date but still belongs to the earlier night.
- **DST gap** (spring forward: the local HH:MM does not exist that day). The
  wall time is read with the UTC offset in force *before* the transition, so
  it is shifted forward by the length of the gap: 02:30 in New York on the
  spring-forward Sunday runs at 03:30 EDT (07:30 UTC); 02:15 on Lord Howe's
  30-minute spring-forward runs at 02:45. This is what ``zoneinfo`` gives for
  ``fold=0`` (PEP 495), and it keeps the run the same elapsed time after the
  previous midnight as on other days.
- **DST fold** (fall back: the local HH:MM happens twice). The run is due once,
  at the first occurrence (``fold=0``, still on daylight time).
- **Stagger** is added after the local time is resolved, as elapsed seconds:
  a 25-minute stagger is 25 real minutes after the resolved instant even when
  a transition lies in between.

Every function here is pure: it reads no clock and no file. Instants in and out
are aware datetimes; results are in UTC.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.config import DreamingSettings

MAX_STAGGER_MINUTES = 55  # the offset never crosses into the next hour
ONE_DAY = timedelta(days=1)
# Names that load but are not IANA zones: they depend on how the host was set up.
_HOST_SPECIFIC = frozenset({"localtime", "posixrules", "Factory"})


class InvalidTimezone(ValueError):
    """``dreamTimezone`` does not name an IANA time zone this machine knows."""


def check_timezone(name: str) -> str | None:
    """A problem line for config validation when ``name`` is not a usable IANA zone; None when it is."""
    try:
        _zone(name)
    except InvalidTimezone as exc:
        return str(exc)
    return None


def zone(name: str) -> tzinfo:
    """The IANA zone ``name``. Raises InvalidTimezone naming the value when it is unknown or malformed."""
    return _zone(name)


@lru_cache(maxsize=256)
def _zone(name: str) -> tzinfo:
    if name in _HOST_SPECIFIC:
        raise InvalidTimezone(f"{name!r} is not an IANA time zone name (e.g. 'Europe/Berlin', 'UTC')")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        if name == "UTC":  # a host without tz data still knows UTC
            return UTC
        detail = "unknown" if isinstance(exc, ZoneInfoNotFoundError) else "malformed"
        raise InvalidTimezone(
            f"{name!r} is not an IANA time zone name ({detail}; e.g. 'Europe/Berlin', 'UTC')"
        ) from None


def clamp_window(window_minutes: int) -> int:
    """The stagger window in minutes, clamped to [0, 55]."""
    return min(max(window_minutes, 0), MAX_STAGGER_MINUTES)


def stagger_seconds(agent_id: str, window_minutes: int) -> int:
    """The agent's fixed offset in ``[0, window * 60)`` seconds; 0 when the window is 0.

    The window is clamped to [0, 55] minutes. The value is the first 8 bytes of
    SHA-256 of the UTF-8 agent id, modulo the window: the same in every process
    and on every machine (unlike ``hash()``, which is salted per process).
    """
    span = clamp_window(window_minutes) * 60
    if span == 0:
        return 0
    digest = hashlib.sha256(agent_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % span


def slot(night: date, settings: DreamingSettings, agent_id: str) -> datetime:
    """The UTC instant at which ``agent_id``'s run of ``night`` is due.

    Local ``dream_hour:dream_minute`` on ``night`` in ``dream_timezone`` (a gap
    shifts it forward by the gap's length, a fold takes the first occurrence),
    plus the agent's stagger in elapsed seconds. Raises InvalidTimezone.
    """
    tz = _zone(settings.dream_timezone)
    local = datetime.combine(night, time(settings.dream_hour, settings.dream_minute), tzinfo=tz)  # fold=0
    offset = timedelta(seconds=stagger_seconds(agent_id, settings.stagger_window_minutes))
    return local.astimezone(UTC) + offset


def night_of(instant: datetime, settings: DreamingSettings, agent_id: str) -> date:
    """The night whose slot is the latest one at or before ``instant`` (an aware datetime).

    When two nights share one instant (a zone that skipped a whole day), the
    later night wins. Raises InvalidTimezone; ValueError for a naive instant.
    """
    _require_aware(instant)
    tz = _zone(settings.dream_timezone)
    guess = instant.astimezone(tz).date()
    # The slot of the local date of ``instant`` lies within a day and a stagger
    # of it, so the answer is among these few nights; search from the latest.
    for night in (guess + ONE_DAY, guess, guess - ONE_DAY, guess - 2 * ONE_DAY):
        if slot(night, settings, agent_id) <= instant:
            return night
    # Only a zone that jumped by more than a day could get here.
    night = guess - 3 * ONE_DAY
    while slot(night, settings, agent_id) > instant:
        night -= ONE_DAY
    return night


def next_slot(after: datetime, settings: DreamingSettings, agent_id: str) -> tuple[date, datetime]:
    """The first slot strictly after ``after``, and the night it belongs to (as ``night_of`` names it).

    Raises InvalidTimezone; ValueError for a naive instant.
    """
    night = night_of(after, settings, agent_id) + ONE_DAY
    due = slot(night, settings, agent_id)
    while due <= after:  # slots never go backwards in tzdata; this only guards the arithmetic
        night += ONE_DAY
        due = slot(night, settings, agent_id)
    return night_of(due, settings, agent_id), due


def _require_aware(instant: datetime) -> None:
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError("instant must be an aware datetime (UTC), not a naive one")
