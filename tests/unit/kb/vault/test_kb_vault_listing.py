"""Listing a vault's notes (``listing``) and who wrote them (the store's authors), and the registry recording
each write through the API under the agent and key that made it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from gateway.config import build
from services.kb.vault import listing, note_index, notes, retirement
from services.kb.vault.registry import Vaults
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import Authors, Writer


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
    first = listing.page(SqliteVaultStore(tmp_path, None), 2, "", include_retired=False)
    assert [(n.name, n.title, n.provenance) for n in first.notes] == [("a note", "First heading", "agent"), ("b note", "Bee", "untrusted")]
    assert first.next_token == "b note" and first.total == 3
    rest = listing.page(SqliteVaultStore(tmp_path, None), 2, first.next_token, include_retired=False)
    assert [n.name for n in rest.notes] == ["c note"] and rest.next_token == "" and rest.notes[0].title == ""
    every = listing.page(SqliteVaultStore(tmp_path, None), 0, "", include_retired=True)
    old = every.notes[-1]
    assert (old.name, old.retired, old.title, old.retired_reason) == ("stale__old", True, "Old", "not used")
    assert old.retired_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert every.notes[0].size_bytes == len("intro\n# First heading\n- text\n") and every.notes[0].updated_at > 0


def test_authors_keep_the_creation_follow_changes_and_go_with_the_note(tmp_path: Path) -> None:
    conn = note_index.open_vault_index(tmp_path)
    store = SqliteVaultStore(tmp_path, conn)
    notes.create(store, "n", "# N\n")
    store.record_author("n", Writer("alfred", "admin", "", 10.0), created=True)
    store.record_author("n", Writer("bob", "bob-key", "run-1", 20.0), created=False)
    found = store.authors(["n", "other"])
    assert found == {"n": Authors(Writer("alfred", "admin", "", 10.0), Writer("bob", "bob-key", "run-1", 20.0))}
    retirement.retire(store, "n", "test", datetime(2026, 1, 1, tzinfo=UTC))
    assert store.authors(["n"])["n"].created == Writer("alfred", "admin", "", 10.0)
    notes.delete(store, "stale__n")  # neither the note nor its twin is left: the record goes
    assert store.authors(["n"]) == {}


def test_a_note_changed_but_never_created_through_the_api_has_no_creator(tmp_path: Path) -> None:
    conn = note_index.open_vault_index(tmp_path)
    store = SqliteVaultStore(tmp_path, conn)
    assert store.authors(["x"]) == {}  # no table yet
    store.record_author("x", Writer("bob", "k", "", 5.0), created=False)
    assert store.authors(["x"])["x"].created is None


def test_the_registry_records_who_wrote_and_lists_them(tmp_path: Path) -> None:
    config = build({"agents": [{"id": "alfred"}, {"id": "bob"}]}, tmp_path)
    clock = [datetime(2026, 3, 1, tzinfo=UTC)]
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = Vaults(config.agents, executor, clock=lambda: clock[0])

    async def scenario() -> tuple[listing.NotePage, dict[str, Authors]]:
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
    assert rota.created == Writer("alfred", "admin", "", datetime(2026, 3, 1, tzinfo=UTC).timestamp())
    assert rota.changed == Writer("bob", "bob-key", "", datetime(2026, 3, 2, tzinfo=UTC).timestamp())
