"""Fail-closed provenance of an archive source (docs/concepts/archive.md "Knowledge archive (KB)").

Every chunk carries one of four labels, decided from the file's path relative to
the workspace (POSIX separators) and, only to *lower* trust, its frontmatter.
Rules, first match wins:

1. ``MEMORY.md`` and ``USER.md`` at the workspace root → ``owner``: the evergreen
   Lane-1 core, written by the owner through the file API and by the dreaming
   applier on the owner's behalf (CAS-guarded, backed up). The agent curates it
   but never unreviewed.
2. ``memory/archive/**`` → ``system``: files the gateway itself writes
   (``pruned.md`` from over-budget removes, ``stale.md`` from the staleness GC).
3. ``memory/inbox/**``, ``memory/imported/**``, ``memory/import/**``,
   ``memory/external/**``, ``memory/untrusted/**`` → ``untrusted``: content that
   arrived from outside (mail, web clippings, imports).
4. Any other ``memory/**`` path → ``agent``: notes the agent wrote itself
   (``memory/<topic>.md``, daily notes, ``memory/pinned/**``).
5. Anything else → ``untrusted`` (fail-closed: an unclassified path is never
   trusted, whatever it is).

Frontmatter ``provenance: untrusted`` turns any file untrusted. Any other
frontmatter value is ignored: a file cannot claim more trust than its path
gives it (an injected note saying ``provenance: owner`` stays what its path says).
Matching is case-sensitive, as the file system is.
"""

from __future__ import annotations

from typing import Final, Literal

Provenance = Literal["owner", "agent", "system", "untrusted"]

PROVENANCES: Final[tuple[Provenance, ...]] = ("owner", "agent", "system", "untrusted")

_OWNER_FILES: Final = frozenset({"MEMORY.md", "USER.md"})
_SYSTEM_DIRS: Final = ("archive",)
_UNTRUSTED_DIRS: Final = ("inbox", "imported", "import", "external", "untrusted")


def classify(rel_path: str, frontmatter_provenance: str | None = None) -> Provenance:
    """The provenance of the workspace-relative ``rel_path`` (rules in the module docstring).

    ``frontmatter_provenance`` is the file's ``provenance:`` frontmatter value, if any;
    only ``untrusted`` has an effect. Never raises: a malformed path is untrusted.
    """
    by_path = _classify_path(rel_path)
    if frontmatter_provenance is not None and frontmatter_provenance.strip().lower() == "untrusted":
        return "untrusted"
    return by_path


def _classify_path(rel_path: str) -> Provenance:
    if not rel_path or "\x00" in rel_path or "\\" in rel_path or rel_path.startswith("/"):
        return "untrusted"
    parts = rel_path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "untrusted"
    if len(parts) == 1:
        return "owner" if parts[0] in _OWNER_FILES else "untrusted"
    if parts[0] != "memory":
        return "untrusted"
    if len(parts) > 2 and parts[1] in _SYSTEM_DIRS:
        return "system"
    if len(parts) > 2 and parts[1] in _UNTRUSTED_DIRS:
        return "untrusted"
    return "agent"
