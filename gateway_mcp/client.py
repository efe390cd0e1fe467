"""The MCP server's gRPC client of ``gateway.v1.Knowledge``.

gRPC failures are translated here, in one place, into ``KnowledgeError`` with
a message a model can act on; nothing else in the package sees ``grpc`` errors.

Two kinds of caller (docs/architecture.md "Auth and the internal token"): the stdio server presents the home's
internal token and acts for its one agent; over HTTP each call presents the
key of the request that carried it (``as_caller``), never the internal token,
so the KB's own authorization decides what that key may do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Final

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import DEFAULT_DEADLINE_S, aio_channel
from gateway.resources import handler_answered
from gateway.v1 import kb_pb2, kb_pb2_grpc

# The MCP server can switch the KB's read-path recorder off (GATEWAY_RECORD_RETRIEVALS):
# the KB skips recording when this key says "0".
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


def translate(err: grpc.aio.AioRpcError, address: str, deadline_s: float, *, caller_key: bool = False) -> KnowledgeError:
    """The ``KnowledgeError`` for a failed call to the KB at ``address``.

    ``caller_key``: the call presented a caller's API key, so an auth refusal is
    about that key ("no write access to agent ...") and is passed on as the KB
    words it; with the internal token it means a misconfigured home.
    """
    code = err.code()
    details = (err.details() or "").strip()
    if code in _PASS_THROUGH and details:
        message = details
    elif caller_key and code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED) and details:
        message = details
    elif code == grpc.StatusCode.UNAVAILABLE and details and handler_answered(err.trailing_metadata()):
        message = details  # the KB answered: what it needs is down (its vault's server), or it ran short
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
    """``Search``, ``Get`` and the shared-note CRUD for one agent, with a credential and a deadline on every call.

    ``internal_token`` is the stdio server's credential; pass None for a client
    whose every call goes through ``as_caller`` (a call without either is
    refused by the KB as unauthenticated). ``channel``: a channel to share
    (its owner closes it); by default the client opens its own. Create it
    inside the running event loop (gRPC asyncio channels bind to it);
    ``close`` it when done.
    """

    def __init__(
        self,
        address: str,
        agent_id: str,
        internal_token: str | None,
        *,
        record_retrievals: bool = True,
        deadline_s: float = DEFAULT_DEADLINE_S,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.address = address
        self.agent_id = agent_id
        self._deadline_s = deadline_s
        metadata = [] if internal_token is None else [(INTERNAL_TOKEN_HEADER, internal_token)]
        if not record_retrievals:
            metadata.append((RECORD_RETRIEVALS_HEADER, "0"))
        self._metadata: tuple[tuple[str, str], ...] = tuple(metadata)
        self._caller_key = False
        self._own_channel = channel is None
        self._channel = aio_channel(address) if channel is None else channel
        self._stub = kb_pb2_grpc.KnowledgeStub(self._channel)

    def as_caller(self, credentials: Iterable[tuple[str, str]], agent_id: str | None = None) -> KnowledgeClient:
        """This client for calls made with a caller's key headers (``x-api-key``, ``authorization``),
        for ``agent_id`` (by default this client's agent).

        The view shares the channel and drops any internal token (the KB would
        prefer it to the key); its auth refusals are the KB's own words. It is
        cheap (a shallow copy): one is made per tool call over HTTP.
        """
        view = copy.copy(self)
        if agent_id is not None:
            view.agent_id = agent_id
        kept = tuple(item for item in self._metadata if item[0] != INTERNAL_TOKEN_HEADER)
        view._metadata = (*kept, *credentials)
        view._caller_key = True
        view._own_channel = False
        return view

    def _error(self, err: grpc.aio.AioRpcError, deadline_s: float) -> KnowledgeError:
        return translate(err, self.address, deadline_s, caller_key=self._caller_key)

    async def search(self, query: str, corpus: str, limit: int, refresh: bool) -> kb_pb2.SearchResponse:
        """``Knowledge.Search`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.SearchRequest(agent_id=self.agent_id, query=query, corpus=corpus, limit=limit, refresh=refresh)
        deadline = REFRESH_DEADLINE_S if refresh else self._deadline_s
        try:
            reply: kb_pb2.SearchResponse = await self._stub.Search(request, timeout=deadline, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise self._error(err, deadline) from None
        return reply

    async def get(self, path: str, from_line: int, lines: int) -> kb_pb2.GetResponse:
        """``Knowledge.Get`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.GetRequest(agent_id=self.agent_id, path=path, from_line=from_line, lines=lines)
        try:
            reply: kb_pb2.GetResponse = await self._stub.Get(request, timeout=self._deadline_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise self._error(err, self._deadline_s) from None
        return reply

    async def create_shared(self, name: str, content: str, confirm: bool) -> kb_pb2.CreateSharedNoteResponse:
        """``Knowledge.CreateSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.CreateSharedNoteRequest(agent_id=self.agent_id, name=name, content=content, confirm=confirm)
        try:
            reply: kb_pb2.CreateSharedNoteResponse = await self._stub.CreateSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise self._error(err, self._deadline_s) from None
        return reply

    async def get_shared(self, name: str) -> kb_pb2.SharedNote:
        """``Knowledge.GetSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.GetSharedNoteRequest(agent_id=self.agent_id, name=name)
        try:
            reply: kb_pb2.SharedNote = await self._stub.GetSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise self._error(err, self._deadline_s) from None
        return reply

    async def update_shared(self, name: str, content: str, confirm: bool) -> kb_pb2.UpdateSharedNoteResponse:
        """``Knowledge.UpdateSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.UpdateSharedNoteRequest(agent_id=self.agent_id, name=name, content=content, confirm=confirm)
        try:
            reply: kb_pb2.UpdateSharedNoteResponse = await self._stub.UpdateSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise self._error(err, self._deadline_s) from None
        return reply

    async def delete_shared(self, name: str) -> kb_pb2.DeleteSharedNoteResponse:
        """``Knowledge.DeleteSharedNote`` for this agent. Raises KnowledgeError."""
        request = kb_pb2.DeleteSharedNoteRequest(agent_id=self.agent_id, name=name)
        try:
            reply: kb_pb2.DeleteSharedNoteResponse = await self._stub.DeleteSharedNote(
                request, timeout=self._deadline_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise self._error(err, self._deadline_s) from None
        return reply

    async def close(self) -> None:
        """Close the channel, when this client opened it."""
        if self._own_channel:
            await self._channel.close()
