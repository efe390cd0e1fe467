"""The MCP stdio tests' seams: a fake Knowledge servicer on a free port, a home pointing at it, and an SDK session.

``FakeKnowledge`` is a small ``gateway.v1.Knowledge`` servicer in the test
process (it answers from fixed data and records the metadata it was sent). Its
shared-note RPCs keep notes in a dict with canned behaviours: a name collision
(ALREADY_EXISTS), similar notes for content mentioning "staging", the 50%
line-drop warning, and a disabled vault (FAILED_PRECONDITION).
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

from gateway.home import ensure_home
from gateway.v1 import kb_pb2, kb_pb2_grpc

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
        "gateway": {"grpc": {"host": "127.0.0.1", "kb": kb.port, "transport": "tcp"}},  # the fake KB is on TCP alone
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


def run_mcp(home: Path, agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway_cli.cli", "mcp", "--agent", agent, "--home", str(home)],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )
