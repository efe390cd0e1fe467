"""Per-agent dreaming run state: which night was last claimed, what the last run did.

Two files per agent, beside the agent's KB and outside its workspace (an agent
can neither read nor edit them):

- ``<home>/agents/<id>/dreaming.json`` (mode 0600), replaced atomically through
  ``gateway.atomic.write_atomic``;
- ``<home>/agents/<id>/dreaming.lock``, an empty file whose exclusive ``flock``
  is the **run lock**: held for the whole of a run, by the scheduler for a
  scheduled run and by RunNow for a manual one.

Guarantees:

- **One run at a time per agent**, across tasks, threads and processes on one
  home. A ``flock`` belongs to an open file description, not to a thread or a
  task, so a second ``RunLock`` on the same agent gets ``Busy`` even in the same
  process; the kernel drops the lock when the holder dies (the fd is
  close-on-exec, so a reviewer subprocess never inherits it).
- **One scheduled run per night.** ``claim_night`` persists the night *before*
  the run starts and refuses any night at or before the last one claimed. A
  crash mid-run, a crash loop, a restart or a clock stepped backwards can
  therefore never run a night twice: at worst a night is lost, never doubled.
- **A corrupt or unknown state file fails closed.** Under the lock it is kept
  aside (copied to ``dreaming.json.corrupt-N``, logged as an error) and replaced
  by an empty state carrying a *fence*: the next ``claim_night`` is refused and
  moves ``last_night`` up to that night. A plain ``read`` reports it as
  ``corrupt`` and changes nothing. Because we no longer know whether tonight
  already ran, tonight (or the first night claimed after the damage) is
  skipped; the nights after it run normally.
- **An interrupted run is visible.** A run records ``status: "running"`` when it
  starts; a lock holder that finds a ``running`` record left by a dead holder
  rewrites it as ``interrupted`` (and logs it).

Asyncio callers: ``acquire`` never blocks in its default non-blocking form, but
it and ``claim_night`` / ``record_run`` do small fsynced writes, so call them
through ``asyncio.to_thread``; the lock stays held across the awaits of the one
task that holds it, until ``release``::

    run = store.lock(agent_id)
    await asyncio.to_thread(run.acquire)          # Busy when another run holds it
    try:
        if await asyncio.to_thread(run.claim_night, night, started):
            report = await do_the_run()
            await asyncio.to_thread(run.record_run, RunSummary.from_report(report, night))
    finally:
        run.release()

A task cancelled while such a thread still runs must wait for the thread before
``release`` (the scheduler's ``_in_thread`` does), or the write would finish
after the lock was dropped.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import Aborted
from services.dreaming.model.values import INTERRUPTED, RunReport

log = structlog.get_logger()

STATE_FILE = "dreaming.json"
LOCK_FILE = "dreaming.lock"
CORRUPT_SUFFIX = ".corrupt-"
FORMAT = 1
RUNNING = "running"
_DIED = "its process ended mid-run"
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # the config schema's rule: one safe segment


class Busy(Aborted):
    """Another run of this agent holds its run lock (in this process or another one)."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"a dreaming run of agent {agent_id!r} is already in progress")
        self.agent_id = agent_id


class CorruptState(ValueError):
    """dreaming.json cannot be used (bad JSON, wrong shape, unknown format)."""


@dataclass(frozen=True)
class RunSummary:
    """The last run of an agent, of any trigger, as kept in its state file.

    ``status``: ``running`` while in progress, then the run's own status
    (applied | proposed | nothing | skipped | failed), or ``interrupted`` when
    its process died. Times are ISO 8601 strings; ``night`` is the ISO date of
    a scheduled run's night ("" for a manual run).
    """

    run_id: str
    trigger: str
    mode: str
    status: str
    reason: str = ""
    started_at: str = ""
    finished_at: str = ""
    night: str = ""

    @classmethod
    def from_report(cls, report: RunReport, night: date | None = None) -> RunSummary:
        """The summary of a finished run."""
        return cls(
            run_id=report.run_id, trigger=report.trigger, mode=report.mode, status=report.status,
            reason=report.reason, started_at=report.started_at, finished_at=report.finished_at,
            night=night.isoformat() if night else "",
        )

    def to_json(self) -> dict[str, str]:
        return {
            "runId": self.run_id, "trigger": self.trigger, "mode": self.mode, "status": self.status,
            "reason": self.reason, "startedAt": self.started_at, "finishedAt": self.finished_at,
            "night": self.night,
        }

    @classmethod
    def from_json(cls, raw: object) -> RunSummary:
        """Raises CorruptState when ``raw`` is not a summary."""
        if not isinstance(raw, dict):
            raise CorruptState("lastRun is not an object")
        values = {key: raw.get(key, "") for key in _SUMMARY_KEYS}
        if not all(isinstance(v, str) for v in values.values()) or not values["runId"]:
            raise CorruptState("lastRun needs a runId and string fields")
        return cls(**{field: values[key] for key, field in _SUMMARY_KEYS.items()})


