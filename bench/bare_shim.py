"""The bare REST shim of bench/rest_files.py: the floor of an HTTP-to-gRPC hop written in Python.

The suite's architecture puts two processes on a REST GET: the shim (HTTP in,
gRPC out) and the file API (gRPC in, disk). This script is the least the
first of them can do with the same libraries: a raw ASGI callable under
uvicorn (uvloop, httptools, no access log, as the shim runs), which answers
``GET /api/v1/agents/{agentId}/files/{filename}`` with one grpc.aio call to
``GetFile`` on the server it is pointed at (the bare gRPC server, in the
bench), forwarding ``X-Api-Key``, and renders the reply as the shim's JSON.
No routing table, no transcoding, no limits, no log line, no errors mapped
(anything but a GET of that shape is a 404, any gRPC error a 502).

Paired with ``bench/bare_grpc_server.py`` it gives the CPU per REST GET and
the REST/gRPC throughput ratio that no shim-plus-file-API pair written on
these libraries can beat: the floor the issue-15 goals are measured against.

Run: ``python bench/bare_shim.py --port N --backend HOST:PORT|unix:PATH``
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import uvicorn

from gateway.event_loop import loop_name
from gateway.v1 import files_pb2, files_pb2_grpc

PREFIX = "/api/v1/agents/"
JSON_HEADERS = [(b"content-type", b"application/json")]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BareShim:
    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._stub: files_pb2_grpc.WorkspaceFilesStub | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        status, body = await self._answer(scope)
        await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, scope: Scope) -> tuple[int, bytes]:
        path: str = scope["path"]
        agent, _, rest = path[len(PREFIX):].partition("/")
        kind, _, filename = rest.partition("/")
        if scope["method"] != "GET" or not path.startswith(PREFIX) or kind != "files" or not filename:
            return 404, b'{"error":"not found"}'
        if self._stub is None:  # the channel belongs to the loop uvicorn runs
            self._stub = files_pb2_grpc.WorkspaceFilesStub(grpc.aio.insecure_channel(self._backend))
        key = next((v.decode() for k, v in scope["headers"] if k == b"x-api-key"), "")
        try:
            reply = await self._stub.GetFile(
                files_pb2.GetFileRequest(agent_id=agent, filename=filename), metadata=(("x-api-key", key),), timeout=10
            )
        except grpc.aio.AioRpcError as exc:
            return 502, json.dumps({"error": exc.details()}).encode()
        answer = {"filename": reply.filename, "content": reply.content, "sha256": reply.sha256}
        return 200, json.dumps(answer, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", required=True, help="HOST:PORT or unix:PATH of the gRPC server GetFile goes to")
    args = parser.parse_args()
    print(f"bare shim on 127.0.0.1:{args.port} -> {args.backend}", flush=True)
    uvicorn.run(
        BareShim(args.backend), host="127.0.0.1", port=args.port, loop=loop_name(), http="httptools",
        access_log=False, proxy_headers=False, log_level="warning", lifespan="on",
    )  # fmt: skip


if __name__ == "__main__":
    main()
