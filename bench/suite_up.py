"""The whole suite under ``gateway up``, for the long-run benches (bench/soak.py, bench/capacity.py).

A fleet home (N agents with identity files and a few notes, written through the project's own
config writer), the ``gateway up`` process with its five children found by pid, and what /proc
and the disk say about them. Nothing here decides a verdict (``harness.stats`` does).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import REPO
from harness.ports import free_ports
from harness.procs import cpu_seconds
from harness.report import say
from kb_corpus import NoteWriter, Vocabulary, build_vocabulary
from watcher_support import SOUL, memory_text

KEY = "bench-fleet-key-0123456789"  # write access to every agent (stored as its SHA-256)
PROCESSES = ("launcher", "file_api", "watcher", "kb", "dreaming", "http")  # the launcher, then gateway up's start order
MCP_SUFFIX = "-mcp"  # a shim's MCP child is named after its shim: http-mcp (suite_up.mcp_children)
MCP_CHILD_MODULE = b"gateway_mcp.child"
NOTE_CHARS = 1200
STOP_TIMEOUT_S = 40.0
MIB = 1024 * 1024
USER_TEXT = "# User\n\nPrefers short answers, metric units and a summary first.\n"


def agent_ids(count: int) -> list[str]:
    """``a0000``, ``a0001``, ...: sorted as they are numbered."""
    return [f"a{i:04d}" for i in range(count)]


@dataclass
class FleetHome:
    home: Path
    agents: list[str]
    workspaces: dict[str, Path]
    transcripts: dict[str, Path]
    http_port: int
    grpc_ports: dict[str, int]
    vocab: Vocabulary
    notes: dict[str, list[str]] = field(default_factory=dict)  # agent -> memory/ paths it holds (relative)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def grpc_address(self, service: str) -> str:
        return f"127.0.0.1:{self.grpc_ports[service]}"


def fleet_config(agents: list[str], *, reviewer: list[str] | None = None) -> tuple[dict[str, Any], int, dict[str, int]]:
    """config.json's content for a fleet on free ports: one write key (``KEY``) for every agent,
    metrics on free ports, and the nightly dream slot 12 hours away (no scheduled run, nor a
    catch-up, during a bench; manual runs are always allowed)."""
    from gateway.config_migrations import CURRENT_VERSION

    ports = free_ports(10)
    grpc = dict(zip(("fileApi", "watcher", "kb", "dreaming"), ports[:4], strict=True))
    metrics = dict(zip(("fileApi", "watcher", "kb", "dreaming", "http"), ports[5:], strict=True))
    dreaming: dict[str, Any] = {"dreamHour": (time.gmtime().tm_hour + 12) % 24, "dreamTimezone": "UTC"}
    if reviewer is not None:
        dreaming["reviewerCommand"] = reviewer
    raw: dict[str, Any] = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", **grpc},
            "metrics": {"enabled": True, "host": "127.0.0.1", **metrics},
            "api": {"host": "127.0.0.1", "port": ports[4], "keys": [
                {"name": "bench", "keySha256": hashlib.sha256(KEY.encode()).hexdigest(), "agents": "*", "write": True},
            ]},
            "memory": {"writeRouting": True},
            "dreaming": dreaming,
        },
        "agents": [{"id": a, "workspace": f"agents/{a}/workspace", "transcriptsDir": f"agents/{a}/sessions"} for a in agents],
    }
    by_service = {"file_api": grpc["fileApi"], "watcher": grpc["watcher"], "kb": grpc["kb"], "dreaming": grpc["dreaming"]}
    return raw, ports[4], by_service


def write_fleet_home(home: Path, count: int, *, seed: int, notes_per_agent: int = 2,
                     reviewer: list[str] | None = None) -> FleetHome:
    """A home with ``count`` agents: config.json validated and written by ``gateway_cli.config_edit``
    (as ``gateway agents add`` writes it, in one write), the internal token, and per agent SOUL.md,
    USER.md, a 1 KB MEMORY.md and ``notes_per_agent`` notes of about 1.2 KB under memory/."""
    from gateway.home import ensure_home
    from gateway_cli.config_edit import built, write_config

    home.mkdir(parents=True, exist_ok=True)
    ids = agent_ids(count)
    raw, http_port, grpc_ports = fleet_config(ids, reviewer=reviewer)
    config = built(raw, home)  # refuse here, naming the key, rather than in a child
    write_config(home / "config.json", raw, expected=None)
    if ensure_home(home) is not None:  # pragma: no cover - config.json was written first
        raise RuntimeError("ensure_home wrote its own config.json")
    vocab = build_vocabulary(seed)
    writer = NoteWriter(random.Random(seed), vocab)
    fleet = FleetHome(home, ids, {}, {}, http_port, grpc_ports, vocab)
    for agent in config.agents:
        ws = agent.workspace
        (ws / "memory").mkdir(parents=True, exist_ok=True)
        agent.transcripts_dir.mkdir(parents=True, exist_ok=True)
        (ws / "SOUL.md").write_text(SOUL.format(agent=agent.id), encoding="utf-8")
        (ws / "USER.md").write_text(USER_TEXT, encoding="utf-8")
        (ws / "MEMORY.md").write_text(memory_text(agent.id), encoding="utf-8")
        paths = []
        for n in range(notes_per_agent):
            rel = f"memory/notes-{n}.md"
            (ws / rel).write_text(writer.note(f"{agent.id} notes {n}", NOTE_CHARS, False, False), encoding="utf-8")
            paths.append(rel)
        fleet.workspaces[agent.id] = ws
        fleet.transcripts[agent.id] = agent.transcripts_dir
        fleet.notes[agent.id] = paths
    return fleet


# --------------------------------------------------------------------------- gateway up


def _limit_open_files(soft: int | None) -> None:
    """In the child before exec: the soft open-files limit ``gateway up`` and its children start with."""
    if soft is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))


class GatewayUp:
    """``gateway up --log-format json`` on a home, its output (every child's log lines) in ``log``."""

    def __init__(self, home: Path, log: Path, nofile: int | None) -> None:
        self.home = home
        self.log = log
        self.nofile = nofile
        self.proc: subprocess.Popen[bytes] | None = None
        self.spawned = 0.0
        self._pids: dict[str, int] = {}

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(self.home), "--log-format", "json"]
        with open(self.log, "ab") as out:
            self.spawned = time.perf_counter()
            # A session of its own: a terminal's Ctrl-C reaches only the bench, which stops it.
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=lambda: _limit_open_files(self.nofile))  # fmt: skip

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise RuntimeError(f"gateway up exited with code {code}; its output ends:\n{self.tail()}")

    def tail(self, lines: int = 25) -> str:
        try:
            with open(self.log, "rb") as handle:
                handle.seek(max(0, self.log.stat().st_size - 200_000))
                return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def exit_line(self) -> str:
        """Why ``gateway up`` stopped, in its own words (its last ``gateway:`` line about a child), or its exit code."""
        said = [line for line in self.tail(400).splitlines() if line.startswith("gateway: ") and "stopped" != line[9:]]
        code = None if self.proc is None else self.proc.poll()
        return (said[0] if said else "gateway up exited") + f"; exit code {code}"

    def wait_ready(self, timeout: float) -> float:
        """Seconds from the spawn to the ``ready URL`` line. Raises when it exits or after ``timeout``."""
        offset = 0
        pending = b""
        while True:
            with open(self.log, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if any(line.startswith(b"ready http") for line in lines):
                return time.perf_counter() - self.spawned
            self.check_alive()
            if time.perf_counter() - self.spawned > timeout:
                raise RuntimeError(f"no ready line after {timeout:.0f}s; output ends:\n{self.tail()}")
            time.sleep(0.05)

    def pids(self) -> dict[str, int]:
        """The launcher's pid and each child's (``file_api`` ... ``http``, and ``http-2``… when
        ``gateway.api.workers`` runs several shims), found by parent pid and command line; and each
        shim's MCP child while it runs (``http-mcp``, ``http-2-mcp``…: ``mcp_children``), which is
        the shim's child, not the launcher's, and comes and goes with MCP use."""
        suite = self._suite_pids()
        return {**suite, **mcp_children(suite)}

    def _suite_pids(self) -> dict[str, int]:
        from gateway import http_workers

        if self.proc is None:
            return {}
        if len(self._pids) >= len(PROCESSES):
            return self._pids
        found = {"launcher": self.proc.pid}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.proc.pid and b"serve" in args:
                name = args[args.index(b"serve") + 1].decode()
                if b"--worker" in args:
                    name = http_workers.name(int(args[args.index(b"--worker") + 1]))
                found[name] = int(entry.name)
        self._pids = found
        return found

    def stop(self) -> float:
        """SIGTERM the launcher (it stops its children in order); seconds until it exited."""
        if self.proc is None:
            return 0.0
        start = time.perf_counter()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                say(f"gateway up did not stop within {STOP_TIMEOUT_S:.0f}s; killing its process group")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for pid in self._pids.values():  # children die with the launcher; wait until they have
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while Path(f"/proc/{pid}").exists() and _state(pid) not in ("Z", "") and time.monotonic() < deadline:
                time.sleep(0.05)
        return time.perf_counter() - start


def mcp_children(pids: dict[str, int]) -> dict[str, int]:
    """``NAME-mcp`` → pid of the MCP child (``python -m gateway_mcp.child``) each shim in ``pids``
    (``http``, ``http-2``…) runs now: it starts at an MCP request and stops after
    ``gateway.api.mcpIdleSeconds`` without one."""
    shims = {pid: name for name, pid in pids.items() if name.startswith("http")}
    found: dict[str, int] = {}
    if not shims:
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            if ppid in shims and MCP_CHILD_MODULE in (entry / "cmdline").read_bytes():
                found[f"{shims[ppid]}{MCP_SUFFIX}"] = int(entry.name)
        except (OSError, IndexError, ValueError):
            continue
    return found


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


# --------------------------------------------------------------------------- /proc and the disk


@dataclass(frozen=True)
class ProcFigures:
    rss_mb: float
    anon_mb: float
    fds: int
    threads: int
    cpu_s: float


def proc_figures(pid: int) -> ProcFigures | None:
    """RSS (VmRSS), anonymous RSS (RssAnon), open files (/proc/PID/fd), threads and CPU seconds; None when gone."""
    try:
        status: dict[str, str] = {}
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                status[key] = value.strip()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        cpu = cpu_seconds(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
    kb = lambda key: int(status.get(key, "0 kB").split()[0])  # noqa: E731
    return ProcFigures(kb("VmRSS") / 1024, kb("RssAnon") / 1024, fds, int(status.get("Threads", "0")), cpu)


def open_files_limit(pid: int) -> tuple[int, int] | None:
    """(soft, hard) open-files limit of ``pid``, from /proc/PID/limits; None when it cannot be read
    (the process is gone) or is "unlimited"."""
    try:
        text = Path(f"/proc/{pid}/limits").read_text()
        line = next(line for line in text.splitlines() if line.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        return int(soft), int(hard)
    except (OSError, StopIteration, ValueError):
        return None


@dataclass
class DiskFigures:
    used_bytes: int  # blocks allocated, as du counts them
    files: int
    databases: dict[str, int]  # path relative to the home -> bytes, every *.sqlite
    wals: dict[str, int]  # the database's path -> bytes of its -wal (0: none)
    dreaming: dict[str, int]  # audit.jsonl / journal.jsonl / DREAMS.md -> bytes over every agent


DREAMING_FILES = ("audit.jsonl", "journal.jsonl", "DREAMS.md")


def disk_figures(home: Path) -> DiskFigures:
    """Walk the home once: its size, every SQLite database and its WAL, the dreaming audit files."""
    used = files = 0
    dbs: dict[str, int] = {}
    wals: dict[str, int] = {}
    dreaming = dict.fromkeys(DREAMING_FILES, 0)
    for root, _, names in os.walk(home):
        for name in names:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # a temp file renamed away meanwhile
            used += st.st_blocks * 512
            files += 1
            rel = os.path.relpath(path, home)
            if name.endswith((".sqlite", ".sqlite3", ".db")):
                dbs[rel] = st.st_size
            elif name.endswith("-wal"):
                wals[rel[:-4]] = st.st_size
            elif name in dreaming and os.path.basename(root) == ".dreaming":
                dreaming[name] += st.st_size
    return DiskFigures(used, files, dbs, {db: wals.get(db, 0) for db in dbs}, dreaming)
