"""The shim's ASGI application: REST in, gRPC out, grpc-gateway style.

Every request is matched against the routes built from the protos, turned
into the RPC's message, sent to the backend that serves the RPC with the
caller's key as metadata and a deadline, and the reply rendered as protojson.

The rule for errors: input never gets a 5xx from the shim. Bad
input is refused where it enters (``credentials`` for the key headers,
``json_body`` for the body, ``router`` for the path, ``fields`` and
``transcode`` for the message) with a 4xx naming it; 5xx comes only from a
backend's answer (its own status) or from a bug here, which is logged as
``http_bug`` with the route and where it happened (never the key, the body
or the exception's text, which may quote either) and answered 500 with the
error body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.channels import DEFAULT_DEADLINE_S, DREAM_RUN_DEADLINE_S, FORGET_DEADLINE_S, HEALTH_DEADLINE_S, aio_channel
from gateway.files_limits import MAX_BODY_BYTES
from gateway.metrics import exposition
from gateway.dependencies import DEPENDENCIES_SERVICE, REASON_METADATA
from gateway.resources import NAMES, RESOURCES_SERVICE, handler_answered
from gateway_http.console_files import PREFIX as CONSOLE_PREFIX
from gateway_http.console_files import Console, is_console_path
from gateway_http.credentials import BadCredential, credential_metadata
from gateway_http.descriptors import Route, all_routes
from gateway_http.errors import bearer_challenge, error_body, http_status, presented_key
from gateway_http.http_metrics import log_http, observe_http
from gateway_http.openapi import openapi_document
from gateway_http.router import BadPath, Router, split_path
from gateway_http.transcode import BadRequest, build_request, parse_body, render

log = structlog.get_logger()

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# RPCs that last as long as a dreaming run (they wait for a reviewer, a model); the shim gives
# them the deadline `gateway dream` uses. Every other call gets DEFAULT_DEADLINE_S.
LONG_DEADLINES: dict[str, float] = {
    "/gateway.v1.Dreaming/RunNow": DREAM_RUN_DEADLINE_S,
    "/gateway.v1.Dreaming/AcceptProposals": DREAM_RUN_DEADLINE_S,
    # A vault's reflection asks the reviewer once per cluster; its accept and revert merge or restore notes.
    "/gateway.v1.Dreaming/ReflectVault": DREAM_RUN_DEADLINE_S,
    "/gateway.v1.Dreaming/DecideVaultMerges": DREAM_RUN_DEADLINE_S,
    "/gateway.v1.Dreaming/UndoVaultReflection": DREAM_RUN_DEADLINE_S,
    "/gateway.v1.Dreaming/Forget": FORGET_DEADLINE_S,
}


# The shim's own paths; with the route templates, the whole set of ``route`` label values.
OWN_PATHS = ("/healthz", "/openapi.json", "/metrics", CONSOLE_PREFIX + "/")

# Where an OAuth client looks after a 401 (RFC 9728 and RFC 8414 metadata, OpenID discovery, and
# the registration, authorization and token endpoints the MCP SDKs fall back to at the origin).
# The suite has no authorization server, so their 404 says how to authenticate instead: that is
# the text such a client shows when its OAuth attempt ends.
OAUTH_PATHS = (
    "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration", "/register", "/authorize", "/token",
)
NO_OAUTH = ("this gateway has no OAuth authorization server; authenticate with an API key from config.json "
            "as X-Api-Key: KEY or Authorization: Bearer KEY")


def not_found(method: str, path: str) -> str:
    """The 404 text of a path no route serves (an OAuth path says the suite takes API keys)."""
    text = f"no route for {method} {path}"
    if any(path == p or path.startswith(p + "/") for p in OAUTH_PATHS):
        text += f": {NO_OAUTH}"
    return text


def deadline(route: Route) -> float:
    """The deadline, in seconds, of the gRPC call behind ``route``."""
    return LONG_DEADLINES.get(route.grpc_path, DEFAULT_DEADLINE_S)


class HttpError(Exception):
    def __init__(self, status: int, code: grpc.StatusCode, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or []


class _Answer:
    """Where one request's answer goes (``send``), the route matched (for the log) and whether
    the answer has started (a bug after that cannot answer 500). ``_respond`` writes it."""

    __slots__ = ("send", "started", "route")

    def __init__(self, send: Send, path: str) -> None:
        self.send = send
        self.started = False
        self.route = path  # the route's template once matched


class ShimApp:
    """ASGI callable. ``backends`` maps a backend name (``file_api``…) to ``host:port``."""

    def __init__(
        self,
        backends: Mapping[str, str],
        routes: tuple[Route, ...] | None = None,
        *,
        background: Callable[[asyncio.Event], Awaitable[None]] | None = None,
        instance: str | None = None,
        worker: str | None = None,
        mounts: Mapping[str, Callable[[Scope, Receive, Send], Awaitable[None]]] | None = None,
        console: Console | None = None,
    ) -> None:
        """``background(stop)`` runs from start-up to shutdown (the config follow); ``instance``
        is the launcher's start nonce, reported by /healthz so it knows it reached this process, and
        ``worker`` the name of this shim among several on one port (``gateway.http_workers``), too.
        ``mounts`` maps a path prefix to the ASGI app that serves every HTTP request under it
        (MCP over streamable HTTP at ``/mcp/``); it logs its own requests. ``console`` serves the
        web console's files at ``/ui/`` (the files shipped in the package by default)."""
        self._backends = dict(backends)
        self._mounts = tuple((mounts or {}).items())
        self._background = background
        self._instance = instance
        self._worker = worker
        self._router = Router(routes if routes is not None else all_routes())
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._calls: dict[tuple[str, str], grpc.aio.UnaryUnaryMultiCallable] = {}
        self._openapi = json.dumps(openapi_document(self._router.routes), indent=2).encode()
        self._console = console if console is not None else Console()
        self._route_labels = frozenset([*OWN_PATHS, *(r.template for r in self._router.routes)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        for prefix, mounted in self._mounts:
            if scope["path"].startswith(prefix):
                await mounted(scope, receive, send)
                return
        start = time.perf_counter()
        answer = _Answer(send, scope["path"])
        try:
            status = await self._serve(scope, receive, answer)
        except Exception as exc:  # noqa: BLE001 - a bug: input is refused with a 4xx before this (module docstring)
            log.error("http_bug", method=scope["method"], route=answer.route, error=type(exc).__name__, at=_frames(exc))
            if not answer.started:
                await _respond(answer, 500, error_body(grpc.StatusCode.INTERNAL, "internal error in the REST shim"))
            status = 500
        seconds = time.perf_counter() - start
        route = answer.route
        observe_http(route if route in self._route_labels else "unmatched", scope["method"], status, seconds)
        log_http(scope["method"], route, status, seconds)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._background is not None:
                    task = asyncio.ensure_future(self._background(stop))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                stop.set()
                if task is not None:
                    with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                        await asyncio.wait_for(task, 5)
                for channel in self._channels.values():
                    await channel.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _channel(self, backend: str) -> grpc.aio.Channel:
        channel = self._channels.get(backend)
        if channel is None:
            channel = self._channels[backend] = aio_channel(self._backends[backend])
        return channel

    def _callable(self, route: Route) -> grpc.aio.UnaryUnaryMultiCallable:
        key = (route.backend, route.grpc_path)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = self._channel(route.backend).unary_unary(
                route.grpc_path,
                request_serializer=route.request_class.SerializeToString,
                response_deserializer=route.response_class.FromString,
            )
        return call

    async def _serve(self, scope: Scope, receive: Receive, answer: _Answer) -> int:
        """Answer one request; its status (``answer.route`` says which route it was)."""
        method = scope["method"]
        path = scope["path"]
        try:
            if is_console_path(path):
                answer.route = CONSOLE_PREFIX + "/"
                reply = self._console.answer(method, path, _header(scope, b"if-none-match"))
                await _respond(answer, reply.status, reply.body, list(reply.headers), content_type=None, length=reply.length)
                return reply.status
            if path == "/healthz" and method == "GET":
                status, report = await self._healthz()
                await _respond(answer, status, report)
                return status
            if path == "/openapi.json" and method == "GET":
                await _respond(answer, 200, self._openapi)
                return 200
            if path == "/metrics" and method == "GET":  # no key: it holds no agent data (gateway.metrics)
                accept = b", ".join(v for k, v in scope.get("headers", ()) if k == b"accept").decode("latin-1")
                exposed, content_type = await asyncio.to_thread(exposition, accept)
                await _respond(answer, 200, exposed, content_type=content_type.encode())
                return 200
            try:
                segments = split_path(scope.get("raw_path") or path.encode())
            except BadPath as exc:
                raise HttpError(400, grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
            match, allowed = self._router.match(method, segments)
            if match is None:
                if allowed:
                    raise HttpError(
                        405,
                        grpc.StatusCode.UNIMPLEMENTED,
                        f"method {method} not allowed here; allowed: {', '.join(allowed)}",
                        [(b"allow", ", ".join(allowed).encode())],
                    )
                raise HttpError(404, grpc.StatusCode.NOT_FOUND, not_found(method, path))
            route = match.route
            answer.route = route.template
            try:
                metadata = credential_metadata(scope["headers"])
            except BadCredential as exc:
                raise HttpError(401, grpc.StatusCode.UNAUTHENTICATED, str(exc), bearer_challenge(str(exc))) from None
            body: Any = None
            if route.body:
                body = parse_body(await _read_body(scope, receive))
            raw_query = scope.get("query_string")
            query = parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True) if raw_query else []
            request = build_request(route, match.params, body, query)
            status, payload, headers = await self._invoke(route, request, metadata)
            await _respond(answer, status, payload, headers)
            return status
        except BadRequest as exc:
            await _respond(answer, 400, error_body(grpc.StatusCode.INVALID_ARGUMENT, str(exc)))
            return 400
        except HttpError as exc:
            await _respond(answer, exc.status, error_body(exc.code, exc.message), exc.headers)
            return exc.status

    async def _invoke(
        self, route: Route, request: Any, metadata: tuple[tuple[str, str], ...]
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]] | None]:
        """The status, body and extra headers of the answer (a 401's ``WWW-Authenticate``)."""
        try:
            reply = await self._callable(route)(request, timeout=deadline(route), metadata=metadata)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            message = err.details() or code.name
            if code == grpc.StatusCode.UNAVAILABLE and not handler_answered(err.trailing_metadata()):
                message = f"backend {route.backend} is unavailable; try again shortly"
            headers = None
            if code == grpc.StatusCode.UNAUTHENTICATED:
                headers = bearer_challenge(message if presented_key(metadata) else None)
            return http_status(code), error_body(code, message), headers
        return 200, render(reply), None

    async def _healthz(self) -> tuple[int, bytes]:
        """200 ``ok`` when every backend serves; 200 ``degraded`` with ``resources`` when one serves but
        ran out of a resource recently (``gateway.resources``: it still answers what it can), and with
        ``dependencies`` when one serves but cannot reach a server it needs (``gateway.dependencies``);
        503 ``degraded`` when one does not serve."""
        report: dict[str, str] = {}
        short: dict[str, list[str]] = {}
        needs: dict[str, list[str]] = {}
        for backend in sorted({r.backend for r in self._router.routes}):
            stub = health_pb2_grpc.HealthStub(self._channel(backend))
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_DEADLINE_S)
                report[backend] = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    ran_out, unreachable = await degraded_resources(stub), await dependencies_down(stub)
                    if ran_out:
                        short[backend] = ran_out
                    if unreachable:
                        needs[backend] = unreachable
            except grpc.aio.AioRpcError as err:
                report[backend] = err.code().name
        serving = all(v == "SERVING" for v in report.values())
        body: dict[str, object] = {"status": "ok" if serving and not short and not needs else "degraded", "backends": report}
        if short:
            body["resources"] = short
        if needs:
            body["dependencies"] = needs
        if self._instance is not None:
            body["instance"] = self._instance
        if self._worker is not None:
            body["worker"] = self._worker
        return (200 if serving else 503), json.dumps(body).encode()


