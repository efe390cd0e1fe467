"""Entry point of the REST shim process."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from types import FrameType
from typing import Any

import structlog
import uvicorn  # lean: gateway_http (the package) loaded it without its __init__

from gateway import heap, http_workers, ready_pipe
from gateway.event_loop import loop_name
from gateway.files_limits import MAX_BODY_BYTES
from gateway.live_config import LiveConfig
from gateway.resources import open_files_limit
from gateway.logs import flush_later, mark_stopping
from gateway.metrics import REGISTRY
from gateway.metrics_port import open_metrics
from gateway.ports import BindError, listen_problem
from gateway_http.app import ShimApp
from gateway_http.connections import protocol_class
from gateway_http.mcp_mount import PREFIX as MCP_PREFIX
from gateway_http.mcp_mount import LoadHost, McpMount

log = structlog.get_logger()

BACKENDS = ("file_api", "watcher", "kb", "dreaming")
TICK_S = 0.1  # uvicorn's tick, while connections are open
IDLE_NAP_S = 60.0


def listen(host: str, port: int, *, shared: bool = False) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``shared``: with ``SO_REUSEPORT``, so the other shim
    workers of one suite bind the same port and the kernel spreads new connections over them
    (``gateway.http_workers``). Raises BindError with one line when it cannot bind."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"http: cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        problem = listen_problem(host, port) or f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise BindError(f"http: {problem}") from None
    sock.set_inheritable(True)
    return sock


class _Connections(set[Any]):
    """uvicorn's set of open connections, calling ``opened`` as one is added."""

    def __init__(self, opened: Callable[[], None]) -> None:
        super().__init__()
        self._opened = opened

    def add(self, item: Any) -> None:
        super().add(item)
        self._opened()


class _Server(uvicorn.Server):
    """uvicorn's server, stopping as the gRPC services do (``gateway.grpc_server``): SIGTERM or
    SIGINT logs ``stopping`` (with its grace), the server drains, ``run`` returns and the process
    exits normally, its queued log lines written (``gateway.logs``). uvicorn's own signal capture
    raises the signal again once stopped, which killed the process before any of that."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.server_state.connections = _Connections(self._connection_opened)
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        """uvicorn's loop ticks ten times a second (the Date header, the exit flag) even with nothing to
        serve. This one ticks so only while a connection is open; otherwise it sleeps until one opens
        (the Date header is stamped then) or a signal asks it to stop. The nap's end is a safety net."""
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            if self.server_state.connections:
                await asyncio.sleep(TICK_S)
                counter = (counter + 1) % 864000
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_NAP_S)
            counter = 0  # the next tick stamps the date

    def _connection_opened(self) -> None:
        if self._wake.is_set() or self._loop is None:
            return
        stamp = [(b"date", formatdate(time.time(), usegmt=True).encode())] if self.config.date_header else []
        self.server_state.default_headers = stamp + self.config.encoded_headers  # before its first answer
        self._wake.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # listening, the app's start-up done: a child of gateway up says so on its pipe
            ready_pipe.report()
            heap.give_back()  # what start-up freed (gateway.heap)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        flush_later()  # the lines of the requests answered so far come before the stop's
        mark_stopping()
        log.info("stopping", grace_s=self.config.timeout_graceful_shutdown)
        await super().shutdown(sockets)


def run(live: LiveConfig, load_mcp: LoadHost, instance: str | None = None, worker: int | None = None) -> None:
    """Serve the shim on ``api.host:api.port`` until SIGTERM/SIGINT (uvicorn handles both),
    following config.json, with the MCP tools over streamable HTTP mounted at ``/mcp/agents/{agentId}``
    (``mcp_mount``; ``load_mcp`` makes their host: one server for every agent). ``instance``: the launcher's start nonce,
    reported by /healthz.
    Connections get the client limits of ``gateway.api`` in force when they open
    (``connections``). Its Prometheus metrics are served on their own port as well as at
    ``/metrics``. ``worker``: this shim is worker N of ``gateway up``'s several on one port
    (``gateway.http_workers``): it shares the port, serves its own metrics port and says its name
    in /healthz. Raises BindError when either port cannot be bound."""
    config = live.current
    process = http_workers.name(worker) if worker is not None else "http"
    sock = listen(config.api.host, config.api.port, shared=worker is not None)
    metrics_port = open_metrics(process, config.metrics.address(process))
    if metrics_port is not None:
        REGISTRY.made()  # every scrape shows the same series, the first one too
    mcp = McpMount(live.snapshot, config.grpc.address("kb"), load=load_mcp, max_body_bytes=MAX_BODY_BYTES)

    async def background(stop: asyncio.Event) -> None:
        if metrics_port is not None:
            await metrics_port.start()
        try:
            await asyncio.gather(live.follow(stop), mcp.serve(stop))
        finally:
            if metrics_port is not None:
                await metrics_port.close()

    app = ShimApp(
        {name: config.grpc.address(name) for name in BACKENDS},
        background=background,
        instance=instance,
        worker=process if worker is not None else None,
        mounts={MCP_PREFIX: mcp},
    )
    server = _Server(
        uvicorn.Config(
            app,
            loop=loop_name(),  # gateway.event_loop: uvloop where it is installed
            http=protocol_class(lambda: live.current.api.limits),
            timeout_keep_alive=config.api.limits.keep_alive_seconds,  # each connection reads its own
            lifespan="on",
            access_log=False,
            proxy_headers=False,  # the shim reads no client address: one middleware less per request
            log_level="warning",
            timeout_graceful_shutdown=5,
        )
    )
    log.info("listening", address=f"{config.api.host}:{config.api.port}", loop=loop_name(), metrics=metrics_port and metrics_port.address,
             open_files_limit=open_files_limit())
    server.run(sockets=[sock])
    log.info("stopped")
