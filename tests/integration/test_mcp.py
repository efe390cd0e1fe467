"""``gateway mcp``: the real MCP stdio server, driven by the SDK's stdio client.

The KB side is ``mcp_support.FakeKnowledge`` on a free port (a test seam), so
these tests pin the MCP layer's contract: tool listing, rendering, error
mapping, the internal token and the recorder opt-out. The shared-note tools are
in ``test_mcp_shared_tools.py``.
"""

from __future__ import annotations

from importlib.metadata import version as installed_version
from pathlib import Path

import pytest

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import INTERNAL_TOKEN_FILE, read_internal_token
from mcp_support import (  # noqa: F401 - anyio_backend, kb and home are pytest fixtures, used by name
    DEPLOYS,
    Kb,
    RECORD_HEADER,
    SHARED_TOOLS,
    anyio_backend,
    home,
    kb,
    mcp_session,
    run_mcp,
    text_of,
)

pytestmark = pytest.mark.integration


@pytest.mark.anyio
async def test_lists_all_six_tools_with_descriptions_a_model_can_use(home: Path) -> None:
    async with mcp_session(home) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"memory_search", "memory_get", *SHARED_TOOLS}
    search = tools["memory_search"].description or ""
    for fact in ('"memory"', '"shared"', '"all"', "keywords", "AND/OR/NOT", "at most 20", "memory_get", "refresh"):
        assert fact in search, fact
    get = tools["memory_get"].description or ""
    for fact in ("MEMORY.md", "USER.md", "memory/", "exactly as memory_search returns", "200", "lines a-b of N"):
        assert fact in get, fact
    corpus = tools["memory_search"].input_schema["properties"]["corpus"]
    assert corpus["enum"] == ["memory", "shared", "all"] and corpus["default"] == "memory"
    assert tools["memory_search"].input_schema["properties"]["limit"]["default"] == 6
    assert tools["memory_get"].input_schema["properties"]["lines"]["default"] == 200
    assert "memory_shared_get" in search and "memory_shared_get" in get

    create = tools["memory_shared_create"].description or ""
    for fact in (
        "memory_shared_update", "similar", "NOTHING", "confirm=true", "[[wikilinks]]", "no leading", "120",
        "stale__", "100 KB", "any agent", "notes/<name>.md",
    ):
        assert fact in create, fact
    shared_get = tools["memory_shared_get"].description or ""
    for fact in ("full current content", "snippets", 'without "notes/"', '".md"', "memory_shared_update"):
        assert fact in shared_get, fact
    update = tools["memory_shared_update"].description or ""
    for fact in ("FULL content", "memory_shared_get", "memory_shared_create", "50%", "NOTHING", "confirm=true"):
        assert fact in update, fact
    delete = tools["memory_shared_delete"].description or ""
    for fact in ("every agent", "cannot be undone", "memory_shared_update"):
        assert fact in delete, fact
    for name in ("memory_shared_create", "memory_shared_update"):
        schema = tools[name].input_schema
        assert set(schema["required"]) == {"name", "content"}
        assert schema["properties"]["confirm"]["default"] is False
    assert tools["memory_shared_get"].input_schema["required"] == ["name"]
    assert tools["memory_shared_delete"].input_schema["required"] == ["name"]

    def hints(name: str) -> tuple[bool | None, bool | None]:
        annotations = tools[name].annotations
        assert annotations is not None
        return annotations.read_only_hint, annotations.destructive_hint

    assert all(hints(name)[0] for name in ("memory_search", "memory_get", "memory_shared_get"))
    assert hints("memory_shared_create") == (False, False)
    assert hints("memory_shared_update") == (False, True) and hints("memory_shared_delete") == (False, True)


@pytest.mark.anyio
async def test_server_info_carries_the_package_version(home: Path) -> None:
    async with mcp_session(home) as session:
        info = session.server_info
        instructions = session.initialize_result.instructions if session.initialize_result else None
    assert info is not None and info.name == "claude-gateway-memory"
    assert info.version == installed_version("claude-gateway") and info.version
    assert instructions is not None and instructions.startswith("Memory of agent alfred. Your always-loaded memory")


