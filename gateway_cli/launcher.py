"""``gateway up``: every service as its own OS process, supervised as one suite.

Before it starts anything it checks that every address the suite will listen
on is free, and names the one that is not (and who holds it). Then it starts
each process, waits until every health check answers SERVING, prints
``ready http://127.0.0.1:PORT`` (on a terminal, as the first line of a short
banner: ``banner``). Each start has a nonce that every child is
given and reports (gRPC: as a health service name; the shim: in /healthz), so
"ready" is only ever said about this launcher's own children, never about
another suite that answers on the same ports. The REST shim runs as
``gateway.api.workers`` processes on its one port (``gateway.http_workers``):
each is a child of its own, ``http``, ``http-2``…, and ready only once /healthz
has answered from it. SIGINT/SIGTERM stop all children cleanly; a child that
dies is reported and brings the whole suite down, so the suite is never left
half-alive.

The children write their logs to the launcher's stdout in the format the
launcher was given or guessed (``gateway_cli.log_options``), which it passes to
each of them explicitly.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway import http_workers
from gateway.channels import HEALTH_DEADLINE_S, sync_channel
from gateway.config import Config
from gateway.grpc_server import instance_service
from gateway.home import ADMIN_KEY_FILE, admin_key_notice
from gateway.logs import Console
from gateway.ports import listen_problem
from gateway_cli.log_options import child_arguments

# Every process of the suite, in start order.
GRPC_SERVICES: tuple[str, ...] = ("file_api", "watcher", "kb", "dreaming")
SERVICES: tuple[str, ...] = (*GRPC_SERVICES, "http")

PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.1


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGTERM when the launcher dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_processes(procs: Mapping[str, subprocess.Popen[bytes]], say: Callable[[str], None]) -> None:
    """SIGTERM each of ``procs`` still running, in their order, then wait for them together: SIGKILL
    what is still alive ``STOP_TIMEOUT_S`` after the first signal (the launcher's stop; the benches'
    children too)."""
    for proc in procs.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop within {STOP_TIMEOUT_S:.0f}s; killing it")
            proc.kill()
            proc.wait()


def _say(text: str) -> None:
    print(f"gateway: {text}", file=sys.stderr, flush=True)


def grpc_serving(address: str, service: str = "") -> bool:
    """True when the gRPC health service at ``address`` answers SERVING for ``service``
    (a server that does not know ``service`` answers NOT_FOUND: False)."""
    with sync_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=HEALTH_DEADLINE_S
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def http_healthy(url: str, instance: str | None = None, worker: str | None = None) -> bool:
    """True when ``GET url`` answers 200 with status ok (and, when given, this ``instance``, from
    this shim ``worker``: the kernel hands each new connection to one of the workers on the port)."""
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_DEADLINE_S) as reply:
            body = json.load(reply)
            return bool(reply.status == 200 and body.get("status") == "ok" and (instance is None or body.get("instance") == instance)
                        and (worker is None or body.get("worker") == worker))
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return False


class Suite:
    """The running children of one ``gateway up``."""

    def __init__(self, home: Path, config: Config, http_port: int | None, console: Console | None = None) -> None:
        self.home = home
        self.config = config
        self.console = console  # None: JSON lines
        self.http_port = http_port if http_port is not None else config.api.port
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stop_requested = threading.Event()
        self.instance = secrets.token_hex(8)
        self.http_workers = http_workers.names(config.api.workers)

    @property
    def processes(self) -> tuple[str, ...]:
        """Every child's name, in start order: the gRPC services, then each shim worker."""
        return (*GRPC_SERVICES, *self.http_workers)

    def listen_addresses(self) -> dict[str, tuple[str, int]]:
        """Service (and ``<service> metrics``) → (host, port) it will listen on."""
        out = {}
        for name in GRPC_SERVICES:
            host, _, port = self.config.grpc.bind_address(name).rpartition(":")
            out[name] = (host, int(port))
        out["http"] = (self.config.api.host, self.http_port)
        for name in self.processes:
            metrics = self.config.metrics.address(name)
            if metrics is not None and metrics[1] != 0:  # port 0: the kernel picks one, never busy
                out[f"{name} metrics"] = metrics
        return out

    def address_problems(self) -> list[str]:
        """One line per address the suite cannot listen on; empty when all are free."""
        problems = []
        by_port: dict[int, str] = {}
        for name, (host, port) in self.listen_addresses().items():
            if port in by_port:
                problems.append(f"{by_port[port]} and {name} are both set to listen on port {port}")
                continue
            by_port[port] = name
            problem = listen_problem(host, port)
            if problem:
                problems.append(f"{name}: {problem}")
        return problems

    def start(self) -> None:
        several = len(self.http_workers) > 1
        for name in self.processes:
            worker = http_workers.index(name)
            serve = "http" if worker else name
            cmd = [sys.executable, "-m", "gateway_cli.cli", "serve", serve, "--home", str(self.home), "--instance", self.instance]
            if worker:
                cmd += ["--port", str(self.http_port)] + (["--worker", str(worker)] if several else [])
            cmd += child_arguments(self.console)
            # A session of its own: a terminal's Ctrl-C reaches only us, and we
            # stop the children in order. If we die without stopping them (even
            # by SIGKILL), the kernel sends them SIGTERM: no orphaned half-suite.
            self.children[name] = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_die_with_parent)

    def probes(self) -> dict[str, Callable[[], bool]]:
        out: dict[str, Callable[[], bool]] = {}
        service = instance_service(self.instance)
        for name in GRPC_SERVICES:
            address = self.config.grpc.address(name)
            out[name] = lambda a=address: grpc_serving(a, service)  # type: ignore[misc]
        url = f"http://127.0.0.1:{self.http_port}/healthz"
        for name in self.http_workers:
            worker = name if len(self.http_workers) > 1 else None  # a lone shim says no worker name
            out[name] = lambda w=worker: http_healthy(url, self.instance, w)  # type: ignore[misc]
        return out

    def dead_child(self) -> tuple[str, int] | None:
        for name, child in self.children.items():
            code = child.poll()
            if code is not None:
                return name, code
        return None

    def wait_ready(self) -> bool:
        pending = self.probes()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while pending:
            if self.stop_requested.is_set():
                return False
            dead = self.dead_child()
            if dead:
                _say(f"{dead[0]} exited with code {dead[1]} during start-up; stopping the suite")
                return False
            for name in [n for n, probe in pending.items() if probe()]:
                del pending[name]
            if time.monotonic() > deadline:
                _say(f"not healthy after {READY_TIMEOUT_S:.0f}s: {', '.join(sorted(pending))}; stopping the suite")
                return False
            self.stop_requested.wait(POLL_S)
        return True

    def stop(self) -> None:
        """SIGTERM every child, newest first; SIGKILL what is still alive after the timeout."""
        stop_processes(dict(reversed(list(self.children.items()))), _say)

    def supervise(self) -> int:
        """Block until a signal (exit 0) or a child's death (exit 1)."""
        while not self.stop_requested.wait(POLL_S):
            dead = self.dead_child()
            if dead:
                _say(f"{dead[0]} exited unexpectedly with code {dead[1]}; stopping the suite")
                return 1
        _say("stopping")
        return 0


