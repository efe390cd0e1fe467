"""Platform texts of CLAUDE.md: the Memory Rule and the Memory Retrieval note.

The Memory Rule comes first in every CLAUDE.md. With write routing off (the
kill-switch) it is PLAIN_MEMORY_RULE, the rule without routing, byte for
byte. With routing on it carries the two-tier write contract of
``writeRouting`` (docs/concepts/tiers.md "Write routing"): durable facts in MEMORY.md/USER.md,
episodic task-log in ``<episodicArchiveDir>/<topic>.md``.

The retrieval note (docs/concepts/claude-md.md "CLAUDE.md and the watcher") is injected
whenever the archive is enabled, independent of any over-budget shrink, so
``memory_search`` and ``memory_get`` are always discoverable.
"""

from __future__ import annotations

from gateway.config import MemorySettings

PLAIN_MEMORY_RULE = (
    "Your memory lives in files in your workspace, not in this conversation. "
    "When you learn something worth keeping (a fact about the user, a decision, "
    "a preference, a lesson), write it down: facts about the user go in USER.md, "
    "everything else in MEMORY.md. Both files are part of this prompt, so keep them "
    "short and current: update or remove an entry that is wrong or stale instead of "
    "appending a duplicate. A change applies from your next session start."
)

RETRIEVAL_NOTE = (
    "You have a searchable memory archive beyond this prompt, reachable with two read-only tools:\n"
    "- `memory_search`: keyword search over your archive (your memory/*.md notes plus MEMORY.md "
    "and USER.md). It returns ranked snippets with file and line range. corpus \"memory\" "
    "searches your own archive, \"shared\" the vault shared by all agents, \"all\" both.\n"
    "- `memory_get`: a bounded, exact excerpt of one file by path and line range "
    "(for example path \"MEMORY.md\", lines 40-80).\n"
    "Use them when a task touches past work, an earlier decision, a person or a fact you do not "
    "see in this prompt: search first, then get the exact lines you need instead of guessing."
)


def episodic_dir(memory: MemorySettings) -> str:
    """The workspace-relative folder episodic notes go to, without a trailing slash."""
    return memory.episodic_archive_dir.strip("/") or "memory"


def routed_memory_rule(archive_dir: str) -> str:
    """The Memory Rule with the two-tier write contract, naming ``archive_dir``."""
    return (
        "Your memory lives in files in your workspace, not in this conversation. "
        "It has two tiers; write each thing you keep to the right one.\n"
        "1. Durable facts go to MEMORY.md (your work, decisions, lessons, preferences) or "
        "USER.md (facts about the user). Both are injected into every prompt, so keep them "
        "small: one line per fact; update or remove a stale entry instead of appending.\n"
        f"2. Episodic task-log goes to `{archive_dir}/<topic>.md`, where <topic> is a kebab-case "
        f"slug of lowercase letters, digits and hyphens, at most 64 characters (for example "
        f"`{archive_dir}/release-checklist.md`): what happened during a task, steps taken, "
        "intermediate results. These notes are not in your prompt; find them again with "
        "`memory_search`.\n"
        "When unsure, ask: will every future session need this? Then MEMORY.md or USER.md; "
        f"otherwise `{archive_dir}/<topic>.md`. A change applies from your next session start."
    )


def memory_rule(memory: MemorySettings) -> str:
    """The Memory Rule for these settings: PLAIN_MEMORY_RULE unless write routing is on."""
    if not memory.write_routing:
        return PLAIN_MEMORY_RULE
    return routed_memory_rule(episodic_dir(memory))
