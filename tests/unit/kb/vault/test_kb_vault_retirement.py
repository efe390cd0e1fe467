"""Shared-vault retirement: byte-for-byte retire/restore, the twin rule, recurrence folding."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import apsw
import pytest

from gateway.errors import FailedPrecondition, InvalidArgument, NotFound
from services.kb.vault import notes as vault
from services.kb.vault.note_index import reindex_notes, search_vault
from services.kb.vault.notes import MAX_NOTE_BYTES, create, get, update
from services.kb.vault.retirement import FOLD_MARKER, Marker, add_marker, marker_line, read_marker, restore, retire, strip_marker
from services.kb.vault.sqlite_store import SqliteVaultStore

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
BODY = "Redis runs on cache-01 with maxmemory 4gb and the allkeys-lru policy.\n"

ODD_BYTES = [
    b"plain body\nsecond line\n",
    b"no trailing newline",
    b"",
    b"crlf line one\r\ncrlf line two\r\n",
    b"---\ntitle: Cache\nprovenance: untrusted\n---\nbody after frontmatter\n",
    b"---\ntitle: only frontmatter\n---",
    b"\xef\xbb\xbfBOM first\n",
    b"trailing spaces   \n\n\n",
    b"<!-- retired: 2020-01-01T00:00:00Z reason: looks like a marker -->\nbody\n",
]


def note_file(vault_dir: Path, name: str) -> Path:
    return vault_dir / "notes" / f"{name}.md"


def paths(conn: apsw.Connection, query: str) -> list[str]:
    return [h.path for h in search_vault(conn, query, 20).hits]


def put(conn: apsw.Connection, vault_dir: Path, name: str, data: bytes) -> None:
    note_file(vault_dir, name).write_bytes(data)
    reindex_notes(conn, vault_dir, [name])


def test_marker_line_format() -> None:
    assert marker_line(NOW, "not retrieved in 90 days") == (
        "<!-- retired: 2026-11-30T12:00:00Z reason: not retrieved in 90 days -->"
    )
    local = datetime(2026, 11, 30, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert "2026-11-30T12:00:00Z" in marker_line(local, "x")
    assert marker_line(datetime(2026, 11, 30, 12, 0, 0), "x").startswith("<!-- retired: 2026-11-30T12:00:00Z")
    hostile = marker_line(NOW, "ends --> here\nand <b>more</b>" + "z" * 500)
    assert hostile.count("-->") == 1 and "\n" not in hostile and hostile.endswith(" -->")
    assert marker_line(NOW, "  ").endswith("reason: unspecified -->")


@pytest.mark.parametrize("data", ODD_BYTES)
def test_add_then_strip_marker_is_byte_for_byte(data: bytes) -> None:
    marked = add_marker(data, marker_line(NOW, "why"))
    assert marked != data
    assert strip_marker(marked) == (data, True)


@pytest.mark.parametrize("data", ODD_BYTES)
def test_read_marker_gives_the_time_and_reason_of_the_marker_retire_added(data: bytes) -> None:
    marker = read_marker(add_marker(data, marker_line(NOW, "vault GC: not retrieved --> in 200 days")))
    assert marker == Marker(NOW, "vault GC: not retrieved -- in 200 days")  # ">" cannot end the comment
    assert read_marker(b"plain body\n") is None
    assert read_marker(b"<!-- retired: yesterday reason: by hand -->\nbody\n") == Marker(None, "by hand")


@pytest.mark.parametrize("data", ODD_BYTES)
def test_retire_and_restore_are_byte_for_byte(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, data: bytes) -> None:
    put(vconn, vault_dir, "cache", data)
    result = retire(vstore, "cache", "idle 90 days", NOW)
    assert result.retired_name == "stale__cache"
    assert not note_file(vault_dir, "cache").exists()
    retired = note_file(vault_dir, "stale__cache").read_bytes()
    eol = b"\r\n" if data.startswith(b"crlf") else b"\n"
    line = result.marker.encode() + eol
    assert retired.count(result.marker.encode()) == 1
    # exactly one line added, nothing else changed (after a last line without a line end, the marker
    # line gives that line the one it lacked)
    assert retired.replace(line, b"", 1) == data or retired == data + eol + result.marker.encode()
    restored = restore(vstore, "cache")
    assert restored.name == "cache"
    assert note_file(vault_dir, "cache").read_bytes() == data
    assert not note_file(vault_dir, "stale__cache").exists()


def test_a_note_that_is_only_frontmatter_keeps_it_when_retired(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    """Without a final newline too, the marker goes after the closing ``---``: before it, the
    retired note's frontmatter (its provenance) would stop counting."""
    data = b"---\nprovenance: untrusted\n---"
    put(vconn, vault_dir, "bare", data)
    retire(vstore, "bare", "r", NOW)
    assert note_file(vault_dir, "stale__bare").read_bytes() == data + b"\n" + marker_line(NOW, "r").encode()
    provenance = {str(r[0]): str(r[1]) for r in vconn.execute("SELECT path, provenance FROM kb_sources")}
    assert provenance == {"notes/stale__bare.md": "untrusted"}
    restore(vstore, "bare")
    assert note_file(vault_dir, "bare").read_bytes() == data


