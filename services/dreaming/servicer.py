"""gRPC servicer of gateway.v1.Dreaming: parse, authorize, call the dreamer, map the result."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import UTC, datetime

import grpc

from gateway.auth import Authenticator, Caller
from gateway.config import AgentConfig, Config
from gateway.errors import InvalidArgument, NotFound, PermissionDenied, Unavailable, shown
from gateway.forgetting import SHARED_SCOPE, Target, Tombstone, Tombstones
from gateway.rpc import authorize_call, caller_label, caller_of, unary
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, kb_pb2
from services.dreaming.dreamer import Dreamer, Status
from services.dreaming.forget.report import forget_text, tombstones_text
from services.dreaming.forget.run import Forgotten
from services.dreaming.history.explain import Explained, render
from services.dreaming.history import runs
from services.dreaming.history.reject import Rejection
from services.dreaming.history.revert import RevertResult
from services.dreaming.model.values import AUTO, PROPOSE, OpResult, RunReport
from services.dreaming.reflect.vaults import Vault
from services.dreaming.reflection import Reflections, vault_of
from services.dreaming.reflection import check_mode as check_reflect_mode
from services.dreaming.render import reject_text, report_text, revert_text, status_text

pb = dreaming_pb2


def check_mode(mode: str) -> str:
    """``auto``, ``propose`` or "" (the agent's configured mode). Raises InvalidArgument."""
    if mode not in ("", AUTO, PROPOSE):
        raise InvalidArgument(f"mode: {mode[:40]!r} is not a mode; accepted: auto, propose (or empty for the configured mode)")
    return mode


RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,8}$")
OP_NUMBER = re.compile(r"^[0-9]{1,6}$")
PROPOSAL_ID = re.compile(r"^p-[0-9a-f]{12}$")
MAX_IDS = 100
MAX_SUMMARY_IDS = 1000


def check_run(run_id: str, op_id: str) -> tuple[str, str | None]:
    """``(run id, op id or None)`` from a revert request. Raises InvalidArgument naming the field."""
    if not run_id:
        raise InvalidArgument("run_id (runId) is required: the run to revert, from DREAMS.md or the dream status")
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(f"run_id: {shown(run_id)} is not a run id (like 20261201T030000Z-1a2b3c)")
    if not op_id:
        return run_id, None
    number = op_id[len(run_id) + 1 :] if op_id.startswith(run_id + "/") else op_id
    if not OP_NUMBER.fullmatch(number):
        raise InvalidArgument(f"op_id: {shown(op_id)} is not an op of run {run_id} (give its number, or {run_id}/N)")
    return run_id, f"{run_id}/{int(number)}"


def check_ids(ids: list[str], verb: str = "accept") -> list[str]:
    """Proposal ids of an accept or a reject. Raises InvalidArgument for none, too many, or a malformed one."""
    if not ids:
        raise InvalidArgument(f"ids is required: the proposal ids (p-…) to {verb}, from DREAMS.md or the dream status")
    if len(ids) > MAX_IDS:
        raise InvalidArgument(f"ids: {len(ids)} ids; at most {MAX_IDS} in one {verb}")
    bad = [i for i in ids if not PROPOSAL_ID.fullmatch(i)]
    if bad:
        raise InvalidArgument(f"ids: {shown(bad[0])} is not a proposal id (p- and 12 hex digits)")
    return ids


def op_pb(r: OpResult) -> dreaming_pb2.DreamOp:
    p = r.proposal
    return pb.DreamOp(
        op_id=r.op_id, proposal_id=p.id, op=p.op, file=r.file or p.file, tier=p.tier, topic=p.topic, status=r.status,
        reason=r.reason, target=p.target, content=p.content, chars_removed=r.chars_removed,
        chars_inserted=r.chars_inserted, proposal_reason=p.reason,
    )


