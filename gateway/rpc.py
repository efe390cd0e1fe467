"""Server-side RPC plumbing shared by every gRPC service.

``unary`` wraps a servicer method: it maps GatewayError to gRPC status (the
one place that happens), a resource shortage (out of open files, disk or
memory: ``gateway.resources``) to UNAVAILABLE naming it (trailing metadata
``SHORTAGE_METADATA`` tells the shim so), a database locked past its busy timeout to
UNAVAILABLE saying so (``BUSY_METADATA``), anything else unexpected to INTERNAL
with a generic message, makes the gRPC deadline the caller sent the call's own
(``gateway.call_deadline``), and logs one JSON line per call (method, agent, key, code,
ms). ``key`` is the label of the caller ``caller_of`` identified: the key's
``name`` from config.json (``keys[i]`` for a key without one), ``internal``
for the internal token, null when no caller was identified.
``ms`` is the handler's own time.

The line is not written by the call itself: the call queues it with the
time it ended (``gateway.logs.later``), and queued lines are rendered and
written together a few milliseconds later. Rendering lines one by one between
the calls would cost the file API about a fifth of its GetFile throughput under
load. Keys and request bodies are never logged.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog

from gateway import call_deadline
from gateway.auth import Authenticator, Caller
from gateway.errors import GatewayError
from gateway.logs import later
from gateway.metrics import observe_rpc, observe_shortage
from gateway.resources import (
    BUSY_MESSAGE, BUSY_METADATA, NAMES, SHORTAGE_METADATA, SHORTAGES, UNAVAILABLE_METADATA, busy, describe, shortage,
)

log = structlog.get_logger()

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Handler = Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]

# Set by caller_of for the RPC being served (each RPC runs in its own task, so its own context).
_caller_label: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_caller_label", default=None)


def caller_label() -> str | None:
    """The label of the caller identified in this RPC so far, or None."""
    return _caller_label.get()


def unary(func: Handler[Req, Resp]) -> Handler[Req, Resp]:
    """Decorate an async unary servicer method with error mapping and the RPC log line."""
    method = func.__name__

    @functools.wraps(func)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        start = time.perf_counter()
        code = "OK"
        label_token = _caller_label.set(None)
        deadline_token = call_deadline.start(_time_remaining(context))
        try:
            reply = await func(self, request, context)
            SHORTAGES.succeeded()
            return reply
        except GatewayError as exc:
            code = exc.code
            if code == "UNAVAILABLE":  # the handler ran and names what is down: the shim keeps its message
                context.set_trailing_metadata(((UNAVAILABLE_METADATA, "1"),))
            await context.abort(grpc.StatusCode[exc.code], exc.message)
            raise  # unreachable: abort raises
        except grpc.aio.AbortError:
            code = str(context.code() or "ABORTED").rsplit(".", 1)[-1]
            raise
        except asyncio.CancelledError:  # the caller went away or its deadline passed
            code = "CANCELLED"
            raise
        except Exception as exc:
            what = shortage(exc)
            if what is not None:  # not a bug: the same call can succeed once the resource is back
                code = "UNAVAILABLE"
                SHORTAGES.ran_out(what)
                observe_shortage(NAMES[what])
                log.warning("resource_shortage", method=method, resource=what, error=f"{type(exc).__name__}: {exc}")
                context.set_trailing_metadata(((SHORTAGE_METADATA, NAMES[what]),))
                await context.abort(grpc.StatusCode.UNAVAILABLE, describe(what, SHORTAGES.process))
            if busy(exc):  # another writer held the lock past the timeout: the same call can succeed soon
                code = "UNAVAILABLE"
                log.warning("database_busy", method=method, error=f"{type(exc).__name__}: {exc}")
                context.set_trailing_metadata(((BUSY_METADATA, "1"),))
                await context.abort(grpc.StatusCode.UNAVAILABLE, BUSY_MESSAGE.format(process=SHORTAGES.process))
            code = "INTERNAL"
            log.exception("rpc_failed", method=method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error")
            raise
        finally:
            seconds = time.perf_counter() - start
            observe_rpc(method, code, seconds)
            key = _caller_label.get()
            _caller_label.reset(label_token)
            call_deadline.reset(deadline_token)
            later("rpc", method=method, agent=getattr(request, "agent_id", None) or None, key=key, code=code,
                  ms=round(seconds * 1000, 3))

    return wrapper


def _time_remaining(context: grpc.aio.ServicerContext | None) -> float | None:
    """Seconds until the caller's deadline; None when it sent none (or ``context`` is a test's stand-in without one)."""
    remaining = getattr(context, "time_remaining", None)
    return remaining() if callable(remaining) else None


def caller_of(auth: Authenticator, context: grpc.aio.ServicerContext) -> Caller:
    """The authenticated caller of this RPC (its label goes to the rpc log line). Raises Unauthenticated."""
    caller = auth.identify(context.invocation_metadata() or ())
    _caller_label.set(caller.label)
    return caller


def authorize_call(
    auth: Authenticator, context: grpc.aio.ServicerContext, agent_id: str, *, agent_exists: bool, write: bool
) -> Caller:
    """Authenticate this RPC's caller and check its access to ``agent_id`` (docs/architecture.md "Auth and the internal token").

    Raises Unauthenticated, PermissionDenied or NotFound.
    """
    caller = caller_of(auth, context)
    auth.authorize(caller, agent_id, agent_exists=agent_exists, write=write)
    return caller
