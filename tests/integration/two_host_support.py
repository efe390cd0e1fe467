"""Two agent hosts on one PostgreSQL vault: helpers of test_vault_two_hosts.py, test_vault_pg_race.py and
test_vault_pg_partition.py.

A host is a ``suite_support.Suite`` of its own (its own home, its own ports) whose config points the
shared vault at one DSN (``gateway.knowledge.shared.backend: postgres``); host A runs agent ``ada``, host
B agent ``bea``, both in the default shared project. ``race`` runs calls in separate OS processes
(``vault_racer.py``) released at once; ``through_an_outage`` keeps both hosts creating while the vault goes
away and comes back.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from dreaming_support import dreaming, reviewer, start_suite
from suite_support import ADMIN_KEY, Suite, wait_until

AGENTS = {"A": "ada", "B": "bea"}
HEADERS = {"X-Api-Key": ADMIN_KEY}
RACE_TIMEOUT_S = 60.0
RECOVERY_DEADLINE_S = 60.0
OUTAGE_REFUSALS = 3  # per writer before the vault comes back: the pools have tried to reconnect meanwhile
RACER = Path(__file__).with_name("vault_racer.py")


def vault_settings(dsn: str, **postgres: Any) -> dict[str, Any]:
    """The ``knowledge`` block of a host on the PostgreSQL vault at ``dsn`` (a short connect timeout: a
    server that is down answers 503 in about 2 s; ``postgres``: more keys of its ``postgres`` block)."""
    return {"shared": {"backend": "postgres", "postgres": {"dsn": dsn, "connectTimeoutS": 2, **postgres}}}


@dataclass
class Host:
    """An agent host: its suite and the agent it serves."""

    label: str
    suite: Suite
    agent: str

    @property
    def notes(self) -> str:
        return f"{self.suite.base_url}/api/v1/agents/{self.agent}/shared/notes"

    def note(self, name: str) -> str:
        return f"{self.notes}/{quote(name, safe='')}"

    def create(self, http: httpx.Client, name: str, content: str, confirm: bool = False) -> httpx.Response:
        return http.post(self.notes, json={"name": name, "content": content, "confirm": confirm})

    def shared_paths(self, http: httpx.Client, query: str) -> list[str]:
        """The paths of a shared-corpus search by the host's agent over REST."""
        response = http.get(f"{self.suite.base_url}/api/v1/agents/{self.agent}/memory:search",
                            params={"query": query, "corpus": "shared"})
        assert response.status_code == 200, response.text
        return [hit["path"] for hit in response.json().get("hits", [])]


def start_host(tmp: Path, label: str, dsn: str, services: Sequence[str] = ("kb", "http"),
               address: str = "127.0.0.1", wrap: tuple[str, ...] = (), postgres: dict[str, Any] | None = None) -> Host:
    """Host ``label`` ("A" or "B") with its agent and ``services`` started, listening on ``address``, its
    processes run under ``wrap`` (``postgres``: more keys of the vault's ``postgres`` block); the caller
    stops it. Its agent dreams with ``tests/reviewers/reply.py``, answering from ``<home>/replies/<agent>.json``."""
    agent = AGENTS[label]
    agents = [{"id": agent, "dreaming": dreaming(reviewer("reply.py", tmp / "home" / "replies" / f"{agent}.json"))}]

    def listen(config: dict[str, Any], _: Suite) -> None:
        config["gateway"]["grpc"]["host"] = config["gateway"]["api"]["host"] = address

    suite = start_suite(tmp, agents, services=(), files={agent: {"MEMORY.md": "# Memory\n"}}, configure=listen,
                        knowledge=vault_settings(dsn, **(postgres or {})))
    suite.host, suite.wrap = address, wrap
    try:
        suite.start(*services)
    except BaseException:
        suite.stop_all()
        raise
    return Host(label, suite, agent)


@contextlib.contextmanager
def running_hosts(tmp: pytest.TempPathFactory, dsn: str, place: Callable[[str], dict[str, Any]] = lambda _: {},
                  services: Sequence[str] = ("kb", "http")) -> Iterator[dict[str, Host]]:
    """Hosts A and B on ``dsn`` (``place(label)``: more arguments of ``start_host``), stopped at the end."""
    started: dict[str, Host] = {}
    try:
        for label in AGENTS:
            started[label] = start_host(tmp.mktemp(f"host{label}"), label, dsn, services, **place(label))
        yield started
    finally:
        for host in started.values():
            host.suite.stop_all()


