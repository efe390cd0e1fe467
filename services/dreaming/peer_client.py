"""Dreaming's calls to its peers over gRPC, with the internal token and deadlines.

- The KB: ``Refresh`` (waited for), ``Search`` and ``ProbeRecall`` for the recall
  check; ``FoldRetrievals``, ``ListArchiveEntries`` and ``UpdateEntryLifecycle`` for
  the staleness GC and ``explain``; ``PromoteFact``, for shared promotion, and
  ``UndoPromotion``, when a revert takes a promotion out again; ``CollectVault``,
  the shared vault's GC; ``ForgetText``, a forget's part in the archive and the vault; the vault's weekly
  reflection's ``PlanVaultReflection``, ``MergeVaultNotes``, ``RecordVaultReflection``,
  ``ListVaultReflections`` and ``RevertVaultReflection`` (``reflect.run.VaultPeer``). The dreaming process never opens a
  ``kb.sqlite``, and none of its reads counts as a retrieval.
- The watcher: ``GetActivity``, for the quiet window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.errors import Aborted, FailedPrecondition, GatewayError, InvalidArgument, NotFound, PermissionDenied
from gateway.forgetting import Target, Tombstone
from gateway.tombstone_proto import to_proto
from gateway import promotion_write
from gateway.promotion_write import PromotionWrite
from gateway.channels import KB_FORGET_DEADLINE_S, aio_channel
from gateway.v1 import kb_pb2, kb_pb2_grpc, watcher_pb2, watcher_pb2_grpc
from services.dreaming.forget.places import MAX_LINES
from services.dreaming.forget.places import Place
from services.dreaming.forget.run import KbForget, KbPurge, left_of
from services.dreaming.model.archive import Hit, IndexedEntry, IndexedSource, LifecycleUpdate, Listing
from services.dreaming.schedule.quiet import Activity
from services.dreaming.vault.promotion import PromotionReply, UndoReply

REFRESH_DEADLINE_S = 120.0  # a first index of a large archive takes a while
SEARCH_DEADLINE_S = 10.0
PROMOTE_DEADLINE_S = 30.0  # one vault write and its reindex; the vault index waits up to 10 s for a lock
# An undo is one such write too, but a revert answers within the REST shim's default deadline (10 s): a KB
# that does not answer in time is taken for unreachable, and the rest of the revert's undos wait for the next.
UNDO_DEADLINE_S = 8.0
ACTIVITY_DEADLINE_S = 5.0
ENTRIES_PAGE = 20_000  # entries per ListArchiveEntries page (whole sources; well under the message cap)
UPDATE_BATCH = 5000
COLLECT_DEADLINE_S = 120.0  # a vault GC: a fold, then up to maxRetirementsPerRun moves and reindexes
REFLECT_DEADLINE_S = 120.0  # a merge writes the pruned archive and probes recall; a revert restores a run's notes
# A plan recalls every note's seed over the vault's index: 50-120 s for 10,000 notes on two busy cores
# (docs/benchmarks/vault_reflection.md "Figures"), linear in the notes beyond that. A plan cut short by its
# deadline fails the run, and the KB, which finishes it, keeps the claim until it expires.
PLAN_DEADLINE_S = 1200.0
PROBE_BATCH = 1000  # probes per ProbeRecall call (entries are small; well under the 8 MiB message cap)


class PeerUnavailable(Exception):
    """A peer could not answer; ``str()`` names the peer, the code and its detail; ``code`` is the
    gRPC status code's name (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``…)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


def _unavailable(peer: str, err: grpc.aio.AioRpcError) -> PeerUnavailable:
    return PeerUnavailable(f"{peer}: {err.code().name}: {err.details() or 'no detail'}", err.code().name)


