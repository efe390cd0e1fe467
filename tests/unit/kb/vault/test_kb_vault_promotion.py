"""Nightly promotion into the shared vault (vault.promotion): update, merge bar, link bar, twins, the size cap."""

from __future__ import annotations

import errno
import re
from datetime import datetime
from pathlib import Path

import apsw
import pytest

from gateway.atomic import WriteConflict
from gateway.errors import InvalidArgument
from services.kb.vault import notes as vault, promotion as vault_promote
from services.kb.vault.note_index import search_vault
from services.kb.vault.notes import MAX_NOTE_BYTES, create
from services.kb.vault.promotion import (
    CREATED,
    DECLINED,
    LINK_CONTAINMENT,
    LINK_MIN_TERMS,
    LINK_WEIGHT,
    MERGE_CONTAINMENT,
    MERGE_MIN_TERMS,
    MERGE_WEIGHT,
    MERGED,
    UNCHANGED,
    UPDATED,
    promote,
    required_terms,
)
from services.kb.vault.retirement import FOLD_MARKER, retire
from services.kb.vault import sqlite_store
from services.kb.vault.sqlite_store import SqliteVaultStore

STAGING = (
    "The staging database runs PostgreSQL 15 on port 5433.\n"
    "Backups run nightly at 02:00 UTC to the acme-backups S3 bucket.\n"
)
ONCALL = (
    "The on-call rotation changes every Monday at 09:00 Berlin time.\n"
    "The schedule lives in PagerDuty under the Platform team.\n"
)
FRONTEND = "The frontend is built with Vite and published to Cloudflare Pages on every merge to main.\n"
BACKUPS_REWORDED = "- Nightly backups of the Postgres staging DB go to the acme-backups S3 bucket at 2am UTC."
PASSWORD = "- The staging database password rotates every 90 days; the PostgreSQL admin on port 5433 is the Platform team."
PREVIEWS = "- Cloudflare Pages preview builds expire after 30 days."
MARKER = "<!-- promoted: agent alfred run r1 -->"


def note(vault_dir: Path, name: str) -> Path:
    return vault_dir / "notes" / f"{name}.md"


def names(vault_dir: Path) -> list[str]:
    return sorted(p.name.removesuffix(".md") for p in (vault_dir / "notes").glob("*.md"))


def run(conn: apsw.Connection, vault_dir: Path, content: str, topic: str = "", reason: str = "") -> vault_promote.PromoteResult:
    return promote(SqliteVaultStore(vault_dir, conn), agent_id="alfred", topic=topic, reason=reason, content=content, run_id="r1")


@pytest.fixture
def seeded(vstore: SqliteVaultStore, vconn: apsw.Connection) -> apsw.Connection:
    for name, text in (("staging-db", STAGING), ("oncall", ONCALL), ("frontend", FRONTEND)):
        create(vstore, name, text, confirm=True)
    return vconn


# --- the bars (pure) --------------------------------------------------------


def test_the_bars_in_seed_words() -> None:
    assert (MERGE_WEIGHT, LINK_WEIGHT) == (0.6, 0.3)
    merge = [required_terms(n, MERGE_CONTAINMENT, MERGE_MIN_TERMS) for n in range(0, 13)]
    link = [required_terms(n, LINK_CONTAINMENT, LINK_MIN_TERMS) for n in range(0, 13)]
    assert merge == [None, None, None, 3, 3, 3, 3, 4, 4, 5, 5, 6, 6]  # half, at least 3: a tiny seed never merges
    assert link == [None, None, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4]  # 30%, at least 2
    assert all(lk <= m for lk, m in zip(link, merge, strict=True) if lk is not None and m is not None)


# --- a new note, an exact name ------------------------------------------------


def test_a_new_fact_becomes_its_own_note_named_by_its_topic(vconn: apsw.Connection, vault_dir: Path) -> None:
    result = run(vconn, vault_dir, "- The staging host is named hermes.\n\n", topic="staging-host")
    assert (result.outcome, result.name, result.name_from) == (CREATED, "staging-host", "topic")
    assert note(vault_dir, "staging-host").read_text() == f"{MARKER}\n- The staging host is named hermes.\n"
    assert [h.path for h in search_vault(vconn, "hermes", 5).hits] == ["notes/staging-host.md"]  # indexed at once


