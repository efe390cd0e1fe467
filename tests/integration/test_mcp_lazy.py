"""The shim with 1,000 agents: one MCP server serves them all, and the config in force decides who is served.

The real KB and shim on a home with 1,000 configured agents (``a0000`` … ``a0999``):

- the SDK is loaded at the first MCP request, not before (in the shim's MCP child, started then:
  ``gateway_http.mcp_child``), which makes its one MCP server then (one ``mcp_tools_ready`` line),
  and requests for hundreds of distinct agents build nothing more (no second line, no
  per-agent ``mcp_server_built`` line, no ``gateway_mcp_*`` metric counting servers);
- through the SDK's own client, each agent's session acts for the agent in its URL: its
  ``initialize`` instructions name it and its ``memory_search`` finds its own notes, not
  another agent's;
- concurrent requests for many agents all answer 200;
- an agent removed by a live edit of config.json is no longer served (404 for a ``*`` key),
  an agent added by the same edit is served, the others are untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from suite_support import ADMIN_KEY, Suite, make_home, wait_until
from test_mcp_http import http_session, post, text_of

pytestmark = pytest.mark.integration

AGENTS = [f"a{n:04d}" for n in range(1000)]
ADMIN = {"X-Api-Key": ADMIN_KEY}
NOTES = {"a0001": ("harbour", "the pilot boat leaves at six"), "a0002": ("orchard", "the quince trees flower late")}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """KB + shim with 1,000 agents; a0001 and a0002 each have a note to find."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("mcplazy"), agents=[{"id": a} for a in AGENTS])
    running = Suite(home, http_port, ports)
    for agent, (name, fact) in NOTES.items():
        notes = home / "agents" / agent / "workspace" / "memory"
        notes.mkdir(parents=True)
        (notes / f"{name}.md").write_text(f"# {name.title()}\n\n- {fact}\n")
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


def events(suite: Suite, event: str) -> list[dict[str, Any]]:
    return [line for line in suite.log_lines("http") if line.get("event") == event]


def mcp_metrics(suite: Suite) -> dict[str, float]:
    """The shim's ``gateway_mcp_*`` samples."""
    text = httpx.get(suite.metrics_url("http"), timeout=5).text
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("gateway_mcp_")}


def list_tools(suite: Suite, agent: str) -> httpx.Response:
    return post(suite, agent, ADMIN, "tools/list", {})


def test_one_server_serves_hundreds_of_distinct_agents(suite: Suite) -> None:
    assert events(suite, "mcp_tools_ready") == []  # no MCP request yet: the SDK is not loaded
    for agent in AGENTS[100:400]:  # the first one loads it
        answer = list_tools(suite, agent)
        assert answer.status_code == 200 and "memory_search" in answer.text, (agent, answer.text[:200])
    assert len(events(suite, "mcp_tools_ready")) == 1
    assert events(suite, "mcp_server_built") == []
    assert mcp_metrics(suite) == {}


@pytest.mark.anyio
async def test_each_agents_session_acts_for_the_agent_in_its_url(suite: Suite) -> None:
    for agent, (name, fact) in NOTES.items():
        other_name, other_fact = next(note for a, note in NOTES.items() if a != agent)
        async with http_session(suite, agent, ADMIN) as session:
            instructions = session.initialize_result.instructions if session.initialize_result else None
            own = await session.call_tool("memory_search", {"query": fact, "refresh": True})
            others = await session.call_tool("memory_search", {"query": other_fact, "refresh": True})
        assert instructions is not None and instructions.startswith(f"Memory of agent {agent}. "), instructions
        assert not own.is_error and f"memory/{name}.md:" in text_of(own), text_of(own)
        assert not others.is_error and f"memory/{other_name}.md" not in text_of(others), text_of(others)
    assert len(events(suite, "mcp_tools_ready")) == 1


def test_concurrent_requests_for_many_agents_are_all_answered(suite: Suite) -> None:
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda agent: list_tools(suite, agent), AGENTS[500:564]))
    assert [a.status_code for a in answers] == [200] * 64, [a.text[:200] for a in answers if a.status_code != 200]
    assert all("memory_search" in a.text for a in answers)


def test_the_config_in_force_decides_which_agents_are_served(suite: Suite) -> None:
    for agent in ("a0998", "a0999"):
        assert list_tools(suite, agent).status_code == 200
    assert list_tools(suite, "newcomer").status_code == 404
    path = suite.home / "config.json"
    config = json.loads(path.read_text())
    config["agents"] = [a for a in config["agents"] if a["id"] != "a0999"] + [{"id": "newcomer"}]
    path.write_text(json.dumps(config, indent=2))
    wait_until(lambda: list_tools(suite, "a0999").status_code == 404, 15, "the removed agent to be refused")
    assert list_tools(suite, "newcomer").status_code == 200  # an agent added by the same edit is served
    refused = list_tools(suite, "a0999")
    assert refused.json()["error"]["message"].startswith("agent 'a0999' not found"), refused.text
    assert list_tools(suite, "a0998").status_code == 200
    assert len(events(suite, "mcp_tools_ready")) == 1
