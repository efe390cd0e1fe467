"""Start-up and shutdown of a gRPC server, the same for every service.

Health (``grpc.health.v1``) and server reflection (``grpc.reflection.v1`` and ``v1alpha``,
``gateway.reflection``) are always on; health also answers for ``gateway.resources``
(``resources_status``: NOT_SERVING while the process is degraded by a recent shortage) and for
``gateway.dependencies`` (``dependencies_status``: NOT_SERVING while a server the process needs cannot be
reached, the reasons in the trailing metadata); message sizes are explicit; SIGTERM and SIGINT stop
the server gracefully: health flips to NOT_SERVING, in-flight calls get a grace period,
then it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable, Iterator, Sequence

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway.channels import MAX_MESSAGE_BYTES
from gateway.config_model import SOCKET_PATH_MAX, socket_fits
from gateway.dependencies import DEPENDENCIES, DEPENDENCIES_SERVICE, REASON_METADATA
from gateway.event_loop import running_loop_name
from gateway.logs import flush_later
from gateway.metrics import REGISTRY
from gateway.metrics_port import open_metrics
from gateway.ports import BindError, listen_problem
from gateway.resources import NAMES, RESOURCES_SERVICE, SHORTAGES, open_files_limit
from gateway import heap, ready_pipe, reflection

STOP_GRACE_SECONDS = 5.0

SERVER_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]

log = structlog.get_logger()


def resources_status(service: str) -> int | None:
    """The health of ``RESOURCES_SERVICE`` (any resource) or ``RESOURCES_SERVICE/<name>`` (that one):
    NOT_SERVING while it ran out recently (``gateway.resources.Shortages``); None for another name."""
    degraded = [NAMES[what] for what in SHORTAGES.degraded()]
    if service == RESOURCES_SERVICE:
        short = bool(degraded)
    elif service.startswith(RESOURCES_SERVICE + "/") and service.partition("/")[2] in NAMES.values():
        short = service.partition("/")[2] in degraded
    else:
        return None
    status: int = health_pb2.HealthCheckResponse.NOT_SERVING if short else health_pb2.HealthCheckResponse.SERVING
    return status


async def dependencies_status(service: str) -> tuple[int, list[str]] | None:
    """The health of ``DEPENDENCIES_SERVICE`` (every dependency) or ``DEPENDENCIES_SERVICE/<name>`` (that one)
    and the ``label: reason`` of each that cannot be reached (``gateway.dependencies``); None for another name."""
    if service == DEPENDENCIES_SERVICE:
        name = None
    elif service.startswith(DEPENDENCIES_SERVICE + "/") and service.partition("/")[2] in DEPENDENCIES.names():
        name = service.partition("/")[2]
    else:
        return None
    down = await asyncio.to_thread(DEPENDENCIES.down, name)
    status: int = health_pb2.HealthCheckResponse.NOT_SERVING if down else health_pb2.HealthCheckResponse.SERVING
    return status, down


class _Health(health.aio.HealthServicer):  # type: ignore[misc]
    """grpc.health.v1 with the resources' and dependencies' health computed at each Check (it changes with time)."""

    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:  # noqa: N802
        status = resources_status(request.service)
        if status is not None:
            return health_pb2.HealthCheckResponse(status=status)
        needed = await dependencies_status(request.service)
        if needed is not None:
            if needed[1]:
                context.set_trailing_metadata(tuple((REASON_METADATA, d.encode()) for d in needed[1]))
            return health_pb2.HealthCheckResponse(status=needed[0])
        reply: health_pb2.HealthCheckResponse = await super().Check(request, context)
        return reply


def _add_port(server: grpc.aio.Server, name: str, address: str) -> None:
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise BindError(f"{name}: cannot listen on {address} (address in use?)")


@contextlib.contextmanager
def _private_files() -> Iterator[None]:
    """Files made inside (the socket gRPC binds) are readable and writable by their owner only."""
    before = os.umask(0o177)
    try:
        yield
    finally:
        os.umask(before)


def _answers(path: Path) -> bool:
    """Whether a server accepts connections on the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def claim_socket(name: str, path: Path) -> Path | None:
    """Make ``path`` ready for ``name`` to listen on: its folder made (mode 0700), a stale socket
    a stopped server left removed. None, said in one log line, when the path is too long for a Unix
    socket (the process stays on TCP, where its peers then reach it too). Raises BindError when
    another server answers there."""
    if not socket_fits(path):
        log.warning("unix_socket_skipped", path=str(path), reason=f"longer than {SOCKET_PATH_MAX} bytes", transport="tcp")
        return None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_socket():
        if _answers(path):
            raise BindError(f"{name}: another server is listening on {path}")
        path.unlink()
    return path


