"""The watcher bench's machinery: the home, the child processes, the inotify floor and the write cases.

Kept apart from bench/watcher_latency.py (the entry script, whose docstring says the method) so each
file stays short; nothing here decides a verdict.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.home import write_config
from harness.procs import Children, wait_until

START_TIMEOUT_S = 30.0
COMPOSE_TIMEOUT_S = 60.0
SEEN_TIMEOUT_S = 5.0
POLL_S = 0.0002
BURST_WRITES = 10
BURST_QUIET_S = 0.3
TIGHT_BURST_S = 0.005  # a burst judged for coalescing lands within this (about two compose passes)
FLEET_WRITES = 100
GOAL_P50_MS = 10.0
GOAL_P99_MS = 50.0
GOAL_BURST_PASSES = 3
GOAL_IDLE_CPU_PCT = 2.0
GOAL_RSS_MB = 150.0



SOUL = "# Soul\n\n{agent} is warm, helpful and precise. It answers briefly and checks its work.\n"


def memory_text(agent: str, marker: str = "") -> str:
    """A small MEMORY.md (about 1 KB), with ``marker`` as its last line when given."""
    lines = ["# MEMORY", "", "## Facts", ""]
    lines += [f"- fact {i:02d} about {agent}: prefers short answers, dark mode and tests before merges." for i in range(12)]
    if marker:
        lines += ["", f"- latest: {marker}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- home and children


def write_home(home: Path, agent_ids: list[str]) -> list[Path]:
    """config.json with ``agent_ids`` on free ports, internal token, workspaces with SOUL.md and MEMORY.md."""
    from gateway.config import load_config

    write_config(home, [{"id": a} for a in agent_ids], keys=[])
    loaded = load_config(home)  # fail here, with the reason, rather than in the child
    workspaces = []
    for agent in loaded.agents:
        agent.workspace.mkdir(parents=True, exist_ok=True)
        agent.transcripts_dir.mkdir(parents=True, exist_ok=True)
        (agent.workspace / "SOUL.md").write_text(SOUL.format(agent=agent.id), encoding="utf-8")
        (agent.workspace / "MEMORY.md").write_text(memory_text(agent.id), encoding="utf-8")
        workspaces.append(agent.workspace)
    return workspaces


def watcher_address(home: Path) -> str:
    config = json.loads((home / "config.json").read_text(encoding="utf-8"))
    return f"127.0.0.1:{config['gateway']['grpc']['watcher']}"


class LogReader:
    """The watcher's JSON log lines from a byte offset on."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        return self.path.stat().st_size

    def events(self, start: int, event: str) -> list[dict[str, Any]]:
        out = []
        with open(self.path, "rb") as handle:
            handle.seek(start)
            for line in handle:
                if not line.startswith(b"{"):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if record.get("event") == event:
                    out.append(record)
        return out


# --------------------------------------------------------------------------- measurements


def seen_after(path: Path, marker: bytes, t0: float, timeout: float = SEEN_TIMEOUT_S) -> float:
    """Seconds from ``t0`` until ``path`` holds ``marker`` (tight poll: read whole every POLL_S)."""
    deadline = t0 + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                data = os.read(fd, 1 << 20)
            finally:
                os.close(fd)
        except FileNotFoundError:
            data = b""
        now = time.perf_counter()
        if marker in data:
            return now - t0
        if now > deadline:
            raise RuntimeError(f"{path} did not contain {marker.decode()} within {timeout:.0f}s")
        time.sleep(POLL_S)


def inotify_floor(tmp: Path, samples: int, atomic: bool) -> list[float]:
    """watchfiles' own latency (seconds) from a write's return to the change being yielded."""
    from watchfiles import watch

    from gateway.atomic import write_atomic

    folder = tmp / ("floor-atomic" if atomic else "floor-bare")
    folder.mkdir()
    stop = threading.Event()
    ready = threading.Event()
    cond = threading.Condition()
    seen: dict[str, float] = {}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for changes in watch(
                folder, debounce=1, step=1, rust_timeout=100, yield_on_timeout=True,
                stop_event=stop, watch_filter=None, raise_interrupt=False,
            ):  # fmt: skip
                now = time.perf_counter()
                ready.set()
                if changes:
                    with cond:
                        for _, path in changes:
                            seen.setdefault(os.path.basename(path), now)
                        cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name="floor-watch", daemon=True)
    thread.start()
    out = []
    rng = random.Random(1)
    try:
        if not ready.wait(10) or failure:
            raise RuntimeError(f"watchfiles did not start: {failure[0] if failure else 'timeout'}")
        for i in range(samples + 10):  # the first 10 are warm-up
            name = f"s{i:04d}.md"
            data = f"sample {i}\n".encode()
            if atomic:
                write_atomic(folder / name, data)
            else:
                with open(folder / name, "wb") as handle:
                    handle.write(data)
            t0 = time.perf_counter()

            def arrived(n: str = name) -> bool:
                return n in seen or bool(failure)

            with cond:
                if not cond.wait_for(arrived, SEEN_TIMEOUT_S):
                    raise RuntimeError(f"watchfiles did not report {name} within {SEEN_TIMEOUT_S:.0f}s")
                if failure:
                    raise RuntimeError(f"watchfiles failed: {failure[0]}")
                if i >= 10:
                    out.append(seen[name] - t0)
            time.sleep(rng.uniform(0.002, 0.010))
    finally:
        stop.set()
        thread.join(5)
    return out


