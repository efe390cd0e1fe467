"""What every backend's shared-vault registry does the same way (docs/concepts/vault.md "Shared vault"):
which vault an agent reaches, the write calls and who wrote them, promotion's mode check, and the GC's
settings and day. The backend is chosen once at the KB's start (``services.kb.main``): ``registry.Vaults``
keeps each vault as notes files with an SQLite index in this process, ``vault_pg.registry`` keeps them in
PostgreSQL. A subclass says how a vault is named (``_key``), how a write decision runs on its store
(``_write``) and how reads, search, recall and the graph reach it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any, Generic, TypeVar

import structlog

from gateway.config import AgentConfig, SharedSettings, VaultGcSettings
from gateway.errors import FailedPrecondition
from gateway.forgetting import Target, Tombstone
from gateway.promotion_write import PromotionWrite
from services.kb.archive import retrieval_log
from services.kb.graph.model import GraphReport
from services.kb.index.purge import StoreForget
from services.kb.index.search import SearchResult
from services.kb.vault.note_index import REPORTS_DIR
from services.kb.vault import gc, listing, notes, promotion, promotion_record, retirement, unpromote
from services.kb.vault.store import Authors, VaultStore, Writer

log = structlog.get_logger()

T = TypeVar("T")
V = TypeVar("V")


class SharedVaults(ABC, Generic[V]):
    """The agents' vaults (``V``: a backend's handle of one vault) and the calls on them."""

    def __init__(self, agents: Iterable[AgentConfig], *, clock: Callable[[], datetime], day_zone: tzinfo | None) -> None:
        self._settings: dict[str, SharedSettings] = {}
        self._records: dict[str, bool] = {}
        self._vaults: dict[Hashable, V] = {}
        self._clock = clock
        self._day_zone = day_zone
        self.update_agents(agents)

    def update_agents(self, agents: Iterable[AgentConfig]) -> None:
        """Take the agents' shared settings (at start and on a config reload). A vault no agent
        uses any more stays open until shutdown; its graph reports follow the agents that use it."""
        agents = list(agents)
        self._settings = {a.id: a.knowledge.shared for a in agents}
        self._homes = {a.id: a.home for a in agents}
        self._records = {a.id: a.dreaming.staleness.record_retrievals for a in agents}
        graphs: dict[Hashable, tuple[SharedSettings, bool]] = {}
        for shared in self._settings.values():
            if shared.enabled:
                key = self._key(shared)
                graphs[key] = (shared, graphs.get(key, (shared, False))[1] or shared.graph)
        for key, (shared, graph) in graphs.items():
            self._track(key, shared, graph)

    @abstractmethod
    def _key(self, shared: SharedSettings) -> Hashable:
        """What names the vault of these settings (its folder, its project)."""

    @abstractmethod
    def _track(self, key: Hashable, shared: SharedSettings, graph: bool) -> None:
        """Open (or update) the handle of vault ``key``."""

    @abstractmethod
    async def _write(self, v: V, op: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``op(store, *args, **kwargs)`` as one write decision on vault ``v`` (its store's ``writing``)."""

    @abstractmethod
    def _project(self, v: V) -> str:
        """The vault's project (as the GC's report names it)."""

    def _vault(self, agent_id: str) -> V:
        shared = self._settings[agent_id]
        if not shared.enabled:
            raise FailedPrecondition(
                f"shared KB disabled for agent {agent_id!r} (gateway.knowledge.shared.enabled is false)"
            )
        return self._vaults[self._key(shared)]

    def project_of(self, agent_id: str) -> str:
        """The project of the agent's vault (FailedPrecondition when its shared KB is off)."""
        return self._project(self._vault(agent_id))

    def _by_project(self, project: str) -> V:
        """The vault of ``project`` (the weekly reflection's calls name it, not an agent); FailedPrecondition
        when no agent has its shared KB on with that project."""
        for shared in self._settings.values():
            if shared.enabled and shared.project == project:
                return self._vaults[self._key(shared)]
        raise FailedPrecondition(f"no shared vault of project {project!r}: no agent has gateway.knowledge.shared "
                                 "enabled with that project")

    def sharers(self, project: str) -> list[tuple[str, Path]]:
        """``(agent id, home)`` of every agent whose shared KB is on with ``project``, by id."""
        return sorted((agent_id, self._homes[agent_id]) for agent_id, shared in self._settings.items()
                      if shared.enabled and shared.project == project)

    async def reflect(self, project: str, op: Callable[[VaultStore, datetime], T]) -> T:
        """``op(store, now)`` as one write decision on ``project``'s vault (the weekly reflection's steps,
        ``vault.reflection``); FailedPrecondition when there is no such vault."""
        v = self._by_project(project)
        now = self._clock()
        return await self._write(v, lambda store: op(store, now))

    def enabled_settings(self) -> list[SharedSettings]:
        """The shared settings of every agent whose shared KB is on."""
        return [s for s in self._settings.values() if s.enabled]

    def reports_dir(self, project: str) -> Path:
        """Where ``project``'s vault keeps its reports on this host (``<root>/<project>/reports``), on either
        backend; FailedPrecondition when no agent has its shared KB on with that project."""
        self._by_project(project)
        shared = next(s for s in self._settings.values() if s.enabled and s.project == project)
        return shared.vault_dir / REPORTS_DIR

    async def reflect_read(self, project: str, op: Callable[[VaultStore], T], *, unbuilt: T | None = None) -> T:
        """``op(store)`` as a long read of ``project``'s vault off the event loop, holding no write lock (the
        reflection's snapshot, its list of runs); FailedPrecondition when there is no such vault. A vault with
        no index yet (nothing ever written to it) answers ``unbuilt`` when given, else FailedPrecondition."""
        v = self._by_project(project)
        result = await self._long_read(v, op)
        if result is None:
            if unbuilt is not None:
                return unbuilt
            raise FailedPrecondition(f"the shared vault of project {project!r} has no index yet")
        return result

    @abstractmethod
    async def _long_read(self, v: V, op: Callable[[VaultStore], T]) -> T | None:
        """``op(store)`` on a worker thread with a connection of its own (None when the vault has no index yet)."""

    def require(self, agent_id: str) -> None:
        """FailedPrecondition when ``agent_id``'s shared KB is off (before a call that does more first)."""
        self._vault(agent_id)

    def _recording(self, agent_id: str) -> SharedSettings | None:
        """The agent's shared settings when its retrievals are recorded (None: they are not)."""
        shared = self._settings.get(agent_id)
        if shared is None or not shared.enabled or not self._records.get(agent_id, True):
            return None
        return shared

    # --- writes -------------------------------------------------------------------------

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

    async def retire(self, agent_id: str, name: str, reason: str) -> retirement.RetireResult:
        return await self._write(self._vault(agent_id), retirement.retire, name, reason, self._clock())

    async def restore(self, agent_id: str, name: str) -> retirement.RestoreResult:
        return await self._write(self._vault(agent_id), retirement.restore, name)

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str, key: str = "",
                      request_id: str = "") -> promotion.PromoteResult:
        """One nightly promotion (``promotion``), answered once per ``request_id`` (``promotion_record``).
        FailedPrecondition when the agent's shared KB is off or its ``mode`` is ``propose`` (promotion is
        then never made); InvalidArgument for a malformed request."""
        self._vault(agent_id)  # a shared KB that is off is named before the mode
        if self._settings[agent_id].mode != "auto":
            raise FailedPrecondition(
                f"shared promotion is off for agent {agent_id!r} (gateway.knowledge.shared.mode is "
                f"{self._settings[agent_id].mode!r}, not 'auto')"
            )
        promotion.check_request(topic, content)
        promotion_record.check_request_id(request_id)
        at = self._clock().timestamp()
        return await self._authored(
            agent_id,
            lambda store: promotion_record.promote_once(store, request_id=request_id, agent_id=agent_id, topic=topic,
                                                        reason=reason, content=content, run_id=run_id, at=at),
            lambda r: None if r.write is None or r.replayed else (r.name, r.write.kind == "created"), key, run_id)

    async def undo_promotion(self, agent_id: str, write: PromotionWrite | None, run_id: str, op_id: str,
                             request_id: str = "") -> unpromote.UndoResult:
        """Undo one promotion's write (``unpromote``), or the one recorded under ``request_id``
        (``promotion_record.undo_once``), serialised with the vault's other writes (its promotions
        included). FailedPrecondition when the agent's shared KB is off; an undo is allowed whatever the
        ``mode`` (it takes out what a promotion wrote, it promotes nothing)."""
        v = self._vault(agent_id)
        promotion_record.check_request_id(request_id)
        at = self._clock().timestamp()
        return await self._write(v, lambda store: promotion_record.undo_once(
            store, write, request_id=request_id, agent_id=agent_id, run_id=run_id, op_id=op_id, at=at))

    # --- the GC ---------------------------------------------------------------------------

    def gc_settings(self, key: Hashable) -> tuple[VaultGcSettings, list[str]]:
        """The vault's GC settings, the most cautious of its agents' (on only when every one of them has it
        on, the largest ``staleDays``, the smallest cap), and the agents that have it off."""
        mine = [(agent_id, s.gc) for agent_id, s in self._settings.items() if s.enabled and self._key(s) == key]
        off = [agent_id for agent_id, gc in mine if not gc.enabled]
        if not mine:
            return VaultGcSettings(False, 0, 0), off
        return VaultGcSettings(
            enabled=not off,
            stale_days=max(gc.stale_days for _, gc in mine),
            max_retirements_per_run=min(gc.max_retirements_per_run for _, gc in mine),
        ), off

    def _has_notes(self, v: V) -> bool:
        """Whether the vault may hold notes (the GC of one that cannot is ``gc.empty``)."""
        return True

    def _before_gc(self) -> None:
        """What must land before the GC folds the retrieval log."""

    async def collect(self, agent_id: str) -> gc.GcReport:
        """The vault GC of ``agent_id``'s vault for today, unless it ran today (``gc``).
        Raises FailedPrecondition when the shared KB is off for the agent."""
        v = self._vault(agent_id)
        settings, off = self.gc_settings(self._key(self._settings[agent_id]))
        now = self._clock()
        day = now.astimezone(self._day_zone).date().isoformat()
        project = self._project(v)
        if not settings.enabled:
            return gc.disabled(project, day, agent_id, off)
        if not self._has_notes(v):
            return gc.empty(project, day, agent_id)

        def run(store: VaultStore) -> gc.GcReport:
            self._before_gc()  # retrievals made before this call count tonight
            return gc.collect(store, settings, now, day, by=agent_id)

        report = await self._write(v, run)
        log.info("kb_vault_gc", vault=project, agent=agent_id, outcome=report.outcome, day=day,
                 retired=len(report.retired), restored=len(report.restored), kept=len(report.kept),
                 waiting=report.waiting, skipped=report.skipped_count, folded=report.folded)
        return report

    # --- reads, recall, the file watch and shutdown: each backend's own ----------------------

    @abstractmethod
    async def get(self, agent_id: str, name: str) -> notes.Note:
        """``notes.get`` on the agent's vault."""

    @abstractmethod
    async def list_notes(self, agent_id: str, size: int, token: str,
                         include_retired: bool) -> tuple[listing.NotePage, dict[str, Authors]]:
        """A page of the vault's notes (``listing``) and who wrote them, by the name listed (a retired
        note shares its live name's record)."""

    @abstractmethod
    async def search(self, agent_id: str, query: str, limit: int, refresh_first: bool) -> tuple[SearchResult, bool]:
        """``(result, refreshed)`` over the agent's vault, twin rule applied."""

    @abstractmethod
    async def graph(self, agent_id: str) -> GraphReport:
        """The vault's graph compiled now, written nowhere."""

    @abstractmethod
    def record(self, agent_id: str, hits: Iterable[retrieval_log.Retrieved], kind: str) -> None:
        """Fire-and-forget: queue ``hits`` (vault notes retrieved by ``agent_id``) for the vault's log."""

    @abstractmethod
    async def forget(self, agent_id: str, target: Target, tombstone_id: str, apply: bool) -> StoreForget:
        """The vault's part of a forget (``vault.forget``): where ``target`` is, and on ``apply`` every
        note, record and index byte of it replaced by the marker of ``tombstone_id`` or purged."""

    # --- the vault's tombstones (docs/concepts/forget.md "Shared tombstones across hosts") -----

    @abstractmethod
    async def _read_store(self, v: V, op: Callable[[VaultStore], T]) -> T | None:
        """``op(store)`` as a read of vault ``v`` (None when the vault has no index yet)."""

    def _enabled(self) -> dict[str, V]:
        """The vaults some agent's shared KB is on with, by project."""
        return {shared.project: self._vaults[self._key(shared)] for shared in self._settings.values() if shared.enabled}

    def tombstone_homes(self) -> list[Path]:
        """The homes of the agents whose shared KB is on (where the vault's tombstones are mirrored)."""
        return sorted({self._homes[a] for a, shared in self._settings.items() if shared.enabled})

    async def share_tombstones(self, agent_id: str, rows: Sequence[Tombstone], lift: str, at: str) -> tuple[int, int]:
        """Keep ``rows`` in the agent's vault and lift tombstone ``lift`` ("" for none) at ``at``: one write
        decision; how many were added and lifted."""
        def run(store: VaultStore) -> tuple[int, int]:
            return (store.share_tombstones(rows) if rows else 0, store.lift_tombstone(lift, at) if lift else 0)

        return await self._write(self._vault(agent_id), run)

    async def tombstones_mark(self) -> tuple[tuple[str, int, int], ...]:
        """Each vault's ``tombstones_mark``, by project: what the mirror polls."""
        marks = []
        for project, v in sorted(self._enabled().items()):
            found = await self._read_store(v, lambda store: store.tombstones_mark())
            marks.append((project, *(found or (0, 0))))
        return tuple(marks)

    async def held_tombstones(self, *, lifted: bool = False) -> list[Tombstone]:
        """The tombstones every vault holds (not lifted; with ``lifted``, the lifted ones), each id once."""
        held: dict[str, Tombstone] = {}
        for _, v in sorted(self._enabled().items()):
            for t in await self._read_store(v, lambda store: store.tombstones(lifted=lifted)) or []:
                held.setdefault(t.id, t)
        return list(held.values())

    @abstractmethod
    def roots(self) -> dict[str, Path]:
        """Real notes folder → vault dir, for the file watch (none when notes are no files)."""

    @abstractmethod
    def note_changed(self, directory: Path, rel: str) -> None:
        """File watch: ``notes/<rel>`` of the vault in ``directory`` changed."""

    @abstractmethod
    async def settle(self) -> None:
        """Wait for the work running in the background (tests and shutdown)."""

    @abstractmethod
    def close(self) -> None:
        """At a clean stop (after ``settle``)."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
