"""The shared vaults inside the KB process (docs/concepts/vault.md "Shared vault").

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
agent has ``recordRetrievals`` off. ``collect`` runs the vault's GC
(``gc``) for the day, once per vault: with the most cautious of the GC
settings of the agents that share the vault (on only when every one of them
has it on, the largest ``staleDays``, the smallest cap).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any, TypeVar

import apsw
import structlog

from gateway.config import AgentConfig, SharedSettings, VaultGcSettings
from gateway.errors import FailedPrecondition, NotFound
from gateway.promotion_write import PromotionWrite
from services.kb.archive import retrieval_log
from services.kb.file_watch import index_matches_file, plain_source
from services.kb.index import schema
from services.kb.index.index_files import close_connections, idle_or_closed, release_caches
from services.kb.index.search import SearchResult, tune_reader
from services.kb.resources.handles import OpenHandles, default_cap
from services.kb.resources.threads import until_done
from services.kb.graph.build import compile_graph
from services.kb.graph.model import GraphReport
from services.kb.vault.names import NOTES_DIR, live_name
from services.kb.vault import gc, listing, note_index, notes, promotion, retirement, unpromote
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import Authors, VaultStore, Writer

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
    graph_task: asyncio.Task[None] | None = None
    graph_again: bool = False
    recheck: set[str] = field(default_factory=set)  # events seen while our own write was landing
    changed: set[str] = field(default_factory=set)  # notes named by events, not yet reindexed
    index_task: asyncio.Task[None] | None = None  # the reindex those events queued (one at a time)
    index_again: bool = False
    indexing: bool = False  # a reindex of changes that made the vault stale is running
    walked: bool = False  # a search's refresh has walked the notes since start
    recorder: retrieval_log.Recorder | None = None  # the recall writer: its connection closes with the vault's

    def detach(self) -> Callable[[], None]:
        """``handles.Holder``: the connections, taken out; what closes them (the WAL emptied): the
        recall writer's first, its queued rows written (``ArchiveState.detach``)."""
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
            tune_reader(self.reader)
        return self.reader


