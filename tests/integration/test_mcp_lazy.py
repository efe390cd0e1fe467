"""The shim with 1,000 agents: MCP servers are built on first use, one per agent, and follow the config.

The real KB and shim on a home with 1,000 configured agents (``a0000`` … ``a0999``):

- the shim starts and loads the MCP SDK without building a single agent's server
  (``gateway_mcp_servers`` 0 and ``gateway_mcp_servers_built_total`` 0 once the SDK is loaded,
  no ``mcp_server_built`` line);
- an agent's first MCP request works through the SDK's own client (initialize, tools/list,
  a memory_search answered by the KB), and builds that agent's server only;
- concurrent first requests for one agent all answer 200 and build one server;
- an agent removed by a live edit of config.json is no longer served (404 for a ``*`` key),
  its server is closed (``mcp_server_closed`` with ``reason=removed``), the other agents'
  servers are untouched, and an agent added by the same edit is served.
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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """KB + shim with 1,000 agents; a0001 has a note to find."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("mcplazy"), agents=[{"id": a} for a in AGENTS])
    running = Suite(home, http_port, ports)
    notes = home / "agents" / "a0001" / "workspace" / "memory"
    notes.mkdir(parents=True)
    (notes / "harbour.md").write_text("# Harbour\n\n- the pilot boat leaves at six\n")
    try:
        running.start("kb")
        running.start("http")
        yield running
    finally:
        running.stop_all()


def mcp_metrics(suite: Suite) -> dict[str, float]:
    """The shim's ``gateway_mcp_*`` samples (empty until the MCP SDK is loaded)."""
    text = httpx.get(suite.metrics_url("http"), timeout=5).text
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("gateway_mcp_")}


def built(suite: Suite, agent: str | None = None) -> list[dict[str, Any]]:
    return [line for line in suite.log_lines("http")
            if line.get("event") == "mcp_server_built" and agent in (None, line.get("agent"))]


def list_tools(suite: Suite, agent: str) -> httpx.Response:
    return post(suite, agent, ADMIN, "tools/list", {})


def test_the_shim_starts_without_building_any_agents_server(suite: Suite) -> None:
    # First in the module: nothing has asked for MCP yet.
    wait_until(lambda: "gateway_mcp_servers" in mcp_metrics(suite), 30, "the shim to load the MCP SDK")
    assert mcp_metrics(suite) == {"gateway_mcp_servers": 0.0, "gateway_mcp_servers_built_total": 0.0}
    assert built(suite) == []


@pytest.mark.anyio
async def test_an_agents_first_mcp_request_builds_its_server_and_works(suite: Suite) -> None:
    before = mcp_metrics(suite).get("gateway_mcp_servers_built_total", 0.0)
    async with http_session(suite, "a0001", ADMIN) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        found = await session.call_tool("memory_search", {"query": "pilot boat", "refresh": True})
    assert "memory_search" in names and "memory_shared_get" in names
    assert not found.is_error and "memory/harbour.md:" in text_of(found), text_of(found)
    assert len(built(suite, "a0001")) == 1
    assert mcp_metrics(suite)["gateway_mcp_servers_built_total"] == before + 1


def test_concurrent_first_requests_for_one_agent_build_one_server(suite: Suite) -> None:
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _n: list_tools(suite, "a0500"), range(16)))
    assert [a.status_code for a in answers] == [200] * 16, [a.text[:200] for a in answers if a.status_code != 200]
    assert all("memory_search" in a.text for a in answers)
    assert len(built(suite, "a0500")) == 1


def test_an_agent_removed_from_the_config_is_no_longer_served(suite: Suite) -> None:
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
    wait_until(lambda: any(line.get("event") == "mcp_server_closed" and line.get("agent") == "a0999"
                           for line in suite.log_lines("http")), 15, "a0999's server to be closed")
    closed = [line for line in suite.log_lines("http") if line.get("event") == "mcp_server_closed"]
    assert [(line["agent"], line["reason"]) for line in closed] == [("a0999", "removed")]
    assert list_tools(suite, "a0998").status_code == 200
    assert len(built(suite, "a0998")) == 1  # kept, not rebuilt
