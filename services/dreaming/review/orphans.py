"""Reviewers left behind by a dreaming process that died (``kill -9``, a crash, the OOM killer).

A reviewer runs in a process group of its own, so a dreaming process that dies
without its clean-up does not take it along: the reviewer (and whatever it
started) would run on, and a crash loop would pile them up. So every reviewer
is started with ``OWNER_VARIABLE=<pid of its dreaming process>:<home>`` in its
environment, which its children inherit, and a starting dreaming process kills
every process of its home whose owner pid is not alive any more (Linux
``/proc``; elsewhere nothing is found). The reviewers of another dreaming
process of the same home, still running, are left alone.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import structlog

from gateway.pids import alive

log = structlog.get_logger()

OWNER_VARIABLE = "GATEWAY_DREAM_OWNER"
PROC = Path("/proc")


def owner_marker(home: Path, pid: int | None = None) -> dict[str, str]:
    """The environment entry that marks a reviewer as started by this process for ``home``."""
    return {OWNER_VARIABLE: f"{pid if pid is not None else os.getpid()}:{home}"}


def _owner(pid: str) -> tuple[int, str] | None:
    try:
        environ = (PROC / pid / "environ").read_bytes()
    except OSError:
        return None
    prefix = OWNER_VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            owner, _, home = entry[len(prefix) :].decode(errors="replace").partition(":")
            return (int(owner), home) if owner.isdecimal() else None
    return None


def kill_orphans(home: Path) -> list[int]:
    """SIGKILL every process marked for ``home`` whose dreaming process is gone; the pids killed."""
    killed: list[int] = []
    try:
        pids = [p for p in os.listdir(PROC) if p.isdecimal()]
    except OSError:
        return killed
    for pid in pids:
        found = _owner(pid)
        if found is None or found[1] != str(home) or alive(found[0]) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(int(pid))
    if killed:
        log.warning("dream_orphan_reviewers_killed", pids=killed,
                    reason="left behind by a dreaming process of this home that is gone")
    return killed
