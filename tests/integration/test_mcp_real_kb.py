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
        blank = await session.call_tool("memory_search", {"query": "  \t "})
        assert blank.is_error and text(blank) == "query is required"


CHECKLIST = (
    "# Staging deploy checklist\n\n"
    "- freeze merges to main\n"
    "- run the database migrations\n"
    "- flip the blue-green switch\n"
    "- smoke test the checkout flow\n"
)
REWORDED = "Before a staging deploy: freeze merges, run database migrations, smoke test checkout, flip blue-green switch.\n"


@pytest.mark.anyio
async def test_shared_note_lifecycle_through_mcp_and_the_real_kb(real_kb: Suite) -> None:
    notes = real_kb.home / "shared" / "kb" / "global" / "notes"
    name, twin = "staging deploy checklist", "staging deploys"
    async with mcp_session(real_kb.home) as session:
        created = await session.call_tool("memory_shared_create", {"name": name, "content": CHECKLIST})
        assert not created.is_error, text(created)
        assert text(created).startswith(f'Created shared note "{name}"')
        assert (notes / f"{name}.md").read_text() == CHECKLIST

        taken = await session.call_tool("memory_shared_create", {"name": name, "content": "other"})
        assert taken.is_error and "already exists" in text(taken) and "memory_shared_update" in text(taken)

        # Near-duplicate nudge: a reworded note under another name is held back, then forced with confirm.
        nudged = await session.call_tool("memory_shared_create", {"name": twin, "content": REWORDED})
        assert nudged.is_error, text(nudged)  # held back: nothing was written
        assert text(nudged).startswith(f'Nothing was written: shared note "{twin}" was NOT created')
        assert f'"{name}" (similarity ' in text(nudged) and "confirm=true" in text(nudged)
        assert nudged.structured_content is not None
        assert [r["name"] for r in nudged.structured_content["related"]] == [name]
        assert not (notes / f"{twin}.md").exists()
        forced = await session.call_tool("memory_shared_create", {"name": twin, "content": REWORDED, "confirm": True})
        assert not forced.is_error and f"[[{name}]]" in text(forced)
        assert f"[[{name}]]" in (notes / f"{twin}.md").read_text()

        got = await session.call_tool("memory_shared_get", {"name": name})
        assert not got.is_error
        header, _, body = text(got).partition("\n")
        assert header.startswith(f'shared note "{name}" (notes/{name}.md, ') and body == CHECKLIST

        found = await session.call_tool("memory_search", {"query": "blue-green switch", "corpus": "shared"})
        assert f"notes/{name}.md:" in text(found) and "memory_shared_get(name)" in text(found)

        edited = CHECKLIST + "- announce in the deploys channel\n"
        updated = await session.call_tool("memory_shared_update", {"name": name, "content": edited})
        assert not updated.is_error and text(updated).startswith(f'Updated shared note "{name}"'), text(updated)
        assert (notes / f"{name}.md").read_text() == edited

        warned = await session.call_tool("memory_shared_update", {"name": name, "content": "# Staging deploy checklist\n"})
        assert warned.is_error, text(warned)  # held back: nothing was written
        assert text(warned).startswith(f'Nothing was written: shared note "{name}" was NOT updated')
        assert "drop 5 of the note's 6 non-blank lines" in text(warned)
        assert (notes / f"{name}.md").read_text() == edited
        confirmed = await session.call_tool(
            "memory_shared_update", {"name": name, "content": "# Staging deploy checklist\n", "confirm": True}
        )
        assert not confirmed.is_error and "Updated" in text(confirmed)
        assert (notes / f"{name}.md").read_text() == "# Staging deploy checklist\n"

        missing = await session.call_tool("memory_shared_update", {"name": "nope", "content": "x"})
        assert missing.is_error and "memory_shared_create" in text(missing)
        bad = await session.call_tool("memory_shared_create", {"name": "../escape", "content": "x"})
        assert bad.is_error and "name" in text(bad)

        for note in (name, twin):
            deleted = await session.call_tool("memory_shared_delete", {"name": note})
            assert not deleted.is_error and text(deleted).startswith(f'Deleted shared note "{note}"')
            assert not (notes / f"{note}.md").exists()
        gone = await session.call_tool("memory_shared_get", {"name": name})
        assert gone.is_error and text(gone) == f"no shared note named {name!r}"
        after = await session.call_tool("memory_search", {"query": "blue-green switch", "corpus": "shared"})
        assert "No hits" in text(after)


@pytest.mark.anyio
async def test_shared_tools_say_when_the_vault_is_disabled(tmp_path: Path) -> None:
    home, ports, http_port = make_home(
        tmp_path, [{"id": "alfred"}, {"id": "bob", "knowledge": {"shared": {"enabled": False}}}]
    )
    suite = Suite(home, http_port, ports)
    suite.start("kb")
    try:
        async with mcp_session(home, agent="bob") as session:
            results = [
                await session.call_tool("memory_shared_create", {"name": "n", "content": "c"}),
                await session.call_tool("memory_shared_get", {"name": "n"}),
                await session.call_tool("memory_shared_update", {"name": "n", "content": "c"}),
                await session.call_tool("memory_shared_delete", {"name": "n"}),
            ]
    finally:
        suite.stop_all()
    for result in results:
        assert result.is_error and text(result).startswith("shared KB disabled for agent 'bob'"), text(result)
