"""The vault tests' backends: ``open_store`` opens an empty vault on each built-in backend (one param each);
PostgreSQL's is one database of ``pg_support``'s cluster per module, a migrated schema per store."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import apsw

import psycopg
import pytest
from pg_support import Cluster, postgres  # noqa: F401  (fixture)

from gateway.config_model import VaultPostgresSettings
from services.kb.vault.note_index import VAULT_INDEX_SETTINGS, open_vault_index
from services.kb.vault.sqlite_store import SqliteVaultStore
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


OpenStore = Callable[..., VaultStore]
BACKENDS = ["sqlite", "postgres"]  # every backend built in (store.BUILT_IN)


def sqlite_opener(tmp_path: Path, opened: list[apsw.Connection]) -> OpenStore:
    def make(tokenizer: str = "unicode61") -> VaultStore:
        settings = replace(VAULT_INDEX_SETTINGS, tokenizer=tokenizer)
        directory = tmp_path / f"root{len(opened)}" / "global"
        conn = open_vault_index(directory, settings)
        opened.append(conn)
        return SqliteVaultStore(directory, conn, settings)

    return make


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens an empty vault of project ``global`` on the backend of the param (``tokenizer`` its index's)."""
    opened: list[apsw.Connection] = []
    if request.param == "postgres":
        yield request.getfixturevalue("pg_opener")
        return
    yield sqlite_opener(tmp_path, opened)
    for conn in opened:
        conn.close()
