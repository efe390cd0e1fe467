"""``gateway mcp``: the shared-vault tools (memory_shared_*) and shared search hits, over the real stdio server.

The KB side is ``mcp_support.FakeKnowledge`` (its canned shared-note behaviours are described there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from mcp_support import (  # noqa: F401 - anyio_backend, kb and home are pytest fixtures, used by name
    CHECKLIST,
    DISABLED,
    Kb,
    anyio_backend,
    home,
    kb,
    mcp_session,
    text_of,
)

pytestmark = pytest.mark.integration


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
    assert (plain.structured_content["written"], plain.structured_content["needs_confirm"]) == (True, False)

    assert taken.is_error
    assert text_of(taken) == (
        "a shared note named 'staging deploy checklist' already exists; use memory_shared_update to change it"
    )

    assert nudged.is_error  # held back: nothing written, and the result says so to a program
    assert nudged.structured_content is not None
    assert (nudged.structured_content["written"], nudged.structured_content["needs_confirm"]) == (False, True)
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

    assert warned.is_error  # held back: nothing written, and the result says so to a program
    assert warned.structured_content is not None
    assert (warned.structured_content["written"], warned.structured_content["needs_confirm"]) == (False, True)
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
    assert deleted.structured_content == {"name": name, "path": f"notes/{name}.md", "written": True, "deleted": True}
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
