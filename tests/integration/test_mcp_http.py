"""MCP over streamable HTTP: the shim serves the six tools at ``/mcp/agents/{agentId}``.

Driven by the SDK's own streamable HTTP client (``streamable_http_client`` and
``ClientSession``) against the real KB and the real shim, with the README's example keys
(``suite_support``):

- the tools an HTTP session lists are exactly the stdio server's (one
  implementation behind both transports), and search and get work;
- the auth matrix, every column with the key as ``X-Api-Key`` and as
  ``Authorization: Bearer``, for a read tool (``memory_search``) and a write
  tool (``memory_shared_create``): no key, a wrong key and the internal token
  header 401; a key out of its scope 403 (whether the agent exists or not);
  an unknown agent with a ``*`` key 404; a read key in scope reads, and its
  writes (create, update, delete) are the KB's refusal as tool errors, with
  nothing written; a write key reads and writes. The status is what the shim answered (an httpx hook
  records every response), and a refused client shows the refusal's text;
- every request is checked on its own: a ``tools/call`` POSTed with no
  initialize gets the same answers, and a key removed from config.json is
  refused on its next request;
- the edges answer 4xx, never 5xx: GET/DELETE 405, other paths 404, a
  credential byte no key can hold 401; no key appears in the shim's log.
"""

from __future__ import annotations

import json
import time
from importlib import metadata
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from hardening_report import record
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, make_home, wait_until, workspace
from test_mcp import mcp_session

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token

pytestmark = pytest.mark.integration

ROUTE = "/mcp/agents/{agent}"
NOTES = ("shared", "kb", "global", "notes")
FORMS = ("x-api-key", "bearer")
REVOKED_KEY = "revoked-key-555"
KEPT = "lighthouse rota"  # a shared note the read key tries to update and delete
KEPT_TEXT = "# Lighthouse rota\n\n- Ada: week 1\n- Grace: week 2\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """KB + REST shim (the MCP host) with alfred and bob, and a few notes to find."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("mcphttp"))
    config = json.loads((home / "config.json").read_text())
    config["gateway"]["api"]["keys"].append({"name": "revoked", "key": REVOKED_KEY, "agents": ["alfred"], "write": False})
    (home / "config.json").write_text(json.dumps(config, indent=2))
    running = Suite(home, http_port, ports)
    notes = home.joinpath(*NOTES)
    notes.mkdir(parents=True)
    (notes / f"{KEPT}.md").write_text(KEPT_TEXT)
    for agent, text in (("alfred", "- Ada drinks oolong\n- staging deploys need the blue-green switch\n"),
                        ("bob", "- bob keeps the zanzibar quokka protocol\n")):
        (workspace(running, agent) / "memory").mkdir(parents=True)
        (workspace(running, agent) / "memory" / "notes.md").write_text(f"# Notes\n\n{text}")
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


