"""The REST shim in process (httpx's ASGITransport): its own answers, with no suite started.

The backends are either a closed port (nothing listens: a backend that is down) or a file API
servicer served by an in-process gRPC server over a temporary home, so what the shim answers
for an unknown route, a missing key or dead backends is checked without starting processes.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from gateway.home import ensure_home
from gateway.live_config import LiveConfig, loader
from gateway.v1 import files_pb2_grpc
from gateway_http.app import ShimApp
from services.file_api.servicer import WorkspaceFiles

BACKENDS = ("file_api", "watcher", "kb", "dreaming")
FILE_URL = "/api/v1/agents/alfred/files/SOUL.md"


def closed_port() -> str:
    """An address where nothing listens (the port was free a moment ago and is not listened on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def run_client(app: ShimApp, calls: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://shim") as client:
            return await calls(client)

    return asyncio.run(main())


@asynccontextmanager
async def file_api(home: Path) -> AsyncIterator[str]:
    """A real WorkspaceFiles servicer over ``home``'s config, on a free port; yields its address."""
    server = grpc.aio.server()
    files_pb2_grpc.add_WorkspaceFilesServicer_to_server(WorkspaceFiles(LiveConfig(loader(home, {}))), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ensure_home(tmp_path)  # config.json with agent alfred and a hashed admin key, the internal token
    return tmp_path


def test_an_unknown_route_is_404_with_the_error_body() -> None:
    app = ShimApp({name: closed_port() for name in BACKENDS})

    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.get("/api/v1/agents/alfred/nothing-here"), await client.post("/nope")]

    for reply in run_client(app, calls):
        assert reply.status_code == 404
        body = reply.json()
        assert body["code"] == grpc.StatusCode.NOT_FOUND.value[0] and body["error"] == body["message"]
        assert body["message"].startswith("no route for ")


def test_a_request_without_a_key_is_401_and_reads_nothing(home: Path) -> None:
    (home / "agents" / "alfred" / "workspace" / "SOUL.md").write_text("# Soul\nsecret soul\n")

    async def main() -> list[httpx.Response]:
        async with file_api(home) as address:
            app = ShimApp({name: address if name == "file_api" else closed_port() for name in BACKENDS})
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://shim") as client:
                return [
                    await client.get(FILE_URL),
                    await client.get(FILE_URL, headers={"X-Api-Key": "not-a-key-of-this-home"}),
                    await client.put(FILE_URL, json={"content": "overwritten"}),
                ]

    for reply in asyncio.run(main()):
        assert reply.status_code == 401, reply.text
        assert reply.json()["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
        assert "secret soul" not in reply.text
    assert (home / "agents" / "alfred" / "workspace" / "SOUL.md").read_text() == "# Soul\nsecret soul\n"


def test_healthz_is_503_naming_each_backend_when_they_are_down() -> None:
    app = ShimApp({name: closed_port() for name in BACKENDS})

    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/healthz")

    reply = run_client(app, calls)
    assert reply.status_code == 503
    assert json.loads(reply.text) == {"status": "degraded", "backends": {name: "UNAVAILABLE" for name in BACKENDS}}


def test_a_call_to_a_backend_that_is_down_is_503_naming_it() -> None:
    app = ShimApp({name: closed_port() for name in BACKENDS})

    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(FILE_URL, headers={"X-Api-Key": "any-key"})

    reply = run_client(app, calls)
    assert reply.status_code == 503
    assert reply.json()["message"] == "backend file_api is unavailable; try again shortly"
