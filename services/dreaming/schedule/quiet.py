"""The quiet window: a scheduled night runs only when the agent is not active.

The agent is active when a session is busy now, or its last activity is less than
``quietMinutes`` ago, activity being the later of the watcher's last report and the newest
transcript file's mtime (the watcher forgets sessions when it restarts; transcripts do not). A
watcher that cannot answer means no run now. Each attempt put off is recorded (audit.jsonl
``skip``) and retried later; manual runs skip the window.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Protocol

import structlog

from gateway.config import AgentConfig
from services.dreaming.model.values import SCHEDULE, iso
from services.dreaming.records import audit
from services.dreaming.schedule.scheduler import Readiness

log = structlog.get_logger()


@dataclass(frozen=True)
class Activity:
    """What the watcher knows of an agent's sessions now."""

    last_activity_ms: int
    busy_sessions: int
    live_sessions: int


class ActivitySource(Protocol):
    async def activity(self, agent_id: str) -> Activity: ...


def newest_transcript(folder: Path) -> datetime | None:
    """The newest ``*.jsonl`` mtime under ``folder`` (links are not followed); None when there is none."""
    newest: float | None = None
    for root, dirs, files in os.walk(folder):
        for name in files:
            if name.endswith(".jsonl"):
                try:
                    mtime = os.lstat(os.path.join(root, name)).st_mtime
                except OSError:
                    continue
                newest = mtime if newest is None else max(newest, mtime)
    return None if newest is None else datetime.fromtimestamp(newest).astimezone()


async def check(agent: AgentConfig, night: date, now: datetime, activity: ActivitySource) -> Readiness:
    """Whether ``agent``'s scheduled ``night`` may run at ``now`` (module docstring)."""
    quiet = timedelta(minutes=agent.dreaming.quiet_minutes)
    try:
        seen = await activity.activity(agent.id)
    except Exception as exc:  # noqa: BLE001 - the watcher could not answer: not run now, tried again later
        reason = f"the watcher could not say whether the agent is active ({exc}); not run now, tried again later"
        return _not_now(agent, night, now, reason, Readiness.retry(reason))
    last = [datetime.fromtimestamp(seen.last_activity_ms / 1000).astimezone()] if seen.last_activity_ms else []
    newest = await asyncio.to_thread(newest_transcript, agent.transcripts_dir)
    if newest is not None:
        last.append(newest)
    if seen.busy_sessions:
        reason = f"{seen.busy_sessions} session(s) busy now"
        return _not_now(agent, night, now, reason, Readiness.retry(reason))
    if last and now - max(last) < quiet:
        since = int((now - max(last)).total_seconds() // 60)
        reason = f"active {since} min ago (quietMinutes is {agent.dreaming.quiet_minutes})"
        return _not_now(agent, night, now, reason, Readiness.retry(reason, not_before=max(last) + quiet))
    return Readiness.go()


def _not_now(agent: AgentConfig, night: date, now: datetime, reason: str, readiness: Readiness) -> Readiness:
    """``readiness``, once the attempt is logged and audited (``skip``)."""
    log.info("dream_not_now", agent=agent.id, night=night.isoformat(), reason=reason)
    try:
        audit.append_records(agent.workspace, [{"kind": "skip", "at": iso(now), "night": night.isoformat(),
                                                "trigger": SCHEDULE, "reason": reason}])
    except OSError as exc:
        log.warning("dream_audit_failed", agent=agent.id, error=str(exc))
    return readiness
