"""compose.yaml on a real Docker engine, through testcontainers' compose support.

``up --build --wait`` (init completes, every health check passes), the admin
key from ``docker compose logs init``, the README's curl examples (PUT then GET
a file through the shim), one write followed into CLAUDE.md, and one dream run
with a scripted reviewer copied into the home volume; then ``down --volumes``.

Skipped, with the reason, when there is no ``docker`` CLI, no engine answers
``docker info``, the compose plugin is missing, or host port 10850 (which
compose.yaml publishes) is taken. testcontainers is imported only after those
checks, inside the test, so collection never needs it or an engine.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from suite_support import wait_until

REPO = Path(__file__).resolve().parents[2]
REVIEWERS = REPO / "tests" / "reviewers"
HTTP_PORT = 10850
ENGINE_PROBE_TIMEOUT_S = 10.0
ADMIN_KEY = re.compile(r"\bgw_[A-Za-z0-9_-]{20,}")
SERVERS = ("file_api", "watcher", "kb", "dreaming", "http")
# Writes files into the home volume as the image's user: {path: text} as JSON in argv[1].
WRITE_FILES = (
    "import json, os, sys\n"
    "for path, text in json.loads(sys.argv[1]).items():\n"
    "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
    "    with open(path + '.tmp', 'w', encoding='utf-8') as f:\n"
    "        f.write(text)\n"
    "    os.chmod(path + '.tmp', 0o600)\n"
    "    os.replace(path + '.tmp', path)\n"
)
READ_FILE = "import sys, pathlib\np = pathlib.Path(sys.argv[1])\nsys.stdout.write(p.read_text() if p.exists() else '')\n"


def _docker_unavailable() -> str | None:
    """Why the stack cannot run here, or None when it can."""
    docker = shutil.which("docker")
    if docker is None:
        return "no `docker` CLI on PATH"
    for argv, what in (
        ([docker, "info", "--format", "{{.ServerVersion}}"], "no Docker engine reachable (`docker info` failed)"),
        ([docker, "compose", "version"], "the `docker compose` plugin is not installed"),
    ):
        try:
            done = subprocess.run(argv, capture_output=True, timeout=ENGINE_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{what}: {exc}"
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip().splitlines()
            return f"{what}: {detail[-1] if detail else 'exit ' + str(done.returncode)}"
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", HTTP_PORT))
        except OSError:
            return f"host port {HTTP_PORT} is in use; compose.yaml publishes it"
    return None


def admin_key(logs: str) -> str:
    """The admin key ``gateway init`` printed once (compose prefixes each line with the service)."""
    keys = ADMIN_KEY.findall(logs)
    assert len(keys) == 1, f"expected the admin key once in init's log:\n{logs}"
    return keys[0]


def _python(compose: Any, service: str, script: str, *args: str) -> str:
    """stdout of ``python -c script args`` in ``service``'s container (testcontainers raises
    CalledProcessError when it fails)."""
    stdout, _, _ = compose.exec_in_container(["python", "-c", script, *args], service)
    return str(stdout)


def _serving(compose: Any, name: str) -> bool:
    """``gateway health NAME`` in its own container exits 0 (a container restarting fails the exec)."""
    try:
        compose.exec_in_container(["gateway", "health", name], name)
    except subprocess.CalledProcessError:
        return False
    return True


@pytest.mark.integration
@pytest.mark.timeout(900)  # the first image build installs grpcio and friends
def test_compose_stack_serves_rest_composes_and_dreams(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = _docker_unavailable()
    if reason:
        pytest.skip(f"Docker engine test skipped: {reason}")

    from testcontainers.compose import DockerCompose

    # A project of its own (COMPOSE_PROJECT_NAME beats the file's `name:`): never a stack the developer runs.
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"gateway-test-{uuid.uuid4().hex[:8]}")
    compose = DockerCompose(REPO, compose_file_name="compose.yaml", build=True, wait=True)
    with compose:  # `up --build --wait`, then `down --volumes`
        states = {c.Service: (c.State, c.Health) for c in compose.get_containers(include_all=True)}
        assert states.pop("init")[0] == "exited"
        assert states == {name: ("running", "healthy") for name in SERVERS}, states
        for name in SERVERS:
            stdout, _, code = compose.exec_in_container(["gateway", "health", name], name)
            assert code == 0 and stdout.startswith(f"{name} SERVING at 127.0.0.1:"), stdout

        init_logs, _ = compose.get_logs("init")
        key = admin_key(init_logs)
        for name in SERVERS:  # the key is in init's log only
            assert key not in "".join(compose.get_logs(name)), name

        host, port = compose.get_service_host_and_port("http", HTTP_PORT)
        base = f"http://{'127.0.0.1' if host in (None, '0.0.0.0', '::') else host}:{port}"
        with httpx.Client(base_url=base, timeout=30.0) as client:
            health = client.get("/healthz")
            assert health.status_code == 200, health.text
            assert health.json()["status"] == "ok"

            # The README's two curl commands: PUT SOUL.md with X-Api-Key, GET it with a bearer token.
            soul = "# Soul\n\nAlfred is warm, helpful, and precise."
            url = "/api/v1/agents/alfred/files/SOUL.md"
            assert client.put(url, json={"content": soul}).status_code == 401
            put = client.put(url, json={"content": soul}, headers={"X-Api-Key": key, "Content-Type": "application/json"})
            assert put.status_code == 200, put.text
            sha256 = hashlib.sha256(soul.encode()).hexdigest()
            assert put.json() == {"filename": "SOUL.md", "message": "File saved. CLAUDE.md will auto-reload.", "sha256": sha256,
                                  "warnings": []}
            got = client.get(url, headers={"Authorization": f"Bearer {key}"})
            assert (got.status_code, got.json()) == (200, {"filename": "SOUL.md", "content": soul, "sha256": sha256})

            # The write reaches CLAUDE.md on the shared volume (the watcher's container composed it).
            claude_md = "/data/agents/alfred/workspace/CLAUDE.md"
            wait_until(lambda: "Alfred is warm, helpful, and precise." in _python(compose, "watcher", READ_FILE, claude_md),
                       30, "CLAUDE.md to hold SOUL.md's text")

            # One dream: a scripted reviewer in the home volume, set as alfred's reviewerCommand.
            fact = f"- The compose stack test ran {uuid.uuid4().hex[:8]}."
            reply = {"summary": "scripted", "proposals": [{"op": "add", "file": "MEMORY.md", "content": fact, "reason": "test"}]}
            _python(compose, "dreaming", WRITE_FILES, json.dumps({
                "/data/reviewers/reply.py": (REVIEWERS / "reply.py").read_text(encoding="utf-8"),
                "/data/reviewers/reply.json": json.dumps(reply),
            }))
            config = json.loads(_python(compose, "dreaming", READ_FILE, "/data/config.json"))
            config["agents"][0]["dreaming"] = {
                "enabled": True, "mode": "auto", "reviewerTimeoutSeconds": 60,
                "reviewerCommand": ["/usr/local/bin/python", "/data/reviewers/reply.py", "/data/reviewers/reply.json"],
            }
            _python(compose, "dreaming", WRITE_FILES, json.dumps({"/data/config.json": json.dumps(config, indent=2)}))
            # A restart makes certain dreaming runs with the new reviewer; wait until it serves again.
            compose._run_command([*compose.compose_command_property, "restart", "dreaming"])
            wait_until(lambda: _serving(compose, "dreaming"), 60, "dreaming to serve again")
            wait_until(lambda: client.get("/healthz").status_code == 200, 30, "the shim to reach dreaming again")

            run = client.post("/api/v1/agents/alfred/dream:run", json={}, headers={"X-Api-Key": key})
            assert run.status_code == 200, run.text
            report = run.json()
            assert report["status"] == "applied", report
            memory = client.get("/api/v1/agents/alfred/files/MEMORY.md", headers={"X-Api-Key": key})
            assert fact in memory.json()["content"], memory.text
            wait_until(lambda: fact in _python(compose, "watcher", READ_FILE, claude_md), 30, "CLAUDE.md to hold the dream's fact")
