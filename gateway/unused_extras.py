"""Packages a library picks up when they happen to be installed, and that no process of the suite uses.

structlog imports ``rich`` (and ``colorama``, ``better_exceptions``) at its own import when it finds
them, for tracebacks and colours the suite never asks for: ``gateway.logs`` renders plain
tracebacks, and colours on Linux are plain escape codes. Installed beside the suite (a test tool
brings ``rich``), they would cost every process about 5 MiB at rest (docs/operations.md "Memory at
rest"). It imports ``greenlet`` too, for a greenlet-local context no process runs greenlets to use
(its own context is bound through contextvars: ``gateway.logs``); a browser test tool brings it,
about 0.2 MiB a process. ``refuse`` makes their import fail in this process, so the library takes
its fallback.

The shim's uvicorn imports watchfiles at its own import, for a ``--reload`` the shim never runs
(uvicorn falls back to its own stat loop for that). Where inotify watches the shim's config.json
(``gateway.watching``, which imports watchfiles only without it), nothing else in the shim needs it:
``refuse("http")`` refuses it there too (about 0.8 MiB).

structlog's own ``__init__`` imports its standard-library integration, its test helpers and its
thread-local API (with uuid and platform), none of which the suite uses: ``refuse`` loads structlog
without it (``gateway.lean_import``; the names the suite takes from the package are
``STRUCTLOG_NAMES``), about 0.25 MiB a process.
"""

from __future__ import annotations

import sys

from gateway.lean_import import without_init

UNUSED = ("rich", "colorama", "better_exceptions", "greenlet")
SHIM_UNUSED = ("watchfiles",)
# What the suite takes from structlog's package (the rest from its submodules: ``structlog.processors``…).
STRUCTLOG_NAMES = {
    "get_logger": "structlog._config", "configure": "structlog._config", "get_config": "structlog._config",
    "make_filtering_bound_logger": "structlog._native", "get_context": "structlog._base",
    "BytesLoggerFactory": "structlog._output", "PrintLoggerFactory": "structlog._output", "DropEvent": "structlog.exceptions",
}


def refuse(service: str | None = None) -> None:
    """Before anything imports structlog: make ``import`` of each ``UNUSED`` package raise ImportError
    in this process (a package already imported is left as it is), and structlog's package load
    without its ``__init__``. With ``service`` ``"http"`` (the shim), before uvicorn is imported:
    each ``SHIM_UNUSED`` package too, where inotify is available."""
    names: tuple[str, ...] = UNUSED
    if service == "http":
        from gateway import inotify

        if inotify.available():
            names += SHIM_UNUSED
    for name in names:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: Python's own "not importable" entry
    without_init("structlog", STRUCTLOG_NAMES)