_SUMMARY_KEYS = {
    "runId": "run_id", "trigger": "trigger", "mode": "mode", "status": "status", "reason": "reason",
    "startedAt": "started_at", "finishedAt": "finished_at", "night": "night",
}


@dataclass(frozen=True)
class State:
    """One agent's dreaming state.

    ``last_night``: the last scheduled night claimed (None: never).
    ``runs_total``: runs recorded, of any trigger and outcome (one per run id).
    ``fence``: set after a corrupt file was moved aside (it names the kept
    copy); the next ``claim_night`` is refused and clears it.
    ``corrupt``: only from ``StateStore.read``: the file on disk is unusable
    (the next lock holder moves it aside and fences).
    """

    last_night: date | None = None
    last_run: RunSummary | None = None
    runs_total: int = 0
    fence: str = ""
    corrupt: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "lastNight": self.last_night.isoformat() if self.last_night else None,
            "lastRun": self.last_run.to_json() if self.last_run else None,
            "runsTotal": self.runs_total,
        }
        if self.fence:
            out["fence"] = self.fence
        return out

    @classmethod
    def from_json(cls, raw: object) -> State:
        """Raises CorruptState when ``raw`` is not a state of this format."""
        if not isinstance(raw, dict):
            raise CorruptState("not a JSON object")
        if type(raw.get("format")) is not int or raw.get("format") != FORMAT:
            raise CorruptState(f"unknown format {raw.get('format')!r}")
        night, total, fence = raw.get("lastNight"), raw.get("runsTotal", 0), raw.get("fence", "")
        if night is not None and not isinstance(night, str):
            raise CorruptState("lastNight is not a date")
        if not isinstance(total, int) or isinstance(total, bool) or total < 0 or not isinstance(fence, str):
            raise CorruptState("runsTotal or fence has the wrong type")
        try:
            last_night = date.fromisoformat(night) if night is not None else None
        except ValueError:
            raise CorruptState(f"lastNight {night!r} is not an ISO date") from None
        last_run = RunSummary.from_json(raw["lastRun"]) if raw.get("lastRun") is not None else None
        return cls(last_night=last_night, last_run=last_run, runs_total=total, fence=fence)


def _parse(data: bytes) -> State:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptState(f"not JSON ({exc})") from None
    return State.from_json(raw)


