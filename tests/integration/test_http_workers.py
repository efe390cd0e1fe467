"""``gateway up`` with two REST shim workers on one port (``gateway.http_workers``): both serve, each
says its name, each has its own metrics port, and one that dies brings the suite down."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from suite_support import ADMIN_KEY, free_port, make_home, wait_until
from test_launcher import Up, children_of_home

pytestmark = pytest.mark.integration

CONNECTIONS = 24  # new connections: the kernel picks a worker for each by its address hash


def _port_pair() -> int:
    """A free port whose next port is free too: the metrics ports of workers http and http-2."""
    while True:
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def _workers(home: Path) -> dict[str, int]:
    """Worker name → pid of every live shim of ``home``."""
    out = {}
    for pid, cmd in children_of_home(home).items():
        args = cmd.split()
        if "http" in args and "--worker" in args:
            index = args[args.index("--worker") + 1]
            out["http" if index == "1" else f"http-{index}"] = pid
    return out


def test_two_workers_share_the_port_and_one_dying_stops_the_suite(tmp_path: Path) -> None:
    metrics_port = _port_pair()
    home, _, _ = make_home(tmp_path, metrics={"host": "127.0.0.1", "http": metrics_port,
                                                      **{k: free_port() for k in ("fileApi", "watcher", "kb", "dreaming")}})
    config = (home / "config.json").read_text().replace('"workers": 1', '"workers": 2')
    (home / "config.json").write_text(config)
    with Up(home, "--log-format", "json") as up:
        url = up.ready_url()
        workers = _workers(home)
        assert sorted(workers) == ["http", "http-2"]

        answered: dict[str, int] = {}
        for n in range(CONNECTIONS):  # one connection each: httpx.get opens and closes its own
            reply = httpx.put(f"{url}/api/v1/agents/alfred/files/SOUL.md", json={"content": f"soul {n}"},
                              headers={"X-Api-Key": ADMIN_KEY}, timeout=10)
            assert reply.status_code == 200
            worker = httpx.get(f"{url}/healthz", timeout=10).json()["worker"]
            answered[worker] = answered.get(worker, 0) + 1
        assert sorted(answered) == ["http", "http-2"], answered

        for n, name in enumerate(("http", "http-2")):
            metrics = httpx.get(f"http://127.0.0.1:{metrics_port + n}/metrics", timeout=10)
            assert metrics.status_code == 200 and "http_requests" in metrics.text
        logged = [json.loads(line) for line in up.lines if line.startswith("{")]
        assert {e["service"] for e in logged if e.get("event") == "listening"} >= {"http", "http-2"}
        health = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "health", "http", "--home", str(home)],
                                capture_output=True, text=True, timeout=30)
        assert health.returncode == 0 and " (answered by worker http" in health.stdout, health

        os.kill(workers["http-2"], signal.SIGKILL)
        assert up.wait() == 1
        up.__exit__()
        assert any("http-2 exited unexpectedly" in line for line in up.errors), up.errors
    wait_until(lambda: not children_of_home(home), 20, "every child to exit")
