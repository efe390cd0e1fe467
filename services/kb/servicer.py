"""gRPC servicer of gateway.v1.Knowledge: parse, authorize, call the archives."""

from __future__ import annotations

import grpc

from gateway.auth import Authenticator
from gateway.rpc import caller_of, unary
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb.archives import Archives

pb = kb_pb2

RECORD_METADATA = "x-gateway-record-retrievals"


def _recording_allowed(context: grpc.aio.ServicerContext) -> bool:
    """SPEC: the read-path recorder can be switched off by the MCP layer (GATEWAY_RECORD_RETRIEVALS)."""
    for name, value in context.invocation_metadata() or ():
        if name == RECORD_METADATA and str(value).strip().lower() in ("0", "false", "no", "off"):
            return False
    return True


def _report(r) -> kb_pb2.RefreshReport:  # type: ignore[no-untyped-def]
    return pb.RefreshReport(indexed=r.indexed, skipped=r.skipped, pruned=r.pruned, errors=list(r.errors),
                            seconds=r.seconds, rebuilt=r.rebuilt)


class Knowledge(kb_pb2_grpc.KnowledgeServicer):
    def __init__(self, archives: Archives, auth: Authenticator) -> None:
        self._archives = archives
        self._auth = auth

    def _check(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool = False) -> None:
        caller = caller_of(self._auth, context)
        self._auth.authorize(caller, agent_id, agent_exists=self._archives.agent(agent_id) is not None, write=write)

    @unary
    async def Refresh(self, request: kb_pb2.RefreshRequest, context: grpc.aio.ServicerContext) -> kb_pb2.RefreshResponse:  # noqa: N802
        self._check(context, request.agent_id)
        future = self._archives.refresh(request.agent_id)
        if not request.wait:
            return pb.RefreshResponse(agent_id=request.agent_id, queued=True)
        report = await future
        return pb.RefreshResponse(agent_id=request.agent_id, generation=report.generation, report=_report(report))

    @unary
    async def Search(self, request: kb_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> kb_pb2.SearchResponse:  # noqa: N802
        self._check(context, request.agent_id)
        result, refreshed = await self._archives.search(
            request.agent_id, request.query, request.corpus or "memory", request.limit, request.refresh
        )
        if _recording_allowed(context):
            self._archives.record(request.agent_id, result.hits, "search")
        hits = [
            pb.SearchHit(path=h.path, start_line=h.start_line, end_line=h.end_line, snippet=h.snippet, score=h.score,
                         provenance=h.provenance, importance=h.importance, entry_hash=h.entry_hash or "", corpus="memory")
            for h in result.hits
        ]
        return pb.SearchResponse(hits=hits, generation=result.generation, stale=result.stale, refreshed=refreshed)

    @unary
    async def Get(self, request: kb_pb2.GetRequest, context: grpc.aio.ServicerContext) -> kb_pb2.GetResponse:  # noqa: N802
        self._check(context, request.agent_id)
        got = await self._archives.get(request.agent_id, request.path, request.from_line, request.lines)
        if _recording_allowed(context):
            self._archives.record(request.agent_id, got.entries, "get")
        return pb.GetResponse(path=got.path, text=got.text, from_line=got.from_line, to_line=got.to_line,
                              total_lines=got.total_lines, truncated=got.truncated)

    @unary
    async def FoldRetrievals(self, request: kb_pb2.FoldRetrievalsRequest, context: grpc.aio.ServicerContext) -> kb_pb2.FoldRetrievalsResponse:  # noqa: N802
        self._check(context, request.agent_id, write=True)
        report = await self._archives.fold(request.agent_id)
        return pb.FoldRetrievalsResponse(folded=report.folded, entries=report.entries)

    @unary
    async def GetIndexStatus(self, request: kb_pb2.GetIndexStatusRequest, context: grpc.aio.ServicerContext) -> kb_pb2.IndexStatus:  # noqa: N802
        self._check(context, request.agent_id)
        return pb.IndexStatus(agent_id=request.agent_id, **self._archives.status(request.agent_id))  # type: ignore[arg-type]
