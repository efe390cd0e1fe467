"""The PostgreSQL vault run by a least-privilege role (``deploy/postgres/roles.sql``, docs/operations.md "A
least-privilege role"): the schema owned by ``gateway_migrator``, the KB connected as ``gateway_kb`` with
USAGE on the schema and row access to its tables only. Before the schema is migrated the KB's vault calls
answer 503 saying to run ``gateway vault migrate``; that command, run once with the owner's DSN, brings it
up, and the same KB (no restart) then serves the vault's whole life; ``gateway_kb`` can change no table."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from pg_support import Cluster, postgres  # noqa: F401  (fixture)
from suite_support import ADMIN_KEY, Suite, make_home
from services.kb.vault_pg.schema import latest_version

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ROLES_SQL = ROOT / "deploy" / "postgres" / "roles.sql"
HEADERS = {"X-Api-Key": ADMIN_KEY}
NOTES = "/api/v1/agents/alfred/shared/notes"
DATABASE = "roles_vault"
LATEST = latest_version()


@pytest.fixture(scope="module")
def cluster(postgres: Cluster) -> Cluster:
    postgres.create_database(DATABASE)
    postgres.psql_file(ROLES_SQL, DATABASE)
    postgres.psql_file(ROLES_SQL, DATABASE)  # a second run changes nothing and fails on nothing
    return postgres


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Suite]:
    shared = {"backend": "postgres", "postgres": {"dsn": cluster.dsn(DATABASE, user="gateway_kb")}}
    home, ports, http_port = make_home(tmp_path_factory.mktemp("roles"), knowledge={"shared": shared})
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


def migrate(home: Path, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VAULT_OWNER_DSN": dsn}
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "vault", "migrate", "--dsn-env", "VAULT_OWNER_DSN",
                           "--home", str(home)], capture_output=True, text=True, timeout=60, env=env)


def test_the_kb_role_runs_the_vault_once_the_owner_migrated_it(suite: Suite, cluster: Cluster) -> None:
    with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
        early = http.post(NOTES, json={"name": "kiln", "content": "# Kiln\nThe kiln fires at noon.\n"})
        assert early.status_code == 503, early.text
        assert early.json()["message"] == (
            "the shared vault of project 'global' is unavailable: its PostgreSQL schema 'gateway_vault' is at "
            f"version 0, this gateway needs {LATEST}, and the role 'gateway_kb' may not migrate it: run `gateway vault "
            "migrate` as the schema's owner")

        refused = migrate(suite.home, cluster.dsn(DATABASE, user="gateway_kb"))  # the KB's role may not
        assert refused.returncode == 2 and "may not migrate it" in refused.stderr, refused.stderr
        done = migrate(suite.home, cluster.dsn(DATABASE, user="gateway_migrator"))
        assert done.returncode == 0, done.stderr
        applied = ", ".join(str(v) for v in range(1, LATEST + 1))
        assert done.stdout.strip() == f"vault schema 'gateway_vault' is at version {LATEST}: applied {applied}"
        assert migrate(suite.home, cluster.dsn(DATABASE, user="gateway_migrator")).stdout.strip().endswith("nothing to apply")

        made = http.post(NOTES, json={"name": "kiln", "content": "# Kiln\nThe kiln fires at noon.\n"})
        assert made.status_code == 200 and made.json().get("created") is True, made.text
        updated = http.put(f"{NOTES}/kiln", json={"content": "# Kiln\nThe kiln fires at noon.\nIt glazes at one.\n"})
        assert updated.status_code == 200 and updated.json().get("updated") is True, updated.text
        found = http.get("/api/v1/agents/alfred/memory:search", params={"query": "glazes", "corpus": "shared"})
        assert [h["path"] for h in found.json()["hits"]] == ["notes/kiln.md"], found.text
        assert http.post(f"{NOTES}/kiln:retire", json={"reason": "sold"}).status_code == 200
        assert http.post(f"{NOTES}/kiln:restore", json={}).status_code == 200
        assert http.get("/api/v1/agents/alfred/shared/graph").status_code == 200
        assert http.delete(f"{NOTES}/kiln").status_code == 200
    with psycopg.connect(cluster.dsn(DATABASE)) as conn:
        owners = conn.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'gateway_vault'").fetchall()
        assert owners == [("gateway_migrator",)]
        by = conn.execute("SELECT DISTINCT applied_by <> '' FROM gateway_vault.schema_version").fetchall()
        assert by == [(True,)]


@pytest.mark.parametrize("statement", [
    "DROP TABLE gateway_vault.notes",
    "ALTER TABLE gateway_vault.notes ADD COLUMN extra text",
    "TRUNCATE gateway_vault.notes",
    "CREATE TABLE gateway_vault.extra (id int)",
    "CREATE TABLE public.extra (id int)",
    "CREATE SCHEMA extra",
    "CREATE INDEX extra ON gateway_vault.notes (name)",
])
def test_the_kb_role_cannot_change_the_schema(suite: Suite, cluster: Cluster, statement: str) -> None:
    with psycopg.connect(cluster.dsn(DATABASE, user="gateway_kb")) as conn:
        role = conn.execute("SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user")
        assert role.fetchone() == (False, False, False)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
