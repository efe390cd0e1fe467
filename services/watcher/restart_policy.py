"""Which sessions restart after a recomposition (docs/concepts/sessions.md "Sessions and restarts").

| changed files                  | busy session         | idle session                  |
|--------------------------------|----------------------|-------------------------------|
| MEMORY.md, USER.md (memory)    | nothing              | nothing                       |
| SOUL.md, AGENTS.md, IDENTITY.md| nothing (skipped)    | respawn on next message       |
| HEARTBEAT.md / anything else   | restart when idle    | restart now                   |

A change set that mixes classes takes the strongest (other > identity >
memory). The watcher only ever *tells* a session; it never kills a process.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ChangeClass(IntEnum):
    """Values match gateway.v1.ChangeClass."""

    MEMORY = 1
    IDENTITY = 2
    OTHER = 3


class DirectiveKind(IntEnum):
    """Values match gateway.v1.DirectiveKind."""

    RESTART_NOW = 1
    RESTART_WHEN_IDLE = 2
    RESPAWN_ON_NEXT_MESSAGE = 3


MEMORY_FILES = frozenset({"MEMORY.md", "USER.md"})
IDENTITY_FILES = frozenset({"SOUL.md", "AGENTS.md", "IDENTITY.md"})


def classify_file(name: str) -> ChangeClass:
    """The change class of one changed file."""
    if name in MEMORY_FILES:
        return ChangeClass.MEMORY
    if name in IDENTITY_FILES:
        return ChangeClass.IDENTITY
    return ChangeClass.OTHER


def classify(names: Iterable[str]) -> ChangeClass | None:
    """The strongest class in a change set; None for an empty set."""
    classes = [classify_file(n) for n in names]
    return max(classes) if classes else None


def decide(change: ChangeClass, busy: bool) -> DirectiveKind | None:
    """What one live session is told for a change of class ``change``; None means nothing."""
    if change is ChangeClass.MEMORY:
        return None  # a memory write can never drop a live session
    if change is ChangeClass.IDENTITY:
        return None if busy else DirectiveKind.RESPAWN_ON_NEXT_MESSAGE
    return DirectiveKind.RESTART_WHEN_IDLE if busy else DirectiveKind.RESTART_NOW


REASONS = {
    DirectiveKind.RESTART_NOW: "CLAUDE.md changed; this session is idle: restart now to load it",
    DirectiveKind.RESTART_WHEN_IDLE: "CLAUDE.md changed; restart once the current message is done",
    DirectiveKind.RESPAWN_ON_NEXT_MESSAGE: "identity changed; respawn when the next message arrives",
}
