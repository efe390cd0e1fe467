"""Packages a library picks up when they happen to be installed, and that no process of the suite uses.

structlog imports ``rich`` (and ``colorama``, ``better_exceptions``) at its own import when it finds
them, for tracebacks and colours the suite never asks for: ``gateway.logs`` renders plain
tracebacks, and colours on Linux are plain escape codes. Installed beside the suite (a test tool
brings ``rich``), they would cost every process about 5 MiB at rest (docs/operations.md "Memory at
rest"). ``refuse`` makes their import fail in this process, so the library takes its fallback.
"""

from __future__ import annotations

import sys

UNUSED = ("rich", "colorama", "better_exceptions")


def refuse() -> None:
    """Before anything imports structlog: make ``import`` of each ``UNUSED`` package raise ImportError
    in this process (a package already imported is left as it is)."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: Python's own "not importable" entry