class KbIndex:
    """``model.archive.Index`` over the KB service."""

    def __init__(self, address: str, internal_token: str) -> None:
        self._channel = aio_channel(address)
        self._stub = kb_pb2_grpc.KnowledgeStub(self._channel)
        self._metadata = ((INTERNAL_TOKEN_HEADER, internal_token), ("x-gateway-record-retrievals", "0"))

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        try:
            await self._stub.Refresh(kb_pb2.RefreshRequest(agent_id=agent_id, wait=True, paths=list(paths)),
                                     timeout=REFRESH_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        try:
            reply = await self._stub.Search(kb_pb2.SearchRequest(agent_id=agent_id, query=query, limit=limit),
                                            timeout=SEARCH_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        return [Hit(h.path, h.start_line, h.end_line, h.entry_hash) for h in reply.hits if h.corpus in ("", "memory")]

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        """``ProbeRecall`` for ``(path, query, text)`` probes, PROBE_BATCH at a time."""
        found: list[bool] = []
        for start in range(0, len(probes), PROBE_BATCH):
            batch = [kb_pb2.RecallProbe(path=p, query=q, text=t) for p, q, t in probes[start : start + PROBE_BATCH]]
            try:
                reply = await self._stub.ProbeRecall(kb_pb2.ProbeRecallRequest(agent_id=agent_id, probes=batch),
                                                     timeout=REFRESH_DEADLINE_S, metadata=self._metadata)
            except grpc.aio.AioRpcError as err:
                raise _unavailable("kb", err) from None
            found += list(reply.found)
        return found

    async def fold(self, agent_id: str) -> None:
        try:
            await self._stub.FoldRetrievals(kb_pb2.FoldRetrievalsRequest(agent_id=agent_id),
                                            timeout=REFRESH_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None

    async def entries(self, agent_id: str) -> Listing:
        """Every page of ``ListArchiveEntries``."""
        entries: list[IndexedEntry] = []
        sources: dict[str, IndexedSource] = {}
        token = ""
        while True:
            try:
                reply = await self._stub.ListArchiveEntries(
                    kb_pb2.ListArchiveEntriesRequest(agent_id=agent_id, page_size=ENTRIES_PAGE, page_token=token),
                    timeout=REFRESH_DEADLINE_S, metadata=self._metadata)
            except grpc.aio.AioRpcError as err:
                raise _unavailable("kb", err) from None
            entries += [_indexed(e.path, e.start_line, e.end_line, e.importance, e.provenance, e.lifecycle) for e in reply.entries]
            sources.update((s.path, IndexedSource(s.path, s.content_hash, s.provenance)) for s in reply.sources)
            if not reply.next_page_token:
                return Listing(entries, sources)
            token = reply.next_page_token

    async def lifecycle(self, agent_id: str, hashes: Sequence[str]) -> tuple[list[IndexedEntry], list[IndexedEntry]]:
        try:
            reply = await self._stub.ListArchiveEntries(
                kb_pb2.ListArchiveEntriesRequest(agent_id=agent_id, entry_hashes=list(hashes)),
                timeout=SEARCH_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        places = [_indexed(e.path, e.start_line, e.end_line, e.importance, e.provenance, e.lifecycle) for e in reply.entries]
        return places, [_indexed("", 0, 0, 0, "", life) for life in reply.lifecycle]

    async def update_lifecycle(self, agent_id: str, updates: Sequence[LifecycleUpdate]) -> list[str]:
        missing: list[str] = []
        for start in range(0, len(updates), UPDATE_BATCH):
            batch = [
                kb_pb2.LifecycleUpdate(entry_hash=u.entry_hash, invalid_at=u.invalid_at or 0.0, clear_invalid=u.clear_invalid,
                                       restored_at=u.restored_at or 0.0, **({"supersedes_key": u.supersedes_key} if u.supersedes_key is not None else {}))
                for u in updates[start : start + UPDATE_BATCH]
            ]
            try:
                reply = await self._stub.UpdateEntryLifecycle(kb_pb2.UpdateEntryLifecycleRequest(agent_id=agent_id, updates=batch),
                                                              timeout=REFRESH_DEADLINE_S, metadata=self._metadata)
            except grpc.aio.AioRpcError as err:
                raise _unavailable("kb", err) from None
            missing += list(reply.missing)
        return missing

    async def collect_vault(self, agent_id: str) -> str:
        """``CollectVault``: the KB's one-line answer (``vault.gc.Vault``). Raises PeerUnavailable."""
        try:
            reply: kb_pb2.CollectVaultResponse = await self._stub.CollectVault(
                kb_pb2.CollectVaultRequest(agent_id=agent_id), timeout=COLLECT_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        return reply.message

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str) -> PromotionReply:
        """``PromoteFact``: one shared promotion (``vault.promotion.Promoter``). Raises PeerUnavailable."""
        request = kb_pb2.PromoteFactRequest(agent_id=agent_id, topic=topic, reason=reason, content=content, run_id=run_id,
                                            request_id=request_id)
        try:
            r = await self._stub.PromoteFact(request, timeout=PROMOTE_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        return PromotionReply(outcome=r.outcome, name=r.name, reason=r.reason, message=r.message, name_from=r.name_from,
                              passed_over=r.passed_over, linked=tuple(r.linked), folded=r.folded, twin_kept=r.twin_kept,
                              write=promotion_write.from_proto(r.write) if r.HasField("write") else None)

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite | None,
                             request_id: str) -> UndoReply:
        """``UndoPromotion``: undo one promotion's write, or the one recorded under ``request_id``. Raises
        PeerUnavailable."""
        request = kb_pb2.UndoPromotionRequest(agent_id=agent_id, run_id=run_id, op_id=op_id, request_id=request_id,
                                              write=None if write is None else promotion_write.to_proto(write))
        try:
            r = await self._stub.UndoPromotion(request, timeout=UNDO_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        return UndoReply(outcome=r.outcome, note=r.note, reason=r.reason, deleted=r.deleted)

    async def share_tombstones(self, agent_id: str, tombstones: Sequence[Tombstone], lift: str = "") -> None:
        """``ShareTombstones``: shared tombstones kept in the agent's vault, ``lift`` lifted there. A refusal
        is raised as the GatewayError of its code; any other failure as PeerUnavailable."""
        request = kb_pb2.ShareTombstonesRequest(agent_id=agent_id, tombstones=[to_proto(t) for t in tombstones],
                                                lift=lift)
        try:
            await self._stub.ShareTombstones(request, timeout=KB_FORGET_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            refused = _REFUSALS.get(err.code())
            if refused is not None:
                raise refused(f"kb: {err.details() or err.code().name}") from None
            raise _unavailable("kb", err) from None

    async def forget_text(self, agent_id: str, target: Target, *, shared: bool, apply: bool, tombstone_id: str,
                          changed_paths: Sequence[str], tombstones: Sequence[Tombstone] = ()) -> KbForget:
        """``ForgetText``: the KB's part of a forget (``forget.run``). A refusal of the request is raised
        as the GatewayError of its code; any other failure as PeerUnavailable."""
        request = kb_pb2.ForgetTextRequest(agent_id=agent_id, text=target.text or "", pattern=target.pattern or "",
                                           shared=shared, apply=apply, tombstone_id=tombstone_id,
                                           changed_paths=list(changed_paths), tombstones=[to_proto(t) for t in tombstones])
        try:
            r = await self._stub.ForgetText(request, timeout=KB_FORGET_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            refused = _REFUSALS.get(err.code())
            if refused is not None:
                raise refused(f"kb: {err.details() or err.code().name}") from None
            raise _unavailable("kb", err) from None
        places: list[Place] = []
        for store in r.stores:
            left = {(p.place, p.kind) for p in store.left}
            places += [Place(store.store, p.place, p.count, tuple(p.lines)[:MAX_LINES],
                             changed=apply and (p.place, p.kind) not in left,
                             left=left_of(p.kind, store.store) if (p.place, p.kind) in left else "", kind=p.kind)
                       for p in store.places]
            places += [Place(store.store, p.place, p.count, tuple(p.lines)[:MAX_LINES], left=left_of(p.kind, store.store),
                             kind=p.kind)
                       for p in store.left if not any((q.place, q.kind) == (p.place, p.kind) for q in store.places)]
        purges = [KbPurge(s.store, s.bytes_before, s.bytes_after, s.purge_seconds) for s in r.stores if s.purged]
        return KbForget(tuple(places), tuple(purges), tuple(r.matched))

    async def _reflection_call(self, method: str, request: object, deadline: float) -> Any:
        """One of the KB's reflection calls: a refusal raised as the GatewayError of its code
        (ABORTED too), any other failure as PeerUnavailable."""
        try:
            return await getattr(self._stub, method)(request, timeout=deadline, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            refused = _REFUSALS.get(err.code()) or (Aborted if err.code() == grpc.StatusCode.ABORTED else None)
            if refused is not None:
                raise refused(f"kb: {err.details() or err.code().name}") from None
            raise _unavailable("kb", err) from None

    async def plan_reflection(self, request: kb_pb2.PlanVaultReflectionRequest) -> kb_pb2.VaultReflectionPlan:
        """``PlanVaultReflection``: claim and plan a run of the vault's reflection."""
        reply: kb_pb2.VaultReflectionPlan = await self._reflection_call("PlanVaultReflection", request, PLAN_DEADLINE_S)
        return reply

    async def merge_notes(self, request: kb_pb2.MergeVaultNotesRequest) -> kb_pb2.MergeVaultNotesResponse:
        """``MergeVaultNotes``: one merge of a claimed run, checked (and unless dry_run, applied)."""
        reply: kb_pb2.MergeVaultNotesResponse = await self._reflection_call("MergeVaultNotes", request, REFLECT_DEADLINE_S)
        return reply

    async def record_reflection(self, request: kb_pb2.RecordVaultReflectionRequest) -> kb_pb2.VaultReflectionRun:
        """``RecordVaultReflection``: end a claimed run with its record."""
        reply: kb_pb2.VaultReflectionRun = await self._reflection_call("RecordVaultReflection", request, SEARCH_DEADLINE_S)
        return reply

    async def list_reflections(self, project: str, limit: int) -> kb_pb2.ListVaultReflectionsResponse:
        """``ListVaultReflections``: the vault's runs, newest first."""
        request = kb_pb2.ListVaultReflectionsRequest(project=project, limit=limit)
        reply: kb_pb2.ListVaultReflectionsResponse = await self._reflection_call("ListVaultReflections", request, SEARCH_DEADLINE_S)
        return reply

    async def revert_reflection(self, request: kb_pb2.RevertVaultReflectionRequest) -> kb_pb2.RevertVaultReflectionResponse:
        """``RevertVaultReflection``: undo one run's merges."""
        reply: kb_pb2.RevertVaultReflectionResponse = await self._reflection_call("RevertVaultReflection", request, REFLECT_DEADLINE_S)
        return reply

    async def close(self) -> None:
        await self._channel.close()


_REFUSALS: dict[grpc.StatusCode, type[GatewayError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def _indexed(path: str, start: int, end: int, importance: int, provenance: str, life: kb_pb2.EntryLifecycle) -> IndexedEntry:
    return IndexedEntry(
        path=path, start_line=start, end_line=end, entry_hash=life.entry_hash, importance=importance, provenance=provenance,
        first_path=life.first_path, first_seen=life.first_seen, last_retrieved=life.last_retrieved or None,
        retrieval_count=life.retrieval_count, supersedes_key=life.supersedes_key or None,
        invalid_at=life.invalid_at or None, restored_at=life.restored_at or None,
    )


class WatcherActivity:
    """The agent's last session activity, from the watcher."""

    def __init__(self, address: str, internal_token: str) -> None:
        self._channel = aio_channel(address)
        self._stub = watcher_pb2_grpc.SessionsStub(self._channel)
        self._metadata = ((INTERNAL_TOKEN_HEADER, internal_token),)

    async def activity(self, agent_id: str) -> Activity:
        """Raises PeerUnavailable when the watcher cannot answer."""
        try:
            reply = await self._stub.GetActivity(watcher_pb2.GetActivityRequest(agent_id=agent_id),
                                                 timeout=ACTIVITY_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("watcher", err) from None
        busy = sum(1 for s in reply.sessions if s.state == watcher_pb2.SESSION_STATE_BUSY)
        return Activity(reply.last_activity_ms, busy, len(reply.sessions))

    async def close(self) -> None:
        await self._channel.close()
