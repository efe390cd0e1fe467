"""Two agent hosts on one PostgreSQL vault: helpers of test_vault_two_hosts.py and test_vault_pg_race.py.

A host is a ``suite_support.Suite`` of its own (its own home, its own ports) whose config points the
shared vault at one DSN (``gateway.knowledge.shared.backend: postgres``); host A runs agent ``ada``, host
B agent ``bea``, both in the default shared project. ``race`` runs calls in separate OS processes that
all start them at one barrier.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from dreaming_support import dreaming, reviewer, start_suite
from suite_support import ADMIN_KEY, Suite

AGENTS = {"A": "ada", "B": "bea"}
HEADERS = {"X-Api-Key": ADMIN_KEY}
RACE_TIMEOUT_S = 60.0


def vault_settings(dsn: str) -> dict[str, Any]:
    """The ``knowledge`` block of a host on the PostgreSQL vault at ``dsn`` (a short connect timeout: a
    server that is down answers 503 in about 2 s)."""
    return {"shared": {"backend": "postgres", "postgres": {"dsn": dsn, "connectTimeoutS": 2}}}


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
               memory: str = "# Memory\n") -> Host:
    """Host ``label`` ("A" or "B") with its agent, its MEMORY.md and ``services`` started; the caller stops
    it. Its agent dreams with ``tests/reviewers/reply.py``, answering from ``reply_file``."""
    agent = AGENTS[label]
    agents = [{"id": agent, "dreaming": dreaming(reviewer("reply.py", reply_file(tmp / "home", agent)))}]
    suite = start_suite(tmp, agents, services=services, files={agent: {"MEMORY.md": memory}},
                        knowledge=vault_settings(dsn))
    return Host(label, suite, agent)


def reply_file(home: Path, agent: str) -> Path:
    return home / "replies" / f"{agent}.json"


def client() -> httpx.Client:
    return httpx.Client(headers=HEADERS, timeout=30)


# --- races between OS processes ---------------------------------------------------------------------


def post_at_barrier(barrier: Any, out: Any, url: str, body: dict[str, Any]) -> None:
    """One racer (a child process): connect, wait at ``barrier``, POST ``body`` to ``url``; puts
    (url, body, status, answer) on ``out``."""
    with httpx.Client(headers=HEADERS, timeout=RACE_TIMEOUT_S) as http:
        http.get(url.split("/api/", 1)[0] + "/healthz")  # the connection is open before the start
        barrier.wait(RACE_TIMEOUT_S)
        response = http.post(url, json=body)
    out.put((url, body, response.status_code, response.json()))


def race(calls: Sequence[tuple[str, dict[str, Any]]],
         racer: Callable[[Any, Any, str, dict[str, Any]], None] = post_at_barrier) -> list[tuple[str, dict[str, Any], int, Any]]:
    """Each (url, body) POSTed by a process of its own, all released at once; their answers."""
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(len(calls)), context.Queue()
    procs = [context.Process(target=racer, args=(barrier, out, url, body)) for url, body in calls]
    for proc in procs:
        proc.start()
    answers = [out.get(timeout=RACE_TIMEOUT_S) for _ in procs]
    for proc in procs:
        proc.join(RACE_TIMEOUT_S)
        assert proc.exitcode == 0, f"a racer exited with {proc.exitcode}"
    return answers
