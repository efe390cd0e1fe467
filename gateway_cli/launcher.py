"""``gateway up``: every service as its own OS process, supervised as one suite.

Before it starts anything it checks that every address the suite will listen
on is free, and names the one that is not (and who holds it). Then it starts
each process, waits until every one says it serves, prints
``ready http://127.0.0.1:PORT`` (on a terminal, as the first line of a short
banner: ``banner``). Each child says it is ready on a pipe of its own that the
launcher gave it (``gateway.ready_pipe``: once every health name is SERVING; the
shim once it listens), so "ready" is only ever said about this launcher's own
children, never about another suite that answers on the same ports. The REST shim
runs as ``gateway.api.workers`` processes on its one port (``gateway.http_workers``):
each is a child of its own, ``http``, ``http-2``…, with a ready pipe of its own. Each start
also has a nonce that every child reports (gRPC: as a health service name; the
shim: in /healthz). SIGINT/SIGTERM stop all children cleanly; a child that dies
is reported and brings the whole suite down, so the suite is never left half-alive.

**Two images, one process.** ``up`` runs in the ``gateway`` command: it reads and
validates config.json and checks the addresses (jsonschema, the config model),
then replaces itself (``exec``, same pid, same stdout, the same hold on the home)
with ``python -m gateway_cli.launcher``, handing it a ``Plan`` on a pipe. That
image imports only the standard library and the home's lock, so the process that
stays for the suite's life holds little memory (docs/operations.md "Memory at
rest"); it needs no gRPC or HTTP client to know its children are ready.

The children write their logs to the launcher's stdout in the format the
launcher was given or guessed (``gateway_cli.log_options``), which it passes to
each of them explicitly.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gateway import http_workers, lock_probe
from gateway.home import ADMIN_KEY_FILE, admin_key_notice
from gateway.ports import listen_problem
from gateway.ready_pipe import READY_LINE
from gateway.suite_lock import Hold

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.logs import Console

# Every process of the suite, in start order.
GRPC_SERVICES: tuple[str, ...] = ("file_api", "watcher", "kb", "dreaming")
SERVICES: tuple[str, ...] = (*GRPC_SERVICES, "http")

PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.1  # the health probes' pace while the suite starts
SUPERVISE_NAP_S = 60.0


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


def processes(config: Config) -> tuple[str, ...]:
    """Every child's name, in start order: the gRPC services, then each shim worker."""
    return (*GRPC_SERVICES, *http_workers.names(config.api.workers))


def listen_addresses(config: Config, http_port: int) -> dict[str, tuple[str, int]]:
    """Service (and ``<service> metrics``) → (host, port) it will listen on."""
    out = {}
    for name in GRPC_SERVICES:
        host, _, port = config.grpc.bind_address(name).rpartition(":")
        out[name] = (host, int(port))
    out["http"] = (config.api.host, http_port)
    for name in processes(config):
        metrics = config.metrics.address(name)
        if metrics is not None and metrics[1] != 0:  # port 0: the kernel picks one, never busy
            out[f"{name} metrics"] = metrics
    return out


def address_problems(config: Config, http_port: int) -> list[str]:
    """One line per address the suite cannot listen on; empty when all are free."""
    problems = []
    by_port: dict[int, str] = {}
    for name, (host, port) in listen_addresses(config, http_port).items():
        if port in by_port:
            problems.append(f"{by_port[port]} and {name} are both set to listen on port {port}")
            continue
        by_port[port] = name
        problem = listen_problem(host, port)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


@dataclass(frozen=True)
class Plan:
    """What the supervising image needs, handed to it across ``exec`` as one JSON object."""

    home: str
    http_port: int
    instance: str  # this start's nonce
    commands: dict[str, list[str]]  # process -> its command line, in start order
    banner: bool  # on a terminal: the banner; else JSON lines and plain lines of our own
    admin_key: str | None  # said once, when this start made it
    hold: tuple[int, int, str]  # the hold on the home: lock fd, record fd, record path


def commands(home: Path, http_port: int, instance: str, child_args: list[str],
             names: tuple[str, ...] = SERVICES) -> dict[str, list[str]]:
    """Each process's command line (``python -m gateway_cli serve``: ``gateway_cli.serve``), in start
    order; ``names``: the processes (``processes``), shim workers named as ``gateway.http_workers`` names them."""
    several = sum(1 for name in names if http_workers.index(name)) > 1
    out = {}
    for name in names:
        worker = http_workers.index(name)
        cmd = [sys.executable, "-m", "gateway_cli", "serve", "http" if worker else name, "--home", str(home), "--instance", instance]
        if worker:
            cmd += ["--port", str(http_port)] + (["--worker", str(worker)] if several else [])
        out[name] = cmd + child_args
    return out


