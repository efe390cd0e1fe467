"""Fixtures for the knowledge-archive domain tests: a workspace and an open index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from kb_helpers import settings

from services.kb.index.schema import open_index
from services.kb.vault.sqlite_store import SqliteVaultStore


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    return ws


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agents" / "alfred" / "kb.sqlite"


@pytest.fixture
def conn(db_path: Path) -> Iterator[apsw.Connection]:
    connection = open_index(db_path, settings())
    yield connection
    connection.close()


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    """A shared vault dir ``<root>/<project>`` (created by ``vconn``)."""
    return tmp_path / "shared" / "kb" / "global"


@pytest.fixture
def vconn(vault_dir: Path) -> Iterator[apsw.Connection]:
    """The open read-write index of ``vault_dir`` (layout created)."""
    from services.kb.vault.note_index import open_vault_index

    connection = open_vault_index(vault_dir)
    yield connection
    connection.close()


@pytest.fixture
def vstore(vault_dir: Path, vconn: apsw.Connection) -> SqliteVaultStore:
    """The SQLite vault store of ``vault_dir`` over ``vconn``."""
    return SqliteVaultStore(vault_dir, vconn)