def _say_where_the_admin_key_is(home: Path) -> None:
    """Every start, until ``gateway keys confirm``: where the first admin key is kept."""
    notice = admin_key_notice(home)
    if notice:
        _say(notice)


def banner(url: str, home: Path, admin_key: str | None) -> str:
    """What ``up`` prints on a terminal once the suite is ready: the ``ready URL`` line every
    outside check waits for, then the home, the admin key (itself on the run that made it) and
    where it is kept until ``gateway keys confirm``, and how to stop. Said once for the suite:
    its children do not log the admin-key notice on a terminal."""
    lines = [f"ready {url}", f"  home       {home}"]
    if admin_key:
        lines.append(f"  admin key  {admin_key} (shown only this once; config.json keeps its SHA-256)")
    key_file = home / ADMIN_KEY_FILE
    if key_file.exists():
        where = f"in {key_file} until you run: gateway keys confirm --home {home}"
        lines.append(f"             also {where}" if admin_key else f"  admin key  {where}")
    lines.append(f"  stop       Ctrl-C (or: kill {os.getpid()})")
    return "\n".join(lines)


def up(home: Path, config: Config, admin_key: str | None, http_port: int | None, console: Console | None = None) -> int:
    """Run the suite until SIGINT/SIGTERM or a child's death; the process exit code.

    ``console``: the children render their logs for a person, and readiness is said by
    ``banner``; None: JSON lines, with the ``ready`` line, the admin key and where it is kept
    as plain lines of their own. Once the children have stopped, ``stopped``.
    """
    suite = Suite(home, config, http_port, console)
    problems = suite.address_problems()
    if problems:
        for problem in problems:
            _say(f"cannot start: {problem}")
        return 1
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: suite.stop_requested.set())
    suite.start()
    try:
        if not suite.wait_ready():
            return 1
        url = f"http://127.0.0.1:{suite.http_port}"
        if console is not None:
            sys.stdout.write(banner(url, home, admin_key) + "\n")  # one write: no child's line lands inside it
            sys.stdout.flush()
        else:
            print(f"ready {url}", flush=True)
            if admin_key:
                print(f"admin key (shown once, stored only as a SHA-256 hash): {admin_key}", flush=True)
            _say_where_the_admin_key_is(home)
        return suite.supervise()
    finally:
        suite.stop()
        _say("stopped")
