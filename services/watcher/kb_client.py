"""The watcher's call to the KB at session spawn: refresh, off the request path."""

from __future__ import annotations

import asyncio

import grpc
import structlog

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import aio_channel
from gateway.v1 import kb_pb2, kb_pb2_grpc

log = structlog.get_logger()

REFRESH_DEADLINE_S = 5.0


class KbRefresher:
    """Fire-and-forget ``Knowledge.Refresh``; a KB that is down is logged, never raised."""

    def __init__(self, address: str, internal_token: str) -> None:
        self._address = address
        self._metadata = ((INTERNAL_TOKEN_HEADER, internal_token),)
        self._channel: grpc.aio.Channel | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def refresh_soon(self, agent_id: str) -> None:
        task = asyncio.ensure_future(self._refresh(agent_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self, agent_id: str) -> None:
        if self._channel is None:
            self._channel = aio_channel(self._address)
        stub = kb_pb2_grpc.KnowledgeStub(self._channel)
        try:
            reply = await stub.Refresh(
                kb_pb2.RefreshRequest(agent_id=agent_id, wait=False), timeout=REFRESH_DEADLINE_S, metadata=self._metadata
            )
            log.info("kb_refresh_requested", agent=agent_id, generation=reply.generation)
        except grpc.aio.AioRpcError as err:
            log.warning("kb_refresh_failed", agent=agent_id, code=err.code().name, detail=err.details())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._channel is not None:
            await self._channel.close()
