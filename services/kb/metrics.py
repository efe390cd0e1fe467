"""The KB's Prometheus metrics (gateway.metrics has the registry and the endpoint).

Refreshes are counted by the mode the ``kb_refreshed`` log line names (``targeted``: only
the sources named or reported by the watch; ``walk``: the whole tree), or ``failed``.
The index size is read at scrape time from each configured agent's kb.sqlite (and its
WAL), so the ``agent`` label only ever holds ids from config.json.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from typing import Any

from gateway.config import AgentConfig
from gateway.metrics import REGISTRY, Collecting, Counter, Histogram, gauge_family
from services.kb.archive.arguments import CORPORA
from services.kb.resources.handles import OpenHandles

REFRESH_MODES = ("targeted", "walk", "failed")

REFRESHES = Counter(
    "gateway_knowledge_refreshes_total", "Refreshes of an agent's index, by mode.", ("mode",), registry=REGISTRY,
    children=[(mode,) for mode in REFRESH_MODES],
)
REFRESH_SECONDS = Histogram(
    "gateway_knowledge_refresh_duration_seconds", "Time one refresh of an agent's index took, by mode.", ("mode",), registry=REGISTRY,
    children=[(mode,) for mode in REFRESH_MODES[:2]],
)
SEARCH_SECONDS = Histogram(
    "gateway_knowledge_search_duration_seconds", "Time an answered Search took, by corpus.", ("corpus",), registry=REGISTRY,
    children=[(corpus,) for corpus in CORPORA],
)

FORGOTTEN_INDEXED = Counter(
    "gateway_knowledge_forgotten_text_indexed_total",
    "Sources the KB (re)indexed that bring back text a forget took out (an agent's own write of it).",
    registry=REGISTRY,
)


def observe_refresh(mode: str, seconds: float | None) -> None:
    """One refresh in ``mode`` (``targeted``/``walk``) that took ``seconds``; ``failed`` has no time."""
    REFRESHES.child(mode).inc()
    if seconds is not None and mode in REFRESH_MODES[:2]:
        REFRESH_SECONDS.child(mode).observe(seconds)


def observe_search(corpus: str, seconds: float) -> None:
    """One answered Search of ``corpus`` (memory, shared or all; checked before it ran)."""
    SEARCH_SECONDS.child(corpus).observe(seconds)


class IndexSizes(Collecting):
    """``gateway_knowledge_index_bytes{agent}``: bytes of each configured agent's kb.sqlite and WAL."""

    def __init__(self, agents: Callable[[], Iterable[AgentConfig]]) -> None:
        self._agents = agents

    def collect(self) -> Iterator[Any]:
        family = gauge_family("gateway_knowledge_index_bytes", "Bytes on disk of an agent's kb.sqlite (with its WAL).", labels=("agent",))
        for agent in self._agents():
            size = 0
            for path in (agent.kb_path, agent.kb_path.with_name(agent.kb_path.name + "-wal")):
                with contextlib.suppress(OSError):  # not created yet, or the WAL checkpointed away
                    size += path.stat().st_size
            family.add_metric((agent.id,), size)
        yield family

    def describe(self) -> Iterator[Any]:
        yield gauge_family("gateway_knowledge_index_bytes", "Bytes on disk of an agent's kb.sqlite (with its WAL).", labels=("agent",))


class OpenArchives(Collecting):
    """``gateway_knowledge_open_archives`` and ``gateway_knowledge_open_archives_cap``: archives and
    vaults open now, and how many may be (``handles.OpenHandles``)."""

    def __init__(self, handles: OpenHandles) -> None:
        self._handles = handles

    def collect(self) -> Iterator[Any]:
        yield gauge_family(_OPEN, _OPEN_HELP, value=self._handles.open_count())
        yield gauge_family(_CAP, _CAP_HELP, value=self._handles.cap)

    def describe(self) -> Iterator[Any]:
        yield gauge_family(_OPEN, _OPEN_HELP)
        yield gauge_family(_CAP, _CAP_HELP)


_OPEN, _OPEN_HELP = "gateway_knowledge_open_archives", "Archives and shared vaults the KB has open now."
_CAP, _CAP_HELP = "gateway_knowledge_open_archives_cap", "Archives and shared vaults the KB may have open at once."


def register_open_archives(handles: OpenHandles) -> None:
    """Expose how many archives ``handles`` holds open, and its cap, at every scrape."""
    REGISTRY.register(OpenArchives(handles))


def register_index_sizes(agents: Callable[[], Iterable[AgentConfig]]) -> None:
    """Expose the index sizes of ``agents()`` (the live config's agents) at every scrape."""
    REGISTRY.register(IndexSizes(agents))
