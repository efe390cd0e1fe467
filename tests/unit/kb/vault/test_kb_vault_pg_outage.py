"""The PostgreSQL vault when its server goes away (docs/concepts/vault.md "When PostgreSQL is down"): which
failures a read retries (and that a write never does), a connection the server closed while it sat idle
replaced unseen, a COMMIT lost with its connection said to have an unknown outcome, a server known down
failing a call at once, and the caller's deadline bounding the wait for a connection."""

from __future__ import annotations

import contextlib
import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from pg_support import free_port
from psycopg_pool import ConnectionPool, PoolTimeout

from gateway import call_deadline
from gateway.config_model import VaultPostgresSettings
from gateway.dependencies import Dependency
from gateway.errors import Unavailable
from services.kb.vault_pg import pool
from services.kb.vault_pg.registry import PostgresVaults
from services.kb.vault_pg.store import PostgresVaultStore

WHAT = "the shared vault of project 'global'"


def unavailable(cause: BaseException) -> Unavailable:
    try:
        raise Unavailable(f"{WHAT} is unavailable") from cause
    except Unavailable as exc:
        return exc


@pytest.mark.parametrize(("cause", "retried"), [
    (psycopg.OperationalError("server closed the connection unexpectedly"), True),
    (psycopg.InterfaceError("the connection is lost"), True),
    (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),
    (PoolTimeout("couldn't get a connection after 5.00 sec"), False),
])
def test_a_read_is_retried_only_when_its_connection_broke_under_it(cause: BaseException, retried: bool) -> None:
    assert pool.retryable(unavailable(cause)) is retried


def test_a_failure_that_is_not_an_unreachable_server_is_never_retried() -> None:
    assert not pool.retryable(Unavailable(f"{WHAT} is unavailable: busy"))
    assert not pool.retryable(ValueError("a bug"))


def backend_pids(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [int(r[0]) for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (pool.APPLICATION,)).fetchall()]


def terminate(dsn: str, pids: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_a_connection_the_server_closed_while_idle_is_replaced_before_a_call_uses_it(
        pg_opener: Callable[..., PostgresVaultStore], pg_dsn: str) -> None:
    store = pg_opener()
    store.write("kiln", b"fired at noon\n", expected=None)
    terminate(pg_dsn, backend_pids(pg_dsn))  # as a restart of the server does
    assert store.read("kiln") == b"fired at noon\n"
    store.write("glaze", b"dries overnight\n", expected=None)


def test_a_commit_lost_with_its_connection_is_unavailable_saying_its_outcome_is_unknown(
        pg_opener: Callable[..., PostgresVaultStore], pg_dsn: str) -> None:
    health = Dependency("shared-vault", "the shared vault (PostgreSQL)")
    first = pg_opener()
    store = PostgresVaultStore(first.pool, "global", health=health)
    with pytest.raises(Unavailable, match="whether it was made is unknown; read the note again") as caught:
        with store.writing():
            store.write("kiln", b"fired at noon\n", expected=None)
            with store._conn() as conn:
                mine = conn.info.backend_pid
            terminate(pg_dsn, [mine])
    assert WHAT in str(caught.value) and health.reason is not None
    assert store.read("kiln") is None and health.reason is None  # this time it was not: the server had it rolled back


def test_reads_run_once_more_on_a_broken_connection_and_writes_never(pg_opener: Callable[..., PostgresVaultStore],
                                                                   pg_dsn: str) -> None:
    store = pg_opener()
    with ThreadPoolExecutor(2) as executor:
        vaults = PostgresVaults([], executor,
                                VaultPostgresSettings(dsn=pg_dsn), {})
        vaults._migrated = True
        calls: list[str] = []

        def breaks_once(what: str) -> str:
            calls.append(what)
            if len(calls) == 1:
                raise unavailable(psycopg.OperationalError("server closed the connection unexpectedly"))
            return what

        assert asyncio.run(vaults._read(store, breaks_once, "read")) == "read" and calls == ["read", "read"]
        calls.clear()
        with pytest.raises(Unavailable):
            asyncio.run(vaults._write(store, lambda _store: breaks_once("write")))
        assert calls == ["write"]
    pool.close_pools()


def closed_server_pool(connect_timeout_s: float = 5.0) -> tuple[ConnectionPool[pool.Conn], Dependency]:
    settings = VaultPostgresSettings(dsn=f"host=127.0.0.1 port={free_port()} user=x dbname=y",
                                     connect_timeout_s=connect_timeout_s)
    return pool.open_pool(settings), Dependency("shared-vault", "the shared vault (PostgreSQL)")


def test_a_server_known_down_fails_a_call_at_once_and_the_deadline_bounds_the_wait() -> None:
    conns, health = closed_server_pool()
    try:
        token = call_deadline.start(0.3)
        started = time.monotonic()
        with pytest.raises(PoolTimeout), contextlib.ExitStack() as stack:
            stack.enter_context(pool.connection(conns, health))
        assert time.monotonic() - started < 2  # the call's 0.3 s, not the pool's 5 s
        call_deadline.reset(token)

        health.failed("its PostgreSQL server cannot be reached")
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError), contextlib.ExitStack() as stack:
            stack.enter_context(pool.connection(conns, health))
        assert time.monotonic() - started < 1
        assert pool.probe(conns, health) == "its PostgreSQL server cannot be reached"
    finally:
        pool.close_pools()


def test_a_call_whose_caller_went_away_has_its_statement_cancelled(pg_opener: Callable[..., PostgresVaultStore],
                                                                    pg_dsn: str) -> None:
    store = pg_opener()

    def sleeps() -> None:
        with store._conn() as conn:
            conn.execute("SELECT pg_sleep(30)")

    with ThreadPoolExecutor(2) as executor:
        vaults = PostgresVaults([], executor, VaultPostgresSettings(dsn=pg_dsn), {})
        vaults._migrated = True

        async def caller() -> None:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(vaults._run(store, sleeps), 0.3)

        started = time.monotonic()
        asyncio.run(caller())
    assert time.monotonic() - started < 10  # the worker was freed long before pg_sleep's 30 s
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' "
                            "AND state = 'active'").fetchone() == (0,)
    pool.close_pools()