def key_headers(key: str | None, form: str) -> dict[str, str]:
    if key is None:
        return {}
    return {"X-Api-Key": key} if form == "x-api-key" else {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def http_session(suite: Suite, agent: str, headers: dict[str, str], statuses: list[int] | None = None) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over streamable HTTP; ``statuses`` collects every HTTP status the shim answered."""

    async def seen(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    url = suite.base_url + ROUTE.format(agent=agent)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [seen]}) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def refusal(suite: Suite, agent: str, headers: dict[str, str], statuses: list[int]) -> str:
    """The MCPError text of a session the shim refuses at initialize (the test fails if it is not refused)."""
    refused: list[str] = []
    try:
        async with http_session(suite, agent, headers, statuses):
            raise AssertionError(f"a session for {agent} with {sorted(headers)} was initialized, not refused")
    except* MCPError as group:
        refused.extend(str(error) for error in leaves(group))
    assert refused, f"a session for {agent} with {sorted(headers)} was not refused"
    return refused[0]


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, the SDK's task groups wrap them in."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def post(suite: Suite, agent: str, headers: dict[str, str], method: str, params: dict[str, Any]) -> httpx.Response:
    """One JSON-RPC request POSTed on its own (no initialize: the transport is stateless)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(suite.base_url + ROUTE.format(agent=agent), json=body, headers={**accept, **headers}, timeout=30)


@pytest.mark.anyio
async def test_http_serves_the_stdio_servers_tools_and_they_work(suite: Suite) -> None:
    # First in the module, right after the shim answered /healthz: the SDK may still be loading
    # in its worker thread, and this session then waits for it rather than being refused.
    async with http_session(suite, "alfred", {"X-Api-Key": READER_KEY}) as session:
        listed = (await session.list_tools()).tools
        found = await session.call_tool("memory_search", {"query": "oolong", "refresh": True})
        got = await session.call_tool("memory_get", {"path": "memory/notes.md", "from_line": 3, "lines": 1})
        missing = await session.call_tool("memory_get", {"path": "memory/nope.md"})
        instructions = session.initialize_result.instructions if session.initialize_result else None
    async with mcp_session(suite.home) as stdio:
        over_stdio = [tool.model_dump() for tool in (await stdio.list_tools()).tools]
    assert [tool.name for tool in listed] == [
        "memory_search", "memory_get", "memory_shared_create", "memory_shared_get", "memory_shared_update",
        "memory_shared_delete",
    ]
    assert [tool.model_dump() for tool in listed] == over_stdio  # names, descriptions, schemas, annotations
    assert instructions is not None and instructions.startswith("Memory of agent alfred.")
    assert not found.is_error, text_of(found)
    assert "memory/notes.md:" in text_of(found) and "oolong" in text_of(found)
    assert found.structured_content is not None and found.structured_content["hits"][0]["path"] == "memory/notes.md"
    assert not got.is_error and text_of(got) == "memory/notes.md lines 3-3 of 4\n- Ada drinks oolong\n[1 more lines; continue with from_line=4]"
    assert missing.is_error and "memory/nope.md" in text_of(missing)


@pytest.mark.anyio
async def test_server_info_carries_the_package_version(suite: Suite) -> None:
    version = metadata.version("claude-gateway")
    assert version
    async with http_session(suite, "alfred", {"X-Api-Key": READER_KEY}) as session:
        info = session.server_info
    assert info is not None and (info.name, info.version) == ("claude-gateway-memory", version)
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    raw = post(suite, "alfred", {"X-Api-Key": READER_KEY}, "initialize", params)
    assert raw.status_code == 200, raw.text
    assert raw.json()["result"]["serverInfo"] == {"name": "claude-gateway-memory", "version": version}


@dataclass(frozen=True)
class Column:
    name: str
    agent: str
    key: str | None
    expect: str  # "401", "403", "404", "read" (reads; its write is a tool error) or "write" (reads and writes)


COLUMNS = (
    Column("no key", "alfred", None, "401"),
    Column("wrong key", "alfred", "not-a-configured-key", "401"),
    Column("read key, in scope", "alfred", READER_KEY, "read"),
    Column("read key, out of scope", "bob", READER_KEY, "403"),
    Column("write key (*), in scope", "alfred", ADMIN_KEY, "write"),
    Column("write key, in scope", "bob", BOB_WRITER_KEY, "write"),
    Column("write key, out of scope", "alfred", BOB_WRITER_KEY, "403"),
    Column("unknown agent, * key", "zed", ADMIN_KEY, "404"),
    Column("unknown agent, scoped key", "carol", CAROL_KEY, "403"),
)
REFUSALS = {
    "401": ("missing API key", "unknown API key"),
    "403": ("this key has no access to agent",),
    "404": ("agent 'zed' not found",),
}


@pytest.mark.anyio
async def test_auth_matrix_over_the_sdk_client(suite: Suite) -> None:
    notes = suite.home.joinpath(*NOTES)
    mismatches: list[str] = []
    answered: list[int] = []  # every HTTP status the shim answered
    cases = 0
    longest = 0.0
    for column in COLUMNS:
        for form in FORMS:
            cases += 1
            headers = key_headers(column.key, form)
            statuses: list[int] = []
            name = f"matrix {column.agent} {form} {cases}"
            start = time.perf_counter()
            if column.expect in REFUSALS:
                message = await refusal(suite, column.agent, headers, statuses)
                if statuses != [int(column.expect)] or not message.startswith(REFUSALS[column.expect]):
                    mismatches.append(f"{column.name} ({form}): {statuses} {message!r}")
                raw = [post(suite, column.agent, headers, "tools/call", {"name": tool, "arguments": args}).status_code
                       for tool, args in (("memory_search", {"query": "oolong"}),
                                          ("memory_shared_create", {"name": name, "content": "refused\n"}))]
                answered += raw
                if raw != [int(column.expect)] * 2:
                    mismatches.append(f"{column.name} ({form}), tools/call without initialize: {raw}")
            else:
                async with http_session(suite, column.agent, headers, statuses) as session:
                    read = await session.call_tool("memory_search", {"query": "notes", "refresh": True})
                    wrote = await session.call_tool(
                        "memory_shared_create", {"name": name, "content": f"# {name}\n", "confirm": True}
                    )
                    others = []
                    if column.expect == "read":
                        others = [
                            await session.call_tool("memory_shared_update", {"name": KEPT, "content": "gone\n", "confirm": True}),
                            await session.call_tool("memory_shared_delete", {"name": KEPT}),
                        ]
                if read.is_error or "memory/notes.md:" not in text_of(read):
                    mismatches.append(f"{column.name} ({form}): read {text_of(read)!r}")
                if column.expect == "write" and (wrote.is_error or not (notes / f"{name}.md").is_file()):
                    mismatches.append(f"{column.name} ({form}): write {text_of(wrote)!r}")
                if column.expect == "read" and (
                    not wrote.is_error
                    or text_of(wrote) != f"this key has no write access to agent {column.agent!r}"
                    or (notes / f"{name}.md").exists()
                ):
                    mismatches.append(f"{column.name} ({form}): the read key's write gave {text_of(wrote)!r}")
                denied = f"this key has no write access to agent {column.agent!r}"
                if any(not result.is_error or text_of(result) != denied for result in others):
                    mismatches.append(f"{column.name} ({form}): update/delete gave {[text_of(r) for r in others]!r}")
                if (notes / f"{KEPT}.md").read_text() != KEPT_TEXT:
                    mismatches.append(f"{column.name} ({form}): {KEPT!r} changed")
                if any(status >= 300 for status in statuses):
                    mismatches.append(f"{column.name} ({form}): statuses {statuses}")
            answered += statuses
            longest = max(longest, (time.perf_counter() - start) * 1000)
    internal = {INTERNAL_TOKEN_HEADER: read_internal_token(suite.home)}
    statuses = []
    message = await refusal(suite, "alfred", internal, statuses)
    if statuses != [401] or message != "missing API key: send X-Api-Key or Authorization: Bearer":
        mismatches.append(f"internal token header: {statuses} {message!r}")
    answered += statuses
    record(
        "MCP over HTTP auth matrix",
        inputs=cases + 1,
        errors_5xx=sum(1 for status in answered if status >= 500),
        longest_ms=round(longest, 1),
        notes=(f"{len(COLUMNS)} columns × {len(FORMS)} key headers, each a SDK session (initialize, memory_search, "
               "memory_shared_create; a read key also update and delete) or, when refused, the refusal and two tools/call "
               f"POSTs without initialize; plus the internal token header (401); {len(answered)} HTTP answers; "
               f"{len(mismatches)} mismatches"),
    )
    assert not mismatches, "\n".join(mismatches)


def test_each_request_is_checked_with_the_config_in_force(suite: Suite) -> None:
    search = {"name": "memory_search", "arguments": {"query": "oolong"}}
    before = post(suite, "alfred", {"X-Api-Key": REVOKED_KEY}, "tools/call", search)
    assert before.status_code == 200 and "oolong" in before.text
    path = suite.home / "config.json"
    config = json.loads(path.read_text())
    config["gateway"]["api"]["keys"] = [k for k in config["gateway"]["api"]["keys"] if k.get("key") != REVOKED_KEY]
    path.write_text(json.dumps(config, indent=2))
    wait_until(lambda: post(suite, "alfred", {"X-Api-Key": REVOKED_KEY}, "tools/call", search).status_code == 401,
               15, "the removed key to be refused")
    refused = post(suite, "alfred", {"X-Api-Key": REVOKED_KEY}, "tools/call", search)
    assert refused.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "unknown API key"}}
    assert post(suite, "alfred", {"X-Api-Key": READER_KEY}, "tools/call", search).status_code == 200


