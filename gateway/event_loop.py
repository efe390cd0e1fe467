"""Which asyncio event loop the processes of the suite run on: uvloop, but for dreaming.

A profile of a REST GET shows the asyncio loop's own Python
work (its selector, handles and socket transports) in both the shim and the
file API; uvloop does that work in C. grpc.aio runs on it unchanged: its
completion queue poller wakes the loop through a file descriptor, which any
loop with ``add_reader`` serves. uvloop comes with ``uvicorn[standard]`` and
is pinned in pyproject.toml; where it cannot be imported (a platform without
a wheel) every process runs on the standard loop. It is imported when a loop
is made on it, so dreaming, which runs on asyncio's own, never loads it
(docs/operations.md "Memory at rest").
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


def _uvloop() -> ModuleType | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - every supported platform has a wheel
        return None
    return uvloop


def loop_name() -> str:
    """``"uvloop"`` or ``"asyncio"``: what ``run`` and the shim's uvicorn run on."""
    return "uvloop" if _uvloop() is not None else "asyncio"


def running_loop_name() -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop this coroutine runs on (the ``listening`` log line says it)."""
    loop = asyncio.get_running_loop()
    uvloop = sys.modules.get("uvloop")  # not imported: this loop is not one of its
    return "uvloop" if uvloop is not None and isinstance(loop, uvloop.Loop) else "asyncio"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop ``run`` uses; None means asyncio's default."""
    uvloop = _uvloop()
    return uvloop.new_event_loop if uvloop is not None else None


def run(main: Coroutine[Any, Any, T], *, spawns_children: bool = False) -> T:
    """``asyncio.run(main)`` on the suite's loop (see the module).

    ``spawns_children``: the process starts child processes through the loop
    (dreaming's reviewer, ``create_subprocess_exec``), so it stays on asyncio's
    own loop. uvloop spawns with a plain ``fork()`` while gRPC's threads run,
    which runs gRPC's fork handlers ("Other threads are currently calling into
    gRPC, skipping fork() handlers"); under the kill -9 test of dreaming a
    reviewer then failed to start in one run of two. asyncio's loop spawns
    through ``subprocess``, which that test has always passed with.
    """
    with asyncio.Runner(loop_factory=None if spawns_children else loop_factory()) as runner:
        return runner.run(main)