def test_the_marker_goes_after_frontmatter_and_is_first_line_otherwise(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "plain", b"body\n")
    put(vconn, vault_dir, "fm", b"---\nprovenance: untrusted\n---\nbody\n")
    retire(vstore, "plain", "r", NOW)
    retire(vstore, "fm", "r", NOW)
    marker = marker_line(NOW, "r")
    assert get(SqliteVaultStore(vault_dir, None), "stale__plain").content == f"{marker}\nbody\n"
    assert get(SqliteVaultStore(vault_dir, None), "stale__fm").content == f"---\nprovenance: untrusted\n---\n{marker}\nbody\n"
    # The frontmatter still counts while retired: fail-closed provenance survives.
    provenance = {str(r[0]): str(r[1]) for r in vconn.execute("SELECT path, provenance FROM kb_sources")}
    assert provenance == {"notes/stale__plain.md": "agent", "notes/stale__fm.md": "untrusted"}


def test_retired_notes_stay_searchable_and_readable(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "cache", BODY)
    retire(vstore, "cache", "idle", NOW)
    assert paths(vconn, "allkeys") == ["notes/stale__cache.md"]
    note = get(SqliteVaultStore(vault_dir, None), "stale__cache")
    assert note.retired and BODY in note.content
    with pytest.raises(NotFound) as caught:
        get(SqliteVaultStore(vault_dir, None), "cache")
    assert "stale__cache" in caught.value.message


def test_retire_keeps_entry_hashes(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "cache", BODY)
    before = {r[0] for r in vconn.execute("SELECT entry_hash FROM kb_entries")}
    retire(vstore, "cache", "idle", NOW)
    after = {r[0] for r in vconn.execute("SELECT entry_hash FROM kb_entries")}
    assert before == after and len(before) == 1


