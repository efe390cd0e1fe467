"""The bare gRPC server of bench/rest_files.py: the floor a Python grpc.aio server can reach.

It serves gateway.v1.WorkspaceFiles with the generated stubs and the suite's
server options, on the suite's event loop (``gateway.event_loop``), and does
nothing else: GetFile answers a reply built once at start (the same 4 KB the
file API reads from disk), PutFile answers the saved message without writing.
No auth, no log line, no file system, no health or reflection. The file API's
gRPC server is measured against it (issue 15: at least 0.8x its GET
throughput).

Run: ``python bench/bare_grpc_server.py --port N --content FILE [--loop asyncio|uvloop]``
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

import grpc

from gateway.event_loop import loop_factory
from gateway.grpc_server import SERVER_OPTIONS
from gateway.v1 import files_pb2, files_pb2_grpc

SAVED_MESSAGE = "File saved. CLAUDE.md will auto-reload."


class BareFiles(files_pb2_grpc.WorkspaceFilesServicer):
    def __init__(self, content: str) -> None:
        self._reply = files_pb2.GetFileResponse(filename="MEMORY.md", content=content)
        self._saved = files_pb2.PutFileResponse(filename="MEMORY.md", message=SAVED_MESSAGE)

    async def GetFile(self, request: files_pb2.GetFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.GetFileResponse:  # noqa: N802
        return self._reply

    async def PutFile(self, request: files_pb2.PutFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.PutFileResponse:  # noqa: N802
        return self._saved


async def serve(port: int, content: str) -> None:
    server = grpc.aio.server(options=SERVER_OPTIONS)
    files_pb2_grpc.add_WorkspaceFilesServicer_to_server(BareFiles(content), server)
    if server.add_insecure_port(f"127.0.0.1:{port}") == 0:
        raise SystemExit(f"bare gRPC server: cannot listen on 127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"bare gRPC server on 127.0.0.1:{port}", flush=True)
    await stop.wait()
    await server.stop(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--content", type=Path, required=True, help="the file whose text GetFile answers")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    args = parser.parse_args()
    factory = loop_factory() if args.loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.port, args.content.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
