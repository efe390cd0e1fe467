"""Real gateway processes on free ports with a temporary home (helpers; fixtures are in conftest.py).

Nothing here is mocked: each fixture starts ``python -m gateway_cli.cli serve``
subprocesses and polls their health until a deadline.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.home import ensure_home

READER_KEY = "my-secret-key-123"  # the README's read-only example key (alfred)
ADMIN_KEY = "admin-key-456"  # the README's example key with write access to every agent
BOB_WRITER_KEY = "bob-writer-key-789"  # write access to bob only
CAROL_KEY = "carol-key-000000"  # scope names carol, who is not configured
START_DEADLINE_S = 30.0


# One client for every poll (health, metrics): httpx builds an SSL context for each client it makes
# (about 45 ms of CPU, reading its CA bundle) and ``httpx.get`` makes a client per call, which a
# poll every 50 ms would spend on each. No keep-alive: the servers polled come and go.
POLLS = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


def poll_get(url: str, timeout: float) -> httpx.Response:
    """GET ``url`` through ``POLLS``."""
    return POLLS.get(url, timeout=timeout)


_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=4096)  # most recent first out
_HANDED_LOCK = threading.Lock()


def free_port() -> int:
    """A port free to listen on, picked below the kernel's ephemeral range.

    A port the kernel hands out (bind to 0) can be taken again, before our
    server binds it, by any outgoing connection of the test run; ports under
    the ephemeral range are never handed out that way. A port is free only
    until a server binds it, so two callers (tests that start homes side by
    side in threads) could both be told the same one, and one's clients would
    then talk to the other's server. The last 4,096 ports handed out are
    never handed out again.
    """
    low, _ = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    with _HANDED_LOCK:
        for _ in range(200):
            port = random.randrange(max(1024, low - 12000), low)
            if port in _HANDED_OUT:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.append(port)
            return port
    raise RuntimeError("no free port below the ephemeral range")


def free_ports(count: int) -> list[int]:
    """``count`` different free ports (config.json refuses two services on one port)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail the test naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def grpc_serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


METRICS_KEYS = ("fileApi", "watcher", "kb", "dreaming", "http")


def suite_config(ports: dict[str, int], http_port: int, agents: list[dict[str, Any]] | None = None, **gateway_extra: Any) -> dict[str, Any]:
    """A config.json for a suite on these ports. Its metrics ports are free ones too (suites run
    side by side, so the defaults would collide); ``metrics=...`` in ``gateway_extra`` replaces them."""
    taken = {*ports.values(), http_port}
    metrics_ports: list[int] = []
    while len(metrics_ports) < len(METRICS_KEYS):
        port = free_port()
        if port not in taken:
            taken.add(port)
            metrics_ports.append(port)
    config: dict[str, Any] = {
        "configVersion": "1.0.26",
        "gateway": {
            "grpc": {"host": "127.0.0.1", **ports},
            "api": {
                "port": http_port,
                "workers": 1,  # not "auto": the same processes on any host (test_http_workers runs two)
                "keys": [
                    {"name": "reader", "key": READER_KEY, "agents": ["alfred"], "write": False},
                    {
                        "name": "admin",
                        "keySha256": hashlib.sha256(ADMIN_KEY.encode()).hexdigest(),
                        "agents": "*",
                        "write": True,
                    },
                    {"name": "bob-writer", "key": BOB_WRITER_KEY, "agents": ["bob"], "write": True},
                    {"name": "carol", "key": CAROL_KEY, "agents": ["carol"], "write": True},
                ],
            },
        },
        "agents": agents if agents is not None else [{"id": "alfred"}, {"id": "bob"}],
    }
    # Scheduled dreaming off unless a test turns it on: a test run inside the nightly catch-up
    # window would otherwise see each suite's first start dream (and write .dreaming/).
    config["gateway"]["dreaming"] = {"enabled": False}
    config["gateway"]["metrics"] = {"host": "127.0.0.1", **dict(zip(METRICS_KEYS, metrics_ports, strict=True))}
    config["gateway"].update(gateway_extra)
    return config


