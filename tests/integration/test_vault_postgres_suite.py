"""The real suite on the PostgreSQL vault (``gateway.knowledge.shared.backend: postgres``, ``pg_support``'s
cluster): a shared note created, read, updated, searched, caught as a near duplicate, listed, retired and
restored over REST, kept in PostgreSQL and nowhere on the host's disk, its links in the graph; a server that cannot be reached is a 503 naming the vault while the agent's own memory still
answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
import pytest
from pg_support import Cluster, free_port, postgres  # noqa: F401  (fixture)
from suite_support import ADMIN_KEY, Suite, make_home

from services.kb.vault_pg import schema

pytestmark = pytest.mark.integration

HEADERS = {"X-Api-Key": ADMIN_KEY}
NOTES = "/api/v1/agents/alfred/shared/notes"
CHECKLIST = "# Staging deploy checklist\n\n- freeze the merge queue\n- run the smoke suite on staging\n- page the on-call\n"


def start(tmp: Path, postgres_block: dict[str, object]) -> Suite:
    home, ports, http_port = make_home(tmp, knowledge={"shared": {"backend": "postgres", "postgres": postgres_block}})
    memory = home / "agents" / "alfred" / "workspace" / "memory"
    memory.mkdir(parents=True)
    (memory / "ferries.md").write_text("# Ferries\n\n- the ferry to the island leaves at noon\n")
    suite = Suite(home, http_port, ports)
    suite.start("file_api", "watcher", "kb", "http")
    return suite


@pytest.fixture(scope="module")
def database(postgres: Cluster) -> str:
    return postgres.create_database("suite_vault")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[Suite]:
    running = start(tmp_path_factory.mktemp("pgsuite"), {"dsn": database})
    try:
        yield running
    finally:
        running.stop_all()


def note(name: str) -> str:
    return f"{NOTES}/{quote(name, safe='')}"


def shared_hits(http: httpx.Client, query: str) -> list[str]:
    response = http.get("/api/v1/agents/alfred/memory:search", params={"query": query, "corpus": "shared"})
    assert response.status_code == 200, response.text
    return [hit["path"] for hit in response.json().get("hits", [])]


def test_a_shared_note_lives_in_postgresql_through_its_whole_life(suite: Suite, database: str) -> None:
    with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
        created = http.post(NOTES, json={"name": "staging deploy", "content": CHECKLIST})
        assert created.status_code == 200 and created.json().get("created") is True, created.text
        assert http.post(NOTES, json={"name": "staging deploy", "content": "again"}).status_code == 409
        assert http.get(note("staging deploy")).json()["content"] == CHECKLIST
        assert shared_hits(http, "smoke suite") == ["notes/staging deploy.md"]

        twin = http.post(NOTES, json={"name": "deploy to staging", "content": CHECKLIST.replace("page", "call")})
        assert twin.status_code == 200 and not twin.json().get("created"), twin.text
        assert "staging deploy" in twin.text  # the near duplicate, named

        updated = CHECKLIST + "- post in #deploys\n"
        assert http.put(note("staging deploy"), json={"content": updated}).status_code == 200
        assert http.get(note("staging deploy")).json()["content"] == updated
        assert shared_hits(http, "deploys") == ["notes/staging deploy.md"]

        listed = http.get(NOTES).json()
        assert [n["name"] for n in listed["notes"]] == ["staging deploy"]

        assert http.post(note("staging deploy") + ":retire", json={"reason": "moved to the wiki"}).status_code == 200
        assert http.get(note("staging deploy")).status_code == 404
        assert "moved to the wiki" in http.get(note("stale__staging deploy")).json()["content"]
        assert http.post(note("staging deploy") + ":restore", json={}).status_code == 200
        assert http.get(note("staging deploy")).json()["content"] == updated

        linked = http.post(NOTES, json={"name": "on-call", "content": "Paged by [[staging deploy]] and [[nobody]].\n",
                                          "confirm": True})
        assert linked.status_code == 200 and linked.json().get("created") is True, linked.text
        graph = http.get("/api/v1/agents/alfred/shared/graph")
        assert graph.status_code == 200, graph.text
        assert {"staging deploy", "on-call"} <= {n["name"] for n in graph.json()["nodes"]}
        edges = {(e["fromName"], e["toName"]) for e in graph.json()["edges"]}
        assert {("on-call", "staging deploy"), ("on-call", "nobody")} <= edges
        assert "nobody" in str(graph.json()["dangling"])
        assert http.delete(note("on-call")).status_code == 200

        assert http.delete(note("staging deploy")).status_code == 200
        assert http.get(note("staging deploy")).status_code == 404
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM gateway_vault.schema_version").fetchone() == (schema.latest_version(),)
        assert conn.execute("SELECT count(*) FROM gateway_vault.notes").fetchone() == (0,)
        assert conn.execute("SELECT project FROM gateway_vault.vaults").fetchall() == [("global",)]
    assert not list((suite.home / "shared").rglob("*.md"))  # nothing on the host's disk


def test_an_unreachable_server_is_a_503_naming_the_vault(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    running = start(tmp_path, {"dsn": f"host=127.0.0.1 port={port} user=gateway dbname=vault", "connectTimeoutS": 1})
    try:
        with httpx.Client(base_url=running.base_url, headers=HEADERS, timeout=30) as http:
            refused = http.post(NOTES, json={"name": "kiln", "content": "The kiln fires at noon.\n"})
            assert refused.status_code == 503 and "shared vault of project 'global'" in refused.json()["message"]
            assert "password" not in refused.text
            assert http.get(note("kiln")).status_code == 503
            memory = http.get("/api/v1/agents/alfred/memory:search", params={"query": "ferry"})
            assert memory.status_code == 200 and memory.json()["hits"], memory.text
    finally:
        running.stop_all()
