"""gRPC servicer of gateway.v1.Sessions: parse, authorize, call the registry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import structlog

from gateway.auth import Authenticator, Caller
from gateway.config import Config
from gateway.errors import GatewayError, InvalidArgument
from gateway.metrics import observe_rpc
from gateway.rpc import authorize_call, caller_label, caller_of, unary
from gateway.v1 import watcher_pb2, watcher_pb2_grpc
from services.watcher.agent_budgets import BudgetCache, BudgetLine
from services.watcher.compose import compose
from services.watcher.directive_hub import DirectiveHub
from services.watcher.lineage import Lineage
from services.watcher.lineage_pb import lineage_pb
from services.watcher.sessions import Directive, SessionRecord, SessionRegistry

log = structlog.get_logger()

pb = watcher_pb2

# The dreaming summaries of the agents named (services.watcher.dream_client.DreamStatusReader.summaries).
DreamSummaries = Callable[[list[str]], Awaitable[dict[str, watcher_pb2.DreamSummary]]]


def directive_pb(d: Directive) -> watcher_pb2.Directive:
    return pb.Directive(
        agent_id=d.agent_id, session_id=d.session_id, kind=int(d.kind),  # type: ignore[arg-type]
        change_class=int(d.change_class),  # type: ignore[arg-type]
        changed_files=list(d.changed_files), reason=d.reason, generation=d.generation,
    )


def session_pb(r: SessionRecord) -> watcher_pb2.Session:
    out = pb.Session(
        agent_id=r.agent_id, session_id=r.session_id,
        state=pb.SESSION_STATE_BUSY if r.busy else pb.SESSION_STATE_IDLE,
        started_at_ms=r.started_at_ms, last_activity_ms=r.last_activity_ms,
    )
    if r.pending is not None:
        out.pending.CopyFrom(directive_pb(r.pending))
    return out


def _busy(state: int) -> bool:
    """BUSY or IDLE; anything else, SESSION_STATE_UNSPECIFIED (a missing state) included, is InvalidArgument.

    A runtime that forgets its state must not be taken for idle: an idle
    session can be told RESTART_NOW in the middle of a message.
    """
    if state == pb.SESSION_STATE_BUSY:
        return True
    if state == pb.SESSION_STATE_IDLE:
        return False
    if state == pb.SESSION_STATE_UNSPECIFIED:
        raise InvalidArgument("state is required: send SESSION_STATE_IDLE or SESSION_STATE_BUSY")
    raise InvalidArgument(f"state must be SESSION_STATE_IDLE or SESSION_STATE_BUSY, got {state}")


def budget_pb(line: BudgetLine) -> watcher_pb2.FileBudget:
    return pb.FileBudget(
        name=line.name, chars=line.chars or 0, budget=line.budget or 0, over_budget=line.over_budget,
        truncated=line.truncated, problem=line.problem or "", present=line.chars is not None,
    )


async def no_dreams(agent_ids: list[str]) -> dict[str, watcher_pb2.DreamSummary]:
    return {a: pb.DreamSummary(known=False, reason="this watcher does not ask the dreaming service") for a in agent_ids}


class Sessions(watcher_pb2_grpc.SessionsServicer):
    def __init__(
        self,
        snapshot: Callable[[], tuple[Config, Authenticator]],
        registry: SessionRegistry,
        hub: DirectiveHub,
        on_register: Callable[[str], None],
        lineage: Lineage,
        dreams: DreamSummaries = no_dreams,
    ) -> None:
        """``lineage`` keeps what GetLineage answers; ``dreams`` gives ListAgents each agent's dreaming summary."""
        self._snapshot = snapshot
        self._registry = registry
        self._hub = hub
        self._on_register = on_register
        self._lineage = lineage
        self._dreams = dreams
        self._budgets = BudgetCache()

    def _check(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool) -> Config:
        config, auth = self._snapshot()
        authorize_call(auth, context, agent_id, agent_exists=config.agent(agent_id) is not None, write=write)
        return config

    def _visible(
        self, context: grpc.aio.ServicerContext, *, write: bool
    ) -> tuple[Config, Authenticator, Caller, list[str]]:
        """The config, the caller and the ids of the configured agents it may read (``write``: may
        write), sorted; a list filters by the key's scope where a call about one agent refuses."""
        config, auth = self._snapshot()
        caller = caller_of(auth, context)
        ids = sorted(auth.visible(caller, (a.id for a in config.agents)))
        return config, auth, caller, [a for a in ids if auth.may_write(caller, a)] if write else ids

    @unary
    async def RegisterSession(self, request: watcher_pb2.RegisterSessionRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.Session:  # noqa: N802
        agent = self._check(context, request.agent_id, write=True).agent(request.agent_id)
        assert agent is not None
        record = self._registry.register(request.agent_id, request.session_id, _busy(request.state))
        self._lineage.tie(agent, record.session_id, (r.session_id for r in self._registry.live(agent.id)))
        self._on_register(request.agent_id)  # KB refresh, never blocks registration
        return session_pb(record)

    @unary
    async def ReportState(self, request: watcher_pb2.ReportStateRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.Session:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        record, due = self._registry.report(request.agent_id, request.session_id, _busy(request.state))
        if due is not None:
            self._hub.publish([due])
        return session_pb(record)

    @unary
    async def EndSession(self, request: watcher_pb2.EndSessionRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.EndSessionResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        return pb.EndSessionResponse(ended=self._registry.end(request.agent_id, request.session_id))

    @unary
    async def GetActivity(self, request: watcher_pb2.GetActivityRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.Activity:  # noqa: N802
        self._check(context, request.agent_id, write=False)
        return pb.Activity(
            agent_id=request.agent_id,
            last_activity_ms=self._registry.last_activity(request.agent_id),
            sessions=[session_pb(r) for r in self._registry.live(request.agent_id)],
        )

    @unary
    async def PreviewClaudeMd(self, request: watcher_pb2.PreviewClaudeMdRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.PreviewClaudeMdResponse:  # noqa: N802
        agent = self._check(context, request.agent_id, write=False).agent(request.agent_id)
        assert agent is not None
        result = await asyncio.to_thread(compose, agent.workspace, agent.memory, agent.knowledge.archive.enabled)
        files = [
            pb.FileBudget(
                name=f.name, chars=f.chars or 0, budget=f.budget or 0, over_budget=f.over_budget,
                truncated=f.truncated, shrunk=f.shrunk, problem=f.problem or "", present=f.chars is not None,
            )
            for f in result.files
        ]
        return pb.PreviewClaudeMdResponse(
            agent_id=request.agent_id, content=result.text, files=files, budget_report=result.budget_report()
        )

    @unary
    async def GetLineage(self, request: watcher_pb2.GetLineageRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.Lineage:  # noqa: N802
        agent = self._check(context, request.agent_id, write=False).agent(request.agent_id)
        assert agent is not None
        view = await asyncio.to_thread(self._lineage.view, agent, self._registry.live(agent.id))
        return lineage_pb(agent.id, view)

    @unary
    async def ListAgents(self, request: watcher_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext) -> watcher_pb2.ListAgentsResponse:  # noqa: N802
        config, auth, caller, visible = self._visible(context, write=False)
        agents = {a.id: a for a in config.agents}
        budgets, dreams = await asyncio.gather(
            asyncio.to_thread(self._budgets.lines, [agents[a] for a in visible]), self._dreams(visible)
        )
        return pb.ListAgentsResponse(
            agents=[self._summary(a, auth.may_write(caller, a), budgets[a], dreams.get(a)) for a in visible]
        )

    def _summary(
        self, agent_id: str, writable: bool, budgets: tuple[BudgetLine, ...], dream: watcher_pb2.DreamSummary | None
    ) -> watcher_pb2.AgentSummary:
        return pb.AgentSummary(
            agent_id=agent_id, writable=writable, files=[budget_pb(b) for b in budgets],
            over_budget=any(b.over_budget for b in budgets), last_activity_ms=self._registry.last_activity(agent_id),
            sessions=[session_pb(r) for r in self._registry.live(agent_id)],
            dream=dream if dream is not None else pb.DreamSummary(known=False, reason="no answer"),
        )

    async def WatchDirectives(self, request: watcher_pb2.WatchDirectivesRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[watcher_pb2.Directive]:  # noqa: N802
        start = time.perf_counter()
        code = "OK"
        try:
            self._check(context, request.agent_id, write=False)
        except GatewayError as exc:
            observe_rpc("WatchDirectives", exc.code, time.perf_counter() - start)
            log.info("rpc", method="WatchDirectives", agent=request.agent_id, key=caller_label(), code=exc.code, ms=0.0)
            await context.abort(grpc.StatusCode[exc.code], exc.message)
        key = caller_label()  # read now: the generator's finally may run in another context
        queue = self._hub.subscribe(request.agent_id)
        try:
            # Headers go out once the subscription is live: a client that waits for them
            # (initial_metadata()) knows no directive from then on can miss it.
            await context.send_initial_metadata(())
            for record in self._registry.live(request.agent_id):
                if record.pending is not None:
                    yield directive_pb(record.pending)
            while True:
                directive = await queue.get()
                if directive is None:  # the agent was removed from the config (DirectiveHub.close)
                    code = "NOT_FOUND"
                    break
                yield directive_pb(directive)
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except Exception:  # a bug: as in gateway.rpc.unary, INTERNAL with a generic message, the traceback to the log
            code = "INTERNAL"
            log.exception("rpc_failed", method="WatchDirectives")
            await context.abort(grpc.StatusCode.INTERNAL, "internal error")
        finally:
            self._hub.unsubscribe(request.agent_id, queue)
            observe_rpc("WatchDirectives", code, time.perf_counter() - start)
            log.info("rpc", method="WatchDirectives", agent=request.agent_id, key=key, code=code,
                     ms=round((time.perf_counter() - start) * 1000, 3))
        if code == "NOT_FOUND":
            await context.abort(grpc.StatusCode.NOT_FOUND, f"agent {request.agent_id!r} not found: it was removed from the config")
