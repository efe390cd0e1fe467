"""The shared vaults on the SQLite backend, inside the KB process (docs/concepts/vault.md "Shared vault";
what every backend does alike is ``registry_base``'s).

One vault per ``<root>/<project>/``; agents with the same project share it.
Each vault has one writer connection in this process, used from worker
threads under a per-vault lock; other processes writing the same vault are
kept safe by temp-then-rename note files and the index's busy timeout
(``note_index``). Every write or delete reindexes the note at once. With
``graph: true`` the graph reports are rebuilt after shared writes,
coalesced: one build runs at a time and one more follows if writes landed
meanwhile.

Recall: Search hits from the shared corpus and GetSharedNote are appended to
the vault's own ``kb_retrieval_log`` by a ``retrieval_log.Recorder``
(fire-and-forget, batched, never slowing a read; its connection to the vault
lives as long as the vault is open, as an archive's does), unless the calling
agent has ``recordRetrievals`` off.
"""

from __future__ import annotations

import asyncio
import os
import contextlib
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TypeVar

import apsw
import structlog

from gateway.config import AgentConfig, SharedSettings
from gateway.errors import NotFound
from gateway.forgetting import Target
from services.kb.archive import retrieval_log
from services.kb.file_watch import index_matches_file, plain_source
from services.kb.index import schema
from services.kb.index.index_files import close_connections, idle_or_closed, release_caches
from services.kb.index.purge import Purge, StoreForget, purge_bytes
from services.kb.index.search import VAULT_READER_CACHE_KIB, SearchResult, tune_reader
from services.kb.resources.handles import OpenHandles, default_cap
from services.kb.resources.threads import until_done
from services.kb.graph.build import build_reports, compile_graph
from services.kb.graph.model import GraphReport
from services.kb.graph.rebuilds import Rebuilds
from services.kb.vault.names import NOTES_DIR, live_name
from services.kb.vault import listing, note_index, notes, sqlite_rows
from services.kb.vault.registry_base import SharedVaults, utc_now
from services.kb.vault.forget import forget_sqlite
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import Authors, VaultStore

log = structlog.get_logger()

T = TypeVar("T")
EVENT_BATCH = 256  # notes per transaction of a reindex driven by events (as ``archives.EVENT_BATCH``)


@dataclass(eq=False)  # a key of the open-handles LRU: by identity
class _Vault:
    directory: Path
    graph: bool
    writer: apsw.Connection | None = None
    reader: apsw.Connection | None = None
    lock: asyncio.Lock | None = None
    dirty: bool = False
    recheck: set[str] = field(default_factory=set)  # events seen while our own write was landing
    changed: set[str] = field(default_factory=set)  # notes named by events, not yet reindexed
    index_task: asyncio.Task[None] | None = None  # the reindex those events queued (one at a time)
    index_again: bool = False
    indexing: bool = False  # a reindex of changes that made the vault stale is running
    walked: bool = False  # a search's refresh has walked the notes since start
    recorder: retrieval_log.Recorder | None = None  # the recall writer: its queued rows are written before a close

    def detach(self) -> Callable[[], None]:
        """``handles.Holder``: the connections, taken out; what closes them (the WAL emptied): the
        rows queued for the recall writer first (``ArchiveState.detach``)."""
        writer, reader, self.writer, self.reader = self.writer, self.reader, None, None
        index, recorder = self.directory / note_index.INDEX_FILE, self.recorder

        def close() -> None:
            if recorder is not None:
                recorder.release(index)
            close_connections(index, writer, reader)

        return close

    def release_caches(self) -> None:
        """``handles.Holder``: the page caches of the reader and the writer, handed back."""
        release_caches(self.reader, self.writer)

    def open_reader(self) -> apsw.Connection | None:
        """The search connection (on the event loop, inside a use); None before the index exists."""
        if self.reader is None:
            try:
                self.reader = schema.open_reader(self.directory / note_index.INDEX_FILE)
            except NotFound:
                return None
            tune_reader(self.reader, -VAULT_READER_CACHE_KIB)
        return self.reader


