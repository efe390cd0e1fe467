"""The vault tests' PostgreSQL: one database of ``pg_support``'s cluster per module, a migrated schema per store."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_support import Cluster, postgres  # noqa: F401  (fixture)

from gateway.config_model import VaultPostgresSettings
from services.kb.vault.store import VaultStore
from services.kb.vault_pg import pool
from services.kb.vault_pg.schema import migrate
from services.kb.vault_pg.store import PostgresVaultStore

_schemas = itertools.count(1)


@pytest.fixture(scope="module")
def pg_dsn(postgres: Cluster) -> str:
    """One database for the module's PostgreSQL tests (each test migrates a schema of its own)."""
    dsn = postgres.create_database(f"contract_{next(_schemas)}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_trgm SCHEMA public")
    return dsn


@pytest.fixture
def pg_opener(pg_dsn: str) -> Iterator[Callable[..., VaultStore]]:
    """Opens a store of vault ``global`` in a schema of its own (a new, migrated vault), through this
    process's pool for it; the pools closed at the test's end."""
    def make(tokenizer: str = "unicode61") -> VaultStore:
        name = f"contract_{next(_schemas)}"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            migrate(conn, name)
        return PostgresVaultStore(pool.open_pool(VaultPostgresSettings(dsn=pg_dsn, min_size=1, max_size=2),
                                                 schema_name=name),
                                  "global", tokenizer)

    yield make
    pool.close_pools()
