"""The shared vaults on the PostgreSQL backend (docs/concepts/vault.md "PostgreSQL backend"; what every
backend does alike is ``vault.registry_base``'s).

Every project's vault is a ``store.PostgresVaultStore`` on this process's one pool (``pool.open_pool``).
There are no files: nothing to watch, no index to refresh (a search reads what every host committed),
and the retrieval log is appended through the store (``log_retrievals``) by a worker thread, never
slowing a read. The schema is migrated before the first call that needs it (``pool.migrate``), not at
the KB's start: a server that is down then leaves the file API, archives and dreaming serving, and vault
calls answer Unavailable until it is back. ``graph`` compiles the notes' rows (``graph.build.compile_notes``).
With ``knowledge.shared.graph`` the five report files are rebuilt from every host's rows after this host's
own writes (coalesced, ``graph.rebuilds``) into this host's ``<root>/<project>/reports/``, as on SQLite.

While the server cannot be reached (docs/concepts/vault.md "When PostgreSQL is down") the KB's health says
so through ``health``, the dependency ``shared-vault`` (``gateway.dependencies``). A read (get, list,
search, graph) whose connection broke under it runs once more on another connection (``pool.retryable``);
a write never does: it ran in one transaction, and one whose outcome is unknown says so.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import structlog

from gateway.config import AgentConfig, SharedSettings
from gateway.config_model import VaultPostgresSettings
from gateway.dependencies import Dependency
from gateway.errors import GatewayError, Unavailable
from gateway.forgetting import Target
from services.kb.archive.retrieval_log import Retrieved
from services.kb.graph.build import MAX_NOTE_BYTES, build_reports_from_notes, compile_notes
from services.kb.graph.model import GraphReport
from services.kb.graph.rebuilds import Rebuilds
from services.kb.index.purge import StoreForget
from services.kb.index.search import SearchResult
from services.kb.vault import listing, notes
from services.kb.vault.names import live_name
from services.kb.vault.note_index import REPORTS_DIR
from services.kb.vault.registry_base import SharedVaults, utc_now
from services.kb.vault.store import Authors, VaultStore
from services.kb.vault_pg import pool
from services.kb.vault.forget import forget_reports
from services.kb.vault_pg.forget import forget_postgres, vacuum
from services.kb.vault_pg.store import PostgresVaultStore

log = structlog.get_logger()
T = TypeVar("T")
DEPENDENCY = "shared-vault"  # the vault's name in the KB's health (gateway.dependencies)
LABEL = "the shared vault (PostgreSQL)"


class PostgresVaults(SharedVaults[PostgresVaultStore]):
    """The agents' vaults, one store per project on one pool."""

    def __init__(
        self,
        agents: Iterable[AgentConfig],
        executor: ThreadPoolExecutor,
        settings: VaultPostgresSettings,
        environ: Mapping[str, str],
        *,
        clock: Callable[[], datetime] = utc_now,
        day_zone: tzinfo | None = None,
        applied_by: str = "",
    ) -> None:
        self._executor = executor
        self._pool = pool.open_pool(settings, environ)
        self.health = Dependency(DEPENDENCY, LABEL, lambda: pool.probe(self._pool, self.health))
        self._applied_by = applied_by
        self._migrated = False
        self._migrating = threading.Lock()
        self._pending: set[Future[None]] = set()  # recall rows being appended
        self._pending_lock = threading.Lock()
        self._reports = Rebuilds(executor)
        self._report_dirs: dict[str, Path] = {}  # project → where its reports go, for vaults with ``graph``
        super().__init__(agents, clock=clock, day_zone=day_zone)

    def _key(self, shared: SharedSettings) -> Hashable:
        return shared.project

    def _track(self, key: Hashable, shared: SharedSettings, graph: bool) -> None:
        if key not in self._vaults:
            self._vaults[key] = PostgresVaultStore(self._pool, shared.project, health=self.health)
        if graph:
            self._report_dirs[shared.project] = shared.vault_dir / REPORTS_DIR
        else:
            self._report_dirs.pop(shared.project, None)

    def _project(self, v: PostgresVaultStore) -> str:
        return v.project

    def _ready(self, store: PostgresVaultStore) -> None:
        """The schema migrated, once per process (Unavailable naming ``store``'s vault while the server
        cannot be reached)."""
        if self._migrated:
            return
        with self._migrating:
            if not self._migrated:
                applied = pool.migrate(self._pool, f"the shared vault of project {store.project!r}",
                                       applied_by=self._applied_by, health=self.health)
                if applied:
                    log.info("kb_vault_postgres_migrated", versions=applied)
                self._migrated = True

    async def _run(self, store: PostgresVaultStore, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, in the call's context (its deadline: ``gateway.call_deadline``);
        what it runs on PostgreSQL is cancelled when the call is (its caller's deadline passed)."""
        def call() -> T:
            self._ready(store)
            return fn(*args)

        context, held = contextvars.copy_context(), list[pool.Conn]()
        context.run(pool.track, held)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call)
        except asyncio.CancelledError:
            pool.cancel(held)
            raise

    async def _read(self, store: PostgresVaultStore, fn: Callable[..., T], *args: Any) -> T:
        """``_run`` of a read, once more when its connection broke under it (``pool.retryable``)."""
        try:
            return await self._run(store, fn, *args)
        except Unavailable as exc:
            if not pool.retryable(exc):
                raise
            log.info("kb_vault_read_retried", vault=store.project, error=type(exc.__cause__).__name__)
        return await self._run(store, fn, *args)

    async def _write(self, v: PostgresVaultStore, op: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def run() -> T:
            with v.writing():
                return op(v, *args, **kwargs)

        result = await self._run(v, run)
        self._graph_soon(v)
        return result

    def _graph_soon(self, v: PostgresVaultStore) -> None:
        reports = self._report_dirs.get(v.project)
        if reports is not None:
            self._reports.soon(v.project, f"{v.project} (postgres)", lambda: build_reports_from_notes(
                v.contents(MAX_NOTE_BYTES + 1), reports, self._clock()))

    async def forget(self, agent_id: str, target: Target, tombstone_id: str, apply: bool) -> StoreForget:
        """The vault's part of a forget (``vault.forget``): notes and promotion records as one write decision,
        then (on ``apply``) ``VACUUM (FULL)`` of the tables that held them (``vault_pg.forget.vacuum``)."""
        store = self._vault(agent_id)
        result = await self._write(store, lambda s: forget_postgres(s, target, tombstone_id, apply))
        # this host's reports (the graph's, the reflection's) are files: scrubbed as on SQLite; another host's
        # are rewritten from the scrubbed vault at its next write, its reflection report when its mirror
        # learns the tombstone (``tombstone_mirror``)
        found, left = await asyncio.to_thread(forget_reports, self.reports_dir(store.project), target, tombstone_id,
                                              apply=apply)
        result.places += found
        result.left += left
        if apply:
            result.purge = await self._run(store, vacuum, store)
        return result

    async def _long_read(self, v: PostgresVaultStore, op: Callable[[VaultStore], T]) -> T | None:
        return await self._read(v, op, v)

    async def _read_store(self, v: PostgresVaultStore, op: Callable[[VaultStore], T]) -> T | None:
        return await self._read(v, op, v)

    # --- reads ---------------------------------------------------------------------

    async def get(self, agent_id: str, name: str) -> notes.Note:
        store = self._vault(agent_id)
        return await self._read(store, notes.get, store, name)

    async def list_notes(self, agent_id: str, size: int, token: str, include_retired: bool) -> tuple[listing.NotePage, dict[str, Authors]]:
        """A page of the vault's notes (``listing``) and who wrote them, by the name listed."""
        store = self._vault(agent_id)

        def run() -> tuple[listing.NotePage, dict[str, Authors]]:
            page = listing.page(store, size, token, include_retired=include_retired)
            lives = {n.name: live_name(n.name) for n in page.notes}
            found = store.authors(set(lives.values()))
            return page, {name: found[live] for name, live in lives.items() if live in found}

        return await self._read(store, run)

    async def search(self, agent_id: str, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        """``(result, refreshed)``: nothing to refresh, every host's commits are read."""
        store = self._vault(agent_id)
        return await self._read(store, store.search, query, limit), False

    async def graph(self, agent_id: str) -> GraphReport:
        """The vault's graph compiled now from its rows, written nowhere (``graph.build.compile_notes``)."""
        store = self._vault(agent_id)
        return await self._read(store, lambda: compile_notes(store.contents(MAX_NOTE_BYTES + 1), self._clock()))

    # --- recall ---------------------------------------------------------------------

    def record(self, agent_id: str, hits: Iterable[Retrieved], kind: str) -> None:
        """Fire-and-forget: ``hits`` appended to the vault's retrieval log by a worker thread."""
        shared = self._recording(agent_id)
        if shared is None:
            return
        store, rows, at = self._vaults[shared.project], list(hits), self._clock().timestamp()

        def append() -> None:
            try:
                self._ready(store)
                store.log_retrievals(rows, kind, at)
            except (GatewayError, psycopg.Error) as exc:  # never fails a read: the row is lost, the GC counts one fewer
                log.warning("kb_retrieval_log_failed", vault=store.project, error=str(exc))

        pending = self._executor.submit(append)
        with self._pending_lock:
            self._pending.add(pending)
        pending.add_done_callback(self._done)

    def _done(self, pending: Future[None]) -> None:
        with self._pending_lock:
            self._pending.discard(pending)

    # --- the file watch and shutdown -------------------------------------------------------

    def roots(self) -> dict[str, Path]:
        return {}

    def note_changed(self, directory: Path, rel: str) -> None:
        """No notes files: nothing to watch."""

    async def settle(self) -> None:
        """Wait for the report builds and the recall rows queued so far."""
        await self._reports.settle()
        while True:
            with self._pending_lock:
                waiting = list(self._pending)
            if not waiting:
                return
            await asyncio.wait([asyncio.wrap_future(f) for f in waiting])

    def close(self) -> None:
        pool.close_pools()
