"""The shim serves MCP from a child process it starts at an MCP request and stops when idle.

The real shim (``gateway serve http``) in front of a Knowledge servicer in the test process
(``mcp_support.FakeKnowledge``, whose search for ``HOLD`` waits until the test lets it go, so a
request can be kept in progress), driven by the SDK's streamable HTTP client and raw POSTs:

- no child runs until an MCP request the shim lets through; then the tools work through it
  (search, get, shared notes), its log lines are the shim's, and the SDK is mapped in the child,
  never in the shim;
- refusals (401, 403, 404, 413) are the shim's: no child is started and the KB is never called;
- requests in progress together are answered each on its own (one held by the KB does not hold
  the others);
- with ``gateway.api.mcpIdleSeconds`` 2 the child exits once idle and is reaped, and the next
  request starts a new one and is answered; a live edit of the idle time applies at the next idle
  check, without a restart;
- a child killed with SIGKILL while a request is in progress: that request is answered 503 (never
  a hang or a 500), the child is reaped, the next request starts a new one;
- the shim's SIGTERM stops the child with it; a shim killed with SIGKILL leaves no child running.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from mcp_support import CHECKLIST, FakeKnowledge
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite, make_home, wait_until
from test_mcp_http import http_session, post, text_of

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

ADMIN = {"X-Api-Key": ADMIN_KEY}
HOLD = "hold this search"
CHILD_MODULE = b"gateway_mcp.child"
SDK_LIBRARY = "pydantic_core"  # pydantic's compiled core: mapped once the SDK is imported


class HeldKnowledge(FakeKnowledge):
    """FakeKnowledge whose Search for ``HOLD`` waits for ``release`` (``held`` says it arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = threading.Event()
        self.release = threading.Event()

    def Search(self, request: kb_pb2.SearchRequest, context: grpc.ServicerContext) -> kb_pb2.SearchResponse:  # noqa: N802
        if request.query == HOLD:
            self.held.set()
            self.release.wait(30)
        return super().Search(request, context)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kb() -> Iterator[HeldKnowledge]:
    fake = HeldKnowledge()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    kb_pb2_grpc.add_KnowledgeServicer_to_server(fake, server)
    fake.port = server.add_insecure_port("127.0.0.1:0")  # type: ignore[attr-defined]
    server.start()
    try:
        yield fake
    finally:
        fake.release.set()
        server.stop(grace=None).wait()


def start_shim(tmp: Path, kb: HeldKnowledge, idle_seconds: int | None = None) -> Suite:
    """The shim alone, its KB the test's (on TCP), ``mcpIdleSeconds`` as given (else the default)."""
    home, ports, http_port = make_home(tmp)
    config = json.loads((home / "config.json").read_text())
    config["gateway"]["grpc"].update(kb=kb.port, transport="tcp")  # type: ignore[attr-defined]
    if idle_seconds is not None:
        config["gateway"]["api"]["mcpIdleSeconds"] = idle_seconds
    (home / "config.json").write_text(json.dumps(config, indent=2))
    suite = Suite(home, http_port, {**ports, "kb": kb.port})  # type: ignore[attr-defined]
    suite.start("http")
    return suite


@pytest.fixture
def shim(tmp_path: Path, kb: HeldKnowledge) -> Iterator[Suite]:
    suite = start_shim(tmp_path, kb)
    try:
        yield suite
    finally:
        suite.stop_all()


@pytest.fixture
def idle_shim(tmp_path: Path, kb: HeldKnowledge) -> Iterator[Suite]:
    suite = start_shim(tmp_path, kb, idle_seconds=2)
    try:
        yield suite
    finally:
        suite.stop_all()


def shim_pid(suite: Suite) -> int:
    return suite.procs["http"].pid


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (state first, then the parent's pid); [] when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return []


def mcp_children(parent: int) -> list[int]:
    """Every child process of ``parent``, zombies and exiting ones too (the shim starts no other)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and stat_fields(int(entry.name))[1:2] == [str(parent)]:
            found.append(int(entry.name))
    return found


def the_child(suite: Suite) -> int:
    children = mcp_children(shim_pid(suite))
    assert len(children) == 1, f"expected one MCP child of the shim, found {children}"
    assert CHILD_MODULE in Path(f"/proc/{children[0]}/cmdline").read_bytes()
    return children[0]


def exited(pid: int) -> bool:
    """Gone, or a zombie of a parent that is not the shim (init's to reap once the shim died)."""
    return stat_fields(pid)[:1] in ([], ["Z"])


def maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def events(suite: Suite, event: str) -> list[dict[str, Any]]:
    return [line for line in suite.log_lines("http") if line.get("event") == event]


def tools_list(suite: Suite, headers: dict[str, str] = ADMIN, agent: str = "alfred") -> httpx.Response:
    return post(suite, agent, headers, "tools/list", {})


def held_search(suite: Suite) -> httpx.Response:
    return post(suite, "alfred", ADMIN, "tools/call", {"name": "memory_search", "arguments": {"query": HOLD}})


@pytest.mark.anyio
async def test_the_child_starts_at_the_first_mcp_request_and_serves_the_tools(shim: Suite, kb: HeldKnowledge) -> None:
    health = httpx.get(f"{shim.base_url}/healthz", timeout=5).json()  # degraded: no service stands behind it
    assert set(health["backends"]) == {"file_api", "watcher", "kb", "dreaming"}, health
    assert mcp_children(shim_pid(shim)) == []  # the shim started, answered REST: no child yet
    async with http_session(shim, "alfred", ADMIN) as session:
        child = the_child(shim)
        found = await session.call_tool("memory_search", {"query": "staging", "refresh": True})
        got = await session.call_tool("memory_get", {"path": "memory/deploys.md", "from_line": 2, "lines": 1})
        created = await session.call_tool("memory_shared_create", {"name": "pager rota", "content": "- Ada: week 1\n"})
        shared = await session.call_tool("memory_shared_get", {"name": "staging deploy checklist"})
    assert not found.is_error and "MEMORY.md:3" in text_of(found), text_of(found)
    assert not got.is_error and "line 2 of the deploy notes" in text_of(got), text_of(got)
    assert not created.is_error and kb.notes["pager rota"] == "- Ada: week 1\n", text_of(created)
    assert not shared.is_error and CHECKLIST.strip().splitlines()[0] in text_of(shared), text_of(shared)
    assert mcp_children(shim_pid(shim)) == [child]  # every request went to the one child
    assert SDK_LIBRARY in maps(child) and SDK_LIBRARY not in maps(shim_pid(shim))
    started = events(shim, "mcp_child_started")
    assert [line["pid"] for line in started] == [child] and started[0]["service"] == "http"
    ready = events(shim, "mcp_tools_ready")  # the child's own line, in the shim's log, as the shim's service
    assert len(ready) == 1 and ready[0]["service"] == "http", ready
    # Every tool call presented the request's key to the KB (the child passed the checked credentials on).
    assert {md.get("x-api-key") for md in kb.metadata_of("Search") + kb.metadata_of("Get")} == {ADMIN_KEY}


def test_refusals_are_the_shims_and_start_no_child(shim: Suite, kb: HeldKnowledge) -> None:
    answers = {
        "no key": tools_list(shim, {}),
        "out of scope": tools_list(shim, {"X-Api-Key": READER_KEY}, agent="bob"),
        "other agent's key": tools_list(shim, {"X-Api-Key": BOB_WRITER_KEY}),
        "unknown agent": tools_list(shim, ADMIN, agent="zed"),
    }
    too_large = httpx.post(f"{shim.base_url}/mcp/agents/alfred", content=b"x" * (8 * 1024 * 1024),
                           headers={**ADMIN, "Content-Type": "application/json"}, timeout=30)
    assert {what: a.status_code for what, a in answers.items()} == {
        "no key": 401, "out of scope": 403, "other agent's key": 403, "unknown agent": 404}
    assert all(a.json()["error"]["code"] == -32600 for a in answers.values())
    assert too_large.status_code == 413 and "request body is larger than" in too_large.json()["error"]["message"]
    assert mcp_children(shim_pid(shim)) == [] and events(shim, "mcp_child_started") == []
    assert kb.calls == []


def test_requests_in_progress_together_are_answered_each_on_its_own(shim: Suite, kb: HeldKnowledge) -> None:
    with ThreadPoolExecutor(9) as pool:
        held = pool.submit(held_search, shim)
        wait_until(kb.held.is_set, 30, "the held search to reach the KB")
        others = list(pool.map(lambda _: tools_list(shim), range(8)))
        assert [a.status_code for a in others] == [200] * 8, [a.text[:200] for a in others]
        assert all("memory_search" in a.text for a in others)
        assert not held.done()  # still held by the KB, while the others were answered
        kb.release.set()
        answer = held.result(timeout=30)
    assert answer.status_code == 200 and "MEMORY.md:3" in answer.text, answer.text
    assert len(mcp_children(shim_pid(shim))) == 1


def test_an_idle_child_exits_and_the_next_request_starts_another(idle_shim: Suite) -> None:
    assert tools_list(idle_shim).status_code == 200
    first = the_child(idle_shim)
    wait_until(lambda: mcp_children(shim_pid(idle_shim)) == [], 30, "the idle child to exit and be reaped")
    assert exited(first)
    stopped = events(idle_shim, "mcp_child_stopped")
    assert [(line["pid"], line["reason"], line["code"]) for line in stopped] == [(first, "idle", 0)]
    answer = tools_list(idle_shim)
    assert answer.status_code == 200 and "memory_search" in answer.text, answer.text
    second = the_child(idle_shim)
    assert second != first
    assert [line["pid"] for line in events(idle_shim, "mcp_child_started")] == [first, second]


def test_a_child_killed_mid_request_fails_it_with_503_and_the_next_request_restarts_it(
    shim: Suite, kb: HeldKnowledge
) -> None:
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(held_search, shim)
        wait_until(kb.held.is_set, 30, "the held search to reach the KB")
        child = the_child(shim)
        os.kill(child, signal.SIGKILL)
        answer = held.result(timeout=30)
    kb.release.set()
    assert answer.status_code == 503, answer.text
    assert "MCP child process exited" in answer.json()["error"]["message"], answer.text
    wait_until(lambda: mcp_children(shim_pid(shim)) == [], 15, "the killed child to be reaped")
    exits = events(shim, "mcp_child_exited")
    assert [(line["pid"], line["code"]) for line in exits] == [(child, -signal.SIGKILL)]
    again = tools_list(shim)
    assert again.status_code == 200 and "memory_search" in again.text, again.text
    assert the_child(shim) != child


def test_the_shims_stop_stops_its_child(shim: Suite) -> None:
    assert tools_list(shim).status_code == 200
    child = the_child(shim)
    assert shim.stop("http") == 0
    assert exited(child)  # the shim waited for it and reaped it before exiting
    stopped = events(shim, "mcp_child_stopped")
    assert [(line["pid"], line["reason"], line["code"]) for line in stopped] == [(child, "shutdown", 0)]


def test_a_shim_killed_outright_leaves_no_child_running(shim: Suite) -> None:
    assert tools_list(shim).status_code == 200
    child = the_child(shim)
    os.kill(shim_pid(shim), signal.SIGKILL)
    shim.procs.pop("http").wait(timeout=15)
    wait_until(lambda: exited(child), 15, "the MCP child to exit after its shim was killed")


def test_a_live_edit_of_the_idle_time_applies_at_the_next_idle_check(shim: Suite) -> None:
    assert tools_list(shim).status_code == 200  # the default idle time: 120 s
    child = the_child(shim)
    path = shim.home / "config.json"
    config = json.loads(path.read_text())
    config["gateway"]["api"]["mcpIdleSeconds"] = 1
    path.write_text(json.dumps(config, indent=2))
    # The next idle check is at most CHECK_CAP_S (10 s) after the request; it reads the new time.
    wait_until(lambda: mcp_children(shim_pid(shim)) == [], 30, "the child to stop after the edit")
    assert [(line["pid"], line["reason"]) for line in events(shim, "mcp_child_stopped")] == [(child, "idle")]
