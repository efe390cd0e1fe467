"""The PostgreSQL vault's connections: one pool per process, shared by every project's store, and the
errors of an unreachable server made ``Unavailable`` (docs/concepts/vault.md "PostgreSQL backend").

The DSN comes from ``gateway.knowledge.shared.postgres`` (``dsn``, ``dsnFile`` or ``dsnEnv``) and is never
logged. Every connection of the pool is in autocommit mode (a write opens its own transaction), has its
``search_path`` set to the vault's schema and every statement runs under ``statement_timeout``.

The pool reconnects by itself (docs/concepts/vault.md "When PostgreSQL is down"): a connection the server
closed while it sat idle (a restart, even after ``kill -9``) is seen before a call uses it (``_alive``:
an idle connection with something to read is checked with a round trip) and replaced, a broken one is
dropped when it is returned, and a lost connection is retried in the background for ``RECONNECT_S`` at
most (after that, the next call asks for one again: nothing runs while the process is idle). Each wait
is bounded: the connection by ``connectTimeoutS`` (and TCP's ``tcp_user_timeout`` on a cut link), the
pool by ``connectTimeoutS`` or the call's own gRPC deadline when it is sooner (``gateway.call_deadline``),
each statement by ``statementTimeoutMs``, or by the caller's deadline: a call whose caller went away has
its statement cancelled (``track``, ``cancel``). ``reachable`` tells the vault's ``Dependency`` what each
call learnt; ``retryable`` says which failures a read may retry once.
A call that gets no connection in time says why the pool's latest attempt failed (``connect_failure``:
a refused connection, a failed TLS verification, a refused login), logged once each time it changes;
psycopg's own pool warnings, which repeat it at every attempt, are kept out of the log.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Final

import psycopg
import structlog
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from gateway import call_deadline
from gateway.config_model import VaultPostgresSettings
from gateway.dependencies import Dependency
from gateway.errors import CommandError, Unavailable
from services.kb.vault_pg import schema
from services.kb.vault_pg.connect_failure import connect_failure

Conn = psycopg.Connection[TupleRow]

APPLICATION: Final = "gateway-kb"
RECONNECT_S: Final = 10.0
PROBE_S: Final = 2.0  # the health probe's wait for a connection (psycopg's shortest connect timeout)
CANCEL_S: Final = 5.0
# A server that stops answering without a reset (a cut link) fails a call within about 5 s, inside the
# shim's deadline, rather than after the kernel's retransmissions (minutes); a slow statement is not cut
# short (a live server's kernel answers the probes); a DSN that sets one of these keeps its own:
# docs/concepts/vault.md "PostgreSQL backend".
DEAD_SERVER: Final = {"keepalives": 1, "keepalives_idle": 2, "keepalives_interval": 1, "keepalives_count": 3,
                      "tcp_user_timeout": 5000}
log = structlog.get_logger()
_pools: dict[str, VaultPool] = {}
_pools_lock = threading.Lock()
_held: contextvars.ContextVar[list[Conn] | None] = contextvars.ContextVar("vault_connections_held", default=None)


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


def _unless_set(params: Mapping[str, object], dsn: str) -> dict[str, object]:
    given = conninfo_to_dict(dsn)
    return {k: v for k, v in params.items() if k not in given}


def _configure(statement_timeout_ms: int, schema_name: str) -> Callable[[Conn], None]:
    """What every new connection of the pool runs first: the statement timeout and the vault's schema."""
    def configure(conn: Conn) -> None:
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{statement_timeout_ms}ms",))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema_name)))

    return configure


def _alive(conn: Conn) -> bool:
    """Whether ``conn``, idle in the pool, still has its server: only a connection with something to read
    (the server's goodbye, or the end of its socket) costs a round trip to find out."""
    if conn.closed or conn.broken:
        return False
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if not readable:
        return True
    try:
        ConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


def _connect_args(settings: VaultPostgresSettings, dsn: str) -> dict[str, object]:
    """What every connection is opened with: autocommit, a connect timeout, and ``DEAD_SERVER``'s TCP
    timeouts (unless the DSN sets its own) so a server that went silent fails the call instead of holding it."""
    return {"autocommit": True, "connect_timeout": max(1, round(settings.connect_timeout_s)),
            "application_name": APPLICATION, **_unless_set(DEAD_SERVER, dsn)}


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
                kwargs=_connect_args(settings, dsn), configure=_configure(settings.statement_timeout_ms, schema_name),
                reconnect_timeout=RECONNECT_S, open=False, name="vault",
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


def track(held: list[Conn]) -> None:
    """Keep in ``held`` the connection each ``connection`` of the current context is using (for ``cancel``)."""
    _held.set(held)


def cancel(held: list[Conn]) -> None:
    """Cancel what the connections in ``held`` are running (their caller's deadline passed), each in a thread
    of its own: the statement ends now instead of at ``statementTimeoutMs``, and its transaction rolls back."""
    for conn in list(held):
        threading.Thread(target=_cancel, args=(conn,), name="vault-cancel", daemon=True).start()


def _cancel(conn: Conn) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.cancel_safe(timeout=CANCEL_S)


