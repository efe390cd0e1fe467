"""`gateway mcp` end to end against the real KB process over real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import TextContent
from suite_support import Suite, make_home
from test_mcp import mcp_session

pytestmark = pytest.mark.integration


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def real_kb(tmp_path: Path) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path, [{"id": "alfred"}])
    memory = home / "agents" / "alfred" / "workspace" / "memory"
    memory.mkdir(parents=True)
    (memory / "deploys.md").write_text("# Deploys\n\n- staging deploys need the blue-green switch\n- prod deploys on Tuesdays\n")
    (home / "agents" / "alfred" / "workspace" / "USER.md").write_text("# User\n\n- Ada drinks oolong\n")
    suite = Suite(home, http_port, ports)
    suite.start("kb")
    try:
        yield suite
    finally:
        suite.stop_all()


def text(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.mark.anyio
async def test_search_then_get_through_mcp_and_the_real_kb(real_kb: Suite) -> None:
    async with mcp_session(real_kb.home) as session:
        found = await session.call_tool("memory_search", {"query": "staging deploys", "refresh": True})
        assert not found.is_error, text(found)
        assert "memory/deploys.md:" in text(found) and "blue-green" in text(found)
        got = await session.call_tool("memory_get", {"path": "memory/deploys.md", "from_line": 3, "lines": 2})
        assert not got.is_error
        assert "staging deploys need the blue-green switch\n- prod deploys on Tuesdays" in text(got)
        refused = await session.call_tool("memory_get", {"path": "../config.json"})
        assert refused.is_error
        assert "oolong" in text(await session.call_tool("memory_search", {"query": "oolong"}))