class Vaults(SharedVaults[_Vault]):
    def __init__(
        self,
        agents: Iterable[AgentConfig],
        executor: ThreadPoolExecutor,
        *,
        clock: Callable[[], datetime] = utc_now,
        day_zone: tzinfo | None = None,
        recorder: retrieval_log.Recorder | None = None,
        handles: OpenHandles | None = None,
    ) -> None:
        """``clock``: aware datetimes. ``day_zone``: where the GC's day is a date (None: this
        process's local time zone). ``recorder``: the recall writer (one of its own by default).
        ``handles``: the LRU of open indexes (shared with the archives; one of its own by default)."""
        self._executor = executor
        self._recorder = recorder or retrieval_log.Recorder(
            clock=lambda: self._clock().timestamp(), fold=sqlite_rows.fold_retrievals)
        self._own_handles = handles is None
        self._handles = handles if handles is not None else OpenHandles(default_cap())
        self._reports = Rebuilds(executor)
        super().__init__(agents, clock=clock, day_zone=day_zone)

    def _key(self, shared: SharedSettings) -> Hashable:
        return shared.vault_dir

    def _track(self, key: Hashable, shared: SharedSettings, graph: bool) -> None:
        known = self._vaults.get(key)
        if known is None:
            self._vaults[key] = _Vault(shared.vault_dir, graph, recorder=self._recorder)
        else:
            known.graph = graph

    def _project(self, v: _Vault) -> str:
        return v.directory.name

    def _has_notes(self, v: _Vault) -> bool:
        return (v.directory / NOTES_DIR).is_dir()

    def _before_gc(self) -> None:
        self._recorder.flush(timeout=5.0)

    async def _write(self, v: _Vault, op: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if v.lock is None:
            v.lock = asyncio.Lock()
        loop = asyncio.get_running_loop()

        def run() -> T:
            v.writer = idle_or_closed(v.writer, v.directory / note_index.INDEX_FILE)
            if v.writer is None:
                v.writer = note_index.open_vault_index(v.directory)
            store = SqliteVaultStore(v.directory, v.writer)
            try:
                with store.writing():
                    return op(store, *args, **kwargs)
            finally:
                # Its page cache back after each write (the archives' writer does the same after a
                # refresh): kept, it would grow with every page of the vault ever written, up to 64 MiB.
                with contextlib.suppress(apsw.Error):
                    v.writer.execute("PRAGMA shrink_memory")

        try:
            async with self._handles.use(v), v.lock:
                result = await until_done(loop.run_in_executor(self._executor, run))
        except apsw.BusyError:  # the index locked past its timeout by another process: reindexed soon
            v.dirty = True
            raise
        finally:  # a write that failed (the index locked past its timeout) may have landed its note
            while v.recheck:
                self._check_note(v, v.recheck.pop())
            if v.dirty:  # a note changed by hand while this write landed, or not reindexed by it
                self._index_soon(v)
        self._graph_soon(v)
        return result

    async def _long_read(self, v: _Vault, op: Callable[[VaultStore], T]) -> T | None:
        def run() -> T | None:
            try:
                conn = schema.open_reader(v.directory / note_index.INDEX_FILE)
            except NotFound:
                return None
            try:
                tune_reader(conn, -VAULT_READER_CACHE_KIB)
                # the file stays read-only (SQLITE_OPEN_READONLY); query_only off lets the plan's term counts
                # make their fts5vocab table in the connection's own temp schema (``term_counts``)
                conn.execute("PRAGMA query_only=OFF")
                return op(SqliteVaultStore(v.directory, conn))
            finally:
                conn.close()

        async with self._handles.use(v):
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def _read_store(self, v: _Vault, op: Callable[[VaultStore], T]) -> T | None:
        async with self._handles.use(v):
            reader = v.open_reader()
            return None if reader is None else op(SqliteVaultStore(v.directory, reader))

    # --- reads ---------------------------------------------------------------------

    async def get(self, agent_id: str, name: str) -> notes.Note:
        v = self._vault(agent_id)
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, notes.get, SqliteVaultStore(v.directory, None), name)

    async def list_notes(self, agent_id: str, size: int, token: str, include_retired: bool) -> tuple[listing.NotePage, dict[str, Authors]]:
        """A page of the vault's notes (``listing``) and who wrote them, by the name listed (a retired
        note shares its live name's record)."""
        v = self._vault(agent_id)
        loop = asyncio.get_running_loop()
        page = await loop.run_in_executor(self._executor, lambda: listing.page(
            SqliteVaultStore(v.directory, None), size, token, include_retired=include_retired))
        async with self._handles.use(v):
            reader = v.open_reader()
            lives = {n.name: live_name(n.name) for n in page.notes}
            found = SqliteVaultStore(v.directory, reader).authors(set(lives.values())) if reader is not None else {}
        return page, {name: found[live] for name, live in lives.items() if live in found}

    async def graph(self, agent_id: str) -> GraphReport:
        """The vault's graph compiled now, written nowhere (``graph.build.compile_graph``)."""
        v = self._vault(agent_id)
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, compile_graph, v.directory / NOTES_DIR, self._clock())

    # --- recall --------------------------------------------------------------

    def record(self, agent_id: str, hits: Iterable[retrieval_log.Retrieved], kind: str) -> None:
        """Fire-and-forget: queue ``hits`` (vault notes retrieved by ``agent_id``) for the vault's log."""
        shared = self._recording(agent_id)
        if shared is None:
            return
        index = shared.vault_dir / note_index.INDEX_FILE
        if index.exists():  # a note read before any index: nothing to append to (never created here)
            self._recorder.submit(index, hits, kind)

    # --- search -------------------------------------------------------------------

    def note_changed(self, directory: Path, rel: str) -> None:
        """File watch: ``notes/<rel>`` changed. Stale only if the index does not match the file
        (this process's own writes are reindexed at once and must not read as stale). A stale
        vault reindexes the notes the events named at once, as the archives do (``archives``):
        one reindex at a time, one more queued; ``stale`` holds until it has committed."""
        v = self._vaults.get(directory)
        if v is None:
            return
        v.changed.add(rel)
        if not v.dirty:
            if v.lock is not None and v.lock.locked():
                v.recheck.add(rel)  # judged once our write and its reindex landed
                return
            self._check_note(v, rel)
        if v.dirty:
            self._index_soon(v)

    def _index_soon(self, v: _Vault) -> None:
        if v.index_task is not None and not v.index_task.done():
            v.index_again = True
            return
        v.index_task = asyncio.ensure_future(self._index_loop(v))

    async def _index_loop(self, v: _Vault) -> None:
        while True:
            v.index_again = False
            rels, v.changed = sorted(v.changed), set()
            notes = v.directory / "notes"
            walk = not rels or not all(rel and plain_source(notes, rel) for rel in rels)  # links: the walk's rules
            names = [rel.removesuffix(".md") for rel in rels]
            v.indexing, v.dirty = bool(v.dirty), False
            try:
                if walk:
                    await self._write(v, lambda store: note_index.refresh_vault(store.conn, store.directory))
                for start in range(0, 0 if walk else len(names), EVENT_BATCH):
                    batch = names[start : start + EVENT_BATCH]
                    await self._write(v, lambda store, b=batch: note_index.reindex_notes(store.conn, store.directory, b))
            except Exception:  # stale until the next event or refresh; no retry loop
                log.exception("kb_vault_reindex_failed", vault=str(v.directory))
                v.dirty = True
                return
            finally:
                v.indexing = False
            log.info("kb_vault_reindexed", vault=str(v.directory), mode="walk" if walk else "targeted", notes=len(names))
            if not (v.index_again or v.dirty):
                return

    def _check_note(self, v: _Vault, rel: str) -> None:
        """Stale unless the index matches the note on disk; a closed vault is taken as stale (as
        ``Archives._check_source``: the reindex that follows finds out)."""
        reader = v.open_reader() if rel and self._handles.is_open(v) else None
        if reader is None or not index_matches_file(reader, f"notes/{rel}", os.path.join(v.directory, "notes", rel)):
            v.dirty = True

    async def search(self, agent_id: str, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        """``(result, refreshed)`` over the agent's vault, twin rule applied."""
        v = self._vault(agent_id)
        async with self._handles.use(v):
            refreshed = False
            if refresh_first or not v.walked or v.open_reader() is None:
                await self._write(v, lambda store: self._walk(v, store, again=refresh_first))
                v.dirty = False
                refreshed = True
            reader = v.open_reader()
            if reader is None:  # the refresh made no index (the vault's folder cannot be written)
                return SearchResult([], 0, False), refreshed
            result = SqliteVaultStore(v.directory, reader).search(query, limit)
        return replace(result, stale=v.dirty or v.indexing), refreshed

    @staticmethod
    def _walk(v: _Vault, store: SqliteVaultStore, *, again: bool) -> None:
        """The vault's refresh for a search: always when asked (``again``), else only the first one
        since start. Searches that came while the first was running wait for it (the vault's lock)
        and do not walk again: an index whose notes are still being added is never answered from."""
        if again or not v.walked:
            note_index.refresh_vault(store.conn, store.directory)
            v.walked = True

    async def forget(self, agent_id: str, target: Target, tombstone_id: str, apply: bool) -> StoreForget:
        """The vault's part of a forget (``vault.forget``): notes, promotion records and graph reports as
        one write decision, then (on ``apply``) the index's bytes purged with its connections closed."""
        v = self._vault(agent_id)
        result = await self._write(v, lambda store: forget_sqlite(store, target, tombstone_id, apply))
        if apply:
            if v.lock is None:
                v.lock = asyncio.Lock()

            async with self._handles.use(v), v.lock:
                close = v.detach()  # on the loop: no search is using the connections now

                def purge() -> Purge:
                    close()
                    return purge_bytes(v.directory / note_index.INDEX_FILE)

                result.purge = await until_done(asyncio.get_running_loop().run_in_executor(self._executor, purge))
        return result

    def roots(self) -> dict[str, Path]:
        """Real notes folder → vault dir, for the file watch."""
        return {str((v.directory / NOTES_DIR).resolve()): v.directory for v in self._vaults.values()}

    # --- graph ----------------------------------------------------------------------

    def _graph_soon(self, v: _Vault) -> None:
        if v.graph:
            self._reports.soon(v, str(v.directory), lambda: build_reports(
                v.directory / NOTES_DIR, v.directory / note_index.REPORTS_DIR, self._clock()))

    async def settle(self) -> None:
        """Wait for pending reindexes and graph builds (tests and shutdown)."""
        for v in self._vaults.values():
            while v.index_task is not None and not v.index_task.done():
                await v.index_task
        await self._reports.settle()

    def close(self) -> None:
        """At a clean stop (after ``settle``): queued recall rows written, every vault closed with its
        WAL checkpointed and truncated (docs/concepts/archive.md "Bounded WAL")."""
        self._recorder.close()
        if self._own_handles:
            self._handles.close_all()
        for v in self._vaults.values():  # any not closed by the handles
            if v.writer is not None or v.reader is not None:
                v.detach()()
