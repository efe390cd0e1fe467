"""The shim's mount of MCP over streamable HTTP at ``/mcp/agents/{agentId}``.

Every request is authorized here before the SDK sees it (DESIGN.md "Auth"):
the key headers pass ``credentials`` (401 naming the header), the key must be
known (401) and cover the agent (403, whether or not the agent exists; 404
only for a ``*`` key and an agent not in the config; 400 for an id no agent
can have). The decision is ``gateway.auth``'s, on the config in force
(``LiveConfig.snapshot``): the code and the config.json the KB decides with.
Only ``X-Api-Key`` and ``Authorization`` count, as on the REST routes, so the
internal token header is no credential here.

Write access is not decided here: the request goes on with its checked key
headers in the scope (``streamable_http.CREDENTIALS``), each tool call
presents them to the KB, and the KB refuses a read key's ``memory_shared_*``
write, which the tool returns as an error saying so.

Refusals carry the DESIGN status and a JSON-RPC error body (``id`` null), the
shape an MCP client reads and shows, rather than the REST routes'
grpc-gateway body. Only POST is served: the transport is stateless (no GET
stream, no session to DELETE), so GET and DELETE get 405 as the MCP spec
allows. One ``http`` log line per request, as the REST routes have, never
with the key.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from typing import Any, Final

import grpc
import structlog

from gateway.auth import Authenticator
from gateway.config import Config
from gateway.errors import GatewayError
from gateway_http.credentials import BadCredential, credential_metadata
from gateway_http.errors import http_status
from gateway_http.router import BadPath, split_path
from gateway_mcp.streamable_http import CREDENTIALS, AgentServers, NotServing

log = structlog.get_logger()

PREFIX: Final = "/mcp/"
ROUTE: Final = "/mcp/agents/{agentId}"
INVALID_REQUEST: Final = -32600  # JSON-RPC's code for a request refused as a whole (the SDK's own, too)
INTERNAL_ERROR: Final = -32603

Snapshot = Callable[[], tuple[Config, Authenticator]]
Scope = dict[str, Any]


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


class McpMount:
    """ASGI app for paths under ``/mcp/``: authorize, then hand the request to the agent's MCP server."""

    def __init__(self, snapshot: Snapshot, servers: AgentServers) -> None:
        self._snapshot = snapshot
        self._servers = servers

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        start = time.perf_counter()
        status: list[int] = []

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            agent_id = self._authorize(scope)
            await self._servers.handle(agent_id, scope, receive, watched)
        except Refused as exc:
            await _refuse(watched, exc.status, exc.message, INVALID_REQUEST, exc.headers)
        except NotServing as exc:
            await _refuse(watched, 503, f"MCP is not being served right now ({exc}); try again shortly", INTERNAL_ERROR)
        except Exception as exc:  # a bug: input is refused with a 4xx before this
            frames = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)[-8:]]
            log.error("http_bug", method=scope["method"], route=ROUTE, error=type(exc).__name__, at=frames)
            if not status:
                await _refuse(watched, 500, "internal error in the MCP endpoint", INTERNAL_ERROR)
        log.info("http", method=scope["method"], route=ROUTE, status=status[0] if status else 0,
                 ms=round((time.perf_counter() - start) * 1000, 3))

    def _authorize(self, scope: Scope) -> str:
        """The agent of an allowed request; raises Refused otherwise (module docstring)."""
        try:
            segments = split_path(scope.get("raw_path") or scope["path"].encode())
        except BadPath as exc:
            raise Refused(400, str(exc)) from None
        if len(segments) != 3 or segments[:2] != ["mcp", "agents"]:
            raise Refused(404, f"no MCP endpoint at {scope['path']}; the memory tools are at {ROUTE}")
        agent_id = segments[2]
        if scope["method"] != "POST":
            raise Refused(405, f"method {scope['method']} not allowed here; MCP over streamable HTTP is POST only "
                          "(stateless: no GET stream, no session to delete)", [(b"allow", b"POST")])
        try:
            metadata = credential_metadata(scope["headers"])
        except BadCredential as exc:
            raise Refused(401, str(exc)) from None
        config, auth = self._snapshot()
        try:
            caller = auth.identify(metadata)
            auth.authorize(caller, agent_id, agent_exists=config.agent(agent_id) is not None, write=False)
        except GatewayError as exc:
            raise Refused(http_status(grpc.StatusCode[exc.code]), exc.message) from None
        scope[CREDENTIALS] = metadata
        return agent_id


async def _refuse(send: Any, status: int, message: str, code: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    *(headers or [])],
    })
    await send({"type": "http.response.body", "body": body})
