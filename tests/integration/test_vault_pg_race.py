"""Two agent hosts racing on one PostgreSQL vault, and the server killed under them.

Eight OS processes, four through each host's REST shim, create one name at one barrier: one wins, the
seven others are 409s, and the note is the winner's bytes. Eight similar notes under eight names at once,
none confirmed: one lands, the others are told about it (the vault's advisory lock orders the
near-duplicate check and the create). Then ``kill -9`` of the postmaster while both hosts create notes in
a loop: after a restart of the server (not of the hosts) every acknowledged note is there with its exact
bytes, no note is torn, and both hosts answer again by themselves.

The module's cluster is its own, with ``synchronous_commit`` on: an acknowledged commit is then in the
kernel's page cache, which a killed server cannot lose (the session's cluster runs with it off).
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest
from pg_support import Cluster, start_cluster
from suite_support import wait_until
from two_host_support import HEADERS, Host, client, race, start_host

pytestmark = pytest.mark.integration

RACERS = 8
CRANE = "# Harbour crane\n\nThe harbour crane lifts at most 40 tonnes; book it a day ahead with the port office.\n"
RECOVERY_DEADLINE_S = 60.0
OUTAGE_REFUSALS = 3  # per writer, before the server comes back: the pools have tried to reconnect meanwhile


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    started = start_cluster({"synchronous_commit": "on"})
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(started.root, ignore_errors=True)


@pytest.fixture(scope="module")
def database(cluster: Cluster) -> str:
    return cluster.create_database("race")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[dict[str, Host]]:
    started: dict[str, Host] = {}
    try:
        for label in ("A", "B"):
            started[label] = start_host(tmp_path_factory.mktemp(f"race{label}"), label, database)
        yield started
    finally:
        for host in started.values():
            host.suite.stop_all()


def bodies(database: str, names: list[str]) -> dict[str, str]:
    """name → bytes of the live notes of ``names`` in PostgreSQL."""
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT name, head || body FROM gateway_vault.notes WHERE name = ANY(%s) AND NOT retired",
                            (names,)).fetchall()
    return dict(rows)


def test_eight_processes_creating_one_name_get_one_winner_and_its_exact_note(hosts: dict[str, Host], database: str) -> None:
    calls = [(hosts["AB"[i % 2]].notes, {"name": "harbour crane", "content": CRANE + f"\nracer {i}\n" * (i + 1)})
             for i in range(RACERS)]
    answers = race(calls)
    won = [(body, answer) for _, body, status, answer in answers if status == 200]
    lost = [answer for _, _, status, answer in answers if status != 200]
    assert len(won) == 1 and won[0][1]["created"] is True, answers
    assert [status for *_, status, _ in answers].count(409) == RACERS - 1, answers
    assert all("already exists" in answer["message"] for answer in lost), lost
    winner = won[0][0]["content"]
    assert bodies(database, ["harbour crane"]) == {"harbour crane": winner}
    for host in hosts.values():
        with client() as http:
            assert http.get(host.note("harbour crane")).json()["content"] == winner


def test_eight_similar_notes_at_once_land_one_without_confirm(hosts: dict[str, Host], database: str) -> None:
    names = [f"tide table {i}" for i in range(RACERS)]
    text = "# Tide table\n\n- high tide at the north quay is at 05:12 and 17:40\n- the slipway floods at spring tide\n"
    calls = [(hosts["AB"[i % 2]].notes, {"name": name, "content": text + f"- copied by racer {i}\n"})
             for i, name in enumerate(names)]
    answers = race(calls)
    assert all(status == 200 for _, _, status, _ in answers), answers
    created = [body["name"] for _, body, _, answer in answers if answer["created"]]
    assert len(created) == 1, answers
    for _, body, _, answer in answers:
        if not answer["created"]:
            assert created[0] in [r["name"] for r in answer["related"]], answer
    assert list(bodies(database, names)) == created


@dataclass
class Writer:
    """Creates notes of its own on one host in a loop until stopped; keeps every answer."""

    host: Host
    prefix: str
    sent: dict[str, str] = field(default_factory=dict)  # name → content, every create tried
    acked: dict[str, float] = field(default_factory=dict)  # name → when its 200 came back
    statuses: list[tuple[float, int]] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        with httpx.Client(headers=HEADERS, timeout=30) as http:
            while not stop.is_set():
                name = f"{self.prefix} {len(self.sent)}"
                content = f"# {name}\n\n" + " ".join(secrets.token_hex(6) for _ in range(400)) + "\n"
                self.sent[name] = content
                try:
                    status = self.host.create(http, name, content).status_code
                except httpx.TransportError:
                    status = 0
                self.statuses.append((time.monotonic(), status))
                if status == 200:
                    self.acked[name] = time.monotonic()

    def acked_since(self, moment: float) -> bool:
        return any(at > moment for at in self.acked.values())

    def refused_since(self, moment: float) -> int:
        return sum(1 for at, status in self.statuses if at > moment and status != 200)


def seconds_until(predicate: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    wait_until(predicate, RECOVERY_DEADLINE_S, what)
    return time.monotonic() - started


def test_a_killed_postmaster_loses_no_acknowledged_note_and_both_hosts_recover(
        hosts: dict[str, Host], cluster: Cluster, database: str) -> None:
    pids = {label: {name: proc.pid for name, proc in host.suite.procs.items()} for label, host in hosts.items()}
    writers = [Writer(hosts[label], f"{label}{n} buoy log") for label in ("A", "B") for n in range(2)]
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in writers]
    for thread in threads:
        thread.start()
    try:
        seconds_until(lambda: all(len(w.acked) >= 3 for w in writers), "every writer to have notes acknowledged")
        killed = time.monotonic()
        cluster.kill_postmaster()
        seconds_until(lambda: all(w.refused_since(killed) >= OUTAGE_REFUSALS for w in writers),
                      "both hosts to refuse creates")
        cluster.start()
        restarted = time.monotonic()
        took = {label: seconds_until(lambda h=host: any(w.acked_since(restarted) for w in writers if w.host is h),
                                f"host {label} to create again") for label, host in hosts.items()}
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    tried = [status for w in writers for _, status in w.statuses]
    print(f"\n{len(tried)} creates, {tried.count(200)} acknowledged, {len(tried) - tried.count(200)} refused; vault back "
          "after the server's restart on " + ", ".join(f"{k} in {v:.2f} s" for k, v in took.items()))

    assert set(tried) <= {200, 503}, set(tried)
    sent = {name: content for w in writers for name, content in w.sent.items()}
    acked = {name for w in writers for name in w.acked}
    stored = bodies(database, list(sent))
    assert acked <= set(stored), f"acknowledged but lost: {sorted(acked - set(stored))}"
    torn = [name for name, content in stored.items() if content != sent[name]]
    assert torn == [], torn
    with client() as http:
        for host in hosts.values():
            for name in sorted(acked)[::7]:
                assert http.get(host.note(name)).json()["content"] == sent[name]
    assert {label: {name: proc.pid for name, proc in host.suite.procs.items() if proc.poll() is None}
            for label, host in hosts.items()} == pids  # no host process restarted
