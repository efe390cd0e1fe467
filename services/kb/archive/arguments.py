"""The arguments of Search and Refresh that the KB checks before it touches an index.

Kept apart from ``archives`` so the archive manager stays about its state; each
raises InvalidArgument naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument

CORPORA = ("memory", "shared", "all")
MAX_NAMED_SOURCES = 100


def check_sources(paths: Iterable[str]) -> list[str]:
    """Workspace-relative sources a refresh may be told about: MEMORY.md, USER.md or memory/**.md,
    no empty, dot or ``..`` parts, no bidirectional control (``gateway.bidi``); at most
    MAX_NAMED_SOURCES. Raises InvalidArgument naming the first bad one."""
    out = list(paths)
    if len(out) > MAX_NAMED_SOURCES:
        raise InvalidArgument(f"paths: {len(out)} paths; at most {MAX_NAMED_SOURCES}")
    for rel in out:
        refuse_bidi(rel, "paths: a path")
        parts = rel.split("/")
        if rel in ("MEMORY.md", "USER.md") or (
            parts[0] == "memory" and len(parts) > 1 and rel.endswith(".md") and all(p and not p.startswith(".") for p in parts)
        ):
            continue
        shown = rel if len(rel) <= 60 else rel[:60] + "…"
        raise InvalidArgument(f"paths: {shown!r} is not a source of the archive (MEMORY.md, USER.md or memory/**.md)")
    return out


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
