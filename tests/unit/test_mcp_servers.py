"""The shim's MCP servers (``gateway_mcp.streamable_http.AgentServers``): built on first use, bounded.

Driven in-process through ASGI with real SDK servers (``tools/list`` needs no KB): nothing is
built before an agent's first request, concurrent first requests build one server, the least
recently used server is closed past the cap, an idle one after its timeout, one of an agent the
config no longer has at once (``prune``) or at the next sweep, and a server with a request in
flight is closed only once that request is answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from gateway_mcp.streamable_http import AgentServers

from gateway.metrics import REGISTRY

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


def request_scope(agent_id: str) -> dict[str, Any]:
    path = f"/mcp/agents/{agent_id}"
    return {
        "type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")],
        "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 1), "client": ("127.0.0.1", 2),
    }  # fmt: skip


async def list_tools(servers: AgentServers, agent_id: str, body_sent: asyncio.Event | None = None) -> list[str]:
    """One ``tools/list`` for ``agent_id``; the tool names. ``body_sent``: the body is sent only once it is set."""
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            if body_sent is not None:
                await body_sent.wait()
            delivered = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.Event().wait()  # no disconnect: the answer comes first
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    assert await servers.handle(agent_id, (), request_scope(agent_id), receive, send)
    assert sent[0]["status"] == 200, sent[0]
    answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    return [tool["name"] for tool in answer["result"]["tools"]]


def hosted(check: Callable[[AgentServers, asyncio.Event], Awaitable[None]], **options: Any) -> None:
    """Run ``check(servers, stop)`` while ``servers`` is hosted (as the shim hosts it), then stop it."""

    async def main() -> None:
        servers = AgentServers("127.0.0.1:9", max_body_bytes=1 << 20, **options)
        stop = asyncio.Event()
        host = asyncio.create_task(servers.serve(stop))
        try:
            await check(servers, stop)
        finally:
            stop.set()
            await asyncio.wait_for(host, 10)

    asyncio.run(main())


async def until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def built_total() -> float:
    return REGISTRY.get_sample_value("gateway_mcp_servers_built_total") or 0.0


def test_nothing_is_built_before_an_agents_first_request() -> None:
    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        before = built_total()
        await asyncio.sleep(0.05)
        assert servers.held() == frozenset()
        assert "memory_search" in await list_tools(servers, "alfred")
        assert servers.held() == {"alfred"}
        assert built_total() == before + 1
        assert REGISTRY.get_sample_value("gateway_mcp_servers") == 1

    hosted(check)


def test_concurrent_first_requests_for_one_agent_build_one_server() -> None:
    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        before = built_total()
        answers = await asyncio.gather(*(list_tools(servers, "bob") for _ in range(12)))
        assert all("memory_get" in tools for tools in answers)
        assert built_total() == before + 1
        assert servers.held() == {"bob"}

    hosted(check)


def test_the_least_recently_used_server_makes_room_past_the_cap() -> None:
    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        for agent_id in ("a", "b", "a", "c"):
            await list_tools(servers, agent_id)
        assert servers.held() == {"a", "c"}  # b was used least recently
        await list_tools(servers, "b")  # built again on its next request
        assert servers.held() == {"c", "b"}

    hosted(check, max_servers=2)


def test_an_idle_server_is_closed_and_built_again_when_asked_for() -> None:
    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        await list_tools(servers, "a")
        await until(lambda: not servers.held(), "the idle server to be closed")
        before = built_total()
        assert await list_tools(servers, "a")
        assert built_total() == before + 1

    hosted(check, idle_s=0.05, sweep_s=0.02)


def test_servers_of_agents_the_config_no_longer_has_are_closed() -> None:
    configured = {"a", "b", "c"}

    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        for agent_id in sorted(configured):
            await list_tools(servers, agent_id)
        configured.discard("b")
        servers.prune()
        assert servers.held() == {"a", "c"}
        configured.discard("c")  # no prune: the next sweep finds it
        await until(lambda: servers.held() == {"a"}, "the sweep to close c's server")

    hosted(check, known=lambda agent_id: agent_id in configured, sweep_s=0.02)


def test_a_server_answering_a_request_is_closed_only_after_the_answer() -> None:
    configured = {"a", "b"}

    async def check(servers: AgentServers, _stop: asyncio.Event) -> None:
        body_sent = asyncio.Event()
        slow = asyncio.create_task(list_tools(servers, "a", body_sent))
        await until(lambda: "a" in servers.held(), "a's server to be built")
        await list_tools(servers, "b")  # past the cap of 1, but a is answering: both are held
        assert servers.held() == {"a", "b"}
        configured.discard("a")
        servers.prune()  # a is dropped, its request still answered
        assert servers.held() == {"b"}
        body_sent.set()
        assert "memory_search" in await asyncio.wait_for(slow, 10)

    hosted(check, known=lambda agent_id: agent_id in configured, max_servers=1)
