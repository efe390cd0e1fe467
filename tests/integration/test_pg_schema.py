"""The PostgreSQL vault's schema on a real PostgreSQL (``pg_support``): its migrations from version 1 up,
alone and from 4 processes at once, and what the tables promise (one winner per name, searches that
never break on the user's text, CJK found through the trigram index)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_support import Cluster, fresh_database, postgres  # noqa: F401  (fixtures)
from psycopg import errors

from gateway.errors import FailedPrecondition, InvalidArgument
from services.kb.index.query import has_unsegmented
from services.kb.vault_pg import fts, schema

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = schema.DEFAULT_SCHEMA


@pytest.fixture
def conn(fresh_database: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(fresh_database, autocommit=True) as c:
        yield c


@pytest.fixture
def vault(conn: psycopg.Connection) -> psycopg.Connection:
    """A migrated database with the vault ``p``; the connection's search_path is the vault's schema."""
    schema.migrate(conn)
    conn.execute(f"SET search_path TO {SCHEMA}, public")
    conn.execute("INSERT INTO vaults (project) VALUES ('p')")
    return conn


def tables(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (SCHEMA,))
    return {r[0] for r in rows}


def history(conn: psycopg.Connection) -> list[tuple[int, str]]:
    return conn.execute(f"SELECT version, name FROM {SCHEMA}.schema_version ORDER BY version").fetchall()


def test_the_migrations_are_numbered_from_one_without_a_gap() -> None:
    versions = [m.version for m in schema.migrations()]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) >= 3
    assert schema.latest_version() == versions[-1]


def test_all_migrations_at_once_then_nothing_more(conn: psycopg.Connection) -> None:
    assert schema.current_version(conn) == 0
    assert schema.migrate(conn, applied_by="host-a") == [1, 2, 3, 4, 5, 6, 7]
    assert schema.current_version(conn) == 7
    assert [v for v, _ in history(conn)] == [1, 2, 3, 4, 5, 6, 7]
    assert {"vaults", "notes", "retrieval_log", "note_lifecycle", "vault_gc", "promotions", "vault_reflection",
            "reflection_audit", "reflection_merges", "vault_tombstones"} <= tables(conn)
    assert schema.migrate(conn) == []
    assert conn.execute(f"SELECT DISTINCT applied_by FROM {SCHEMA}.schema_version").fetchall() == [("host-a",)]


def test_word_search_reads_no_gin_pending_list(conn: psycopg.Connection) -> None:
    """Migration 5: notes_search takes entries at insert (no pending list for searches to scan), and
    notes_trigram merges its list at 256 kB."""
    schema.migrate(conn)
    options = dict(conn.execute("SELECT c.relname, c.reloptions FROM pg_class AS c JOIN pg_namespace AS s ON s.oid = c.relnamespace "
                                "WHERE s.nspname = %s AND c.relname IN ('notes_search', 'notes_trigram')", (SCHEMA,)).fetchall())
    assert options == {"notes_search": ["fastupdate=off"], "notes_trigram": ["gin_pending_list_limit=256"]}

def test_version_one_then_the_rest(conn: psycopg.Connection) -> None:
    assert schema.migrate(conn, target=1) == [1]
    assert schema.current_version(conn) == 1
    assert "notes" in tables(conn) and "retrieval_log" not in tables(conn)
    conn.execute(f"INSERT INTO {SCHEMA}.vaults (project) VALUES ('p')")
    conn.execute(f"INSERT INTO {SCHEMA}.notes (project, name, body) VALUES ('p', 'kept', 'written at version 1')")
    conn.execute(f"INSERT INTO {SCHEMA}.notes (project, name, body) VALUES ('p', '東京', '東京リージョン')")
    assert schema.migrate(conn) == [2, 3, 4, 5, 6, 7]
    assert [v for v, _ in history(conn)] == [1, 2, 3, 4, 5, 6, 7]
    assert conn.execute(f"SELECT body FROM {SCHEMA}.notes WHERE name = 'kept'").fetchone() == ("written at version 1",)
    assert conn.execute(f"SELECT name, unsegmented FROM {SCHEMA}.notes ORDER BY name").fetchall() == [
        ("kept", False), ("東京", True)]


def test_a_failing_migration_leaves_nothing_half_done(conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    schema.migrate(conn, target=1)
    broken = schema.Migration(2, "0002_broken.sql", b"CREATE TABLE half_done (x int); SELECT * FROM no_such_table;")
    first = schema.migrations()[0]
    monkeypatch.setattr(schema, "migrations", lambda: (first, broken))
    with pytest.raises(errors.UndefinedTable):
        schema.migrate(conn)
    assert schema.current_version(conn) == 1 and "half_done" not in tables(conn)


def test_a_schema_newer_than_the_code_is_refused(conn: psycopg.Connection) -> None:
    schema.migrate(conn)
    conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version, name) VALUES (99, '0099_future.sql')")
    with pytest.raises(FailedPrecondition, match="newer than this gateway's"):
        schema.migrate(conn)


def test_a_database_that_is_not_utf8_is_refused(postgres: Cluster) -> None:
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE latin TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C'")
    with psycopg.connect(postgres.dsn("latin"), autocommit=True) as c, pytest.raises(FailedPrecondition, match="UTF8"):
        schema.migrate(c)


MIGRATE_ONCE = """
import sys, psycopg
from services.kb.vault_pg import schema
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    print("ready", flush=True)
    sys.stdin.readline()
    print("applied", *schema.migrate(conn, applied_by=sys.argv[2]), flush=True)