def test_the_same_name_on_a_later_night_is_an_update_never_a_replacement(vconn: apsw.Connection, vault_dir: Path) -> None:
    run(vconn, vault_dir, "- The staging host is named hermes.", topic="staging-host")
    first = note(vault_dir, "staging-host").read_text()
    again = run(vconn, vault_dir, "- The staging host is named hermes.", topic="staging-host")
    assert (again.outcome, again.name) == (UNCHANGED, "staging-host")
    assert note(vault_dir, "staging-host").read_text() == first
    reworded = run(vconn, vault_dir, "- hermes (the staging host) moved to rack 4.", topic="staging-host")
    assert (reworded.outcome, reworded.name) == (UPDATED, "staging-host")
    text = note(vault_dir, "staging-host").read_text()
    assert text.startswith(first) and text.endswith(f"\n\n{MARKER}\n- hermes (the staging host) moved to rack 4.\n")
    assert names(vault_dir) == ["staging-host"]
    assert [h.path for h in search_vault(vconn, "rack", 5).hits] == ["notes/staging-host.md"]


def test_an_exact_name_held_by_a_note_someone_wrote_gets_the_fact_appended(seeded: apsw.Connection, vault_dir: Path) -> None:
    result = run(seeded, vault_dir, "- Vite builds take about 40 seconds.", reason="frontend")
    assert (result.outcome, result.name, result.name_from, result.linked) == (UPDATED, "frontend", "reason", ())
    assert note(vault_dir, "frontend").read_text() == FRONTEND + f"\n{MARKER}\n- Vite builds take about 40 seconds.\n"


def test_the_instruction_fallback_lands_recurrences_in_one_note(vconn: apsw.Connection, vault_dir: Path) -> None:
    one = run(vconn, vault_dir, "- Kestrel ships in March.", reason="insert after the release section")
    two = run(vconn, vault_dir, "- Kestrel ships in March.", reason="add to MEMORY.md under Releases")
    assert (one.outcome, one.name, one.name_from, one.passed_over) == (
        CREATED, "kestrel-ships-march", "fact", "insert after the release section")
    assert (two.outcome, two.name) == (UNCHANGED, "kestrel-ships-march")


def test_nothing_nameable_is_declined_and_writes_nothing(vconn: apsw.Connection, vault_dir: Path) -> None:
    result = run(vconn, vault_dir, "- ok, so it is", reason="insert after the cron section")
    assert result.outcome == DECLINED and result.name == "" and "nothing nameable" in result.reason
    assert names(vault_dir) == []


def test_a_malformed_request_is_invalid(vconn: apsw.Connection, vault_dir: Path) -> None:
    with pytest.raises(InvalidArgument):
        run(vconn, vault_dir, "- a fact", topic="Not A Slug")
    with pytest.raises(InvalidArgument):
        run(vconn, vault_dir, " \n ", topic="fine")


# --- the merge bar and the link bar ------------------------------------------------------------


