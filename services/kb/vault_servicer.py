"""The shared vault's views and its weekly reflection in gateway.v1.Knowledge (two mixins of the
``servicer.Knowledge`` class, kept apart so the servicer stays one screen of note writes and archive calls).

``VaultViews``: ListSharedNotes and GetVaultGraph; each method parses the request, checks read access to
the agent as every shared route does, calls ``SharedVaults`` and maps the answer.

``VaultReflection``: PlanVaultReflection, MergeVaultNotes, RecordVaultReflection, ListVaultReflections and
RevertVaultReflection (docs/concepts/vault.md "Weekly reflection"). The five are internal: they take the
vault's project, not an agent, and only the suite's own services (the internal token) may call them
(``_internal``: PERMISSION_DENIED for an API key). Each parses the request (INVALID_ARGUMENT naming the
field), runs one step of ``services.kb.vault.reflection`` as a write decision of the project's vault
(FAILED_PRECONDITION when no agent has a shared vault of that project) and maps the answer. The merged
content of a merge passes the secret guard and the tombstone check of every agent sharing the vault
(``gateway.secrets_guard``, ``gateway.forget_guard``), as a shared note's create does; a refusal is the
merge's REFUSED outcome with the guard's message, never the text.
"""

from __future__ import annotations

import asyncio
import contextlib

from collections.abc import Callable
from typing import Any

import grpc
import structlog

from gateway.auth import Authenticator
from gateway.errors import FailedPrecondition, GatewayError, InvalidArgument, PermissionDenied
from gateway.forget_guard import refuse_forgotten
from gateway.rpc import caller_of, unary
from gateway.secrets_guard import refuse_secrets
from gateway.v1 import kb_pb2
from services.kb.graph.view import Finding, view
from services.kb.vault.store import Authors, Writer
from services.kb.vault.listing import NoteFacts
from services.kb.vault.reflection import merge as merging
from services.kb.vault.reflection import plan as planning
from services.kb.vault.reflection import report as reflection_report
from services.kb.vault.reflection import runs
from services.kb.vault.registry_base import SharedVaults

pb = kb_pb2
log = structlog.get_logger()


def _writer(w: Writer | None) -> kb_pb2.NoteWrite | None:
    return None if w is None else pb.NoteWrite(agent_id=w.agent_id, key=w.key, run_id=w.run_id, at=w.at)


def _note(f: NoteFacts, written: Authors | None) -> kb_pb2.SharedNoteInfo:
    return pb.SharedNoteInfo(
        name=f.name, title=f.title, updated_at=f.updated_at, size_bytes=f.size_bytes, retired=f.retired,
        provenance=f.provenance, retired_at=f.retired_at, retired_reason=f.retired_reason,
        created=_writer(written.created if written else None), changed=_writer(written.changed if written else None),
    )


def _findings(found: list[Finding]) -> list[kb_pb2.VaultFinding]:
    return [pb.VaultFinding(notes=list(f.notes), text=f.text) for f in found]


