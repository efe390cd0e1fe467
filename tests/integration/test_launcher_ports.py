"""The launcher and busy ports: no false "ready", one clear line, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from suite_support import Suite, free_port, make_home, wait_until
from test_launcher import Up, children_of_home

from gateway.grpc_server import instance_service
from gateway.ports import listen_problem
from gateway_cli.health_cli import grpc_serving, http_healthy

pytestmark = pytest.mark.integration


@contextmanager
def squatter(port: int) -> Iterator[socket.socket]:
    """Another program listening on 127.0.0.1:port."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


def test_up_names_the_taken_port_and_its_holder_and_starts_nothing(tmp_path: Path) -> None:
    home, ports, _ = make_home(tmp_path)
    with squatter(ports["kb"]):
        result = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(home)],
                                capture_output=True, text=True, timeout=60)
        assert children_of_home(home) == {}
    assert result.returncode == 1
    assert "ready" not in result.stdout
    lines = [l for l in result.stderr.strip().splitlines() if "cannot start" in l or "Traceback" in l]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gateway: cannot start: kb: 127.0.0.1:{ports['kb']} is already in use")
    assert "pid " in lines[0] and "Traceback" not in result.stderr


def test_a_second_suite_on_the_same_ports_is_refused_not_reported_ready(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    home, ports, http_port = make_home(tmp_path / "a")
    other = tmp_path / "b"
    other.mkdir()
    (other / "config.json").write_text((home / "config.json").read_text())
    with Up(home) as first:
        first.ready_url()
        result = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(other)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert "ready" not in result.stdout
        assert "Traceback" not in result.stderr
        assert f"cannot start: file_api: 127.0.0.1:{ports['fileApi']} is already in use" in result.stderr
        assert f"serve file_api --home {home}" in result.stderr, result.stderr  # the holder: the first suite's own child
        assert children_of_home(other) == {}


def test_a_child_that_cannot_bind_says_so_in_one_line(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path)
    for name, port in (("file_api", ports["fileApi"]), ("http", http_port)):
        with squatter(port):
            result = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(home)],
                                    capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, (name, result.stderr)
        assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
        assert result.stderr.startswith(f"gateway: {name}: 127.0.0.1:{port} is already in use"), result.stderr


def test_health_checks_only_accept_this_starts_own_children(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path)
    suite = Suite(home, http_port, ports)
    nonce = "0123456789abcdef"
    try:
        for name in ("file_api", "watcher", "kb", "dreaming", "http"):
            cmd = [sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(home), "--instance", nonce]
            log = open(suite.log_path(name), "ab")  # noqa: SIM115 - owned by the child
            suite.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            log.close()
        address = f"127.0.0.1:{ports['fileApi']}"
        wait_until(lambda: grpc_serving(address, instance_service(nonce)), 30, "file_api to report its nonce")
        assert grpc_serving(address)  # the plain check, as compose and other probes use it
        assert not grpc_serving(address, instance_service("another-start"))
        url = f"http://127.0.0.1:{http_port}/healthz"
        wait_until(lambda: http_healthy(url, nonce), 30, "the shim to report its nonce")
        assert not http_healthy(url, "another-start")
    finally:
        suite.stop_all()


def test_listen_problem_sees_a_listener_and_its_release() -> None:
    port = free_port()
    with squatter(port):
        assert listen_problem("127.0.0.1", port) is not None
    assert listen_problem("127.0.0.1", port) is None
