"""The PostgreSQL vault's schema and its versioned migrations (docs/concepts/vault.md "PostgreSQL schema").

Every table lives in one PostgreSQL schema (``DEFAULT_SCHEMA``, the operator may name another), and every
vault in the same tables, told apart by a ``project`` column: a new project needs no DDL at run time
(the role needs no privilege beyond its own schema once it is migrated), one set of migrations and
indexes serves every vault, and the statements name no project in SQL text.

The migrations are the numbered files of ``migrations/`` (``0001_notes.sql``, ...; their numbers run
1, 2, 3 with no gap), each applied in one transaction with ``search_path`` set to the schema, then
``public``. ``schema_version`` (in the same schema) has one row per applied migration: its number, file
name, when and by whom. ``migrate`` runs at start-up on every host: it takes a session advisory lock
(``MIGRATION_LOCK``), so when many hosts start at once one applies each pending step and the others
wait, then find nothing to do. A database at a version newer than this code knows is refused
(FailedPrecondition): a host of an older release must not write a schema it does not understand. A
schema already at the latest version is read, never written (no lock, no DDL), so a role with only
USAGE and row privileges (docs/operations.md "A least-privilege role") runs on it; when such a role
finds steps pending, ``NotMigrated`` says which and that ``gateway vault migrate`` applies them.

``lock_vault`` serialises the writes of one vault across hosts where a check and the write it guards
must not interleave (the near-duplicate check and its create): a transaction-scoped advisory lock in
``VAULT_LOCK_SPACE`` keyed by the project.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from gateway.errors import FailedPrecondition

DEFAULT_SCHEMA: Final = "gateway_vault"
# pg_advisory_lock keys: the migration lock (one bigint), and the space of the per-vault locks (the first
# of two int4 keys; the second is the project's hash). "gwvm" and "gwvl" in ASCII.
MIGRATION_LOCK: Final = 0x6777766D
VAULT_LOCK_SPACE: Final = 0x6777766C
LOCK_WAIT_S: Final = 120.0

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


class NotMigrated(Exception):
    """The schema needs steps this connection's role may not apply (``str``: what to run)."""

    def __init__(self, schema: str, current: int, needed: int, role: str) -> None:
        super().__init__(
            f"its PostgreSQL schema {schema!r} is at version {current}, this gateway needs {needed}, and the "
            f"role {role!r} may not migrate it: run `gateway vault migrate` as the schema's owner")
        self.current, self.needed = current, needed


@dataclass(frozen=True)
class Migration:
    version: int
    name: str  # the file's name
    sql: bytes


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration of ``migrations/`` in order; ValueError when their numbers do not run 1, 2, 3..."""
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for item in folder.iterdir():
        match = _FILE.fullmatch(item.name)
        if match:
            found.append(Migration(int(match.group(1)), item.name, item.read_bytes()))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise ValueError(f"vault_pg migrations are not numbered 1..n: {[m.name for m in found]}")
    return tuple(found)


def latest_version() -> int:
    return migrations()[-1].version


def current_version(conn: psycopg.Connection[TupleRow], schema: str = DEFAULT_SCHEMA) -> int:
    """The highest version applied to ``schema`` (0 when nothing has been)."""
    if conn.execute("SELECT to_regclass(format('%%I.schema_version', %s::text))", (schema,)).fetchone() == (None,):
        return 0
    row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_version").format(
        sql.Identifier(schema))).fetchone()
    return int(str(row[0])) if row else 0


def migrate(
    conn: psycopg.Connection[TupleRow],
    schema: str = DEFAULT_SCHEMA,
    *,
    target: int | None = None,
    applied_by: str = "",
    wait_s: float = LOCK_WAIT_S,
) -> list[int]:
    """Bring ``schema`` up to ``target`` (default: the latest version); the versions this call applied.

    ``conn`` must be in autocommit mode (each migration is its own transaction). Waits up to
    ``wait_s`` for another host's migration (then psycopg.errors.LockNotAvailable). FailedPrecondition
    when the database is not UTF-8, or its schema is newer than this code; NotMigrated when steps are
    pending and the role may not apply them.
    """
    if not conn.autocommit:
        raise ValueError("migrate needs an autocommit connection: each migration is its own transaction")
    goal = latest_version() if target is None else target
    _check_encoding(conn)
    if _check_newer(conn, schema) >= goal:
        return []
    _lock(conn, wait_s)
    try:
        _ensure_version_table(conn, schema)
        current = _check_newer(conn, schema)
        applied = []
        for step in migrations()[current:goal]:
            _apply(conn, schema, step, applied_by)
            applied.append(step.version)
        return applied
    except psycopg.errors.InsufficientPrivilege as exc:
        role = conn.execute("SELECT current_user").fetchone()
        raise NotMigrated(schema, current_version(conn, schema), goal, str(role[0] if role else "?")) from exc
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _check_newer(conn: psycopg.Connection[TupleRow], schema: str) -> int:
    """``schema``'s version; FailedPrecondition when it is newer than this code."""
    current = current_version(conn, schema)
    if current > latest_version():
        raise FailedPrecondition(
            f"the vault's PostgreSQL schema {schema!r} is at version {current}, newer than this "
            f"gateway's {latest_version()}: upgrade this host"
        )
    return current


def _check_encoding(conn: psycopg.Connection[TupleRow]) -> None:
    row = conn.execute("SELECT current_setting('server_encoding')").fetchone()
    if row is None or str(row[0]).upper() != "UTF8":
        found = None if row is None else row[0]
        raise FailedPrecondition(f"the vault's PostgreSQL database must use the UTF8 encoding, not {found}")


def _lock(conn: psycopg.Connection[TupleRow], wait_s: float) -> None:
    """The migration lock, waiting at most ``wait_s`` (lock_timeout, reset afterwards)."""
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(1, int(wait_s * 1000))}ms",))
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    finally:
        conn.execute("RESET lock_timeout")


def _ensure_version_table(conn: psycopg.Connection[TupleRow], schema: str) -> None:
    with conn.transaction():
        # Even with IF NOT EXISTS, CREATE SCHEMA needs CREATE on the database, which a role that was given
        # its schema (docs/operations.md "PostgreSQL for the shared vault") does not have.
        if conn.execute("SELECT to_regnamespace(format('%%I', %s::text))", (schema,)).fetchone() == (None,):
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.schema_version (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now(), applied_by text NOT NULL DEFAULT '')"
        ).format(sql.Identifier(schema)))


def _apply(conn: psycopg.Connection[TupleRow], schema: str, step: Migration, applied_by: str) -> None:
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute(step.sql)
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_version (version, name, applied_by) VALUES (%s, %s, %s)").format(
                sql.Identifier(schema)),
            (step.version, step.name, applied_by),
        )


def vault_lock_key(project: str) -> int:
    """The second key of ``project``'s advisory lock: a signed 32-bit hash of its name."""
    return int.from_bytes(hashlib.sha256(project.encode("utf-8")).digest()[:4], "big", signed=True)


def lock_vault(conn: psycopg.Connection[TupleRow], project: str) -> None:
    """Hold ``project``'s vault lock until the current transaction ends (inside one)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (VAULT_LOCK_SPACE, vault_lock_key(project)))
