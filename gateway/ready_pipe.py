"""How a child of ``gateway up`` says it is ready: one line on a pipe the launcher gave it.

The launcher makes a pipe per child and passes its write end's number (``--ready-fd``); the
process writes ``ready`` once it serves (a gRPC service: every health name SERVING; the shim:
listening, its start-up done) and closes it. The pipe is the launcher's own, so what it hears is
about its own child and never about another suite on the same port, and it needs no client of
its own (gRPC, HTTP) to hear it. A process started without the option (``gateway serve`` by a
person, compose, Kubernetes) has nothing to say it on: ``report`` does nothing.
"""

from __future__ import annotations

import contextlib
import os

READY_LINE = b"ready\n"


class _Pipe:
    fd: int | None = None


_pipe = _Pipe()


def expect(fd: int | None) -> None:
    """The entry point: ``fd`` is where this process says it is ready (None: nowhere)."""
    if fd is not None:
        os.set_inheritable(fd, False)  # the process's own children (dreaming's reviewer) do not get it
    _pipe.fd = fd


def report() -> None:
    """Say ``ready`` on the pipe and close it; nothing when there is none or it was said already.
    A launcher that is gone (the pipe broken) is no error here: the process is stopped by it anyway."""
    fd, _pipe.fd = _pipe.fd, None
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, READY_LINE)
    with contextlib.suppress(OSError):
        os.close(fd)
