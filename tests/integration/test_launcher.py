"""``gateway up`` and ``gateway serve`` as a user runs them."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from suite_support import ADMIN_KEY, free_port, grpc_serving, make_home, wait_until

from gateway_cli.launcher import GRPC_SERVICES, SERVICES

pytestmark = pytest.mark.integration


def children_of_home(home: Path) -> dict[int, str]:
    """pid → command line of every live ``gateway serve`` process using ``home``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmdline if a]
        if "serve" in args and str(home) in args and state != "Z":
            out[int(entry.name)] = " ".join(args)
    return out


class Up:
    """A ``gateway up`` subprocess whose stdout lines are collected as they come."""

    def __init__(self, home: Path, *extra: str) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(home), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.errors), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def __enter__(self) -> Up:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        # children die with the launcher (parent-death signal); wait for them
        # so their inherited pipes close
        wait_until(lambda: not children_of_home(self.home), 20, "the children to exit")
        for pump in self._pumps:
            pump.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    @staticmethod
    def _pump(stream, sink: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            sink.append(line.rstrip("\n"))

    def ready_url(self) -> str:
        wait_until(lambda: any(l.startswith("ready ") for l in self.lines) or self.proc.poll() is not None, 40, "the ready line")
        ready = [l for l in self.lines if l.startswith("ready ")]
        assert ready, f"no ready line; stderr: {self.errors[-20:]}"
        return ready[0].split(" ", 1)[1]

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout=timeout)


def unix_connections(path: Path) -> int:
    """Connections accepted on the Unix socket ``path`` (/proc/net/unix: St 03 is connected)."""
    rows = [line.split() for line in Path("/proc/net/unix").read_text().splitlines()[1:]]
    return sum(1 for row in rows if len(row) == 8 and row[7] == str(path) and row[5] == "03")


def tcp_connections(port: int) -> int:
    """Established TCP connections to the local ``port`` (/proc/net/tcp and tcp6, where gRPC's are: st 01)."""
    rows = [line.split() for table in ("tcp", "tcp6") for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]]
    return sum(1 for row in rows if int(row[1].rpartition(":")[2], 16) == port and row[3] == "01")


def test_up_prints_ready_serves_on_unix_sockets_and_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path)
    with Up(home) as up:
        assert up.ready_url() == f"http://127.0.0.1:{http_port}"
        assert sorted(cmd.split(' serve ')[1].split()[0] for cmd in children_of_home(home).values()) == sorted(SERVICES)
        with httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=10) as http:
            assert http.put("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": ADMIN_KEY}, json={"content": "hi"}).status_code == 200
            assert http.get("/healthz").json()["status"] == "ok"
        sockets = {p.name: p.stat().st_mode & 0o777 for p in (home / "run").iterdir()}
        assert sockets == {f"{name}.sock": 0o600 for name in GRPC_SERVICES}
        assert (home / "run").stat().st_mode & 0o777 == 0o700
        assert unix_connections(home / "run" / "file_api.sock") >= 1  # the shim's
        assert tcp_connections(ports["fileApi"]) == 0  # still listened on, for other hosts' tools
        assert grpc_serving(f"127.0.0.1:{ports['fileApi']}")
        up.proc.send_signal(signal.SIGINT)
        assert up.wait() == 0
    assert children_of_home(home) == {}
    assert list((home / "run").iterdir()) == []  # a clean stop leaves no socket
    assert not any("admin key" in l for l in up.lines)  # config existed: no key generated


def test_up_on_tcp_only_serves_and_sigterm_also_stops_everything(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path)
    raw = json.loads((home / "config.json").read_text())
    raw["gateway"]["grpc"]["transport"] = "tcp"
    (home / "config.json").write_text(json.dumps(raw))
    with Up(home) as up:
        up.ready_url()
        with httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=10) as http:
            assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": ADMIN_KEY}).status_code == 200
        assert not (home / "run").exists()
        assert tcp_connections(ports["fileApi"]) >= 1  # the shim's
        up.proc.send_signal(signal.SIGTERM)
        assert up.wait() == 0
    assert children_of_home(home) == {}


def test_children_die_with_a_killed_launcher(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    with Up(home) as up:
        up.ready_url()
        up.proc.kill()  # SIGKILL: no chance to stop its children itself
        up.proc.wait(timeout=10)
        wait_until(lambda: not children_of_home(home), 20, "orphaned children to exit")


def test_a_dying_child_brings_the_suite_down(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    with Up(home) as up:
        up.ready_url()
        victims = [pid for pid, cmd in children_of_home(home).items() if "file_api" in cmd]
        assert len(victims) == 1
        os.kill(victims[0], signal.SIGKILL)
        assert up.wait() == 1
        up.__exit__()
        assert any("file_api exited unexpectedly" in l for l in up.errors), up.errors
    assert children_of_home(home) == {}


def test_up_refuses_an_invalid_config_with_one_line_per_problem(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"gateway": {"memory": {"memoryBudgetChars": -5, "bogus": 1}}, "agents": [{"id": "../x"}]}))
    result = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(home)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    problems = [l.strip() for l in result.stderr.splitlines() if l.startswith("  ")]
    assert any(p.startswith("gateway.memory.memoryBudgetChars:") for p in problems)
    assert any(p.startswith("gateway.memory: unknown key") and "bogus" in p for p in problems)
    assert any(p.startswith("agents[0].id:") for p in problems)
    assert children_of_home(home) == {}


