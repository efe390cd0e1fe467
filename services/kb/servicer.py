"""gRPC servicer of gateway.v1.Knowledge: parse, authorize, call the archives.

A shared note's content (or a promoted fact) that holds a secret is refused
(``gateway.secrets_guard``: INVALID_ARGUMENT naming each detector and line, never the value;
docs/concepts/secrets.md), scanned off the event loop; so is one that brings back text a forget of
the agent (or a shared one) took out (``gateway.forget_guard``: FAILED_PRECONDITION naming the
forget's id, never the text; docs/concepts/forget.md "Where tombstones are checked").

A shared forget's tombstones (``ForgetText.tombstones``, and the internal ``ShareTombstones``, which also
lifts) are kept in the vault and mirrored into the home (``vault.tombstone_mirror``; docs/concepts/forget.md
"Shared tombstones across hosts").

A shared-note write that wrote nothing, and a name clash, are worded for the
caller here (``rest_hints``: the REST route and the ``confirm`` field); the
vault's own messages name no transport.

Recall recording (``Archives.record``, and ``SharedVaults.record`` for the shared
corpus's Search hits and GetSharedNote) is fire-and-forget: the handler hands
it to the event loop's next turn (``call_soon``), so the reply does not wait
for it, and a failure there is logged, never turned into an error of the read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import grpc
import structlog

from gateway.auth import Authenticator, Caller
from gateway import promotion_write
from gateway.errors import InvalidArgument, PermissionDenied
from gateway.forget_guard import refuse_forgotten
from gateway.forgetting import Target
from gateway.rpc import authorize_call, caller_label, caller_of, unary
from gateway.secrets_guard import refuse_secrets
from gateway.tombstone_proto import from_proto
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb import rest_hints
from services.kb.archive.archives import Archives
from services.kb.archive import forget as archive_forget
from services.kb.archive.arguments import (
    TOMBSTONE_ID, changed_sources, check_corpus, check_query, check_sources, check_tombstone_id)
from services.kb.archive.recall_probe import MAX_PROBES
from services.kb.archive.retrieval_log import Retrieved
from services.kb.index.hits import SearchHit, shown_score
from services.kb.index.purge import Place, StoreForget, shown
from services.kb.index.lifecycle_rows import MAX_HASHES, MAX_UPDATES, EntryRow, Lifecycle, Update, check_hashes
from services.kb.metrics import observe_search
from services.kb.vault.gc import GcReport, note_ref
from services.kb.vault.note_index import merge_hits
from services.kb.vault.notes import NoteExists, NoteMissing
from services.kb.vault.registry_base import SharedVaults
from services.kb.vault.tombstone_mirror import Mirror, iso_now
from services.kb.vault.unpromote import check_write
from services.kb.vault_servicer import VaultReflection, VaultViews

pb = kb_pb2
log = structlog.get_logger()

RECORD_METADATA = "x-gateway-record-retrievals"


def _recording_allowed(context: grpc.aio.ServicerContext) -> bool:
    """Whether to record this read: the MCP layer can switch the read-path recorder off (GATEWAY_RECORD_RETRIEVALS)."""
    for name, value in context.invocation_metadata() or ():
        if name == RECORD_METADATA and str(value).strip().lower() in ("0", "false", "no", "off"):
            return False
    return True


class Recording(Protocol):
    """Where retrievals go: the agent's archive (``Archives``) or its shared vault (``SharedVaults``)."""

    def record(self, agent_id: str, hits: Iterable[Retrieved], kind: str) -> None: ...


def _record_later(store: Recording, agent_id: str, hits: Sequence[Retrieved], kind: str) -> None:
    """Queue ``hits`` for the retrieval log once this handler has returned (module docstring)."""
    asyncio.get_running_loop().call_soon(_record, store, agent_id, hits, kind)


def _record(store: Recording, agent_id: str, hits: Sequence[Retrieved], kind: str) -> None:
    try:
        store.record(agent_id, hits, kind)
    except Exception as exc:  # noqa: BLE001 - fire-and-forget: never an error of the read
        log.warning("kb_retrieval_log_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")


async def _refuse(archives: Archives, agent_id: str, content: str) -> None:
    """Refuse ``content`` for the shared vault when it holds a secret or forgotten text (module
    docstring); off the event loop. The agent exists (the call's check ran)."""
    agent = archives.agent(agent_id)
    assert agent is not None

    def scan() -> None:
        refuse_secrets(content, "content")
        refuse_forgotten(agent.home, content, "content", agent_id)

    await asyncio.to_thread(scan)


