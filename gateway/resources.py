"""Resources a process can run out of: its open-files limit, and what a call that hit a shortage answers.

docs/operations.md "Open files, disk and memory":

- **The open-files limit.** Every process raises its soft ``RLIMIT_NOFILE`` to the hard limit at
  start (``raise_open_files_limit``; its "listening" line says the figure): the common soft limit of
  1,024 is a default for interactive shells, not a ceiling the kernel needs.
- **A shortage is not a bug.** A call that fails because the process is out of open files
  (EMFILE), the system's open-file table is full (ENFILE), the disk is full (ENOSPC, EDQUOT,
  SQLite's "database or disk is full") or memory ran out is answered UNAVAILABLE (503 over REST)
  naming what ran out (``shortage``, ``describe``), never INTERNAL: nothing is wrong with the
  request, and the same call can succeed a moment later. SQLite reports a descriptor shortage only
  as "unable to open database file"; that error counts as one when the process is at its limit
  when it is looked at (``files_short``).
- **A lock held too long is not a bug either.** A call whose SQLite database stayed locked by
  another writer past the connection's busy timeout (``apsw.BusyError``: ``busy``) is answered
  UNAVAILABLE too, saying so (``BUSY_MESSAGE``), with ``BUSY_METADATA``; it does not make the
  process degraded, since nothing ran out.
- **Degraded.** The process is *degraded* while a shortage is recent: from a shortage until
  ``HOLD_S`` have passed and a call has succeeded since the last one (``Shortages``). Its gRPC health service answers
  NOT_SERVING for ``RESOURCES_SERVICE`` meanwhile (and for ``RESOURCES_SERVICE/<name>`` of each
  resource that ran out), SERVING otherwise; the process's own service stays SERVING, since it
  still answers what it can. The REST shim's ``/healthz`` and ``gateway health`` read it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Final

OPEN_FILES: Final = "open files"
FILE_TABLE: Final = "the system's open-file table"
DISK_SPACE: Final = "disk space"
MEMORY: Final = "memory"
# Each resource's name in a health service name and a metric label (a closed set).
NAMES: Final = {OPEN_FILES: "open-files", FILE_TABLE: "file-table", DISK_SPACE: "disk-space", MEMORY: "memory"}
RESOURCES_SERVICE: Final = "gateway.resources"
HOLD_S: Final = 15.0
PROBE_MARGIN: Final = 16  # descriptors under the soft limit that already count as "at the limit"
# Trailing metadata of an UNAVAILABLE answer caused by a shortage: the resource's NAMES value. The
# shim keeps such an answer's message (it names what ran out) instead of saying the backend is down.
SHORTAGE_METADATA: Final = "x-gateway-shortage"
BUSY_METADATA: Final = "x-gateway-busy"  # likewise, for an answer caused by a database locked too long
UNAVAILABLE_METADATA: Final = "x-gateway-unavailable"  # likewise, for a handler's own Unavailable (a server it needs is down)
BUSY_MESSAGE: Final = "{process} found a database locked by another writer for longer than it waits; try again shortly"



def handler_answered(trailing: Iterable[tuple[str, object]] | None) -> bool:
    """Whether an UNAVAILABLE answer with these trailing metadata came from a process's own handler (it ran
    out of a resource, found a database locked too long, or a server it needs is down: its message says
    which, ``gateway.rpc``), rather than from a process that could not be reached."""
    return any(key in (SHORTAGE_METADATA, BUSY_METADATA, UNAVAILABLE_METADATA) for key, _ in trailing or ())


_ERRNOS: Final = {
    errno.EMFILE: OPEN_FILES,
    errno.ENFILE: FILE_TABLE,
    errno.ENOSPC: DISK_SPACE,
    errno.EDQUOT: DISK_SPACE,
    errno.ENOMEM: MEMORY,
}


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise the soft open-files limit to the hard one: ``(soft before, soft now, hard)``.

    ``RLIM_INFINITY`` is reported as -1. A hard limit the kernel will not grant as a soft one
    (above ``fs.nr_open``) leaves the soft limit where it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # the kernel may refuse it (above fs.nr_open)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return _figure(before), _figure(soft), _figure(hard)


def open_files_limit() -> int:
    """The soft open-files limit now (-1: unlimited)."""
    return _figure(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def open_files() -> int | None:
    """How many descriptors the process has open (None where /proc cannot say, or when listing it
    needs a descriptor that is not there)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return None


