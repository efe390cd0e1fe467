"""The graph reports rebuilt after a vault's writes, coalesced (docs/concepts/vault.md "Shared vault", Graph
layer): per vault one build runs at a time on a worker thread, and one more follows when writes landed
meanwhile, so a burst of writes costs two builds, not one per write. Every backend's registry uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass

import structlog

from services.kb.graph.model import GraphReport

log = structlog.get_logger()


@dataclass
class _Builds:
    task: asyncio.Task[None] | None = None
    again: bool = False


class Rebuilds:
    """Coalesced report builds, by vault (a key of the caller's)."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._vaults: dict[Hashable, _Builds] = {}

    def soon(self, key: Hashable, vault: str, build: Callable[[], GraphReport]) -> None:
        """Run ``build`` (on the executor) for vault ``key`` (named ``vault`` in the log) now, or once more
        after the build that is running; on the event loop."""
        builds = self._vaults.setdefault(key, _Builds())
        if builds.task is not None and not builds.task.done():
            builds.again = True
            return
        builds.task = asyncio.ensure_future(self._loop(builds, vault, build))

    async def _loop(self, builds: _Builds, vault: str, build: Callable[[], GraphReport]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            builds.again = False
            try:
                report = await loop.run_in_executor(self._executor, build)
                log.info("kb_graph_built", vault=vault, written=list(report.written), ms=round(report.seconds * 1000, 2))
            except Exception:  # the reports stay as they were until the next write's build
                log.exception("kb_graph_failed", vault=vault)
            if not builds.again:
                return

    async def settle(self) -> None:
        """Wait for the builds running or queued (tests and shutdown)."""
        for builds in list(self._vaults.values()):
            while builds.task is not None and not builds.task.done():
                await builds.task