def instance_service(instance: str) -> str:
    """The health service name under which a server started with ``instance`` answers SERVING."""
    return f"gateway.instance/{instance}"


async def serve(
    name: str,
    address: str,
    register: Callable[[grpc.aio.Server], Sequence[str]],
    *,
    background: Callable[[asyncio.Event], Awaitable[None]] | None = None,
    instance: str | None = None,
    metrics: tuple[str, int] | None = None,
    unix: Path | None = None,
) -> None:
    """Run a gRPC server on ``address`` until SIGTERM/SIGINT.

    ``register`` adds the servicers and returns their full service names
    (for health and reflection). ``background(stop)`` runs beside the server
    once it is up; it must return soon after ``stop`` is set. A background
    task that fails stops the server (a half-working process is worse than a
    dead one the launcher reports). Raises BindError when the address cannot
    be bound. ``instance`` (the launcher's start nonce) is published as one more
    health service name, ``instance_service(instance)``. Once every name is SERVING the
    process says ``ready`` on its launcher's pipe, if it has one (``gateway.ready_pipe``). ``metrics``: where the process's
    Prometheus endpoint listens (None: nowhere); a port that cannot be bound is a BindError too.
    ``unix``: a Unix socket to listen on as well (``claim_socket``), removed at the stop.
    """
    SHORTAGES.process = f"the {name} process"
    server = grpc.aio.server(options=SERVER_OPTIONS)
    services = list(register(server))
    health_servicer = _Health()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable([*services, health.SERVICE_NAME], server)
    host, _, port_text = address.rpartition(":")
    problem = listen_problem(host.strip("[]"), int(port_text))
    if problem:  # said by us in one line, before gRPC's own bind logs its error
        raise BindError(f"{name}: {problem}")
    _add_port(server, name, address)
    socket_path = claim_socket(name, unix) if unix is not None else None
    if socket_path is not None:
        with _private_files():
            _add_port(server, name, f"unix:{socket_path}")
    metrics_port = open_metrics(name, metrics)
    if metrics_port is None:  # no port: nothing reads this process's metrics
        REGISTRY.drop()
    else:
        REGISTRY.made()  # every scrape shows the same series, the first one too
        await metrics_port.start()
    # Before the server starts: a SIGTERM that comes as soon as the health check says SERVING (a
    # launcher stopped right after ready) must take the graceful path, not the default action.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    named = ["", *services] + ([instance_service(instance)] if instance else [])
    for service in named:
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    log.info("listening", address=address, socket=str(socket_path) if socket_path else None, services=services, loop=running_loop_name(), metrics=metrics_port and metrics_port.address,
             open_files_limit=open_files_limit())
    ready_pipe.report()  # a child of gateway up: the launcher hears it serves
    heap.give_back()  # what start-up freed (gateway.heap)

    serving = asyncio.ensure_future(server.wait_for_termination())
    stopping = asyncio.ensure_future(stop.wait())
    waits: set[asyncio.Future[Any]] = {serving, stopping}
    worker = asyncio.ensure_future(background(stop)) if background is not None else None
    if worker is not None:
        waits.add(worker)
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    failure = worker.exception() if worker is not None and worker.done() and not worker.cancelled() else None
    if failure is not None:
        log.error("background_failed", error=repr(failure))
    flush_later()  # the lines of the calls answered so far come before the stop's
    log.info("stopping", grace_s=STOP_GRACE_SECONDS)
    stop.set()
    await health_servicer.enter_graceful_shutdown()
    await server.stop(STOP_GRACE_SECONDS)
    stopping.cancel()
    if worker is not None and not worker.done():
        try:
            await asyncio.wait_for(worker, STOP_GRACE_SECONDS)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            log.warning("background_did_not_stop")
    if metrics_port is not None:
        await metrics_port.close()
    log.info("stopped")
    if failure is not None:
        raise SystemExit(1)
