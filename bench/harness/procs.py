"""The benches' child processes: start them with their log in a file, wait for them to be ready,
read their CPU and memory from /proc and their timings from their logs, and stop them all,
whatever happens to the run.

Each child gets a session of its own, so a terminal's Ctrl-C reaches only the bench, which stops
them (``stop_on_signals`` turns SIGINT and SIGTERM into ``KeyboardInterrupt`` for that).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from gateway_cli.launcher import stop_processes
from harness import REPO
from harness.report import say

START_TIMEOUT_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main thread: the bench's ``finally``
    stops its children."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)


class Children:
    """The processes this run started, each logging to ``log_dir/<name>.log`` (or a log it is
    given); all stopped by ``stop_all``. ``unbuffered``: their output reaches the log line by
    line (for a bench that reads the log while they run)."""

    def __init__(self, log_dir: Path | None = None, *, unbuffered: bool = False) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        self.env = env

    def start(self, name: str, cmd: list[str], *, cwd: Path = REPO, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in ``cwd`` (another checkout's tree runs its own code with ``-m``)."""
        if log is None:
            if self.log_dir is None:
                raise ValueError(f"no log for {name}: Children has no log_dir")
            log = self.log_dir / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as handle:
            self.procs[name] = subprocess.Popen(
                cmd, cwd=cwd, env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.procs[name]

    def serve(self, name: str, home: Path) -> subprocess.Popen[bytes]:
        """``gateway serve NAME --home HOME``."""
        return self.start(name, [sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(home)])

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def check_alive(self, name: str | None = None) -> None:
        """Raise RuntimeError, with the log's tail, when ``name`` (default: any child) has exited."""
        for each in [name] if name else list(self.procs):
            proc = self.procs[each]
            if proc.poll() is not None:
                raise RuntimeError(f"{each} exited with code {proc.returncode}; log tail:\n{self.tail(each)}")

    def tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, name: str) -> None:
        """Stop ``name`` alone (SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``)."""
        proc = self.procs.pop(name, None)
        if proc is not None:
            self._stop({name: proc})

    def stop_all(self) -> None:
        """SIGTERM every child (the last started first), then wait for them together."""
        self._stop(dict(reversed(self.procs.items())))

    def _stop(self, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        stop_processes(procs, say)


def wait_until(children: Children, probe: Callable[[], object], what: str, timeout: float = START_TIMEOUT_S, *,
               name: str | None = None, interval: float = 0.1) -> float:  # fmt: skip
    """Poll ``probe`` until it is true; the seconds it took. Raises RuntimeError when ``name``
    (default: any child) exits, or after ``timeout``. A probe's OSError or ValueError counts as
    not yet."""
    start = time.perf_counter()
    while True:
        children.check_alive(name)
        with contextlib.suppress(OSError, ValueError):
            if probe():
                return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            tails = "\n".join(f"--- {n} log tail:\n{children.tail(n)}" for n in ([name] if name else children.procs))
            raise RuntimeError(f"{what} not ready after {timeout:.0f}s\n{tails}")
        time.sleep(interval)


def start_service(children: Children, name: str, home: Path, port: int, timeout: float = START_TIMEOUT_S) -> int:
    """``gateway serve NAME`` on ``home``; its pid once its health service on ``port`` says SERVING."""
    from gateway_cli.health_cli import grpc_serving

    proc = children.serve(name, home)
    wait_until(children, lambda: grpc_serving(f"127.0.0.1:{port}"), f"{name} SERVING", timeout, name=name)
    return proc.pid


RPC_LOG_TIMEOUT_S = 30.0


def _rpc_lines(log: Path, method: str) -> list[float]:
    """Seconds of every ``rpc`` line for ``method`` that ``log`` holds now, in the order written."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):  # also a line the service is writing right now
                row = json.loads(line)
                if row.get("event") == "rpc" and row.get("method") == method and "ms" in row:
                    out.append(float(row["ms"]) / 1000)
    return out


def rpc_seconds(log: Path, method: str, after: int, count: int, timeout: float = RPC_LOG_TIMEOUT_S) -> list[float]:
    """The handler seconds of ``count`` calls of ``method`` from a service's own ``rpc`` log lines,
    in call order: the ``count`` lines of ``method`` that follow its first ``after`` (the calls of
    ``method`` the bench made before, such as a warm-up), once the log holds them all.

    A service writes its rpc lines in batches, a few milliseconds after the calls, or later when
    its loop is busy (gateway/logs.py, "Lines logged later"). So the bench counts its own calls,
    never the log's length at some moment: a warm-up's last lines, still queued when such a mark
    is taken, would be written after it and taken for measured calls. And the log is polled until
    it holds ``after + count`` lines of ``method``. Raises RuntimeError when it does not within
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = _rpc_lines(log, method)
        if len(found) >= after + count:
            return found[after : after + count]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{log}: {len(found)} rpc lines of {method} after {timeout:.0f} s, expected {after} + {count}")
        time.sleep(0.05)


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of ``pid`` (default: this process), all its threads, from /proc."""
    with open(f"/proc/{pid or os.getpid()}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def status_kb(pid: int | None, key: str) -> int:
    """A ``kB`` line of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``...; default: this process)."""
    with open(f"/proc/{pid or 'self'}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid or 'self'}/status")


def _rss_kb(pid: int | None) -> float:
    try:
        return status_kb(pid, "VmRSS")
    except RuntimeError:  # a process that has exited and not been reaped has no VmRSS line
        return float("nan")


def rss_mib(pid: int | None = None) -> float:
    """``VmRSS`` of ``pid`` (default: this process) in MiB; nan when it has none."""
    return _rss_kb(pid) / 1024


def rss_mb(pid: int | None = None) -> float:
    """``VmRSS`` of ``pid`` (default: this process) in MB (10^6 bytes); nan when it has none."""
    return _rss_kb(pid) * 1024 / 1e6
