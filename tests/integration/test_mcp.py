"""``gateway mcp``: the real MCP stdio server, driven by the SDK's stdio client.

The KB side is ``FakeKnowledge``, a small ``gateway.v1.Knowledge`` servicer in
this process on a free port (a test seam: it answers from fixed data and records
the metadata it was sent), so these tests pin the MCP layer's contract: tool
listing, rendering, error mapping, the internal token and the recorder opt-out.
Its shared-note RPCs keep notes in a dict with canned behaviours: a name
collision (ALREADY_EXISTS), similar notes for content mentioning "staging", the
50% line-drop warning, and a disabled vault (FAILED_PRECONDITION).
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
SHARED_HIT = kb_pb2.SearchHit(
    path="notes/staging deploy checklist.md", start_line=1, end_line=3, snippet="1. freeze merges",
    score=0.9, provenance="agent", importance=5, entry_hash="s1", corpus="shared",
)
CHECKLIST = "# Staging deploy checklist\n\n1. freeze merges\n2. run migrations\n3. flip blue-green\n4. smoke test\n"
DISABLED = "shared KB disabled for agent 'alfred' (knowledge.shared.enabled is false)"
NOTES_ROUTE = "/api/v1/agents/alfred/shared/notes"


class FakeKnowledge(kb_pb2_grpc.KnowledgeServicer):
    """Answers Search/Get from fixed data; records (method, request, metadata) of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, str]]] = []
        self._lock = threading.Lock()
        self.notes: dict[str, str] = {"staging deploy checklist": CHECKLIST}
        self.shared_enabled = True
        self.stale_after_refresh = False  # a refresh that failed leaves the index stale

    def _record(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        with self._lock:
            self.calls.append((method, request, metadata))

    def Search(self, request: kb_pb2.SearchRequest, context: grpc.ServicerContext) -> kb_pb2.SearchResponse:  # noqa: N802
        self._record("Search", request, context)
        hits = [] if request.query == "nothing here" else HITS[: request.limit]
        if request.corpus == "shared":
            hits = [SHARED_HIT]
        stale = not request.refresh or self.stale_after_refresh
        return kb_pb2.SearchResponse(hits=hits, generation=7, stale=stale, refreshed=request.refresh)

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

    def _shared(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        self._record(method, request, context)
        if not self.shared_enabled:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, DISABLED)
        if "/" in request.name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a shared note name must not contain '/' (no / \\ [ ] | # ^)")

    def CreateSharedNote(  # noqa: N802
        self, request: kb_pb2.CreateSharedNoteRequest, context: grpc.ServicerContext
    ) -> kb_pb2.CreateSharedNoteResponse:
        self._shared("CreateSharedNote", request, context)
        if request.name in self.notes:
            context.abort(  # worded for REST, as the real KB words it
                grpc.StatusCode.ALREADY_EXISTS,
                f"a shared note named {request.name!r} already exists; update it with PUT {NOTES_ROUTE}/{request.name}",
            )
        related = [
            kb_pb2.RelatedNote(name=name, snippet=text.splitlines()[0], score=0.75)
            for name, text in self.notes.items()
            if "staging" in request.content.lower() and "staging" in text.lower()
        ]
        if related and not request.confirm:
            return kb_pb2.CreateSharedNoteResponse(
                name=request.name, created=False, related=related,
                message=f'nothing was written: similar notes exist; send POST {NOTES_ROUTE} again with "confirm": true',
            )
        linked = [r.name for r in related]
        content = request.content + ("\n\nRelated: " + ", ".join(f"[[{n}]]" for n in linked) if linked else "")
        self.notes[request.name] = content
        return kb_pb2.CreateSharedNoteResponse(
            name=request.name, created=True, related=related, linked=linked, message=f"created {request.name!r}"
        )

    def GetSharedNote(  # noqa: N802
        self, request: kb_pb2.GetSharedNoteRequest, context: grpc.ServicerContext
    ) -> kb_pb2.SharedNote:
        self._shared("GetSharedNote", request, context)
        if request.name not in self.notes:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no shared note named {request.name!r}")
        content = self.notes[request.name]
        return kb_pb2.SharedNote(name=request.name, content=content, size_bytes=len(content.encode()))

    def UpdateSharedNote(  # noqa: N802
        self, request: kb_pb2.UpdateSharedNoteRequest, context: grpc.ServicerContext
    ) -> kb_pb2.UpdateSharedNoteResponse:
        self._shared("UpdateSharedNote", request, context)
        if request.name not in self.notes:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"no shared note named {request.name!r}; create it with POST {NOTES_ROUTE}"
            )
        kept = {line.strip() for line in request.content.splitlines()}
        old = [line.strip() for line in self.notes[request.name].splitlines() if line.strip()]
        dropped = sum(1 for line in old if line not in kept)
        if old and 2 * dropped >= len(old) and not request.confirm:
            warning = f"this update would drop {dropped} of the note's {len(old)} lines; send PUT {NOTES_ROUTE} again"
            return kb_pb2.UpdateSharedNoteResponse(
                name=request.name, updated=False, dropped_lines=dropped, total_lines=len(old), warning=warning,
                message=warning,
            )
        self.notes[request.name] = request.content
        return kb_pb2.UpdateSharedNoteResponse(
            name=request.name, updated=True, dropped_lines=dropped, total_lines=len(old), message="updated"
        )

    def DeleteSharedNote(  # noqa: N802
        self, request: kb_pb2.DeleteSharedNoteRequest, context: grpc.ServicerContext
    ) -> kb_pb2.DeleteSharedNoteResponse:
        self._shared("DeleteSharedNote", request, context)
        if self.notes.pop(request.name, None) is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no shared note named {request.name!r}")
        return kb_pb2.DeleteSharedNoteResponse(name=request.name, deleted=True)

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
async def mcp_session(
    home: Path, env: dict[str, str] | None = None, agent: str = "alfred"
) -> AsyncIterator[ClientSession]:
    """``gateway mcp --agent <agent>`` as a subprocess, initialized; its stderr goes to <home>/mcp.log."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway_cli.cli", "mcp", "--agent", agent, "--home", str(home)],
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


SHARED_TOOLS = ("memory_shared_create", "memory_shared_get", "memory_shared_update", "memory_shared_delete")


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


def run_mcp(home: Path, agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway_cli.cli", "mcp", "--agent", agent, "--home", str(home)],
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


@pytest.mark.anyio
async def test_shared_search_hits_say_how_to_read_the_note(home: Path) -> None:
    async with mcp_session(home) as session:
        result = await session.call_tool("memory_search", {"query": "staging", "corpus": "shared"})
    text = text_of(result)
    assert "notes/staging deploy checklist.md:1-3" in text
    assert 'memory_shared_get(name)' in text and '"staging deploy checklist"' in text
    assert "memory_get(path" not in text


@pytest.mark.anyio
async def test_memory_shared_create_creates_nudges_and_refuses_collisions(home: Path, kb: Kb) -> None:
    async with mcp_session(home) as session:
        plain = await session.call_tool("memory_shared_create", {"name": "oncall rota", "content": "Ada: week 1\n"})
        taken = await session.call_tool(
            "memory_shared_create", {"name": "staging deploy checklist", "content": "anything"}
        )
        nudged = await session.call_tool(
            "memory_shared_create", {"name": "staging deploys", "content": "Staging deploys: freeze merges first."}
        )
        written_by_nudge = "staging deploys" in kb.fake.notes
        forced = await session.call_tool(
            "memory_shared_create",
            {"name": "staging deploys", "content": "Staging deploys: freeze merges first.", "confirm": True},
        )
    assert not plain.is_error
    assert text_of(plain).startswith('Created shared note "oncall rota" (notes/oncall rota.md).')
    assert plain.structured_content is not None and plain.structured_content["created"] is True

    assert taken.is_error
    assert text_of(taken) == (
        "a shared note named 'staging deploy checklist' already exists; use memory_shared_update to change it"
    )

    assert not nudged.is_error  # held back, not failed
    text = text_of(nudged)
    assert text.startswith('Nothing was written: shared note "staging deploys" was NOT created')
    assert '1. "staging deploy checklist" (similarity 0.75)\n   # Staging deploy checklist' in text
    assert "memory_shared_update(name, content)" in text and "confirm=true" in text and "[[wikilink]]" in text
    assert nudged.structured_content is not None
    assert nudged.structured_content["created"] is False
    assert nudged.structured_content["related"] == [
        {"name": "staging deploy checklist", "score": 0.75, "snippet": "# Staging deploy checklist"}
    ]
    assert nudged.structured_content["message"] == (
        'nothing was written: 1 similar shared note(s) exist ("staging deploy checklist"). Update one with '
        "memory_shared_update, or call memory_shared_create again with confirm=true to create this note linked to them."
    )
    assert not written_by_nudge
    for result in (taken, nudged):  # the KB's REST wording is not passed on
        assert "/api/v1" not in text_of(result) and "/api/v1" not in json.dumps(result.structured_content)

    assert not forced.is_error
    assert 'Created shared note "staging deploys"' in text_of(forced)
    assert "[[staging deploy checklist]]" in text_of(forced)
    assert forced.structured_content is not None and forced.structured_content["linked"] == ["staging deploy checklist"]

    creates = [request for method, request, _ in kb.fake.calls if method == "CreateSharedNote"]
    assert [(r.agent_id, r.name, r.confirm) for r in creates] == [
        ("alfred", "oncall rota", False),
        ("alfred", "staging deploy checklist", False),
        ("alfred", "staging deploys", False),
        ("alfred", "staging deploys", True),
    ]
    token = read_internal_token(home)
    assert all(md[INTERNAL_TOKEN_HEADER] == token for md in kb.fake.metadata_of("CreateSharedNote"))


@pytest.mark.anyio
async def test_memory_shared_get_update_delete(home: Path, kb: Kb) -> None:
    name = "staging deploy checklist"
    edited = CHECKLIST + "5. announce in #deploys\n"
    async with mcp_session(home) as session:
        got = await session.call_tool("memory_shared_get", {"name": name})
        updated = await session.call_tool("memory_shared_update", {"name": name, "content": edited})
        warned = await session.call_tool("memory_shared_update", {"name": name, "content": "just one line\n"})
        after_warning = kb.fake.notes[name]
        confirmed = await session.call_tool(
            "memory_shared_update", {"name": name, "content": "just one line\n", "confirm": True}
        )
        missing = await session.call_tool("memory_shared_update", {"name": "nope", "content": "x"})
        deleted = await session.call_tool("memory_shared_delete", {"name": name})
        gone = await session.call_tool("memory_shared_get", {"name": name})
        bad = await session.call_tool("memory_shared_delete", {"name": "a/b"})

    assert not got.is_error
    header, _, body = text_of(got).partition("\n")
    assert header == f'shared note "{name}" (notes/{name}.md, 6 lines, {len(CHECKLIST)} bytes)'
    assert body == CHECKLIST
    assert got.structured_content is not None
    assert got.structured_content["content"] == CHECKLIST and got.structured_content["retired"] is False

    assert not updated.is_error and text_of(updated).startswith(f'Updated shared note "{name}"')
    assert updated.structured_content is not None and updated.structured_content["updated"] is True

    assert not warned.is_error  # held back, not failed
    text = text_of(warned)
    assert text.startswith(f'Nothing was written: shared note "{name}" was NOT updated')
    assert "drop 6 of the note's 6 non-blank lines (50% or more)" in text
    assert f'memory_shared_get("{name}")' in text and "confirm=true" in text
    assert warned.structured_content is not None
    assert warned.structured_content["updated"] is False
    assert (warned.structured_content["dropped_lines"], warned.structured_content["total_lines"]) == (6, 6)
    assert warned.structured_content["warning"] == warned.structured_content["message"] == (
        "nothing was written: this update would drop 6 of the note's 6 non-blank lines (50% or more). Edit the note "
        "rather than replacing it (memory_shared_get, then memory_shared_update with the full edited content), or "
        "call memory_shared_update again with confirm=true."
    )
    for result in (warned, missing):  # the KB's REST wording is not passed on
        assert "/api/v1" not in text_of(result) and "/api/v1" not in json.dumps(result.structured_content)
    assert after_warning == edited

    assert not confirmed.is_error and "dropping 6 of its 6 previous non-blank lines" in text_of(confirmed)
    assert missing.is_error
    assert text_of(missing) == "no shared note named 'nope'; use memory_shared_create to create it"
    assert not deleted.is_error and text_of(deleted).startswith(f'Deleted shared note "{name}"')
    assert deleted.structured_content == {"name": name, "path": f"notes/{name}.md", "deleted": True}
    assert gone.is_error and text_of(gone) == f"no shared note named {name!r}"
    assert bad.is_error and text_of(bad).startswith("a shared note name must not contain '/'")

    updates = [request for method, request, _ in kb.fake.calls if method == "UpdateSharedNote"]
    assert [(r.name, r.confirm) for r in updates][:3] == [(name, False), (name, False), (name, True)]
    assert updates[0].content == edited


@pytest.mark.anyio
async def test_disabled_shared_vault_passes_the_kb_message_through(home: Path, kb: Kb) -> None:
    kb.fake.shared_enabled = False
    async with mcp_session(home) as session:
        results = [
            await session.call_tool("memory_shared_create", {"name": "n", "content": "c"}),
            await session.call_tool("memory_shared_get", {"name": "n"}),
            await session.call_tool("memory_shared_update", {"name": "n", "content": "c"}),
            await session.call_tool("memory_shared_delete", {"name": "n"}),
        ]
    for result in results:
        assert result.is_error and text_of(result) == DISABLED