class VaultViews:
    """ListSharedNotes and GetVaultGraph; the class that mixes it in gives ``_vaults`` and ``_check``."""

    _vaults: SharedVaults[Any]
    _check: Callable[..., object]  # (context, agent_id, *, write=False): the caller; raises when it may not

    @unary
    async def ListSharedNotes(self, request: kb_pb2.ListSharedNotesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ListSharedNotesResponse:  # noqa: N802
        self._check(context, request.agent_id)
        if request.page_size < 0:
            raise InvalidArgument(f"page_size: {request.page_size} is negative; send 0 for the default page or a size up to 500")
        page, written = await self._vaults.list_notes(request.agent_id, request.page_size, request.page_token,
                                                      request.include_retired)
        return pb.ListSharedNotesResponse(notes=[_note(f, written.get(f.name)) for f in page.notes],
                                          next_page_token=page.next_token, total=page.total,
                                          project=self._vaults.project_of(request.agent_id))

    @unary
    async def GetVaultGraph(self, request: kb_pb2.GetVaultGraphRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultGraph:  # noqa: N802
        self._check(context, request.agent_id)
        shown = view(await self._vaults.graph(request.agent_id))
        return pb.VaultGraph(
            nodes=[pb.VaultGraphNode(name=n.name, title=n.title, retired=n.retired, missing=n.missing) for n in shown.nodes],
            edges=[pb.VaultGraphEdge(from_name=a, to_name=b) for a, b in shown.edges],
            contradictions=_findings(shown.contradictions), stale=_findings(shown.stale),
            dangling=_findings(shown.dangling), low_confidence=_findings(shown.low_confidence),
            problems=_findings(shown.problems), total_nodes=shown.total_nodes, total_edges=shown.total_edges,
            truncated=bool(shown.cut), message=shown.message,
        )

_OUTCOMES = {merging.MERGED: pb.MERGE_OUTCOME_MERGED, merging.REFUSED: pb.MERGE_OUTCOME_REFUSED,
             merging.CHANGED: pb.MERGE_OUTCOME_CHANGED}
MAX_CLUSTERS = 1_000
MAX_CLUSTER_BYTES = 10 * 1024 * 1024
MAX_CLAIM_S = 7 * 86_400


def _project(project: str) -> str:
    if not project.strip():
        raise InvalidArgument("project is required: the vault's project (gateway.knowledge.shared.project)")
    return project


def _bounded(value: int, field: str, most: int) -> int:
    if not 0 <= value <= most:
        raise InvalidArgument(f"{field}: {value} is outside 0 to {most:,} (0: the default)")
    return value


def _cluster(c: planning.Cluster) -> kb_pb2.VaultCluster:
    return pb.VaultCluster(
        id=c.id, joined_by=c.joined_by, contradiction=c.contradiction, cut=c.cut,
        notes=[pb.ClusterNote(name=n.name, content=n.content, sha256=n.sha256, updated_at=n.updated_at) for n in c.notes])


def _result(c: kb_pb2.VaultClusterResult) -> dict[str, object]:
    return {"cluster_id": c.cluster_id, "notes": list(c.notes), "outcome": c.outcome, "reason": c.reason,
            "merge_id": c.merge_id}


def _proposal(p: kb_pb2.VaultMergeProposal) -> dict[str, object]:
    return {"cluster_id": p.cluster_id, "name": p.name, "content": p.content, "replaces": list(p.replaces),
            "expected_sha256": dict(p.expected_sha256), "reason": p.reason, "state": p.state or "pending"}


def _run(r: dict[str, Any]) -> kb_pb2.VaultReflectionRun:
    return pb.VaultReflectionRun(
        project=str(r.get("project", "")), run_id=str(r.get("run_id", "")), mode=str(r.get("mode", "")),
        trigger=str(r.get("trigger", "")), status=str(r.get("status", "")), reason=str(r.get("reason", "")),
        started_at=float(r.get("started_at", 0.0)), finished_at=float(r.get("finished_at", 0.0)),
        remaining=int(r.get("remaining", 0)), revision=str(r.get("revision", "")),
        reverted_at=float(r.get("reverted_at", 0.0)),
        clusters=[pb.VaultClusterResult(cluster_id=str(c.get("cluster_id", "")), notes=list(c.get("notes", [])),
                                        outcome=str(c.get("outcome", "")), reason=str(c.get("reason", "")),
                                        merge_id=str(c.get("merge_id", ""))) for c in r.get("clusters", [])],
        proposals=[pb.VaultMergeProposal(cluster_id=str(p.get("cluster_id", "")), name=str(p.get("name", "")),
                                         content=str(p.get("content", "")), replaces=list(p.get("replaces", [])),
                                         expected_sha256=dict(p.get("expected_sha256", {})),
                                         reason=str(p.get("reason", "")), state=str(p.get("state", "")))
                   for p in r.get("proposals", [])],
    )


class VaultReflection:
    """The five reflection RPCs; the class that mixes it in gives ``_vaults`` and ``_auth``."""

    _vaults: SharedVaults[Any]
    _auth: Callable[[], Authenticator]

    def _internal(self, context: grpc.aio.ServicerContext, *, write: bool = True) -> None:
        """Only the internal token may call (module docstring); ``write``: the access the reference shows."""
        if not caller_of(self._auth(), context).internal:
            raise PermissionDenied("the vault's reflection calls are internal: only the suite's own services "
                                   "(the internal token) may make them; use dreaming's ReflectVault")

    def _screen(self, project: str) -> merging.Screen:
        sharers = self._vaults.sharers(project)

        def screen(content: str) -> str:
            try:
                refuse_secrets(content, "the merged content")
                for agent_id, home in sharers:
                    refuse_forgotten(home, content, "the merged content", agent_id)
            except (InvalidArgument, FailedPrecondition) as exc:
                return exc.message
            return ""

        return screen

    async def rewrite_reflection_reports(self) -> None:
        """Every vault's reflection report that exists on this host rewritten from its audit (the mirror of
        the vault's tombstones changed: a forget scrubbed the audit, maybe on another host)."""
        for project in sorted({s.project for s in self._vaults.enabled_settings()}):
            if (self._vaults.reports_dir(project) / reflection_report.FILE).exists():
                await self._reflection_report(project)

    async def _reflection_report(self, project: str) -> None:
        """``reports/reflection.md`` rewritten from the audit (``reflection.report``); a failure is logged, never
        the call's: the run is recorded, and the next record writes the report again."""
        try:
            found = await self._vaults.reflect_read(project, lambda store: runs.runs(store, reflection_report.RUNS))
            await asyncio.to_thread(reflection_report.write, self._vaults.reports_dir(project), project, found)
        except (OSError, GatewayError) as exc:
            log.warning("kb_vault_reflection_report_failed", vault=project, error=str(exc)[:300])

    @unary
    async def PlanVaultReflection(self, request: kb_pb2.PlanVaultReflectionRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultReflectionPlan:  # noqa: N802
        self._internal(context)
        project, run_id = _project(request.project), merging.check_run_id(request.run_id)
        most = _bounded(request.max_clusters, "max_clusters", MAX_CLUSTERS)
        size = _bounded(request.max_cluster_bytes, "max_cluster_bytes", MAX_CLUSTER_BYTES)
        claim = _bounded(request.claim_seconds, "claim_seconds", MAX_CLAIM_S)
        busy = await self._vaults.reflect(project, lambda store, now: planning.claim(store, run_id, now.timestamp(), claim))
        if busy:
            p = planning.Plan(project, busy_with=busy)
        else:
            try:  # the slow part reads with no write lock: creates and updates go on meanwhile
                snap = await self._vaults.reflect_read(project, lambda store: planning.snapshot(store, size))
                p = await self._vaults.reflect(project, lambda store, now: planning.commit(store, run_id, snap, most))
            except BaseException:
                with contextlib.suppress(Exception):
                    await self._vaults.reflect(project, lambda store, now: planning.release(store, run_id, now.timestamp()))
                raise
        log.info("kb_vault_reflection_planned", vault=project, run=run_id, busy_with=p.busy_with or None,
                 unchanged=p.unchanged, clusters=len(p.clusters), remaining=p.remaining, notes=p.notes)
        return pb.VaultReflectionPlan(project=p.project, revision=p.revision, watermark=p.watermark,
                                      unchanged=p.unchanged, busy=bool(p.busy_with), busy_with=p.busy_with,
                                      clusters=[_cluster(c) for c in p.clusters], remaining=p.remaining, notes=p.notes)

    @unary
    async def MergeVaultNotes(self, request: kb_pb2.MergeVaultNotesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.MergeVaultNotesResponse:  # noqa: N802
        self._internal(context)
        project = _project(request.project)
        checked = merging.check(merging.MergeRequest(
            request.run_id, request.cluster_id, request.name, request.content, tuple(request.replaces),
            dict(request.expected_sha256), request.max_drop_share, request.reason, request.dry_run))
        screen = self._screen(project)
        r = await self._vaults.reflect(project, lambda store, now: merging.merge(store, checked, now, screen))
        log.info("kb_vault_reflection_merge", vault=project, run=checked.run_id, cluster=checked.cluster_id,
                 outcome=r.outcome, dry_run=checked.dry_run, merge=r.merge_id or None, retired=len(r.retired),
                 pruned=r.pruned_lines, reason=r.reason or None)
        return pb.MergeVaultNotesResponse(outcome=_OUTCOMES[r.outcome], reason=r.reason, retired=list(r.retired),
                                          pruned_lines=r.pruned_lines, distinct_lines=r.distinct_lines,
                                          merge_id=r.merge_id)

    @unary
    async def RecordVaultReflection(self, request: kb_pb2.RecordVaultReflectionRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultReflectionRun:  # noqa: N802
        self._internal(context)
        project, run_id = _project(request.project), merging.check_run_id(request.run_id)
        run = runs.check(runs.RunRecord(
            run_id, request.mode, request.trigger, request.status, request.reason, request.started_at,
            request.remaining, [_result(c) for c in request.clusters], [_proposal(p) for p in request.proposals]))
        kept = await self._vaults.reflect(project, lambda store, now: runs.record(store, run, now.timestamp()))
        log.info("kb_vault_reflection_recorded", vault=project, run=run_id, status=run.status, mode=run.mode,
                 clusters=len(run.clusters), remaining=run.remaining)
        await self._reflection_report(project)
        return _run(kept)

    @unary
    async def ListVaultReflections(self, request: kb_pb2.ListVaultReflectionsRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ListVaultReflectionsResponse:  # noqa: N802
        self._internal(context, write=False)
        project = _project(request.project)
        limit = _bounded(request.limit, "limit", runs.MAX_LIST)
        none: list[dict[str, object]] = []  # a vault nothing was ever written to has no run
        found = await self._vaults.reflect_read(project, lambda store: runs.runs(store, limit), unbuilt=none)
        return pb.ListVaultReflectionsResponse(runs=[_run(r) for r in found])

    @unary
    async def RevertVaultReflection(self, request: kb_pb2.RevertVaultReflectionRequest, context: grpc.aio.ServicerContext) -> kb_pb2.RevertVaultReflectionResponse:  # noqa: N802
        self._internal(context)
        project = _project(request.project)
        if bool(request.run_id) == request.last:
            raise InvalidArgument("send one of run_id and last: the run to revert, or the last one that merged")
        run_id = merging.check_run_id(request.run_id) if request.run_id else ""
        r = await self._vaults.reflect(project, lambda store, now: runs.revert(store, run_id, request.last,
                                                                                 now.timestamp()))
        log.info("kb_vault_reflection_reverted", vault=project, run=r.run_id, restored=len(r.restored), left=len(r.left))
        await self._reflection_report(project)
        return pb.RevertVaultReflectionResponse(run_id=r.run_id, restored=list(r.restored), left=list(r.left))
