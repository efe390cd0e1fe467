"""A forget in the shared vault (SQLite backend): every note holding the target, live and retired, is
rewritten with the marker; the promotion records and graph reports are scrubbed; the index's bytes are
purged; and afterwards not one 8-character run of the text is left in any file of the vault, while
every other note is still found."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from forget_support import PLANTED, TOMBSTONE, residue, runs

from gateway.atomic import WriteConflict
from gateway.config import build
from gateway.forgetting import Target, marker
from services.kb.index.purge import StoreForget
from services.kb.vault import forget as vault_forget
from services.kb.vault.registry import Vaults
from services.kb.vault.sqlite_store import SqliteVaultStore

NOTES = {
    "park-notes": f"# Park notes\n\nA bench stands in the park.\n\n{PLANTED}.\n",
    "garden": "# Garden\n\nThe tamarind tree fruits in March.\n",
}
RETIRED = {"old-keys": f"# Old keys\n\n{PLANTED.lower()}\n"}


def _vaults(tmp_path: Path, executor: ThreadPoolExecutor) -> tuple[Vaults, Path]:
    config = build({"agents": [{"id": "alfred", "knowledge": {"shared": {"mode": "auto"}}}]}, tmp_path)
    return Vaults(config.agents, executor, clock=lambda: datetime(2026, 12, 1, tzinfo=UTC)), \
        config.agents[0].knowledge.shared.vault_dir


def _vault_files(vault_dir: Path) -> list[Path]:
    return sorted(p for p in vault_dir.rglob("*") if p.is_file())


async def _plant(vaults: Vaults, vault_dir: Path) -> None:
    for name, text in {**NOTES, **RETIRED}.items():
        await vaults.create("alfred", name, text, True)
    for name in RETIRED:
        await vaults.retire("alfred", name, "test")
    await vaults.promote("alfred", "park-notes", "", f"- {PLANTED} (again)", "run-1", "k", "req-1")
    (vault_dir / "reports").mkdir(exist_ok=True)
    (vault_dir / "reports" / "contradictions.md").write_text(f"# Contradictions\n\n- `park-notes`: {PLANTED}\n")


def test_an_applied_vault_forget_leaves_no_byte_of_the_text_in_the_vault(tmp_path: Path) -> None:
    executor = ThreadPoolExecutor(max_workers=2)
    vaults, vault_dir = _vaults(tmp_path, executor)
    target = Target.parse(PLANTED, None)

    async def scenario() -> tuple[StoreForget, StoreForget, StoreForget, list[str], list[str]]:
        await _plant(vaults, vault_dir)
        assert residue(_vault_files(vault_dir)), "planted: the check below can fail"
        dry = await vaults.forget("alfred", target, "", apply=False)
        applied = await vaults.forget("alfred", target, TOMBSTONE, apply=True)
        again = await vaults.forget("alfred", target, TOMBSTONE, apply=True)
        gone, _ = await vaults.search("alfred", "Quabbleworth", 10, True)
        kept, _ = await vaults.search("alfred", "tamarind", 10, False)
        await vaults.settle()
        return dry, applied, again, [h.path for h in gone.hits], [h.path for h in kept.hits]

    try:
        dry, applied, again, gone, kept = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    found = [(p.where, p.kind, p.count) for p in dry.places]
    assert found == [("notes/park-notes.md", "note", 2), ("notes/stale__old-keys.md", "note", 1),
                     ("reports/contradictions.md", "report", 1), ("kb_promotions", "table", 2)]
    assert dry.purge is None and dry.store == "vault:global"
    assert [(p.where, p.kind, p.count) for p in applied.places] == found and applied.left == []
    assert applied.purge is not None
    assert again.places == [] and again.left == []  # idempotent: the second run finds nothing to do
    assert gone == [] and kept == ["notes/garden.md"]
    assert residue(_vault_files(vault_dir)) == []
    note = (vault_dir / "notes" / "park-notes.md").read_text()
    assert note.count(marker(TOMBSTONE)) == 2 and "A bench stands in the park." in note


def test_a_note_that_keeps_changing_is_left_and_named(tmp_path: Path, vstore: SqliteVaultStore) -> None:
    vstore.write("busy", f"# Busy\n\n{PLANTED}\n".encode(), expected=None)
    real = vstore.write

    def conflicted(name: str, data: bytes, *, expected: bytes | None, drop: tuple[str, ...] = ()) -> None:
        raise WriteConflict("changed under the forget")

    vstore.write = conflicted  # type: ignore[method-assign]
    places, left = vault_forget.forget_notes(vstore, Target.parse(PLANTED, None), TOMBSTONE, apply=True)
    vstore.write = real  # type: ignore[method-assign]
    assert [(p.where, p.count) for p in places] == [("notes/busy.md", 1)]
    assert [(p.where, p.count) for p in left] == [("notes/busy.md", 1)]
    assert PLANTED in (vstore.read("busy") or b"").decode()


def test_a_promotion_write_keeps_its_names_and_hashes_and_loses_the_text() -> None:
    raw = ('{"note": "quabbleworth", "project": "global", "kind": "appended", "offset": 3, "removed": "x", '
           f'"added": "{PLANTED}", "block": "- {PLANTED}", "hash_before": "{"a" * 64}", "hash_after": "{"b" * 64}", '
           '"folded_twin": ""}')
    new, count = vault_forget.scrub_write(raw, Target.parse("quabbleworth", None), TOMBSTONE)
    assert count == 2
    assert '"note": "quabbleworth"' in new and "a" * 64 in new
    assert vault_forget.scrub_write(raw, Target.parse("absent words", None), TOMBSTONE) == (raw, 0)


@pytest.mark.parametrize("text", [PLANTED])
def test_runs_cover_the_text_in_both_cases(text: str) -> None:
    assert text[:8].encode() in runs(text) and text[-8:].lower().encode() in runs(text)


def test_index_rows_of_a_note_removed_by_hand_are_reindexed_away(vault_dir: Path, vstore: SqliteVaultStore) -> None:
    vstore.write("gone", f"# Gone\n\n{PLANTED}\n".encode(), expected=None)
    (vault_dir / "notes" / "gone.md").unlink()  # by hand: the index still holds its rows
    result = vault_forget.forget_sqlite(vstore, Target.parse(PLANTED, None), TOMBSTONE, apply=True)
    assert ([(p.where, p.count) for p in result.places], result.left) == ([("notes/gone.md", 1)], [])
    assert vstore.search("Quabbleworth", 10).hits == []