def _figure(limit: int) -> int:
    return -1 if limit == resource.RLIM_INFINITY else int(limit)


def files_short() -> str | None:
    """``OPEN_FILES`` or ``FILE_TABLE`` when the process cannot open one more file now (or is
    within ``PROBE_MARGIN`` of its limit), else None."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return _ERRNOS.get(exc.errno or 0) if exc.errno in (errno.EMFILE, errno.ENFILE) else None
    os.close(fd)
    limit = open_files_limit()
    used = open_files()
    if limit > 0 and used is not None and used >= limit - PROBE_MARGIN:
        return OPEN_FILES
    return None


def shortage(exc: BaseException) -> str | None:
    """What ran out, when ``exc`` (or an exception it was raised from) is a resource shortage; else None."""
    apsw = sys.modules.get("apsw")  # only a process that uses SQLite can have its errors (no import here)
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno in _ERRNOS:
            return _ERRNOS[current.errno]
        if isinstance(current, MemoryError) or (apsw is not None and isinstance(current, apsw.NoMemError)):
            return MEMORY
        if apsw is not None and isinstance(current, apsw.FullError):
            return DISK_SPACE
        if apsw is not None and isinstance(current, (apsw.CantOpenError, apsw.IOError)):  # how SQLite says EMFILE
            found = files_short()
            if found is not None:
                return found
    return None


def _chain(exc: BaseException, depth: int = 5) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, at most ``depth`` of them."""
    current: BaseException | None = exc
    for _ in range(depth):
        if current is None:
            return
        yield current
        current = current.__cause__ or current.__context__


def busy(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is SQLite's "database is locked" past
    the busy timeout."""
    apsw = sys.modules.get("apsw")
    return apsw is not None and any(isinstance(current, apsw.BusyError) for current in _chain(exc))


def describe(what: str, process: str) -> str:
    """The message of an UNAVAILABLE answer: what ran out, and what to do."""
    detail = ""
    if what == OPEN_FILES:
        limit = open_files_limit()
        detail = f" (its limit is {limit}; raise it with ulimit -n or LimitNOFILE)" if limit > 0 else ""
    elif what == FILE_TABLE:
        detail = " (fs.file-max)"
    return f"{process} ran out of {what}{detail}; try again shortly"


class Shortages:
    """The process's recent shortages: which resources ran out, and whether it is degraded (module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, hold_s: float = HOLD_S) -> None:
        self._clock = clock
        self._hold_s = hold_s
        self._last: dict[str, float] = {}  # resource → when it last ran out
        self._success = float("-inf")  # when a call last succeeded
        self.process = "this process"  # how a shortage's message names it (set by gateway.grpc_server.serve)
        self.listeners: list[Callable[[str], None]] = []  # told of each shortage (the KB closes archives)

    def ran_out(self, what: str) -> None:
        """``what`` ran out just now: degraded, and every listener is told (a failing one is skipped)."""
        self._last[what] = self._clock()
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):
                listener(what)

    def succeeded(self) -> None:
        self._success = self._clock()

    def degraded(self) -> list[str]:
        """The resources that ran out recently: within ``hold_s``, or with no success since."""
        now = self._clock()
        out = [what for what, at in self._last.items() if now - at < self._hold_s or self._success <= at]
        for what in [w for w in self._last if w not in out]:
            del self._last[what]
        return sorted(out)


SHORTAGES = Shortages()  # the process's own (every gRPC call through gateway.rpc.unary reports to it)
