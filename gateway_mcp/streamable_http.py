"""The memory tools over MCP's streamable HTTP transport, for every agent, inside the REST shim.

docs/architecture.md "Processes": the same six tools as ``gateway mcp --agent ID`` (``build_server``,
the one implementation), served by the SDK's ``StreamableHTTPSessionManager`` at
``/mcp/agents/{agentId}`` so a runtime mounts a URL instead of spawning a process (and importing
the SDK) per session. One server and one session manager serve every agent for the shim's whole
life (``McpHost``): a request names its agent, so nothing is built, held or closed per agent, and
the shim's memory and its CPU per request do not depend on how many agents are reached.

The manager runs **stateless, with JSON answers**: each POST carries one
JSON-RPC message and gets its answer as one JSON body. There is no session
(no ``Mcp-Session-Id``, no GET stream), so every request stands alone and is
authorized alone, the shim holds no state, and a restart of the shim breaks
no client. The tools need no server-to-client requests, which is all a session
would add.

What a request is for travels in its own ASGI scope, put there by the mount once it has
authorized the request: its agent (``AGENT``) and its checked key headers (``CREDENTIALS``).
Each tool call acts for that agent and presents those key headers to the KB, never the internal
token: the KB's own authorization decides, so a read key's ``memory_shared_*`` write is the KB's
PERMISSION_DENIED, returned as a tool error that says so. Whether a key may reach the agent at
all is checked before a request gets here (``gateway_http.mcp_mount``), on the config in force,
so an agent added by a live edit is served at once and a removed one is refused.

The SDK's DNS-rebinding check (Host/Origin allow-lists) is off: every request
needs an API key, which a rebound page does not have, and the shim's bind
address already decides who can connect.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, Final

import grpc
import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from gateway import logs
from gateway.channels import aio_channel
from gateway_mcp.client import KnowledgeClient
from gateway_mcp.server import build_server

log = structlog.get_logger()

# ASGI scope keys of a request's agent and of its checked key headers (as gRPC metadata).
AGENT: Final = "gateway.mcp.agent"
CREDENTIALS: Final = "gateway.mcp.credentials"
START_WAIT_S: Final = 10.0  # how long a request waits for the host to start (the first moments of the shim)

Scope = MutableMapping[str, Any]
Receive = Any
Send = Any


def request_scope(request: ServerRequestContext[Any, Any]) -> Mapping[str, Any]:
    """The ASGI scope of the HTTP request that carried a message; empty when there is none."""
    scope = getattr(request.request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def request_agent(request: ServerRequestContext[Any, Any]) -> str | None:
    """The agent the request that carried a message is for; None when it did not pass the mount."""
    agent_id = request_scope(request).get(AGENT)
    return agent_id if isinstance(agent_id, str) else None


def caller_credentials(ctx: Context) -> tuple[tuple[str, str], ...]:
    """The key headers of the request that carried this tool call; empty when there are none.

    Empty means the KB refuses the call as unauthenticated: a request that did
    not pass the mount gets nothing, never a fallback credential.
    """
    return tuple(request_scope(ctx.request_context).get(CREDENTIALS, ()))


class _SdkLogs(logging.Handler):
    """The SDK's stdlib log records (warnings and up) as the shim's JSON lines.

    Installed on the root logger before the first ``MCPServer`` exists: the SDK
    otherwise configures the root logger itself (a console handler on stderr).
    Only the record's own message is kept; the SDK never logs request headers.
    """

    def emit(self, record: logging.LogRecord) -> None:
        log.log(record.levelno, "mcp_sdk", logger=record.name, message=record.getMessage(),
                error=record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None)


def route_sdk_logs() -> None:
    """Send stdlib logging (the SDK's) to the shim's log, warnings and up, once per process."""
    root = logging.getLogger()
    if not any(isinstance(h, _SdkLogs) for h in root.handlers):
        root.addHandler(_SdkLogs(logging.WARNING))


class McpHost:
    """The memory tools of every agent: one MCP server and one session manager for the shim's life.

    ``serve(stop)`` builds them (about 10 ms of CPU and 0.2 MB, once), runs the manager from the
    shim's start-up to its shutdown and then closes the KB channel its calls share. ``handle``
    serves one request for an agent the mount has already let through: the agent and the key
    headers go in the request's scope, where the tools find them (``client_for``), and the
    ``initialize`` answer's instructions name that agent (``gateway_mcp.server.AgentInstructions``).
    """

    def __init__(self, kb_address: str, *, max_body_bytes: int) -> None:
        self._kb_address = kb_address
        self._max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None
        self._up = asyncio.Event()

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve the tools until ``stop`` is set, then end the manager and close the KB channel."""
        route_sdk_logs()
        channel = aio_channel(self._kb_address)
        try:
            manager = self._build(channel)
            # The SDK's import left about 100,000 long-lived objects (its pydantic models), and the
            # server adds its own; a full collection scanning them paused the shim for 60-370 ms,
            # in the middle of requests. Frozen, the collector skips them (they live as long as
            # the process).
            gc.freeze()
            async with manager.run():
                self._manager = manager
                self._up.set()
                if not logs.stopping():  # the shim said "stopping" while the SDK loaded: no ready line after it
                    log.info("mcp_tools_ready")
                await stop.wait()
        finally:
            self._manager = None
            await channel.close()

    def _build(self, channel: grpc.aio.Channel) -> StreamableHTTPSessionManager:
        """The one server of the tools, and its session manager, making every KB call on ``channel``."""
        # Acts for no agent and presents nothing itself: every call goes through a view of it for
        # the request's agent and key (``as_caller``).
        client = KnowledgeClient(self._kb_address, "", None, channel=channel)

        def client_for(ctx: Context) -> KnowledgeClient:
            return client.as_caller(caller_credentials(ctx), request_agent(ctx.request_context))

        server = build_server(request_agent, client_for)
        # streamable_http_app() is how the SDK creates a server's manager; its Starlette app is
        # not used: the mount routes and authorizes, then hands the request to the manager.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=self._max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return server.session_manager

    async def handle(
        self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Serve one MCP request for ``agent_id`` whose tool calls present ``credentials`` (the
        request's checked key headers, as gRPC metadata). False, with nothing sent, when the host
        is not running (not started within START_WAIT_S, or shutting down)."""
        if self._manager is None:
            try:
                await asyncio.wait_for(self._up.wait(), START_WAIT_S)
            except TimeoutError:
                return False
        manager = self._manager
        if manager is None:
            return False
        scope[AGENT] = agent_id
        scope[CREDENTIALS] = credentials
        await manager.handle_request(scope, receive, send)
        return True
