"""The arguments of Search and Refresh that the KB checks before it touches an index.

Kept apart from ``archives`` so the archive manager stays about its state; each
raises InvalidArgument naming what was wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument

CORPORA = ("memory", "shared", "all")
MAX_NAMED_SOURCES = 100
MAX_CHANGED_PATHS = 100_000
TOMBSTONE_ID = re.compile(r"F-[0-9a-f]{12}")


def _source(rel: str) -> bool:
    parts = rel.split("/")
    return rel in ("MEMORY.md", "USER.md") or (
        parts[0] == "memory" and len(parts) > 1 and rel.endswith(".md") and all(p and not p.startswith(".") for p in parts))


def check_sources(paths: Iterable[str]) -> list[str]:
    """Workspace-relative sources a refresh may be told about: MEMORY.md, USER.md or memory/**.md,
    no empty, dot or ``..`` parts, no bidirectional control (``gateway.bidi``); at most
    MAX_NAMED_SOURCES. Raises InvalidArgument naming the first bad one."""
    out = list(paths)
    if len(out) > MAX_NAMED_SOURCES:
        raise InvalidArgument(f"paths: {len(out)} paths; at most {MAX_NAMED_SOURCES}")
    for rel in out:
        refuse_bidi(rel, "paths: a path")
        if _source(rel):
            continue
        shown = rel if len(rel) <= 60 else rel[:60] + "…"
        raise InvalidArgument(f"paths: {shown!r} is not a source of the archive (MEMORY.md, USER.md or memory/**.md)")
    return out


def changed_sources(paths: Iterable[str]) -> list[str]:
    """The archive's sources among the workspace files a forget rewrote (``ForgetText.changed_paths``):
    the others (identity files, ``.dreaming/`` records) are not indexed and are dropped. InvalidArgument
    for a path that is not workspace-relative (absolute, ``..``, a bidirectional control), or for more
    than MAX_CHANGED_PATHS."""
    out = list(paths)
    if len(out) > MAX_CHANGED_PATHS:
        raise InvalidArgument(f"changed_paths: {len(out)} paths; at most {MAX_CHANGED_PATHS}")
    for rel in out:
        refuse_bidi(rel, "changed_paths: a path")
        if not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel or ".." in rel.split("/"):
            shown = rel if len(rel) <= 60 else rel[:60] + "…"
            raise InvalidArgument(f"changed_paths: {shown!r} is not a workspace-relative path")
    return sorted({rel for rel in out if _source(rel)})


def check_tombstone_id(tombstone_id: str) -> str:
    """The id a forget's markers carry (``gateway.forgetting.Tombstones.new_id``); InvalidArgument otherwise."""
    if not TOMBSTONE_ID.fullmatch(tombstone_id):
        raise InvalidArgument("tombstone_id: not a tombstone id (F- and 12 lowercase hex digits); an apply needs one")
    return tombstone_id


def check_corpus(corpus: str) -> str:
    """The corpus name, ``memory`` when empty. Raises InvalidArgument for anything else."""
    corpus = corpus or "memory"
    if corpus not in CORPORA:
        raise InvalidArgument(f"corpus must be one of memory, shared, all; got {corpus!r}")
    return corpus


def check_query(query: str) -> str:
    """The query as given. Raises InvalidArgument when it is empty or only whitespace.

    Any other string is searchable: one that yields no term (``*``, an emoji)
    simply finds nothing (``query``).
    """
    if not query.strip():
        raise InvalidArgument("query is required")
    return query
