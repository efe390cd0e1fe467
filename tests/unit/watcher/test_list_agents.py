"""Sessions.ListAgents in process: the scope filter, the budget lines, the dreaming summaries."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from servicer_context import Context

from gateway.auth import Authenticator
from gateway.config import load_config
from gateway.home import ensure_home, read_internal_token
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, watcher_pb2
from services.watcher.agent_budgets import BudgetCache
from services.watcher.dream_client import DreamStatusReader
from services.watcher.directive_hub import DirectiveHub
from services.watcher.lineage import Lineage
from services.watcher.servicer import Sessions
from services.watcher.sessions import SessionRegistry

KEYS = {"alfred-reader": ["alfred"], "bob-writer": ["bob"], "admin": "*", "ghost": ["zed"]}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ensure_home(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["gateway"]["api"]["keys"] = [
        {"name": name, "key": f"{name}-key", "agents": agents, "write": name in ("bob-writer", "admin")}
        for name, agents in KEYS.items()
    ]
    config["gateway"]["memory"] = {"memoryBudgetChars": 100}
    config["agents"] = [{"id": a} for a in ("alfred", "bob", "carol")]
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def servicer(home: Path, registry: SessionRegistry | None = None) -> Sessions:
    config = load_config(home)
    auth = Authenticator(config.api.keys, read_internal_token(home))

    async def dreams(agent_ids: list[str]) -> dict[str, watcher_pb2.DreamSummary]:
        return {a: watcher_pb2.DreamSummary(known=True, mode="auto", pending_proposals=len(a)) for a in agent_ids}

    registry = registry or SessionRegistry(clock=lambda: 5)
    return Sessions(lambda: (config, auth), registry, DirectiveHub(), lambda a: None, Lineage(clock=lambda: 0), dreams)


def list_agents(sessions: Sessions, metadata: tuple[tuple[str, str], ...]) -> watcher_pb2.ListAgentsResponse:
    return asyncio.run(sessions.ListAgents(watcher_pb2.ListAgentsRequest(), Context(metadata)))  # type: ignore[arg-type]


def ids(reply: watcher_pb2.ListAgentsResponse) -> list[str]:
    return [a.agent_id for a in reply.agents]


def test_a_key_sees_only_the_agents_of_its_scope(home: Path) -> None:
    sessions = servicer(home)
    assert ids(list_agents(sessions, (("x-api-key", "alfred-reader-key"),))) == ["alfred"]
    assert ids(list_agents(sessions, (("authorization", "Bearer bob-writer-key"),))) == ["bob"]
    assert ids(list_agents(sessions, (("x-api-key", "admin-key"),))) == ["alfred", "bob", "carol"]
    assert ids(list_agents(sessions, (("x-gateway-internal-token", read_internal_token(home)),))) == ["alfred", "bob", "carol"]
    assert ids(list_agents(sessions, (("x-api-key", "ghost-key"),))) == []  # its agent is not configured


@pytest.mark.parametrize("metadata", [(), (("x-api-key", "nobody"),)])
def test_an_unknown_or_missing_key_is_unauthenticated(home: Path, metadata: tuple[tuple[str, str], ...]) -> None:
    context = Context(metadata)
    with pytest.raises(grpc.aio.AbortError):
        asyncio.run(servicer(home).ListAgents(watcher_pb2.ListAgentsRequest(), context))  # type: ignore[arg-type]
    assert [code for code, _ in context.aborted] == [grpc.StatusCode.UNAUTHENTICATED]


def test_each_agent_says_whether_the_key_may_write(home: Path) -> None:
    admin = list_agents(servicer(home), (("x-api-key", "admin-key"),))
    assert all(a.writable for a in admin.agents)
    [alfred] = list_agents(servicer(home), (("x-api-key", "alfred-reader-key"),)).agents
    assert not alfred.writable
    [bob] = list_agents(servicer(home), (("x-api-key", "bob-writer-key"),)).agents
    assert bob.writable


def test_budgets_sessions_and_dreams_are_in_each_row(home: Path) -> None:
    workspace = home / "agents" / "alfred" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "MEMORY.md").write_text("# Memory\n\n" + "- a fact worth keeping\n" * 10)
    registry = SessionRegistry(clock=lambda: 1234)
    registry.register("alfred", "s-1", busy=True)
    [alfred] = list_agents(servicer(home, registry), (("x-api-key", "alfred-reader-key"),)).agents
    files = {f.name: f for f in alfred.files}
    assert list(files) == ["MEMORY.md", "USER.md", "CLAUDE.md"]
    assert files["MEMORY.md"].chars == len((workspace / "MEMORY.md").read_text()) and files["MEMORY.md"].budget == 100
    assert files["MEMORY.md"].over_budget and alfred.over_budget
    assert not files["USER.md"].present and files["CLAUDE.md"].budget == 150_000 and files["CLAUDE.md"].chars > 0
    assert [(s.session_id, s.state) for s in alfred.sessions] == [("s-1", watcher_pb2.SESSION_STATE_BUSY)]
    assert alfred.last_activity_ms == 1234
    assert alfred.dream.known and alfred.dream.pending_proposals == len("alfred")


def test_the_budget_cache_composes_again_only_after_a_change(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(home)
    agents = list(config.agents)
    calls: list[str] = []
    import services.watcher.agent_budgets as budgets

    real = budgets.budget_lines
    monkeypatch.setattr(budgets, "budget_lines", lambda agent, limits: calls.append(agent.id) or real(agent, limits))
    cache = BudgetCache()
    cache.lines(agents)
    cache.lines(agents)
    assert sorted(calls) == ["alfred", "bob", "carol"]
    memory = agents[1].workspace / "MEMORY.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("- bob grew\n")
    lines = cache.lines(agents)
    assert sorted(calls) == ["alfred", "bob", "bob", "carol"]
    assert lines["bob"][0].chars == len("- bob grew\n")


class FakeDreaming(dreaming_pb2_grpc.DreamingServicer):
    """GetDreamSummaries that takes ``delay`` seconds, knows no agent ``broken``, fails a whole call
    that asks for agent ``failing``, and records the ids of each call."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.asked: list[list[str]] = []

    async def GetDreamSummaries(self, request: dreaming_pb2.GetDreamSummariesRequest, context: grpc.aio.ServicerContext) -> dreaming_pb2.DreamSummaries:  # noqa: N802
        self.asked.append(list(request.agent_ids))
        await asyncio.sleep(self.delay)
        if "failing" in request.agent_ids:
            await context.abort(grpc.StatusCode.INTERNAL, "internal error")
        known = [a for a in request.agent_ids if a != "broken"]
        return dreaming_pb2.DreamSummaries(statuses=[status(a) for a in known],
                                           unknown={a: f"agent {a!r} not found" for a in request.agent_ids if a == "broken"})


