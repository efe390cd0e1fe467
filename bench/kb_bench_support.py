"""The process and measurement helpers of the KB benches: ports, child processes, a bench home, the KB service.

Moved out of bench/kb_archive.py (which re-exports every name here, so ``kb_archive.Children``,
``kb_archive.say`` and the rest keep working for the other benches); nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docs_page
from bench_ports import free_ports

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
AGENT = "bench"
KEY = "bench-key-123456"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
REFRESH_DEADLINE_S = 600.0
MB = 1_000_000


def say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


# =========================================================================== children




class Children:
    """The server processes this run started; all stopped by ``stop_all``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env = env

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = self.log_dir / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as handle:
            self.procs[name] = subprocess.Popen(
                cmd, cwd=REPO, env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.procs[name]

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop within {STOP_TIMEOUT_S:.0f}s; killing it")
                proc.kill()
                proc.wait()


def cpu_seconds(pid: int) -> float:
    """user+system CPU of ``pid`` (all threads) from /proc."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MiB (nan when the line is missing)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_suite_config(home: Path, ids: list[str], key: str, *, write: bool,
                       reviewer: list[str] | None = None) -> dict[str, int]:
    """config.json for the whole suite on free loopback ports, with agents ``ids`` (workspaces and
    transcripts at their default places), one key for every agent, metrics off and the nightly
    dream slot 12 hours away (no scheduled run during a bench); the home made. The ports by
    service name (``file_api``, ``watcher``, ``kb``, ``dreaming``, ``http``)."""
    from datetime import UTC, datetime, timedelta

    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    fa, wa, kb, dr, http = free_ports(5)
    slot = datetime.now(UTC) + timedelta(hours=12)
    dreaming: dict[str, Any] = {"dreamHour": slot.hour, "dreamMinute": slot.minute, "staggerWindowMinutes": 0}
    if reviewer is not None:
        dreaming["reviewerCommand"] = reviewer
    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", "fileApi": fa, "watcher": wa, "kb": kb, "dreaming": dr},
            "metrics": {"enabled": False},
            "api": {"host": "127.0.0.1", "port": http, "keys": [{"name": "bench", "key": key, "agents": "*", "write": write}]},
            "dreaming": dreaming,
        },
        "agents": [{"id": i} for i in ids],
    }  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    ensure_home(home)
    return {"file_api": fa, "watcher": wa, "kb": kb, "dreaming": dr, "http": http}


def write_home(home: Path, kb_port: int) -> None:
    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    ports = free_ports(4)
    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", "fileApi": ports[0], "watcher": ports[1], "kb": kb_port, "dreaming": ports[2]},
            "metrics": {"enabled": False},  # not the default ports: another run may hold them
            "api": {"host": "127.0.0.1", "port": ports[3], "keys": [{"key": KEY, "agents": [AGENT], "write": False, "name": "bench"}]},
        },
        "agents": [{"id": AGENT, "workspace": f"agents/{AGENT}/workspace", "transcriptsDir": f"agents/{AGENT}/sessions"}],
    }  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    ensure_home(home)


# =========================================================================== measurements


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))]


@dataclass
class Figures:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # figure, value, goal, verdict
    notes: list[str] = field(default_factory=list)

    def add(self, figure: str, value: str, goal: str = "", ok: bool | None = None) -> None:
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        self.rows.append((figure, value, goal, verdict))

    def table(self) -> str:
        return docs_page.figures_table(self.rows)

    def verdicts(self) -> list[str]:
        return docs_page.figure_verdicts(self.rows)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def rpc_log_lines(log: Path) -> int:
    try:
        with open(log, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def rpc_search_ms(log: Path, skip: int) -> list[float]:
    """The ``ms`` of the service's own "rpc" log lines for Search after the first ``skip`` lines."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle):
            if n < skip or not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if row.get("event") == "rpc" and row.get("method") == "Search" and "ms" in row:
                    out.append(float(row["ms"]))
    return out


def start_kb(home: Path, port: int, children: Children) -> tuple[Any, Any, tuple[tuple[str, str], ...], float, int]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2, kb_pb2_grpc

    proc = children.start("kb", [sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(home)])
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            channel.close()
            raise RuntimeError(f"kb exited with code {proc.returncode}; log tail:\n{children.tail('kb')}")
        serving = False
        with contextlib.suppress(grpc.RpcError):  # not listening yet
            serving = health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING
        if serving:
            break
        if time.monotonic() > deadline:
            channel.close()
            raise RuntimeError(f"kb not SERVING after {START_TIMEOUT_S:.0f}s; log tail:\n{children.tail('kb')}")
        time.sleep(0.1)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    stub = kb_pb2_grpc.KnowledgeStub(channel)
    t0 = time.perf_counter()
    reply = stub.Refresh(kb_pb2.RefreshRequest(agent_id=AGENT, wait=True), metadata=metadata, timeout=REFRESH_DEADLINE_S)
    refresh_s = time.perf_counter() - t0
    say(f"kb SERVING on {address} (pid {proc.pid}); Refresh(wait) {refresh_s * 1000:.1f} ms: "
        f"generation {reply.generation}, indexed {reply.report.indexed}, skipped {reply.report.skipped}, "
        f"errors {len(reply.report.errors)}")  # fmt: skip
    return stub, channel, metadata, refresh_s, proc.pid
