"""An agent's own write of forgotten text, flagged as the KB (re)indexes it, and kept out of its
search results (docs/concepts/forget.md "Where tombstones are checked").

The KB never changes an agent's files: a file the agent (or a person) wrote that brings back text a
forget took out keeps its bytes. Each source a refresh (re)indexed is checked, only when a forget of
the agent (or a shared one) left a tombstone (else this costs a ``stat``): one that brings the text
back is logged (``kb_forgotten_text_indexed``: the agent, the path and the forget's id, never the
text) and counted (``gateway_knowledge_forgotten_text_indexed_total``). Search drops each chunk that
brings it back (``hides``), so the suite does not serve it again; lifting the tombstone serves it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import structlog

from gateway.config import AgentConfig
from gateway.forget_guard import any_forgotten, find_forgotten
from services.kb.index.indexer_parse import read_source
from services.kb.metrics import FORGOTTEN_INDEXED

log = structlog.get_logger()

def flag_indexed(agent: AgentConfig, paths: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Check the sources ``paths`` (workspace-relative) a refresh of ``agent`` just (re)indexed: each
    that brings back forgotten text, with the forgets' ids, logged and counted (module docstring). A
    file that cannot be read now is passed over (the next refresh reads it again)."""
    if not paths or not any_forgotten(agent.home, agent.id):
        return []
    flagged = []
    for rel in paths:
        try:
            data = read_source(os.path.join(agent.workspace, rel))
        except OSError:
            continue
        ids = find_forgotten(agent.home, data.decode("utf-8", errors="replace"), agent.id)
        if not ids:
            continue
        for forget in ids:
            log.warning("kb_forgotten_text_indexed", agent=agent.id, path=rel, tombstone=forget)
        FORGOTTEN_INDEXED.inc()
        flagged.append((rel, ids))
    return flagged


def hides(agent: AgentConfig) -> Callable[[str], bool] | None:
    """What search drops for ``agent``: a chunk whose text brings back forgotten text; None (nothing to
    check) when no forget of the agent left a tombstone."""
    if not any_forgotten(agent.home, agent.id):
        return None
    return lambda text: bool(find_forgotten(agent.home, text, agent.id))
