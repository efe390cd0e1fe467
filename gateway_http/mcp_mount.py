"""The shim's mount of MCP over streamable HTTP at ``/mcp/agents/{agentId}``.

Every request is authorized here before the SDK sees it (docs/architecture.md "Auth and the internal token"):
the key headers pass ``credentials`` (401 naming the header), the key must be
known (401) and cover the agent (403, whether or not the agent exists; 404
only for a ``*`` key and an agent not in the config; 400 for an id no agent
can have). The decision is ``gateway.auth``'s, on the config in force
(``LiveConfig.snapshot``): the code and the config.json the KB decides with.
Only ``X-Api-Key`` and ``Authorization`` count, as on the REST routes, so the
internal token header is no credential here.

Write access is not decided here: the request goes on with its checked key
headers, each tool call presents them to the KB, and the KB refuses a read
key's ``memory_shared_*`` write, which the tool returns as an error saying so.

The MCP SDK takes about 0.7 s of CPU and some 40 MiB to import, and the shim never imports it:
the entry point (``gateway_cli.serve``) hands the mount a ``load`` function that makes the host,
and this module knows it only by the ``McpHost`` protocol below. The shim's host
(``gateway_http.mcp_child``) serves from a child process running the SDK, started at an MCP
request and stopped when idle (docs/operations.md "Memory at rest"); the in-process host
(``gateway_mcp.streamable_http``) has the same shape. ``serve`` makes the host in a worker thread
at the first MCP request, so /healthz and REST never wait for it; the first MCP request waits
for it (up to ``START_WAIT_S``, else 503). The agent goes to the host with each request: nothing
in the mount or the host is per agent, so a live config edit needs nothing here (the next request
is checked against the config in force). A host that cannot answer a request now raises
``Unavailable``: 503.

Refusals carry the status above and a JSON-RPC error body (``id`` null), the
shape an MCP client reads and shows, rather than the REST routes'
grpc-gateway body. A 401 also carries RFC 6750's ``WWW-Authenticate: Bearer``
challenge (``gateway_http.errors.bearer_challenge``); a 403 carries none. Only POST is served: the transport is stateless (no GET
stream, no session to DELETE), so GET and DELETE get 405 as the MCP spec
allows. One ``http`` log line per request, as the REST routes have, never
with the key.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import Callable
from typing import Any, Final, Protocol

import grpc
import structlog

from gateway.auth import Authenticator
from gateway.config import Config
from gateway.errors import GatewayError
from gateway_http.credentials import BadCredential, credential_metadata
from gateway_http.errors import bearer_challenge, http_status, presented_key
from gateway_http.http_metrics import log_http, observe_http
from gateway_http.router import BadPath, split_path

log = structlog.get_logger()

PREFIX: Final = "/mcp/"
ROUTE: Final = "/mcp/agents/{agentId}"
INVALID_REQUEST: Final = -32600  # JSON-RPC's code for a request refused as a whole (the SDK's own, too)
INTERNAL_ERROR: Final = -32603
START_WAIT_S: Final = 30.0  # how long an MCP request waits for the SDK to load at the shim's start

Snapshot = Callable[[], tuple[Config, Authenticator]]
Scope = dict[str, Any]


class McpHost(Protocol):
    """The MCP tools' host as the mount uses it (``gateway_http.mcp_child.ChildHost``, or in one process
    ``gateway_mcp.streamable_http.McpHost``)."""

    async def serve(self, stop: asyncio.Event) -> None: ...

    async def handle(
        self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Any, send: Any
    ) -> bool: ...


# Makes the host for (kb_address, max_body_bytes). It runs in a worker thread (an in-process host imports the SDK).
LoadHost = Callable[[str, int], McpHost]


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


class Unavailable(Exception):
    """The host cannot answer this request now (its child process died or could not start): 503."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class McpMount:
    """ASGI app for paths under ``/mcp/``: authorize, then hand the request and its agent to the MCP host.

    ``serve(stop)`` runs from the shim's start-up to its shutdown (its background): at the first
    MCP request it makes the host (``load``, called in a worker thread), then runs it: one MCP
    server for every agent.
    """

    def __init__(self, snapshot: Snapshot, kb_address: str, *, load: LoadHost, max_body_bytes: int) -> None:
        self._snapshot = snapshot
        self._load = load
        self._kb_address = kb_address
        self._max_body_bytes = max_body_bytes
        self._host: McpHost | None = None
        self._loaded = asyncio.Event()
        self._wanted = asyncio.Event()  # set by the first MCP request

    async def serve(self, stop: asyncio.Event) -> None:
        """At the first MCP request, make the host in a worker thread, then run it until ``stop`` is
        set; when ``stop`` comes first, return without making it."""
        wanted = asyncio.ensure_future(self._wanted.wait())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait((wanted, stopping), return_when=asyncio.FIRST_COMPLETED)
        wanted.cancel()
        stopping.cancel()
        if stop.is_set():
            return
        try:
            host = await asyncio.to_thread(self._load, self._kb_address, self._max_body_bytes)
            self._host = host
            self._loaded.set()
            await host.serve(stop)
        except Exception as exc:  # a bug: MCP requests then get 503, the REST routes are unaffected
            log.error("mcp_http_failed", error=type(exc).__name__,
                      at=[f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)[-8:]])
            raise

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        start = time.perf_counter()
        status: list[int] = []

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            agent_id, credentials = self._authorize(scope)
            if not await self._handle(agent_id, credentials, scope, receive, watched):
                await _refuse(watched, 503, "the MCP tools are not being served right now (the shim is starting "
                              "or stopping); try again shortly", INTERNAL_ERROR)
        except Refused as exc:
            await _refuse(watched, exc.status, exc.message, INVALID_REQUEST, exc.headers)
        except Unavailable as exc:
            if not status:
                await _refuse(watched, 503, exc.message, INTERNAL_ERROR)
        except Exception as exc:  # noqa: BLE001 - a bug: input is refused with a 4xx before this
            frames = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)[-8:]]
            log.error("http_bug", method=scope["method"], route=ROUTE, error=type(exc).__name__, at=frames)
            if not status:
                await _refuse(watched, 500, "internal error in the MCP endpoint", INTERNAL_ERROR)
        seconds = time.perf_counter() - start
        observe_http(ROUTE, scope["method"], status[0] if status else 0, seconds)
        log_http(scope["method"], ROUTE, status[0] if status else 0, seconds)

    async def _handle(self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Any,
                      send: Any) -> bool:
        if self._host is None:
            self._wanted.set()
            try:
                await asyncio.wait_for(self._loaded.wait(), START_WAIT_S)
            except asyncio.TimeoutError:
                return False
        host = self._host
        return host is not None and await host.handle(agent_id, credentials, scope, receive, send)

    def _authorize(self, scope: Scope) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The agent and the checked key headers of an allowed request; raises Refused otherwise."""
        try:
            segments = split_path(scope.get("raw_path") or scope["path"].encode())
        except BadPath as exc:
            raise Refused(400, str(exc)) from None
        if len(segments) != 3 or segments[:2] != ["mcp", "agents"]:
            raise Refused(404, f"no MCP endpoint at {scope['path'][:200]}; the memory tools are at {ROUTE}")
        agent_id = segments[2]
        if scope["method"] != "POST":
            raise Refused(405, f"method {scope['method']} not allowed here; MCP over streamable HTTP is POST only "
                          "(stateless: no GET stream, no session to delete)", [(b"allow", b"POST")])
        try:
            metadata = credential_metadata(scope["headers"])
        except BadCredential as exc:
            raise Refused(401, str(exc), bearer_challenge(str(exc))) from None
        config, auth = self._snapshot()
        try:
            caller = auth.identify(metadata)
            auth.authorize(caller, agent_id, agent_exists=config.agent(agent_id) is not None, write=False)
        except GatewayError as exc:
            status = http_status(grpc.StatusCode[exc.code])
            challenge = bearer_challenge(exc.message if presented_key(metadata) else None) if status == 401 else None
            raise Refused(status, exc.message, challenge) from None
        return agent_id, metadata


async def _refuse(send: Any, status: int, message: str, code: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    *(headers or [])],
    })
    await send({"type": "http.response.body", "body": body})
