"""The bare gRPC server of bench/rest_files.py: the floor a Python grpc.aio server can reach.

It serves gateway.v1.WorkspaceFiles with the generated stubs and the suite's
server options, on the suite's event loop (``gateway.event_loop``), and does
nothing else: GetFile answers a reply built once at start (the same 4 KB the
file API reads from disk), PutFile answers the saved message without writing.
No auth, no log line, no file system, no health or reflection. The file API's
gRPC server is measured against it (the goal: at least 0.8x its GET
throughput).

With ``--required-work KEY`` it is instead the least a GetFile that keeps the
suite's rules can do, written flat in one handler: the caller's key checked
in constant time (SHA-256, ``hmac.compare_digest``) the first time it is seen
and remembered once accepted (as the suite's ``Authenticator`` does), and its
agent checked against the key's scope; one ``lstat`` to see the file is
unchanged (read again, and a new reply built, if not); one JSON line per call
(orjson, queued and written every 20 ms in one write, as the suite batches its
lines); one Prometheus histogram observation. No layering, no config, no
structlog, no health or reflection.
The file API is measured against it too: what it costs beyond that is its own
structure, and what it reaches of the bare server is bounded by this one.

Run: ``python bench/bare_grpc_server.py --port N --content FILE [--loop asyncio|uvloop] [--required-work KEY]
[--unix PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import signal
import sys
import time
from pathlib import Path

import grpc
import orjson
from prometheus_client import CollectorRegistry, Histogram

from gateway.event_loop import loop_factory
from gateway.grpc_server import SERVER_OPTIONS
from gateway.v1 import files_pb2, files_pb2_grpc

SAVED_MESSAGE = "File saved. CLAUDE.md will auto-reload."


class BareFiles(files_pb2_grpc.WorkspaceFilesServicer):
    def __init__(self, content: str) -> None:
        digest = hashlib.sha256(content.encode()).hexdigest()
        self._reply = files_pb2.GetFileResponse(filename="MEMORY.md", content=content, sha256=digest)
        self._saved = files_pb2.PutFileResponse(filename="MEMORY.md", message=SAVED_MESSAGE, sha256=digest)

    async def GetFile(self, request: files_pb2.GetFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.GetFileResponse:  # noqa: N802
        return self._reply

    async def PutFile(self, request: files_pb2.PutFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.PutFileResponse:  # noqa: N802
        return self._saved


class RequiredWork(files_pb2_grpc.WorkspaceFilesServicer):
    """GetFile doing only what the suite's rules require of it (the module docstring)."""

    def __init__(self, path: Path, key: str, agents: frozenset[str]) -> None:
        self._path = str(path)
        self._digest = hashlib.sha256(key.encode()).digest()
        self._agents = agents
        self._accepted: set[str] = set()
        self._stamp: tuple[int, int, int, int] | None = None
        self._reply = files_pb2.GetFileResponse()
        self._lines: list[bytes] = []
        self._histogram = Histogram("bare_rpc_seconds", "GetFile time", ("method", "code"), registry=CollectorRegistry())
        self._observe = self._histogram.labels("GetFile", "OK").observe

    def _flush(self) -> None:
        lines, self._lines = self._lines, []
        sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
        sys.stdout.buffer.flush()

    async def GetFile(self, request: files_pb2.GetFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.GetFileResponse:  # noqa: N802
        start = time.perf_counter()
        key = next((v for k, v in context.invocation_metadata() or () if k == "x-api-key"), "")
        if key not in self._accepted:
            if not isinstance(key, str) or not hmac.compare_digest(hashlib.sha256(key.encode()).digest(), self._digest):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown API key")
            self._accepted.add(key)
        if request.agent_id not in self._agents:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no access")
        info = os.lstat(self._path)
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if stamp != self._stamp:
            data = Path(self._path).read_bytes()
            reply = files_pb2.GetFileResponse(filename=request.filename, content=data.decode(), sha256=hashlib.sha256(data).hexdigest())
            self._reply, self._stamp = reply, stamp
        reply = self._reply
        seconds = time.perf_counter() - start
        self._observe(seconds)
        if not self._lines:
            asyncio.get_running_loop().call_later(0.02, self._flush)
        self._lines.append(orjson.dumps({
            "method": "GetFile", "agent": request.agent_id, "key": "bench", "code": "OK", "ms": round(seconds * 1000, 3),
            "event": "rpc", "service": "bare", "level": "info", "timestamp": time.time(),
        }))  # fmt: skip
        return reply


async def serve(port: int, content: str, required: RequiredWork | None = None, unix: Path | None = None) -> None:
    server = grpc.aio.server(options=SERVER_OPTIONS)
    files_pb2_grpc.add_WorkspaceFilesServicer_to_server(required or BareFiles(content), server)
    for address in [f"127.0.0.1:{port}"] + ([f"unix:{unix}"] if unix else []):
        if server.add_insecure_port(address) == 0:
            raise SystemExit(f"bare gRPC server: cannot listen on {address}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"bare gRPC server on 127.0.0.1:{port}" + (f" and unix:{unix}" if unix else ""), flush=True)
    await stop.wait()
    await server.stop(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--content", type=Path, required=True, help="the file whose text GetFile answers")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    parser.add_argument("--required-work", metavar="KEY", help="check this key, stat the file, log and count each call")
    parser.add_argument("--agent", default="alfred", help="the agent the key may read (with --required-work)")
    parser.add_argument("--unix", type=Path, help="a Unix socket to listen on as well, as the suite's services do")
    args = parser.parse_args()
    factory = loop_factory() if args.loop == "uvloop" else None
    required = RequiredWork(args.content, args.required_work, frozenset([args.agent])) if args.required_work else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.port, args.content.read_text(encoding="utf-8"), required, args.unix))


if __name__ == "__main__":
    main()
