"""The soak's agent-runtime traffic: MCP over streamable HTTP and over stdio, and sessions on the watcher.

- **MCP over HTTP**: every ``every_s`` seconds a runtime opens a session with the SDK's client on
  one shared ``httpx2`` client (as a runtime keeps its HTTP stack), ``initialize`` and
  ``tools/list`` (recorded as ``mcp_http:ready``), then a ``memory_search`` and a
  ``memory_shared_get`` or ``memory_get`` (each ``mcp_http:call``).
- **MCP over stdio**: now and then a ``gateway mcp --agent ID`` process is spawned by the SDK's
  ``stdio_client``, makes a tool call every few seconds for a while, and is stopped by closing
  its stdin, as a runtime ends a session (``mcp_stdio:ready``, ``mcp_stdio:call``).
- **Sessions**: a few simulated runtimes each register a session (half over REST, half over
  gRPC, the gRPC ones also holding a ``WatchDirectives`` stream), report BUSY/IDLE every few
  seconds, end it after a while and start another on another agent (``session:rest``,
  ``session:grpc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import sys
import time
from pathlib import Path
from typing import Any

from soak_traffic import Recorder, RestTraffic
from harness import REPO
from suite_up import KEY, FleetHome

TOOLS = 6
STDIO_CALLS = 8
STDIO_GAP_S = 3.0


def _tool_text(result: Any) -> str:
    from mcp.types import TextContent

    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))[:300]


class McpTraffic:
    def __init__(self, fleet: FleetHome, rec: Recorder, rng: random.Random, rest: RestTraffic, log_dir: Path) -> None:
        self.fleet = fleet
        self.rec = rec
        self.rng = rng
        self.rest = rest
        self.log_dir = log_dir
        self.tls = ssl.create_default_context()  # made once: a new client would read the CA bundle each time

    async def call(self, session: Any, kind: str, tool: str, args: dict[str, Any]) -> None:
        start = time.perf_counter()
        try:
            result = await session.call_tool(tool, args)
        except Exception as exc:  # noqa: BLE001 - any failure of the call is an error of the run, recorded
            self.rec.add(kind, start, 0, False, f"{tool}: {type(exc).__name__}: {exc}")
            return
        self.rec.add(kind, start, 200, not result.is_error, f"{tool}: {_tool_text(result)}")

    def calls(self, agent: str) -> list[tuple[str, dict[str, Any]]]:
        second: tuple[str, dict[str, Any]]
        if self.rest.shared and self.rng.random() < 0.5:
            second = ("memory_shared_get", {"name": self.rng.choice(list(self.rest.shared))})
        else:
            second = ("memory_get", {"path": self.rng.choice(self.fleet.notes[agent]), "lines": 40})
        return [("memory_search", {"query": self.rest.query()}), second]

    async def http_session(self, client: Any) -> None:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        agent = self.rng.choice(self.fleet.agents)
        url = f"{self.fleet.base_url}/mcp/agents/{agent}"
        start = time.perf_counter()
        try:
            async with streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                self.rec.add("mcp_http:ready", start, 200, len(tools.tools) == TOOLS, f"{len(tools.tools)} tools")
                for tool, args in self.calls(agent):
                    await self.call(session, "mcp_http:call", tool, args)
        except Exception as exc:  # noqa: BLE001 - a session that fails is an error of the run, recorded
            self.rec.add("mcp_http:ready", start, 0, False, f"{type(exc).__name__}: {exc}")

    async def http_loop(self, stop: asyncio.Event, every_s: float) -> None:
        import httpx2

        async with httpx2.AsyncClient(headers={"X-Api-Key": KEY}, timeout=30, verify=self.tls) as client:
            while not stop.is_set():
                began = time.perf_counter()
                await self.http_session(client)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, every_s - (time.perf_counter() - began)))

    async def stdio_session(self, stop: asyncio.Event) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        agent = self.rng.choice(self.fleet.agents)
        params = StdioServerParameters(command=sys.executable, cwd=REPO,
                                       args=["-m", "gateway_cli.cli", "mcp", "--agent", agent, "--home", str(self.fleet.home)])  # fmt: skip
        start = time.perf_counter()
        try:
            with open(self.log_dir / "mcp-stdio.log", "a") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    self.rec.add("mcp_stdio:ready", start, 200, len(tools.tools) == TOOLS, f"{len(tools.tools)} tools")
                    self.rec.outcomes["stdio MCP processes started"] += 1
                    for _ in range(STDIO_CALLS):
                        tool, args = self.calls(agent)[self.rng.randrange(2)]
                        await self.call(session, "mcp_stdio:call", tool, args)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stop.wait(), STDIO_GAP_S)
                        if stop.is_set():
                            break
        except Exception as exc:  # noqa: BLE001 - a session that fails is an error of the run, recorded
            self.rec.add("mcp_stdio:ready", start, 0, False, f"{type(exc).__name__}: {exc}")

    async def stdio_loop(self, stop: asyncio.Event, every_s: float) -> None:
        """One stdio server at a time, a new one every ``every_s`` seconds (the first after a short delay)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), min(every_s, 20.0))
        while not stop.is_set():
            began = time.perf_counter()
            await self.stdio_session(stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(1.0, every_s - (time.perf_counter() - began)))


