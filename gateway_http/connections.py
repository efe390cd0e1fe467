"""The shim's HTTP connections: deadlines for slow clients and a cap on how many are held.

uvicorn (httptools) waits for a client as long as it likes: no deadline for
the headers (a connection that sends nothing, or trickles its headers, is
held for good), none for the body, and ``limit_concurrency`` only answers
503 once a request's headers are in. This subclass of its protocol adds, per
connection (``gateway.http_limits.HttpLimits``, read from the config in force
when the connection opens, so a reload applies to new connections):

- **header deadline**: the request line and headers must be in within
  ``header_timeout_seconds`` of the connection opening, or of the first byte
  of the next request after a keep-alive wait. A request begun and not
  finished gets 408; a connection that sent nothing is just closed (a
  browser's spare pre-connected socket is not an error).
- **body deadline**: the body must be in whole within
  ``body_timeout_seconds`` of the headers: 408, or a plain close when the
  shim has already answered.
- **keep-alive**: uvicorn's own idle timer, set to ``keep_alive_seconds``.
- **connection cap**: a connection beyond ``max_connections`` closes the
  connection that has waited longest for a whole request (``eviction``: one
  that has sent nothing or part of its headers, or an idle keep-alive; never
  one whose request is being handled). Only when none waits is the new one
  answered 503 the moment it opens, never parsed nor queued.
- **header size**: headers past ``MAX_HEADER_BYTES`` get 431 (httptools sets
  no bound of its own; a key of 64 KB still reaches the key check's 401).

An answer the protocol writes itself (408, 431, 503) has grpc-gateway's error
body and ``connection: close``; the protocol then half-closes and discards
what the client still sends for ``LINGER_SECONDS``, so the answer is read
rather than lost to a reset; such a connection no longer counts against the
cap. An evicted connection that had sent part of a request gets that 503; one
that had sent nothing since its last answer is just closed, as its keep-alive
timer would. Every cut is logged; evictions and refusals at the cap at most
once a second each, with their count, and both are counted in
``gateway_http_connections_at_cap_total``. Other connections are served
meanwhile: all of this is timers on the event loop, never a blocking wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

import grpc
import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.http_limits import HttpLimits
from gateway_http.errors import error_body
from gateway_http.eviction import WaitingConnections
from gateway_http.http_metrics import observe_at_cap

log = structlog.get_logger()

MAX_HEADER_BYTES = 256 * 1024  # request line and headers of one request
LINGER_SECONDS = 1.0  # how long a refused or cut connection drains before it is closed
REFUSAL_LOG_INTERVAL_S = 1.0

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


class _CapLog:
    """What the cap did (``outcome``: evicted, refused), counted, and logged at most once per
    interval with how many there were since the last line."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.event = f"http_connection_{outcome}"
        self.count = 0
        self.last = 0.0

    def note(self, limit: int) -> None:
        observe_at_cap(self.outcome)
        self.count += 1
        now = time.monotonic()
        if now - self.last >= REFUSAL_LOG_INTERVAL_S:
            log.warning(self.event, reason="maxConnections", limit=limit, **{self.outcome: self.count})
            self.count = 0
            self.last = now


