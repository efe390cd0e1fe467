"""The suite on the PostgreSQL vault while its server is down, and after (docs/concepts/vault.md "When
PostgreSQL is down"): a cluster of the module's own, stopped (``pg_ctl stop -m immediate``) and then
``kill -9``-ed, started again each time on the same data and port.

While it is down the agent's own memory keeps working (an identity file PUT and read over REST, CLAUDE.md
recomposed, the archive searched, a dream of MEMORY.md applied), vault calls answer 503 naming the vault
over REST and a tool error over MCP HTTP, and ``/healthz``, ``gateway health kb`` and ``gateway health
http`` say degraded, naming it. Once it is back, with no restart of the KB, the next vault calls succeed,
health says ok again, and every note acknowledged before the outage is there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from dreaming_support import add, dreaming, put_file, read, reviewer, run_ok, start_suite, write_reply
from pg_support import Cluster, running_cluster
from suite_support import Suite, env_without_home, wait_claude, wait_until
from test_vault_postgres_suite import HEADERS, NOTES, note

pytestmark = pytest.mark.integration

VAULT = "shared vault of project 'global'"
LABEL = "the shared vault (PostgreSQL)"
MEMORY = "# Memory\n\n- The kiln is in the north shed.\n"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster for this module alone (its server is stopped and killed here), durable commits on."""
    with running_cluster() as own:
        yield own


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Suite]:
    dsn = cluster.create_database("outage")
    with psycopg.connect(dsn, autocommit=True) as conn:  # an acknowledged note must survive kill -9
        conn.execute("ALTER DATABASE outage SET synchronous_commit = on")
    tmp = tmp_path_factory.mktemp("pgoutage")
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", tmp / "replies" / "alfred.json"))}]
    (tmp / "replies").mkdir()
    running = start_suite(
        tmp, agents, files={"alfred": {"MEMORY.md": MEMORY, "memory/ferries.md": "# Ferries\n\n- the ferry leaves at noon\n"}},
        knowledge={"shared": {"backend": "postgres", "postgres": {"dsn": dsn}}})
    try:
        yield running
    finally:
        running.stop_all()


def health(name: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "health", name, "--home", str(home)],
                          capture_output=True, text=True, timeout=60, env=env_without_home())


