"""The shim's MCP host that serves from a child process, stopped when idle (docs/operations.md "Memory at rest").

The MCP SDK (pydantic, starlette, anyio: about 40 MiB) is never imported by the shim. At an MCP
request the mount has authorized (``gateway_http.mcp_mount``), ``ChildHost`` starts a child,
``python -m gateway_mcp.child``, which runs the same host the shim ran in-process before
(``gateway_mcp.streamable_http``: stateless, one JSON body per POST), unless one is running. The
two talk over a socket pair (``gateway.mcp_frames``): each request goes as one frame with an id
(the agent, the checked key headers, the scope's parts the SDK reads, the body read whole and
bounded by the mount's ``max_body_bytes``), and the child's frames with that id are replayed to
the request's ``send``; concurrent requests share the socket, matched by id.

**Idle stop.** With no MCP request in progress for ``gateway.api.mcpIdleSeconds`` (0: never),
``serve`` closes the shim's end of the socket: the child exits, and is reaped. The next MCP request
starts a new one (its first answer then waits for the child to load the SDK, about 1 s of CPU).
The key is read at each idle check (at most ``CHECK_CAP_S`` apart while a child runs, and at the
end of every request), so a live edit applies there, without a restart.

**Failures.** A child that cannot be started, exits, or sends a bad frame fails its requests in
progress with the mount's 503 (``Unavailable``), is reaped, and the next request starts a new one.
A request the child could not serve (its host not up in time) is answered 503 too. The child exits
when the shim dies (end of the stream; ``PR_SET_PDEATHSIG`` besides). The shim's stop (``stop``)
closes the stream and waits for the child (SIGKILL after ``STOP_WAIT_S``). The child writes its log
lines to the shim's stdout and stderr, as the shim's service, in its format.

One child per shim process: each worker of ``gateway.api.workers`` starts its own.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import structlog

from gateway import mcp_frames
from gateway_http.mcp_mount import Refused, Unavailable

log = structlog.get_logger()

CHILD_MODULE: Final = "gateway_mcp.child"
CHECK_CAP_S: Final = 10.0  # the longest wait between two idle checks while a child runs
STOP_WAIT_S: Final = 10.0  # how long the shim's stop waits for the child to exit before SIGKILL
DIED: Final = "the MCP child process exited while serving this request; try again (the next request starts a new one)"

Scope = dict[str, Any]
# The parts of the ASGI scope sent to the child (its SDK reads these, and nothing else of the request).
SCOPE_KEYS: Final = ("type", "http_version", "method", "scheme", "path", "root_path", "server", "client")


class _Child:
    """One running child: its process, the shim's end of the stream, the requests waiting for answers."""

    def __init__(self, proc: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proc = proc
        self.reader = reader
        self.writer = writer
        self.waiting: dict[int, asyncio.Queue[tuple[dict[str, Any], bytes] | None]] = {}
        self.lock = asyncio.Lock()
        self.gone = False
        self.stopping: str | None = None  # why the shim ended the stream: "idle", "shutdown"
        self.reading: asyncio.Task[None] | None = None


class ChildHost:
    """``McpHost`` (``gateway_http.mcp_mount``) over a child process: see the module."""

    def __init__(self, kb_address: str, *, max_body_bytes: int, idle_seconds: Callable[[], float],
                 child_args: Sequence[str] = ()) -> None:
        self._kb_address = kb_address
        self._max_body_bytes = max_body_bytes
        self._idle_seconds = idle_seconds
        self._child_args = tuple(child_args)  # the log format and service name (gateway_cli.serve)
        self._child: _Child | None = None
        self._starting = asyncio.Lock()
        self._ids = itertools.count(1)
        self._in_flight = 0
        self._last = time.monotonic()
        self._changed = asyncio.Event()
        self._stopping = False

    @property
    def child_pid(self) -> int | None:
        return self._child.proc.pid if self._child is not None and not self._child.gone else None

    async def serve(self, stop: asyncio.Event) -> None:
        """Stop the child after its idle time, until ``stop``; then stop it and wait for it."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                self._changed.clear()
                wait = self._next_check()
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait((stopping, changed), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                if not stop.is_set() and self._idle_for() == 0.0:
                    await self._stop_child("idle")
        finally:
            stopping.cancel()
            self._stopping = True
            async with self._starting:  # a child being started now is stopped too
                await self._stop_child("shutdown")

    def _next_check(self) -> float | None:
        """Seconds until the next idle check; None (wait for a request) when no child runs."""
        if self.child_pid is None:
            return None
        left = self._idle_for()
        return CHECK_CAP_S if left is None else min(left, CHECK_CAP_S)

    def _idle_for(self) -> float | None:
        """Seconds left before the running child is stopped (0.0: now); None for never (a request in
        progress, no child, or ``mcpIdleSeconds`` 0)."""
        idle = self._idle_seconds()
        if self.child_pid is None or self._in_flight or idle <= 0:
            return None
        return max(0.0, self._last + idle - time.monotonic())

    async def handle(self, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope, receive: Any,
                     send: Any) -> bool:
        """Serve one authorized request through the child. False, with nothing sent, once the shim
        is stopping; raises Unavailable (503) when the child cannot answer it, Refused (413) for a
        body over the limit."""
        if self._stopping:
            return False
        body = await self._body(scope, receive)
        if body is None:
            return True  # the client left before its body arrived: nobody to answer
        self._in_flight += 1
        try:
            child = await self._running_child()
            return await self._exchange(child, agent_id, credentials, scope, body, send)
        finally:
            self._in_flight -= 1
            self._last = time.monotonic()
            self._changed.set()

    async def _body(self, scope: Scope, receive: Any) -> bytes | None:
        """The request body, whole; None when the client disconnected. Refused (413) over the limit."""
        too_large = Refused(413, f"request body is larger than {self._max_body_bytes} bytes",
                            [(b"connection", b"close")])
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self._max_body_bytes:
                raise too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body_bytes:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _exchange(self, child: _Child, agent_id: str, credentials: tuple[tuple[str, str], ...], scope: Scope,
                        body: bytes, send: Any) -> bool:
        request_id = next(self._ids)
        answers: asyncio.Queue[tuple[dict[str, Any], bytes] | None] = asyncio.Queue()
        child.waiting[request_id] = answers
        started = False
        try:
            sent: dict[str, Any] = {key: scope[key] for key in SCOPE_KEYS if key in scope}
            sent.update(raw_path=(scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
                        query_string=scope.get("query_string", b"").decode("latin-1"),
                        headers=mcp_frames.headers_out(list(scope["headers"])))
            meta = {"id": request_id, "agent": agent_id, "credentials": [list(c) for c in credentials], "scope": sent}
            await self._write(child, mcp_frames.encode(meta, body))
            while True:
                answer = await answers.get()
                if answer is None:  # the child is gone
                    if started:
                        return True  # part of an answer went out: the connection is cut (uvicorn closes it)
                    raise Unavailable(DIED)
                frame, chunk = answer
                if frame.get("t") == "unavailable" and not started:
                    raise Unavailable("the MCP tools are not being served right now (the MCP child is starting "
                                      "or stopping); try again shortly")
                if frame.get("t") == "start" and not started:
                    started = True
                    await send({"type": "http.response.start", "status": int(frame["status"]),
                                "headers": mcp_frames.headers_in(frame["headers"])})
                elif frame.get("t") == "body" and started:
                    more = bool(frame.get("more"))
                    await send({"type": "http.response.body", "body": chunk, "more_body": more})
                    if not more:
                        return True
                elif frame.get("t") == "body":  # an answer with no start: a bug of the child's
                    raise Unavailable("the MCP child sent an answer without its status")
        finally:
            child.waiting.pop(request_id, None)

    async def _write(self, child: _Child, frame: bytes) -> None:
        async with child.lock:
            if child.gone:
                raise Unavailable(DIED)
            child.writer.write(frame)
            try:
                await child.writer.drain()
            except ConnectionError:
                raise Unavailable(DIED) from None

    async def _running_child(self) -> _Child:
        """The running child, started now when there is none. Raises Unavailable when it cannot start."""
        child = self._child
        if child is not None and not child.gone:
            return child
        async with self._starting:
            child = self._child
            if child is not None and not child.gone:
                return child
            if self._stopping:
                raise Unavailable("the shim is stopping")
            self._child = child = await self._start()
            self._changed.set()
            return child

    async def _start(self) -> _Child:
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", CHILD_MODULE, "--fd", str(theirs.fileno()), "--parent", str(os.getpid()),
                   "--kb", self._kb_address, "--max-body-bytes", str(self._max_body_bytes), *self._child_args]
        try:
            # subprocess, not the loop's own spawning: uvloop's plain fork() while gRPC's threads run
            # is what gateway.event_loop keeps away from processes that spawn.
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),))
        except OSError as exc:
            ours.close()
            log.error("mcp_child_failed_to_start", error=exc.strerror or type(exc).__name__)
            raise Unavailable(f"the MCP child process could not be started ({exc.strerror or exc})") from None
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        child = _Child(proc, reader, writer)
        child.reading = asyncio.ensure_future(self._read(child))
        log.info("mcp_child_started", pid=proc.pid)
        return child

    async def _read(self, child: _Child) -> None:
        """Hand each of the child's frames to its request, until the stream ends; then the child is gone."""
        reason = "exited"
        try:
            while True:
                try:
                    frame = await mcp_frames.read(child.reader, mcp_frames.BODY_CHUNK_BYTES)
                except mcp_frames.FrameError as exc:
                    reason = f"bad frame: {exc}"
                    break
                except ConnectionError:
                    break
                if frame is None:
                    break
                waiting = child.waiting.get(frame[0].get("id", -1))
                if waiting is not None:  # else its request was given up (its client left)
                    waiting.put_nowait(frame)
        finally:
            await self._gone(child, child.stopping or reason)

    async def _gone(self, child: _Child, reason: str) -> None:
        """Fail the child's requests still waiting, close the stream and reap the process."""
        child.gone = True
        for waiting in child.waiting.values():
            waiting.put_nowait(None)
        if self._child is child:
            self._child = None
        child.writer.close()
        code = await asyncio.to_thread(_reap, child.proc, STOP_WAIT_S)
        planned = reason in ("idle", "shutdown")
        (log.info if planned and code == 0 else log.warning)(
            "mcp_child_stopped" if planned else "mcp_child_exited", pid=child.proc.pid, reason=reason, code=code)
        self._changed.set()

    async def _stop_child(self, reason: str) -> None:
        """End the stream to the running child: it answers the requests it has, exits, and is reaped."""
        child = self._child
        if child is None or child.gone:
            return
        self._child = None  # from now on a request starts a new child
        child.stopping = reason
        if child.writer.can_write_eof():
            child.writer.write_eof()
        else:
            child.writer.close()
        if child.reading is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(child.reading), STOP_WAIT_S)
        except TimeoutError:  # it keeps its end open: SIGKILL closes it
            child.proc.kill()
            await child.reading


def _reap(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The child's exit code, SIGKILLing it after ``timeout`` s (it is then reaped: no zombie)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
