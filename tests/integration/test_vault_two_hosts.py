"""Two agent hosts, A and B (separate homes and ports, each its KB, dreaming and REST shim), on one
PostgreSQL vault (``pg_support``'s cluster): a note A's agent creates over REST is found by B's agent over
REST, MCP over HTTP and MCP stdio; B's near-duplicate of it is caught; a retire on B is seen on A; a fact
A's dreaming promotes lands once, and B dreaming the same fact finds it already there.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from dreaming_support import add, audit, replies, run_ok, write_reply
from mcp_support import mcp_session, text_of
from pg_support import Cluster, postgres  # noqa: F401  (fixture)
from suite_support import ADMIN_KEY
from test_mcp_http import http_session
from two_host_support import Host, client, running_hosts

pytestmark = pytest.mark.integration

FERRY = "# Island ferry\n\n- the first ferry leaves the harbour at 06:40\n- bikes ride free on weekdays\n"
FERRY_TWIN = "# Ferry to the island\n\n- the first ferry leaves the harbour at 06:40\n- bikes ride free on weekdays too\n"
KILN = "# Kiln\n\n- the kiln in shed 3 fires on Thursdays\n- glaze orders close on Tuesday noon\n"
FACT = "- The lighthouse keeper's radio channel is 16, callsign Osprey."
TOPIC = "lighthouse-radio"


@pytest.fixture(scope="module")
def database(postgres: Cluster) -> str:
    return postgres.create_database("two_hosts")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[dict[str, Host]]:
    with running_hosts(tmp_path_factory, database, services=("kb", "dreaming", "http")) as started:
        yield started


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_note_created_on_a_is_found_on_b_over_rest_mcp_http_and_mcp_stdio(hosts: dict[str, Host]) -> None:
    a, b = hosts["A"], hosts["B"]
    with client() as http:
        created = a.create(http, "island ferry", FERRY)
        assert created.status_code == 200 and created.json()["created"] is True, created.text
        got = http.get(b.note("island ferry"))
        assert got.status_code == 200 and got.json()["content"] == FERRY, got.text
        assert b.shared_paths(http, "first ferry") == ["notes/island ferry.md"]

    async with http_session(b.suite, b.agent, {"X-Api-Key": ADMIN_KEY}) as session:
        over_http = await session.call_tool("memory_shared_get", {"name": "island ferry"})
        found_http = await session.call_tool("memory_search", {"query": "first ferry", "corpus": "shared"})
    assert not over_http.is_error and FERRY in text_of(over_http), text_of(over_http)
    assert "notes/island ferry.md" in text_of(found_http), text_of(found_http)

    async with mcp_session(b.suite.home, agent=b.agent) as stdio:
        over_stdio = await stdio.call_tool("memory_shared_get", {"name": "island ferry"})
        found_stdio = await stdio.call_tool("memory_search", {"query": "bikes ride free", "corpus": "shared"})
    assert not over_stdio.is_error and FERRY in text_of(over_stdio), text_of(over_stdio)
    assert "notes/island ferry.md" in text_of(found_stdio), text_of(found_stdio)


def test_a_near_duplicate_from_b_is_caught_against_the_note_of_a(hosts: dict[str, Host], database: str) -> None:
    a, b = hosts["A"], hosts["B"]
    with client() as http:
        assert a.create(http, "kiln schedule", KILN).status_code == 200
        twin = b.create(http, "ferry to the island", FERRY_TWIN)
        assert twin.status_code == 200, twin.text
        assert twin.json().get("created") is not True and "island ferry" in [r["name"] for r in twin.json()["related"]]
        assert http.get(a.note("ferry to the island")).status_code == 404  # nothing was written

        forced = b.create(http, "ferry to the island", FERRY_TWIN, confirm=True)
        assert forced.status_code == 200 and forced.json()["created"] is True, forced.text
        assert "[[island ferry]]" in http.get(a.note("ferry to the island")).json()["content"]
        assert http.delete(a.note("ferry to the island")).status_code == 200
    with psycopg.connect(database) as conn:
        names = conn.execute("SELECT name FROM gateway_vault.notes ORDER BY name").fetchall()
    assert names == [("island ferry",), ("kiln schedule",)]


def test_a_retire_on_b_is_seen_on_a(hosts: dict[str, Host]) -> None:
    a, b = hosts["A"], hosts["B"]
    with client() as http:
        retired = http.post(b.note("kiln schedule") + ":retire", json={"reason": "the kiln moved to shed 5"})
        assert retired.status_code == 200, retired.text
        assert http.get(a.note("kiln schedule")).status_code == 404
        assert "the kiln moved to shed 5" in http.get(a.note("stale__kiln schedule")).json()["content"]
        assert [n["name"] for n in http.get(a.notes).json()["notes"]] == ["island ferry"]

        assert http.post(a.note("kiln schedule") + ":restore", json={}).status_code == 200
        assert http.get(b.note("kiln schedule")).json()["content"] == KILN


def promotion(host: Host, run_id: str) -> dict[str, object]:
    [record] = [r for r in audit(host.suite, host.agent) if r.get("kind") == "promotion" and r.get("run") == run_id]
    return record


def test_a_promotion_by_the_dreaming_of_a_lands_once_and_b_finds_it(hosts: dict[str, Host], database: str) -> None:
    a, b = hosts["A"], hosts["B"]
    for host in (a, b):
        write_reply(replies(host.suite.home) / f"{host.agent}.json", [add(FACT, reason="radio", topic=TOPIC)])
    first = run_ok(a.suite, a.agent)
    assert first["status"] == "applied", first
    assert promotion(a, first["runId"])["outcome"] == "created"
    second = run_ok(b.suite, b.agent)  # B's agent learned the same fact: it is there already
    assert second["status"] == "applied", second
    assert (promotion(b, second["runId"])["outcome"], promotion(b, second["runId"])["note"]) == ("unchanged", TOPIC)

    with client() as http:
        content = http.get(b.note(TOPIC)).json()["content"]
        assert content.count(FACT) == 1 and f"agent {a.agent} run {first['runId']}" in content
        assert b.shared_paths(http, "callsign Osprey") == [f"notes/{TOPIC}.md"]
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT body FROM gateway_vault.notes WHERE body LIKE %s", (f"%{FACT}%",)).fetchall()
        assert len(rows) == 1 and rows[0][0].count(FACT) == 1
        outcomes = conn.execute("SELECT agent_id, outcome FROM gateway_vault.promotions ORDER BY promoted_at").fetchall()
    assert outcomes in ([], [(a.agent, "created"), (b.agent, "unchanged")]), outcomes
