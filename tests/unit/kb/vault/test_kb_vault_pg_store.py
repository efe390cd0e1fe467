"""What only the PostgreSQL vault store promises beyond the contract (``test_kb_vault_store_contract``): one
winner among concurrent creates of a name, ``writing`` serialising write decisions across connections (as
across hosts), compare-and-swap against a concurrent update, bytes PostgreSQL cannot hold refused cleanly,
an unreachable server answered Unavailable naming the vault, and a pool kept busy said to be busy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pg_support import free_port

from gateway.atomic import WriteConflict
from gateway.config_model import VaultPostgresSettings
from gateway.errors import CommandError, InvalidArgument, Unavailable
from services.kb.vault_pg import pool
from services.kb.vault_pg.schema import migrate
from services.kb.vault_pg.store import PostgresVaultStore, split_note


@pytest.fixture
def stores(pg_opener: Callable[..., PostgresVaultStore]) -> list[PostgresVaultStore]:
    """Two stores of one vault (``global``) on one migrated schema, as two hosts see it."""
    first = pg_opener()
    return [first, PostgresVaultStore(first.pool, "global")]


def test_of_eight_concurrent_creates_of_one_name_exactly_one_wins(stores: list[PostgresVaultStore]) -> None:
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def create(i: int) -> None:
        start.wait()
        try:
            stores[i % 2].write("rota", f"written by {i}\n".encode(), expected=None)
            outcomes.append(f"won {i}")
        except WriteConflict:
            outcomes.append("lost")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("lost") == 7
    assert stores[0].read("rota") == f"written by {winners[0].split()[1]}\n".encode()


def test_writing_holds_the_vault_against_every_other_writer(stores: list[PostgresVaultStore]) -> None:
    first, second = stores
    order: list[str] = []
    inside = threading.Event()

    def other_host() -> None:
        inside.wait()
        with second.writing():
            order.append("second checked")
            second.write("b", b"b\n", expected=None)

    thread = threading.Thread(target=other_host)
    thread.start()
    with first.writing():
        inside.set()
        time.sleep(0.3)  # the other host is waiting for the vault's lock now
        assert first.read("a") is None
        first.write("a", b"a\n", expected=None)
        order.append("first wrote")
    thread.join()
    assert order == ["first wrote", "second checked"] and second.names(include_retired=False) == ["a", "b"]


def test_a_write_inside_writing_is_undone_with_it(stores: list[PostgresVaultStore]) -> None:
    with pytest.raises(WriteConflict), stores[0].writing():
        stores[0].write("kept", b"no\n", expected=None)
        stores[0].write("kept", b"again\n", expected=None)
    assert stores[1].read("kept") is None


def test_a_first_decision_rolled_back_leaves_the_vault_writable(pg_opener: Callable[..., PostgresVaultStore]) -> None:
    store = pg_opener()
    with pytest.raises(InvalidArgument), store.writing():
        store.write("bin", b"\xff", expected=None)
    store.write("kept", b"kept\n", expected=None)
    assert store.read("kept") == b"kept\n"


def test_an_update_from_an_older_read_conflicts(stores: list[PostgresVaultStore]) -> None:
    first, second = stores
    first.write("vpn", b"vpn.example.org\n", expected=None)
    second.write("vpn", b"vpn2.example.org\n", expected=b"vpn.example.org\n")
    with pytest.raises(WriteConflict):
        first.write("vpn", b"vpn3.example.org\n", expected=b"vpn.example.org\n")
    assert first.read("vpn") == b"vpn2.example.org\n"


def test_frontmatter_is_kept_verbatim_and_not_searched(stores: list[PostgresVaultStore]) -> None:
    data = b"---\r\ntitle: Hidden title\r\n---\r\nThe visible body.\n"
    assert split_note(data) == ("---\r\ntitle: Hidden title\r\n---\r\n", "The visible body.\n", {"title": "Hidden title"})
    stores[0].write("fm", data, expected=None)
    assert stores[0].read("fm") == data
    assert [h.path for h in stores[0].search("visible", 5).hits] == ["notes/fm.md"]
    assert stores[0].search("hidden", 5).hits == []


def test_bytes_postgresql_cannot_hold_are_refused(stores: list[PostgresVaultStore]) -> None:
    with pytest.raises(InvalidArgument, match="UTF-8"):
        stores[0].write("bin", b"\xff\xfe", expected=None)
    with pytest.raises(InvalidArgument, match="NUL"):
        stores[0].write("nul", b"a\x00b", expected=None)
    with pytest.raises(InvalidArgument, match="NUL"):
        stores[0].search("a\x00b", 5)


def test_an_unreachable_server_is_unavailable_naming_the_vault() -> None:
    settings = VaultPostgresSettings(dsn=f"host=127.0.0.1 port={free_port()} user=x dbname=y", connect_timeout_s=0.5)
    store = PostgresVaultStore(pool.open_pool(settings), "kiln-team")
    try:
        with pytest.raises(Unavailable, match="shared vault of project 'kiln-team'"):
            store.read("kiln")
        with pytest.raises(Unavailable, match="shared vault of project 'kiln-team'"):
            store.write("kiln", b"x\n", expected=None)
    finally:
        pool.close_pools()


def test_the_dsn_is_found_where_the_settings_say(tmp_path: Path) -> None:
    dsn = "host=db.example.org user=gateway password=s3cret"
    (tmp_path / "dsn").write_text(dsn + "\n")
    assert pool.resolve_dsn(VaultPostgresSettings(dsn=dsn), {}) == dsn
    assert pool.resolve_dsn(VaultPostgresSettings(dsn_file=tmp_path / "dsn"), {}) == dsn
    assert pool.resolve_dsn(VaultPostgresSettings(dsn_env="VAULT_DSN"), {"VAULT_DSN": dsn}) == dsn
    for settings in (VaultPostgresSettings(dsn_file=tmp_path / "missing"), VaultPostgresSettings(dsn_env="VAULT_DSN"),
                     VaultPostgresSettings()):
        with pytest.raises(CommandError) as caught:
            pool.resolve_dsn(settings, {})
        assert "s3cret" not in str(caught.value) and "gateway.knowledge.shared.postgres" in str(caught.value)


def test_a_pool_whose_every_connection_stays_busy_says_the_vault_is_busy(pg_dsn: str) -> None:
    schema_name = "busy_pool"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        migrate(conn, schema_name)
    settings = VaultPostgresSettings(dsn=pg_dsn, min_size=1, max_size=1, connect_timeout_s=0.3)
    store = PostgresVaultStore(pool.open_pool(settings, schema_name=schema_name), "global")
    try:
        store.write("kiln", b"fired\n", expected=None)
        with store.pool.connection():  # the pool's one connection, held for the whole wait
            with pytest.raises(Unavailable, match=r"shared vault of project 'global' is unavailable: busy: all 1 of its"):
                store.read("kiln")
        assert store.read("kiln") == b"fired\n"
    finally:
        pool.close_pools()