class Suite:
    """The running children of one ``gateway up``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.home = Path(plan.home)
        self.http_port = plan.http_port
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.ready_pipes: dict[str, int] = {}  # process -> the read end of its ready pipe, until it is ready
        self.stop_requested = threading.Event()
        self.wake = threading.Event()  # a signal came: SIGINT/SIGTERM (stop) or SIGCHLD (a child may have died)

    def start(self) -> None:
        for name, cmd in self.plan.commands.items():
            read_end, write_end = os.pipe()
            # A session of its own: a terminal's Ctrl-C reaches only us, and we
            # stop the children in order. If we die without stopping them (even
            # by SIGKILL), the kernel sends them SIGTERM: no orphaned half-suite.
            try:
                self.children[name] = subprocess.Popen([*cmd, "--ready-fd", str(write_end)], pass_fds=(write_end,),
                                                       start_new_session=True, preexec_fn=_die_with_parent)
            finally:
                os.close(write_end)
            self.ready_pipes[name] = read_end

    def dead_child(self) -> tuple[str, int] | None:
        for name, child in self.children.items():
            code = child.poll()
            if code is not None:
                return name, code
        return None

    def wait_ready(self) -> bool:
        """True once every child said ``ready`` on its pipe; False when one dies first, a signal
        comes or ``READY_TIMEOUT_S`` passes (said on stderr)."""
        pending = set(self.ready_pipes)
        deadline = time.monotonic() + READY_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            for name, fd in self.ready_pipes.items():
                selector.register(fd, selectors.EVENT_READ, name)
            while pending:
                if self.stop_requested.is_set():
                    return False
                dead = self.dead_child()
                if dead:
                    _say(f"{dead[0]} exited with code {dead[1]} during start-up; stopping the suite")
                    return False
                for key, _ in selector.select(POLL_S):
                    if os.read(key.fd, len(READY_LINE)) == READY_LINE:
                        pending.discard(key.data)
                    selector.unregister(key.fd)  # said ready, or closed without (its death is seen above)
                if pending and time.monotonic() > deadline:
                    _say(f"not healthy after {READY_TIMEOUT_S:.0f}s: {', '.join(sorted(pending))}; stopping the suite")
                    return False
        return True

    def close_pipes(self) -> None:
        for fd in self.ready_pipes.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.ready_pipes.clear()

    def stop(self) -> None:
        """SIGTERM every child, newest first; SIGKILL what is still alive after the timeout."""
        stop_processes(dict(reversed(list(self.children.items()))), _say)

    def request_stop(self) -> None:
        self.stop_requested.set()
        self.wake.set()

    def supervise(self) -> int:
        """Block until a signal (exit 0) or a child's death (exit 1). It sleeps until a signal wakes it
        (``up`` turns SIGCHLD into ``wake``); the nap's end is only a safety net."""
        while not self.stop_requested.is_set():
            self.wake.wait(SUPERVISE_NAP_S)
            self.wake.clear()
            dead = self.dead_child()
            if dead and not self.stop_requested.is_set():
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


def up(home: Path, config: Config, admin_key: str | None, http_port: int | None, console: Console | None,
       hold: Hold, probe: lock_probe.Probe = lock_probe.probe) -> int:
    """Check the file locks and the addresses, then become the suite's supervisor (``exec``: see the
    module), which runs it until SIGINT/SIGTERM or a child's death and exits with the process's exit
    code; 1 here, with one line, when flock does not keep a second process out on a folder the suite
    writes to (``gateway.lock_probe``; ``probe``: a test passes its own) or an address cannot be
    listened on.

    ``console``: the children render their logs for a person, and readiness is said by
    ``banner``; None: JSON lines, with the ``ready`` line, the admin key and where it is kept
    as plain lines of their own. Once the children have stopped, ``stopped``. ``hold``: this
    process's hold on ``home``, kept across the ``exec``.
    """
    from gateway_cli.log_options import child_arguments

    locks = lock_probe.refusal(config, probe)
    if locks:
        _say(f"cannot start: {locks}")
        return 1
    port = http_port if http_port is not None else config.api.port
    problems = address_problems(config, port)
    if problems:
        for problem in problems:
            _say(f"cannot start: {problem}")
        return 1
    instance = os.urandom(8).hex()
    plan = Plan(str(home), port, instance, commands(home, port, instance, [*child_arguments(console), "--trusted-config", config.digest],
                                               processes(config)),
                console is not None, admin_key, hold.hand_over())
    read_end, write_end = os.pipe()
    os.write(write_end, json.dumps(asdict(plan)).encode())  # a few KB: the pipe holds it
    os.close(write_end)
    os.set_inheritable(read_end, True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "gateway_cli.launcher", str(read_end)])


def _read_plan(fd: int) -> Plan:
    with os.fdopen(fd, "rb") as pipe:
        raw = json.loads(pipe.read())
    raw["hold"] = tuple(raw["hold"])
    return Plan(**raw)


def supervise(plan: Plan) -> int:
    """The supervising image's work: start the children, say ready, run until SIGINT/SIGTERM or a
    child's death, stop them all; the process's exit code."""
    home = Path(plan.home)
    os.set_inheritable(plan.hold[0], False)
    os.set_inheritable(plan.hold[1], False)
    Hold(home, plan.hold[0], plan.hold[1], Path(plan.hold[2]))  # released at exit
    suite = Suite(plan)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: suite.request_stop())
    signal.signal(signal.SIGCHLD, lambda *_: suite.wake.set())
    suite.start()
    try:
        code = _run(suite, home, plan)
    finally:
        suite.close_pipes()
        suite.stop()
        _say("stopped")
    notice = admin_key_notice(home)
    if code != 0 and notice:
        # a start that failed (a port taken) may never have printed the key: say where it is
        _say(notice)
    return code


def _run(suite: Suite, home: Path, plan: Plan) -> int:
    if not suite.wait_ready():
        return 1
    suite.close_pipes()
    url = f"http://127.0.0.1:{suite.http_port}"
    if plan.banner:
        sys.stdout.write(banner(url, home, plan.admin_key) + "\n")  # one write: no child's line lands inside it
        sys.stdout.flush()
    else:
        print(f"ready {url}", flush=True)
        if plan.admin_key:
            print(f"admin key (shown once, stored only as a SHA-256 hash): {plan.admin_key}", flush=True)
        _say_where_the_admin_key_is(home)
    return suite.supervise()


if __name__ == "__main__":
    sys.exit(supervise(_read_plan(int(sys.argv[1]))))
