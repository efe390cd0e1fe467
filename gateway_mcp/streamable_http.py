"""The memory tools over MCP's streamable HTTP transport, for every agent, inside the REST shim.

docs/architecture.md "Processes": the same six tools as ``gateway mcp --agent ID`` (one
``build_server`` per agent, the one implementation), served by the SDK's
``StreamableHTTPSessionManager`` at ``/mcp/agents/{agentId}`` so a runtime
mounts a URL instead of spawning a process (and importing the SDK) per session.
An agent's server is built on its first request and closed when unused (``AgentServers``).

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
import contextlib
import gc
import logging
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
import grpc
import structlog
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import Counter, Gauge

from gateway.channels import aio_channel
from gateway.metrics import REGISTRY
from gateway_mcp.client import KnowledgeClient
from gateway_mcp.server import build_server

log = structlog.get_logger()

# ASGI scope key of a request's checked key headers, as gRPC metadata; the tools read it there.
CREDENTIALS: Final = "gateway.mcp.credentials"
START_WAIT_S: Final = 10.0  # how long a request waits for the host to start (the first moments of the shim)
MAX_SERVERS: Final = 128  # agents' servers held at once (about 0.2 MB each); the least recently used make room
IDLE_S: Final = 600.0  # a server that answered nothing for this long is closed
SWEEP_S: Final = 30.0  # how often idle servers (and those of removed agents) are looked for

MCP_SERVERS = Gauge(
    "gateway_mcp_servers", "Agents' MCP servers the shim holds now (built on an agent's first MCP request).",
    registry=REGISTRY,
)
MCP_SERVERS_BUILT = Counter(
    "gateway_mcp_servers_built_total", "Agents' MCP servers the shim built (one per first request, and again after a close).",
    registry=REGISTRY,
)

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


@dataclass
class _Held:
    """One agent's server as the shim holds it: its session manager, the cancel scope that ends
    it, the requests it is answering now, and when it last finished one (loop time)."""

    manager: StreamableHTTPSessionManager
    scope: anyio.CancelScope
    in_flight: int = 0
    last_used: float = 0.0
    retired: bool = False  # dropped from the map: closed once its last request is answered


class AgentServers:
    """The agents' MCP servers, each built on its agent's first request and closed when not used.

    ``serve(stop)`` hosts them from the shim's start-up to its shutdown (the managers need a
    running task group). Nothing is built at start: an agent's server (``build_server`` and its
    session manager, about 10 ms of CPU and 0.2 MB) is built by its first request, so a home with
    many agents starts as fast as one with a few, and agents never reached over MCP cost nothing.
    Concurrent first requests for one agent build one server (a lock, checked again inside).

    What is held stays bounded, whatever the number of agents (README "MCP: stdio and streamable
    HTTP"): at most ``max_servers`` (the least recently used one with no request in flight is
    closed to make room), and one that answered nothing for ``idle_s`` is closed by a sweep every
    ``sweep_s``. ``known(agent_id)`` says whether the config in force still has the agent: a
    server of an agent the config no longer has is closed (at once through ``prune``, which the
    shim calls after every reload, and at every sweep). A server with requests in flight is never
    cut short: it is closed when its last request is answered. ``handle`` serves one request for
    an agent the mount has already let through.
    """

    def __init__(self, kb_address: str, *, max_body_bytes: int, known: Callable[[str], bool] = lambda _a: True,
                 max_servers: int = MAX_SERVERS, idle_s: float = IDLE_S, sweep_s: float = SWEEP_S) -> None:
        self._kb_address = kb_address
        self._max_body_bytes = max_body_bytes
        self._known = known
        self._max_servers = max_servers
        self._idle_s = idle_s
        self._sweep_s = sweep_s
        self._held: OrderedDict[str, _Held] = OrderedDict()  # least recently used first
        self._lock = asyncio.Lock()
        self._up = asyncio.Event()
        self._group: TaskGroup | None = None
        self._channel: grpc.aio.Channel | None = None
        MCP_SERVERS.set_function(lambda: len(self._held))

    def held(self) -> frozenset[str]:
        """The agents whose servers are held now."""
        return frozenset(self._held)

    async def serve(self, stop: asyncio.Event) -> None:
        """Host the session managers until ``stop`` is set, then end them and close the KB channel."""
        route_sdk_logs()
        self._channel = aio_channel(self._kb_address)
        # The SDK's import left about 100,000 long-lived objects (its pydantic models); a full
        # collection scanning them paused the shim for 60-370 ms, in the middle of requests.
        # Frozen, the collector skips them (they live as long as the process anyway).
        gc.freeze()
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                self._up.set()
                while not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self._sweep_s)
                    self.sweep()
                self._group = None
                group.cancel_scope.cancel()
        finally:
            self._group = None
            self._held.clear()
            await self._channel.close()

    def sweep(self) -> None:
        """Close the servers idle for ``idle_s`` and those of agents the config no longer has."""
        now = asyncio.get_running_loop().time()
        for agent_id, held in list(self._held.items()):
            if not self._known(agent_id):
                self._drop(agent_id, "removed")
            elif held.in_flight == 0 and now - held.last_used >= self._idle_s:
                self._drop(agent_id, "idle")

    def prune(self) -> None:
        """Close the servers of agents the config in force no longer has (call it after a reload)."""
        for agent_id in [a for a in self._held if not self._known(a)]:
            self._drop(agent_id, "removed")

    async def handle(
        self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Serve one MCP request for ``agent_id`` whose tool calls present ``credentials`` (the
        request's checked key headers, as gRPC metadata). False, with nothing sent, when the host
        is not running (not started within START_WAIT_S, or shutting down)."""
        held = await self._server(agent_id)
        if held is None:
            return False
        held.in_flight += 1
        try:
            scope[CREDENTIALS] = credentials
            await held.manager.handle_request(scope, receive, send)  # type: ignore[arg-type]
        finally:
            held.in_flight -= 1
            held.last_used = asyncio.get_running_loop().time()
            if held.retired and held.in_flight == 0:
                held.scope.cancel()
        return True

    async def _server(self, agent_id: str) -> _Held | None:
        held = self._held.get(agent_id)
        if held is not None:
            self._held.move_to_end(agent_id)
            return held
        try:
            await asyncio.wait_for(self._up.wait(), START_WAIT_S)
        except TimeoutError:
            return None
        async with self._lock:
            held = self._held.get(agent_id)
            if held is not None:
                self._held.move_to_end(agent_id)
                return held
            group, channel = self._group, self._channel
            if group is None or channel is None:
                return None
            manager = self._build(agent_id, channel)
            scope: anyio.CancelScope = await group.start(_host, manager)
            held = _Held(manager, scope, last_used=asyncio.get_running_loop().time())
            self._held[agent_id] = held
            MCP_SERVERS_BUILT.inc()
            self._make_room(keep=agent_id)
            log.info("mcp_server_built", agent=agent_id, servers=len(self._held))
            return held

    def _make_room(self, keep: str) -> None:
        """Close least recently used servers with no request in flight (never ``keep``'s, just
        built) until at most ``max_servers`` are held; while every other one is busy, more are."""
        excess = len(self._held) - self._max_servers
        for agent_id in list(self._held):
            if excess <= 0:
                return
            if agent_id != keep and self._held[agent_id].in_flight == 0:
                self._drop(agent_id, "least_recently_used")
                excess -= 1

    def _drop(self, agent_id: str, why: str) -> None:
        held = self._held.pop(agent_id)
        held.retired = True
        if held.in_flight == 0:
            held.scope.cancel()
        log.info("mcp_server_closed", agent=agent_id, reason=why, servers=len(self._held))

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


async def _host(manager: StreamableHTTPSessionManager, *,
                task_status: TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run ``manager`` (its task group) until its cancel scope (given to the caller once it runs)
    is cancelled, or the shim shuts down."""
    with anyio.CancelScope() as scope:
        async with manager.run():
            task_status.started(scope)
            await anyio.sleep_forever()