def report_pb(report: RunReport) -> dreaming_pb2.DreamReport:
    out = pb.DreamReport(
        run_id=report.run_id, agent_id=report.agent_id, mode=report.mode, trigger=report.trigger, status=report.status,
        reason=report.reason, started_at=report.started_at, finished_at=report.finished_at,
        ops=[op_pb(r) for r in report.ops],
        files=[pb.DreamFile(file=f.file, chars_before=f.chars_before, chars_after=f.chars_after) for f in report.files],
        notes=list(report.notes), text=report_text(report), steps=list(report.steps),
    )
    rv = report.reviewer
    if rv is not None:
        out.reviewer.CopyFrom(pb.ReviewerResult(
            ok=rv.ok, reason=rv.reason, seconds=rv.seconds, proposals=len(rv.reply.proposals),
            dropped=list(rv.reply.dropped), summary=rv.reply.summary,
        ))
    return out


def status_pb(status: Status, *, text: bool = True) -> dreaming_pb2.DreamStatus:
    """The reply of GetDreamStatus; without ``text``, no rendering (GetDreamSummaries)."""
    last, ops, h = status.last_run, status.last_ops, status.health
    last_pb = pb.LastRun() if last is None else pb.LastRun(
        run_id=last.run_id, trigger=last.trigger, mode=last.mode, status=last.status, reason=last.reason,
        started_at=last.started_at, finished_at=last.finished_at,
        ops_applied=ops.applied, ops_skipped=ops.skipped, ops_proposed=ops.proposed,
    )
    return pb.DreamStatus(
        agent_id=status.agent_id, scheduled=status.scheduled, mode=status.mode, next_run_at=status.next_run_at,
        last_run=last_pb,
        pending=[op_pb(r) for r in status.pending], last_night=status.last_night, text=status_text(status) if text else "",
        health=pb.RunHealth(failures_last_7_days=h.failures, last_failure_at=h.last_failure_at,
                            last_failure_reason=h.last_failure_reason, promoted=h.promoted, not_promoted=h.not_promoted),
        running=status.running, kept_promotions=status.kept_promotions,
    )


def run_op_pb(o: runs.RunOp) -> dreaming_pb2.DreamRunOp:
    return pb.DreamRunOp(
        op_id=o.op_id, proposal_id=o.proposal_id, op=o.op, file=o.file, tier=o.tier, topic=o.topic, status=o.status,
        reason=o.reason, proposal_reason=o.proposal_reason, pending=o.pending, decided_by=o.decided_by,
        decided_at=o.decided_at, changes=[
            pb.OpChange(file=c.file, before=c.before, after=c.after, start_line=c.start_line, end_line=c.end_line, cut=c.cut)
            for c in o.changes
        ],
    )


def runs_pb(agent_id: str, page: runs.Page) -> dreaming_pb2.DreamRuns:
    def run_pb(run: runs.Run) -> dreaming_pb2.DreamRun:
        r = run.record
        return pb.DreamRun(
            run_id=str(r.get("run", "")), trigger=str(r.get("trigger", "")), mode=str(r.get("mode", "")),
            status=str(r.get("status", "")), reason=str(r.get("reason", "")), started_at=str(r.get("startedAt", "")),
            finished_at=str(r.get("finishedAt", "")), steps=[str(s) for s in r.get("steps") or []],
            summary=str(r.get("summary", "")), notes=[str(n) for n in r.get("notes") or []],
            ops=[run_op_pb(o) for o in run.ops], ops_total=run.ops_total,
        )

    return pb.DreamRuns(agent_id=agent_id, runs=[run_pb(r) for r in page.runs], next_page_token=page.next_token, cut=page.cut)


def reject_pb(agent_id: str, rejected: list[Rejection]) -> dreaming_pb2.RejectReport:
    return pb.RejectReport(agent_id=agent_id, text=reject_text(agent_id, rejected), rejected=[
        pb.RejectedProposal(proposal_id=r.proposal_id, op=r.proposal.op, file=r.proposal.file,
                            text=r.proposal.content or r.proposal.target, rejected_at=r.at, rejected_by=r.by)
        for r in rejected
    ])


