"""config.json edited under a running suite: every process follows it.

The edits are made the way an operator or the CLI makes them (a temp file
renamed into place), then the new agent and key are driven through every
service over REST: the file API, the watcher (composition and sessions), the
KB archive and the shared vault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, claude, make_home, wait_until

pytestmark = pytest.mark.integration

PROCESSES = ("file_api", "watcher", "kb", "dreaming", "http")
DAVE_KEY = "dave-key-0123456789"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("reload"))
    running = Suite(home, http_port, ports)
    try:
        running.start(*PROCESSES)
        yield running
    finally:
        running.stop_all()


def edit(suite: Suite, change: Callable[[dict[str, Any]], None]) -> None:
    path = suite.home / "config.json"
    raw = json.loads(path.read_text())
    change(raw)
    tmp = suite.home / ".config.json.test-edit"
    tmp.write_text(json.dumps(raw, indent=2))
    os.replace(tmp, path)


def add_dave(raw: dict[str, Any]) -> None:
    raw["agents"].append({"id": "dave"})
    raw["gateway"]["api"]["keys"].append({"name": "dave-writer", "key": DAVE_KEY, "agents": ["dave"], "write": True})


def remove_dave_key(raw: dict[str, Any]) -> None:
    raw["gateway"]["api"]["keys"] = [k for k in raw["gateway"]["api"]["keys"] if k.get("name") != "dave-writer"]


def reloaded(suite: Suite, name: str, **expected: list[str]) -> bool:
    for line in suite.log_lines(name):
        if line.get("event") == "config_reloaded" and all(line.get(k) == v for k, v in expected.items()):
            return True
    return False


def status(response: httpx.Response) -> int:
    return response.status_code


def test_a_new_agent_and_key_work_on_every_service(suite: Suite) -> None:
    dave = {"X-Api-Key": DAVE_KEY}
    with httpx.Client(base_url=suite.base_url, timeout=10) as http:
        assert http.get("/api/v1/agents/dave/files/MEMORY.md", headers=dave).status_code == 401
        edit(suite, add_dave)
        for name in PROCESSES:
            wait_until(lambda n=name: reloaded(suite, n, agents_added=["dave"], keys_added=["dave-writer"]), 15,
                       f"{name} to log config_reloaded")

        # file API: the key is known and the agent exists
        memory = "# Memory\n\n- dave keeps the harbour ledger in a quinoa-coloured binder\n"
        put = http.put("/api/v1/agents/dave/files/MEMORY.md", headers=dave, json={"content": memory})
        assert put.status_code == 200, put.text
        assert http.get("/api/v1/agents/dave/files/MEMORY.md", headers=dave).json()["content"] == memory
        # watcher: dave's CLAUDE.md is composed, and its sessions accept the key
        wait_until(lambda: "harbour ledger" in claude(suite, "dave"), 15, "dave's CLAUDE.md")
        session = http.post("/api/v1/agents/dave/sessions", headers=dave, json={"state": "SESSION_STATE_BUSY"})
        assert session.status_code == 200, session.text
        assert http.get("/api/v1/agents/dave/activity", headers=dave).json()["sessions"][0]["state"] == "SESSION_STATE_BUSY"
        # KB archive: dave's memory is indexed and searchable
        found = http.get("/api/v1/agents/dave/memory:search", headers=dave, params={"query": "harbour ledger", "refresh": "true"})
        assert found.status_code == 200, found.text
        assert [h["path"] for h in found.json()["hits"]] == ["MEMORY.md"]
        # KB vault: the key may write shared notes for dave
        note = http.post("/api/v1/agents/dave/shared/notes", headers=dave,
                         json={"name": "dave-ledger", "content": "The ledger binder lives on shelf three."})
        assert note.status_code == 200 and note.json()["created"] is True, note.text
        # scope still holds: dave's key does not reach alfred
        assert http.get("/api/v1/agents/alfred/files/MEMORY.md", headers=dave).status_code == 403

    for name in PROCESSES:
        assert DAVE_KEY not in suite.log_path(name).read_text(), f"{name} logged the key"


def test_a_revoked_key_stops_working_everywhere(suite: Suite) -> None:
    dave = {"X-Api-Key": DAVE_KEY}
    with httpx.Client(base_url=suite.base_url, timeout=10) as http:
        if http.get("/api/v1/agents/dave/files/MEMORY.md", headers=dave).status_code != 200:
            edit(suite, add_dave)
            wait_until(lambda: status(http.get("/api/v1/agents/dave/activity", headers=dave)) == 200, 15, "dave's key")
        edit(suite, remove_dave_key)
        checks = {
            "file_api": lambda: http.get("/api/v1/agents/dave/files/MEMORY.md", headers=dave),
            "watcher": lambda: http.get("/api/v1/agents/dave/activity", headers=dave),
            "kb": lambda: http.get("/api/v1/agents/dave/memory:search", headers=dave, params={"query": "ledger"}),
        }
        for name, call in checks.items():
            wait_until(lambda c=call: status(c()) == 401, 15, f"{name} to refuse the revoked key")
            assert "unknown API key" in call().json()["message"]
        # the admin key still reaches dave, whose agent entry stays
        assert http.get("/api/v1/agents/dave/files/MEMORY.md", headers={"X-Api-Key": ADMIN_KEY}).status_code == 200
    for name in ("file_api", "watcher", "kb"):
        assert reloaded(suite, name, keys_removed=["dave-writer"])


def test_an_invalid_edit_is_refused_and_the_running_config_kept(suite: Suite) -> None:
    path = suite.home / "config.json"
    good = path.read_text()
    admin = {"X-Api-Key": ADMIN_KEY}
    try:
        edit(suite, lambda raw: raw["agents"].insert(0, {"id": "../escape"}))
        for name in PROCESSES:
            wait_until(lambda n=name: any(l.get("event") == "config_reload_rejected" for l in suite.log_lines(n)), 15,
                       f"{name} to refuse the edit")
        rejected = [l for l in suite.log_lines("file_api") if l.get("event") == "config_reload_rejected"][-1]
        assert any("agents[0].id" in p for p in rejected["problems"])
        with httpx.Client(base_url=suite.base_url, timeout=10) as http:
            assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers=admin).status_code == 200
            assert http.get("/api/v1/agents/alfred/activity", headers=admin).status_code == 200
            assert http.get("/api/v1/agents/alfred/memory:status", headers=admin).status_code == 200
            assert http.get("/api/v1/agents/escape/files/SOUL.md", headers=admin).status_code == 404
    finally:
        tmp = suite.home / ".config.json.test-edit"
        tmp.write_text(good)
        os.replace(tmp, path)


def test_a_port_change_waits_for_a_restart_and_says_so(suite: Suite) -> None:
    def move_kb(raw: dict[str, Any]) -> None:
        raw["gateway"]["grpc"]["kb"] += 1

    def move_back(raw: dict[str, Any]) -> None:
        raw["gateway"]["grpc"]["kb"] -= 1

    edit(suite, move_kb)
    try:
        for name in PROCESSES:
            wait_until(lambda n=name: reloaded(suite, n, needs_restart=["gateway.grpc.kb"]), 15, f"{name} to log it")
        with httpx.Client(base_url=suite.base_url, timeout=10) as http:
            found = http.get("/api/v1/agents/alfred/memory:status", headers={"X-Api-Key": ADMIN_KEY})
            assert found.status_code == 200, found.text  # the shim still reaches the KB where it runs
    finally:
        edit(suite, move_back)



def test_agents_and_keys_added_with_the_cli_work_at_once_on_every_service(suite: Suite) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *args, "--home", str(suite.home)],
                              capture_output=True, text=True, timeout=60, check=True)

    cli("agents", "add", "erin")
    key = cli("keys", "add", "erin-writer", "--agents", "erin", "--write").stdout.strip()
    erin = {"X-Api-Key": key}
    with httpx.Client(base_url=suite.base_url, timeout=10) as http:
        checks = {
            "file_api": lambda: http.put("/api/v1/agents/erin/files/USER.md", headers=erin, json={"content": "- Erin likes kites\n"}),
            "watcher": lambda: http.get("/api/v1/agents/erin/activity", headers=erin),
            "kb": lambda: http.get("/api/v1/agents/erin/memory:search", headers=erin, params={"query": "kites", "refresh": "true"}),
        }
        for name, call in checks.items():
            wait_until(lambda c=call: status(c()) == 200, 15, f"{name} to accept the key made by gateway keys add")
        assert [h["path"] for h in checks["kb"]().json()["hits"]] == ["USER.md"]
        cli("keys", "revoke", "erin-writer")
        for name, call in checks.items():
            wait_until(lambda c=call: status(c()) == 401, 15, f"{name} to refuse the revoked key")
    assert (suite.home / "config.json").stat().st_mode & 0o777 == 0o600