def test_edges_get_a_4xx_and_no_key_reaches_the_log(suite: Suite) -> None:
    reader = {"X-Api-Key": READER_KEY}
    url = suite.base_url + ROUTE.format(agent="alfred")
    answers = {
        "GET": httpx.get(url, headers={**reader, "Accept": "text/event-stream"}),
        "DELETE": httpx.delete(url, headers=reader),
    }
    for method, answer in answers.items():
        assert answer.status_code == 405 and answer.headers["allow"] == "POST", method
        assert "POST only" in answer.json()["error"]["message"]
    for path in ("/mcp/agents", "/mcp/agents/alfred/tools", "/mcp/"):
        answer = httpx.post(suite.base_url + path, headers=reader, json={})
        assert answer.status_code == 404 and "/mcp/agents/{agentId}" in answer.json()["error"]["message"], path
    bad_byte = post(suite, "alfred", {"X-Api-Key": "key\twith a tab"}, "tools/list", {})
    assert bad_byte.status_code == 401 and "X-Api-Key holds a control" in bad_byte.json()["error"]["message"]
    dots = httpx.post(suite.base_url + "/mcp/agents/%2e%2e", headers={"X-Api-Key": ADMIN_KEY}, json={})
    assert dots.status_code == 400
    not_json = httpx.post(url, headers={**reader, "Content-Type": "application/json",
                                        "Accept": "application/json, text/event-stream"}, content=b"{not json")
    assert not_json.status_code == 400
    listed = post(suite, "alfred", reader, "tools/list", {})
    assert listed.status_code == 200 and len(listed.json()["result"]["tools"]) == 6
    lines = suite.log_lines("http")
    mcp_lines = [line for line in lines if line.get("route") == "/mcp/agents/{agentId}"]
    assert mcp_lines and all(line["status"] < 500 for line in mcp_lines)
    assert not [line for line in lines if line.get("event") == "http_bug"]
    text = suite.log_path("http").read_text()
    token = read_internal_token(suite.home)
    for key in (READER_KEY, ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, REVOKED_KEY, token):
        assert key not in text
    assert token[:8] not in text