async def degraded_resources(stub: health_pb2_grpc.HealthStub) -> list[str]:
    """What the backend behind ``stub`` ran out of recently (``gateway.resources``: its health for
    ``RESOURCES_SERVICE``, then for each resource); [] when nothing did or it cannot say."""
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=RESOURCES_SERVICE), timeout=HEALTH_DEADLINE_S)
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            return []
        out = []
        for what, name in NAMES.items():
            one = await stub.Check(health_pb2.HealthCheckRequest(service=f"{RESOURCES_SERVICE}/{name}"), timeout=HEALTH_DEADLINE_S)
            if one.status != health_pb2.HealthCheckResponse.SERVING:
                out.append(what)
        return out or ["a resource"]
    except grpc.aio.AioRpcError:  # NOT_FOUND from a process that does not report resources
        return []


async def dependencies_down(stub: health_pb2_grpc.HealthStub) -> list[str]:
    """``label: reason`` of each server the backend behind ``stub`` needs and cannot reach
    (``gateway.dependencies``); [] when it reaches them all or cannot say."""
    try:
        call = stub.Check(health_pb2.HealthCheckRequest(service=DEPENDENCIES_SERVICE), timeout=HEALTH_DEADLINE_S)
        reply = await call
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            return []
        said = [bytes(v).decode(errors="replace") for k, v in await call.trailing_metadata() or () if k == REASON_METADATA]
    except grpc.aio.AioRpcError:  # NOT_FOUND from a process that does not report dependencies
        return []
    return said or ["a server it needs cannot be reached"]


