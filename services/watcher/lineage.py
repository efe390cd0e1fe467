"""Session lineage: which revision of each identity file built the CLAUDE.md a session runs on.

At each composition the recomposer calls ``Lineage.record``: the time, the
SHA-256 of every source file and of the CLAUDE.md, and what last changed each
source (``origins.py``). A composition that read the same bytes and wrote the
same CLAUDE.md as the one before adds nothing. A session registering (also
again, after a restart directive) is tied to the newest composition.
``Lineage.view`` answers GetLineage: per live session its composition, each
source against today's file with a bounded unified diff, and the history.

What is kept (docs/concepts/lineage.md): the newest ``KEEP_COMPOSITIONS``
compositions of each agent, plus every older one a live session is tied to
(at most ``MAX_SESSIONS_PER_AGENT``), and the text of each source revision
they read (``lineage_store.py``). Ties live in memory, like the sessions: a
watcher restart drops them and runtimes register again.
"""

from __future__ import annotations

import difflib
import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gateway.config import AgentConfig
from services.watcher import lineage_store as store
from services.watcher.compose import Composition
from services.watcher.lineage_store import CompositionEntry, SourceEntry
from services.watcher.origins import Origin, OriginFinder
from services.watcher.sessions import SessionRecord
from services.watcher.sources import MAX_READ_BYTES, Source, read_source

KEEP_COMPOSITIONS = 20
MAX_DIFF_CHARS = 16_000

Clock = Callable[[], int]  # milliseconds since the epoch


@dataclass(frozen=True)
class SourceView:
    """One source of a session's composition against today's file."""

    name: str
    revision: SourceEntry
    today: SourceEntry
    diff: str = ""
    diff_truncated: bool = False
    diff_unavailable: str = ""

    @property
    def differs(self) -> bool:
        return self.revision.sha256 != self.today.sha256


@dataclass(frozen=True)
class SessionView:
    session: SessionRecord
    composition: CompositionEntry | None
    sources: tuple[SourceView, ...]


@dataclass(frozen=True)
class LineageView:
    sessions: tuple[SessionView, ...]
    compositions: tuple[CompositionEntry, ...]  # newest first


def bounded_diff(name: str, old: str, new: str, limit: int = MAX_DIFF_CHARS) -> tuple[str, bool]:
    """Unified diff of ``old`` → ``new``, cut at a line end within ``limit`` chars; and whether it was cut."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"{name} (session)", f"{name} (today)"
    )
    out: list[str] = []
    size = 0
    for line in lines:
        line = line if line.endswith("\n") else line + "\n"
        if size + len(line) > limit:
            return "".join(out), True
        out.append(line)
        size += len(line)
    return "".join(out), False


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Lineage:
    """The lineage of every agent. ``record`` runs in the compose thread; the rest on the event loop."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._history: dict[str, list[CompositionEntry]] = {}
        self._ties: dict[str, dict[str, int]] = {}  # agent → session id → composition id

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

    @staticmethod
    def _sources(agent: AgentConfig, sources: Iterable[Source], last: CompositionEntry | None) -> tuple[SourceEntry, ...]:
        """Entries for ``sources``: a revision the last composition read keeps its origin, a new one is looked up and stored."""
        folder = store.lineage_dir(agent.agent_dir)
        finder = OriginFinder(agent.agent_dir, agent.workspace)
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
        with self._lock:
            for agent_id in agent_ids:
                self._history.pop(agent_id, None)
                self._ties.pop(agent_id, None)

    def view(self, agent: AgentConfig, sessions: list[SessionRecord]) -> LineageView:
        """The lineage of ``sessions`` (the agent's live ones) and the history. Reads files: call off the event loop."""
        with self._lock:
            history = list(self._loaded(agent))
            ties = dict(self._ties.get(agent.id, {}))
        by_id = {e.id: e for e in history}
        today = _Today(agent, history[-1] if history else None)
        views = []
        for session in sessions:
            entry = by_id.get(ties.get(session.session_id, 0))
            sources = tuple(today.compare(s) for s in entry.sources) if entry else ()
            views.append(SessionView(session, entry, sources))
        return LineageView(tuple(views), tuple(reversed(history)))


class _Today:
    """Today's source files, each read once, and the comparison of a revision with them."""

    def __init__(self, agent: AgentConfig, newest: CompositionEntry | None) -> None:
        self._agent = agent
        self._newest = newest
        self._finder = OriginFinder(agent.agent_dir, agent.workspace)
        self._read: dict[str, tuple[Source, SourceEntry]] = {}

    def _file(self, name: str) -> tuple[Source, SourceEntry]:
        if name not in self._read:
            source = read_source(self._agent.workspace, name, max_bytes=MAX_READ_BYTES)
            sha = source.sha256
            known = self._newest.source(name) if self._newest else None
            origin: Origin = known.origin if known is not None and known.sha256 == sha else self._finder.find(name, sha)
            self._read[name] = (source, SourceEntry(name, sha, origin))
        return self._read[name]

    def compare(self, revision: SourceEntry) -> SourceView:
        source, today = self._file(revision.name)
        if revision.sha256 == today.sha256:
            return SourceView(revision.name, revision, today)
        old = "" if revision.sha256 is None else store.read_revision(store.lineage_dir(self._agent.agent_dir), revision.sha256)
        if old is None:
            return SourceView(revision.name, revision, today,
                              diff_unavailable=f"the session's revision was not kept (over {store.MAX_REVISION_BYTES:,} bytes)")
        new = source.text or ""
        if len(new.encode("utf-8")) > store.MAX_REVISION_BYTES:
            return SourceView(revision.name, revision, today,
                              diff_unavailable=f"today's file is over {store.MAX_REVISION_BYTES:,} bytes")
        diff, cut = bounded_diff(revision.name, old, new)
        return SourceView(revision.name, revision, today, diff, cut)
