"""A record of where the KB's memory is, for finding growth under load (docs/capacity.md "Where the KB's memory goes").

Off unless the KB starts with ``KB_MEMORY_TRACE`` naming a file (read in ``services.kb.main``; not
``GATEWAY_``-prefixed, so the long-run benches pass it through). Then a thread appends one JSON line
to that file every ``KB_MEMORY_TRACE_S`` seconds (default 10): the process's resident and anonymous
memory (``/proc/self/smaps_rollup``), the C heap (glibc's ``mallinfo2``: its arenas, its mappings,
the bytes in use and free; and per arena, from ``malloc_info``, the memory it holds and the free part of
it), SQLite's allocations in all and the page caches, statements and schemas of the open
connections, Python's allocated blocks, and its own allocator's (pymalloc's) arenas and the bytes in
its blocks in use and free. With ``KB_MEMORY_TRACE_FRAMES`` set to a number of frames, tracemalloc runs too (it slows the KB down about twice): each line then carries
the traced total, and ``<file>.top`` is rewritten with the tracebacks whose allocations grew most
since the first line written after ``KB_MEMORY_TRACE_BASE_S`` seconds (default 120, a warm-up).
"""

from __future__ import annotations

import ctypes
import json
import linecache
import os
import re
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import apsw

from gateway.atomic import write_atomic
from gateway.heap import c_library
from services.kb.resources.page_caches import connections_bytes

TOP_LINES = 25
_DB_STATUS = {"cache": apsw.SQLITE_DBSTATUS_CACHE_USED, "stmt": apsw.SQLITE_DBSTATUS_STMT_USED,
              "schema": apsw.SQLITE_DBSTATUS_SCHEMA_USED}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


@dataclass(frozen=True)
class TraceSettings:
    path: Path
    every_s: float = 10.0
    frames: int = 0  # 0: no tracemalloc
    base_s: float = 120.0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> TraceSettings | None:
        """The settings ``environ`` asks for (module docstring), or None when the trace is off."""
        path = environ.get("KB_MEMORY_TRACE")
        if not path:
            return None
        return cls(Path(path), float(environ.get("KB_MEMORY_TRACE_S", "10")),
                   int(environ.get("KB_MEMORY_TRACE_FRAMES", "0")), float(environ.get("KB_MEMORY_TRACE_BASE_S", "120")))


def smaps_mb() -> dict[str, float]:
    """Rss and Anonymous of this process, MB (empty where /proc has no smaps_rollup)."""
    out: dict[str, float] = {}
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        key, _, rest = line.partition(":")
        if key in ("Rss", "Anonymous"):
            out[key.lower()] = int(rest.split()[0]) / 1024
    return out


def heap_mb() -> dict[str, float]:
    """glibc's ``mallinfo2`` over every arena, MB (empty elsewhere)."""
    libc = c_library()
    func = getattr(libc, "mallinfo2", None) if libc is not None else None
    if func is None:
        return {}
    func.restype = _MallInfo2
    info = func()
    return {"heap_arena": info.arena / 2**20, "heap_mapped": info.hblkhd / 2**20, "heap_mappings": info.hblks,
            "heap_used": info.uordblks / 2**20, "heap_free": info.fordblks / 2**20}


_HEAP = re.compile(r'<heap nr="\d+">.*?<total type="fast" count="\d+" size="(\d+)"/>\s*'
                   r'<total type="rest" count="\d+" size="(\d+)"/>\s*<system type="current" size="(\d+)"/>', re.S)


def malloc_info_xml() -> str:
    """glibc's ``malloc_info`` report, its XML ("" elsewhere)."""
    libc = c_library()
    if libc is None or not hasattr(libc, "malloc_info") or not hasattr(libc, "open_memstream"):
        return ""
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    libc.open_memstream.restype = ctypes.c_void_p
    stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(buf), ctypes.byref(size)))
    try:
        libc.malloc_info(0, stream)
    finally:
        libc.fclose(stream)  # sets buf and size
    try:
        return ctypes.string_at(buf, size.value).decode()
    finally:
        libc.free(buf)