class SessionTraffic:
    """``runtimes`` simulated agent runtimes registering sessions and reporting their state."""

    def __init__(self, fleet: FleetHome, rec: Recorder, rng: random.Random, rest: RestTraffic) -> None:
        self.fleet = fleet
        self.rec = rec
        self.rng = rng
        self.rest = rest
        self.directives = 0

    async def grpc_call(self, kind: str, rpc: Any, request: Any, metadata: Any) -> Any:
        import grpc

        from gateway_http.errors import http_status

        start = time.perf_counter()
        try:
            reply = await rpc(request, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as exc:
            self.rec.add(kind, start, http_status(exc.code()), False, f"{exc.code().name}: {exc.details()}")
            return None
        self.rec.add(kind, start, 200, True)
        return reply

    async def watch(self, stub: Any, agent: str, metadata: Any) -> None:
        import grpc

        from gateway.v1 import watcher_pb2

        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for _ in stub.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id=agent), metadata=metadata):
                self.directives += 1

    async def grpc_runtime(self, stop: asyncio.Event, stub: Any, n: int) -> None:
        from gateway.v1 import watcher_pb2

        metadata = (("x-api-key", KEY),)
        busy, idle = watcher_pb2.SESSION_STATE_BUSY, watcher_pb2.SESSION_STATE_IDLE
        round_ = 0
        while not stop.is_set():
            round_ += 1
            agent = self.rng.choice(self.fleet.agents)
            sid = f"soak-grpc-{n}-{round_}"
            watcher = asyncio.create_task(self.watch(stub, agent, metadata))
            await self.grpc_call("session:grpc", stub.RegisterSession,
                                 watcher_pb2.RegisterSessionRequest(agent_id=agent, session_id=sid, state=busy), metadata)  # fmt: skip
            for k in range(self.rng.randint(6, 20)):
                if await self.pause(stop):
                    break
                state = idle if k % 2 == 0 else busy
                await self.grpc_call("session:grpc", stub.ReportState,
                                     watcher_pb2.ReportStateRequest(agent_id=agent, session_id=sid, state=state), metadata)  # fmt: skip
            await self.grpc_call("session:grpc", stub.EndSession,
                                 watcher_pb2.EndSessionRequest(agent_id=agent, session_id=sid), metadata)  # fmt: skip
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def rest_runtime(self, stop: asyncio.Event, n: int) -> None:
        round_ = 0
        while not stop.is_set():
            round_ += 1
            agent = self.rng.choice(self.fleet.agents)
            sid = f"soak-rest-{n}-{round_}"
            base = f"/api/v1/agents/{agent}/sessions"
            await self.rest.call("session:rest", "POST", base, body={"sessionId": sid, "state": "SESSION_STATE_BUSY"},
                                 expect="sessionId")  # fmt: skip
            for k in range(self.rng.randint(6, 20)):
                if await self.pause(stop):
                    break
                state = "SESSION_STATE_IDLE" if k % 2 == 0 else "SESSION_STATE_BUSY"
                await self.rest.call("session:rest", "POST", f"{base}/{sid}/state", body={"state": state}, expect="sessionId")
            await self.rest.call("session:rest", "DELETE", f"{base}/{sid}", expect="ended")
            if self.rng.random() < 0.3:
                await self.rest.call("session:rest", "GET", f"/api/v1/agents/{agent}/activity", expect="agentId")

    async def pause(self, stop: asyncio.Event) -> bool:
        """Wait 3-8 s; True when the run is stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), self.rng.uniform(3.0, 8.0))
        return stop.is_set()

    async def run(self, stop: asyncio.Event, runtimes: int) -> None:
        import grpc

        from gateway.v1 import watcher_pb2_grpc

        async with grpc.aio.insecure_channel(self.fleet.grpc_address("watcher")) as channel:
            stub = watcher_pb2_grpc.SessionsStub(channel)
            jobs = [self.grpc_runtime(stop, stub, n) if n % 2 else self.rest_runtime(stop, n) for n in range(runtimes)]
            await asyncio.gather(*jobs)