@dataclass
class Sequential:
    latencies: list[float] = field(default_factory=list)
    compose_ms: list[float] = field(default_factory=list)
    passes: int = 0
    noop_passes: int = 0  # passes that found CLAUDE.md already up to date
    writes: int = 0

    def note(self) -> str:
        extra = f" ({self.noop_passes} found nothing new)" if self.noop_passes else ""
        return f"{self.passes} compositions for {self.writes} writes{extra}"


def write_and_see(workspace: Path, agent: str, marker: str) -> float:
    from gateway.atomic import write_atomic

    write_atomic(workspace / "MEMORY.md", memory_text(agent, marker).encode())
    t0 = time.perf_counter()
    return seen_after(workspace / "CLAUDE.md", marker.encode(), t0)


def sequential(workspaces: list[Path], writes: int, rng: random.Random, log: LogReader, tag: str) -> Sequential:
    """``writes`` non-overlapping writes round robin over ``workspaces``."""
    result = Sequential(writes=writes)
    start = log.offset()
    for i in range(writes):
        ws = workspaces[i % len(workspaces)]
        agent = ws.parent.name
        marker = f"{tag}-{i:04d}-{rng.getrandbits(48):012x}"
        result.latencies.append(write_and_see(ws, agent, marker))
        time.sleep(rng.uniform(0.002, 0.020))
    time.sleep(BURST_QUIET_S)
    composed = [r for r in log.events(start, "composed") if r.get("changed")]
    result.passes = len(composed)
    result.noop_passes = sum(1 for r in composed if not r.get("written"))
    result.compose_ms = sorted(float(r["ms"]) for r in composed if "ms" in r)
    result.latencies.sort()
    return result


@dataclass
class Burst:
    agent: str
    latency: float
    passes: int
    written: int
    span: float  # from the first write's start to the last write's return


def staged_temp(folder: Path, data: bytes) -> Path:
    """A temp file beside the target holding ``data``, fsynced: write_atomic's steps before its rename."""
    from gateway.atomic import temp_name

    name = folder / temp_name("MEMORY.md")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return name


def bursts(workspaces: list[Path], count: int, rng: random.Random, log: LogReader, staged: bool) -> list[Burst]:
    """``count`` bursts of BURST_WRITES writes to one agent's MEMORY.md, a different agent each time.

    ``staged``: the temp files are written and fsynced first, then the ten renames
    (write_atomic's last step) run back to back, so the burst lasts well under a
    millisecond whatever the disk does. Otherwise ten whole write_atomic calls,
    whose fsyncs pace them (milliseconds each on a busy disk).
    """
    from gateway.atomic import write_atomic

    out = []
    for b in range(count):
        ws = workspaces[(b * 7 + (3 if staged else 5)) % len(workspaces)]
        agent = ws.parent.name
        tag = "staged" if staged else "burst"
        markers = [f"{tag}{b:02d}-{k:02d}-{rng.getrandbits(48):012x}" for k in range(BURST_WRITES)]
        temps = [staged_temp(ws, memory_text(agent, m).encode()) for m in markers] if staged else []
        if staged:
            time.sleep(0.05)  # let the watch drain the temp files' events (ignored dot files)
        start = log.offset()
        first = time.perf_counter()
        if staged:
            for temp in temps:
                os.replace(temp, ws / "MEMORY.md")
        else:
            for marker in markers:
                write_atomic(ws / "MEMORY.md", memory_text(agent, marker).encode())
        t0 = time.perf_counter()
        latency = seen_after(ws / "CLAUDE.md", markers[-1].encode(), t0)
        time.sleep(BURST_QUIET_S)
        composed = [r for r in log.events(start, "composed") if r.get("agent") == agent]
        written = sum(1 for r in composed if r.get("written"))
        out.append(Burst(agent, latency, len(composed), written, t0 - first))
    return out


def all_exist(paths: list[Path]) -> bool:
    return all(p.exists() for p in paths)


def start_watcher(children: Children, name: str, home: Path, workspaces: list[Path]) -> dict[str, float]:
    """Spawn the watcher, wait for SERVING and for every CLAUDE.md; timings in seconds."""
    from gateway_cli.health_cli import grpc_serving

    address = watcher_address(home)
    claude = [ws / "CLAUDE.md" for ws in workspaces]
    spawn = time.perf_counter()
    children.start(name, [sys.executable, "-m", "gateway_cli.cli", "serve", "watcher", "--home", str(home)],
                   log=home / "watcher.log")
    serving = wait_until(children, lambda: grpc_serving(address), f"{name} SERVING", START_TIMEOUT_S, name=name, interval=0.05)
    # Cheap check first (the last agent is composed last), then the full check.
    wait_until(children, lambda: claude[-1].exists() and all_exist(claude), f"{name} initial composition",
               COMPOSE_TIMEOUT_S, name=name, interval=0.02)  # fmt: skip
    composed = time.perf_counter() - spawn
    return {"serving": serving, "composed": composed}


def watch_is_live(workspace: Path, children: Children, name: str) -> None:
    """Writes to ``workspace`` until one reaches CLAUDE.md (the inotify watch may start after composition)."""
    for attempt in range(20):
        children.check_alive(name)
        try:
            write_and_see(workspace, workspace.parent.name, f"probe-{attempt}-{time.time_ns()}")
            return
        except RuntimeError:
            continue
    raise RuntimeError(f"{name}: no write reached CLAUDE.md\n{children.tail(name)}")