def client() -> httpx.Client:
    return httpx.Client(headers=HEADERS, timeout=30)


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


def bodies(database: str, names: list[str]) -> dict[str, str]:
    """name → bytes of the live notes of ``names`` in PostgreSQL."""
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT name, head || body FROM gateway_vault.notes WHERE name = ANY(%s) AND NOT retired",
                            (names,)).fetchall()
    return dict(rows)


def seconds_until(predicate: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    wait_until(predicate, RECOVERY_DEADLINE_S, what)
    return time.monotonic() - started


def through_an_outage(hosts: dict[str, Host], database: str, cut: Callable[[], None], mend: Callable[[], None]) -> str:
    """Two writers per host create notes while ``cut()`` takes the vault away and, once every writer has been
    refused ``OUTAGE_REFUSALS`` times, ``mend()`` brings it back. Asserts that every answer was a 200 or a
    503, that every acknowledged note is there with its exact bytes and no note is torn, that both hosts
    create again within ``RECOVERY_DEADLINE_S`` and that none of their processes restarted; a one-line
    summary with how long each host took to recover."""
    pids = {label: {name: proc.pid for name, proc in host.suite.procs.items()} for label, host in hosts.items()}
    writers = [Writer(host, f"{label}{n} buoy log") for label, host in hosts.items() for n in range(2)]
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in writers]
    for thread in threads:
        thread.start()
    try:
        seconds_until(lambda: all(len(w.acked) >= 3 for w in writers), "every writer to have notes acknowledged")
        cut_at = time.monotonic()
        cut()
        seconds_until(lambda: all(w.refused_since(cut_at) >= OUTAGE_REFUSALS for w in writers),
                      "both hosts to refuse creates")
        mend()
        mended = time.monotonic()
        took = {label: seconds_until(lambda h=host: any(w.acked_since(mended) for w in writers if w.host is h),
                                     f"host {label} to create again") for label, host in hosts.items()}
    finally:
        stop.set()
        for thread in threads:
            thread.join(RACE_TIMEOUT_S)
    tried = [status for w in writers for _, status in w.statuses]
    assert set(tried) <= {200, 503}, set(tried)
    sent = {name: content for w in writers for name, content in w.sent.items()}
    acked = {name for w in writers for name in w.acked}
    stored = bodies(database, list(sent))
    assert acked <= set(stored), f"acknowledged but lost: {sorted(acked - set(stored))}"
    assert [name for name, content in stored.items() if content != sent[name]] == []  # none torn
    with client() as http:
        for host in hosts.values():
            for name in sorted(acked)[::7]:
                assert http.get(host.note(name)).json()["content"] == sent[name]
    assert {label: {name: proc.pid for name, proc in host.suite.procs.items() if proc.poll() is None}
            for label, host in hosts.items()} == pids  # no host process restarted
    late = sum(w.refused_since(mended) for w in writers)
    return (f"{len(tried)} creates, {tried.count(200)} acknowledged, {len(tried) - tried.count(200)} refused "
            f"({late} of them after the vault was back); back after {(mended - cut_at):.1f} s away on "
            + ", ".join(f"{k} in {v:.2f} s" for k, v in took.items()))


# --- races ---------------------------------------------------------------------------------------------


def race(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any], int, Any]]:
    """Each (url, body) POSTed by an OS process of its own (``vault_racer.py``), all released at once once
    every one has its connection open; (url, body, status, answer) of each."""
    procs = [subprocess.Popen([sys.executable, str(RACER), url, ADMIN_KEY], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for url, _ in calls]
    try:
        for proc, (_, body) in zip(procs, calls, strict=True):
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(body) + "\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [proc.communicate(timeout=RACE_TIMEOUT_S)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    answers = [json.loads(out) for out in outs]
    return [(url, body, a["status"], a["answer"]) for (url, body), a in zip(calls, answers, strict=True)]


def race_in_threads(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any], int, Any]]:
    """``race`` from threads of this process: the hosts' KBs race all the same, and no interpreter starts."""
    barrier = threading.Barrier(len(calls))

    def one(call: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any], int, Any]:
        url, body = call
        with httpx.Client(headers=HEADERS, timeout=RACE_TIMEOUT_S) as http:
            http.get(url.split("/api/", 1)[0] + "/healthz")
            barrier.wait(RACE_TIMEOUT_S)
            response = http.post(url, json=body)
        return url, body, response.status_code, response.json()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, calls))