@pytest.mark.anyio
async def test_memory_search_lists_hits_and_says_when_the_index_is_stale(home: Path, kb: Kb) -> None:
    kb.fake.stale_after_refresh = True  # still stale after the tool's own refresh: it says so
    try:
        async with mcp_session(home) as session:
            result = await session.call_tool("memory_search", {"query": "staging deploy", "limit": 50})
            kb.fake.stale_after_refresh = False
            refreshed = await session.call_tool("memory_search", {"query": "staging deploy", "refresh": True})
            empty = await session.call_tool("memory_search", {"query": "nothing here"})
    finally:
        kb.fake.stale_after_refresh = False
    assert not result.is_error
    text = text_of(result)
    assert "MEMORY.md:3-5 (score 1.42, owner, importance 8)" in text
    assert "memory/deploys.md:10-14 (score 0.61, agent, importance 5)" in text
    assert "   2024-05-02 staging deploy\n   rolled back: migration lock" in text
    assert "may be stale" in text and "refresh=true" in text
    assert result.structured_content is not None
    assert [h["path"] for h in result.structured_content["hits"]] == ["MEMORY.md", "memory/deploys.md"]
    assert result.structured_content["stale"] is True and result.structured_content["generation"] == 7
    assert "stale" not in text_of(refreshed) and "refreshed" in text_of(refreshed)
    assert not empty.is_error and "No hits" in text_of(empty)

    request = kb.fake.calls[0][1]
    assert (request.agent_id, request.query, request.corpus, request.limit, request.refresh) == (
        "alfred", "staging deploy", "memory", 20, False,
    )
    assert kb.fake.calls[1][1].refresh  # the stale answer was asked again with refresh
    token = read_internal_token(home)
    for metadata in kb.fake.metadata_of("Search"):
        assert metadata[INTERNAL_TOKEN_HEADER] == token
        assert RECORD_HEADER not in metadata  # recording stays on unless the environment opts out


@pytest.mark.anyio
async def test_memory_search_refreshes_first_when_the_answer_would_be_stale(home: Path, kb: Kb) -> None:
    """The KB says ``stale`` while it is still indexing a change: the tool asks again with
    ``refresh`` (which waits for it) instead of answering without what the agent just wrote."""
    async with mcp_session(home) as session:
        result = await session.call_tool("memory_search", {"query": "staging deploy"})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["stale"] is False and result.structured_content["refreshed"] is True
    assert "may be stale" not in text_of(result) and "refreshed" in text_of(result)
    assert [call[1].refresh for call in kb.fake.calls if call[0] == "Search"] == [False, True]


@pytest.mark.anyio
async def test_memory_get_returns_the_exact_excerpt_under_a_header(home: Path, kb: Kb) -> None:
    async with mcp_session(home) as session:
        result = await session.call_tool("memory_get", {"path": "memory/deploys.md", "from_line": 10, "lines": 5})
    assert not result.is_error
    lines = text_of(result).splitlines()
    assert lines[0] == "memory/deploys.md lines 10-14 of 30"
    assert lines[1:6] == DEPLOYS[9:14]
    assert "from_line=15" in lines[-1]
    assert result.structured_content is not None and result.structured_content["to_line"] == 14
    request = kb.fake.calls[0][1]
    assert (request.agent_id, request.path, request.from_line, request.lines) == ("alfred", "memory/deploys.md", 10, 5)
    assert kb.fake.metadata_of("Get")[0][INTERNAL_TOKEN_HEADER] == read_internal_token(home)


@pytest.mark.anyio
async def test_kb_errors_become_tool_errors_with_the_kb_message(home: Path, kb: Kb) -> None:
    async with mcp_session(home) as session:
        bad = await session.call_tool("memory_get", {"path": "memory/../SOUL.md"})
        missing = await session.call_tool("memory_get", {"path": "memory/nope.md"})
        kb.stop()
        down = await session.call_tool("memory_search", {"query": "deploy"})
    assert bad.is_error and text_of(bad) == "path must not contain '.', '..' or empty components"
    assert missing.is_error and text_of(missing) == "no such memory file: memory/nope.md"
    assert down.is_error and "the KB service is not running" in text_of(down)
    for result in (bad, missing, down):
        assert "Traceback" not in text_of(result)


@pytest.mark.anyio
async def test_record_retrievals_opt_out_reaches_the_kb(home: Path, kb: Kb) -> None:
    async with mcp_session(home, {"GATEWAY_RECORD_RETRIEVALS": "0"}) as session:
        await session.call_tool("memory_search", {"query": "deploy"})
        await session.call_tool("memory_get", {"path": "memory/deploys.md"})
    sent = kb.fake.metadata_of("Search") + kb.fake.metadata_of("Get")
    assert len(sent) == 3  # the fake answers stale: the search is asked again with refresh
    assert all(md[RECORD_HEADER] == "0" for md in sent)


def test_unknown_agent_exits_2_with_one_line_before_serving(home: Path) -> None:
    done = run_mcp(home, "nobody")
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nobody'" in lines[0] and "alfred" in lines[0]


def test_missing_internal_token_exits_2_with_one_line(home: Path) -> None:
    (home / INTERNAL_TOKEN_FILE).unlink()
    done = run_mcp(home, "alfred")
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and INTERNAL_TOKEN_FILE in lines[0]
