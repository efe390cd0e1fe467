"""How many REST shim processes ``gateway up`` runs on the API port, and what each is called.

``gateway.api.workers`` is a number or ``"auto"``: one worker per two cores this process may run
on, at least 1 and at most ``AUTO_MAX``, since every worker calls the one file API process, which is
the limit once two shims feed it (docs/scale.md "Reads across cores"). Every worker listens
on the same port with ``SO_REUSEPORT``, and the kernel spreads new connections over them. The first
is named ``http`` as a lone shim is, the next ``http-2``, ``http-3``…: that name is in each
worker's log lines and /healthz, and worker N serves its metrics on ``gateway.metrics.http`` + N − 1.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "QUOTA PERIOD" in microseconds, or "max PERIOD"
AUTO = "auto"
AUTO_MAX = 2
MAX_WORKERS = 64
FIRST = "http"


def cores(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may use: its CPU affinity (which a cpuset or ``taskset`` narrows),
    and no more than its cgroup's CPU quota (a container's CPU limit), rounded up."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        count = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text(encoding="ascii").split()[:2]
        return min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 file, or "max": no quota
        return count


def auto_workers(core_count: int) -> int:
    """``"auto"``'s worker count on a host of ``core_count`` cores: 1 below 4 cores, 2 from 4 cores on."""
    return max(1, min(AUTO_MAX, core_count // 2))


def resolve(value: object) -> int:
    """The worker count a ``gateway.api.workers`` value means here (``"auto"`` or a whole number);
    1 for anything else (validation has refused it already)."""
    if value == AUTO:
        return auto_workers(cores())
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_WORKERS:
        return value
    return 1


def name(index: int) -> str:
    """The process name of worker ``index`` (from 1): ``http``, ``http-2``…"""
    return FIRST if index == 1 else f"{FIRST}-{index}"


def index(process: str) -> int | None:
    """The worker index of process name ``process`` (``http`` → 1, ``http-3`` → 3); None when it is
    not a shim worker's name."""
    if process == FIRST:
        return 1
    prefix, _, number = process.partition("-")
    if prefix == FIRST and number.isdigit() and int(number) >= 2:
        return int(number)
    return None


def names(count: int) -> tuple[str, ...]:
    """The names of ``count`` workers, in start order."""
    return tuple(name(i) for i in range(1, count + 1))
