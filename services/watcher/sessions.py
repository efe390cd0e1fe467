"""Live agent sessions, their BUSY/IDLE state, pending directives and last activity.

In memory: sessions are live processes that register again when the watcher
restarts. Time comes from an injected clock so tests control it.

What is kept is bounded (docs/concepts/sessions.md "Sessions and restarts"): a runtime that dies
without EndSession leaves its session behind, so a session with no call
(register or report) for ``RETENTION_MS`` is forgotten (``forget_stale``, which
the watcher runs every minute), an agent keeps at most ``MAX_SESSIONS_PER_AGENT``
(registering one more forgets the least recently active), and everything of an
agent removed from the config is dropped (``forget_agents``). A forgotten
session is what a watcher restart makes of every session: its next report is
NOT_FOUND, and its runtime registers it again.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument, NotFound
from services.watcher.restart_policy import REASONS, ChangeClass, DirectiveKind, decide

Clock = Callable[[], int]  # milliseconds since the epoch

MAX_SESSION_ID = 128
MAX_SESSIONS_PER_AGENT = 64  # live sessions kept per agent; the least recently active one makes room
RETENTION_MS = 24 * 3600 * 1000  # a session with no register or report for this long is forgotten

log = structlog.get_logger()


def check_session_id(session_id: str) -> None:
    """Refuse an id that is not 1-MAX_SESSION_ID printable characters forming one path segment.

    Ids are only keys here, but an agent runtime such as Claude Code names its
    transcript after the session (``<session id>.jsonl`` in the sessions folder
    dreaming reads), so ``/``, ``\\`` and ``.``/``..`` are refused as bad names
    rather than looked up. One holding a bidirectional control is told which
    (``gateway.bidi``: the id is shown in directives and logs). Raises InvalidArgument.
    """
    refuse_bidi(session_id, "session_id")
    if not session_id or len(session_id) > MAX_SESSION_ID or not session_id.isprintable():
        raise InvalidArgument(f"session_id must be 1-{MAX_SESSION_ID} printable characters")
    if session_id in (".", "..") or "/" in session_id or "\\" in session_id:
        raise InvalidArgument("session_id must be one path segment: no '/' or '\\', and not '.' or '..'")


@dataclass(frozen=True)
class Directive:
    agent_id: str
    session_id: str
    kind: DirectiveKind
    change_class: ChangeClass
    changed_files: tuple[str, ...]
    reason: str
    generation: int


@dataclass
class SessionRecord:
    agent_id: str
    session_id: str
    busy: bool
    started_at_ms: int
    last_activity_ms: int
    pending: Directive | None = None


@dataclass
class SessionRegistry:
    clock: Clock
    _sessions: dict[str, dict[str, SessionRecord]] = field(default_factory=dict)
    _last_activity: dict[str, int] = field(default_factory=dict)

    def _touch(self, agent_id: str) -> int:
        now = self.clock()
        self._last_activity[agent_id] = now
        return now

    def register(self, agent_id: str, session_id: str, busy: bool) -> SessionRecord:
        """Add (or re-register) a live session; a fresh id when ``session_id`` is empty.

        Raises InvalidArgument for an id ``check_session_id`` refuses.
        """
        if not session_id:
            session_id = secrets.token_hex(8)
        check_session_id(session_id)
        now = self._touch(agent_id)
        record = SessionRecord(agent_id, session_id, busy, now, now)
        sessions = self._sessions.setdefault(agent_id, {})
        sessions.pop(session_id, None)  # a re-registration counts as the newest
        sessions[session_id] = record
        if len(sessions) > MAX_SESSIONS_PER_AGENT:
            oldest = min((r for r in sessions.values() if r is not record), key=lambda r: r.last_activity_ms)
            del sessions[oldest.session_id]
            log.info("session_forgotten", agent=agent_id, session=oldest.session_id,
                     reason=f"over {MAX_SESSIONS_PER_AGENT} live sessions for the agent: the least recently active goes")
        return record

    def get(self, agent_id: str, session_id: str) -> SessionRecord:
        """The live session. Raises InvalidArgument for a bad id, NotFound for an unknown one."""
        check_session_id(session_id)
        record = self._sessions.get(agent_id, {}).get(session_id)
        if record is None:
            raise NotFound(f"no live session {session_id!r} for agent {agent_id!r}; register it first")
        return record

    def report(self, agent_id: str, session_id: str, busy: bool) -> tuple[SessionRecord, Directive | None]:
        """Record BUSY/IDLE. Raises NotFound for an unknown session.

        A busy session with a deferred restart that turns idle gets its
        restart now: the returned directive, also stored as pending.
        """
        record = self.get(agent_id, session_id)
        record.busy = busy
        record.last_activity_ms = self._touch(agent_id)
        pending = record.pending
        if not busy and pending is not None and pending.kind is DirectiveKind.RESTART_WHEN_IDLE:
            record.pending = Directive(
                agent_id, session_id, DirectiveKind.RESTART_NOW, pending.change_class, pending.changed_files,
                "the deferred restart is due: the session is idle now", pending.generation,
            )
            return record, record.pending
        return record, None

    def end(self, agent_id: str, session_id: str) -> bool:
        """Forget a session; False when it was not live. Raises InvalidArgument for a bad id."""
        check_session_id(session_id)
        sessions = self._sessions.get(agent_id, {})
        ended = sessions.pop(session_id, None) is not None
        if ended:
            self._touch(agent_id)
            if not sessions:
                del self._sessions[agent_id]
        return ended

    def forget_stale(self) -> int:
        """Forget every session with no register or report for ``RETENTION_MS``; how many went."""
        cutoff = self.clock() - RETENTION_MS
        forgotten = 0
        for agent_id, sessions in list(self._sessions.items()):
            for record in [r for r in sessions.values() if r.last_activity_ms <= cutoff]:
                del sessions[record.session_id]
                forgotten += 1
                log.info("session_forgotten", agent=agent_id, session=record.session_id,
                         reason=f"no call for {RETENTION_MS // 3_600_000} h: its runtime registers it again")
            if not sessions:
                del self._sessions[agent_id]
        return forgotten

    def forget_agents(self, agent_ids: Iterable[str]) -> None:
        """Drop the sessions and last activity of agents removed from the config."""
        for agent_id in agent_ids:
            self._sessions.pop(agent_id, None)
            self._last_activity.pop(agent_id, None)

    def agents(self) -> frozenset[str]:
        """The agents with live sessions or a last activity kept."""
        return frozenset(self._sessions) | frozenset(self._last_activity)

    def count(self) -> int:
        """Live sessions of every agent (the metrics gauge reads it from the scrape's thread:
        ``tuple`` copies the values in one step, so a register meanwhile cannot break it)."""
        return sum(len(sessions) for sessions in tuple(self._sessions.values()))

    def live(self, agent_id: str) -> list[SessionRecord]:
        """Live sessions of the agent, oldest first."""
        return sorted(self._sessions.get(agent_id, {}).values(), key=lambda r: (r.started_at_ms, r.session_id))

    def last_activity(self, agent_id: str) -> int:
        """Last register/report/end of the agent in ms; 0 when none was seen."""
        return self._last_activity.get(agent_id, 0)

    def apply_change(self, agent_id: str, change: ChangeClass, files: tuple[str, ...], generation: int) -> list[Directive]:
        """Decide per live session what a recomposition means; store and return the directives."""
        out = []
        for record in self.live(agent_id):
            kind = decide(change, record.busy)
            if kind is None:
                continue
            directive = Directive(agent_id, record.session_id, kind, change, files, REASONS[kind], generation)
            record.pending = directive
            out.append(directive)
        return out
