"""The PostgreSQL vault's connections: one pool per process, shared by every project's store, and the
errors of an unreachable server made ``Unavailable`` (docs/concepts/vault.md "PostgreSQL backend").

The DSN comes from ``gateway.knowledge.shared.postgres`` (``dsn``, ``dsnFile`` or ``dsnEnv``) and is never
logged. Every connection of the pool is in autocommit mode (a write opens its own transaction), has its
``search_path`` set to the vault's schema and every statement runs under ``statement_timeout``. The pool
reconnects by itself: a broken connection is dropped when it is returned, and a later call opens another.
A call that gets no connection in time says why the pool's latest attempt failed (``connect_failure``:
a refused connection, a failed TLS verification, a refused login), logged once each time it changes;
psycopg's own pool warnings, which repeat it at every attempt, are kept out of the log.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Final

import psycopg
import structlog
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from gateway.config_model import VaultPostgresSettings
from gateway.errors import CommandError, Unavailable
from services.kb.vault_pg import schema
from services.kb.vault_pg.connect_failure import connect_failure

Conn = psycopg.Connection[TupleRow]

APPLICATION: Final = "gateway-kb"
log = structlog.get_logger()
_pools: dict[str, VaultPool] = {}
_pools_lock = threading.Lock()


class VaultPool(ConnectionPool[Conn]):
    """psycopg's pool, keeping why its latest attempt to connect failed (``failure``; "" once one succeeds):
    its wait for a connection ends in PoolTimeout, which does not say."""

    failure = ""

    def _connect(self, timeout: float | None = None) -> Conn:
        try:
            conn = super()._connect(timeout)
        except psycopg.Error as exc:
            reason = connect_failure(str(exc)) or "its PostgreSQL server cannot be reached"
            if reason != self.failure:
                log.warning("vault_postgres_connect_failed", pool=self.name, reason=reason, error=type(exc).__name__)
            self.failure = reason
            raise
        self.failure = ""
        return conn


def resolve_dsn(settings: VaultPostgresSettings, environ: Mapping[str, str]) -> str:
    """The DSN the settings point at (``dsnEnv`` looked up in ``environ``); CommandError, naming where it
    was looked for, when it is not there."""
    if settings.dsn:
        return settings.dsn
    if settings.dsn_file is not None:
        try:
            return settings.dsn_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CommandError(f"gateway.knowledge.shared.postgres.dsnFile {settings.dsn_file}: {exc.strerror}") from exc
    if settings.dsn_env:
        value = environ.get(settings.dsn_env, "").strip()
        if value:
            return value
        raise CommandError(f"gateway.knowledge.shared.postgres.dsnEnv: the environment variable {settings.dsn_env} is not set")
    raise CommandError("gateway.knowledge.shared.postgres: none of dsn, dsnFile or dsnEnv is set")


def _configure(statement_timeout_ms: int, schema_name: str) -> Callable[[Conn], None]:
    """What every new connection of the pool runs first: the statement timeout and the vault's schema."""
    def configure(conn: Conn) -> None:
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{statement_timeout_ms}ms",))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema_name)))

    return configure


def open_pool(settings: VaultPostgresSettings, environ: Mapping[str, str] | None = None,
              schema_name: str = schema.DEFAULT_SCHEMA) -> VaultPool:
    """This process's pool for the settings' DSN (opened once: later calls answer the same pool). It opens
    in the background: a server that is down now does not stop the KB from starting."""
    dsn = resolve_dsn(settings, environ or {})
    key = f"{schema_name}\x00{dsn}"
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # its connect warnings: VaultPool logs them
            pool = VaultPool(
                dsn, min_size=settings.min_size, max_size=settings.max_size, timeout=settings.connect_timeout_s,
                kwargs={"autocommit": True, "connect_timeout": max(1, round(settings.connect_timeout_s)),
                        "application_name": APPLICATION},
                configure=_configure(settings.statement_timeout_ms, schema_name),
                open=False, name="vault",
            )
            pool.open(wait=False)
            _pools[key] = pool
        return pool


def close_pools() -> None:
    """Close every pool of this process (at the KB's stop, and between tests)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def migrate(pool: ConnectionPool[Conn], what: str, schema_name: str = schema.DEFAULT_SCHEMA,
            applied_by: str = "") -> list[int]:
    """Bring the schema up to date through one of the pool's connections (``schema.migrate``); Unavailable
    naming ``what`` (the vault that needs it) while the server cannot be reached, or while steps are
    pending that the pool's role may not apply (until an operator runs ``gateway vault migrate``)."""
    try:
        with reachable(what, pool), pool.connection() as conn:
            return schema.migrate(conn, schema_name, applied_by=applied_by)
    except schema.NotMigrated as exc:
        log.warning("vault_postgres_not_migrated", what=what, version=exc.current, needed=exc.needed)
        raise Unavailable(f"{what} is unavailable: {exc}") from exc


def _no_connection(pool: ConnectionPool[Conn] | None) -> str:
    """Why the pool gave no connection in time: all of them busy (the vault is busy), or none to be had."""
    stats = pool.get_stats() if pool is not None else {}
    size, free, waiting = stats.get("pool_size", 0), stats.get("pool_available", 0), stats.get("requests_waiting", 0)
    if pool is not None and size >= pool.max_size and free == 0:
        return (f"busy: all {size} of its PostgreSQL connections were in use for the whole wait "
                f"({waiting} more calls waiting); retry shortly")
    failure = pool.failure if isinstance(pool, VaultPool) else ""
    return failure or "no connection to its PostgreSQL server in time"


@contextlib.contextmanager
def reachable(what: str, pool: ConnectionPool[Conn] | None = None) -> Iterator[None]:
    """Unavailable naming ``what`` for a server that cannot be reached, went away, or did not answer in time,
    or (given ``pool``) a pool whose every connection stayed busy."""
    try:
        yield
    except PoolTimeout as exc:
        reason = _no_connection(pool)
        log.warning("vault_postgres_unavailable", what=what, error=type(exc).__name__, reason=reason)
        raise Unavailable(f"{what} is unavailable: {reason}") from exc
    except (psycopg.OperationalError, psycopg.errors.QueryCanceled, psycopg.InterfaceError) as exc:
        log.warning("vault_postgres_unavailable", what=what, error=type(exc).__name__)
        reason = "a statement ran past its timeout" if isinstance(exc, psycopg.errors.QueryCanceled) \
            else "its PostgreSQL server cannot be reached"
        raise Unavailable(f"{what} is unavailable: {reason}") from exc
