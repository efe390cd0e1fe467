"""Shared-vault CRUD: create/get/update/delete rules, every failure and confirm path."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from gateway.atomic import WriteConflict
from gateway.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from services.kb.vault import notes as vault
from services.kb.vault.note_index import search_vault
from services.kb.vault.notes import MAX_NOTE_BYTES, NoteExists, NoteMissing, create, delete, get, line_drop, update
from services.kb.vault import sqlite_store
from services.kb.vault.sqlite_store import SqliteVaultStore

STAGING = (
    "The staging database runs PostgreSQL 15 on port 5433.\n"
    "Backups run nightly at 02:00 UTC to the acme-backups S3 bucket.\n"
)
STAGING_REWORDED = (
    "Nightly backups of the Postgres staging DB go to the acme-backups S3 bucket at 2am UTC;\n"
    "the database listens on 5433 (version 15).\n"
)
DEPLOY = (
    "To deploy the API, run make release: it builds the Docker image, pushes it to the GHCR\n"
    "registry and rolls the Kubernetes deployment in the prod cluster.\n"
)
DEPLOY_REWORDED = (
    "Releasing the API: the Kubernetes deployment in the prod cluster is rolled by make release,\n"
    "after the Docker image is built and pushed to the GHCR registry.\n"
)
ONCALL = (
    "The on-call rotation changes every Monday at 09:00 Berlin time.\n"
    "The schedule lives in PagerDuty under the Platform team.\n"
)
ONCALL_REWORDED = "PagerDuty holds the Platform team schedule; the on-call rotation hands over on Mondays, 09:00 Berlin time.\n"
PLANNING = (
    "Quarterly planning for the Platform team happens in the Berlin office.\n"
    "Bring laptops and the roadmap document; lunch is provided.\n"
)
FRONTEND = "The frontend is built with Vite and published to Cloudflare Pages on every merge to main.\n"


def note_file(vault_dir: Path, name: str) -> Path:
    return vault_dir / "notes" / f"{name}.md"


def hit_names(conn: apsw.Connection, query: str) -> list[str]:
    return [h.path for h in search_vault(conn, query, 20).hits]


# --- create -----------------------------------------------------------------


def test_create_writes_the_note_and_indexes_it_at_once(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = create(vstore, "staging-db", STAGING)
    assert result.created and result.related == () and result.linked == ()
    assert note_file(vault_dir, "staging-db").read_text(encoding="utf-8") == STAGING
    hits = search_vault(vconn, "acme-backups", 5).hits
    assert [h.path for h in hits] == ["notes/staging-db.md"]
    assert hits[0].provenance == "agent"


def test_create_uses_the_trimmed_name(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    assert create(vstore, "  spaced  ", FRONTEND).name == "spaced"
    assert note_file(vault_dir, "spaced").is_file()


def test_create_refuses_an_exact_name_collision_pointing_to_update(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", FRONTEND)
    with pytest.raises(AlreadyExists) as caught:
        create(vstore, "frontend", "something else entirely", confirm=True)
    assert caught.value.message == "a shared note named 'frontend' already exists"  # transports add the next step
    assert isinstance(caught.value, NoteExists) and caught.value.name == "frontend"
    assert note_file(vault_dir, "frontend").read_text(encoding="utf-8") == FRONTEND


def test_create_refuses_a_reserved_or_bad_name(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    for name in ("stale__frontend", "../escape", ".hidden", "a/b"):
        with pytest.raises(InvalidArgument):
            create(vstore, name, FRONTEND, confirm=True)
    assert sorted(p.name for p in (vault_dir / "notes").iterdir()) == []


def test_size_cap_boundary_on_create(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    assert MAX_NOTE_BYTES == 102_400
    exact = "x" * MAX_NOTE_BYTES
    assert create(vstore, "exact", exact).created
    assert note_file(vault_dir, "exact").stat().st_size == 102_400
    with pytest.raises(InvalidArgument):
        create(vstore, "over", exact + "y")
    # Multi-byte: 51,200 × "é" is 102,400 bytes; one more ASCII byte is over.
    assert create(vstore, "accents", "é" * 51_200).created
    with pytest.raises(InvalidArgument):
        create(vstore, "accents-over", "é" * 51_200 + "!")
    assert not note_file(vault_dir, "over").exists() and not note_file(vault_dir, "accents-over").exists()


@pytest.mark.parametrize(
    ("existing", "reworded"),
    [(STAGING, STAGING_REWORDED), (DEPLOY, DEPLOY_REWORDED), (ONCALL, ONCALL_REWORDED)],
    ids=["staging-db", "deploy", "on-call"],
)
def test_create_returns_a_reworded_near_duplicate_instead_of_writing(
    vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, existing: str, reworded: str
) -> None:
    for name, content in (("original", existing), ("planning", PLANNING), ("frontend", FRONTEND)):
        create(vstore, name, content, confirm=True)
    result = create(vstore, "new-name", reworded)
    assert not result.created
    assert [r.name for r in result.related] == ["original"]
    assert 0.4 <= result.related[0].score <= 1.0
    assert result.related[0].snippet
    assert result.message == "nothing was written: 1 similar shared note(s) exist ('original')"
    assert not note_file(vault_dir, "new-name").exists()


def test_an_unrelated_note_is_not_a_near_duplicate(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    for name, content in (("staging-db", STAGING), ("deploy", DEPLOY), ("on-call", ONCALL)):
        create(vstore, name, content, confirm=True)
    # PLANNING shares "Platform", "team" and "Berlin" with ON-CALL: below the bar.
    result = create(vstore, "planning", PLANNING)
    assert result.created and result.related == ()
    assert create(vstore, "frontend", FRONTEND).created


def test_the_same_content_twice_is_caught(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "deploy", DEPLOY)
    result = create(vstore, "deploy-copy", DEPLOY)
    assert not result.created and result.related[0].name == "deploy" and result.related[0].score == 1.0


def test_confirm_writes_past_the_nudge_and_links_each_related_note(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "staging-db", STAGING)
    create(vstore, "staging db copy", STAGING, confirm=True)
    result = create(vstore, "pg staging", STAGING_REWORDED, confirm=True)
    assert result.created
    assert set(result.linked) == {"staging-db", "staging db copy"}
    text = note_file(vault_dir, "pg staging").read_text(encoding="utf-8")
    assert text.startswith(STAGING_REWORDED.rstrip("\n"))
    last = text.rstrip("\n").splitlines()[-1]
    assert last.startswith("Related: ")
    assert "[[staging-db]]" in last and "[[staging db copy]]" in last
    assert text.count("Related:") == 1 and text.endswith("\n")
    assert "notes/pg staging.md" in hit_names(vconn, "listens")


def test_confirm_does_not_duplicate_an_existing_link(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "deploy", DEPLOY)
    content = DEPLOY_REWORDED + "\nSee [[deploy]] for the long version.\n"
    result = create(vstore, "release", content, confirm=True)
    assert result.created and result.linked == ()
    assert note_file(vault_dir, "release").read_text(encoding="utf-8") == content


def test_confirm_without_related_notes_writes_the_content_unchanged(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    result = create(vstore, "frontend", FRONTEND, confirm=True)
    assert result.created and result.linked == ()
    assert note_file(vault_dir, "frontend").read_text(encoding="utf-8") == FRONTEND


def test_retired_notes_are_never_near_duplicates(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "deploy", DEPLOY)
    vault.delete(vstore, "deploy")
    note_file(vault_dir, "stale__deploy").write_text(DEPLOY, encoding="utf-8")
    from services.kb.vault.note_index import reindex_notes

    reindex_notes(vconn, vault_dir, ["stale__deploy"])
    assert hit_names(vconn, "Kubernetes") == ["notes/stale__deploy.md"]
    assert create(vstore, "release", DEPLOY_REWORDED).created


def test_a_concurrent_create_of_the_same_name_is_already_exists(
    vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite_store.write_atomic

    def racing(path: Path, data: bytes, **kwargs: object) -> None:
        path.write_text("the other writer won\n", encoding="utf-8")
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "write_atomic", racing)
    with pytest.raises(AlreadyExists):
        create(vstore, "frontend", FRONTEND)
    assert note_file(vault_dir, "frontend").read_text(encoding="utf-8") == "the other writer won\n"


# --- get --------------------------------------------------------------------


def test_get_returns_the_full_current_content(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    big = "".join(f"line {n} of a long note\n" for n in range(3000))
    create(vstore, "long", big)
    note = get(SqliteVaultStore(vault_dir, None), "long")
    assert note.content == big and note.size_bytes == len(big.encode()) and not note.retired
    note_file(vault_dir, "long").write_text("edited by hand\n", encoding="utf-8")
    assert get(SqliteVaultStore(vault_dir, None), " long ").content == "edited by hand\n"


def test_get_missing_is_not_found(vconn: apsw.Connection, vault_dir: Path) -> None:
    with pytest.raises(NotFound):
        get(SqliteVaultStore(vault_dir, None), "nothing")
    with pytest.raises(InvalidArgument):
        get(SqliteVaultStore(vault_dir, None), "../kb.sqlite")


# --- update -----------------------------------------------------------------


def test_update_missing_is_not_found_pointing_to_create(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    with pytest.raises(NotFound) as caught:
        update(vstore, "nothing", "content", confirm=True)
    assert caught.value.message == "no shared note named 'nothing'"
    assert isinstance(caught.value, NoteMissing) and caught.value.name == "nothing"
    assert not note_file(vault_dir, "nothing").exists()


def test_update_replaces_the_full_content_and_reindexes(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", FRONTEND)
    new = FRONTEND + "Preview builds go to pages.dev subdomains.\n"
    result = update(vstore, "frontend", new)
    assert result.updated and result.warning is None and result.dropped_lines == 0
    assert get(SqliteVaultStore(vault_dir, None), "frontend").content == new
    assert hit_names(vconn, "subdomains") == ["notes/frontend.md"]
    update(vstore, "frontend", "Vite is gone; we use esbuild now.\n", confirm=True)
    assert hit_names(vconn, "subdomains") == []
    assert hit_names(vconn, "esbuild") == ["notes/frontend.md"]


def numbered(count: int) -> list[str]:
    return [f"fact number {n} about the system" for n in range(count)]


@pytest.mark.parametrize(("total", "drop", "warns"), [(100, 49, False), (100, 50, True), (2, 1, True), (3, 1, False), (4, 2, True)])
def test_the_line_drop_guard_warns_at_half(
    vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, total: int, drop: int, warns: bool
) -> None:
    lines = numbered(total)
    old = "\n".join(lines) + "\n"
    create(vstore, "facts", old)
    new = "\n".join(lines[drop:] + ["a brand new line"]) + "\n"
    result = update(vstore, "facts", new)
    assert (result.dropped_lines, result.total_lines) == (drop, total)
    assert result.updated is not warns
    assert (result.warning is not None) is warns
    assert get(SqliteVaultStore(vault_dir, None), "facts").content == (old if warns else new)
    if warns:
        assert result.warning == (
            f"nothing was written: this update would drop {drop} of the note's {total} non-blank lines (50% or more)"
        )
        assert hit_names(vconn, "brand") == []
        confirmed = update(vstore, "facts", new, confirm=True)
        assert confirmed.updated and get(SqliteVaultStore(vault_dir, None), "facts").content == new
        assert hit_names(vconn, "brand") == ["notes/facts.md"]


def test_line_drop_counting_rules() -> None:
    # Blank lines never count; whitespace around a line is ignored; moved lines are kept.
    assert line_drop("a\n\n  b  \n\n", "b\na\n") == (0, 2)
    assert line_drop("a\nb\nc\nd\n", "d\nc\n") == (2, 4)
    # A line kept inside a longer line is still dropped: lines compare whole.
    assert line_drop("alpha\nbeta\n", "alpha beta\n") == (2, 2)
    # Each old occurrence counts.
    assert line_drop("x\nx\ny\n", "y\n") == (2, 3)
    assert line_drop("\n\n", "") == (0, 0)


def test_updating_an_empty_note_never_warns(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "empty", "")
    assert update(vstore, "empty", "now it has content\n").updated


def test_update_size_cap_boundary(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "big", "start\n")
    assert update(vstore, "big", "start\n" + "x" * (MAX_NOTE_BYTES - 6)).updated
    with pytest.raises(InvalidArgument):
        update(vstore, "big", "start\n" + "x" * (MAX_NOTE_BYTES - 5), confirm=True)
    assert get(SqliteVaultStore(vault_dir, None), "big").size_bytes == MAX_NOTE_BYTES


def test_update_of_a_retired_name_is_refused(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    note_file(vault_dir, "stale__old").write_text("retired\n", encoding="utf-8")
    with pytest.raises(InvalidArgument):
        update(vstore, "stale__old", "new", confirm=True)


def racing_writer(monkeypatch: pytest.MonkeyPatch, edits: list[str], pauses: list[int] | None = None) -> None:
    """Before each of the next writes, another writer changes the file (one edit per write)."""
    real = sqlite_store.write_atomic
    pauses = pauses if pauses is not None else []

    def racing(path: Path, data: bytes, **kwargs: object) -> None:
        if edits:
            path.write_text(edits.pop(0), encoding="utf-8")
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "write_atomic", racing)
    monkeypatch.setattr(vault, "backoff", pauses.append)


def test_update_rejudges_after_a_concurrent_edit(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create(vstore, "frontend", FRONTEND)
    # The concurrent edit makes the same update drop most of the note: the guard sees it.
    racing_writer(monkeypatch, ["one\ntwo\nthree\n" + FRONTEND])
    result = update(vstore, "frontend", FRONTEND + "more\n")
    assert not result.updated and (result.dropped_lines, result.total_lines) == (3, 4)
    assert get(SqliteVaultStore(vault_dir, None), "frontend").content == "one\ntwo\nthree\n" + FRONTEND
    # A harmless concurrent edit: the update is retried and lands (last writer wins).
    racing_writer(monkeypatch, [FRONTEND + "theirs\n"])
    assert update(vstore, "frontend", FRONTEND + "mine\n", confirm=True).updated
    assert get(SqliteVaultStore(vault_dir, None), "frontend").content == FRONTEND + "mine\n"


def test_update_gives_up_after_repeated_conflicts(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create(vstore, "frontend", FRONTEND)
    pauses: list[int] = []
    racing_writer(monkeypatch, [f"edit {n}\n" for n in range(vault.UPDATE_ATTEMPTS)], pauses)
    with pytest.raises(WriteConflict):
        update(vstore, "frontend", "mine\n", confirm=True)
    assert issubclass(WriteConflict, FailedPrecondition)
    assert get(SqliteVaultStore(vault_dir, None), "frontend").content == f"edit {vault.UPDATE_ATTEMPTS - 1}\n"
    assert pauses == list(range(1, vault.UPDATE_ATTEMPTS))  # a pause between attempts, none after the last


# --- delete -----------------------------------------------------------------


def test_delete_removes_the_file_and_its_index_rows(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", FRONTEND)
    assert vault.delete(vstore, "frontend").deleted
    assert not note_file(vault_dir, "frontend").exists()
    assert hit_names(vconn, "Cloudflare") == []
    rows = vconn.execute("SELECT count(*) FROM kb_sources WHERE path = 'notes/frontend.md'").fetchall()
    assert rows[0][0] == 0
    assert vconn.execute("SELECT count(*) FROM kb_chunks").fetchall()[0][0] == 0


def test_delete_missing_is_not_found(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    with pytest.raises(NotFound):
        delete(vstore, "nothing")
    with pytest.raises(InvalidArgument):
        delete(vstore, "..")


def test_a_deleted_name_can_be_created_again(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    create(vstore, "frontend", FRONTEND)
    delete(vstore, "frontend")
    assert create(vstore, "frontend", FRONTEND).created
    assert hit_names(vconn, "Cloudflare") == ["notes/frontend.md"]


def test_common_words_alone_do_not_make_a_near_duplicate(vstore: SqliteVaultStore, vconn: apsw.Connection, vault_dir: Path) -> None:
    """The seed prefers the vault's rare words: sharing only everyday words is not similarity."""
    common = "build question partner still review update team weekly status report meeting plan"
    for i in range(30):
        vault.create(vstore, f"note {i}", f"# Note {i}\n- {common} topic{i}x unique{i}y\n", confirm=True)
    fresh = f"# Espresso\n- {common}\n- espresso grinder calibration burr tamper crema portafilter ristretto\n"
    result = vault.create(vstore, "espresso", fresh)
    assert result.created and result.related == ()
    again = vault.create(vstore, "espresso 2", fresh.replace("Espresso", "Coffee"))
    assert not again.created and [r.name for r in again.related] == ["espresso"]