def _report(r) -> kb_pb2.RefreshReport:  # type: ignore[no-untyped-def]
    return pb.RefreshReport(indexed=r.indexed, skipped=r.skipped, pruned=r.pruned, errors=list(r.errors),
                            seconds=r.seconds, rebuilt=r.rebuilt)


def _hit(h: SearchHit, corpus: str) -> kb_pb2.SearchHit:
    """A hit as the reply shows it; its score rounded (``shown_score``) once every sort and merge is done."""
    return pb.SearchHit(path=h.path, start_line=h.start_line, end_line=h.end_line, snippet=h.snippet,
                        score=shown_score(h.score), provenance=h.provenance, importance=h.importance,
                        entry_hash=h.entry_hash or "", corpus=corpus)


def _life(r: Lifecycle) -> kb_pb2.EntryLifecycle:
    return pb.EntryLifecycle(
        entry_hash=r.entry_hash, first_path=r.first_path, first_seen=r.first_seen, last_retrieved=r.last_retrieved or 0.0,
        retrieval_count=r.retrieval_count, supersedes_key=r.supersedes_key or "", invalid_at=r.invalid_at or 0.0,
        restored_at=r.restored_at or 0.0,
    )


def _entry(e: EntryRow) -> kb_pb2.ArchiveEntry:
    return pb.ArchiveEntry(path=e.path, start_line=e.start_line, end_line=e.end_line, importance=e.importance,
                           provenance=e.provenance, lifecycle=_life(e.life))