def revert_pb(result: RevertResult) -> dreaming_pb2.RevertReport:
    return pb.RevertReport(
        agent_id=result.agent_id, run_id=result.run_id, reverted=list(result.reverted), already=list(result.already),
        files=[pb.DreamFile(file=f.file, chars_before=f.chars_before, chars_after=f.chars_after) for f in result.files],
        message=revert_text(result),
        vault=[pb.VaultUndo(op_id=u.op_id, note=u.note, project=u.project, outcome=u.outcome, reason=u.reason,
                            deleted=u.deleted) for u in result.vault],
    )


MAX_QUERY = 1000


def explanation_pb(agent_id: str, query: str, found: list[Explained]) -> dreaming_pb2.EntryExplanation:
    def iso(moment: float | None) -> str:
        return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if moment else ""

    entries = []
    for item in found:
        life = item.life
        entries.append(pb.ExplainedEntry(
            entry_hash=item.entry_hash, text=item.text,
            places=[pb.EntryPlace(path=p.path, start_line=p.start_line, end_line=p.end_line, state=p.state) for p in item.places],
            first_seen=iso(life.first_seen) if life else "", first_path=life.first_path if life else "",
            retrieval_count=life.retrieval_count if life else 0, last_retrieved=iso(life.last_retrieved) if life else "",
            invalid_at=iso(life.invalid_at) if life else "", restored_at=iso(life.restored_at) if life else "",
            supersedes_key=(life.supersedes_key or "") if life else "",
            events=[pb.EntryEvent(at=e.at, kind=e.kind, detail=e.detail, run_id=e.run_id, op_id=e.op_id, file=e.file, to_file=e.to_file)
                    for e in item.events],
        ))
    return pb.EntryExplanation(agent_id=agent_id, query=query, entries=entries, text=render(agent_id, query, found))


TOMBSTONE_ID = re.compile(r"^F-[0-9a-f]{12}$")
SHARED_NEEDS_STAR = 'the shared vault\'s tombstones and forgets need a key whose scope is "*"'


def forget_pb(report: Forgotten) -> dreaming_pb2.ForgetReport:
    return pb.ForgetReport(
        agent_id=report.agent_id, applied=report.applied, shared=report.shared, tombstone_id=report.tombstone_id,
        places=[pb.ForgetReportPlace(store=p.store, path=p.path, kind=p.kind, count=p.count, lines=list(p.lines),
                                     changed=p.changed, left=p.left) for p in report.places],
        purges=[pb.ForgetPurge(store=p.store, bytes_before=p.bytes_before, bytes_after=p.bytes_after, seconds=p.seconds)
                for p in report.purges],
        changed=report.changed, matches=report.matches, tombstones=report.tombstones, text=forget_text(report),
    )


def tombstones_pb(agent_id: str, rows: list[Tombstone], *, lifted: bool = False) -> dreaming_pb2.TombstoneList:
    return pb.TombstoneList(agent_id=agent_id, text=tombstones_text(agent_id, rows, lifted=lifted), tombstones=[
        pb.TombstoneInfo(tombstone_id=t.id, scope=t.scope, words=t.words, at=t.at, by=t.by, places=t.places) for t in rows
    ])


def _every_agent(caller: Caller) -> bool:
    """Whether the caller's scope is "*" (an internal caller's is)."""
    return caller.key is None or caller.key.agents is None


VAULT_NEEDS_STAR = 'the vault\'s reflection needs a key whose scope is "*"'