def _header(scope: Scope, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) of the request, or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _frames(exc: BaseException) -> list[str]:
    """Where ``exc`` was raised, as ``file:line function`` (the code, never the data)."""
    return [f"{frame.filename}:{frame.lineno} {frame.name}" for frame in traceback.extract_tb(exc.__traceback__)[-8:]]


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    """The request body, refusing with 413 as soon as it passes MAX_BODY_BYTES."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise HttpError(400, grpc.StatusCode.INVALID_ARGUMENT, "invalid Content-Length") from None
            if declared > MAX_BODY_BYTES:
                raise _too_large()
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":  # gone, or cut by the body deadline (connections)
            raise HttpError(499, grpc.StatusCode.CANCELLED, "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _too_large() -> HttpError:
    # The rest of the body is not read: the connection closes rather than drain it.
    return HttpError(
        413,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"request body is larger than {MAX_BODY_BYTES} bytes; file content is limited to 1,048,576 bytes",
        [(b"connection", b"close")],
    )


async def _respond(
    answer: _Answer, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None, *,
    content_type: bytes | None = b"application/json", length: int | None = None,
) -> None:
    """Send the answer; ``content_type`` None when ``headers`` carry their own; ``length`` the
    Content-Length when it is not the body's (a HEAD answers the GET's length with no body)."""
    answer.started = True
    send = answer.send
    typed = [(b"content-type", content_type)] if content_type is not None else []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*typed, (b"content-length", str(len(body) if length is None else length).encode()), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})
