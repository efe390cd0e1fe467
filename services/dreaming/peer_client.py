"""Dreaming's calls to its peers over gRPC, with the internal token and deadlines.

- The KB: ``Refresh`` (waited for) and ``Search``, for the recall check;
  ``PromoteFact``, for shared promotion. The dreaming process never opens a
  ``kb.sqlite``.
- The watcher: ``GetActivity``, for the quiet window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import aio_channel
from gateway.v1 import kb_pb2, kb_pb2_grpc, watcher_pb2, watcher_pb2_grpc
from services.dreaming.promotion import PromotionReply
from services.dreaming.recall import Hit

REFRESH_DEADLINE_S = 120.0  # a first index of a large archive takes a while
SEARCH_DEADLINE_S = 10.0
PROMOTE_DEADLINE_S = 30.0  # one vault write and its reindex; the vault index waits up to 10 s for a lock
ACTIVITY_DEADLINE_S = 5.0
PROBE_BATCH = 1000  # probes per ProbeRecall call (entries are small; well under the 8 MiB message cap)


class PeerUnavailable(Exception):
    """A peer could not answer; ``str()`` names the peer, the code and its detail; ``code`` is the
    gRPC status code's name (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``…)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Activity:
    last_activity_ms: int
    busy_sessions: int
    live_sessions: int


def _unavailable(peer: str, err: grpc.aio.AioRpcError) -> PeerUnavailable:
    return PeerUnavailable(f"{peer}: {err.code().name}: {err.details() or 'no detail'}", err.code().name)


class KbIndex:
    """``recall.Index`` over the KB service."""

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
        return [Hit(h.path, h.start_line, h.end_line) for h in reply.hits if h.corpus in ("", "memory")]

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

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str) -> PromotionReply:
        """``PromoteFact``: one shared promotion (``promotion.Promoter``). Raises PeerUnavailable."""
        request = kb_pb2.PromoteFactRequest(agent_id=agent_id, topic=topic, reason=reason, content=content, run_id=run_id)
        try:
            r = await self._stub.PromoteFact(request, timeout=PROMOTE_DEADLINE_S, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise _unavailable("kb", err) from None
        return PromotionReply(outcome=r.outcome, name=r.name, reason=r.reason, message=r.message, name_from=r.name_from,
                              passed_over=r.passed_over, linked=tuple(r.linked), folded=r.folded, twin_kept=r.twin_kept)

    async def close(self) -> None:
        await self._channel.close()


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
