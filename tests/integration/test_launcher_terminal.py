"""``gateway up`` as a person sees it in a terminal (a real pseudo-terminal), and as programs see it through a pipe."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, make_home, wait_until
from test_launcher import Up, children_of_home

from gateway_cli.launcher import SERVICES

pytestmark = pytest.mark.integration

FILES_ROUTE = "/api/v1/agents/{agent_id}/files/{filename}"  # the route template of the http lines
COLOUR = re.compile(rb"\x1b\[[0-9;]*m")
# structlog's ConsoleRenderer: local time, [level], the event, [service], key=value
HUMAN = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[(\w+)\s*\] (\S+)\s+\[(\w+)\](.*)$")
# Made the controlling terminal of the new session, as a shell does for what it runs: Ctrl-C typed
# into the terminal then reaches the launcher (and not its children, which have sessions of their own).
BOOT = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"


class Terminal:
    """``gateway up`` on a pseudo-terminal; everything it and its children write there is collected."""

    def __init__(self, home: Path, *extra: str, colours: bool = False) -> None:
        self.home = home
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        if not colours:
            env["NO_COLOR"] = "1"
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-m", "gateway_cli.cli", "up", "--home", str(home), *extra],
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True, env=env,
        )
        os.close(slave)
        self.master = master
        self.raw = bytearray()
        self._lock = threading.Lock()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                return
            if not data:
                return
            with self._lock:
                self.raw.extend(data)

    def text(self) -> str:
        """What the terminal shows, without colours."""
        with self._lock:
            raw = bytes(self.raw)
        return COLOUR.sub(b"", raw).decode("utf-8", "replace").replace("\r\n", "\n")

    def lines(self) -> list[str]:
        return self.text().splitlines()

    def wait_for(self, predicate: Any, what: str, timeout: float = 40) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and not self._pump.is_alive():
                raise AssertionError(f"gateway up exited ({self.proc.returncode}) before {what}:\n{self.text()[-3000:]}")
            return bool(predicate(self.lines()))

        wait_until(seen, timeout, f"{what}; the terminal so far:\n{self.text()[-3000:]}")

    def ready_url(self) -> str:
        self.wait_for(lambda lines: any(line.startswith("ready ") for line in lines), "the ready line")
        return next(line for line in self.lines() if line.startswith("ready ")).split(" ", 1)[1]

    def ctrl_c(self) -> int:
        """Type Ctrl-C; the exit code, once every process has left the terminal."""
        os.write(self.master, b"\x03")
        code = self.proc.wait(timeout=60)
        self._pump.join(timeout=30)
        return code

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        wait_until(lambda: not children_of_home(self.home), 20, "the children to exit")
        self._pump.join(timeout=10)
        os.close(self.master)


def rest_calls(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        assert http.put("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": ADMIN_KEY}, json={"content": "hi"}).status_code == 200
        assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": READER_KEY}).status_code == 200
        assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": "wrong"}).status_code == 401


def human(lines: list[str]) -> list[tuple[str, str, str, str]]:
    """(level, event, service, the rest) of each log line rendered for a person."""
    return [m.groups() for m in map(HUMAN.match, lines) if m]  # type: ignore[misc]


def per_request(lines: list[str]) -> list[tuple[str, str, str, str]]:
    return [line for line in human(lines) if line[1] in ("rpc", "http")]


def test_on_a_terminal_up_writes_for_a_person(tmp_path: Path) -> None:
    home, _, http_port = make_home(tmp_path)
    (home / "admin-key.txt").write_text("# header\ngw_x\n")  # not confirmed yet: the banner says where it is
    with Terminal(home, colours=True) as term:
        url = term.ready_url()
        assert url == f"http://127.0.0.1:{http_port}"
        rest_calls(url)
        assert term.ctrl_c() == 0
    assert children_of_home(home) == {}
    assert COLOUR.search(term.raw), "a terminal gets colours"
    lines = [line for line in term.lines() if line.strip()]
    assert not [line for line in lines if line.lstrip("^C").startswith("{")], "no JSON line on a terminal"
    logged = human(lines)
    assert sorted(service for _, event, service, _ in logged if event == "listening") == sorted(SERVICES)

    # One banner, after every process is ready: the contract line first, the home, where the key is, how to stop.
    [at] = [i for i, line in enumerate(lines) if line.startswith("ready ")]
    assert lines[at + 1].split() == ["home", str(home)]
    assert lines[at + 2].split()[:2] == ["admin", "key"] and str(home / "admin-key.txt") in lines[at + 2]
    assert f"gateway keys confirm --home {home}" in lines[at + 2]
    assert lines[at + 3].split()[:2] == ["stop", "Ctrl-C"]
    assert [line for line in lines if "admin-key.txt" in line] == [lines[at + 2]], "the admin key's place is said once"
    assert not [line for line in logged if line[1] == "admin_key_unconfirmed"]

    assert per_request(lines) == [], "no per-request line without --verbose"

    # Ctrl-C: the launcher says it stops, each process says it stopped, once, and the last line says it is over.
    [stopping] = [i for i, line in enumerate(lines) if line.endswith("gateway: stopping")]
    after = human(lines[stopping:])
    # (a line a process was already writing, such as a late recomposition of the calls above, may come too)
    assert sorted(service for _, event, service, _ in after if event == "stopped") == sorted(SERVICES), after
    assert not [line for line in after if line[1] in ("stopping", "background_did_not_stop")], after
    assert lines[-1] == "gateway: stopped"


def test_on_a_terminal_verbose_shows_the_per_request_lines(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    with Terminal(home, "--verbose") as term:
        url = term.ready_url()
        rest_calls(url)
        term.wait_for(lambda lines: len([l for l in per_request(lines) if l[1] == "http"]) >= 3, "the http lines")
        term.wait_for(lambda lines: any(l[1] == "rpc" and l[2] == "file_api" for l in per_request(lines)), "the file API's rpc lines")
        assert term.ctrl_c() == 0
    assert not COLOUR.search(term.raw), "NO_COLOR: no colours"
    lines = term.lines()
    http_lines = [rest for _, event, service, rest in human(lines) if event == "http" and service == "http"]
    assert any("status=401" in rest and f"route={FILES_ROUTE}" in rest for rest in http_lines)
    assert not [line for line in lines if line.startswith("{")]
    stops = [(event, service) for _, event, service, _ in human(lines) if event in ("stopping", "stopped")]
    assert sorted(stops) == sorted([(e, s) for s in SERVICES for e in ("stopping", "stopped")])
    assert lines[-1] == "gateway: stopped"


def test_on_a_terminal_log_format_json_writes_json_lines(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    with Terminal(home, "--log-format", "json") as term:
        url = term.ready_url()
        rest_calls(url)
        term.wait_for(lambda lines: sum('"event":"http"' in l for l in lines) >= 3, "the http lines")
        assert term.ctrl_c() == 0
    lines = [line for line in term.lines() if line.strip()]
    assert human(lines) == []
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert sorted(e["service"] for e in events if e["event"] == "listening") == sorted(SERVICES)
    assert sorted(e["service"] for e in events if e["event"] == "stopped") == sorted(SERVICES)
    plain = [line for line in lines if not line.startswith("{")]
    assert [line for line in plain if line.startswith("ready ")] == [f"ready {url}"]
    assert not [line for line in plain if line.startswith("  ")], "the banner is for the console"


def test_through_a_pipe_up_writes_json_lines_as_before(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    (home / "admin-key.txt").write_text("# header\ngw_x\n")
    with Up(home) as up:
        url = up.ready_url()
        rest_calls(url)
        wait_until(lambda: sum('"event":"http"' in l for l in up.lines) >= 3, 20, "the http lines")
        up.proc.send_signal(signal.SIGINT)
        assert up.wait() == 0
    events = [json.loads(line) for line in up.lines if line != f"ready {url}"]  # every other line is JSON
    assert sorted(e["service"] for e in events if e["event"] == "listening") == sorted(SERVICES)
    assert sorted(e["service"] for e in events if e["event"] == "admin_key_unconfirmed") == sorted(SERVICES)
    http = [e for e in events if e["event"] == "http"]
    assert {(e["route"], e["status"]) for e in http} >= {(FILES_ROUTE, 401)}
    assert {"method", "route", "status", "ms", "timestamp", "level", "service"} <= set(http[0])
    assert any(e["event"] == "rpc" and e["service"] == "file_api" and e["key"] == "admin" for e in events)
    for service in SERVICES:
        assert [e["event"] for e in events if e["service"] == service and e["event"].startswith("stop")] == ["stopping", "stopped"]
    assert up.errors[-2:] == ["gateway: stopping", "gateway: stopped"]


def test_the_shim_logs_its_stop_as_the_grpc_services_do(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path)
    suite = Suite(home, http_port, ports)
    try:
        suite.start("file_api", "http")
        rest_calls(suite.base_url)
        codes = {name: suite.stop(name) for name in ("http", "file_api")}
    finally:
        suite.stop_all()
    assert codes == {"http": 0, "file_api": 0}, "a stop on SIGTERM is a normal exit"
    for name in ("http", "file_api"):
        events = suite.log_lines(name)
        assert [e["event"] for e in events[-2:]] == ["stopping", "stopped"], (name, events[-3:])
        assert isinstance(events[-2]["grace_s"], (int, float))
    # a stop writes every per-request line still queued (gateway.logs)
    assert len([e for e in suite.log_lines("http") if e["event"] == "http" and e["route"] == FILES_ROUTE]) == 3


def test_serve_takes_the_same_log_flags(tmp_path: Path) -> None:
    home, ports, _ = make_home(tmp_path)
    os.chmod(home / "config.json", 0o600)  # else its first line says it made it so
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway_cli.cli", "serve", "file_api", "--home", str(home), "--log-format", "console"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    with proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGTERM)
            rest = proc.communicate(timeout=15)[0]
    assert proc.returncode == 0
    assert not COLOUR.search(first + rest), "no colours into a pipe, even when asked for the console"
    lines = (first + rest).decode().splitlines()
    assert [(level, event, service) for level, event, service, _ in human(lines)] == [
        ("info", "listening", "file_api"), ("info", "stopped", "file_api")
    ]
    assert f"address=127.0.0.1:{ports['fileApi']}" in lines[0]