def arenas_mb(xml: str) -> list[list[float]]:
    """Per arena of ``malloc_info``'s report: [MB it holds from the system, MB of it free]."""
    return [[round(int(system) / 2**20, 2), round((int(fast) + int(rest)) / 2**20, 2)]
            for fast, rest, system in _HEAP.findall(xml)]


_PYMALLOC = {"# arenas allocated current": "py_arenas", "# bytes in allocated blocks": "py_used_mb",
             "# bytes in available blocks": "py_free_blocks_mb"}


def pymalloc_mb() -> dict[str, float]:
    """Python's own allocator (pymalloc), from ``sys._debugmallocstats``: its arenas (1 MiB mappings of
    the interpreter's, outside glibc's figures), the bytes in blocks in use and in free blocks of used
    pools, MB. The report goes to the C stderr, so fd 2 is pointed at a temporary file while it is
    written (the KB logs to stdout)."""
    with tempfile.TemporaryFile() as report:
        saved = os.dup(2)
        try:
            os.dup2(report.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        report.seek(0)
        text = report.read().decode(errors="replace")
    out: dict[str, float] = {}
    for line in text.splitlines():
        label, _, value = line.partition("=")
        key = _PYMALLOC.get(label.strip())
        if key is not None:
            number = int(value.strip().replace(",", ""))
            out[key] = number if key == "py_arenas" else number / 2**20
    return out


def sqlite_mb() -> dict[str, float]:
    """SQLite's allocations in all and, summed over the open connections, their page caches,
    statements and schemas, MB (a connection busy in another thread is left out of the sums)."""
    return {"sqlite": apsw.memory_used() / 2**20, "connections": len(apsw.connections()),
            **{f"sqlite_{key}": connections_bytes(op) / 2**20 for key, op in _DB_STATUS.items()}}


def sample(started: float) -> dict[str, object]:
    """One line of the record."""
    line: dict[str, object] = {"t": round(time.monotonic() - started, 1), **smaps_mb(), **heap_mb(), **sqlite_mb(), **pymalloc_mb(),
                               "arenas": arenas_mb(malloc_info_xml()),
                               "py_blocks": sys.getallocatedblocks()}
    if tracemalloc.is_tracing():
        line["traced"] = tracemalloc.get_traced_memory()[0] / 2**20
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in line.items()}


# The trace's own allocations: tracemalloc's, and the source lines linecache reads to format a traceback.
_NOT_OURS = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, linecache.__file__)]


def _top(snapshot: tracemalloc.Snapshot, base: tracemalloc.Snapshot) -> str:
    stats = snapshot.compare_to(base, "traceback")[:TOP_LINES]
    return "\n\n".join(f"{s.size_diff / 1024:+.1f} KiB {s.count_diff:+d} blocks\n" + "\n".join(s.traceback.format())
                       for s in stats)


def _run(settings: TraceSettings, stop: threading.Event) -> None:
    started = time.monotonic()
    base: tracemalloc.Snapshot | None = None
    while not stop.wait(settings.every_s):
        line = sample(started)
        with settings.path.open("a") as out:
            out.write(json.dumps(line) + "\n")
        if not tracemalloc.is_tracing() or time.monotonic() - started < settings.base_s:
            continue
        snapshot = tracemalloc.take_snapshot().filter_traces(_NOT_OURS)
        if base is None:
            base = snapshot
        else:
            top = f"t={line['t']}\n\n" + _top(snapshot, base)
            write_atomic(settings.path.with_name(settings.path.name + ".top"), top.encode())


def start(settings: TraceSettings) -> threading.Event:
    """Start the record (tracemalloc first, when asked); set the returned event to stop it."""
    if settings.frames > 0:
        tracemalloc.start(settings.frames)
    stop = threading.Event()
    threading.Thread(target=_run, args=(settings, stop), name="kb-memory-trace", daemon=True).start()
    return stop