class LimitedHttpProtocol(HttpToolsProtocol):
    """httptools protocol with the deadlines and the cap of the module docstring.

    Use ``protocol_class(limits)``, which binds where the limits come from.
    """

    current_limits: ClassVar[Callable[[], HttpLimits]] = HttpLimits
    refusals: ClassVar[_CapLog] = _CapLog("refused")
    evictions: ClassVar[_CapLog] = _CapLog("evicted")
    # The connections of this process waiting for a whole request, longest waiting first (``eviction``).
    waiting: ClassVar[WaitingConnections[LimitedHttpProtocol]] = WaitingConnections()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = type(self).current_limits()
        self.timeout_keep_alive = self.limits.keep_alive_seconds
        # The deadline in force (loop time) and what it fires; the timer behind it is re-armed lazily:
        # moving or clearing a deadline touches no timer, so a request on a kept-alive connection
        # costs no timer of its own (two timers made and cancelled per request show in the shim's
        # CPU per GET). The timer, when it fires early, re-arms for the deadline in force.
        self._deadline: float | None = None
        self._deadline_fire: Callable[[], None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._in_headers = False  # between the first byte of a request and the end of its headers
        self._in_body = False  # between the end of a request's headers and the end of its body
        self._header_bytes = 0
        self._draining = False  # answered by the protocol itself; input is discarded until closed

    # --- timers

    def _arm(self, seconds: float, fire: Callable[[], None]) -> None:
        at = self.loop.time() + seconds
        self._deadline, self._deadline_fire = at, fire
        if self._timer is not None and self._timer_at > at:  # due later than the new deadline
            self._timer.cancel()
            self._timer = None
        if self._timer is None:
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._on_timer)

    def _disarm(self, *, cancel: bool = False) -> None:
        """No deadline in force; ``cancel`` also stops the timer (the connection is done)."""
        self._deadline = self._deadline_fire = None
        if cancel and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        at, fire = self._deadline, self._deadline_fire
        if at is None or fire is None:
            return
        if self.loop.time() < at:  # the deadline moved since the timer was set
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._on_timer)
            return
        self._deadline = self._deadline_fire = None
        fire()

    def _header_timeout(self) -> None:
        if self.transport.is_closing():
            return
        seconds = self.limits.header_timeout_seconds
        log.info("http_client_too_slow", phase="headers", seconds=seconds, started=self._in_headers)
        if self._in_headers:
            self._answer_and_close(408, grpc.StatusCode.DEADLINE_EXCEEDED,
                                   f"request headers not received within {seconds} s; closing the connection")
        else:
            self.transport.close()

    def _body_timeout(self) -> None:
        if self.transport.is_closing():
            return
        seconds = self.limits.body_timeout_seconds
        answered = self.cycle is not None and self.cycle.response_started
        log.info("http_client_too_slow", phase="body", seconds=seconds, answered=answered)
        if answered:
            self.transport.close()
        else:
            self._answer_and_close(408, grpc.StatusCode.DEADLINE_EXCEEDED,
                                   f"request body not received within {seconds} s; closing the connection")

    # --- answers written by the protocol

    def _answer_and_close(self, status: int, code: grpc.StatusCode, message: str) -> None:
        """Write ``status`` with the error body, then half-close and drain (see the module).

        Halfway through another answer (a pipelined request stalled behind a
        response the client reads slowly) nothing can be written: just close.
        """
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self._disarm(cancel=True)
            self.transport.close()
            return
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the application's receive() ends, its send() is dropped
            cycle.message_event.set()
        self.connections.discard(self)  # the cap counts the connections being served
        self.waiting.done(self)
        body = error_body(code, message)
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
        head.extend(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers)
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self._disarm(cancel=True)
        self._draining = True
        self.transport.write(b"".join(head) + body)
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    # --- asyncio.Protocol

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.limits.max_connections
        if len(self.connections) > limit:
            victim = self.waiting.evict()
            if victim is None:
                self.refusals.note(limit)
                self._answer_and_close(503, grpc.StatusCode.UNAVAILABLE,
                                       f"the REST shim is serving its maximum of {limit} connections, each with "
                                       "a request in progress; try again shortly")
                return
            self.evictions.note(limit)
            victim.close_for_room(limit)
        self.waiting.wait(self, self.loop.time())
        self._arm(self.limits.header_timeout_seconds, self._header_timeout)

    def close_for_room(self, limit: int) -> None:
        """Close this waiting connection to make room for a new one (the module's connection cap)."""
        if self._in_headers:
            self._answer_and_close(503, grpc.StatusCode.UNAVAILABLE,
                                   f"the REST shim is serving its maximum of {limit} connections and this one had "
                                   "not sent a whole request: it was closed to make room; send the request "
                                   "promptly, or try again shortly")
            return
        self.connections.discard(self)  # gone from the count now, not when the loop reports the close
        self._disarm(cancel=True)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._draining:
            return
        super().data_received(data)
        if self._draining or self.transport.is_closing():
            return
        if self._in_headers:
            # An upper bound: the chunk that began this request may also hold the end of the last one.
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES:
                log.info("http_headers_too_large", limit=MAX_HEADER_BYTES)
                self._answer_and_close(431, grpc.StatusCode.INVALID_ARGUMENT,
                                       f"request headers are larger than {MAX_HEADER_BYTES:,} bytes")
        elif self._deadline is None and self.timeout_keep_alive_task is None and self._between_requests():
            # Bytes that began no request (blank lines between requests) stop uvicorn's keep-alive
            # timer; the header deadline takes its place so they cannot hold the connection.
            self._arm(self.limits.header_timeout_seconds, self._header_timeout)

    def eof_received(self) -> None:
        if self._draining:
            self.transport.close()
        super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm(cancel=True)
        self.waiting.done(self)
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    # --- httptools callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes = 0
        if self._deadline is None:  # a fresh connection keeps the deadline it opened with
            self._arm(self.limits.header_timeout_seconds, self._header_timeout)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._in_body = True
        self.waiting.done(self)  # a request is being handled: the connection cannot be evicted
        self._disarm()
        super().on_headers_complete()
        if not self.pipeline:  # a pipelined request's body is read once it is its turn
            self._arm(self.limits.body_timeout_seconds, self._body_timeout)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        queued = bool(self.pipeline)
        super().on_response_complete()
        if queued and self._in_body and self._deadline is None:  # the queued request's turn has come
            self._arm(self.limits.body_timeout_seconds, self._body_timeout)
        elif not queued and not self._draining and not self.transport.is_closing():
            self.waiting.wait(self, self.loop.time())  # answered, with no request queued behind


def protocol_class(limits: Callable[[], HttpLimits]) -> type[LimitedHttpProtocol]:
    """The protocol for uvicorn's ``http=``, reading ``limits()`` at each new connection; its
    connections share one list of those waiting (one server's)."""

    class Bound(LimitedHttpProtocol):
        current_limits = staticmethod(limits)
        waiting = WaitingConnections()

    return Bound