def test_retire_and_restore_refusals(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    with pytest.raises(NotFound):
        retire(vstore, "missing", "r", NOW)
    with pytest.raises(NotFound):
        restore(vstore, "missing")
    with pytest.raises(InvalidArgument):
        retire(vstore, "stale__x", "r", NOW)
    create(vstore, "cache", BODY)
    note_file(vault_dir, "stale__cache").write_text("an older twin\n", encoding="utf-8")
    with pytest.raises(FailedPrecondition):
        retire(vstore, "cache", "r", NOW)  # never overwrites a twin
    assert note_file(vault_dir, "cache").read_text(encoding="utf-8") == BODY
    with pytest.raises(FailedPrecondition):
        restore(vstore, "cache")  # never overwrites a live note
    assert note_file(vault_dir, "stale__cache").read_text(encoding="utf-8") == "an older twin\n"


def test_restore_accepts_the_retired_name_and_a_markerless_twin(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "stale__hand", b"renamed by hand\n")
    assert restore(vstore, "stale__hand").name == "hand"
    assert note_file(vault_dir, "hand").read_bytes() == b"renamed by hand\n"
    assert paths(vconn, "renamed") == ["notes/hand.md"]


def test_a_live_note_and_its_twin_never_answer_the_same_query(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    put(vconn, vault_dir, "stale__cache", ("<!-- retired: 2026-01-01T00:00:00Z reason: r -->\n" + BODY).encode())
    put(vconn, vault_dir, "cache", (BODY + "Eviction alerts go to #ops.\n").encode())
    put(vconn, vault_dir, "stale__orphan", b"orphan twin mentions allkeys too\n")
    assert sorted(paths(vconn, "allkeys")) == ["notes/cache.md", "notes/stale__orphan.md"]
    # The twin is dropped before the limit: one result asked, one live result given.
    assert [h.path for h in search_vault(vconn, "redis", 1).hits] == ["notes/cache.md"]
    # Without the live note, the twin answers again.
    vault.delete(vstore, "cache")
    assert paths(vconn, "maxmemory") == ["notes/stale__cache.md"]


@pytest.mark.parametrize("path", ["create", "update"])
def test_a_recurrence_folds_the_retired_body_back_and_drops_the_twin(
    vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, path: str
) -> None:
    create(vstore, "cache", BODY)
    retire(vstore, "cache", "idle", NOW)
    new = "Cache hit ratio target is 95 percent.\n"
    if path == "create":
        result = create(vstore, "cache", new, confirm=True)
        assert result.created and result.folded and not result.twin_kept
    else:
        note_file(vault_dir, "cache").write_text("placeholder\n", encoding="utf-8")
        reindex_notes(vconn, vault_dir, ["cache"])
        result_u = update(vstore, "cache", new, confirm=True)
        assert result_u.updated and result_u.folded
    text = get(SqliteVaultStore(vault_dir, None), "cache").content
    assert text == new + "\n" + FOLD_MARKER + "\n" + BODY
    assert "retired:" not in text
    assert not note_file(vault_dir, "stale__cache").exists()
    assert paths(vconn, "allkeys") == ["notes/cache.md"]
    assert paths(vconn, "ratio") == ["notes/cache.md"]
    assert vconn.execute("SELECT count(*) FROM kb_sources WHERE path LIKE '%stale__%'").fetchall()[0][0] == 0


def test_folding_skips_a_body_the_new_content_already_holds(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "cache", BODY)
    retire(vstore, "cache", "idle", NOW)
    new = "Updated:\n" + BODY
    result = create(vstore, "cache", new, confirm=True)
    assert result.folded and get(SqliteVaultStore(vault_dir, None), "cache").content == new
    assert not note_file(vault_dir, "stale__cache").exists()


def test_a_fold_over_the_cap_writes_unfolded_and_keeps_the_twin(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "cache", BODY)
    retire(vstore, "cache", "idle", NOW)
    new = "y" * MAX_NOTE_BYTES
    result = create(vstore, "cache", new, confirm=True)
    assert result.created and not result.folded and result.twin_kept
    assert get(SqliteVaultStore(vault_dir, None), "cache").content == new
    assert note_file(vault_dir, "stale__cache").exists()
    # The twin rule hides it while the live note exists.
    assert paths(vconn, "allkeys") == []


def test_a_twin_that_is_not_valid_utf8_is_kept_byte_for_byte_not_folded(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    raw = b"<!-- retired: 2026-01-01T00:00:00Z reason: idle -->\nLatin-1: caf\xe9 allkeys\n"
    note_file(vault_dir, "stale__cache").write_bytes(raw)
    result = create(vstore, "cache", "Cache hit ratio target is 95 percent.\n", confirm=True)
    assert result.created and not result.folded and result.twin_kept
    assert note_file(vault_dir, "stale__cache").read_bytes() == raw
    assert "\ufffd" not in get(SqliteVaultStore(vault_dir, None), "cache").content


def test_a_refused_write_leaves_the_twin_in_place(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "cache", BODY)
    retire(vstore, "cache", "idle", NOW)
    with pytest.raises(InvalidArgument):
        create(vstore, "cache", "z" * (MAX_NOTE_BYTES + 1), confirm=True)
    assert note_file(vault_dir, "stale__cache").exists() and not note_file(vault_dir, "cache").exists()
