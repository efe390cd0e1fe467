"""``gateway mcp``: the real MCP stdio server, driven by the SDK's stdio client.

The KB side is ``FakeKnowledge``, a small ``gateway.v1.Knowledge`` servicer in
this process on a free port (a test seam: it answers from fixed data and records
the metadata it was sent), so these tests pin the MCP layer's contract: tool
listing, rendering, error mapping, the internal token and the recorder opt-out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import INTERNAL_TOKEN_FILE, ensure_home, read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RECORD_HEADER = "x-gateway-record-retrievals"
DEPLOYS = [f"line {n} of the deploy notes" for n in range(1, 31)]
HITS = [
    kb_pb2.SearchHit(
        path="MEMORY.md", start_line=3, end_line=5, snippet="Deploys go through the staging checklist first.",
        score=1.42, provenance="owner", importance=8, entry_hash="e1", corpus="memory",
    ),
    kb_pb2.SearchHit(
        path="memory/deploys.md", start_line=10, end_line=14, snippet="2024-05-02 staging deploy\nrolled back: migration lock",
        score=0.61, provenance="agent", importance=5, entry_hash="e2", corpus="memory",
    ),
]


class FakeKnowledge(kb_pb2_grpc.KnowledgeServicer):
    """Answers Search/Get from fixed data; records (method, request, metadata) of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, str]]] = []
        self._lock = threading.Lock()

    def _record(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        with self._lock:
            self.calls.append((method, request, metadata))

    def Search(self, request: kb_pb2.SearchRequest, context: grpc.ServicerContext) -> kb_pb2.SearchResponse:  # noqa: N802
        self._record("Search", request, context)
        hits = [] if request.query == "nothing here" else HITS[: request.limit]
        return kb_pb2.SearchResponse(hits=hits, generation=7, stale=not request.refresh, refreshed=request.refresh)

    def Get(self, request: kb_pb2.GetRequest, context: grpc.ServicerContext) -> kb_pb2.GetResponse:  # noqa: N802
        self._record("Get", request, context)
        if ".." in request.path.split("/"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "path must not contain '.', '..' or empty components")
        if request.path != "memory/deploys.md":
            context.abort(grpc.StatusCode.NOT_FOUND, f"no such memory file: {request.path}")
        start = request.from_line or 1
        chosen = DEPLOYS[start - 1 : start - 1 + (request.lines or 200)]
        return kb_pb2.GetResponse(
            path=request.path, text="\n".join(chosen), from_line=start, to_line=start + len(chosen) - 1,
            total_lines=len(DEPLOYS), truncated=False,
        )

    def metadata_of(self, method: str) -> list[dict[str, str]]:
        with self._lock:
            return [md for m, _, md in self.calls if m == method]


class Kb:
    def __init__(self) -> None:
        self.fake = FakeKnowledge()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        kb_pb2_grpc.add_KnowledgeServicer_to_server(self.fake, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None).wait()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kb() -> Iterator[Kb]:
    running = Kb()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def home(tmp_path: Path, kb: Kb) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    config = {
        "configVersion": "1.0.26",
        "gateway": {"grpc": {"host": "127.0.0.1", "kb": kb.port}},
        "agents": [{"id": "alfred"}],
    }
    (home / "config.json").write_text(json.dumps(config))
    ensure_home(home)
    return home


@asynccontextmanager
async def mcp_session(home: Path, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """``gateway mcp --agent alfred`` as a subprocess, initialized; its stderr goes to <home>/mcp.log."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "mcp", "--agent", "alfred", "--home", str(home)],
        env=env or {},
        cwd=ROOT,
    )
    with open(home / "mcp.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def text_of(result: CallToolResult) -> str:
    assert all(isinstance(block, TextContent) for block in result.content)
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.anyio
async def test_lists_both_tools_with_descriptions_a_model_can_use(home: Path) -> None:
    async with mcp_session(home) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"memory_search", "memory_get"}
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
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools.values())


@pytest.mark.anyio
async def test_memory_search_lists_hits_and_says_when_the_index_is_stale(home: Path, kb: Kb) -> None:
    async with mcp_session(home) as session:
        result = await session.call_tool("memory_search", {"query": "staging deploy", "limit": 50})
        refreshed = await session.call_tool("memory_search", {"query": "staging deploy", "refresh": True})
        empty = await session.call_tool("memory_search", {"query": "nothing here"})
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
    token = read_internal_token(home)
    for metadata in kb.fake.metadata_of("Search"):
        assert metadata[INTERNAL_TOKEN_HEADER] == token
        assert RECORD_HEADER not in metadata  # recording stays on unless the environment opts out


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
    assert len(sent) == 2
    assert all(md[RECORD_HEADER] == "0" for md in sent)


def run_mcp(home: Path, agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "mcp", "--agent", agent, "--home", str(home)],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )


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