def mcp_tool(suite: Suite, tool: str, arguments: dict[str, object]) -> tuple[int, dict[str, object]]:
    """One ``tools/call`` POSTed over MCP HTTP on its own: the HTTP status and the JSON-RPC result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    answer = httpx.post(f"{suite.base_url}/mcp/agents/alfred", json=body, timeout=30,
                        headers={**HEADERS, "Accept": "application/json, text/event-stream"})
    text = answer.text
    if "text/event-stream" in answer.headers.get("content-type", ""):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return answer.status_code, json.loads(text).get("result", {})


def healthz(suite: Suite) -> dict[str, object]:
    reply = httpx.get(f"{suite.base_url}/healthz", timeout=10)
    assert reply.status_code == 200, reply.text
    body: dict[str, object] = reply.json()
    return body


def assert_degraded_while_down(suite: Suite, http: httpx.Client, step: str) -> None:
    """Vault calls 503 naming the vault (REST) and a tool error (MCP); health degraded naming it."""
    refused = http.get(note("kiln"))
    assert refused.status_code == 503 and VAULT in refused.json()["message"], refused.text
    created = http.post(NOTES, json={"name": f"during {step}", "content": "Written while the server is down.\n"})
    assert created.status_code == 503 and VAULT in created.json()["message"], created.text
    status, result = mcp_tool(suite, "memory_shared_get", {"name": "kiln"})
    assert status == 200 and result.get("isError") is True, result
    assert VAULT in json.dumps(result), result

    body = healthz(suite)
    assert body["status"] == "degraded" and body["backends"] == {k: "SERVING" for k in body["backends"]}, body
    down = {f"{LABEL}: its PostgreSQL server cannot be reached",  # a pooled connection found broken
            f"{LABEL}: its PostgreSQL server refused the connection (is it running, on that port?)"}  # a new one
    assert list(body["dependencies"]) == ["kb"] and len(body["dependencies"]["kb"]) == 1, body
    assert body["dependencies"]["kb"][0] in down, body
    for name in ("kb", "http"):
        said = health(name, suite.home)
        assert said.returncode == 1 and said.stdout.startswith(f"{name} DEGRADED at "), said.stdout
        assert LABEL in said.stdout, said.stdout


def first_call_back(http: httpx.Client) -> tuple[float, str]:
    """How long the first vault call after the restart took, and the note it read."""
    started = time.monotonic()
    reply = http.get(note("kiln"))
    took = time.monotonic() - started
    assert reply.status_code == 200, reply.text
    return took, str(reply.json()["content"])


def assert_recovered(suite: Suite, http: httpx.Client, kept: dict[str, str]) -> None:
    for name, content in kept.items():
        got = http.get(note(name))
        assert got.status_code == 200 and got.json()["content"] == content, got.text
    wait_until(lambda: healthz(suite)["status"] == "ok", 15, "/healthz to say ok again")
    said = health("kb", suite.home)
    assert said.returncode == 0 and said.stdout.startswith("kb SERVING at "), said.stdout


def test_a_stopped_server_leaves_the_agents_memory_working_and_the_vault_comes_back(suite: Suite, cluster: Cluster) -> None:
    with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
        kiln = "# Kiln\n\nThe kiln fires at noon.\n"
        assert http.post(NOTES, json={"name": "kiln", "content": kiln}).json().get("created") is True
        assert healthz(suite)["status"] == "ok"

        cluster.stop("immediate")
        try:
            assert_degraded_while_down(suite, http, "stop")

            put_file(suite, "alfred", "USER.md", "# User\n\nPrefers tea over coffee.\n")
            assert http.get("/api/v1/agents/alfred/files/USER.md").json()["content"].endswith("tea over coffee.\n")
            wait_claude(suite, "alfred", "Prefers tea over coffee.")
            hits = http.get("/api/v1/agents/alfred/memory:search", params={"query": "ferry", "refresh": "true"})
            assert hits.status_code == 200 and hits.json()["hits"], hits.text

            write_reply(suite.home.parent / "replies" / "alfred.json", [add("- The glaze dries overnight.")])
            report = run_ok(suite, "alfred")
            assert report["status"] == "applied", report
            assert "- The glaze dries overnight." in read(suite, "alfred", "MEMORY.md")
        finally:
            cluster.start()

        took, content = first_call_back(http)
        assert content == kiln
        print(f"\nfirst vault call after a restart (pg_ctl stop -m immediate): {took * 1000:.0f} ms")
        assert_recovered(suite, http, {"kiln": kiln})


def test_a_killed_postmaster_loses_no_acknowledged_note_and_the_kb_reconnects(suite: Suite, cluster: Cluster) -> None:
    with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
        glaze = "# Glaze\n\nThe glaze dries overnight.\n"
        assert http.post(NOTES, json={"name": "glaze", "content": glaze, "confirm": True}).json().get("created") is True
        kiln = http.get(note("kiln")).json()["content"]

        cluster.kill_postmaster()
        try:
            assert_degraded_while_down(suite, http, "kill")
        finally:
            cluster.start()

        took, content = first_call_back(http)
        assert content == kiln
        print(f"\nfirst vault call after a restart (kill -9 of the postmaster): {took * 1000:.0f} ms")
        assert_recovered(suite, http, {"kiln": kiln, "glaze": glaze})
        after = http.post(NOTES, json={"name": "shelf", "content": "The shelf holds twelve pots.\n", "confirm": True})
        assert after.status_code == 200 and after.json().get("created") is True, after.text