def test_a_reworded_fact_over_the_merge_bar_merges_into_the_note_that_holds_its_words(seeded: apsw.Connection, vault_dir: Path) -> None:
    result = run(seeded, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (result.outcome, result.name, result.name_from) == (MERGED, "staging-db", "reason")
    assert (result.held, result.seed) == (6, 8) and "holds 6 of the fact's 8 leading topic words" in result.reason
    assert result.weight > 0.6
    assert note(vault_dir, "staging-db").read_text() == STAGING + f"\n{MARKER}\n{BACKUPS_REWORDED}\n"
    assert not note(vault_dir, "backup-schedule").exists()
    again = run(seeded, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (again.outcome, again.name) == (UNCHANGED, "staging-db")


def test_below_the_merge_bar_the_fact_is_its_own_note_linked_to_the_related_one(seeded: apsw.Connection, vault_dir: Path) -> None:
    result = run(seeded, vault_dir, PASSWORD, topic="staging-db-password")
    # 5 of its 11 seed words are in staging-db, 38% of their weight: over the link bar (4 words, 30%),
    # under the merge bar (6 words, 60%)
    assert (result.outcome, result.name, result.linked) == (CREATED, "staging-db-password", ("staging-db",))
    assert "holds 5 of the fact's 11 leading topic words, 38% of their weight; a merge needs 6 and 60%" in result.reason
    assert note(vault_dir, "staging-db-password").read_text() == f"{MARKER}\n{PASSWORD}\n\nRelated: [[staging-db]]\n"
    assert note(vault_dir, "staging-db").read_text() == STAGING


def test_a_merge_links_the_other_related_notes_into_the_note_it_merged_into(seeded: apsw.Connection, vault_dir: Path) -> None:
    run(seeded, vault_dir, PASSWORD, topic="staging-db-password")
    fact = ("- Nightly backups of the staging database and its password rotation go to the acme-backups S3 bucket; "
            "PostgreSQL admin on call.")
    result = run(seeded, vault_dir, fact, reason="backups")  # 7 of 11 in staging-db, 5 in staging-db-password
    assert (result.outcome, result.name) == (MERGED, "staging-db")
    assert result.linked == ("staging-db-password",)
    assert note(vault_dir, "staging-db").read_text().endswith(f"{fact}\n\nRelated: [[staging-db-password]]\n")
    # a later merge does not link a note the target already links
    more = run(seeded, vault_dir, fact.replace("on call", "on call, restores take an hour"), reason="restores")
    assert (more.outcome, more.name, more.linked) == (MERGED, "staging-db", ())


def test_a_note_holding_only_the_facts_common_words_never_takes_it(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    for i in range(40):  # friday, office, manager and floor are everywhere in this vault
        create(vstore, f"filler {i}", f"Filler {i}: the office manager on floor {i} plans Friday.\n", confirm=True)
    create(vstore, "soup", "A long note about the office, its manager, every floor and Friday drinks.\n", confirm=True)
    fact = "- The coffee machine on the third floor is descaled every Friday by the office manager."
    result = run(vconn, vault_dir, fact, topic="office-coffee")
    # 4 of its 8 seed words are in "soup" and in each filler (the word bar, 4, is met), but they carry
    # about a sixth of the weight: they are the vault's common words
    assert (result.outcome, result.name) == (CREATED, "office-coffee"), result.reason
    assert re.search(r"holds 4 of the fact's 8 leading topic words, 1\d% of their weight; a merge needs 4 and 60%$", result.reason)
    again = run(vconn, vault_dir, "- Every Friday the office manager descales the third-floor coffee machine.", reason="coffee")
    assert (again.outcome, again.name, again.held, again.seed) == (MERGED, "office-coffee", 7, 8)  # "descales": a stem of its own
    assert again.weight > 0.75


def test_a_short_fact_never_merges_on_a_word_or_two(seeded: apsw.Connection, vault_dir: Path) -> None:
    result = run(seeded, vault_dir, "- PagerDuty rotation.", reason="pager")
    assert (result.outcome, result.name, result.linked) == (CREATED, "pager", ("oncall",))  # 2 seed words: link, no merge


def test_an_unrelated_fact_is_neither_merged_nor_linked(seeded: apsw.Connection, vault_dir: Path) -> None:
    result = run(seeded, vault_dir, "- The Lisbon office has a rooftop terrace with a view of the river.", reason="lisbon")
    assert (result.outcome, result.linked, result.reason) == (CREATED, (), "no similar shared note")


# --- retired twins ----------------------------------------------------------------------------


def test_retired_notes_are_never_merge_targets_nor_links(seeded: apsw.Connection, vault_dir: Path) -> None:
    retire(SqliteVaultStore(vault_dir, seeded), "staging-db", "idle", datetime(2026, 1, 1))
    result = run(seeded, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (result.outcome, result.name, result.linked) == (CREATED, "backup-schedule", ())
    assert note(vault_dir, "stale__staging-db").exists()


def test_a_recurrence_under_a_retired_name_folds_the_twin_on_the_create_path(seeded: apsw.Connection, vault_dir: Path) -> None:
    retire(SqliteVaultStore(vault_dir, seeded), "staging-db", "idle", datetime(2026, 1, 1))
    result = run(seeded, vault_dir, "- The staging DB moved to port 6432.", topic="staging-db")
    assert (result.outcome, result.name, result.folded, result.twin_kept) == (CREATED, "staging-db", True, False)
    assert "recurrence of the retired note 'stale__staging-db'" in result.reason
    text = note(vault_dir, "staging-db").read_text()
    assert text.startswith(f"{MARKER}\n- The staging DB moved to port 6432.\n") and f"{FOLD_MARKER}\n{STAGING}" in text
    assert not note(vault_dir, "stale__staging-db").exists()
    assert [h.path for h in search_vault(seeded, "acme-backups", 5).hits] == ["notes/staging-db.md"]  # once, live


def test_a_twin_beside_a_live_note_is_folded_on_the_update_path(seeded: apsw.Connection, vault_dir: Path) -> None:
    note(vault_dir, "stale__frontend").write_text("<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nOld: the frontend used webpack.\n")
    result = run(seeded, vault_dir, "- Vite builds take about 40 seconds.", topic="frontend")
    assert (result.outcome, result.folded) == (UPDATED, True)
    assert note(vault_dir, "frontend").read_text().endswith(f"{FOLD_MARKER}\nOld: the frontend used webpack.\n")
    assert not note(vault_dir, "stale__frontend").exists()
    assert [h.path for h in search_vault(seeded, "webpack", 5).hits] == ["notes/frontend.md"]


def test_a_merge_target_with_a_twin_folds_it_too(seeded: apsw.Connection, vault_dir: Path) -> None:
    note(vault_dir, "stale__staging-db").write_text("<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nThe old staging DB was MySQL.\n")
    result = run(seeded, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (result.outcome, result.name, result.folded) == (MERGED, "staging-db", True)
    assert note(vault_dir, "staging-db").read_text().endswith(f"{BACKUPS_REWORDED}\n\n{FOLD_MARKER}\nThe old staging DB was MySQL.\n")
    assert not note(vault_dir, "stale__staging-db").exists()


def test_a_fold_the_size_cap_refuses_keeps_the_twin_and_says_why(seeded: apsw.Connection, vault_dir: Path) -> None:
    big = "<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\n" + "- old line about kestrel\n" * 4200
    note(vault_dir, "stale__kestrel").write_text(big)
    result = run(seeded, vault_dir, "- Kestrel ships in March.", topic="kestrel")
    assert (result.outcome, result.folded, result.twin_kept) == (CREATED, False, True)
    assert "twin 'stale__kestrel' was kept" in result.reason and "102,400-byte cap" in result.reason
    assert note(vault_dir, "stale__kestrel").read_text() == big
    assert note(vault_dir, "kestrel").read_text() == f"{MARKER}\n- Kestrel ships in March.\n"


def test_a_twin_that_is_not_valid_utf8_is_kept(seeded: apsw.Connection, vault_dir: Path) -> None:
    raw = b"<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nOld: caf\xe9 kestrel\n"
    note(vault_dir, "stale__kestrel").write_bytes(raw)
    result = run(seeded, vault_dir, "- Kestrel ships in March.", topic="kestrel")
    assert (result.outcome, result.folded, result.twin_kept) == (CREATED, False, True) and "not valid UTF-8" in result.reason
    assert note(vault_dir, "stale__kestrel").read_bytes() == raw


# --- the size cap, conflicts, failures --------------------------------------------------------


def test_an_update_the_size_cap_refuses_writes_nothing(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    full = "x" * (MAX_NOTE_BYTES - 30) + "\n"
    create(vstore, "full", full)
    result = run(vconn, vault_dir, "- One more fact about the full note.", topic="full")
    assert result.outcome == DECLINED and result.name == "full"
    assert "note-size cap refuses it: 'full' with the fact appended would be" in result.reason
    assert "nothing was written" in result.reason
    assert note(vault_dir, "full").read_text() == full and names(vault_dir) == ["full"]


def test_a_merge_the_size_cap_refuses_leaves_everything_in_place(seeded: apsw.Connection, vault_dir: Path) -> None:
    padded = STAGING + "z" * (MAX_NOTE_BYTES - len(STAGING) - 30) + "\n"  # 29 bytes short of the cap
    vault.update(SqliteVaultStore(vault_dir, seeded), "staging-db", padded)
    result = run(seeded, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (result.outcome, result.name) == (DECLINED, "staging-db")
    assert "'staging-db' with the fact appended would be" in result.reason
    assert note(vault_dir, "staging-db").read_text() == padded
    assert not note(vault_dir, "backup-schedule").exists()


def test_a_note_that_is_not_valid_utf8_is_never_rewritten(vconn: apsw.Connection, vault_dir: Path) -> None:
    raw = b"Latin-1 notes: caf\xe9 opens at 7\n"
    note(vault_dir, "cafe").write_bytes(raw)
    result = run(vconn, vault_dir, "- The cafe closes at 16:00.", topic="cafe")
    assert (result.outcome, result.name) == (DECLINED, "cafe") and "not valid UTF-8" in result.reason
    assert note(vault_dir, "cafe").read_bytes() == raw


def test_a_concurrent_write_is_seen_and_the_decision_made_again(monkeypatch: pytest.MonkeyPatch, vconn: apsw.Connection,
                                                                 vault_dir: Path) -> None:
    run(vconn, vault_dir, "- The staging host is named hermes.", topic="staging-host")
    real = sqlite_store.write_atomic
    calls: list[Path] = []

    def racing(path: Path, data: bytes, **kwargs: object) -> None:
        if not calls:  # another writer lands between our read and our rename
            path.write_text(path.read_text() + "- someone else's line\n")
        calls.append(path)
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "write_atomic", racing)
    monkeypatch.setattr(vault, "backoff", lambda attempt: None)
    result = run(vconn, vault_dir, "- hermes runs Debian 12.", topic="staging-host")
    assert result.outcome == UPDATED and len(calls) == 2
    text = note(vault_dir, "staging-host").read_text()
    assert "- someone else's line\n" in text and text.endswith("- hermes runs Debian 12.\n")


def test_a_vault_that_keeps_changing_is_declined(monkeypatch: pytest.MonkeyPatch, vconn: apsw.Connection, vault_dir: Path) -> None:
    def conflict(path: Path, data: bytes, **kwargs: object) -> None:
        raise WriteConflict("changed")

    monkeypatch.setattr(sqlite_store, "write_atomic", conflict)
    monkeypatch.setattr(vault, "backoff", lambda attempt: None)
    result = run(vconn, vault_dir, "- The staging host is named hermes.", topic="staging-host")
    assert result.outcome == DECLINED and "kept changing" in result.reason and "8 attempts" in result.reason


def test_an_unexpected_write_failure_is_declined_with_the_error(monkeypatch: pytest.MonkeyPatch, vconn: apsw.Connection,
                                                                 vault_dir: Path) -> None:
    def full_disk(path: Path, data: bytes, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sqlite_store, "write_atomic", full_disk)
    result = run(vconn, vault_dir, "- The staging host is named hermes.", topic="staging-host")
    assert (result.outcome, result.name) == (DECLINED, "staging-host")
    assert result.reason == "the write failed: OSError: No space left on device"
    assert names(vault_dir) == []


def test_the_marker_never_carries_a_comment_end(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    promote(vstore, agent_id="alfred", topic="t", reason="", content="- a fact here", run_id="r1 --> <b>\n")
    assert note(vault_dir, "t").read_text().splitlines()[0] == "<!-- promoted: agent alfred run r1 -- <b -->"
