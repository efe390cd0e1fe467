"""No promotion lost across an outage: the real suite (KB, dreaming, REST shim) on the PostgreSQL vault of a
``pg_support`` cluster of this module's own, which the tests stop and start, with the stub reviewer.

A dream while PostgreSQL is down writes MEMORY.md and keeps its promotions on the host; once the server is
back, the next dream lands each exactly once (counted in PostgreSQL), and a third sends nothing. A promotion
whose answer is lost on the way back (a relay between dreaming and the KB swallows it, then cuts the
connection) is retried by the next dream under the same request id: the KB gives its recorded answer back
and the note holds the fact once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from dreaming_support import (
    add,
    audit,
    dreaming,
    journal,
    read,
    replies,
    reviewer,
    run_ok,
    shim_sees,
    start_suite,
    write_reply,
)
from pg_support import Cluster, running_cluster
from suite_support import ADMIN_KEY, Suite, wait_until, workspace

pytestmark = pytest.mark.integration

FERRY = "- The island ferry leaves pier 4 at 08:15 on weekdays."
KILN = "- The pottery kiln in shed two fires at 1200 degrees on Fridays."
GATE = "- The yard gate code changes on the first Monday of each month."
RELAY_HOST = "127.0.0.2"  # dreaming reaches the KB here (GATEWAY_KB_HOST); the relay forwards to the KB
PENDING = ".dreaming/promotions.pending.json"


class Relay:
    """A TCP relay from ``RELAY_HOST``:``port`` to 127.0.0.1:``port``. While ``mute`` is set the answers
    are swallowed; ``cut`` closes every connection, so a call in flight fails as a lost answer does."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.mute = threading.Event()
        self._server = socket.create_server((RELAY_HOST, port))
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.port))
            except OSError:
                return
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not (answers and self.mute.is_set()):
                    sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            gone, self._open = self._open, []
        for sock in gone:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._server.close()
        self.cut()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster of this module's own: its tests stop and start it."""
    with running_cluster() as running:
        yield running


@pytest.fixture(scope="module")
def database(cluster: Cluster) -> str:
    return cluster.create_database("outage")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[tuple[Suite, Relay]]:
    """alfred, dreaming with the stub reviewer, on the PostgreSQL vault; dreaming reaches the KB through a relay."""
    tmp = tmp_path_factory.mktemp("outage")
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", tmp / "home" / "replies" / "alfred.json"))}]
    files = {"alfred": {"MEMORY.md": "# Memory\n\n- The office plants need water on Mondays.\n"}}
    shared = {"backend": "postgres", "postgres": {"dsn": database, "connectTimeoutS": 1}}
    running = start_suite(tmp, agents, services=("kb",), files=files, knowledge={"shared": shared})
    relay = Relay(running.ports["kb"])
    try:
        os.environ["GATEWAY_KB_HOST"] = RELAY_HOST
        try:
            running.start("dreaming")
        finally:
            del os.environ["GATEWAY_KB_HOST"]
        running.start("http")  # after dreaming: its channel to dreaming starts on a server that listens
        wait_until(lambda: shim_sees(running, "dreaming"), 15, "the REST shim to reach dreaming")
        yield running, relay
    finally:
        running.stop_all()
        relay.close()


def dream(suite: Suite, *proposals: dict[str, Any]) -> dict[str, Any]:
    write_reply(replies(suite.home) / "alfred.json", proposals)
    return run_ok(suite, "alfred")


def promotions(suite: Suite, run_id: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, "alfred") if r.get("kind") == "promotion" and r.get("run") == run_id]


def facts_in_vault(database: str, fact: str) -> int:
    """How many times ``fact`` stands in the vault's notes, read in PostgreSQL itself."""
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT head || body FROM gateway_vault.notes WHERE project = 'global'").fetchall()
    return sum(str(text).count(fact) for (text,) in rows)


def vault_answers(suite: Suite) -> bool:
    with httpx.Client(base_url=suite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=10) as http:
        return http.get("/api/v1/agents/alfred/shared/notes").status_code == 200