def test_serve_makes_a_group_readable_config_0600_and_logs_it_once(tmp_path: Path) -> None:
    home, ports, _ = make_home(tmp_path)
    config = home / "config.json"
    os.chmod(config, 0o644)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway_cli.cli", "serve", "file_api", "--home", str(home)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    with proc:
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            wait_until(lambda: grpc_serving(f"127.0.0.1:{ports['fileApi']}"), 30, "file_api to be SERVING")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    assert first["event"] == "config_mode" and "0644" in first["detail"] and "now 0600" in first["detail"]
    assert config.stat().st_mode & 0o777 == 0o600


def test_up_says_when_it_tightens_the_config_mode(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    os.chmod(home / "config.json", 0o640)
    with Up(home) as up:
        up.ready_url()
        up.proc.send_signal(signal.SIGTERM)
        assert up.wait() == 0
    assert (home / "config.json").stat().st_mode & 0o777 == 0o600
    assert [l for l in up.errors if "0640" in l] == [f"gateway: {home / 'config.json'} was mode 0640 (readable by group or others, and it can hold keys); it is now 0600"]


def admin_key_line(home: Path) -> str:
    return (f"gateway: the admin key is in {home / 'admin-key.txt'} (mode 0600) until you confirm you saved it: "
            f"gateway keys confirm --home {home}")


def test_a_first_start_that_fails_keeps_the_admin_key_until_confirmed(tmp_path: Path) -> None:
    home = tmp_path / "new"
    with socket.socket() as taken:  # the REST shim's port is taken: the shim dies during start-up
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = str(taken.getsockname()[1])
        with Up(home, "--http-port", port) as first:
            assert first.wait(60) == 1
        assert any("cannot start: http:" in l and "already in use" in l for l in first.errors), first.errors
        assert not any(l.startswith("ready ") for l in first.lines)

        key_file = home / "admin-key.txt"
        assert key_file.stat().st_mode & 0o777 == 0o600
        header, key = key_file.read_text().splitlines()
        assert header.startswith("# claude-gateway admin key") and f"gateway keys confirm --home {home}" in header
        [entry] = json.loads((home / "config.json").read_text())["gateway"]["api"]["keys"]
        assert entry["keySha256"] == hashlib.sha256(key.encode()).hexdigest()
        assert key not in (home / "config.json").read_text()
        assert admin_key_line(home) in first.errors

        with Up(home, "--http-port", port) as second:  # still failing: it says where the key is
            assert second.wait(60) == 1
        assert admin_key_line(home) in second.errors
        assert key_file.read_text().splitlines() == [header, key]  # the same key: no new one was made

        confirm = [sys.executable, "-m", "gateway_cli.cli", "keys", "confirm", "--home", str(home)]
        done = subprocess.run(confirm, capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, f"deleted {key_file}; the admin key is now only where you saved it (config.json keeps its SHA-256)\n")
        assert not key_file.exists()
        again = subprocess.run(confirm, capture_output=True, text=True, timeout=60)
        assert (again.returncode, again.stdout) == (0, f"no {key_file}: nothing to confirm\n")

        with Up(home, "--http-port", port) as third:
            assert third.wait(60) == 1
        assert not any("admin-key.txt" in l for l in third.errors)


def test_every_start_says_where_the_unconfirmed_admin_key_is(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    (home / "admin-key.txt").write_text("# header\ngw_x\n")
    with Up(home) as up:
        up.ready_url()
        wait_until(lambda: admin_key_line(home) in up.errors, 10, "the admin-key.txt line")
        up.proc.send_signal(signal.SIGTERM)
        assert up.wait() == 0


def test_serve_logs_where_the_unconfirmed_admin_key_is(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    init = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "init", "--home", str(home)],
                          capture_output=True, text=True, timeout=60)
    assert init.returncode == 0, init.stderr
    config = json.loads((home / "config.json").read_text())
    config["gateway"]["metrics"] = {"fileApi": free_port()}  # not the default port: other runs may hold it
    (home / "config.json").write_text(json.dumps(config))

    def first_events() -> list[dict[str, object]]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway_cli.cli", "serve", "file_api", "--home", str(home), "--port", str(free_port())],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        with proc:
            try:
                assert proc.stdout is not None
                events = []
                while not events or events[-1]["event"] != "listening":
                    events.append(json.loads(proc.stdout.readline()))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=15)
        return events

    first = first_events()  # serve never writes the key, nor logs it: it says where it is
    assert [e["event"] for e in first] == ["admin_key_unconfirmed", "listening"]
    assert first[0]["detail"] == admin_key_line(home).removeprefix("gateway: ")
    assert (home / "admin-key.txt").read_text().splitlines()[1] == init.stdout.splitlines()[1]
    second = first_events()
    assert [e["event"] for e in second] == ["admin_key_unconfirmed", "listening"]
