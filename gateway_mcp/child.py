"""``python -m gateway_mcp.child``: the REST shim's MCP child, serving the memory tools over its socket.

docs/operations.md "Memory at rest": the shim serves MCP from this child process so that the MCP
SDK (pydantic, starlette, anyio, about 40 MiB) is held only while agents use MCP. The shim
(``gateway_http.mcp_child``) starts it at an MCP request, after authorizing that request, and
passes one end of a socket pair (``--fd``). Each request comes as one frame (``gateway.mcp_frames``):
an id, the agent, the checked key headers, the parts of the ASGI scope the SDK reads, and the whole
body. It is served by the same host the shim ran in-process before
(``gateway_mcp.streamable_http.McpHost``: stateless, JSON answers), and the answer goes back as
frames carrying the id: ``start`` (status and headers), then ``body`` pieces of at most
``BODY_CHUNK_BYTES``, the last with ``more`` false; ``unavailable`` when the host could not serve
it. Requests are served concurrently, their answers interleaved by id.

The end of the stream (the shim closed its end after an idle time, at its stop, or died) lets the
requests in progress finish, then the process exits 0. Should the shim die without the stream
ending, Linux sends SIGTERM (``PR_SET_PDEATHSIG``). SIGINT is ignored: a Ctrl-C on the shim's
terminal reaches this process too, and the shim stops it. Its log lines are the shim's (the same
service name and format, on the same stdout): ``mcp_sdk``, ``mcp_tools_ready``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from typing import Any

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the shim dies; exit now if it already has (it is no longer the parent)."""
    import ctypes

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        sys.exit(0)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gateway_mcp.child", description="the REST shim's MCP child")
    parser.add_argument("--fd", type=int, required=True, help="this end of the shim's socket pair")
    parser.add_argument("--parent", type=int, required=True, help="the shim's pid")
    parser.add_argument("--kb", required=True, help="the KB's gRPC address")
    parser.add_argument("--max-body-bytes", type=int, required=True)
    parser.add_argument("--service", default="http", help="the service name of its log lines (the shim's)")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--colors", action="store_true")
    return parser.parse_args(argv)


class _Answer:
    """The ASGI ``send`` of one request: its messages as frames with its id."""

    def __init__(self, request_id: int, write: Any) -> None:
        self.id = request_id
        self._write = write
        self.started = False
        self._start = b""  # the start frame, until the body's first piece goes with it
        self.ended = asyncio.Event()

    def pending(self) -> bytes:
        """The start frame not sent yet (an answer with no body), and forget it."""
        start, self._start = self._start, b""
        return start

    async def send(self, message: dict[str, Any]) -> None:
        from gateway.mcp_frames import BODY_CHUNK_BYTES, encode, headers_out

        if message["type"] == "http.response.start":
            self.started = True  # sent with the first piece of the body: one write for a whole answer
            self._start = encode({"id": self.id, "t": "start", "status": message["status"],
                                  "headers": headers_out(list(message.get("headers", [])))})
        elif message["type"] == "http.response.body":
            body = bytes(message.get("body", b""))
            more = bool(message.get("more_body", False))
            pieces = [body[at:at + BODY_CHUNK_BYTES] for at in range(0, len(body), BODY_CHUNK_BYTES)] or [b""]
            for n, piece in enumerate(pieces):
                frame = encode({"id": self.id, "t": "body", "more": more or n < len(pieces) - 1}, piece)
                await self._write(self._start + frame)
                self._start = b""
            if not more:
                self.ended.set()


async def serve(args: argparse.Namespace) -> int:
    import structlog

    from gateway import mcp_frames
    from gateway_mcp.streamable_http import McpHost

    log = structlog.get_logger()
    sock = socket.socket(fileno=args.fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    lock = asyncio.Lock()

    async def write(frames: bytes) -> None:
        async with lock:
            if writer.is_closing():
                return  # the shim is gone: nobody reads the answer
            writer.write(frames)
            try:
                await writer.drain()
            except ConnectionError:
                writer.close()

    host = McpHost(args.kb, max_body_bytes=args.max_body_bytes)
    stop = asyncio.Event()
    hosting = asyncio.create_task(host.serve(stop))
    requests: set[asyncio.Task[None]] = set()

    async def one(meta: dict[str, Any], body: bytes) -> None:
        answer = _Answer(int(meta.get("id", 0)), write)
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answer.ended.wait()  # the client is the shim's: it stays until the answer ends
            return {"type": "http.disconnect"}

        try:
            scope = meta["scope"]
            scope.update(raw_path=scope["raw_path"].encode("latin-1"),
                         query_string=scope["query_string"].encode("latin-1"),
                         headers=mcp_frames.headers_in(scope["headers"]),
                         server=tuple(scope["server"]) if scope.get("server") else None,
                         client=tuple(scope["client"]) if scope.get("client") else None)
            credentials = tuple((str(k), str(v)) for k, v in meta["credentials"])
            served = await host.handle(meta["agent"], credentials, scope, receive, answer.send)
        except Exception as exc:  # noqa: BLE001 - a bug: the shim answers 503, the child goes on
            log.error("mcp_child_request_failed", error=type(exc).__name__)
            served = False
        if not served and not answer.started:
            await write(mcp_frames.encode({"id": answer.id, "t": "unavailable"}))
        elif not answer.ended.is_set():  # an answer cut short: end it, as a server would close the connection
            await write(answer.pending() + mcp_frames.encode({"id": answer.id, "t": "body", "more": False, "cut": True}))

    try:
        while True:
            try:
                frame = await mcp_frames.read(reader, args.max_body_bytes)
            except (mcp_frames.FrameError, ConnectionError) as exc:
                log.error("mcp_child_bad_frame", error=str(exc))
                break
            if frame is None:
                break
            task = asyncio.create_task(one(*frame))
            requests.add(task)
            task.add_done_callback(requests.discard)
        if requests:
            await asyncio.wait(set(requests))
    finally:
        stop.set()
        await hosting
        writer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(args.parent)
    from gateway import unused_extras

    unused_extras.refuse()
    from gateway.event_loop import run as run_loop
    from gateway.logs import Console, configure

    console = Console(colors=args.colors, verbose=args.verbose) if args.log_format == "console" else None
    configure(args.service, console=console)
    return run_loop(serve(args)) or 0


if __name__ == "__main__":
    sys.exit(main())
