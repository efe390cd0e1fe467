"""Listing a vault's notes (``listing``) and who wrote them (``authors``), and the registry recording
each write through the API under the agent and key that made it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from gateway.config import build
from services.kb.vault import authors, listing, note_index, notes, retirement
from services.kb.vault.registry import Vaults


def write(vault_dir: Path, name: str, text: str) -> None:
    (vault_dir / "notes").mkdir(parents=True, exist_ok=True)
    (vault_dir / "notes" / f"{name}.md").write_text(text)


def test_notes_are_sorted_paged_and_titled(tmp_path: Path) -> None:
    write(tmp_path, "b note", "---\ntitle: Bee\nprovenance: untrusted\n---\n# Heading\n")
    write(tmp_path, "a note", "intro\n# First heading\n- text\n")
    write(tmp_path, "c note", "no title here\n")
    write(tmp_path, "stale__old", "<!-- retired: 2026-01-02T03:04:05Z reason: not used -->\n# Old\n")
    write(tmp_path, "bad#name", "not reachable by name\n")
    (tmp_path / "notes" / ".tmp.md").write_text("temp")
    first = listing.page(tmp_path, 2, "", include_retired=False)
    assert [(n.name, n.title, n.provenance) for n in first.notes] == [("a note", "First heading", "agent"), ("b note", "Bee", "untrusted")]
    assert first.next_token == "b note" and first.total == 3
    rest = listing.page(tmp_path, 2, first.next_token, include_retired=False)
    assert [n.name for n in rest.notes] == ["c note"] and rest.next_token == "" and rest.notes[0].title == ""
    every = listing.page(tmp_path, 0, "", include_retired=True)
    old = every.notes[-1]
    assert (old.name, old.retired, old.title, old.retired_reason) == ("stale__old", True, "Old", "not used")
    assert old.retired_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert every.notes[0].size_bytes == len("intro\n# First heading\n- text\n") and every.notes[0].updated_at > 0


def test_authors_keep_the_creation_follow_changes_and_go_with_the_note(tmp_path: Path) -> None:
    conn = note_index.open_vault_index(tmp_path)
    notes.create(conn, tmp_path, "n", "# N\n")
    authors.record(conn, "n", authors.Writer("alfred", "admin", "", 10.0), created=True)
    authors.record(conn, "n", authors.Writer("bob", "bob-key", "run-1", 20.0), created=False)
    found = authors.lookup(conn, ["n", "other"])
    assert found == {"n": authors.Authors(authors.Writer("alfred", "admin", "", 10.0), authors.Writer("bob", "bob-key", "run-1", 20.0))}
    retirement.retire(conn, tmp_path, "n", "test", datetime(2026, 1, 1, tzinfo=UTC))
    assert authors.lookup(conn, ["stale__n"])["stale__n"].created == authors.Writer("alfred", "admin", "", 10.0)
    notes.delete(conn, tmp_path, "stale__n")
    authors.forget_if_gone(conn, tmp_path, "stale__n")
    assert authors.lookup(conn, ["n"]) == {}


def test_a_note_changed_but_never_created_through_the_api_has_no_creator(tmp_path: Path) -> None:
    conn = note_index.open_vault_index(tmp_path)
    assert authors.lookup(conn, ["x"]) == {}  # no table yet
    authors.record(conn, "x", authors.Writer("bob", "k", "", 5.0), created=False)
    assert authors.lookup(conn, ["x"])["x"].created is None


def test_the_registry_records_who_wrote_and_lists_them(tmp_path: Path) -> None:
    config = build({"agents": [{"id": "alfred"}, {"id": "bob"}]}, tmp_path)
    clock = [datetime(2026, 3, 1, tzinfo=UTC)]
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = Vaults(config.agents, executor, clock=lambda: clock[0])

    async def scenario() -> tuple[listing.NotePage, dict[str, authors.Authors]]:
        assert (await vaults.create("alfred", "rota", "# Rota\n- monday\n", True, "admin")).created
        clock[0] = datetime(2026, 3, 2, tzinfo=UTC)
        assert (await vaults.update("bob", "rota", "# Rota\n- monday\n- tuesday\n", True, "bob-key")).updated
        return await vaults.list_notes("alfred", 0, "", False)

    try:
        page, written = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    assert [n.name for n in page.notes] == ["rota"]
    rota = written["rota"]
    assert rota.created == authors.Writer("alfred", "admin", "", datetime(2026, 3, 1, tzinfo=UTC).timestamp())
    assert rota.changed == authors.Writer("bob", "bob-key", "", datetime(2026, 3, 2, tzinfo=UTC).timestamp())