class Vaults:
    def __init__(
        self,
        agents: Iterable[AgentConfig],
        executor: ThreadPoolExecutor,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        day_zone: tzinfo | None = None,
        recorder: retrieval_log.Recorder | None = None,
        handles: OpenHandles | None = None,
    ) -> None:
        """``clock``: aware datetimes. ``day_zone``: where the GC's day is a date (None: this
        process's local time zone). ``recorder``: the recall writer (one of its own by default).
        ``handles``: the LRU of open indexes (shared with the archives; one of its own by default)."""
        self._settings: dict[str, SharedSettings] = {}
        self._records: dict[str, bool] = {}
        self._vaults: dict[Path, _Vault] = {}
        self._executor = executor
        self._clock = clock
        self._day_zone = day_zone
        self._recorder = recorder or retrieval_log.Recorder(clock=lambda: self._clock().timestamp())
        self._own_handles = handles is None
        self._handles = handles if handles is not None else OpenHandles(default_cap())
        self.update_agents(agents)

    def update_agents(self, agents: Iterable[AgentConfig]) -> None:
        """Take the agents' shared settings (at start and on a config reload). A vault no agent
        uses any more stays open until shutdown; its graph reports follow the agents that use it."""
        agents = list(agents)
        self._settings = {a.id: a.knowledge.shared for a in agents}
        self._records = {a.id: a.dreaming.staleness.record_retrievals for a in agents}
        graphs: dict[Path, bool] = {}
        for shared in self._settings.values():
            if shared.enabled:
                graphs[shared.vault_dir] = graphs.get(shared.vault_dir, False) or shared.graph
        for directory, graph in graphs.items():
            known = self._vaults.get(directory)
            if known is None:
                self._vaults[directory] = _Vault(directory, graph, recorder=self._recorder)
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

    # --- CRUD -------------------------------------------------------------------

    async def _authored(self, agent_id: str, op: Callable[[VaultStore], T],
                        wrote: Callable[[T], tuple[str, bool] | None], key: str, run_id: str = "") -> T:
        """``op`` as a write of ``agent_id``'s vault; the note ``wrote(result)`` names, when it names one, is
        recorded (the store's authors) as written by ``agent_id`` with the key named ``key`` (created when its
        flag says so)."""
        writer = Writer(agent_id, key, run_id, self._clock().timestamp())

        def run(store: VaultStore) -> T:
            result = op(store)
            written = wrote(result)
            if written is not None:
                store.record_author(written[0], writer, created=written[1])
            return result

        return await self._write(self._vault(agent_id), run)

    async def create(self, agent_id: str, name: str, content: str, confirm: bool, key: str = "") -> notes.CreateResult:
        """``notes.create``; a note written is recorded as created by ``agent_id`` (``_authored``)."""
        return await self._authored(agent_id, lambda store: notes.create(store, name, content, confirm=confirm),
                                    lambda r: (r.name, True) if r.created else None, key)

    async def update(self, agent_id: str, name: str, content: str, confirm: bool, key: str = "") -> notes.UpdateResult:
        """``notes.update``; a note written is recorded as changed by ``agent_id`` (``_authored``)."""
        return await self._authored(agent_id, lambda store: notes.update(store, name, content, confirm=confirm),
                                    lambda r: (r.name, False) if r.updated else None, key)

    async def delete(self, agent_id: str, name: str) -> notes.DeleteResult:
        return await self._write(self._vault(agent_id), notes.delete, name)

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

    async def retire(self, agent_id: str, name: str, reason: str) -> retirement.RetireResult:
        return await self._write(self._vault(agent_id), retirement.retire, name, reason, self._clock())

    async def restore(self, agent_id: str, name: str) -> retirement.RestoreResult:
        return await self._write(self._vault(agent_id), retirement.restore, name)

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str, key: str = "") -> promotion.PromoteResult:
        """One nightly promotion (``promotion``). FailedPrecondition when the agent's shared KB is
        off or its ``mode`` is ``propose`` (promotion is then never made)."""
        self._vault(agent_id)  # a shared KB that is off is named before the mode
        if self._settings[agent_id].mode != "auto":
            raise FailedPrecondition(
                f"shared promotion is off for agent {agent_id!r} (gateway.knowledge.shared.mode is "
                f"{self._settings[agent_id].mode!r}, not 'auto')"
            )
        promotion.check_request(topic, content)
        return await self._authored(
            agent_id,
            lambda store: promotion.promote(store, agent_id=agent_id, topic=topic, reason=reason,
                                            content=content, run_id=run_id),
            lambda r: None if r.write is None else (r.name, r.write.kind == "created"), key, run_id)

    async def undo_promotion(self, agent_id: str, write: PromotionWrite, run_id: str, op_id: str) -> unpromote.UndoResult:
        """Undo one promotion's write (``unpromote``), serialised with the vault's other writes (its
        promotions included). FailedPrecondition when the agent's shared KB is off; an undo is allowed
        whatever the ``mode`` (it takes out what a promotion wrote, it promotes nothing)."""
        v = self._vault(agent_id)
        return await self._write(v, lambda store: unpromote.undo(store, write, run_id=run_id, op_id=op_id))

    # --- recall and the GC --------------------------------------------------------------

    def record(self, agent_id: str, hits: Iterable[retrieval_log.Retrieved], kind: str) -> None:
        """Fire-and-forget: queue ``hits`` (vault notes retrieved by ``agent_id``) for the vault's log."""
        shared = self._settings.get(agent_id)
        if shared is None or not shared.enabled or not self._records.get(agent_id, True):
            return
        index = shared.vault_dir / note_index.INDEX_FILE
        if index.exists():  # a note read before any index: nothing to append to (never created here)
            v = self._vaults.get(shared.vault_dir)
            self._recorder.submit(index, hits, kind, keep=v is not None and self._handles.is_open(v))

    def gc_settings(self, directory: Path) -> tuple[VaultGcSettings, list[str]]:
        """The vault's GC settings, the most cautious of its agents' (module docstring), and the
        agents that have it off."""
        mine = [(agent_id, s.gc) for agent_id, s in self._settings.items() if s.enabled and s.vault_dir == directory]
        off = [agent_id for agent_id, gc in mine if not gc.enabled]
        if not mine:
            return VaultGcSettings(False, 0, 0), off
        return VaultGcSettings(
            enabled=not off,
            stale_days=max(gc.stale_days for _, gc in mine),
            max_retirements_per_run=min(gc.max_retirements_per_run for _, gc in mine),
        ), off

    async def collect(self, agent_id: str) -> gc.GcReport:
        """The vault GC of ``agent_id``'s vault for today, unless it ran today (``gc``).
        Raises FailedPrecondition when the shared KB is off for the agent."""
        v = self._vault(agent_id)
        settings, off = self.gc_settings(v.directory)
        now = self._clock()
        day = now.astimezone(self._day_zone).date().isoformat()
        project = v.directory.name
        if not settings.enabled:
            return gc.disabled(project, day, agent_id, off)
        if not (v.directory / "notes").is_dir():
            return gc.empty(project, day, agent_id)

        def run(store: VaultStore) -> gc.GcReport:
            self._recorder.flush(timeout=5.0)  # retrievals made before this call count tonight
            return gc.collect(store, settings, now, day, by=agent_id)

        report = await self._write(v, run)
        log.info("kb_vault_gc", vault=str(v.directory), agent=agent_id, outcome=report.outcome, day=day,
                 retired=len(report.retired), restored=len(report.restored), kept=len(report.kept),
                 waiting=report.waiting, skipped=report.skipped_count, folded=report.folded)
        return report

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
        if reader is None or not index_matches_file(reader, f"notes/{rel}", v.directory / "notes" / rel):
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
        from services.kb.graph.build import build_reports

        loop = asyncio.get_running_loop()
        while True:
            v.graph_again = False
            try:
                report = await loop.run_in_executor(
                    self._executor, build_reports, v.directory / "notes", v.directory / note_index.REPORTS_DIR, self._clock()
                )
                log.info("kb_graph_built", vault=str(v.directory), written=list(report.written), ms=round(report.seconds * 1000, 2))
            except Exception:
                log.exception("kb_graph_failed", vault=str(v.directory))
            if not v.graph_again:
                return

    async def settle(self) -> None:
        """Wait for pending reindexes and graph builds (tests and shutdown)."""
        for v in self._vaults.values():
            while v.index_task is not None and not v.index_task.done():
                await v.index_task
            while v.graph_task is not None and not v.graph_task.done():
                await v.graph_task

    def close(self) -> None:
        """At a clean stop (after ``settle``): queued recall rows written, every vault closed with its
        WAL checkpointed and truncated (docs/concepts/archive.md "Bounded WAL")."""
        self._recorder.close()
        if self._own_handles:
            self._handles.close_all()
        for v in self._vaults.values():  # any not closed by the handles
            if v.writer is not None or v.reader is not None:
                v.detach()()
