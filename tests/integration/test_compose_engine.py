"""compose.yaml on a real Docker engine: build, up, /healthz, a PUT/GET round trip, down.

Skipped when no Docker engine (or no `docker compose`) is reachable. Needs host
port 10850 free, since compose.yaml publishes 10850:10850. testcontainers is
imported only after those checks, inside the test.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
HTTP_PORT = 10850
ENGINE_PROBE_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 60.0


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


def _admin_key(logs: str) -> str:
    """The admin key from file_api's JSON log line ``first_start`` (compose prefixes each line)."""
    for line in logs.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            event = json.loads(line[start:])
        except ValueError:
            continue
        if event.get("event") == "first_start":
            return str(event["admin_key_shown_once"])
    raise AssertionError(f"no first_start line in file_api's logs:\n{logs}")


@pytest.mark.integration
@pytest.mark.timeout(900)  # the first image build installs grpcio and friends
def test_compose_stack_serves_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = _docker_unavailable()
    if reason:
        pytest.skip(f"Docker engine test skipped: {reason}")

    from testcontainers.compose import DockerCompose

    # A project of its own: never touches a stack the developer is running.
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"gateway-test-{uuid.uuid4().hex[:8]}")
    compose = DockerCompose(REPO, compose_file_name="compose.yaml", build=True, wait=True)
    with compose:  # `up --build --wait` (every healthcheck passing), then `down --volumes`
        host, port = compose.get_service_host_and_port("http", HTTP_PORT)
        assert port == HTTP_PORT
        base = f"http://{'127.0.0.1' if host in (None, '0.0.0.0', '::') else host}:{port}"

        with httpx.Client(base_url=base, timeout=10.0) as client:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                health = client.get("/healthz")
                if health.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert health.status_code == 200, health.text
            assert health.json() == {"status": "ok", "backends": {"file_api": "SERVING"}}

            stdout, _ = compose.get_logs("file_api")
            key = _admin_key(stdout)
            url = "/api/v1/agents/alfred/files/MEMORY.md"
            content = f"# Memory\n\nwritten through compose {uuid.uuid4().hex}\n"

            assert client.put(url, json={"content": content}).status_code == 401

            put = client.put(url, json={"content": content}, headers={"X-Api-Key": key})
            assert put.status_code == 200, put.text
            assert put.json() == {"filename": "MEMORY.md", "message": "File saved. CLAUDE.md will auto-reload."}

            got = client.get(url, headers={"Authorization": f"Bearer {key}"})
            assert got.status_code == 200, got.text
            assert got.json() == {"filename": "MEMORY.md", "content": content}
