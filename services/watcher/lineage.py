"""Session lineage: which revision of each identity file built the CLAUDE.md a session runs on.

At each composition the recomposer calls ``Lineage.record``: the time, the
SHA-256 of every source file and of the CLAUDE.md, and what last changed each
source (``origins.py``). A composition that read the same bytes and wrote the
same CLAUDE.md as the one before adds nothing. A session registering (also
again, after a restart directive) is tied to the newest composition.
``Lineage.view`` answers GetLineage: per live session its composition, each
source against today's file (``lineage_view.py``), and the history.

What is kept (docs/concepts/lineage.md): the newest ``KEEP_COMPOSITIONS``
compositions of each agent, plus every older one a live session is tied to
(at most ``MAX_SESSIONS_PER_AGENT``), and the text of each source revision
they read (``lineage_store.py``). Ties live in memory, like the sessions: a
watcher restart drops them and runtimes register again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable

from gateway.config import AgentConfig
from services.watcher import lineage_store as store
from services.watcher.compose import Composition
from services.watcher.lineage_store import CompositionEntry, SourceEntry
from services.watcher.lineage_view import LineageView, SessionView, TodayFiles
from services.watcher.origins import JournalCache, OriginFinder
from services.watcher.sessions import SessionRecord
from services.watcher.sources import Source

KEEP_COMPOSITIONS = 20

Clock = Callable[[], int]  # milliseconds since the epoch


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Lineage:
    """The lineage of every agent. ``record`` runs in the compose thread; the rest on the event loop."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._history: dict[str, list[CompositionEntry]] = {}
        self._ties: dict[str, dict[str, int]] = {}  # agent → session id → composition id
        self._journals = JournalCache()

    def _loaded(self, agent: AgentConfig) -> list[CompositionEntry]:
        """The agent's history, read from disk the first time (call with the lock held)."""
        history = self._history.get(agent.id)
        if history is None:
            history = self._history[agent.id] = store.load(store.lineage_dir(agent.agent_dir))
        return history

    def record(self, agent: AgentConfig, composition: Composition) -> CompositionEntry:
        """Record ``composition`` (just written to the agent's CLAUDE.md); the newest entry. Raises OSError."""
        folder = store.lineage_dir(agent.agent_dir)
        claude_md = _sha256(composition.text)
        with self._lock:
            history = list(self._loaded(agent))
            pinned = set(self._ties.get(agent.id, {}).values())
        last = history[-1] if history else None
        read = [(s.name, s.sha256) for s in composition.sources]
        if last is not None and last.claude_md_sha256 == claude_md and [(s.name, s.sha256) for s in last.sources] == read:
            return last
        entry = CompositionEntry(
            (last.id if last else 0) + 1, self._clock(), claude_md, self._sources(agent, composition.sources, last)
        )
        history.append(entry)
        recent = {e.id for e in history[-KEEP_COMPOSITIONS:]}
        kept = [e for e in history if e.id in recent or e.id in pinned]
        store.save(folder, kept)
        store.prune_revisions(folder, kept)
        with self._lock:
            self._history[agent.id] = kept
        return entry

    def _sources(self, agent: AgentConfig, sources: Iterable[Source], last: CompositionEntry | None) -> tuple[SourceEntry, ...]:
        """Entries for ``sources``: a revision the last composition read keeps its origin, a new one is looked up and stored."""
        folder = store.lineage_dir(agent.agent_dir)
        finder = OriginFinder(agent, self._journals)
        out = []
        for source in sources:
            before = last.source(source.name) if last else None
            if before is not None and before.sha256 == source.sha256:
                out.append(before)
                continue
            if source.sha256 is not None and source.text is not None:
                store.keep_revision(folder, source.sha256, source.text)
            out.append(SourceEntry(source.name, source.sha256, finder.find(source.name, source.sha256)))
        return tuple(out)

    def tie(self, agent: AgentConfig, session_id: str, live: Iterable[str]) -> None:
        """Tie a session that just registered to the newest composition; forget ties of sessions not in ``live``."""
        with self._lock:
            history = self._loaded(agent)
            alive = set(live)
            ties = {s: c for s, c in self._ties.get(agent.id, {}).items() if s in alive}
            if history:
                ties[session_id] = history[-1].id
            self._ties[agent.id] = ties

    def forget(self, agent_ids: Iterable[str]) -> None:
        """Drop what is held in memory for agents removed from the config (their files stay)."""
        agent_ids = list(agent_ids)
        with self._lock:
            for agent_id in agent_ids:
                self._history.pop(agent_id, None)
                self._ties.pop(agent_id, None)
        self._journals.forget(agent_ids)

    def view(self, agent: AgentConfig, sessions: list[SessionRecord]) -> LineageView:
        """The lineage of ``sessions`` (the agent's live ones) and the history. Reads files: call off the event loop."""
        with self._lock:
            history = list(self._loaded(agent))
            ties = dict(self._ties.get(agent.id, {}))
        by_id = {e.id: e for e in history}
        today = TodayFiles(agent, history[-1] if history else None, OriginFinder(agent, self._journals))
        views = []
        for session in sessions:
            entry = by_id.get(ties.get(session.session_id, 0))
            sources = tuple(today.compare(s) for s in entry.sources) if entry else ()
            views.append(SessionView(session, entry, sources))
        return LineageView(tuple(views), tuple(reversed(history)))
