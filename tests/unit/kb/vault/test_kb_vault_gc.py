"""The shared vault's own GC (``vault_gc``): the idle boundary, the cap and its resumption, restore on
retrieval, the twin rule, once per day. An injected clock; note ages are file mtimes set by hand."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from gateway.config import VaultGcSettings
from services.kb.archive.retrieval_log import record_retrievals
from services.kb.index.meta import get_meta
from services.kb.vault import gc as vault_gc
from services.kb.vault.gc import NoteState, collect, note_ref, plan
from services.kb.vault.note_index import INDEX_FILE, reindex_notes, search_vault
from services.kb.vault.retirement import read_marker, retire
from services.kb.vault import sqlite_rows
from services.kb.vault.sqlite_store import SqliteVaultStore

NOW = datetime(2026, 6, 1, 3, 0, 0, tzinfo=UTC)
DAY = 86_400
GC = VaultGcSettings(enabled=True, stale_days=180, max_retirements_per_run=50)


def note_file(vault_dir: Path, name: str) -> Path:
    return vault_dir / "notes" / f"{name}.md"


def put(conn: apsw.Connection, vault_dir: Path, name: str, *, idle_s: float, body: str | None = None) -> bytes:
    """A note last written ``idle_s`` seconds before NOW; its bytes."""
    path = note_file(vault_dir, name)
    data = (body or f"# {name}\n\nThe {name} fact about quillfeather relays.\n").encode()
    path.write_bytes(data)
    stamp = NOW.timestamp() - idle_s
    os.utime(path, (stamp, stamp))
    reindex_notes(conn, vault_dir, [name])
    return data


def retrieved(vault_dir: Path, name: str, at: datetime, kind: str = "search") -> None:
    """What the read path appends for a retrieval of ``name`` (a live or a ``stale__`` name) at ``at``."""
    assert record_retrievals(vault_dir / INDEX_FILE, [note_ref(name, "text")], kind, clock=at.timestamp) == 1


def run(conn: apsw.Connection, vault_dir: Path, when: datetime = NOW, settings: VaultGcSettings = GC, by: str = "alfred") -> vault_gc.GcReport:
    return collect(SqliteVaultStore(vault_dir, conn), settings, when, when.date().isoformat(), by=by)


def names(vault_dir: Path) -> list[str]:
    return sorted(p.name[:-3] for p in (vault_dir / "notes").glob("*.md"))


def test_a_note_idle_one_second_past_stale_days_is_retired_and_one_second_short_is_not(
    vconn: apsw.Connection, vault_dir: Path
) -> None:
    limit = 180 * DAY
    put(vconn, vault_dir, "young", idle_s=limit - 1)
    put(vconn, vault_dir, "exact", idle_s=limit)
    old = put(vconn, vault_dir, "old", idle_s=limit + 1)
    report = run(vconn, vault_dir)
    assert report.outcome == "ran" and report.retired == ("old",)
    assert names(vault_dir) == ["exact", "stale__old", "young"]
    data = note_file(vault_dir, "stale__old").read_bytes()
    marker = read_marker(data)
    assert marker is not None and marker.at == NOW
    assert marker.reason == "vault GC: not retrieved or written in 180 days (staleDays 180)"
    assert data.split(b"\n", 1)[1] == old  # byte for byte under the marker line
    assert search_vault(vconn, "quillfeather old", 5).hits[0].path == "notes/stale__old.md"  # still searchable
    assert "retired 1 note(s) idle over 180 days ('old')" in report.message


def test_a_retrieval_resets_the_age_of_an_old_file(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "used", idle_s=400 * DAY)
    put(vconn, vault_dir, "once", idle_s=400 * DAY)
    retrieved(vault_dir, "used", NOW - timedelta(days=10))
    retrieved(vault_dir, "once", NOW - timedelta(days=181))
    report = run(vconn, vault_dir)
    assert report.retired == ("once",) and report.folded == 2
    assert SqliteVaultStore(vault_dir, vconn).lifecycle()["used"].retrieval_count == 1
    assert vconn.execute("SELECT count(*) FROM kb_retrieval_log").fetchall() == [(0,)]  # counted rows are gone


def test_the_cap_retires_the_oldest_first_and_the_rest_resume_on_later_nights(vconn: apsw.Connection, vault_dir: Path) -> None:
    for days, name in [(203, "c"), (200, "e"), (204, "a"), (201, "d"), (202, "b"), (150, "fresh")]:
        put(vconn, vault_dir, name, idle_s=days * DAY)
    capped = VaultGcSettings(True, 180, 2)
    first = run(vconn, vault_dir, NOW, capped)
    assert (first.retired, first.waiting) == (("a", "c"), 3)
    assert "3 more wait for later nights (at most 2 a night)" in first.message
    second = run(vconn, vault_dir, NOW + timedelta(days=1), capped)
    assert (second.retired, second.waiting) == (("b", "d"), 1)
    third = run(vconn, vault_dir, NOW + timedelta(days=2), capped)
    assert (third.retired, third.waiting) == (("e",), 0)
    assert names(vault_dir) == ["fresh", *(f"stale__{n}" for n in "abcde")]


def test_a_day_runs_once_and_a_second_call_does_nothing(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "old", idle_s=300 * DAY)
    first = run(vconn, vault_dir, by="alfred")
    put(vconn, vault_dir, "older", idle_s=400 * DAY)
    again = run(vconn, vault_dir, NOW + timedelta(hours=5), by="bob")
    assert first.outcome == "ran" and again.outcome == "already-ran"
    assert again.by == "alfred" and again.retired == () and names(vault_dir) == ["older", "stale__old"]
    assert "already ran today (2026-06-01, for agent alfred): retired 1, restored 0" in again.message
    assert run(vconn, vault_dir, NOW + timedelta(days=1), by="bob").retired == ("older",)
    assert get_meta(vconn, sqlite_rows.DAY_KEY) == "2026-06-02"


def test_a_retired_note_retrieved_again_is_restored_at_the_next_run(vconn: apsw.Connection, vault_dir: Path) -> None:
    original = put(vconn, vault_dir, "relay", idle_s=300 * DAY)
    assert run(vconn, vault_dir).retired == ("relay",)
    # A search hit on the retired note (what Search's shared corpus records), a day later.
    hit = search_vault(vconn, "quillfeather relay", 5).hits
    assert [h.path for h in hit] == ["notes/stale__relay.md"]
    record_retrievals(vault_dir / INDEX_FILE, hit, "search", clock=(NOW + timedelta(hours=20)).timestamp)
    report = run(vconn, vault_dir, NOW + timedelta(days=1))
    assert report.restored == ("relay",) and report.retired == ()
    assert names(vault_dir) == ["relay"] and note_file(vault_dir, "relay").read_bytes() == original
    assert [h.path for h in search_vault(vconn, "quillfeather relay", 5).hits] == ["notes/relay.md"]
    assert SqliteVaultStore(vault_dir, vconn).lifecycle()["relay"].retired_at is None


def test_a_retrieval_before_the_retirement_restores_nothing(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "relay", idle_s=300 * DAY)
    retrieved(vault_dir, "relay", NOW - timedelta(days=200))
    assert run(vconn, vault_dir).retired == ("relay",)
    assert run(vconn, vault_dir, NOW + timedelta(days=1)).restored == ()
    assert names(vault_dir) == ["stale__relay"]


def test_get_of_the_retired_name_counts_as_a_retrieval_of_the_note(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "relay", idle_s=300 * DAY)
    run(vconn, vault_dir)
    retrieved(vault_dir, "stale__relay", NOW + timedelta(minutes=1), kind="get")
    assert run(vconn, vault_dir, NOW + timedelta(days=1)).restored == ("relay",)


def test_a_live_note_of_that_name_is_never_restored_over(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "relay", idle_s=300 * DAY)
    run(vconn, vault_dir)
    twin = note_file(vault_dir, "stale__relay").read_bytes()
    live = put(vconn, vault_dir, "relay", idle_s=0, body="# relay\n\nA new live note by hand.\n")
    retrieved(vault_dir, "stale__relay", NOW + timedelta(hours=1))
    report = run(vconn, vault_dir, NOW + timedelta(days=1))
    assert (report.restored, report.kept) == ((), ("relay",))
    assert note_file(vault_dir, "relay").read_bytes() == live and note_file(vault_dir, "stale__relay").read_bytes() == twin
    assert "kept 1 retired beside a live note of the same name ('relay')" in report.message
    note_file(vault_dir, "relay").unlink()  # the live note deleted later: the GC let go, nothing comes back
    reindex_notes(vconn, vault_dir, ["relay"])
    assert run(vconn, vault_dir, NOW + timedelta(days=2)).restored == ()
    assert names(vault_dir) == ["stale__relay"]


def test_a_note_retired_by_hand_is_not_restored_by_the_gc(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "relay", idle_s=10 * DAY)
    retire(vstore, "relay", "superseded by the new relay plan", NOW)
    retrieved(vault_dir, "stale__relay", NOW + timedelta(hours=1))
    assert run(vconn, vault_dir, NOW + timedelta(days=1)).restored == ()
    assert names(vault_dir) == ["stale__relay"]


def test_a_due_note_whose_twin_exists_is_skipped_and_does_not_use_up_the_cap(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "stale__twin", idle_s=500 * DAY)
    put(vconn, vault_dir, "twin", idle_s=400 * DAY)
    put(vconn, vault_dir, "other", idle_s=300 * DAY)
    (vault_dir / "notes" / "bad#name.md").write_text("dropped by hand\n")
    stamp = NOW.timestamp() - 300 * DAY
    os.utime(vault_dir / "notes" / "bad#name.md", (stamp, stamp))
    report = run(vconn, vault_dir, NOW, VaultGcSettings(True, 180, 1))
    assert report.retired == ("other",) and report.waiting == 0 and report.skipped_count == 2
    assert report.skipped[0].startswith("bad#name: not a name the vault accepts")
    assert report.skipped[1].startswith("twin: its retired twin 'stale__twin' exists")


def test_a_note_that_is_a_symlink_is_never_retired(vconn: apsw.Connection, vault_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("A linked note about quillfeather relays.\n")
    stamp = NOW.timestamp() - 300 * DAY
    os.utime(target, (stamp, stamp))
    (vault_dir / "notes" / "linked.md").symlink_to(target)
    assert run(vconn, vault_dir).retired == ()
    assert (vault_dir / "notes" / "linked.md").is_symlink() and target.exists()


def test_a_zero_cap_retires_nothing_and_still_restores(vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "relay", idle_s=300 * DAY)
    run(vconn, vault_dir)
    put(vconn, vault_dir, "old", idle_s=300 * DAY)
    retrieved(vault_dir, "stale__relay", NOW + timedelta(hours=1))
    report = run(vconn, vault_dir, NOW + timedelta(days=1), VaultGcSettings(True, 180, 0))
    assert (report.restored, report.retired, report.waiting) == (("relay",), (), 1)


def test_plan_clears_gc_retirements_whose_twin_is_gone() -> None:
    """A crash between recording the retirement and the move, or a twin folded or deleted since."""
    states = {"gone": NoteState(retired_at=1.0), "kept": NoteState(last_retrieved=5.0, retired_at=1.0)}
    todo = plan({}, {"kept"}, states, GC, NOW.timestamp())
    assert todo.clear == ("gone",) and todo.restore == ("kept",)


@pytest.mark.parametrize("idle_days", [0, 179])
def test_fresh_notes_are_never_candidates(idle_days: int) -> None:
    todo = plan({"n": NOW.timestamp() - idle_days * DAY}, set(), {}, GC, NOW.timestamp())
    assert todo.retire == () and todo.skipped == ()
