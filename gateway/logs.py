"""structlog set-up: JSON lines (or lines for a person) on stdout, context bound through contextvars.

Every RPC writes one line (``gateway.rpc``), so rendering a line is on the
request path. In a profile of a REST GET, structlog's stdlib ``json.dumps``
and ``print`` would be about 40% of a line's cost; lines are rendered
by orjson and written as bytes (structlog's ``BytesLoggerFactory``), the
set-up structlog's own documentation gives for speed. The lines read the same
to a JSON parser. orjson refuses what ``json`` would write (an integer past
64 bits, a lone surrogate in a string): such a line falls back to ``json``, so
no event is ever lost to its encoding.

Two more cuts for the per-RPC line: the timestamp formats its date and time
once per second (structlog's ISO stamper builds a ``datetime`` per line; the
text is the same), and ``one_write()`` lets lines logged together leave in one
write and one flush. Outside such a block every line is flushed as it is
logged. A line logged later than the moment it describes passes that moment
(``time.time()``) under the ``STAMP_AT`` key, and is stamped with it.

**Lines logged later.** The lines written once per request (``rpc`` in every
gRPC service, ``http`` in the shim) are not rendered by the request: it queues
the event and its fields (``later``), and the queue is rendered in one batch
and one write at most ``FLUSH_AFTER_S`` later (a timer on the event loop), on
the loop's next turn once ``MAX_QUEUED`` lines wait, and at exit. A batch runs
each event through the processors ``configure`` set, as structlog would (all
but the contextvars merge and the exception formatting: a queued line carries
its own fields, and the batch's context is not its request's), and joins what
they render: the same line, without structlog's logger calls and one write per
line, which would be half of a line's cost. Rendered one
by one between the requests, these lines cost the file API about a fifth of
its throughput under load; rendered together, a couple of microseconds each.
A process killed outright (SIGKILL, a crash of the interpreter) loses at most
the last ``FLUSH_AFTER_S`` of them; a process that stops (SIGTERM, then a
normal exit) writes them all.

**Lines for a person.** ``configure(console=Console(...))`` renders the same
events with structlog's ``ConsoleRenderer`` instead (local time, level, event,
``[service]``, key=value), for a terminal (docs/operations.md "Logs"): the entry point
decides, and ``gateway up`` passes its decision to every child. There the
per-request lines and each process's ``stopping`` line are dropped unless
``verbose`` (``QUIET_ON_A_TERMINAL``), and exceptions are printed as plain
tracebacks (the rich formatter structlog would pick shows local variables,
which can hold keys). The JSON chain is not touched by any of it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import orjson
import structlog

_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS  # {1: ...} as json writes it: {"1": ...}


def _dumps(event: Any, default: Any = None) -> bytes:
    try:
        return orjson.dumps(event, default=default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: a value orjson cannot write, json can
        return json.dumps(event, default=default).encode("utf-8", "backslashreplace")


class _Batching(threading.local):
    depth = 0


_batching = _Batching()


class _Stdout:
    """What structlog's BytesLogger writes to: stdout's bytes, flushed at every line but inside ``one_write``."""

    def __init__(self, buffer: BinaryIO) -> None:
        self.buffer = buffer
        self.write = buffer.write

    def flush(self) -> None:
        if not _batching.depth:
            self.buffer.flush()


_stdout: _Stdout | None = None
_chain: list[Any] | None = None  # the processors configure() set, while they are structlog's
_level = logging.INFO
_log = structlog.get_logger()


@contextlib.contextmanager
def one_write() -> Iterator[None]:
    """Lines this thread logs inside the block are flushed together when it ends (at the latest)."""
    _batching.depth += 1
    try:
        yield
    finally:
        _batching.depth -= 1
        if not _batching.depth and _stdout is not None:
            _stdout.buffer.flush()


STAMP_AT = "_stamp_at"


FLUSH_AFTER_S = 0.02
MAX_QUEUED = 256  # a batch blocks its loop a few microseconds a line: keep each one short

Line = tuple[str, dict[str, Any], float]  # event, its fields, the moment it describes


class _Later:
    """The lines not yet logged, and the loop (and its thread) whose timer will log them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: list[Line] = []
        self.timer_loop: asyncio.AbstractEventLoop | None = None
        self.timer_thread = 0


_later = _Later()


def later(event: str, **fields: Any) -> None:
    """Log the info line ``event`` with ``fields`` in the next batch (see the module).

    The line is stamped with the moment of this call (``STAMP_AT``): the batch runs up
    to ``FLUSH_AFTER_S`` later. Called off an event loop, or in a process whose logging
    ``configure`` did not set up (a test, a library user), it logs at once.
    """
    line = (event, fields, time.time())
    if _stdout is None:
        _log_lines([line])
        return
    queue = _later
    thread = threading.get_ident()
    loop = queue.timer_loop  # read without the lock: a stale value only sends this call the longer way
    if loop is None or queue.timer_thread != thread or not loop.is_running():
        # No timer pending on this thread's running loop: ask which loop runs here (a system
        # call on every call before Python 3.12, so not asked while the timer is armed).
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread: no timer to wait for
            _log_lines([line])
            return
    with queue.lock:
        queue.lines.append(line)
        full = len(queue.lines) == MAX_QUEUED
        arm = queue.timer_loop is not loop  # None (flushed meanwhile), or a loop that may never run again
        if arm:
            queue.timer_loop, queue.timer_thread = loop, thread
    if arm:
        loop.call_later(FLUSH_AFTER_S, flush_later)
    if full:
        loop.call_soon(flush_later)


