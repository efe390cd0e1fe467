"""The MCP server's gRPC client of ``gateway.v1.Knowledge``.

gRPC failures are translated here, in one place, into ``KnowledgeError`` with
a message a model can act on; nothing else in the package sees ``grpc`` errors.
"""

from __future__ import annotations

from typing import Final

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import DEFAULT_DEADLINE_S, aio_channel
from gateway.v1 import kb_pb2, kb_pb2_grpc

# SPEC "Archive staleness GC": the read-path recorder is gated to the MCP layer
# (GATEWAY_RECORD_RETRIEVALS). The KB skips recording when this key says "0".
RECORD_RETRIEVALS_HEADER: Final = "x-gateway-record-retrievals"
# A search that refreshes first may re-index a large archive before answering.
REFRESH_DEADLINE_S: Final = 60.0

# Codes whose details the KB writes for the caller (bad path, unknown file, ...).
_PASS_THROUGH = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class KnowledgeError(Exception):
    """A KB call failed. ``message`` is safe and useful to show the model; ``code`` is the gRPC code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def translate(err: grpc.aio.AioRpcError, address: str, deadline_s: float) -> KnowledgeError:
    """The ``KnowledgeError`` for a failed call to the KB at ``address``."""
    code = err.code()
    details = (err.details() or "").strip()
    if code in _PASS_THROUGH and details:
        message = details
    elif code == grpc.StatusCode.UNAVAILABLE:
        message = (
            f"the KB service is not running (nothing answers at {address}); "
            "start the gateway (`gateway up`) and try again"
        )
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        message = f"the KB service did not answer within {deadline_s:g} s; try again shortly"
    elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        message = (
            f"the KB service refused this MCP server ({details or code.name}); "
            "is `gateway mcp` using the same --home as the running gateway?"
        )
    elif code == grpc.StatusCode.UNIMPLEMENTED:
        message = "the running KB service does not support this call; upgrade and restart the gateway"
    else:
        message = f"the KB service failed ({code.name}){': ' + details if details else ''}"
    return KnowledgeError(code.name, message)


class KnowledgeClient:
    """``Search``, ``Get`` and the shared-note CRUD for one agent, with the internal token and a deadline on every call.

    Create it inside the running event loop (gRPC asyncio channels bind to it);
    ``close`` it when done.
    """

    def __init__(
        self,
        address: str,
        agent_id: str,
        internal_token: str,
        *,
        record_retrievals: bool = True,
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self.address = address
        self.agent_id = agent_id
        self._deadline_s = deadline_s
        metadata = [(INTERNAL_TOKEN_HEADER, internal_token)]
        if not record_retrievals:
            metadata.append((RECORD_RETRIEVALS_HEADER, "0"))
        self._metadata = tuple(metadata)
        self._channel = aio_channel(address)
        self._stub = kb_pb2_grpc.KnowledgeStub(self._channel)

    async def search(self, query: str, corpus: str, limit: int, refresh: bool) -> kb_pb2.SearchResponse:
        """``Knowledge.Search`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.SearchRequest(agent_id=self.agent_id, query=query, corpus=corpus, limit=limit, refresh=refresh)
        deadline = REFRESH_DEADLINE_S if refresh else self._deadline_s
        try:
            reply: kb_pb2.SearchResponse = await self._stub.Search(request, timeout=deadline, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, deadline) from None
        return reply

    async def get(self, path: str, from_line: int, lines: int) -> kb_pb2.GetResponse:
        """``Knowledge.Get`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.GetRequest(agent_id=self.agent_id, path=path, from_line=from_line, lines=lines)
        try:
            reply: kb_pb2.GetResponse = await self._stub.Get(request, timeout=self._deadline_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, self._deadline_s) from None
        return reply

    async def create_shared(self, name: str, content: str, confirm: bool) -> kb_pb2.CreateSharedNoteResponse:
        """``Knowledge.CreateSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.CreateSharedNoteRequest(agent_id=self.agent_id, name=name, content=content, confirm=confirm)
        try:
            reply: kb_pb2.CreateSharedNoteResponse = await self._stub.CreateSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, self._deadline_s) from None
        return reply

    async def get_shared(self, name: str) -> kb_pb2.SharedNote:
        """``Knowledge.GetSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.GetSharedNoteRequest(agent_id=self.agent_id, name=name)
        try:
            reply: kb_pb2.SharedNote = await self._stub.GetSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, self._deadline_s) from None
        return reply

    async def update_shared(self, name: str, content: str, confirm: bool) -> kb_pb2.UpdateSharedNoteResponse:
        """``Knowledge.UpdateSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.UpdateSharedNoteRequest(agent_id=self.agent_id, name=name, content=content, confirm=confirm)
        try:
            reply: kb_pb2.UpdateSharedNoteResponse = await self._stub.UpdateSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, self._deadline_s) from None
        return reply

    async def delete_shared(self, name: str) -> kb_pb2.DeleteSharedNoteResponse:
        """``Knowledge.DeleteSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.DeleteSharedNoteRequest(agent_id=self.agent_id, name=name)
        try:
            reply: kb_pb2.DeleteSharedNoteResponse = await self._stub.DeleteSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, self.address, self._deadline_s) from None
        return reply

    async def close(self) -> None:
        await self._channel.close()