def status(agent_id: str) -> dreaming_pb2.DreamStatus:
    return dreaming_pb2.DreamStatus(
        agent_id=agent_id, scheduled=True, mode="propose", next_run_at="2026-12-07T03:00:00Z",
        last_run=dreaming_pb2.LastRun(run_id="r1", status="applied", reason="", finished_at="2026-12-06T03:00:00Z",
                                      ops_applied=3, ops_skipped=1),
        pending=[dreaming_pb2.DreamOp(op_id="r1/1"), dreaming_pb2.DreamOp(op_id="r1/2")],
        health=dreaming_pb2.RunHealth(failures_last_7_days=2, last_failure_at="2026-12-05T03:00:00Z",
                                      last_failure_reason="the reviewer timed out", not_promoted="no candidate"),
    )


@asynccontextmanager
async def fake_dreaming(delay: float) -> AsyncIterator[tuple[str, FakeDreaming]]:
    server = grpc.aio.server()
    fake = FakeDreaming(delay)
    dreaming_pb2_grpc.add_DreamingServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", fake
    finally:
        await server.stop(None)


def test_the_agents_not_kept_are_asked_in_one_call_and_kept_for_a_moment() -> None:
    agents = [f"agent-{n}" for n in range(200)] + ["broken"]
    now = [0.0]

    async def main() -> tuple[dict[str, watcher_pb2.DreamSummary], FakeDreaming, list[list[str]]]:
        async with fake_dreaming(0.05) as (address, fake):
            reader = DreamStatusReader(address, "tok", clock=lambda: now[0])
            first = await reader.summaries(agents)
            await reader.summaries(agents)  # within the TTL: no call
            calls = len(fake.asked)
            now[0] += 1
            await reader.summaries(agents + ["agent-new"])  # only the new agent is asked
            now[0] += 5
            await reader.summaries(agents[:3])
            await reader.close()
            return first, fake, fake.asked[calls:]

    first, fake, later = asyncio.run(main())
    assert fake.asked[0] == agents and later == [["agent-new"], agents[:3]]
    one = first["agent-7"]
    assert one.known and one.scheduled and one.mode == "propose" and one.pending_proposals == 2
    assert one.last_run_id == "r1" and one.last_status == "applied" and one.last_run_at == "2026-12-06T03:00:00Z"
    assert (one.ops_applied, one.ops_skipped, one.ops_proposed) == (3, 1, 0)
    assert (one.failures_last_7_days, one.last_failure_at, one.last_failure_reason, one.not_promoted, one.promoted) == (
        2, "2026-12-05T03:00:00Z", "the reviewer timed out", "no candidate", 0)
    broken = first["broken"]
    assert not broken.known and broken.reason == "the dreaming service has no status for it: agent 'broken' not found"


def test_the_ids_are_asked_in_calls_of_at_most_the_batch_and_a_failed_call_fails_only_its_own() -> None:
    agents = [f"agent-{n}" for n in range(5)] + ["failing"]

    async def main() -> tuple[dict[str, watcher_pb2.DreamSummary], FakeDreaming]:
        async with fake_dreaming(0) as (address, fake):
            reader = DreamStatusReader(address, "tok", batch=2)
            got = await reader.summaries(agents)
            await reader.close()
            return got, fake

    got, fake = asyncio.run(main())
    assert sorted(fake.asked) == [["agent-0", "agent-1"], ["agent-2", "agent-3"], ["agent-4", "failing"]]
    assert [a for a, s in got.items() if s.known] == ["agent-0", "agent-1", "agent-2", "agent-3"]
    assert got["agent-4"].reason == got["failing"].reason == "the dreaming service answered INTERNAL: internal error"


def test_a_dreaming_service_that_is_down_leaves_the_dream_fields_empty_with_a_reason() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"

    async def main() -> dict[str, watcher_pb2.DreamSummary]:
        reader = DreamStatusReader(address, "tok")
        try:
            return await reader.summaries(["alfred", "bob"])
        finally:
            await reader.close()

    got = asyncio.run(main())
    assert set(got) == {"alfred", "bob"}
    assert all(not s.known and s.reason.startswith("the dreaming service answered UNAVAILABLE") for s in got.values())