def flush_later() -> None:
    """Log every line ``later`` queued, now, in one write."""
    queue = _later
    with queue.lock:
        lines, queue.lines, queue.timer_loop, queue.timer_thread = queue.lines, [], None, 0
    if lines:
        _log_lines(lines)


atexit.register(flush_later)

_stopping = threading.Event()


def mark_stopping() -> None:
    """Say that this process is stopping (call it as its ``stopping`` line is logged): a start-up
    line that comes later (a part still loading) is left out rather than logged after it."""
    _stopping.set()


def stopping() -> bool:
    """Whether ``mark_stopping`` was called in this process."""
    return _stopping.is_set()


_NOT_FOR_QUEUED_LINES = (structlog.contextvars.merge_contextvars, structlog.processors.format_exc_info)


def _log_lines(lines: list[Line]) -> None:
    """Log ``lines`` at info level: rendered by the processors ``configure`` set, joined, one write.

    Under any other structlog configuration (a test capturing logs, a library user's own)
    each line goes through structlog's logger as any other line would.
    """
    chain = _chain
    if chain is None or _stdout is None or structlog.get_config()["processors"] is not chain:
        with one_write():
            for event, fields, at in lines:
                _log.info(event, **fields, **{STAMP_AT: at})
        return
    if _level > logging.INFO:
        return
    # A queued line carries its own fields only: the contextvars of the batch are not its request's,
    # and it holds no exception to format.
    processors = [p for p in chain if p not in _NOT_FOR_QUEUED_LINES]
    rendered = []
    for event, fields, at in lines:
        event_dict: Any = {**fields, "event": event, STAMP_AT: at}  # the order structlog builds it in
        try:
            for processor in processors:
                event_dict = processor(None, "info", event_dict)
        except structlog.DropEvent:
            continue
        rendered.append(event_dict)
    if rendered:
        rendered.append(b"")
        _stdout.buffer.write(b"\n".join(rendered))  # one write: a line of another thread never lands inside
        _stdout.buffer.flush()


class _Timestamp:
    """``timestamp``: UTC, ISO 8601 with microseconds and ``Z``, as TimeStamper(fmt="iso", utc=True) writes it."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")  # one assignment: threads never see a torn pair

    def __call__(self, _: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        at = event.pop(STAMP_AT, None)
        now = time.time() if at is None else at
        second = int(now)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        event["timestamp"] = f"{cached[1]}.{int((now - second) * 1_000_000):06d}Z"
        return event


@dataclass(frozen=True)
class Console:
    """Render lines for a person (see the module): ``colors`` (ANSI; the entry point says whether the
    stream is a terminal and ``NO_COLOR`` is unset), ``verbose`` (keep the lines a terminal drops)."""

    colors: bool = False
    verbose: bool = False


# Dropped on a terminal unless verbose: one line per request (rpc, http) is for log tools, and a
# process's "stopped" line follows its "stopping" line within its stop grace.
QUIET_ON_A_TERMINAL = frozenset({"rpc", "http", "stopping"})
CONSOLE_TIME = "%Y-%m-%d %H:%M:%S"


def _quiet(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if event.get("event") in QUIET_ON_A_TERMINAL:
        raise structlog.DropEvent
    return event


def _local_time(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    at = event.pop(STAMP_AT, None)
    event["timestamp"] = time.strftime(CONSOLE_TIME, time.localtime(time.time() if at is None else at))
    return event


def _service_in_brackets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # ConsoleRenderer prints a ``logger_name`` as ``[name]`` right after the event.
    event["logger_name"] = event.pop("service")
    return event


def _console_chain(console: Console) -> list[Any]:
    """The processors after the level: time, the service, the rendered line as UTF-8 bytes."""
    renderer = structlog.dev.ConsoleRenderer(
        colors=console.colors, exception_formatter=structlog.dev.plain_traceback, sort_keys=False,
    )

    def to_bytes(logger: Any, method: str, event: MutableMapping[str, Any]) -> bytes:
        return renderer(logger, method, event).encode("utf-8", "backslashreplace")

    return [_local_time, _service_in_brackets, to_bytes]


def configure(service: str, level: int = logging.INFO, console: Console | None = None) -> structlog.stdlib.BoundLogger:
    """Route structlog to stdout, one line per event tagged with ``service``: a JSON object, or
    with ``console`` a line for a person (see the module)."""
    def add_service(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event.setdefault("service", service)  # also in worker threads, where contextvars are empty
        return event

    global _stdout, _chain, _level
    if isinstance(sys.stdout, io.TextIOWrapper):
        # print() goes through the text layer, log lines straight to its buffer: flushing the text
        # layer at every line keeps the two in the order they were written.
        sys.stdout.reconfigure(line_buffering=True)
    _stdout = _Stdout(sys.stdout.buffer)
    _level = level
    if console is None:
        _chain = [
            structlog.contextvars.merge_contextvars,
            add_service,
            structlog.processors.add_log_level,
            _Timestamp(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ]
    else:
        quiet = [] if console.verbose else [_quiet]
        _chain = [
            *quiet,
            structlog.contextvars.merge_contextvars,
            add_service,
            structlog.processors.add_log_level,
            *_console_chain(console),
        ]
    structlog.configure(
        processors=_chain,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(cast(BinaryIO, _stdout)),  # write and flush are all it uses
        cache_logger_on_first_use=True,
    )
    logger: structlog.stdlib.BoundLogger = structlog.get_logger()
    return logger