@contextlib.contextmanager
def connection(pool: ConnectionPool[Conn], health: Dependency | None = None) -> Iterator[Conn]:
    """One of the pool's connections, waited for no longer than the pool's timeout or the call's deadline.

    An idle connection whose server closed it (``_alive``) is closed and handed back, which makes the pool
    open another, and the next one is taken at once (psycopg_pool's own ``check`` would wait a growing
    delay between two dead ones). After the first dead one, and while ``health`` says the server could not
    be reached and the pool holds no connection, a connection of its own is tried: a server that is down
    fails the call at once (psycopg.OperationalError) instead of after the whole wait."""
    wait = call_deadline.within(pool.timeout)
    if health is not None and health.reason is not None and not pool.get_stats().get("pool_available"):
        _reach(pool, wait)
    deadline = time.monotonic() + wait
    reached = False
    while True:
        conn = pool.getconn(timeout=max(0.0, deadline - time.monotonic()))
        if _alive(conn):
            break
        conn.close()
        pool.putconn(conn)
        if not reached:  # the server went away, or restarted: which, at once
            _reach(pool, deadline - time.monotonic())
            reached = True
    held = _held.get()
    if held is not None:
        held.append(conn)
    try:
        with conn:
            yield conn
    finally:
        if held is not None:
            held.remove(conn)
        pool.putconn(conn)


def _reach(pool: ConnectionPool[Conn], wait: float) -> None:
    """Connect to the pool's server once, and close; psycopg.OperationalError when it cannot be reached."""
    kwargs = dict(pool.kwargs) if isinstance(pool.kwargs, dict) else {}
    kwargs["connect_timeout"] = max(1, min(round(max(wait, 0)), int(kwargs.get("connect_timeout", 5))))
    psycopg.connect(str(pool.conninfo), **kwargs).close()


def migrate(pool: ConnectionPool[Conn], what: str, schema_name: str = schema.DEFAULT_SCHEMA,
            applied_by: str = "", health: Dependency | None = None) -> list[int]:
    """Bring the schema up to date through one of the pool's connections (``schema.migrate``); Unavailable
    naming ``what`` (the vault that needs it) while the server cannot be reached, or while steps are
    pending that the pool's role may not apply (until an operator runs ``gateway vault migrate``)."""
    try:
        with reachable(what, pool, health), connection(pool, health) as conn:
            return schema.migrate(conn, schema_name, applied_by=applied_by)
    except schema.NotMigrated as exc:
        log.warning("vault_postgres_not_migrated", what=what, version=exc.current, needed=exc.needed)
        raise Unavailable(f"{what} is unavailable: {exc}") from exc


def probe(pool: ConnectionPool[Conn], health: Dependency) -> str | None:
    """Why the pool's server cannot be reached now (None: it can, or every connection is busy with a call):
    a round trip on one of its connections, waited for ``PROBE_S`` at most (the vault's health check)."""
    token = call_deadline.start(PROBE_S)
    try:
        return _probe(pool, health)
    finally:
        call_deadline.reset(token)


def _probe(pool: ConnectionPool[Conn], health: Dependency) -> str | None:
    try:
        with connection(pool, health) as conn:
            conn.execute("")
    except PoolTimeout:
        return None if _busy(pool) else "no connection to its PostgreSQL server in time"
    except psycopg.Error:
        return "its PostgreSQL server cannot be reached"
    return None


def _busy(pool: ConnectionPool[Conn] | None) -> bool:
    """Whether every connection the pool may open is open and in use."""
    stats = pool.get_stats() if pool is not None else {}
    return pool is not None and stats.get("pool_size", 0) >= pool.max_size and stats.get("pool_available", 0) == 0


def _no_connection(pool: ConnectionPool[Conn] | None) -> str:
    """Why the pool gave no connection in time: all of them busy (the vault is busy), or none to be had."""
    stats = pool.get_stats() if pool is not None else {}
    if _busy(pool):
        return (f"busy: all {stats.get('pool_size', 0)} of its PostgreSQL connections were in use for the whole wait "
                f"({stats.get('requests_waiting', 0)} more calls waiting); retry shortly")
    failure = pool.failure if isinstance(pool, VaultPool) else ""
    return failure or "no connection to its PostgreSQL server in time"


def retryable(exc: BaseException) -> bool:
    """Whether a read that failed with ``exc`` (an Unavailable of ``reachable``) may run once more on another
    connection: its connection broke under it. Not a statement past its timeout, nor a pool that gave no
    connection in time (the wait is spent)."""
    cause = exc.__cause__ if isinstance(exc, Unavailable) else exc
    return isinstance(cause, (psycopg.OperationalError, psycopg.InterfaceError)) \
        and not isinstance(cause, (psycopg.errors.QueryCanceled, PoolTimeout))


@contextlib.contextmanager
def reachable(what: str, pool: ConnectionPool[Conn] | None = None, health: Dependency | None = None) -> Iterator[None]:
    """Unavailable naming ``what`` for a server that cannot be reached, went away, or did not answer in time,
    or (given ``pool``) a pool whose every connection stayed busy; ``health`` learns whether the server
    was reached (a busy pool or a statement past its timeout say it was)."""
    try:
        yield
    except PoolTimeout as exc:
        reason = _no_connection(pool)
        log.warning("vault_postgres_unavailable", what=what, error=type(exc).__name__, reason=reason)
        if health is not None and not _busy(pool):
            health.failed(reason)
        raise Unavailable(f"{what} is unavailable: {reason}") from exc
    except (psycopg.OperationalError, psycopg.errors.QueryCanceled, psycopg.InterfaceError) as exc:
        log.warning("vault_postgres_unavailable", what=what, error=type(exc).__name__)
        if isinstance(exc, psycopg.errors.QueryCanceled):
            raise Unavailable(f"{what} is unavailable: a statement ran past its timeout") from exc
        reason = connect_failure(str(exc)) or "its PostgreSQL server cannot be reached"
        if health is not None:
            health.failed(reason)
        raise Unavailable(f"{what} is unavailable: {reason}") from exc
    if health is not None:
        health.succeeded()
