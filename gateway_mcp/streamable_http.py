"""The memory tools over MCP's streamable HTTP transport, for every agent, inside the REST shim.

docs/architecture.md "Processes": the same six tools as ``gateway mcp --agent ID`` (one
``build_server`` per agent, the one implementation), served by the SDK's
``StreamableHTTPSessionManager`` at ``/mcp/agents/{agentId}`` so a runtime
mounts a URL instead of spawning a process (and importing the SDK) per session.

The manager runs **stateless, with JSON answers**: each POST carries one
JSON-RPC message and gets its answer as one JSON body. There is no session
(no ``Mcp-Session-Id``, no GET stream), so every request stands alone and is
authorized alone, the shim holds no state, and a restart of the shim breaks
no client. The tools need no server-to-client requests, which is all a session
would add.

Each tool call presents the KB with the key headers of the very request that
carried it (checked by the mount, kept in the request's ASGI scope under
``CREDENTIALS``), never the internal token: the KB's own authorization decides, so a read
key's ``memory_shared_*`` write is the KB's PERMISSION_DENIED, returned as a
tool error that says so. Whether a key may reach the agent at all is checked
before a request gets here (``gateway_http.mcp_mount``).

The SDK's DNS-rebinding check (Host/Origin allow-lists) is off: every request
needs an API key, which a rebound page does not have, and the shim's bind
address already decides who can connect.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Iterable, MutableMapping
from typing import Any, Final

import anyio
import grpc
import structlog
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from gateway.channels import aio_channel
from gateway_mcp.client import KnowledgeClient
from gateway_mcp.server import build_server

log = structlog.get_logger()

# ASGI scope key of a request's checked key headers, as gRPC metadata; the tools read it there.
CREDENTIALS: Final = "gateway.mcp.credentials"
START_WAIT_S: Final = 10.0  # how long a request waits for the host to start (the first moments of the shim)

Scope = MutableMapping[str, Any]
Receive = Any
Send = Any


def caller_credentials(ctx: Context) -> tuple[tuple[str, str], ...]:
    """The key headers of the request that carried this tool call; empty when there are none.

    Empty means the KB refuses the call as unauthenticated: a request that did
    not pass the mount gets nothing, never a fallback credential.
    """
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    found = scope.get(CREDENTIALS, ()) if isinstance(scope, dict) else ()
    return tuple(found)


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


class AgentServers:
    """One MCP server and session manager per agent.

    ``serve(stop)`` hosts them from the shim's start-up to its shutdown (the
    managers need a running task group), starting those of the ``warm`` agents
    (the configured ones) at once, so a session's first request finds its
    tools ready; an agent added later gets its server on its first request.
    ``handle`` serves one request for an agent the mount has already let
    through. An agent removed from the config keeps its idle manager until
    the shim restarts; the mount refuses it.
    """

    def __init__(self, kb_address: str, *, max_body_bytes: int, warm: Iterable[str] = ()) -> None:
        self._kb_address = kb_address
        self._max_body_bytes = max_body_bytes
        self._warm = tuple(warm)
        self._managers: dict[str, StreamableHTTPSessionManager] = {}
        self._lock = asyncio.Lock()
        self._up = asyncio.Event()
        self._group: TaskGroup | None = None
        self._channel: grpc.aio.Channel | None = None

    async def serve(self, stop: asyncio.Event) -> None:
        """Host the session managers until ``stop`` is set, then end them and close the KB channel."""
        route_sdk_logs()
        self._channel = aio_channel(self._kb_address)
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                self._up.set()
                for agent_id in self._warm:
                    if stop.is_set():
                        break
                    await self._manager(agent_id)
                # The SDK's import left about 100,000 long-lived objects (its pydantic models); a full
                # collection scanning them paused the shim for 60-370 ms here, in the middle of
                # requests. Frozen, the collector skips them (they live as long as the process anyway).
                gc.freeze()
                await stop.wait()
                self._group = None
                group.cancel_scope.cancel()
        finally:
            self._group = None
            await self._channel.close()

    async def handle(
        self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Serve one MCP request for ``agent_id`` whose tool calls present ``credentials`` (the
        request's checked key headers, as gRPC metadata). False, with nothing sent, when the host
        is not running (not started within START_WAIT_S, or shutting down)."""
        manager = await self._manager(agent_id)
        if manager is None:
            return False
        scope[CREDENTIALS] = credentials
        await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]
        return True

    async def _manager(self, agent_id: str) -> StreamableHTTPSessionManager | None:
        manager = self._managers.get(agent_id)
        if manager is not None:
            return manager
        try:
            await asyncio.wait_for(self._up.wait(), START_WAIT_S)
        except asyncio.TimeoutError:
            return None
        async with self._lock:
            manager = self._managers.get(agent_id)
            if manager is not None:
                return manager
            group, channel = self._group, self._channel
            if group is None or channel is None:
                return None
            manager = self._build(agent_id, channel)
            await group.start(_host, manager)
            self._managers[agent_id] = manager
            log.info("mcp_http_agent", agent=agent_id)
            return manager

    def _build(self, agent_id: str, channel: grpc.aio.Channel) -> StreamableHTTPSessionManager:
        client = KnowledgeClient(self._kb_address, agent_id, None, channel=channel)
        server = build_server(agent_id, lambda ctx: client.as_caller(caller_credentials(ctx)))
        # streamable_http_app() is how the SDK creates a server's manager; its Starlette app is
        # not used: the mount routes and authorizes, then hands the request to the manager.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=self._max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return server.session_manager


async def _host(manager: StreamableHTTPSessionManager, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run ``manager`` (its task group) until cancelled at shutdown."""
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()
