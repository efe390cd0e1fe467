"""The lineage files of one agent, ``<home>/agents/<id>/lineage/``; the watcher is their one writer.

- ``compositions.jsonl``: one JSON line per composition kept, oldest first,
  rewritten whole through ``write_atomic`` at each new composition. It holds
  a few dozen short lines, so a whole rewrite costs less than an append log's
  capping would, and the file is never torn. JSON lines rather than SQLite:
  a person can read it with ``cat``, and ``gateway backup`` copies it as a
  plain file (a database would need SQLite's backup API).
- ``revisions/<sha256>``: the text of each source revision a kept
  composition read, named by the SHA-256 of the file's bytes, so a revision
  that several compositions read is stored once. A revision over
  ``MAX_REVISION_BYTES`` is not stored (its hash and origin still are).
  Revisions no kept composition names are deleted after each save.

Writes skip the fsyncs (``durable=False``): a crash may lose the newest
compositions, never leave a half-written file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gateway.atomic import write_atomic
from services.watcher.origins import Origin

FOLDER = "lineage"
COMPOSITIONS = "compositions.jsonl"
REVISIONS = "revisions"
MAX_REVISION_BYTES = 64 * 1024
_HASH = re.compile(r"[0-9a-f]{64}")

log = structlog.get_logger()


@dataclass(frozen=True)
class SourceEntry:
    """One source file as a composition read it; ``sha256`` is None when it was missing or unreadable."""

    name: str
    sha256: str | None
    origin: Origin


@dataclass(frozen=True)
class CompositionEntry:
    id: int
    at_ms: int
    claude_md_sha256: str
    sources: tuple[SourceEntry, ...]

    def source(self, name: str) -> SourceEntry | None:
        return next((s for s in self.sources if s.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "atMs": self.at_ms, "claudeMd": self.claude_md_sha256,
            "sources": [{"name": s.name, "sha256": s.sha256, "origin": s.origin.to_json()} for s in self.sources],
        }

    @staticmethod
    def from_json(raw: dict[str, Any]) -> CompositionEntry:
        sources = tuple(
            SourceEntry(str(s["name"]), None if s.get("sha256") is None else str(s["sha256"]), Origin.from_json(s.get("origin", {})))
            for s in raw.get("sources", [])
        )
        return CompositionEntry(int(raw["id"]), int(raw["atMs"]), str(raw["claudeMd"]), sources)


def lineage_dir(agent_dir: Path) -> Path:
    return agent_dir / FOLDER


def load(folder: Path) -> list[CompositionEntry]:
    """The compositions kept, oldest first; a line that cannot be read is skipped (and logged)."""
    try:
        lines = (folder / COMPOSITIONS).read_bytes().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("lineage_unreadable", folder=str(folder), error=str(exc))
        return []
    out = []
    for line in lines:
        try:
            out.append(CompositionEntry.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("lineage_line_skipped", folder=str(folder))
    return out


def save(folder: Path, entries: Iterable[CompositionEntry]) -> None:
    """Rewrite compositions.jsonl with ``entries``. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(e.to_json(), separators=(",", ":")) + "\n" for e in entries).encode("utf-8")
    write_atomic(folder / COMPOSITIONS, data, mode=0o600, durable=False)


def keep_revision(folder: Path, sha256: str, text: str) -> None:
    """Store the text of revision ``sha256`` unless it is stored already or over MAX_REVISION_BYTES."""
    data = text.encode("utf-8")
    path = folder / REVISIONS / sha256
    if len(data) > MAX_REVISION_BYTES or path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, mode=0o600, durable=False)


def read_revision(folder: Path, sha256: str) -> str | None:
    """The stored text of revision ``sha256``; None when it was not kept."""
    if not _HASH.fullmatch(sha256):
        return None
    try:
        return (folder / REVISIONS / sha256).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def prune_revisions(folder: Path, entries: Iterable[CompositionEntry]) -> None:
    """Delete the stored revisions that none of ``entries`` read."""
    named = {s.sha256 for e in entries for s in e.sources if s.sha256}
    try:
        stored = os.listdir(folder / REVISIONS)
    except OSError:
        return
    for name in stored:
        if name not in named and _HASH.fullmatch(name):
            try:
                os.unlink(folder / REVISIONS / name)
            except OSError as exc:
                log.warning("lineage_prune_failed", revision=name, error=str(exc))