class Dreaming(dreaming_pb2_grpc.DreamingServicer):
    def __init__(self, dreamer: Dreamer, snapshot: Callable[[], tuple[Config, Authenticator]],
                 reflections: Reflections | None = None) -> None:
        self._dreamer = dreamer
        self._snapshot = snapshot
        self._reflections = reflections

    def _vault(self, context: grpc.aio.ServicerContext, project: str, *, write: bool) -> tuple[Vault, Reflections]:
        """The vault of ``project`` for a caller whose scope is "*" (write access for ``write``). Raises
        Unauthenticated, PermissionDenied, InvalidArgument, FailedPrecondition."""
        config, auth = self._snapshot()
        caller = caller_of(auth, context)
        if not _every_agent(caller):
            raise PermissionDenied(VAULT_NEEDS_STAR)
        if write and caller.key is not None and not caller.key.write:
            raise PermissionDenied("this key has no write access: the vault's reflection changes the vault")
        vault = vault_of(config, project)
        if self._reflections is None:
            raise Unavailable("the vault's reflection is not served by this process")
        return vault, self._reflections

    @unary
    async def ReflectVault(self, request: dreaming_pb2.ReflectVaultRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultReflectionRun:  # noqa: N802
        vault, reflections = self._vault(context, request.project, write=True)
        return await reflections.run(vault, check_reflect_mode(request.mode))

    @unary
    async def GetVaultReflections(self, request: kb_pb2.ListVaultReflectionsRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ListVaultReflectionsResponse:  # noqa: N802
        vault, reflections = self._vault(context, request.project, write=False)
        return await reflections.runs(vault, request.limit)

    @unary
    async def DecideVaultMerges(self, request: dreaming_pb2.DecideVaultMergesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultReflectionRun:  # noqa: N802
        vault, reflections = self._vault(context, request.project, write=True)
        return await reflections.decide(vault, request.run_id, list(request.accept), list(request.reject))

    @unary
    async def UndoVaultReflection(self, request: kb_pb2.RevertVaultReflectionRequest, context: grpc.aio.ServicerContext) -> kb_pb2.RevertVaultReflectionResponse:  # noqa: N802
        vault, reflections = self._vault(context, request.project, write=True)
        return await reflections.undo(vault, request.run_id, request.last)

    def _agent(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool) -> AgentConfig:
        return self._agent_and_caller(context, agent_id, write=write)[0]

    def _agent_and_caller(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool) -> tuple[AgentConfig, Caller]:
        config, auth = self._snapshot()
        agent = config.agent(agent_id)
        caller = authorize_call(auth, context, agent_id, agent_exists=agent is not None, write=write)
        assert agent is not None
        return agent, caller

    def _agents(self, context: grpc.aio.ServicerContext, agent_ids: list[str], *, write: bool) -> tuple[list[AgentConfig], dict[str, str]]:
        """The configured agents of ``agent_ids`` (each once, in order) and, by id, why each other
        one has none. Raises Unauthenticated, InvalidArgument for more than MAX_SUMMARY_IDS ids, and
        PermissionDenied when one id is outside the caller's scope (then nothing is answered)."""
        config, auth = self._snapshot()
        caller = caller_of(auth, context)
        if len(agent_ids) > MAX_SUMMARY_IDS:
            raise InvalidArgument(f"agent_ids: {len(agent_ids)} ids; at most {MAX_SUMMARY_IDS} in one call")
        agents: list[AgentConfig] = []
        unknown: dict[str, str] = {}
        for agent_id in dict.fromkeys(agent_ids):
            agent = config.agent(agent_id)
            try:
                auth.authorize(caller, agent_id, agent_exists=agent is not None, write=write)
            except (NotFound, InvalidArgument) as exc:  # for a caller whose scope covers every id
                unknown[agent_id] = exc.message
                continue
            assert agent is not None
            agents.append(agent)
        return agents, unknown

    @unary
    async def RunNow(self, request: dreaming_pb2.RunNowRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamReport:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=True)
        return report_pb(await self._dreamer.run_now(agent, check_mode(request.mode)))

    @unary
    async def GetDreamStatus(self, request: dreaming_pb2.GetDreamStatusRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamStatus:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=False)
        [status] = await self._dreamer.statuses([agent])
        return status_pb(status)

    @unary
    async def GetDreamSummaries(self, request: dreaming_pb2.GetDreamSummariesRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamSummaries:  # noqa: N802
        agents, unknown = self._agents(context, list(request.agent_ids), write=False)
        statuses = await self._dreamer.statuses(agents)
        return pb.DreamSummaries(statuses=[status_pb(s, text=False) for s in statuses], unknown=unknown)

    @unary
    async def ListDreamRuns(self, request: dreaming_pb2.ListDreamRunsRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamRuns:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=False)
        page = await self._dreamer.list_runs(agent, runs.page_size(request.page_size), request.page_token)
        return runs_pb(agent.id, page)

    @unary
    async def AcceptProposals(self, request: dreaming_pb2.AcceptProposalsRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamReport:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=True)
        return report_pb(await self._dreamer.accept(agent, check_ids(list(request.ids))))

    @unary
    async def RejectProposals(self, request: dreaming_pb2.RejectProposalsRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.RejectReport:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=True)
        rejected = await self._dreamer.reject(agent, check_ids(list(request.ids), "reject"), caller_label() or "unknown")
        return reject_pb(agent.id, rejected)

    @unary
    async def RevertDream(self, request: dreaming_pb2.RevertDreamRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.RevertReport:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=True)
        run_id, op_id = check_run(request.run_id, request.op_id)
        return revert_pb(await self._dreamer.revert(agent, run_id, op_id))

    @unary
    async def ExplainEntry(self, request: dreaming_pb2.ExplainEntryRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.EntryExplanation:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=False)
        query = request.query.strip()[:MAX_QUERY]  # like Search, a longer query is cut (and echoed cut)
        if not query:
            raise InvalidArgument("query is required: words of the entry to explain")
        found = await self._dreamer.explain(agent, query, request.limit)
        return explanation_pb(agent.id, query, found)

    @unary
    async def Forget(self, request: dreaming_pb2.ForgetRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.ForgetReport:  # noqa: N802
        agent, caller = self._agent_and_caller(context, request.agent_id, write=True)
        if request.shared and not _every_agent(caller):
            raise PermissionDenied(SHARED_NEEDS_STAR)
        target = Target.parse(request.text, request.pattern)
        report = await self._dreamer.forget(agent, target, shared=request.shared, apply=request.apply,
                                            by=caller.label)
        return forget_pb(report)

    def _tombstones(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool) -> tuple[AgentConfig, Tombstones, list[Tombstone], bool]:
        """The agent, its home's tombstones, the ones the caller may see (the agent's; the shared ones
        for a caller whose scope is "*"), and whether it may see the shared ones."""
        agent, caller = self._agent_and_caller(context, agent_id, write=write)
        star = _every_agent(caller)
        store = Tombstones(agent.home)
        rows = store.all()
        known = {t.id for t in rows}
        rows += [t for t in store.mirrored() if t.id not in known]  # the vault's, from any host
        return agent, store, [t for t in rows if t.scope == agent.id or star and t.scope == SHARED_SCOPE], star

    @unary
    async def ListTombstones(self, request: dreaming_pb2.ListTombstonesRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.TombstoneList:  # noqa: N802
        agent, _, rows, _ = self._tombstones(context, request.agent_id, write=True)
        return tombstones_pb(agent.id, rows)

    @unary
    async def LiftTombstone(self, request: dreaming_pb2.LiftTombstoneRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.TombstoneList:  # noqa: N802
        agent, store, rows, star = self._tombstones(context, request.agent_id, write=True)
        wanted = request.tombstone_id
        if not wanted:
            raise InvalidArgument("tombstone_id (tombstoneId) is required: the tombstone to lift (F-…)")
        if not TOMBSTONE_ID.fullmatch(wanted):
            raise InvalidArgument(f"tombstone_id: {shown(wanted)} is not a tombstone id (F- and 12 hex digits)")
        if not any(t.id == wanted for t in rows):
            if not star and any(t.id == wanted and t.scope == SHARED_SCOPE for t in store.all()):
                raise PermissionDenied(SHARED_NEEDS_STAR)
            raise NotFound(f"no tombstone {wanted!r} of agent {agent.id!r}")
        lifted = [t for t in rows if t.id == wanted or t.id.startswith(wanted + ".")]
        if lifted[0].scope == SHARED_SCOPE and agent.knowledge.shared.enabled:
            await self._dreamer.lift_in_vault(agent, wanted)  # first: a failure lifts nothing
        with contextlib.suppress(NotFound):  # a shared tombstone made on another host is the vault's only
            store.lift(wanted)
        return tombstones_pb(agent.id, lifted, lifted=True)
