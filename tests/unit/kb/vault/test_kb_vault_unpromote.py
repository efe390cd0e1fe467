"""Undoing a nightly promotion (unpromote): exact undo of an unchanged note, taking the block out of a
note changed since, folded twins put back, and every case where the note is left as it is."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings, strategies as st

from gateway.atomic import WriteConflict
from gateway.errors import InvalidArgument
from services.kb.vault import notes as vault, unpromote
from services.kb.vault.note_index import search_vault
from services.kb.vault.notes import create, update
from services.kb.vault.promotion import CREATED, MERGED, UPDATED, PromoteResult, promote
from services.kb.vault.retirement import retire
from services.kb.vault.unpromote import APPENDED, CREATED_NOTE, GONE, LEFT, UNDONE, check_write, take_out, undo, written
from services.kb.vault import sqlite_store
from services.kb.vault.sqlite_store import SqliteVaultStore

STAGING = (
    "The staging database runs PostgreSQL 15 on port 5433.\n"
    "Backups run nightly at 02:00 UTC to the acme-backups S3 bucket.\n"
)
BACKUPS_REWORDED = "- Nightly backups of the Postgres staging DB go to the acme-backups S3 bucket at 2am UTC."
HERMES = "- The staging host is named hermes."
RACK = "- hermes moved to rack 4 in the basement."


def note(vault_dir: Path, name: str) -> Path:
    return vault_dir / "notes" / f"{name}.md"


def promoted(conn: apsw.Connection, vault_dir: Path, content: str, topic: str = "", reason: str = "",
             run_id: str = "r1") -> PromoteResult:
    result = promote(SqliteVaultStore(vault_dir, conn), agent_id="alfred", topic=topic, reason=reason, content=content, run_id=run_id)
    assert result.write is not None, result
    return result


def found(conn: apsw.Connection, query: str) -> list[str]:
    return [h.path for h in search_vault(conn, query, 10).hits]


# --- the write record (pure) -----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    old=st.one_of(st.none(), st.text(alphabet=st.sampled_from("ab \n\u00e9\u4e2d"), max_size=30)),
    block=st.text(alphabet=st.sampled_from("xy \n-"), min_size=1, max_size=20).map(lambda t: "<!-- promoted -->\n" + t + "\n"),
)
def test_a_write_record_is_an_exact_splice_and_taking_its_block_out_gives_the_old_note_back(old: str | None, block: str) -> None:
    before = old or ""
    head = before.rstrip("\n")
    new = block if old is None or not head.strip() else head + "\n\n" + block  # what promotion writes
    w = written("global", "n", old, new, block, "")
    assert new[: w.offset] + w.added == new and before[: w.offset] + w.removed == before
    assert w.kind == (CREATED_NOTE if old is None else APPENDED)
    assert w.hash_after == hashlib.sha256(new.encode()).hexdigest()
    back, times = take_out(new, block, w.removed if old is not None else "\n")
    if times == 1 and head.strip():
        assert back == before


def test_taking_a_block_out_closes_up_the_line_ends_as_if_it_had_never_been_written() -> None:
    b1, b2 = "<!-- promoted: r1 -->\n- one\n", "<!-- promoted: r2 -->\n- two\n"
    assert take_out("Title\n\nBody.\n\n" + b1 + "\n" + b2, b1, "\n") == ("Title\n\nBody.\n\n" + b2, 1)
    assert take_out(b1 + "\n" + b2, b1, "\n") == (b2, 1)
    assert take_out("Title edited\n\n" + b1, b1, "\n\n\n") == ("Title edited\n\n\n", 1)
    assert take_out(b1, b1, "") == ("", 1)
    assert take_out("Title\n\n" + b1 + "A line added by hand\n", b1, "\n") == ("Title\n\nA line added by hand\n", 1)
    assert take_out("Title\n\n" + b1 + b1, b1, "\n") == (None, 2)
    assert take_out("Title\n\n" + b1.replace("one", "uno"), b1, "\n") == (None, 0)
    assert take_out("x" + b1, b1, "\n") == (None, 0)  # not on whole lines
    assert take_out("Title\n", "", "\n") == (None, 0)


def test_a_malformed_write_record_is_invalid() -> None:
    good = written("global", "n", None, "<!-- promoted -->\n- x\n", "<!-- promoted -->\n- x\n", "")
    assert check_write(good) is good
    for bad, field in ((replace(good, note="a/b"), "name"), (replace(good, kind="moved"), "write.kind"),
                       (replace(good, offset=-1), "write.offset"), (replace(good, hash_after="abc"), "write.hash_after"),
                       (replace(good, kind=APPENDED), "write.hash_before"),
                       (replace(good, added="x" * (unpromote.MAX_FIELD_BYTES + 1)), "write.added")):
        with pytest.raises(InvalidArgument) as info:
            check_write(bad)
        assert field in info.value.message


# --- exact undo of an unchanged note ------------------------------------------------------------


def test_a_created_note_is_deleted_and_no_longer_found(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    assert result.outcome == CREATED and result.write is not None and result.write.kind == CREATED_NOTE
    assert found(vconn, "hermes") == ["notes/staging-host.md"]
    done = undo(vstore, result.write)
    assert (done.outcome, done.deleted, done.twin_restored) == (UNDONE, True, False)
    assert not note(vault_dir, "staging-host").exists() and found(vconn, "hermes") == []  # reindexed at once
    again = undo(vstore, result.write)
    assert again.outcome == GONE and "no longer exists" in again.reason


def test_an_append_is_taken_out_and_the_note_is_byte_for_byte_what_it_was(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    original = "# Staging host\n\nSome text someone wrote.\n\n\n"  # trailing line ends the append replaced
    create(vstore, "staging-host", original)
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    assert result.outcome == UPDATED and result.write is not None and result.write.kind == APPENDED
    done = undo(vstore, result.write)
    assert (done.outcome, done.deleted) == (UNDONE, False)
    assert note(vault_dir, "staging-host").read_bytes() == original.encode()
    assert found(vconn, "hermes") == []


def test_a_merge_is_taken_out_exactly(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "staging-db", STAGING)
    result = promoted(vconn, vault_dir, BACKUPS_REWORDED, reason="backup schedule")
    assert (result.outcome, result.name) == (MERGED, "staging-db") and result.write is not None
    assert undo(vstore, result.write).outcome == UNDONE
    assert note(vault_dir, "staging-db").read_text() == STAGING and found(vconn, "Postgres") == []


def test_two_promotions_of_one_run_into_one_note_come_out_newest_first(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    first = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    second = promoted(vconn, vault_dir, RACK, topic="staging-host")
    assert second.outcome == UPDATED and first.write is not None and second.write is not None
    assert undo(vstore, second.write).reason == "took out the text this promotion appended"
    assert undo(vstore, first.write).deleted
    assert list((vault_dir / "notes").glob("*.md")) == []


# --- a note changed since -----------------------------------------------------------------------


def test_a_later_promotion_of_another_run_stays_when_the_earlier_block_is_taken_out(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    original = "# Staging host\n\nSome text someone wrote.\n"
    create(vstore, "staging-host", original)
    earlier = promoted(vconn, vault_dir, HERMES, topic="staging-host", run_id="r1")
    later = promoted(vconn, vault_dir, RACK, topic="staging-host", run_id="r2")
    assert earlier.write is not None and later.write is not None
    done = undo(vstore, earlier.write)
    assert done.outcome == UNDONE and "the rest of it was kept" in done.reason
    assert note(vault_dir, "staging-host").read_text() == original + f"\n<!-- promoted: agent alfred run r2 -->\n{RACK}\n"
    assert found(vconn, "named") == [] and found(vconn, "basement") == ["notes/staging-host.md"]
    assert undo(vstore, later.write).outcome == UNDONE  # changed since r2 wrote it: its block is taken out
    assert note(vault_dir, "staging-host").read_text() == original


def test_a_created_note_another_run_appended_to_keeps_the_later_block(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    earlier = promoted(vconn, vault_dir, HERMES, topic="staging-host", run_id="r1")
    promoted(vconn, vault_dir, RACK, topic="staging-host", run_id="r2")
    assert earlier.write is not None
    done = undo(vstore, earlier.write)
    assert (done.outcome, done.deleted) == (UNDONE, False)
    assert note(vault_dir, "staging-host").read_text() == f"<!-- promoted: agent alfred run r2 -->\n{RACK}\n"


def test_a_note_whose_block_was_edited_is_left_as_it_is(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    edited = note(vault_dir, "staging-host").read_text().replace("hermes", "hermes-2")
    update(vstore, "staging-host", edited, confirm=True)
    assert result.write is not None
    done = undo(vstore, result.write)
    assert done.outcome == LEFT and "edited since the promotion (the promoted block is no longer there verbatim)" in done.reason
    assert "'staging-host' was left as it is" in done.message
    assert note(vault_dir, "staging-host").read_text() == edited


def test_a_block_that_stands_twice_is_left(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    assert result.write is not None
    text = note(vault_dir, "staging-host").read_text()
    update(vstore, "staging-host", text + "\n" + text, confirm=True)
    done = undo(vstore, result.write)
    assert done.outcome == LEFT and "there 2 times" in done.reason


def test_a_retired_note_a_foreign_project_and_bad_utf8_are_left(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    assert result.write is not None
    other = undo(vstore, replace(result.write, project="elsewhere"))
    assert other.outcome == LEFT and "project 'elsewhere'" in other.reason
    retire(vstore, "staging-host", "idle", datetime(2026, 1, 1))
    retired = undo(vstore, result.write)
    assert retired.outcome == LEFT and "retired since (as 'stale__staging-host')" in retired.reason
    note(vault_dir, "raw").write_bytes(b"caf\xe9\n")
    raw = undo(vstore, replace(result.write, note="raw"))
    assert raw.outcome == LEFT and "not valid UTF-8" in raw.reason


# --- folded twins ------------------------------------------------------------------------------


def test_a_recurrence_that_folded_its_twin_puts_the_twin_back_byte_for_byte(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "staging-db", STAGING)
    retire(vstore, "staging-db", "idle", datetime(2026, 1, 1))
    twin = note(vault_dir, "stale__staging-db").read_bytes()
    result = promoted(vconn, vault_dir, "- The staging DB moved to port 6432.", topic="staging-db")
    assert (result.outcome, result.folded) == (CREATED, True) and result.write is not None
    assert result.write.folded_twin.encode() == twin and not note(vault_dir, "stale__staging-db").exists()
    done = undo(vstore, result.write)
    assert (done.outcome, done.deleted, done.twin_restored) == (UNDONE, True, True)
    assert "put back the retired note 'stale__staging-db'" in done.reason
    assert not note(vault_dir, "staging-db").exists() and note(vault_dir, "stale__staging-db").read_bytes() == twin
    assert found(vconn, "acme-backups") == ["notes/stale__staging-db.md"] and found(vconn, "6432") == []


def test_an_update_that_folded_a_twin_puts_both_back(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", "The frontend is built with Vite.\n")
    twin = b"<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nOld: the frontend used webpack.\n"
    note(vault_dir, "stale__frontend").write_bytes(twin)
    result = promoted(vconn, vault_dir, "- Vite builds take about 40 seconds.", topic="frontend")
    assert (result.outcome, result.folded) == (UPDATED, True) and result.write is not None
    assert undo(vstore, result.write).twin_restored
    assert note(vault_dir, "frontend").read_text() == "The frontend is built with Vite.\n"
    assert note(vault_dir, "stale__frontend").read_bytes() == twin


def test_a_folded_note_edited_since_or_a_twin_back_again_is_left(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", "The frontend is built with Vite.\n")
    twin = b"<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nOld: the frontend used webpack.\n"
    note(vault_dir, "stale__frontend").write_bytes(twin)
    result = promoted(vconn, vault_dir, "- Vite builds take about 40 seconds.", topic="frontend")
    assert result.write is not None
    note(vault_dir, "stale__frontend").write_bytes(b"a new twin\n")
    back = undo(vstore, result.write)
    assert back.outcome == LEFT and "exists again" in back.reason
    assert note(vault_dir, "stale__frontend").read_bytes() == b"a new twin\n"
    note(vault_dir, "stale__frontend").unlink()
    text = note(vault_dir, "frontend").read_text()
    update(vstore, "frontend", text + "- One more line.\n", confirm=True)
    edited = undo(vstore, result.write)
    assert edited.outcome == LEFT and "folded its retired twin back in" in edited.reason
    assert note(vault_dir, "frontend").read_text() == text + "- One more line.\n"


# --- conflicts -----------------------------------------------------------------------------------


def test_a_vault_that_keeps_changing_leaves_the_note(monkeypatch: pytest.MonkeyPatch, vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "staging-host", "# Staging host\n")
    result = promoted(vconn, vault_dir, HERMES, topic="staging-host")
    assert result.write is not None
    before = note(vault_dir, "staging-host").read_bytes()

    def conflict(path: Path, data: bytes, **kwargs: object) -> None:
        raise WriteConflict("changed")

    monkeypatch.setattr(sqlite_store, "write_atomic", conflict)
    monkeypatch.setattr(vault, "backoff", lambda attempt: None)
    done = undo(vstore, result.write)
    assert done.outcome == LEFT and "kept changing" in done.reason and "8 attempts" in done.reason
    assert note(vault_dir, "staging-host").read_bytes() == before
