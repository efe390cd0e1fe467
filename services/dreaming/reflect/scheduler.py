"""The weekly loop: each vault's reflection at its slot, at most once a week on this host.

Rules (the arithmetic is in ``weekly``; compare the nightly ``schedule.scheduler``):

- A vault whose settings say ``enabled: false`` is not scheduled (``gateway vault reflect`` still
  runs it).
- **First sight.** A vault this host has never scheduled starts at its next slot: the week now
  under way is noted as seen, not run (a fresh install does not call the reviewer at once).
- **Catch-up.** A week is attempted from its slot until the next week's: a process that was down,
  asleep or busy at the slot runs the missed week once when it can (at start, say); only the latest
  week is ever run, never a burst of old ones.
- **Never twice.** The week is claimed in the state file (``WeekState``) before the run starts, so a
  crash or restart never runs it again; a run that failed (the KB unreachable, say) is tried again
  after ``RETRY`` while the week lasts, by this process. Across hosts, the KB's claim of the vault
  is the run lock: a run that finds it held is skipped (the other host runs it), and a second host
  catching up on the same week finds the vault unchanged since the first's run: a noop, no reviewer.
  A vault the KB does not have yet (no note was ever written to it) is skipped for the week.
- At most one vault's run at a time here (reviewers cost money and CPU); the stop event cancels it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import date, datetime, timedelta
from pathlib import Path

import structlog

from gateway.atomic import write_atomic
from gateway.errors import Aborted, FailedPrecondition
from services.dreaming.reflect.vaults import Vault
from services.dreaming.reflect.weekly import next_slot, week_of
from services.dreaming.schedule.loop import REPLAN_EVERY, Clock, WakeLoop
from services.dreaming.schedule.slots import InvalidTimezone

log = structlog.get_logger()

STATE_FILE = "reflection.json"  # in the home: each vault's last week claimed on this host
RETRY = timedelta(minutes=15)
Runner = Callable[[Vault], Awaitable[object]]


class WeekState:
    """``<home>/reflection.json``: ``{"format": 1, "weeks": {project: "YYYY-MM-DD"}}`` (mode 0600). A file
    that cannot be read is taken as empty: every vault then starts at its next slot."""

    def __init__(self, home: Path) -> None:
        self._path = home / STATE_FILE

    def weeks(self) -> dict[str, date]:
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
            return {str(k): date.fromisoformat(str(v)) for k, v in dict(raw.get("weeks", {})).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def claim(self, project: str, week: date) -> bool:
        """Note ``week`` as claimed for ``project``; False when it (or a later one) already was."""
        weeks = self.weeks()
        if project in weeks and weeks[project] >= week:
            return False
        weeks[project] = week
        data = json.dumps({"format": 1, "weeks": {k: v.isoformat() for k, v in sorted(weeks.items())}}, indent=1)
        write_atomic(self._path, data.encode("utf-8"), mode=0o600, keep_mode=False)
        return True


class WeeklyScheduler(WakeLoop):
    """Fires each vault's weekly reflection (module docstring). ``vaults`` is read at every re-plan."""

    crashed_event = "reflection_plan_crashed"

    def __init__(self, vaults: Callable[[], Mapping[str, Vault]], runner: Runner, state: WeekState, clock: Clock) -> None:
        super().__init__(clock)
        self._vaults = vaults
        self._runner = runner
        self._state = state
        self._task: asyncio.Task[None] | None = None
        self._retry: dict[str, tuple[date, datetime]] = {}
        self._noted: dict[str, str] = {}

    def _in_flight(self) -> list[asyncio.Task[None]]:
        return [self._task] if self._task is not None else []

    def due(self, now: datetime) -> tuple[list[tuple[Vault, date]], datetime]:
        """The vaults due now with their week, and when the next one is (at most ``REPLAN_EVERY`` away).
        Notes the first sight of a vault (module docstring)."""
        deadline = now + REPLAN_EVERY
        claimed = self._state.weeks()
        out = []
        for project, vault in self._vaults().items():
            if not vault.settings.enabled:
                continue
            window = vault.stagger_window_minutes
            try:
                week = week_of(now, vault.settings, project, window)
                _, upcoming = next_slot(now, vault.settings, project, window)
            except InvalidTimezone as exc:
                self._note(project, f"bad timezone: {exc}")
                continue
            done = claimed.get(project)
            if done is None:
                self._state.claim(project, week)  # first sight: start at the next slot
                deadline = min(deadline, upcoming)
                continue
            retry = self._retry.get(project)
            if retry is not None and retry[0] == week:
                if retry[1] <= now:
                    out.append((vault, week))
                else:
                    deadline = min(deadline, retry[1])
            elif week > done:
                out.append((vault, week))
            deadline = min(deadline, upcoming)
        return out, deadline

    def _tick(self, now: datetime) -> datetime:
        """Start the first due vault's run (one at a time); the instant to look again."""
        due, deadline = self.due(now)
        if due and self._task is None:
            vault, week = due[0]
            self._task = asyncio.create_task(self._attempt(vault, week))
            self._task.add_done_callback(self._attempt_done)
        return deadline

    def _attempt_done(self, task: asyncio.Task[None]) -> None:
        self._task = None
        self._wake.set()

    def _note(self, project: str, text: str) -> None:
        if self._noted.get(project) != text:
            self._noted[project] = text
            log.warning("reflection_not_scheduled", project=project, reason=text)

    async def _attempt(self, vault: Vault, week: date) -> None:
        retry = self._retry.pop(vault.project, None)
        retrying = retry is not None and retry[0] == week  # this week claimed already, by its failed attempt
        if not retrying and not await asyncio.to_thread(self._state.claim, vault.project, week):
            return
        log.info("reflection_run_started", project=vault.project, week=week.isoformat())
        try:
            await self._runner(vault)
        except Aborted as exc:  # another host (or a manual run) holds the vault: it runs the week
            log.info("reflection_busy", project=vault.project, week=week.isoformat(), reason=exc.message)
        except FailedPrecondition as exc:  # no vault yet (no note ever written): nothing to reflect on this week
            log.info("reflection_no_vault", project=vault.project, week=week.isoformat(), reason=exc.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the KB unreachable, a bug: tried again while the week lasts
            at = self._clock.now() + RETRY
            self._retry[vault.project] = (week, at)
            log.warning("reflection_run_failed", project=vault.project, week=week.isoformat(), error=str(exc)[:300],
                        retry_at=at.isoformat())
        else:
            log.info("reflection_run_finished", project=vault.project, week=week.isoformat())