@dataclass
class Suite:
    """A set of running gateway processes sharing one home."""

    home: Path
    http_port: int
    ports: dict[str, int]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    host: str = "127.0.0.1"  # the address its gRPC services and REST shim listen on
    wrap: tuple[str, ...] = ()  # a command its processes run under (``ip netns exec NS``)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def address(self, service: str) -> str:
        key = {"file_api": "fileApi"}.get(service, service)
        return f"{self.host}:{self.ports[key]}"

    def metrics_url(self, name: str) -> str:
        """Where process ``name`` (``file_api``… ``http``) serves its Prometheus metrics."""
        metrics = json.loads((self.home / "config.json").read_text())["gateway"]["metrics"]
        return f"http://127.0.0.1:{metrics[{'file_api': 'fileApi'}.get(name, name)]}/metrics"

    def log_path(self, name: str) -> Path:
        return self.home / f"{name}.log"

    def start(self, *names: str) -> None:
        """Start processes ``names`` side by side, as ``gateway up`` does; return once each serves and,
        with the REST shim among them, once the shim reaches every other one of them."""
        for name in names:
            log = open(self.log_path(name), "ab")  # noqa: SIM115 - owned by the child
            self.procs[name] = subprocess.Popen(
                [*self.wrap, sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(self.home)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
        backends = [name for name in names if name != "http"]
        for name in backends:
            wait_until(lambda n=name: self._serving(n), START_DEADLINE_S, f"{name} to be SERVING")  # type: ignore[misc]
        if "http" in names:
            wait_until(lambda: self._http_up(backends), START_DEADLINE_S, "the REST shim to listen and reach its backends")

    def _serving(self, name: str) -> bool:
        self._fail_if_dead(name)
        return grpc_serving(self.address(name))

    def _http_up(self, backends: tuple[str, ...] | list[str] = ()) -> bool:
        """Whether the shim answers /healthz, saying ``backends`` serve (its channels to them are up)."""
        self._fail_if_dead("http")
        try:
            reply = poll_get(f"{self.base_url}/healthz", 1)
        except httpx.HTTPError:
            return False
        said = reply.json().get("backends", {}) if backends else {}
        return all(said.get(name) == "SERVING" for name in backends)

    def _fail_if_dead(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log_path(name).read_text()[-3000:]}")

    def stop(self, name: str) -> int:
        """SIGTERM process ``name``; its exit code (AssertionError when it outlives 15 s)."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{name} did not stop on SIGTERM") from None
        return proc.returncode

    def stop_all(self) -> None:
        """SIGTERM every process at once, then wait for each (``stop``)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in list(self.procs):
            self.stop(name)

    def log_lines(self, name: str) -> list[dict[str, Any]]:
        """Every JSON line of ``name``'s log, over all its starts. A process killed with
        ``kill -9`` can leave its last line torn, and the next start's first line then follows
        it on the same line: that line's whole objects are kept, the torn fragment dropped."""
        out = []
        for line in self.log_path(name).read_text().splitlines():
            if not line.startswith("{"):
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                out.extend(_whole_objects(line))
        return out


def _whole_objects(line: str) -> list[dict[str, Any]]:
    """The JSON objects that parse to the end of ``line`` from some ``{"`` on (a torn line's tail)."""
    start = line.find('{"', 1)
    while start != -1:
        try:
            return [json.loads(line[start:])]
        except json.JSONDecodeError:
            start = line.find('{"', start + 1)
    return []


def make_home(tmp: Path, agents: list[dict[str, Any]] | None = None, **gateway_extra: Any) -> tuple[Path, dict[str, int], int]:
    home = tmp / "home"
    home.mkdir()
    *grpc_ports, http_port = free_ports(5)
    ports = dict(zip(("fileApi", "watcher", "kb", "dreaming"), grpc_ports, strict=True))
    (home / "config.json").write_text(json.dumps(suite_config(ports, http_port, agents, **gateway_extra), indent=2))
    ensure_home(home)
    return home, ports, http_port


def workspace(suite: Suite, agent: str) -> Path:
    return suite.home / "agents" / agent / "workspace"


def claude(suite: Suite, agent: str) -> str:
    """The agent's CLAUDE.md on disk, "" while there is none."""
    try:
        return (workspace(suite, agent) / "CLAUDE.md").read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return ""


def wait_claude(suite: Suite, agent: str, fragment: str, present: bool = True) -> str:
    """Poll until the agent's CLAUDE.md does (or does not) contain ``fragment``; its text."""
    what = f"CLAUDE.md of {agent} {'with' if present else 'without'} {fragment!r}"
    wait_until(lambda: (fragment in claude(suite, agent)) == present, 15, what)
    return claude(suite, agent)


def env_without_home() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GATEWAY_HOME", None)
    return env
