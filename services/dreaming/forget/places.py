"""Where a forget looks in one agent's files, and what it reports per place (docs/concepts/forget.md
"What a forget covers in a workspace").

Three stores:

- ``workspace``: the six identity files and ``CLAUDE.md`` at the workspace's top, and every file,
  at any depth, under ``memory/``, ``.dreaming/`` and the episodic notes' folder when it is elsewhere
  (``memory.episodicArchiveDir``). Paths are relative to the workspace.
- ``state``: the dreaming state beside the workspace (``<home>/agents/<id>/dreaming.json`` and the
  ``dreaming.json.corrupt-N`` copies kept of a damaged one): a run's summary quotes its reason.
  Paths are relative to the agent's folder.
- ``transcripts``: the runtime's session transcripts (``*.jsonl``, any depth, under the agent's
  ``transcriptsDir``). Listed with their counts, never rewritten: they are the runtime's files.

Links are not followed (a link could lead out of the agent's files), and a write in flight
(``gateway.atomic``'s temp files, ``.<name>.<hex>.gwtmp``) is reported but not rewritten: its
writer renames it over the file, or the next start sweeps it away.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway.atomic import is_temp_name

WORKSPACE: Final = "workspace"
STATE: Final = "state"
TRANSCRIPTS: Final = "transcripts"
# The files the watcher composes CLAUDE.md from (docs/concepts/claude-md.md "Composition"), and CLAUDE.md itself.
IDENTITY_FILES: Final = ("SOUL.md", "IDENTITY.md", "AGENTS.md", "USER.md", "MEMORY.md", "HEARTBEAT.md", "CLAUDE.md")
TREES: Final = ("memory", ".dreaming")
STATE_FILE: Final = "dreaming.json"
MAX_LINES: Final = 100  # line numbers listed per place; ``count`` has them all
RUNTIME_FILE: Final = "the runtime's transcript: never rewritten here (docs/concepts/forget.md says how to purge it)"
IN_FLIGHT: Final = "a write in flight or a crash's leftover: its writer replaces it, or the next start removes it"


@dataclass(frozen=True)
class File:
    """One file to search: where it is, its ``store`` and path in the report, and whether a forget
    may rewrite it (``left`` says why not)."""

    path: Path
    store: str
    rel: str
    left: str = ""


@dataclass(frozen=True)
class Place:
    """One file that holds the target: ``store``, ``path`` (relative; a name that itself holds the
    target is shown with it cut out), ``count`` of places, the first MAX_LINES ``lines`` (1-based),
    whether ``changed`` by an apply, and why an apply leaves (or left) the target there ("" when it
    takes it all: the runtime's files, writes in flight, files that kept changing and names that hold
    it say why)."""

    store: str
    path: str
    count: int
    lines: tuple[int, ...]
    changed: bool = False
    left: str = ""
    kind: str = "file"  # a workspace file; the KB's places name theirs (source, note, table, name…)


@dataclass(frozen=True)
class WorkspaceReport:
    """Every place found (a scan), or found and handled (an apply), in the order searched."""

    places: tuple[Place, ...] = ()

    @property
    def matches(self) -> int:
        """All places of the target, over every file."""
        return sum(p.count for p in self.places)

    @property
    def changed(self) -> int:
        """How many files an apply rewrote."""
        return sum(1 for p in self.places if p.changed)

    @property
    def left(self) -> tuple[Place, ...]:
        """The places an apply leaves (or left) holding the target, each saying why."""
        return tuple(p for p in self.places if p.left)


def _tree(root: Path, base: Path, store: str) -> Iterator[File]:
    """Every regular file under ``root`` (links neither followed nor listed), relative to ``base``."""
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            yield File(path, store, path.relative_to(base).as_posix(), IN_FLIGHT if is_temp_name(name) else "")


def files(workspace: Path, *, episodic_dir: str = "memory", state_dir: Path | None = None,
          transcripts_dir: Path | None = None) -> list[File]:
    """The files a forget searches (module docstring), each once, in a stable order."""
    out: list[File] = []
    for name in IDENTITY_FILES:
        path = workspace / name
        if path.is_file() and not path.is_symlink():
            out.append(File(path, WORKSPACE, name))
    roots = [workspace / t for t in (*TREES, episodic_dir)]
    for root in dict.fromkeys(roots):
        if any(root != r and root.is_relative_to(r) for r in roots) or root.is_symlink() or not root.is_dir():
            continue  # inside another root (memory/people under memory/), or not a real folder
        out += _tree(root, workspace, WORKSPACE)
    if state_dir is not None and state_dir.is_dir():
        out += [File(p, STATE, p.name) for p in sorted(state_dir.glob(STATE_FILE + "*"))
                if p.is_file() and not p.is_symlink() and not is_temp_name(p.name)]
    if transcripts_dir is not None and transcripts_dir.is_dir():
        out += [f if f.left else File(f.path, f.store, f.rel, RUNTIME_FILE)
                for f in _tree(transcripts_dir, transcripts_dir, TRANSCRIPTS) if f.path.name.endswith(".jsonl")]
    return out
