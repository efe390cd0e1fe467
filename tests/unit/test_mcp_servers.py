"""The shim's MCP host: one server for every agent (``gateway_mcp.streamable_http.McpHost``).

Driven in-process through the shim's mount (``gateway_http.mcp_mount.McpMount``, made as the shim
makes it, with ``gateway_cli.cli``'s loader) over ASGI, with the real SDK (``initialize`` and
``tools/list`` need no KB): requests for hundreds of distinct agents build one MCP server in all,
the ``initialize`` answer names the agent of each request, an agent added to the config in force
is served and a removed one refused, and once the shim stops a request is answered 503.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gateway_mcp.server
from gateway.auth import Authenticator
from gateway.config import Config, load_config
from gateway_cli.serve import mcp_servers
from gateway_http.mcp_mount import McpMount

KEY = "mcp-host-test-key-0123"
AGENTS = [f"a{n:04d}" for n in range(300)]


def write_config(home: Path, agents: list[str]) -> tuple[Config, Authenticator]:
    """config.json with ``agents`` and one write key for every agent; the config and its authenticator."""
    raw = {
        "configVersion": "1.0.26",
        "gateway": {"api": {"keys": [{"name": "admin", "keySha256": hashlib.sha256(KEY.encode()).hexdigest(),
                                      "agents": "*", "write": True}]}},
        "agents": [{"id": agent} for agent in agents],
    }
    (home / "config.json").write_text(json.dumps(raw))
    config = load_config(home)
    return config, Authenticator(config.api.keys, None)


class Shim:
    """The mount as the shim runs it, on a config the test can change (``configure``)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.state = write_config(home, AGENTS)
        self.mount = McpMount(lambda: self.state, "127.0.0.1:9", load=mcp_servers, max_body_bytes=1 << 20)

    def configure(self, agents: list[str]) -> None:
        self.state = write_config(self.home, agents)

    async def post(self, agent_id: str, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One JSON-RPC request for ``agent_id`` (no initialize first: the transport is stateless)."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        path = f"/mcp/agents/{agent_id}"
        scope = {
            "type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 1),
            "client": ("127.0.0.1", 2),
            "headers": [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream"),
                        (b"x-api-key", KEY.encode())],
        }  # fmt: skip
        sent: list[dict[str, Any]] = []
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # no disconnect: the answer comes first
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.mount(scope, receive, send)
        return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


@pytest.fixture
def servers_built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every MCP server ``build_server`` makes, by name, from now on."""
    built: list[str] = []
    real = gateway_mcp.server.MCPServer

    def counted(*args: Any, **kwargs: Any) -> Any:
        server = real(*args, **kwargs)
        built.append(server.name)
        return server

    monkeypatch.setattr(gateway_mcp.server, "MCPServer", counted)
    yield built


def running(shim: Shim, check: Callable[[], Awaitable[None]]) -> None:
    """Run ``check()`` while the mount serves (as the shim's background runs it), then stop it."""

    async def main() -> None:
        stop = asyncio.Event()
        host = asyncio.create_task(shim.mount.serve(stop))
        try:
            await check()
        finally:
            stop.set()
            await asyncio.wait_for(host, 10)

    asyncio.run(main())


def test_requests_for_many_agents_are_served_by_one_server(tmp_path: Path, servers_built: list[str]) -> None:
    shim = Shim(tmp_path)

    async def check() -> None:
        for agent_id in AGENTS:
            status, answer = await shim.post(agent_id, "tools/list", {})
            assert status == 200, answer
            assert "memory_search" in [tool["name"] for tool in answer["result"]["tools"]]
        answers = await asyncio.gather(*(shim.post(agent_id, "tools/list", {}) for agent_id in AGENTS[:40]))
        assert [status for status, _ in answers] == [200] * 40
        assert servers_built == ["claude-gateway-memory"]  # one, for all 300 agents

    running(shim, check)


def test_the_initialize_answer_names_the_requests_agent(tmp_path: Path) -> None:
    shim = Shim(tmp_path)

    async def check() -> None:
        for agent_id in ("a0007", "a0123", "a0007"):
            status, answer = await shim.post(agent_id, "initialize", INITIALIZE)
            assert status == 200, answer
            assert answer["result"]["instructions"].startswith(f"Memory of agent {agent_id}. Your always-loaded"), answer
            assert answer["result"]["serverInfo"]["name"] == "claude-gateway-memory"

    running(shim, check)


def test_the_config_in_force_decides_which_agents_are_served(tmp_path: Path, servers_built: list[str]) -> None:
    shim = Shim(tmp_path)

    async def check() -> None:
        assert (await shim.post("a0001", "tools/list", {}))[0] == 200
        status, answer = await shim.post("newcomer", "tools/list", {})
        assert status == 404 and answer["error"]["message"].startswith("agent 'newcomer' not found"), answer
        shim.configure([*AGENTS[2:], "newcomer"])  # a0000 and a0001 removed, newcomer added
        status, answer = await shim.post("newcomer", "initialize", INITIALIZE)
        assert status == 200 and answer["result"]["instructions"].startswith("Memory of agent newcomer."), answer
        status, answer = await shim.post("a0001", "tools/list", {})
        assert status == 404 and answer["error"]["message"].startswith("agent 'a0001' not found"), answer
        assert (await shim.post("a0002", "tools/list", {}))[0] == 200
        assert servers_built == ["claude-gateway-memory"]

    running(shim, check)


def test_a_request_after_the_shim_stopped_is_answered_503(tmp_path: Path) -> None:
    shim = Shim(tmp_path)

    async def main() -> None:
        stop = asyncio.Event()
        host = asyncio.create_task(shim.mount.serve(stop))
        assert (await shim.post("a0003", "tools/list", {}))[0] == 200
        stop.set()
        await asyncio.wait_for(host, 10)
        status, answer = await shim.post("a0003", "tools/list", {})
        assert status == 503 and "not being served right now" in answer["error"]["message"], answer

    asyncio.run(main())
