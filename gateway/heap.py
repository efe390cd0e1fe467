"""The C library's heap: giving freed memory back to the system (docs/operations.md "Memory at rest").

A process frees much of what its start-up allocated (imports, the config's checks, the first
compose or index) into glibc's heap, which keeps it: ``give_back`` returns the free pages
(``malloc_trim``). Every service calls it once it has said it is ready (``gateway.grpc_server``,
the shim's start-up), about 0.7 MiB for the six processes; the KB again after each release of its
archives (``services.kb.resources.handles``). Where the C library has no ``malloc_trim`` (not
glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools


@functools.cache
def c_library() -> ctypes.CDLL | None:
    """The C library the process runs on, loaded once: the process's own symbols, which include it
    (None where they cannot be opened)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def give_back() -> None:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``; a no-op elsewhere)."""
    libc = c_library()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is not None:
        trim(0)
