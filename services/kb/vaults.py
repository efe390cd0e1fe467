"""The shared vaults inside the KB process (SPEC.md "Shared KB", "Graph layer").

One vault per ``<root>/<project>/``; agents with the same project share it.
Each vault has one writer connection in this process, used from worker
threads under a per-vault lock; other processes writing the same vault are
kept safe by temp-then-rename note files and the index's busy timeout
(``vault_index``). Every write or delete reindexes the note at once. With
``graph: true`` the graph reports are rebuilt after shared writes,
coalesced: one build runs at a time and one more follows if writes landed
meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import apsw
import structlog

from gateway.config import AgentConfig, SharedSettings
from gateway.errors import FailedPrecondition
from services.kb import schema, vault, vault_index, vault_promote, vault_retire
from services.kb.freshness import index_matches_file
from services.kb.search import SearchResult, tune_reader

log = structlog.get_logger()

T = TypeVar("T")


@dataclass
class _Vault:
    directory: Path
    graph: bool
    writer: apsw.Connection | None = None
    reader: apsw.Connection | None = None
    lock: asyncio.Lock | None = None
    dirty: bool = False
    graph_task: asyncio.Task[None] | None = None
    graph_again: bool = False
    recheck: set[str] = field(default_factory=set)  # events seen while our own write was landing


class Vaults:
    def __init__(
        self,
        agents: Iterable[AgentConfig],
        executor: ThreadPoolExecutor,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self._settings: dict[str, SharedSettings] = {}
        self._vaults: dict[Path, _Vault] = {}
        self._executor = executor
        self._clock = clock
        self.update_agents(agents)

    def update_agents(self, agents: Iterable[AgentConfig]) -> None:
        """Take the agents' shared settings (at start and on a config reload). A vault no agent
        uses any more stays open until shutdown; its graph reports follow the agents that use it."""
        self._settings = {a.id: a.knowledge.shared for a in agents}
        graphs: dict[Path, bool] = {}
        for shared in self._settings.values():
            if shared.enabled:
                graphs[shared.vault_dir] = graphs.get(shared.vault_dir, False) or shared.graph
        for directory, graph in graphs.items():
            known = self._vaults.get(directory)
            if known is None:
                self._vaults[directory] = _Vault(directory, graph)
            else:
                known.graph = graph

    def _vault(self, agent_id: str) -> _Vault:
        shared = self._settings[agent_id]
        if not shared.enabled:
            raise FailedPrecondition(
                f"shared KB disabled for agent {agent_id!r} (gateway.knowledge.shared.enabled is false)"
            )
        return self._vaults[shared.vault_dir]

    async def _write(self, v: _Vault, op: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if v.lock is None:
            v.lock = asyncio.Lock()
        loop = asyncio.get_running_loop()

        def run() -> T:
            if v.writer is None:
                v.writer = vault_index.open_vault_index(v.directory)
            return op(v.writer, v.directory, *args, **kwargs)

        async with v.lock:
            result = await loop.run_in_executor(self._executor, run)
        while v.recheck:
            self._check_note(v, v.recheck.pop())
        self._graph_soon(v)
        return result

    # --- CRUD -------------------------------------------------------------------

    async def create(self, agent_id: str, name: str, content: str, confirm: bool) -> vault.CreateResult:
        return await self._write(self._vault(agent_id), vault.create, name, content, confirm=confirm)

    async def update(self, agent_id: str, name: str, content: str, confirm: bool) -> vault.UpdateResult:
        return await self._write(self._vault(agent_id), vault.update, name, content, confirm=confirm)

    async def delete(self, agent_id: str, name: str) -> vault.DeleteResult:
        return await self._write(self._vault(agent_id), vault.delete, name)

    async def get(self, agent_id: str, name: str) -> vault.Note:
        v = self._vault(agent_id)
        return await asyncio.get_running_loop().run_in_executor(self._executor, vault.get, v.directory, name)

    async def retire(self, agent_id: str, name: str, reason: str) -> vault_retire.RetireResult:
        return await self._write(self._vault(agent_id), vault_retire.retire, name, reason, self._clock())

    async def restore(self, agent_id: str, name: str) -> vault_retire.RestoreResult:
        return await self._write(self._vault(agent_id), vault_retire.restore, name)

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str) -> vault_promote.PromoteResult:
        """One nightly promotion (``vault_promote``). FailedPrecondition when the agent's shared KB is
        off or its ``mode`` is ``propose`` (promotion is then never made)."""
        v = self._vault(agent_id)
        if self._settings[agent_id].mode != "auto":
            raise FailedPrecondition(
                f"shared promotion is off for agent {agent_id!r} (gateway.knowledge.shared.mode is "
                f"{self._settings[agent_id].mode!r}, not 'auto')"
            )
        vault_promote.check_request(topic, content)
        return await self._write(v, lambda conn, directory: vault_promote.promote(
            conn, directory, agent_id=agent_id, topic=topic, reason=reason, content=content, run_id=run_id))

    # --- search -------------------------------------------------------------------

    def note_changed(self, directory: Path, rel: str) -> None:
        """File watch: ``notes/<rel>`` changed. Stale only if the index does not match the file
        (this process's own writes are reindexed at once and must not read as stale)."""
        v = self._vaults.get(directory)
        if v is None or v.dirty:
            return
        if v.lock is not None and v.lock.locked():
            v.recheck.add(rel)  # judged once our write and its reindex landed
            return
        self._check_note(v, rel)

    def _check_note(self, v: _Vault, rel: str) -> None:
        index = v.directory / vault_index.INDEX_FILE
        if not rel or not index.exists():
            v.dirty = True
            return
        if v.reader is None:
            v.reader = schema.open_reader(index)
        if not index_matches_file(v.reader, f"notes/{rel}", v.directory / "notes" / rel):
            v.dirty = True

    async def search(self, agent_id: str, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        """``(result, refreshed)`` over the agent's vault, twin rule applied."""
        v = self._vault(agent_id)
        refreshed = False
        if refresh_first or not (v.directory / vault_index.INDEX_FILE).exists():
            await self._write(v, lambda conn, directory: vault_index.refresh_vault(conn, directory))
            v.dirty = False
            refreshed = True
        if v.reader is None:
            v.reader = schema.open_reader(v.directory / vault_index.INDEX_FILE)
            tune_reader(v.reader)
        result = vault_index.search_vault(v.reader, query, limit)
        return replace(result, stale=v.dirty), refreshed

    def roots(self) -> dict[str, Path]:
        """Real notes folder → vault dir, for the file watch."""
        return {str((d / "notes").resolve()): d for d in self._vaults}

    # --- graph ----------------------------------------------------------------------

    def _graph_soon(self, v: _Vault) -> None:
        if not v.graph:
            return
        if v.graph_task is not None and not v.graph_task.done():
            v.graph_again = True
            return
        v.graph_task = asyncio.ensure_future(self._graph_loop(v))

    async def _graph_loop(self, v: _Vault) -> None:
        from services.kb.graph import build_reports

        loop = asyncio.get_running_loop()
        while True:
            v.graph_again = False
            try:
                report = await loop.run_in_executor(
                    self._executor, build_reports, v.directory / "notes", v.directory / vault_index.REPORTS_DIR, self._clock()
                )
                log.info("kb_graph_built", vault=str(v.directory), written=list(report.written), ms=round(report.seconds * 1000, 2))
            except Exception:
                log.exception("kb_graph_failed", vault=str(v.directory))
            if not v.graph_again:
                return

    async def settle(self) -> None:
        """Wait for pending graph builds (tests and shutdown)."""
        for v in self._vaults.values():
            while v.graph_task is not None and not v.graph_task.done():
                await v.graph_task

    def close(self) -> None:
        for v in self._vaults.values():
            for conn in (v.writer, v.reader):
                if conn is not None:
                    conn.close()
