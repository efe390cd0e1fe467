"""One answer of GetLineage: each session's sources against today's files, with bounded diffs.

A diff is unified, from the session's revision to today's file, cut at a line
end within ``MAX_DIFF_CHARS``; the diffs of one answer together stop at
``MAX_ANSWER_DIFF_BYTES`` (an agent may have 64 live sessions, and an answer
must stay well under the gRPC message limit). A diff is left out, with the
reason, when the session's revision was too large to keep or today's file is
over the same bound (``lineage_store.MAX_REVISION_BYTES``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from gateway.config import AgentConfig
from services.watcher import lineage_store as store
from services.watcher.lineage_store import CompositionEntry, SourceEntry
from services.watcher.origins import Origin, OriginFinder
from services.watcher.sessions import SessionRecord
from services.watcher.sources import Source, read_source

MAX_DIFF_CHARS = 16_000
MAX_ANSWER_DIFF_BYTES = 2 * 1024 * 1024


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


class TodayFiles:
    """Today's source files of one agent, each read once, and the comparison of a revision with them."""

    def __init__(self, agent: AgentConfig, newest: CompositionEntry | None, finder: OriginFinder) -> None:
        self._agent = agent
        self._newest = newest
        self._finder = finder
        self._read: dict[str, tuple[Source, SourceEntry]] = {}
        self._diffs: dict[tuple[str, str | None], tuple[str, bool, str]] = {}
        self._diff_bytes = 0

    def _file(self, name: str) -> tuple[Source, SourceEntry]:
        if name not in self._read:
            source = read_source(self._agent.workspace, name)
            known = self._newest.source(name) if self._newest else None
            origin: Origin = known.origin if known is not None and known.sha256 == source.sha256 else self._finder.find(name, source.sha256)
            self._read[name] = (source, SourceEntry(name, source.sha256, origin))
        return self._read[name]

    def compare(self, revision: SourceEntry) -> SourceView:
        """``revision`` (of a session's composition) against today's file of the same name."""
        source, today = self._file(revision.name)
        if revision.sha256 == today.sha256:
            return SourceView(revision.name, revision, today)
        key = (revision.name, revision.sha256)
        if key not in self._diffs:
            self._diffs[key] = self._diff(revision, source)
        diff, cut, unavailable = self._diffs[key]
        size = len(diff.encode("utf-8"))
        if self._diff_bytes + size > MAX_ANSWER_DIFF_BYTES:
            return SourceView(revision.name, revision, today,
                              diff_unavailable=f"left out: this answer's diffs already fill {MAX_ANSWER_DIFF_BYTES:,} bytes")
        self._diff_bytes += size
        return SourceView(revision.name, revision, today, diff, cut, unavailable)

    def _diff(self, revision: SourceEntry, source: Source) -> tuple[str, bool, str]:
        """``(diff, cut, why none)`` from ``revision`` to today's ``source``."""
        old = "" if revision.sha256 is None else store.read_revision(store.lineage_dir(self._agent.agent_dir), revision.sha256)
        if old is None:
            return "", False, f"the session's revision was not kept (over {store.MAX_REVISION_BYTES:,} bytes)"
        new = source.text or ""
        if len(new.encode("utf-8")) > store.MAX_REVISION_BYTES:
            return "", False, f"today's file is over {store.MAX_REVISION_BYTES:,} bytes"
        diff, cut = bounded_diff(revision.name, old, new)
        return diff, cut, ""