def test_promotions_kept_through_an_outage_land_once_when_the_server_is_back(
        suite: tuple[Suite, Relay], cluster: Cluster, database: str) -> None:
    running, _ = suite
    cluster.stop("immediate")
    try:
        down = dream(running, add(FERRY, reason="ferry times", topic="ferry-times"),
                     add(KILN, reason="kiln schedule", topic="kiln-schedule"))
    finally:
        cluster.start()
    assert down["status"] == "applied"
    memory = read(running, "alfred", "MEMORY.md")
    assert FERRY in memory and KILN in memory  # the local dream stands
    kept = promotions(running, down["runId"])
    assert [r["outcome"] for r in kept] == ["pending", "pending"], kept
    assert "UNAVAILABLE" in kept[0]["reason"] and "kept on this host" in kept[0]["reason"]
    assert len(read(running, "alfred", PENDING).split('"requestId"')) == 3

    wait_until(lambda: vault_answers(running), 30, "the KB to reach PostgreSQL again")
    back = dream(running)  # nothing of its own to promote: the kept ones go
    landed = promotions(running, back["runId"])
    assert [(r["op"], r["outcome"], r.get("retryOf")) for r in landed] == [
        (f"{down['runId']}/1", "created", down["runId"]), (f"{down['runId']}/2", "created", down["runId"])], landed
    assert facts_in_vault(database, FERRY) == 1 and facts_in_vault(database, KILN) == 1
    assert not (workspace(running, "alfred") / PENDING).exists()

    third = dream(running)
    assert promotions(running, third["runId"]) == [] and "promotion" not in third["steps"]
    assert facts_in_vault(database, FERRY) == 1 and facts_in_vault(database, KILN) == 1
    with psycopg.connect(database) as conn:
        requests = conn.execute("SELECT request_id, outcome FROM gateway_vault.promotions ORDER BY request_id").fetchall()
    assert requests == [(f"alfred/{down['runId']}/1", "created"), (f"alfred/{down['runId']}/2", "created")]


def waiting_on_a_lock(database: str) -> bool:
    with psycopg.connect(database, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND datname = current_database()").fetchone()
    return bool(row and row[0])


def test_a_lost_answer_is_retried_and_the_kb_gives_its_first_answer_back(
        suite: tuple[Suite, Relay], database: str) -> None:
    running, relay = suite
    wait_until(lambda: vault_answers(running), 30, "the KB to reach PostgreSQL")
    report: dict[str, Any] = {}
    write_reply(replies(running.home) / "alfred.json", [add(GATE, reason="gate code", topic="gate-code")])
    worker = threading.Thread(target=lambda: report.update(run_ok(running, "alfred")))
    with psycopg.connect(database) as holder:  # the promotion waits on this lock while the relay is muted
        holder.execute("LOCK TABLE gateway_vault.promotions IN ACCESS EXCLUSIVE MODE")
        worker.start()
        wait_until(lambda: waiting_on_a_lock(database), 30, "the KB's promotion to wait on the promotions table")
        relay.mute.set()
        holder.rollback()
    try:
        wait_until(lambda: facts_in_vault(database, GATE) == 1, 15, "the promotion to land in PostgreSQL")
    finally:
        relay.cut()
        relay.mute.clear()
        worker.join(60)
    [lost] = promotions(running, report["runId"])
    assert lost["outcome"] == "pending" and "UNAVAILABLE" in lost["reason"], lost

    again = dream(running)
    [retried] = promotions(running, again["runId"])
    assert (retried["outcome"], retried["note"], retried.get("retryOf")) == ("created", "gate-code", report["runId"])
    assert "answered 'created'" in retried["reason"]
    assert facts_in_vault(database, GATE) == 1
    journaled = [r for r in journal(running, "alfred") if r.get("kind") == "promotion" and r.get("note") == "gate-code"]
    assert [(r["run"], r["op"]) for r in journaled] == [(report["runId"], f"{report['runId']}/1")]