class StateStore:
    """The dreaming state files of every agent under one gateway home."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def agent_dir(self, agent_id: str) -> Path:
        """``<home>/agents/<id>``. Raises ValueError for an id that is not one safe path segment."""
        if not _AGENT_ID.fullmatch(agent_id):
            raise ValueError(f"agent id {agent_id!r} is not one safe path segment")
        return self.home / "agents" / agent_id

    def read(self, agent_id: str) -> State:
        """A snapshot without the lock, for planning and status. Never writes.

        A missing file is the empty state; an unusable one is ``State(corrupt=True)``.
        A ``running`` last run whose lock nobody holds is reported ``interrupted``
        (the probe takes a shared lock for an instant: a run starting at that
        very instant gets Busy and is retried).
        """
        try:
            data = (self.agent_dir(agent_id) / STATE_FILE).read_bytes()
        except FileNotFoundError:
            return State()
        except OSError as exc:
            log.warning("dreaming_state_unreadable", agent=agent_id, error=str(exc))
            return State(corrupt=True)
        try:
            state = _parse(data)
        except CorruptState:
            return State(corrupt=True)
        run = state.last_run
        if run is not None and run.status == RUNNING and self._lock_free(agent_id):
            # "running" with nobody holding the lock: its process died (the next holder rewrites it).
            return replace(state, last_run=replace(run, status=INTERRUPTED, reason=run.reason or _DIED))
        return state

    def _lock_free(self, agent_id: str) -> bool:
        """Whether no run holds the agent's lock (probed with a shared, non-blocking flock)."""
        try:
            fd = os.open(self.agent_dir(agent_id) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True

    def lock(self, agent_id: str) -> RunLock:
        """The run lock of ``agent_id``, not yet acquired (``acquire`` or ``with``)."""
        return RunLock(self, agent_id)


class RunLock:
    """The exclusive run lock of one agent, and the state writes made under it.

    ``with store.lock(agent_id) as run:`` acquires without blocking (Busy when
    held elsewhere) and releases at the end of the block. ``claim_night`` and
    ``record_run`` need the lock held.
    """

    def __init__(self, store: StateStore, agent_id: str) -> None:
        self.agent_id = agent_id
        self._dir = store.agent_dir(agent_id)
        self._path = self._dir / STATE_FILE
        self._fd: int | None = None
        self._state = State()

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def state(self) -> State:
        """The state as of the last read or write under this lock. Raises RuntimeError when not held."""
        self._require_held()
        return self._state

    def acquire(self, *, blocking: bool = False) -> RunLock:
        """Take the lock and load the state (repairing a corrupt file or a dead run's record).

        Non-blocking by default: raises Busy when another holder has it.
        ``blocking=True`` waits for it: only from a thread, never on the event loop.
        Raises OSError when the folder or file cannot be created.
        """
        if self._fd is not None:
            raise RuntimeError(f"the run lock of {self.agent_id!r} is already held by this object")
        self._dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(self.agent_id) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:
            self._state = self._load(repair=True)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        """Drop the lock (closing the file releases the flock). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def claim_night(self, night: date, started: RunSummary | None = None) -> bool:
        """Claim ``night`` for a scheduled run, persisted before returning True.

        False (nothing run) when ``night`` is at or before the last night
        claimed, or when a fence follows a corrupt state file (the fence then
        moves ``last_night`` up to ``night``). ``started``, when given, is
        stored as the last run in the same write (its status ``running``).
        Raises OSError when the state cannot be written: then nothing is claimed.
        """
        self._require_held()
        state = self._load(repair=False)
        if state.fence:
            last = max(night, state.last_night) if state.last_night else night
            self._write(replace(state, last_night=last, fence=""))
            log.error("dreaming_night_refused", agent=self.agent_id, night=night.isoformat(), kept=state.fence,
                      reason="the state file was corrupt, so whether this night already ran is unknown")
            return False
        if state.last_night is not None and state.last_night >= night:
            self._state = state
            return False
        claimed = replace(state, last_night=night)
        self._write(_with_run(claimed, started) if started else claimed)
        return True

    def record_run(self, summary: RunSummary) -> None:
        """Store ``summary`` as the agent's last run (``runs_total`` counts each run id once).

        Raises OSError when the state cannot be written.
        """
        self._require_held()
        self._write(_with_run(self._load(repair=False), summary))

    def _require_held(self) -> None:
        if self._fd is None:
            raise RuntimeError(f"the run lock of {self.agent_id!r} is not held")

    def _write(self, state: State) -> None:
        data = (json.dumps(state.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8")
        write_atomic(self._path, data, mode=0o600)
        if os.stat(self._path).st_mode & 0o777 != 0o600:  # write_atomic keeps an old file's bits
            os.chmod(self._path, 0o600)
        self._state = state

    def _load(self, *, repair: bool) -> State:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return State()
        try:
            state = _parse(data)
        except CorruptState as exc:
            return self._quarantine(data, str(exc))
        run = state.last_run
        if repair and run is not None and run.status == RUNNING:
            # We hold the lock, so whoever wrote "running" is gone.
            log.warning("dreaming_run_interrupted", agent=self.agent_id, run_id=run.run_id, night=run.night)
            state = replace(state, last_run=replace(run, status=INTERRUPTED, reason=run.reason or _DIED))
            self._write(state)
        return state

    def _quarantine(self, data: bytes, problem: str) -> State:
        # Copy first, then replace the original with a fenced state in one rename:
        # should either step fail, the corrupt file stays in place and is found again,
        # so there is never a moment with no file (which would read as "never claimed").
        kept = _keep_copy(self._path, data)
        state = State(fence=kept.name)
        self._write(state)
        log.error("dreaming_state_corrupt", agent=self.agent_id, problem=problem, kept=str(kept),
                  consequence="the next scheduled night is not run")
        return state


def _with_run(state: State, summary: RunSummary) -> State:
    new_run = state.last_run is None or state.last_run.run_id != summary.run_id
    return replace(state, last_run=summary, runs_total=state.runs_total + (1 if new_run else 0))


def _keep_copy(path: Path, data: bytes) -> Path:
    """Write ``data`` to the first free ``<name>.corrupt-N`` beside ``path`` (whole, through
    ``write_atomic``: a crash leaves no torn copy). Raises OSError."""
    for n in range(1, 1000):
        candidate = path.with_name(f"{path.name}{CORRUPT_SUFFIX}{n}")
        try:
            write_atomic(candidate, data, expected=None, mode=0o600, keep_mode=False)
        except WriteConflict:
            continue
        return candidate
    raise OSError(f"no free name to keep the corrupt {path.name} aside (clean up {path.name}{CORRUPT_SUFFIX}*)")