class Knowledge(VaultViews, VaultReflection, kb_pb2_grpc.KnowledgeServicer):
    """gateway.v1.Knowledge; the vault's read views (ListSharedNotes, GetVaultGraph) are ``VaultViews``,
    its weekly reflection's five internal calls ``VaultReflection``."""

    def __init__(self, archives: Archives, vaults: SharedVaults[Any], auth: Callable[[], Authenticator],
                 mirror: Mirror | None = None) -> None:
        """``auth`` gives the authenticator in force (it changes when config.json is reloaded); ``mirror``
        this host's mirror of the vault's tombstones (refreshed after a shared forget and a lift)."""
        self._archives = archives
        self._vaults = vaults
        self._auth = auth
        self._mirror = mirror or Mirror(vaults)

    def _check(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool = False) -> Caller:
        return authorize_call(self._auth(), context, agent_id, agent_exists=self._archives.agent(agent_id) is not None, write=write)

    @unary
    async def Refresh(self, request: kb_pb2.RefreshRequest, context: grpc.aio.ServicerContext) -> kb_pb2.RefreshResponse:  # noqa: N802
        self._check(context, request.agent_id)
        named = check_sources(request.paths) if request.paths else None
        future = self._archives.refresh(request.agent_id, named)
        if not request.wait:
            # nobody awaits it: a failure is logged by the drain, not left unretrieved
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            return pb.RefreshResponse(agent_id=request.agent_id, queued=True)
        report = await future
        return pb.RefreshResponse(agent_id=request.agent_id, generation=report.generation, report=_report(report))

    @unary
    async def Search(self, request: kb_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> kb_pb2.SearchResponse:  # noqa: N802
        self._check(context, request.agent_id)
        corpus = check_corpus(request.corpus)
        start = time.perf_counter()
        agent, query, limit, refresh = request.agent_id, check_query(request.query), request.limit, request.refresh
        shared_hits: list[SearchHit] = []
        if corpus == "memory":
            result, refreshed = await self._archives.search(agent, query, limit, refresh)
            hits = [_hit(h, "memory") for h in result.hits]
            memory_hits = result.hits
        elif corpus == "shared":
            result, refreshed = await self._vaults.search(agent, query, limit, refresh)
            hits = [_hit(h, "shared") for h in result.hits]
            memory_hits, shared_hits = [], result.hits
        else:  # all: both indexes score on the same bounded scale; merged by score
            result, refreshed = await self._archives.search(agent, query, limit, refresh)
            shared, shared_refreshed = await self._vaults.search(agent, query, limit, refresh)
            merged = merge_hits(result.hits, shared.hits, limit)
            hits = [_hit(c.hit, c.corpus) for c in merged]
            memory_hits = [c.hit for c in merged if c.corpus == "memory"]
            shared_hits = [c.hit for c in merged if c.corpus == "shared"]
            refreshed = refreshed or shared_refreshed
            result = type(result)(result.hits, result.generation, result.stale or shared.stale)
        for store, retrieved in ((self._archives, memory_hits), (self._vaults, shared_hits)):
            if retrieved and _recording_allowed(context):
                _record_later(store, request.agent_id, retrieved, "search")
        observe_search(corpus, time.perf_counter() - start)
        return pb.SearchResponse(hits=hits, generation=result.generation, stale=result.stale, refreshed=refreshed)

    @unary
    async def Get(self, request: kb_pb2.GetRequest, context: grpc.aio.ServicerContext) -> kb_pb2.GetResponse:  # noqa: N802
        self._check(context, request.agent_id)
        got = await self._archives.get(request.agent_id, request.path, request.from_line, request.lines)
        if got.entries and _recording_allowed(context):
            _record_later(self._archives, request.agent_id, got.entries, "get")
        return pb.GetResponse(path=got.path, text=got.text, from_line=got.from_line, to_line=got.to_line,
                              total_lines=got.total_lines, truncated=got.truncated)

    @unary
    async def FoldRetrievals(self, request: kb_pb2.FoldRetrievalsRequest, context: grpc.aio.ServicerContext) -> kb_pb2.FoldRetrievalsResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        report = await self._archives.fold(request.agent_id)
        return pb.FoldRetrievalsResponse(folded=report.folded, entries=report.entries)

    @unary
    async def ProbeRecall(self, request: kb_pb2.ProbeRecallRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ProbeRecallResponse:  # noqa: N802
        self._check(context, request.agent_id)
        if len(request.probes) > MAX_PROBES:
            raise InvalidArgument(f"probes: {len(request.probes)}; at most {MAX_PROBES} in one call")
        probes = [(p.path, p.query, p.text) for p in request.probes]
        check_sources(sorted({path for path, _, _ in probes}))
        found, generation = await self._archives.probe_recall(request.agent_id, probes)
        return pb.ProbeRecallResponse(found=found, generation=generation)

    @unary
    async def ListArchiveEntries(self, request: kb_pb2.ListArchiveEntriesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ListArchiveEntriesResponse:  # noqa: N802
        self._check(context, request.agent_id)
        if request.entry_hashes:
            hashes = check_hashes(request.entry_hashes, MAX_HASHES, "entry_hashes")
            places, rows = await self._archives.lifecycle(request.agent_id, hashes)
            return pb.ListArchiveEntriesResponse(entries=[_entry(e) for e in places], lifecycle=[_life(r) for r in rows])
        if request.page_size < 0:
            raise InvalidArgument(f"page_size: {request.page_size} is negative; send 0 for the default page or a size up to the maximum")
        page = await self._archives.entries(request.agent_id, request.page_token, request.page_size)
        return pb.ListArchiveEntriesResponse(
            entries=[_entry(e) for e in page.entries], next_page_token=page.last_path,
            sources=[pb.ArchiveSource(path=s.path, content_hash=s.content_hash, provenance=s.provenance) for s in page.sources],
        )

    @unary
    async def UpdateEntryLifecycle(self, request: kb_pb2.UpdateEntryLifecycleRequest, context: grpc.aio.ServicerContext) -> kb_pb2.UpdateEntryLifecycleResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        if len(request.updates) > MAX_UPDATES:
            raise InvalidArgument(f"updates: {len(request.updates)}; at most {MAX_UPDATES} in one call")
        check_hashes([u.entry_hash for u in request.updates], MAX_UPDATES, "updates.entry_hash")
        updates = [
            Update(u.entry_hash, supersedes_key=u.supersedes_key if u.HasField("supersedes_key") else None,
                   invalid_at=u.invalid_at or None, clear_invalid=u.clear_invalid, restored_at=u.restored_at or None)
            for u in request.updates
        ]
        updated, missing = await self._archives.update_lifecycle(request.agent_id, updates)
        return pb.UpdateEntryLifecycleResponse(updated=updated, missing=missing)

    @unary
    async def GetIndexStatus(self, request: kb_pb2.GetIndexStatusRequest, context: grpc.aio.ServicerContext) -> kb_pb2.IndexStatus:  # noqa: N802
        self._check(context, request.agent_id)
        return pb.IndexStatus(agent_id=request.agent_id, **await self._archives.status(request.agent_id))  # type: ignore[arg-type]

    # --- shared vault -------------------------------------------------------------

    @unary
    async def CreateSharedNote(self, request: kb_pb2.CreateSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.CreateSharedNoteResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        await _refuse(self._archives, request.agent_id, request.content)
        try:
            r = await self._vaults.create(request.agent_id, request.name, request.content, request.confirm, caller_label() or "")
        except NoteExists as exc:
            raise NoteExists(exc.name, rest_hints.note_exists(request.agent_id, exc.message, exc.name)) from None
        related = [n.name for n in r.related]
        message = r.message if r.created else rest_hints.create_held_back(request.agent_id, r.message, related)
        return pb.CreateSharedNoteResponse(
            name=r.name, created=r.created, linked=list(r.linked), folded=r.folded, message=message,
            related=[pb.RelatedNote(name=n.name, snippet=n.snippet, score=n.score) for n in r.related],
        )

    @unary
    async def GetSharedNote(self, request: kb_pb2.GetSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.SharedNote:  # noqa: N802
        self._check(context, request.agent_id)
        note = await self._vaults.get(request.agent_id, request.name)
        if _recording_allowed(context):
            _record_later(self._vaults, request.agent_id, [note_ref(note.name, note.content)], "get")
        return pb.SharedNote(name=note.name, content=note.content, size_bytes=note.size_bytes, retired=note.retired)

    @unary
    async def UpdateSharedNote(self, request: kb_pb2.UpdateSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.UpdateSharedNoteResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        await _refuse(self._archives, request.agent_id, request.content)
        try:
            r = await self._vaults.update(request.agent_id, request.name, request.content, request.confirm, caller_label() or "")
        except NoteMissing as exc:
            raise NoteMissing(exc.name, rest_hints.note_missing(request.agent_id, exc.message)) from None
        warning = rest_hints.update_held_back(request.agent_id, r.name, r.warning) if r.warning else ""
        return pb.UpdateSharedNoteResponse(
            name=r.name, updated=r.updated, dropped_lines=r.dropped_lines, total_lines=r.total_lines,
            warning=warning, folded=r.folded, message=warning or r.message,
        )

    @unary
    async def DeleteSharedNote(self, request: kb_pb2.DeleteSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.DeleteSharedNoteResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        r = await self._vaults.delete(request.agent_id, request.name)
        return pb.DeleteSharedNoteResponse(name=r.name, deleted=r.deleted)

    @unary
    async def RetireSharedNote(self, request: kb_pb2.RetireSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.SharedNoteMoved:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        r = await self._vaults.retire(request.agent_id, request.name, request.reason)
        return pb.SharedNoteMoved(from_name=r.name, to_name=r.retired_name)

    @unary
    async def PromoteFact(self, request: kb_pb2.PromoteFactRequest, context: grpc.aio.ServicerContext) -> kb_pb2.PromoteFactResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        await _refuse(self._archives, request.agent_id, request.content)
        r = await self._vaults.promote(request.agent_id, request.topic, request.reason, request.content, request.run_id,
                                      caller_label() or "", request.request_id)
        return pb.PromoteFactResponse(
            outcome=r.outcome, name=r.name, name_from=r.name_from, passed_over=r.passed_over, linked=list(r.linked),
            folded=r.folded, twin_kept=r.twin_kept, held=r.held, seed=r.seed, reason=r.reason, message=r.message,
            weight=r.weight, write=None if r.write is None else promotion_write.to_proto(r.write),
        )

    @unary
    async def UndoPromotion(self, request: kb_pb2.UndoPromotionRequest, context: grpc.aio.ServicerContext) -> kb_pb2.UndoPromotionResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        if not request.HasField("write") and not request.request_id:
            raise InvalidArgument("write or request_id is required: the promotion's write, as PromoteFact reported "
                                  "it, or its request id")
        write = check_write(promotion_write.from_proto(request.write)) if request.HasField("write") else None
        r = await self._vaults.undo_promotion(request.agent_id, write, request.run_id, request.op_id, request.request_id)
        return pb.UndoPromotionResponse(outcome=r.outcome, note=r.note, reason=r.reason, message=r.message,
                                        deleted=r.deleted, twin_restored=r.twin_restored)

    @unary
    async def RestoreSharedNote(self, request: kb_pb2.RestoreSharedNoteRequest, context: grpc.aio.ServicerContext) -> kb_pb2.SharedNoteMoved:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        r = await self._vaults.restore(request.agent_id, request.name)
        return pb.SharedNoteMoved(from_name=r.retired_name, to_name=r.name)

    @unary
    async def ForgetText(self, request: kb_pb2.ForgetTextRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ForgetTextResponse:  # noqa: N802
        caller = self._check(context, request.agent_id, write=True)
        if request.shared and caller.key is not None and caller.key.agents is not None:
            raise PermissionDenied("forgetting in the shared vault needs a key whose scope is \"*\"")
        target = Target.parse(request.text, request.pattern)
        tombstone_id = check_tombstone_id(request.tombstone_id) if request.apply else ""
        changed = changed_sources(request.changed_paths)
        shared_stones = from_proto(request.tombstones) if request.shared and request.apply else []
        strays = [t.id for t in shared_stones if t.id.split(".", 1)[0] != tombstone_id]
        if strays:
            raise InvalidArgument(f"tombstones: {strays[0]} is not a tombstone of this forget ({tombstone_id} or "
                                  f"{tombstone_id}.N)")
        if request.shared:
            self._vaults.require(request.agent_id)  # refused before the archive's part runs
        if shared_stones:  # in the vault before any note is scrubbed: every host refuses the text from now on
            await self._vaults.share_tombstones(request.agent_id, shared_stones, "", "")
            await self._mirror.refresh_quietly()
        stores = [await archive_forget.forget(self._archives, request.agent_id, target, tombstone_id, changed,
                                             request.apply)]
        if request.shared:
            stores.append(await self._vaults.forget(request.agent_id, target, tombstone_id, request.apply))
        shown_id = tombstone_id or (request.tombstone_id if TOMBSTONE_ID.fullmatch(request.tombstone_id) else "F-…")
        matched = sorted(set().union(*(s.matched for s in stores))) if request.apply else []  # a pattern's, to tombstone
        return pb.ForgetTextResponse(stores=[_forgotten(s, target, shown_id) for s in stores], matched=matched)

    @unary
    async def ShareTombstones(self, request: kb_pb2.ShareTombstonesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ShareTombstonesResponse:  # noqa: N802
        if not caller_of(self._auth(), context).internal:  # before the agent: every API key is refused alike
            raise PermissionDenied("ShareTombstones is internal: only the suite's own services (the internal token) "
                                   "may call it; use dreaming's Forget and LiftTombstone")
        self._check(context, request.agent_id, write=True)
        rows = from_proto(request.tombstones)
        lift = check_tombstone_id(request.lift) if request.lift else ""
        added, lifted = await self._vaults.share_tombstones(request.agent_id, rows, lift, iso_now())
        held = await self._mirror.refresh()
        return pb.ShareTombstonesResponse(added=added, lifted=lifted, held=max(held, 0))

    @unary
    async def CollectVault(self, request: kb_pb2.CollectVaultRequest, context: grpc.aio.ServicerContext) -> kb_pb2.CollectVaultResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        return _collected(await self._vaults.collect(request.agent_id))


_OUTCOMES = {
    "ran": pb.VAULT_GC_OUTCOME_RAN,
    "already-ran": pb.VAULT_GC_OUTCOME_ALREADY_RAN,
    "disabled": pb.VAULT_GC_OUTCOME_DISABLED,
}


def _collected(r: GcReport) -> kb_pb2.CollectVaultResponse:
    return pb.CollectVaultResponse(
        outcome=_OUTCOMES[r.outcome], project=r.project, day=r.day, ran_for=r.by, stale_days=r.stale_days,
        max_retirements_per_run=r.max_retirements, folded=r.folded, retired=list(r.retired), restored=list(r.restored),
        kept=list(r.kept), waiting=r.waiting, skipped=list(r.skipped), skipped_count=r.skipped_count, message=r.message,
    )


def _places(places: list[Place], target: Target, tombstone_id: str) -> list[kb_pb2.ForgetPlace]:
    """The places as the reply shows them: a path that holds the text itself shown scrubbed (``purge.shown``)."""
    return [pb.ForgetPlace(place=p.where, kind=p.kind, count=p.count, lines=list(p.lines))
            for p in (shown(place, target, tombstone_id) for place in places)]


def _forgotten(s: StoreForget, target: Target, tombstone_id: str) -> kb_pb2.ForgetStore:
    purge = s.purge
    return pb.ForgetStore(store=s.store, places=_places(s.places, target, tombstone_id),
                          left=_places(s.left, target, tombstone_id), purged=purge is not None,
                          bytes_before=purge.bytes_before if purge else 0, bytes_after=purge.bytes_after if purge else 0,
                          purge_seconds=purge.seconds if purge else 0.0)
