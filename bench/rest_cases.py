"""The REST bench's machinery: the home, the servers' health, the wrk/h2load/Python-client cases.

Kept apart from bench/rest_files.py (the entry script, whose docstring says the method) so each file
stays short; nothing here decides a verdict.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.procs import cpu_seconds
from harness.report import say
from harness.stats import percentile

KEY = "bench-key-123456"
AGENT = "alfred"
FILENAME = "MEMORY.md"
FILE_BYTES = 4096
SAVED_MESSAGE = "File saved. CLAUDE.md will auto-reload."

SHIM = "REST shim"
BASELINE = "baseline"
GRPC_H2LOAD = "gRPC (h2load)"
GRPC_PY = "gRPC (Python client)"
BARE_H2LOAD = "bare gRPC (h2load)"
BARE_PY = "bare gRPC (Python client)"
OLD_SHIM = "REST shim, old tree"
OLD_GRPC_H2LOAD = "gRPC, old tree (h2load)"
BARE_SHIM = "bare shim + bare gRPC"  # bench/bare_shim.py in front of bench/bare_grpc_server.py: the floor
REQUIRED_H2LOAD = "bare gRPC + required work (h2load)"  # bench/bare_grpc_server.py --required-work (GET only)
REQUIRED_SHIM = "bare shim + required work"  # a second bare shim in front of the required-work server (GET only)
# (target, method) -> the server processes whose CPU a case counts
TARGETS = (BASELINE, OLD_SHIM, SHIM, REQUIRED_SHIM, BARE_SHIM, OLD_GRPC_H2LOAD, GRPC_H2LOAD, REQUIRED_H2LOAD, BARE_H2LOAD, GRPC_PY, BARE_PY)


# --------------------------------------------------------------------------- set-up


def memory_content(size: int = FILE_BYTES) -> str:
    """A MEMORY.md of exactly ``size`` bytes of ASCII markdown."""
    lines = ["# MEMORY", "", "## Facts", ""]
    i = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"- fact {i:03d}: the user prefers short answers, dark mode and tests before merges.")
        i += 1
    text = "\n".join(lines)
    return text[: size - 1] + "\n"




def ensure_tool(binary: str, package: str) -> str | None:
    """Path of ``binary``; installs the Debian ``package`` with apt-get when missing."""
    found = shutil.which(binary)
    if found:
        return found
    if shutil.which("apt-get") is None:
        say(f"{binary} is not on PATH and apt-get is not available")
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say(f"{binary} not found; apt-get install -y {package}")
    install = ["apt-get", "install", "-y", "-qq", package]
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        say("apt-get install failed; running apt-get update first")
        subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(install, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return shutil.which(binary)


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = (out.stdout + out.stderr).strip().splitlines()
    return text[0].strip() if text else "?"


@dataclass
class Ports:
    file_api: int
    watcher: int
    kb: int
    dreaming: int
    http: int
    baseline: int
    bare: int
    bare_shim: int


def write_home(home: Path, ports: Ports, content: str, metrics: dict[str, int] | None = None,
               transport: str | None = None) -> Path:
    """config.json, internal token, workspace with MEMORY.md; the workspace path.

    ``metrics``: the ``gateway.metrics`` ports (free ones: the defaults may be held by another
    run); None writes no block (an old tree's code may not know it). ``transport``:
    ``gateway.grpc.transport`` (None: the default).
    """
    from gateway.config import load_config
    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {
                "host": "127.0.0.1",
                "fileApi": ports.file_api,
                "watcher": ports.watcher,
                "kb": ports.kb,
                "dreaming": ports.dreaming,
            },
            "api": {
                "host": "127.0.0.1",
                "port": ports.http,
                "keys": [{"key": KEY, "agents": [AGENT], "write": True, "name": "bench"}],
            },
        },
        "agents": [
            {"id": AGENT, "workspace": f"agents/{AGENT}/workspace", "transcriptsDir": f"agents/{AGENT}/sessions"}
        ],
    }
    if metrics is not None:
        config["gateway"]["metrics"] = metrics  # type: ignore[index]
    if transport is not None:
        config["gateway"]["grpc"]["transport"] = transport  # type: ignore[index]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if ensure_home(home) is not None:  # pragma: no cover - config.json was written first
        raise RuntimeError("ensure_home wrote its own config.json")
    loaded = load_config(home)  # fail here, with the reason, rather than in a child
    workspace = loaded.agents[0].workspace
    workspace.mkdir(parents=True, exist_ok=True)
    (loaded.agents[0].transcripts_dir).mkdir(parents=True, exist_ok=True)
    (workspace / FILENAME).write_text(content, encoding="utf-8")
    return workspace


def http_request(url: str, method: str = "GET", body: bytes | None = None, key: str | None = KEY) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"} if body is not None else {}
    if key:
        headers["x-api-key"] = key
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def file_api_healthy(url: str) -> bool:
    """The shim's /healthz says file_api is SERVING.

    The bench starts only the file API and the shim; /healthz answers 200 only
    when every backend the shim has routes for is up, so with routes of other
    services (watcher, kb...) it stays 503 and only the file_api entry counts.
    """
    status, body = http_request(url, key=None)
    return status in (200, 503) and json.loads(body).get("backends", {}).get("file_api") == "SERVING"


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    target: str
    method: str
    conc: int
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    detail: dict[str, Any] = field(default_factory=dict)
    cpu_ms_per_req: dict[str, float] = field(default_factory=dict)  # server process -> CPU ms per request

    def cpu_text(self) -> str:
        return " + ".join(f"{v:.2f}" for v in self.cpu_ms_per_req.values()) or "n/a"


def measure_cpu(pids: dict[str, int], run: Any) -> tuple[Any, dict[str, float]]:
    """``run()``'s result and the CPU seconds each named server process used meanwhile."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    result = run()
    return result, {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}


# --------------------------------------------------------------------------- wrk (HTTP)

WRK_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%.0f,"duration_us":%.0f,"p50_us":%.0f,"p99_us":%.0f,"mean_us":%.1f,' ..
    '"max_us":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.mean,
    latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def write_wrk_scripts(tmp: Path, body_path: Path) -> dict[str, Path]:
    get = tmp / "get.lua"
    get.write_text(f'wrk.method = "GET"\nwrk.headers["X-Api-Key"] = "{KEY}"\n{WRK_DONE}', encoding="utf-8")
    put = tmp / "put.lua"
    put.write_text(
        "wrk.method = \"PUT\"\n"
        f"local f = assert(io.open(\"{body_path}\", \"rb\"))\n"
        "wrk.body = f:read(\"*a\")\nf:close()\n"
        "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
        f"wrk.headers[\"X-Api-Key\"] = \"{KEY}\"\n{WRK_DONE}",
        encoding="utf-8",
    )
    return {"GET": get, "PUT": put}


def run_wrk(wrk: str, url: str, script: Path, conns: int, duration: float) -> dict[str, Any]:
    cmd = [wrk, "-t1", f"-c{conns}", f"-d{duration:g}s", "--timeout", "5s", "-s", str(script), url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    for line in out.stdout.splitlines():
        if line.startswith("WRK_RESULT "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(f"wrk printed no result (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")


def wrk_case(wrk: str, target: str, url: str, script: Path, method: str, conns: int, duration: float) -> Result:
    r = run_wrk(wrk, url, script, conns, duration)
    errors = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
    seconds = r["duration_us"] / 1e6
    ok = r["requests"] - r["status"]
    return Result(target, method, conns, ok / seconds, r["p50_us"] / 1000, r["p99_us"] / 1000, r["requests"], errors, r)


# --------------------------------------------------------------------------- gRPC


def grpc_frame(message: Any) -> bytes:
    data = message.SerializeToString()
    return b"\x00" + len(data).to_bytes(4, "big") + data


class RpcLog:
    """Counts the file API's per-RPC log lines (to check grpc-status under h2load)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def settled_size(self) -> int:
        """The log's size once it has stopped growing for 0.2 s (at most 3 s): RPC lines are
        written in batches a few milliseconds after their calls (gateway.logs.later), and a
        cancelled call's line comes when the server notices, so the last lines of a run land late."""
        size, deadline = self.path.stat().st_size, time.monotonic() + 3
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.path.stat().st_size
            if now == size:
                break
            size = now
        return size

    def mark(self) -> None:
        self.offset = self.settled_size()

    def codes(self) -> dict[str, int]:
        self.settled_size()
        out: dict[str, int] = {}
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "rpc":
                    out[event["code"]] = out.get(event["code"], 0) + 1
        return out


def h2load_case(
    target: str, h2load: str, address: str, body: Path, method: str, conns: int, duration: float, tmp: Path,
    rpc_log: RpcLog | None,
) -> Result:
    """One measured h2load run, no warm-up (the caller warms up first, outside the CPU measure).

    ``rpc_log`` (the file API's) gives grpc-status; the bare server logs nothing,
    and answers OK to everything.
    """
    rpc = "GetFile" if method == "GET" else "PutFile"
    log_path = tmp / f"h2load-{target.split()[0]}-{method}-{conns}.tsv"
    log_path.unlink(missing_ok=True)
    cmd = [
        h2load, "-t1", f"-c{conns}", "-m1", f"-D{duration:g}",
        "-d", str(body),
        "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", f"x-api-key: {KEY}",
        "--log-file", str(log_path),
        f"http://{address}/gateway.v1.WorkspaceFiles/{rpc}",
    ]  # fmt: skip
    if rpc_log is not None:
        rpc_log.mark()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    codes = rpc_log.codes() if rpc_log is not None else {}
    measured: dict[str, Any] = {"finished": None, "requests": None}
    for line in out.stdout.splitlines():
        parts = line.split()
        if line.startswith("finished in"):
            measured["finished"] = float(parts[2].rstrip("s,"))  # warm-up + measured phase
        elif line.startswith("requests:"):
            # requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
            measured["requests"] = {parts[i + 1].rstrip(","): int(parts[i]) for i in range(1, len(parts) - 1, 2)}
    if measured["finished"] is None or measured["requests"] is None or not log_path.exists():
        raise RuntimeError(f"h2load printed no result (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
    latencies = []
    bad_status = 0
    for row in log_path.read_text().splitlines():
        cols = row.split("\t")
        if len(cols) >= 3:
            if cols[1] != "200":
                bad_status += 1
            latencies.append(int(cols[2]) / 1e6)
    latencies.sort()
    reqs = measured["requests"]
    # h2load ends its run with a stream open on each connection: those calls are cancelled
    # (a PUT mid-write logs CANCELLED), the cut-off of the run, not an error of the server.
    cut_off = min(codes.get("CANCELLED", 0), conns)
    grpc_errors = sum(n for code, n in codes.items() if code != "OK") - cut_off
    errors = reqs.get("failed", 0) + reqs.get("errored", 0) + reqs.get("timeout", 0) + bad_status + grpc_errors
    seconds = float(duration)
    return Result(
        target, method, conns, max(0, reqs.get("succeeded", 0) - grpc_errors) / seconds,
        percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000, reqs.get("done", 0), errors,
        {"h2load": reqs, "server_codes": codes, "cut_off": cut_off, "logged_rows": len(latencies)},
    )  # fmt: skip


def python_grpc_case(
    target: str, address: str, method: str, conns: int, duration: float, warmup: float, procs_max: int, content: str
) -> Result:
    import grpc_client

    ctx = mp.get_context("spawn")
    procs = max(1, min(conns, procs_max))
    shares = [conns // procs + (1 if i < conns % procs else 0) for i in range(procs)]
    barrier = ctx.Barrier(procs)
    queue = ctx.Queue()
    workers = [
        ctx.Process(
            target=grpc_client.run_worker,
            args=(address, KEY, method, content, share, warmup, duration, barrier, queue),
            daemon=True,
        )
        for share in shares
    ]
    try:
        for w in workers:
            w.start()
        replies = [queue.get(timeout=duration + warmup + 90) for _ in workers]
        for w in workers:
            w.join(timeout=10)
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=5)
    fatal = [r["fatal"] for r in replies if "fatal" in r]
    if fatal:
        raise RuntimeError(f"Python gRPC client failed: {fatal[0]}")
    latencies = sorted(x for r in replies for x in r["latencies"])
    errors: dict[str, int] = {}
    for r in replies:
        for code, n in r["errors"].items():
            errors[code] = errors.get(code, 0) + n
    rps = sum(r["count"] / r["elapsed"] for r in replies)
    served = sum(r["count"] + r["warm_count"] for r in replies) + sum(errors.values()) + sum(r["warm_errors"] for r in replies)
    return Result(
        target, method, conns, rps, percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000,
        sum(r["count"] for r in replies) + sum(errors.values()), sum(errors.values()),
        {"processes": procs, "inflight_per_process": shares, "errors": errors, "served": served},
    )  # fmt: skip


# --------------------------------------------------------------------------- report
