"""What last changed a revision of an identity file: a PUT, a dream run, or unknown.

Read-only, from the two writers that leave a trace (docs/concepts/lineage.md):

- the file API's PUT record of the file (``gateway.put_record``): it names the
  content when its SHA-256 is the revision's;
- dreaming's journal, ``.dreaming/journal.jsonl`` in the workspace: each
  ``edit`` record carries the file, the run id, the time and the SHA-256 of
  the file after the op (``hashAfter``). Only its newest ``JOURNAL_TAIL_BYTES``
  are read, so a composition never reads a whole journal.

When both name the revision's hash, the newer one wins. Content that neither
wrote was edited on disk: ``unknown``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.config import AgentConfig
from gateway.put_record import last_put

JOURNAL = ".dreaming/journal.jsonl"
JOURNAL_TAIL_BYTES = 512 * 1024

PUT, DREAM, UNKNOWN, MISSING = "put", "dream", "unknown", "missing"


@dataclass(frozen=True)
class Origin:
    kind: str  # PUT, DREAM, UNKNOWN or MISSING
    at_ms: int = 0
    run_id: str = ""

    def describe(self) -> str:
        """One line for people, e.g. ``PUT at 2026-12-06 14:03:12 UTC`` or ``dream run R``."""
        if self.kind == PUT:
            return f"PUT at {format_ms(self.at_ms)}"
        if self.kind == DREAM:
            return f"dream run {self.run_id}"
        if self.kind == MISSING:
            return "missing"
        return "unknown (edited on disk)"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "atMs": self.at_ms, "run": self.run_id}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Origin:
        return Origin(str(raw.get("kind", UNKNOWN)), int(raw.get("atMs", 0)), str(raw.get("run", "")))


DreamWrites = dict[tuple[str, str], Origin]


def format_ms(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ms(iso: object) -> int:
    try:
        return int(datetime.fromisoformat(str(iso)).timestamp() * 1000)
    except ValueError:
        return 0


def _journal_tail(workspace: Path) -> list[bytes]:
    """The whole lines among the journal's newest JOURNAL_TAIL_BYTES; [] when there is none."""
    try:
        with open(workspace / JOURNAL, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(size - JOURNAL_TAIL_BYTES, 0)
            handle.seek(start)
            data = handle.read(JOURNAL_TAIL_BYTES)
    except OSError:
        return []
    lines = data.split(b"\n")
    return lines[1:] if start else lines


def dream_writes(workspace: Path) -> DreamWrites:
    """``(file, hashAfter)`` → the newest dream op that left that file with that hash."""
    out: DreamWrites = {}
    for line in _journal_tail(workspace):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == "edit" and record.get("hashAfter"):
            key = (str(record.get("file", "")), str(record["hashAfter"]))
            out[key] = Origin(DREAM, _ms(record.get("at", "")), str(record.get("run", "")))
    return out


class JournalCache:
    """``dream_writes`` per agent, read again only when the journal's path, size or mtime changed.

    An agent editing its own MEMORY.md makes each composition look its new content up;
    this keeps that from parsing the journal's tail every time.
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str, int, int], DreamWrites]] = {}

    def writes(self, agent: AgentConfig) -> DreamWrites:
        try:
            info = os.stat(agent.workspace / JOURNAL)
        except OSError:
            self._seen.pop(agent.id, None)
            return {}
        key = (str(agent.workspace), info.st_size, info.st_mtime_ns)
        seen = self._seen.get(agent.id)
        if seen is not None and seen[0] == key:
            return seen[1]
        writes = dream_writes(agent.workspace)
        self._seen[agent.id] = (key, writes)
        return writes

    def forget(self, agent_ids: Iterable[str]) -> None:
        for agent_id in agent_ids:
            self._seen.pop(agent_id, None)


class OriginFinder:
    """Finds origins for one agent's files; reads the journal at most once, and only when asked."""

    def __init__(self, agent: AgentConfig, journal: JournalCache) -> None:
        self._agent = agent
        self._journal = journal
        self._dreams: DreamWrites | None = None

    def find(self, name: str, sha256: str | None) -> Origin:
        """The origin of ``name`` holding content ``sha256`` (None: the file was missing)."""
        if sha256 is None:
            return Origin(MISSING)
        if self._dreams is None:
            self._dreams = self._journal.writes(self._agent)
        candidates = [origin for origin in (self._put(name, sha256), self._dreams.get((name, sha256))) if origin]
        return max(candidates, key=lambda o: o.at_ms) if candidates else Origin(UNKNOWN)

    def _put(self, name: str, sha256: str) -> Origin | None:
        record = last_put(self._agent.agent_dir, name)
        return Origin(PUT, record.at_ms) if record is not None and record.sha256 == sha256 else None