"""


def test_four_processes_starting_at_once_apply_each_step_exactly_once(fresh_database: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", MIGRATE_ONCE, fresh_database, f"host-{i}"], cwd=ROOT, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    try:
        assert all(p.stdout.readline().strip() == "ready" for p in procs)
        for p in procs:  # all connected: let them race for the lock
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=60)[0].split() for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), outputs
    applied = sorted(int(v) for out in outputs for v in out[1:])
    assert applied == list(range(1, schema.latest_version() + 1)), outputs
    with psycopg.connect(fresh_database) as c:
        assert [v for v, _ in history(c)] == applied


def test_eight_concurrent_creates_of_one_name_have_exactly_one_winner(vault: psycopg.Connection) -> None:
    dsn = vault.info.dsn
    barrier = threading.Barrier(8)
    results: list[str] = []

    def create(i: int) -> None:
        with psycopg.connect(dsn, options=f"-c search_path={SCHEMA}") as c:
            barrier.wait(timeout=30)
            try:
                c.execute("INSERT INTO notes (project, name, body, created_agent) VALUES ('p', 'deploy', %s, %s)",
                          (f"body {i}", f"agent-{i}"))
                c.commit()
                results.append("won")
            except errors.UniqueViolation:
                results.append("lost")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == ["lost"] * 7 + ["won"]
    (body, agent), = vault.execute("SELECT body, created_agent FROM notes WHERE name = 'deploy'").fetchall()
    assert body == f"body {agent.removeprefix('agent-')}"


def test_a_note_and_its_retired_twin_are_two_rows_of_one_name(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'n', 'live')")
    vault.execute("INSERT INTO notes (project, name, body, retired, retired_at) VALUES ('p', 'n', 'old', true, now())")
    with pytest.raises(errors.UniqueViolation):
        vault.execute("UPDATE notes SET retired = true, retired_at = now() WHERE name = 'n' AND NOT retired")
    with pytest.raises(errors.CheckViolation):
        vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'stale__n', 'reserved prefix')")
    with pytest.raises(errors.CheckViolation):
        vault.execute("INSERT INTO notes (project, name, body, retired) VALUES ('p', 'm', 'no date', true)")


def test_an_update_is_compare_and_swap_on_the_version(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'n', 'one')")
    swap = "UPDATE notes SET body = %s, version = version + 1 WHERE project = 'p' AND name = 'n' AND version = %s"
    assert vault.execute(swap, ("two", 1)).rowcount == 1
    assert vault.execute(swap, ("stale writer", 1)).rowcount == 0
    assert vault.execute("SELECT body, version FROM notes WHERE name = 'n'").fetchone() == ("two", 2)


HOSTILE = [
    '"unclosed', "deploy:*", "!deploy", "deploy & | !", "a <-> b", "(((", "'; DROP TABLE notes; --", "\\", "\\'",
    "-", "or", "\"\" '' ``", ":", "*", "&&", "deploy:A", "x:*:*", "-(-)", "🙂", "\u200b", "a\\\\b\\", "é\u0301",
]


def search(conn: psycopg.Connection, text: str) -> list[str]:
    rows = conn.execute(fts.FULL_TEXT_SQL, {"project": "p", "query": fts.query_text(text), "limit": 10})
    return [r[0] for r in rows]


def test_hostile_query_text_never_breaks_the_full_text_search(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'deploy', 'How we deploy: blue green, not canary')")
    for text in HOSTILE:  # no syntax error, whatever each finds
        search(vault, text)
        fallback = fts.full_text_any([*fts.search_words(text), "deploy"], ["x"])
        assert fallback is not None and vault.execute(fallback[0], {**fallback[1], "project": "p", "limit": 10}).fetchall()
        statement, params = fts.trigram([*fts.search_words(text), "deploy"], skip=["x"])
        assert vault.execute(statement, {**params, "project": "p", "limit": 10}).fetchall()
        assert vault.execute("SELECT plainto_tsquery('simple', %s)::text", (text,)).fetchone() is not None
    assert search(vault, "deploy:*") == search(vault, "!deploy") == ["deploy"]


def test_full_text_search_finds_words_and_phrases_and_ranks_them(vault: psycopg.Connection) -> None:
    vault.execute(
        "INSERT INTO notes (project, name, body) VALUES ('p', 'a', 'the staging host is named hermes'), "
        "('p', 'b', 'hermes named the host staging'), ('p', 'c', 'nothing here'), "
        "('p', 'frontmatter', 'body words')"
    )
    vault.execute("UPDATE notes SET head = E'---\\ntitle: hidden\\n---\\n' WHERE name = 'frontmatter'")
    assert search(vault, "staging hermes") == ["a", "b"]
    assert search(vault, '"host is named"') == ["a"]
    assert search(vault, "hermes -staging") == []
    assert search(vault, "HERMES") == ["a", "b"]
    assert search(vault, "hidden") == []  # frontmatter is not searched


def test_a_nul_in_the_query_is_refused_cleanly() -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        fts.query_text("dep\x00loy")
    with pytest.raises(InvalidArgument, match="NUL"):
        fts.like_pattern("\x00")
    with pytest.raises(InvalidArgument, match="at most"):
        fts.query_text("x" * (fts.MAX_QUERY_CHARS + 1))


def trigram(conn: psycopg.Connection, term: str) -> list[str]:
    statement, params = fts.trigram([term])
    return [r[0] for r in conn.execute(statement, {**params, "project": "p", "limit": 10})]


def test_a_trigram_query_finds_cjk_and_thai_text_inside_a_run(vault: psycopg.Connection) -> None:
    vault.execute(
        "INSERT INTO notes (project, name, body) VALUES ('p', '東京', '本番環境は東京リージョンにデプロイする'), "
        "('p', 'thai', 'เซิร์ฟเวอร์ทดสอบอยู่ที่กรุงเทพ'), ('p', 'latin', 'percent 100%_done \\ backslash')"
    )
    assert trigram(vault, "リージョン") == ["東京"]
    assert trigram(vault, "東京") == ["東京"]  # two characters: a scan, still found
    assert trigram(vault, "กรุงเทพ") == ["thai"]
    assert trigram(vault, "100%_") == ["latin"] and trigram(vault, "0%x") == []
    assert trigram(vault, "\\ back") == ["latin"]
    assert search(vault, "リージョン") == []  # a run is one word to 'simple': why the trigram path exists


def test_the_trigram_index_serves_a_cjk_substring_query(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) SELECT 'p', 'n' || i, 'filler text ' || i FROM generate_series(1, 2000) AS i")
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', '東京', '本番環境は東京リージョンにデプロイする')")
    vault.execute("ANALYZE notes")
    vault.execute("SET enable_seqscan = off")  # the table is small: only whether the index can serve the match
    pattern = fts.like_pattern("リージョン")
    plan = "\n".join(r[0] for r in vault.execute("EXPLAIN SELECT name FROM notes WHERE body LIKE %s", (pattern,)))
    assert "notes_trigram" in plan, plan


def test_the_unsegmented_column_marks_the_text_the_vault_routes_to_the_trigram_path(vault: psycopg.Connection) -> None:
    edges = [chr(c) for c in (0x0E00, 0x0EFF, 0x1000, 0x109F, 0x1780, 0x17FF, 0x3005, 0x3040, 0x30FF, 0x31F0, 0x31FF,
                              0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0xF900, 0xFAFF, 0xAC00, 0xD7AF, 0xFF66, 0xFF9F, 0x20000,
                              0x3134F)]  # fmt: skip
    outside = [chr(c) for c in (0x0DFF, 0x0F00, 0x3004, 0x3100, 0x4DC0, 0xFF65, 0xFFA0, 0x1F914, 0x31350)] + ["é", "a"]
    for i, char in enumerate(edges + outside):
        vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', %s, %s)", (f"n{i}", f"x {char} y"))
    marked = dict(vault.execute("SELECT body, unsegmented FROM notes").fetchall())
    assert marked == {f"x {char} y": has_unsegmented(char) for char in edges + outside}
    assert all(marked[f"x {char} y"] for char in edges)


def test_a_short_cjk_word_reads_only_the_notes_holding_such_text(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) SELECT 'p', 'n' || i, 'filler text ' || i FROM generate_series(1, 2000) AS i")
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', '東京', '本番環境は東京リージョン'), ('p', '京都', '京都')")
    vault.execute("ANALYZE notes")
    statement, params = fts.trigram(["東京"])
    plan = "\n".join(r[0] for r in vault.execute("EXPLAIN " + statement, {**params, "project": "p", "limit": 10}))
    assert "notes_unsegmented" in plan, plan
    assert trigram(vault, "東京") == ["東京"] and trigram(vault, "京") == ["京都", "東京"]


def test_a_large_note_of_distinct_words_is_indexed(vault: psycopg.Connection) -> None:
    words = " ".join(f"w{i:x}" for i in range(200_000))  # over 1 MB of text, every word distinct
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'big', %s)", (words,))
    assert search(vault, "w10") == ["big"]


def test_the_vault_lock_is_held_until_the_transaction_ends(vault: psycopg.Connection) -> None:
    dsn = vault.info.dsn
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        schema.lock_vault(first, "p")
        try_lock = "SELECT pg_try_advisory_xact_lock(%s, %s)"
        key = (schema.VAULT_LOCK_SPACE, schema.vault_lock_key("p"))
        assert second.execute(try_lock, key).fetchone() == (False,)
        assert second.execute(try_lock, (schema.VAULT_LOCK_SPACE, schema.vault_lock_key("q"))).fetchone() == (True,)
        second.rollback()
        first.commit()
        assert second.execute(try_lock, key).fetchone() == (True,)


def test_deleting_a_vault_deletes_everything_it_holds(vault: psycopg.Connection) -> None:
    vault.execute("INSERT INTO notes (project, name, body) VALUES ('p', 'n', 'x')")
    vault.execute("INSERT INTO retrieval_log (project, name, entry_hash, at, kind) VALUES ('p', 'n', 'h', now(), 'get')")
    vault.execute("INSERT INTO note_lifecycle (project, name, retrieval_count) VALUES ('p', 'n', 1)")
    vault.execute("INSERT INTO vault_gc (project, day, claimed_by) VALUES ('p', '2026-11-30', 'a')")
    vault.execute("INSERT INTO promotions (project, request_id, agent_id, run_id, outcome) VALUES ('p', 'r', 'a', 'run', 'declined')")
    vault.execute("DELETE FROM vaults WHERE project = 'p'")
    for table in ("notes", "retrieval_log", "note_lifecycle", "vault_gc", "promotions"):
        assert vault.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table


def test_a_least_privilege_role_that_owns_only_its_schema_can_migrate(postgres: Cluster, fresh_database: str) -> None:
    """docs/operations.md "PostgreSQL for the shared vault": the owner's statements, then the KB's start as the role."""
    dbname = psycopg.conninfo.conninfo_to_dict(fresh_database)["dbname"]
    with psycopg.connect(fresh_database, autocommit=True) as owner:
        owner.execute("DO $$ BEGIN CREATE ROLE gateway_vault LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        owner.execute(f'REVOKE ALL ON DATABASE "{dbname}" FROM PUBLIC')
        owner.execute(f'GRANT CONNECT, TEMPORARY ON DATABASE "{dbname}" TO gateway_vault')
        owner.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        owner.execute("CREATE SCHEMA gateway_vault AUTHORIZATION gateway_vault")
    with psycopg.connect(postgres.dsn(dbname, user="gateway_vault"), autocommit=True) as role:
        assert role.execute("SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user").fetchone() == (
            False, False)
        assert schema.migrate(role) == [1, 2, 3, 4, 5, 6, 7]
        role.execute(f"SET search_path TO {SCHEMA}, public")
        role.execute("INSERT INTO vaults (project) VALUES ('p')")
        role.execute("INSERT INTO notes (project, name, body) VALUES ('p', '東京', '東京リージョン')")
        assert trigram(role, "リージョン") == ["東京"]
        with pytest.raises(errors.InsufficientPrivilege):
            role.execute("CREATE TABLE public.elsewhere (x int)")
        with pytest.raises(errors.InsufficientPrivilege):
            role.execute("CREATE SCHEMA another")
