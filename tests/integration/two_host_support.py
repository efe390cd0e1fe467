"""Two agent hosts on one PostgreSQL vault: helpers of test_vault_two_hosts.py and test_vault_pg_race.py.

A host is a ``suite_support.Suite`` of its own (its own home, its own ports) whose config points the
shared vault at one DSN (``gateway.knowledge.shared.backend: postgres``); host A runs agent ``ada``, host
B agent ``bea``, both in the default shared project. ``race`` runs calls in separate OS processes
(``vault_racer.py``) released at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
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
RACER = Path(__file__).with_name("vault_racer.py")


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
