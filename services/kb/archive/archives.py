"""Every agent's archive inside the KB process: one writer, one reader, coalesced refreshes.

Refreshes run in worker threads (never on the event loop) and are serialized
per agent; a refresh asked for while one runs is folded into exactly one
follow-up run that starts after the request arrived, so a caller that waits
always sees what was on disk when it asked. Searches use a separate
read-only connection (WAL lets them run beside a refresh), memory-mapped
(``search.tune_reader``), and run on the event loop: a search is a few
milliseconds of SQLite, cheaper than a thread hand-off. Recall is recorded by
one ``retrieval_log.Recorder`` (batched; its connection to an archive lives as long as the
archive is open; a fold first flushes it, ``close`` writes what is queued).

File events (``file_watch.py``) drive three things. **Staleness**: a search
never walks the tree; an event marks the archive stale when the index does not
match the file. **Indexing on events**: a stale archive gets a
refresh queued at once, through the same coalescing as any other (at most one
running per agent, one more queued), so a new note becomes searchable without
anyone asking; ``stale`` is true only while such a refresh is queued or
running. **Targeted refreshes**: events name the sources, so a refresh
reindexes just those (``indexer.reindex_paths``, about a millisecond per file,
in transactions of at most ``EVENT_BATCH`` with the loop running between them)
instead of stat'ing every source (tens of milliseconds for 10,000 files). A
refresh a caller asks for without naming paths first waits for the ``sync``
barrier (the KB's file watch), so every event for a change made before it was
asked has arrived: read-your-writes. It walks the whole tree
(``indexer.refresh``) when the barrier cannot vouch for the events (no watch,
the watch not live yet, a timeout), when the watch asked for a rescan (it
(re)started, a folder appeared or vanished, an event burst), when a named path
is not a plain source inside the workspace (a symlink, a folder), when a
lifecycle backfill is due, and at the first refresh after start. Without a barrier every refresh walks the tree.

The writer is one connection per agent: a refresh, a fold and a lifecycle
update (the staleness GC's ``UpdateEntryLifecycle``) each hold the agent's lock
while they use it, so none begins a transaction inside another's. The GC's
listing (``entries``, ``lifecycle``) reads through a connection of its own.

Open archives are bounded (``services.kb.resources.handles``): every use of a writer or reader is inside
``OpenHandles.use``; a closed archive keeps its state (``archive_state``) and opens on its next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import apsw
import structlog

from gateway.config import AgentConfig
from gateway.errors import FailedPrecondition, NotFound
from gateway.resources import SHORTAGES, shortage
from services.kb.archive import own_reads, retrieval_log
from services.kb.archive.archive_state import ArchiveState as _State
from services.kb.archive.refresh_once import refresh_once
from services.kb.file_watch import index_matches_file, plain_source
from services.kb.index import excerpt, indexer, lifecycle_rows, meta
from services.kb.index.search import SearchResult, search
from services.kb.archive.forgotten import hides
from services.kb.metrics import observe_refresh
from services.kb.resources.handles import OpenHandles, default_cap
from services.kb.resources.threads import until_done

log = structlog.get_logger()

_T = TypeVar("_T")


EVENT_BATCH = 64  # sources per transaction of a reindex driven by events (tens of milliseconds)
BATCH_PAUSE_S = 0.005  # at least this between two batches: searches waiting meanwhile answer alone
BATCH_SHARE = 0.5  # and half the batch's own time: a burst takes at most about 2/3 of a core from searches


class Archives:
    def __init__(
        self,
        agents: Iterable[AgentConfig],
        *,
        workers: int = 2,
        sync: Callable[[], Awaitable[bool]] | None = None,
        handles: OpenHandles | None = None,
    ) -> None:
        """``sync``: the file watch's barrier (``SourceWatch.sync``); without it every refresh walks the tree.
        ``handles``: the LRU of open archives (shared with the vaults; one of its own by default)."""
        self._recorder = retrieval_log.Recorder()
        self._states = {a.id: _State(a, self._recorder) for a in agents}
        self._gone: dict[str, _State] = {}  # agents removed by a config reload (their files stay)
        self._sync = sync
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kb")
        self._own_handles = handles is None
        self._handles = handles if handles is not None else OpenHandles(default_cap())

    @property
    def executor(self) -> ThreadPoolExecutor:
        return self._executor

    @property
    def handles(self) -> OpenHandles:
        return self._handles

    def agent(self, agent_id: str) -> AgentConfig | None:
        state = self._states.get(agent_id)
        return state.agent if state else None

    def _state(self, agent_id: str) -> _State:
        return self._states[agent_id]

    def update_agents(self, agents: Iterable[AgentConfig]) -> None:
        """A config reload: serve new agents, stop serving removed ones (their index stays on disk
        and is picked up again if they come back), and take changed settings. A changed
        workspace or archive setting makes the next refresh a walk (and reopens the writer
        for new archive settings, which may rebuild the index)."""
        fresh = {a.id: a for a in agents}
        for agent_id in [i for i in self._states if i not in fresh]:
            self._gone[agent_id] = self._states.pop(agent_id)
        for agent_id, agent in fresh.items():
            state = self._states.get(agent_id) or self._gone.pop(agent_id, None)
            if state is None:
                self._states[agent_id] = _State(agent, self._recorder)
                continue
            self._states[agent_id] = state
            if state.agent != agent:
                state.reopen = state.reopen or state.agent.knowledge.archive != agent.knowledge.archive
                state.agent = agent
                state.rescan = True
                state.dirty = None

    @staticmethod
    def _require_enabled(agent: AgentConfig) -> None:
        if not agent.knowledge.archive.enabled:
            raise FailedPrecondition(
                f"the knowledge archive is disabled for agent {agent.id!r} (gateway.knowledge.archive.enabled)"
            )

    # --- staleness ------------------------------------------------------------

    def mark_dirty(self, agent_id: str, rel: str = "") -> None:
        """File watch: source ``rel`` (workspace-relative; "" = unknown) of ``agent_id`` changed.

        The archive turns stale only when the index does not match the file:
        an event that arrives late for a change a refresh already indexed must
        not make a fresh index read as stale. Events seen while a refresh runs
        are judged once it has committed. A stale archive gets a refresh queued
        at once (``_index_soon``): nobody has to ask for one.
        """
        state = self._states.get(agent_id)
        if state is None:
            return
        if rel:
            state.changed.add(rel)  # ("" comes with a separate ``rescan`` from the watch)
        if not state.dirty:
            if not rel:
                state.dirty = True
            elif state.drain is not None and not state.drain.done():
                state.recheck.add(rel)
            else:
                self._check_source(state, rel)
        if state.dirty:
            self._index_soon(state)

    def _index_soon(self, state: _State) -> None:
        """Queue a refresh for what the events named (coalesced with any other): without waiting
        for the barrier when the events can be trusted, else the walk ``_targets`` falls back to."""
        if state.next_run is None and state.agent.knowledge.archive.enabled:
            future = self.refresh(state.agent.id, [])
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # failures are logged by the drain

    def rescan(self, agent_id: str) -> None:
        """File watch: events may have been missed; the agent's next refresh walks the whole tree."""
        state = self._states.get(agent_id)
        if state is not None:
            state.rescan = True

    def _check_source(self, state: _State, rel: str) -> None:
        """Mark ``state`` stale unless its index matches ``rel`` on disk. Only an open archive is
        asked (on the loop, synchronously: nothing closes it meanwhile); a closed one is taken as
        stale, and the refresh that follows finds out (opening it for one event would cost more)."""
        busy = not self._handles.is_open(state) or state.read_lock.locked()  # a worker reads on it now
        reader = None if busy else state.open_reader()
        if reader is None or not index_matches_file(reader, rel.replace(os.sep, "/"), os.path.join(state.agent.workspace, rel)):
            state.dirty = True

    # --- refresh --------------------------------------------------------------

    def refresh(self, agent_id: str, paths: Iterable[str] | None = None) -> asyncio.Future[indexer.RefreshReport]:
        """Schedule a refresh; the future resolves with its report (coalesced per agent).

        ``paths``: sources the caller just wrote (``check_sources``). A refresh asked for only
        with named sources reindexes them (and what the watch reported so far) without waiting
        for the watch's barrier; one that any caller asked for without paths passes the barrier."""
        state = self._state(agent_id)
        if paths is None:
            state.barrier = True
        else:
            state.named.update(paths)
        if state.next_run is None:
            state.next_run = asyncio.get_running_loop().create_future()
            if state.drain is None or state.drain.done():
                state.drain = asyncio.ensure_future(self._drain(state))
        return state.next_run

    async def _drain(self, state: _State) -> None:
        while state.next_run is not None:
            future, state.next_run = state.next_run, None
            barrier, named = state.barrier, state.named
            state.barrier, state.named = False, set()
            paths = await self._targets(state, barrier, named)
            state.indexing = bool(state.dirty)  # still stale until this run has committed
            state.dirty = False  # events from now on mark it again
            state.runs += 1
            try:
                async with self._handles.use(state):
                    report, targeted = await self._run(state, paths)
            except Exception as exc:  # report to every waiter; the next event or refresh may succeed
                log.exception("kb_refresh_failed", agent=state.agent.id)
                what = shortage(exc)
                if what is not None:  # degraded as a call that hit it would be (gateway.resources)
                    SHORTAGES.ran_out(what)
                observe_refresh("failed", None)
                state.dirty = True
                state.rescan = True
                if not future.done():
                    future.set_exception(exc)
                continue
            finally:
                state.indexing = False
            state.generation = report.generation
            state.last_report = report
            while state.recheck and not state.dirty:
                self._check_source(state, state.recheck.pop())
            state.recheck.clear()
            if state.dirty:  # a change landed while this run read the files: one more run
                self._index_soon(state)
            observe_refresh("targeted" if targeted else "walk", report.seconds)
            log.info(
                "kb_refreshed", agent=state.agent.id, mode="targeted" if targeted else "walk",
                generation=report.generation, indexed=report.indexed,
                skipped=report.skipped, pruned=report.pruned, errors=len(report.errors), ms=round(report.seconds * 1000, 2),
            )
            if not future.done():
                future.set_result(report)

    async def _targets(self, state: _State, barrier: bool, named: set[str]) -> list[str] | None:
        """The sources this refresh may limit itself to, or None to walk the tree (module docstring).

        Called as the refresh begins: after the barrier, the events of every change made
        before the refresh was asked for are in ``state.changed``. Without ``barrier`` (every
        waiter named what it wrote) and with the index open and trusted, the named sources
        and the events seen so far are enough: no wait for the watch."""
        if not barrier and not state.rescan and state.ready and self._sync is not None:
            paths = sorted({rel.replace(os.sep, "/") for rel in state.changed} | named)
            state.changed.clear()
            return paths
        synced = self._sync is not None and await self._sync()
        if not synced or state.rescan:
            # Only a walk that starts after the barrier proved the watch live makes events trustworthy.
            state.rescan = not synced
            state.changed.clear()
            return None
        paths = sorted({rel.replace(os.sep, "/") for rel in state.changed} | named)
        state.changed.clear()
        return paths

    async def _run(self, state: _State, paths: list[str] | None) -> tuple[indexer.RefreshReport, bool]:
        """One refresh on the writer: a walk, or a targeted reindex in transactions of at most
        EVENT_BATCH sources (a 5,000-file checkout must not hold the writer, or the event loop's
        turn at the GIL, for one long stretch). A walk with more than EVENT_BATCH sources to read
        reindexes them the same way first, then walks (``_walk_due``); the archive stays stale,
        and a waiting caller waits, until that walk has committed. The writer is one connection:
        each batch holds the agent's lock, so a fold or an update waits for a batch, not for the
        whole burst."""
        loop = asyncio.get_running_loop()
        due = await self._walk_due(state) if paths is None else paths
        batches: list[list[str] | None] = [paths] if len(due) <= EVENT_BATCH else [
            due[i : i + EVENT_BATCH] for i in range(0, len(due), EVENT_BATCH)]
        if paths is None and len(batches) > 1:
            batches.append(None)  # the walk after the batches: prunes, links, errors, whatever changed since
        total: indexer.RefreshReport | None = None
        for batch in batches:
            began = time.perf_counter()
            async with state.lock:
                report, targeted = await until_done(loop.run_in_executor(self._executor, refresh_once, state, batch))
            if not targeted:  # it walked (a fresh writer, a backfill, a path that is not plain): that covered all
                if total is not None:  # a walk split into batches: they count in its report
                    report.indexed, report.pruned = report.indexed + total.indexed, report.pruned + total.pruned
                    report.skipped = max(0, report.skipped - total.indexed)  # the walk found those done
                    report.errors[:0] = total.errors
                    report.seconds += total.seconds
                return report, False
            if total is None:
                total = report
            else:
                total.generation, total.indexed = report.generation, total.indexed + report.indexed
                total.pruned, total.seconds = total.pruned + report.pruned, total.seconds + report.seconds
                total.errors += report.errors
                total.skipped = report.skipped + report.indexed - total.indexed  # sources not (re)indexed
            if len(batches) > 1:
                # searches queued meanwhile answer before the next batch, without competing for the GIL
                await asyncio.sleep(max(BATCH_PAUSE_S, BATCH_SHARE * (time.perf_counter() - began)))
        assert total is not None
        return total, True

    async def _walk_due(self, state: _State) -> list[str]:
        """The plain sources a walk would read now, for ``_run`` to batch; [] when the walk must run
        whole (no writer yet, settings to reconcile, a backfill due). One walk over a burst's 5,000
        files in one transaction held the writer, and the GIL, for a second: searches waited."""
        agent = state.agent
        if not state.ready or state.reopen or not agent.knowledge.archive.enabled:
            return []

        def due() -> list[str]:
            writer = state.open_writer()
            if meta.get_meta(writer, "lifecycle_backfill") is not None:
                return []
            return [rel for rel in indexer.walk_reads(writer, agent.workspace) if plain_source(agent.workspace, rel)]

        async with state.lock:
            return await until_done(asyncio.get_running_loop().run_in_executor(self._executor, due))

    # --- search and get ---------------------------------------------------------

    async def search(self, agent_id: str, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        """``(result, refreshed)`` over the agent's own archive. Raises FailedPrecondition when it is off."""
        state = self._state(agent_id)
        self._require_enabled(state.agent)
        async with self._handles.use(state):
            return await self._search(state, query, limit, refresh_first)

    async def _search(self, state: _State, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        refreshed = False
        first_walk = not state.ready and state.drain is not None and not state.drain.done()
        if refresh_first or first_walk or state.open_reader() is None:  # an index being built: wait for it
            await self.refresh(state.agent.id)
            refreshed = True
        if state.open_reader() is None:  # refresh made nothing (e.g. workspace missing and index never built)
            return SearchResult([], 0, False), refreshed
        if state.dirty is None:  # first search since start: one full check, then file events
            workspace = state.agent.workspace
            state.dirty = await self._on_reader(state, lambda conn: own_reads.is_stale(conn, workspace))
        async with state.read_lock:  # never beside a worker's read of the same connection
            reader = state.open_reader()  # here: one got before an await may have been renewed since
            if reader is None:
                return SearchResult([], 0, False), refreshed
            result = search(reader, state.agent.workspace, query, limit, check_stale=False, hide=hides(state.agent))
        if state.dirty and not refreshed:
            self._index_soon(state)  # stale at start (or after a failed run): index without being asked
        return replace(result, stale=self.stale(state)), refreshed

    @staticmethod
    def stale(state: _State) -> bool:
        """Whether a change is not yet searchable: true only while a refresh for it is queued or
        running (or after one failed, until the next event or refresh)."""
        return bool(state.dirty) or state.indexing

    def refreshes(self, agent_id: str) -> int:
        """How many refreshes the agent's archive has run (tests: events coalesce)."""
        return self._state(agent_id).runs

    async def get(self, agent_id: str, path: str, from_line: int, lines: int) -> excerpt.Excerpt:
        """A bounded excerpt of a memory-scoped file (InvalidArgument / NotFound from ``excerpt``)."""
        agent = self._state(agent_id).agent
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, excerpt.get_excerpt, agent.workspace, path, from_line or 1, lines or excerpt.DEFAULT_LINES
        )

    async def probe_recall(self, agent_id: str, probes: list[tuple[str, str, str]]) -> tuple[list[bool], int]:
        """``recall_probe.probe`` over the agent's archive, in a worker thread on the archive's worker
        connection; ``(found per probe, generation)``. Raises FailedPrecondition when the archive is off."""
        state = self._state(agent_id)
        self._require_enabled(state.agent)
        workspace = state.agent.workspace
        try:
            async with self._handles.use(state):
                return await self._on_reader(state, lambda conn: own_reads.probe_recall(conn, workspace, probes))
        except NotFound:  # no index yet
            return [False] * len(probes), 0

    async def _on_reader(self, state: _State, work: Callable[[apsw.Connection], _T]) -> _T:
        """``work`` on the archive's reader in a worker thread (inside a use), its searches waiting
        meanwhile; NotFound before the index exists. ``work`` leaves no transaction open."""
        async with state.read_lock:
            reader = state.open_reader()
            if reader is None:
                raise NotFound("the knowledge archive has not been built yet")
            return await asyncio.get_running_loop().run_in_executor(self._executor, work, reader)

    async def _read_index(self, agent_id: str, work: Callable[[apsw.Connection], _T], empty: _T) -> _T:
        """``work`` on the archive's worker connection in a worker thread; ``empty`` before any index.
        Raises FailedPrecondition when the archive is off."""
        state = self._state(agent_id)
        self._require_enabled(state.agent)
        try:
            async with self._handles.use(state):
                return await self._on_reader(state, work)
        except NotFound:  # no index yet
            return empty

    async def entries(self, agent_id: str, after: str, page_size: int) -> lifecycle_rows.Page:
        """One page of the archive's entries with their lifecycle rows (``lifecycle_rows.list_entries``)."""
        return await self._read_index(agent_id, lambda c: lifecycle_rows.list_entries(c, after, page_size, time.time()),
                                      lifecycle_rows.Page([], [], ""))

    async def lifecycle(self, agent_id: str, hashes: list[str]) -> tuple[list[lifecycle_rows.EntryRow], list[lifecycle_rows.Lifecycle]]:
        """Where ``hashes`` stand now and their lifecycle rows (``lifecycle_rows.lifecycle_of``)."""
        return await self._read_index(agent_id, lambda c: lifecycle_rows.lifecycle_of(c, hashes, time.time()), ([], []))

    async def update_lifecycle(self, agent_id: str, updates: list[lifecycle_rows.Update]) -> tuple[int, list[str]]:
        """Record the staleness GC's decisions through the index's writer (``lifecycle_rows.update_lifecycle``):
        ``(rows updated, hashes with no row)``. Raises FailedPrecondition when the archive is off."""
        state = self._state(agent_id)
        self._require_enabled(state.agent)
        if not state.agent.kb_path.exists():
            return 0, [u.entry_hash for u in updates]

        def run() -> tuple[int, list[str]]:
            try:
                return lifecycle_rows.update_lifecycle(state.open_writer(), updates)
            finally:
                state.release_memory()

        async with self._handles.use(state), state.lock:
            return await until_done(asyncio.get_running_loop().run_in_executor(self._executor, run))

    @contextlib.asynccontextmanager
    async def exclusive(self, agent_id: str) -> AsyncIterator[_State]:
        """The agent's archive to itself for the block: held open, its writer's lock (no refresh, fold or
        update meanwhile) and its reader's (no search reads) held. The block may close its connections
        (``ArchiveState.detach``, on the loop): the next use opens them again."""
        state = self._state(agent_id)
        async with self._handles.use(state), state.lock, state.read_lock:
            yield state

    def record(self, agent_id: str, hits: Iterable[retrieval_log.Retrieved], kind: str) -> None:
        """Fire-and-forget append to kb_retrieval_log (queued, written in batches, each through a
        connection of its own: ``retrieval_log.Recorder``)."""
        agent = self._state(agent_id).agent
        if not agent.knowledge.archive.enabled or not agent.dreaming.staleness.record_retrievals:
            return
        # Search hits come from the index, so its file exists; Get reads files, maybe before any index.
        if kind == "search" or agent.kb_path.exists():
            self._recorder.submit(agent.kb_path, hits, kind)

    async def fold(self, agent_id: str) -> retrieval_log.FoldReport:
        state = self._state(agent_id)
        self._require_enabled(state.agent)
        if not state.agent.kb_path.exists():
            return retrieval_log.FoldReport(0, 0, 0)

        def run() -> retrieval_log.FoldReport:
            self._recorder.flush(timeout=5.0)  # fold what was retrieved before this call
            try:
                return retrieval_log.fold_retrievals(state.open_writer())
            finally:
                state.release_memory()

        async with self._handles.use(state), state.lock:
            return await until_done(asyncio.get_running_loop().run_in_executor(self._executor, run))

    async def status(self, agent_id: str) -> dict[str, object]:
        state = self._state(agent_id)
        agent = state.agent
        out: dict[str, object] = {"enabled": agent.knowledge.archive.enabled, "exists": agent.kb_path.exists(),
                                  "tokenizer": agent.knowledge.archive.tokenizer, "generation": 0, "sources": 0,
                                  "chunks": 0, "stale": self.stale(state)}
        if not agent.knowledge.archive.enabled:
            return out
        async with self._handles.use(state), state.read_lock:
            reader = state.open_reader()
            if reader is not None:
                out.update(own_reads.counts(reader))
        return out

    def roots(self) -> dict[str, str]:
        """Real workspace path → agent id, for agents with the archive on."""
        return {str(Path(s.agent.workspace).resolve()): s.agent.id for s in self._states.values() if s.agent.knowledge.archive.enabled}

    def close(self) -> None:
        """At a clean stop: the running refreshes finish, the queued recall rows are written, and
        every archive is closed with its WAL checkpointed and truncated (docs/concepts/archive.md "Bounded WAL")."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._recorder.close()
        if self._own_handles:
            self._handles.close_all()
        for state in [*self._states.values(), *self._gone.values()]:  # any not closed by the handles
            if state.writer is not None or state.reader is not None:
                state.detach()()

