"""A vault exported and imported through its store (``export``, ``import_notes``): the round trip, the
manifest's checks, conflicts and a re-run after an interrupted import, on every backend (``open_store``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gateway.errors import CommandError
from services.kb.vault import notes, retirement
from services.kb.vault.export import MANIFEST, METADATA, export_vault
from services.kb.vault.gc import note_ref
from services.kb.vault.import_notes import import_vault, read_folder
from services.kb.vault.store import VaultStore, Writer

ALFRED = Writer("alfred", "alfred-key", "", 1_700_000_000.0)
BOB = Writer("bob", "bob-key", "", 1_700_000_100.0)
DREAM = Writer("alfred", "internal", "run-7", 1_700_000_200.0)
OpenStore = Callable[..., VaultStore]
BIG = "# Big\n\n" + "".join(f"line {i} of a long note about sailing\n" for i in range(30_000))


def filled(store: VaultStore) -> None:
    """Live and retired notes, wikilinks, CJK, a 1 MB note, two agents' notes and a promotion."""
    notes.create(store, "deploy", "---\ntags: [ops]\n---\n# Deploy\n\nUse blue-green. See [[rollback]].\n")
    store.record_author("deploy", ALFRED, created=True)
    store.record_author("deploy", BOB, created=False)
    notes.create(store, "rollback", "# Rollback\n\nRevert the release tag.\n")
    store.record_author("rollback", BOB, created=True)
    notes.create(store, "東京メモ", "# 東京\n\n会議は東京で行います。渋谷の事務所。\n")
    notes.create(store, "promoted", "# Promoted\n\nLearned during a dream: caches expire at noon.\n")
    store.record_author("promoted", DREAM, created=True)
    notes.create(store, "old idea", "# Old idea\n\nWe once used FTP for deploys.\n")
    store.record_author("old idea", ALFRED, created=True)
    retirement.retire(store, "old idea", "vault GC: idle 90 days", datetime(2026, 1, 2, tzinfo=timezone.utc))
    store.set_retired("old idea", 1_767_312_000.0)
    store.write("big", BIG.encode(), expected=None)  # past the API's cap: written by hand, kept whole
    store.log_retrievals([note_ref("deploy", "x")] * 3, "search", 1_700_100_000.0)
    store.claim_day("2026-01-01", "{}")


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_round_trip_gives_the_same_export_and_the_same_hits(open_store: OpenStore, tmp_path: Path) -> None:
    source, target = open_store(), open_store()
    filled(source)
    first = export_vault(source, tmp_path / "one")
    assert first.counts == {"live": 5, "retired": 1, "authors": 4, "lifecycle": 2}
    done = import_vault(target, read_folder(tmp_path / "one"))
    assert len(done.written) == 6 and not done.present and not done.skipped
    target.claim_day("2026-01-01", "{}")  # the GC's night: the retrievals logged by the import are folded
    export_vault(target, tmp_path / "two")
    assert files(tmp_path / "one") == files(tmp_path / "two")
    for query in ("blue-green", "東京", "sailing", "FTP", "caches"):
        assert [h.path for h in source.search(query, 10).hits] == [h.path for h in target.search(query, 10).hits], query
    assert target.read("big") == BIG.encode()
    assert target.authors(["deploy"])["deploy"].created == ALFRED


def test_a_changed_missing_or_added_file_is_refused(open_store: OpenStore, tmp_path: Path) -> None:
    source = open_store()
    filled(source)
    folder = tmp_path / "out"
    export_vault(source, folder)
    note = folder / "notes" / "deploy.md"
    note.write_bytes(note.read_bytes() + b"tampered\n")
    with pytest.raises(CommandError, match="notes/deploy.md changed since the export"):
        read_folder(folder)
    note.unlink()
    with pytest.raises(CommandError, match="notes/deploy.md is missing"):
        read_folder(folder)
    (folder / "notes" / "extra.md").write_text("x")
    with pytest.raises(CommandError, match="notes/extra.md is not in the manifest"):
        read_folder(folder)


def test_a_conflict_refuses_everything_unless_skipped(open_store: OpenStore, tmp_path: Path) -> None:
    source, target = open_store(), open_store()
    filled(source)
    export_vault(source, tmp_path / "out")
    notes.create(target, "rollback", "# Rollback\n\nOur own, different.\n")
    with pytest.raises(CommandError, match="1 note.s. exist in the vault with other content: 'rollback'.*nothing was written"):
        import_vault(target, read_folder(tmp_path / "out"))
    assert target.names(include_retired=True) == ["rollback"]
    done = import_vault(target, read_folder(tmp_path / "out"), skip_existing=True)
    assert done.skipped == ["rollback"] and len(done.written) == 5
    assert b"Our own" in (target.read("rollback") or b"")


def test_a_rerun_completes_and_never_counts_twice(open_store: OpenStore, tmp_path: Path) -> None:
    source, target = open_store(), open_store()
    filled(source)
    export_vault(source, tmp_path / "out")
    export = read_folder(tmp_path / "out")
    target.write("big", export.notes["big"], expected=None)  # an earlier run that stopped after one note
    done = import_vault(target, export)
    assert done.present == ["big"] and len(done.written) == 5
    again = import_vault(target, export)
    assert len(again.present) == 6 and not again.written
    target.claim_day("2026-01-01", "{}")
    assert target.lifecycle()["deploy"].retrieval_count == 3


def test_export_refuses_a_non_empty_folder(open_store: OpenStore, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(CommandError, match="not an empty folder"):
        export_vault(open_store(), tmp_path / "out")
    export_vault(open_store(), tmp_path / "fresh")
    manifest = json.loads((tmp_path / "fresh" / MANIFEST).read_bytes())
    assert list(manifest["files"]) == [METADATA] and manifest["counts"]["live"] == 0
