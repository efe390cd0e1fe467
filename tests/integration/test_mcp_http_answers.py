"""MCP over streamable HTTP says what happened in a form a program reads, not only in prose.

Against the real KB and the real shim, with the SDK's client and with raw httpx:

- a shared-note write that a guard held back (similar notes on create, the line-drop guard on
  update) is a tool error (``isError``) whose structured content says ``written: false`` and
  ``needs_confirm: true``, nothing is written, and its text says how to confirm; the same call
  with ``confirm`` writes (``written: true``, with the note's name); a KB refusal of a write
  (a name clash, a missing note) says ``written: false`` too; the write tools' output schemas
  declare ``written``;
- a refused key gets what RFC 6750 asks of a server that takes bearer keys: 401 with a
  ``WWW-Authenticate: Bearer`` challenge (``error="invalid_token"`` and a description for a
  wrong key, no error for a missing one), a JSON body naming the problem; a key without access
  to the agent is 403 without a challenge (no OAuth step-up to start).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.types import CallToolResult
from suite_support import ADMIN_KEY, READER_KEY, Suite, make_home
from test_mcp_http import http_session, post, refusal, text_of

pytestmark = pytest.mark.integration

NOTES = ("shared", "kb", "global", "notes")
TIDES = (
    "# Tide tables\n\n- Harbour tide high at 06:10 on spring mornings\n- Harbour tide low at 12:25 on spring "
    "afternoons\n- The pilot boat leaves the harbour at high tide\n- Tide gauge readings go to the harbour master\n"
)
WRITE_TOOLS = ("memory_shared_create", "memory_shared_update", "memory_shared_delete")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("mcpanswers"))
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, text_of(result)
    return result.structured_content


@pytest.mark.anyio
async def test_a_write_the_guards_held_back_is_an_error_that_says_written_false(suite: Suite) -> None:
    notes = suite.home.joinpath(*NOTES)
    async with http_session(suite, "alfred", {"X-Api-Key": ADMIN_KEY}) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        first = await session.call_tool("memory_shared_create", {"name": "tide tables", "content": TIDES, "confirm": True})
        twin = await session.call_tool("memory_shared_create", {"name": "harbour tides", "content": TIDES})
        twin_written = (notes / "harbour tides.md").exists()
        forced = await session.call_tool("memory_shared_create", {"name": "harbour tides", "content": TIDES, "confirm": True})
        forced_written = (notes / "harbour tides.md").is_file()
        clash = await session.call_tool("memory_shared_create", {"name": "tide tables", "content": "again\n"})
        shrink = await session.call_tool("memory_shared_update", {"name": "tide tables", "content": "# Tide tables\n"})
        kept = (notes / "tide tables.md").read_text()
        confirmed = await session.call_tool(
            "memory_shared_update", {"name": "tide tables", "content": "# Tide tables\n", "confirm": True}
        )
        missing = await session.call_tool("memory_shared_update", {"name": "no such note", "content": "x\n"})
        deleted = await session.call_tool("memory_shared_delete", {"name": "harbour tides"})
        gone = await session.call_tool("memory_shared_delete", {"name": "harbour tides"})

    for name in WRITE_TOOLS:
        schema = tools[name].output_schema
        assert schema is not None and "written" in schema["required"], name
        assert schema["properties"]["written"]["type"] == "boolean"
    assert "needs_confirm" in (tools["memory_shared_create"].output_schema or {})["required"]

    assert not first.is_error and structured(first)["written"] is True and structured(first)["name"] == "tide tables"

    assert twin.is_error, text_of(twin)
    assert (structured(twin)["written"], structured(twin)["needs_confirm"]) == (False, True)
    assert [note["name"] for note in structured(twin)["related"]] == ["tide tables"]
    assert text_of(twin).startswith("Nothing was written") and "confirm=true" in text_of(twin)
    assert not twin_written
    assert not forced.is_error and structured(forced)["written"] is True and forced_written

    assert clash.is_error and (structured(clash)["written"], structured(clash)["needs_confirm"]) == (False, False)
    assert "use memory_shared_update" in text_of(clash)

    assert shrink.is_error, text_of(shrink)
    assert (structured(shrink)["written"], structured(shrink)["needs_confirm"]) == (False, True)
    assert text_of(shrink).startswith("Nothing was written") and "confirm=true" in text_of(shrink)
    assert kept.startswith(TIDES)  # the guard wrote nothing
    assert not confirmed.is_error and structured(confirmed)["written"] is True
    assert (notes / "tide tables.md").read_text() == "# Tide tables\n"
    assert missing.is_error and structured(missing)["written"] is False

    assert not deleted.is_error and structured(deleted) == {
        "name": "harbour tides", "path": "notes/harbour tides.md", "written": True, "deleted": True
    }
    assert gone.is_error and structured(gone)["written"] is False


def test_raw_json_rpc_shows_the_held_back_write_as_an_error(suite: Suite) -> None:
    notes = suite.home.joinpath(*NOTES)
    base = {"name": "memory_shared_create", "arguments": {"name": "ferry times", "content": TIDES.replace("Tide", "Ferry")}}
    created = post(suite, "alfred", {"X-Api-Key": ADMIN_KEY}, "tools/call", {**base, "arguments": {**base["arguments"], "confirm": True}})
    assert created.status_code == 200 and created.json()["result"]["isError"] is False, created.text
    again = {"name": "memory_shared_create", "arguments": {"name": "ferry copy", "content": TIDES.replace("Tide", "Ferry")}}
    held = post(suite, "alfred", {"X-Api-Key": ADMIN_KEY}, "tools/call", again)
    assert held.status_code == 200, held.text
    result = held.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["written"] is False and result["structuredContent"]["needs_confirm"] is True
    assert not (notes / "ferry copy.md").exists()


def challenge(answer: httpx.Response) -> str:
    return answer.headers.get("www-authenticate", "")


def test_a_refused_key_gets_a_bearer_challenge_and_a_json_body(suite: Suite) -> None:
    listing: dict[str, Any] = {}
    wrong = post(suite, "alfred", {"X-Api-Key": "not-a-configured-key"}, "tools/list", listing)
    wrong_bearer = post(suite, "alfred", {"Authorization": "Bearer not-a-configured-key"}, "tools/list", listing)
    for answer in (wrong, wrong_bearer):
        assert answer.status_code == 401
        assert challenge(answer) == 'Bearer realm="claude-gateway", error="invalid_token", error_description="unknown API key"'
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "unknown API key"}}

    missing = post(suite, "alfred", {}, "tools/list", listing)
    basic = post(suite, "alfred", {"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"}, "tools/list", listing)
    for answer in (missing, basic):  # RFC 6750 3.1: no error code when the request carries no bearer key at all
        assert answer.status_code == 401
        assert challenge(answer) == 'Bearer realm="claude-gateway"'
        assert answer.json()["error"]["message"] == "missing API key: send X-Api-Key or Authorization: Bearer"

    bad_byte = post(suite, "alfred", {"X-Api-Key": "key\twith a tab"}, "tools/list", listing)
    assert bad_byte.status_code == 401
    assert challenge(bad_byte).startswith('Bearer realm="claude-gateway", error="invalid_token", error_description="X-Api-Key holds')

    no_access = post(suite, "bob", {"X-Api-Key": READER_KEY}, "tools/list", listing)
    assert no_access.status_code == 403 and "www-authenticate" not in no_access.headers
    assert no_access.json()["error"]["message"] == "this key has no access to agent 'bob'"


@pytest.mark.anyio
async def test_the_sdk_client_shows_the_refusal_text(suite: Suite) -> None:
    statuses: list[int] = []
    message = await refusal(suite, "alfred", {"X-Api-Key": "not-a-configured-key"}, statuses)
    assert statuses == [401] and message == "unknown API key"


def test_the_rest_api_challenges_a_refused_key_and_keeps_its_error_body(suite: Suite) -> None:
    url = f"{suite.base_url}/api/v1/agents/alfred/memory:search"
    wrong = httpx.get(url, params={"query": "tide"}, headers={"X-Api-Key": "not-a-configured-key"}, timeout=10)
    assert wrong.status_code == 401
    assert challenge(wrong) == 'Bearer realm="claude-gateway", error="invalid_token", error_description="unknown API key"'
    assert wrong.json() == {"code": 16, "message": "unknown API key", "details": [], "error": "unknown API key"}
    missing = httpx.get(url, params={"query": "tide"}, timeout=10)
    assert missing.status_code == 401 and challenge(missing) == 'Bearer realm="claude-gateway"'
    assert json.loads(missing.text)["error"].startswith("missing API key")
    no_access = httpx.get(f"{suite.base_url}/api/v1/agents/bob/memory:search", params={"query": "tide"},
                          headers={"X-Api-Key": READER_KEY}, timeout=10)
    assert no_access.status_code == 403 and "www-authenticate" not in no_access.headers


def test_oauth_discovery_paths_say_the_gateway_takes_api_keys(suite: Suite) -> None:
    # Where an OAuth client (the MCP Inspector, after a 401) looks for metadata and registration.
    probes = [
        ("GET", "/.well-known/oauth-protected-resource/mcp/agents/alfred"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/openid-configuration"),
        ("POST", "/register"),
    ]
    for method, path in probes:
        answer = httpx.request(method, suite.base_url + path, json={} if method == "POST" else None, timeout=10)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["error"] == (
            f"no route for {method} {path}: this gateway has no OAuth authorization server; authenticate with an "
            "API key from config.json as X-Api-Key: KEY or Authorization: Bearer KEY"
        )
    other = httpx.get(suite.base_url + "/registered", timeout=10)
    assert other.status_code == 404 and other.json()["error"] == "no route for GET /registered"
