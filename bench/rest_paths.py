"""The read path on each transport: the suite's REST shim and file API beside the floor of that transport.

For each transport (``unix``: the shim calls the file API on its Unix socket, the suite's default;
``tcp``: on loopback TCP, as compose and Kubernetes run) one run starts, on a home of its own:

- the suite's pair, ``gateway serve file_api`` and ``gateway serve http`` with
  ``gateway.grpc.transport`` set to that transport (metrics on, as deployed);
- the floor, ``bench/bare_shim.py`` over ``bench/bare_grpc_server.py``, the bare shim reaching the
  bare server over the same transport.

wrk then drives GET at 1 and 32 clients and PUT at 32 (the bare shim answers GET only), every case
``rounds`` times, the cases alternating within a round; each case keeps its median round (by req/s)
with the user+system CPU of the pair's two processes per request. ``run_paths`` returns the figures
(``bench/rest_files.py`` prints them first, ``bench/footprint.py`` calls it too) and
``paths_markdown`` renders them with the goals: GET c1 p50 <= 0.40 ms and CPU per GET <= 400 us.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import BENCH_DIR
from harness.home import session
from harness.ports import free_ports
from harness.procs import Children, wait_until
from harness.report import say
from rest_cases import (
    AGENT, FILENAME, Ports, file_api_healthy, http_request, measure_cpu, memory_content, run_wrk, wrk_case, write_home,
    write_wrk_scripts,
)

TRANSPORTS = ("unix", "tcp")
CASES = (("GET", 1), ("GET", 32), ("PUT", 32))
SUITE, FLOOR = "suite", "floor"
PAIRS = {SUITE: ("http", "file_api"), FLOOR: ("bare_shim", "bare")}
GOAL_P50_MS = 0.40
GOAL_CPU_US = 400.0
METRICS_KEYS = ("fileApi", "watcher", "kb", "dreaming", "http")


@dataclass(frozen=True)
class PathCase:
    """One measured case: a pair (``SUITE`` or ``FLOOR``) on a transport, a method at a client count."""

    transport: str
    pair: str
    method: str
    clients: int
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_req: float  # the shim's and the gRPC server's CPU over the case, per request answered
    errors: int


def _start(children: Children, home: Path, transport: str, content: str) -> dict[str, str]:
    """Both pairs on ``transport``, in ``home``; pair → the URL of the GET and PUT."""
    ports = Ports(*free_ports(8))
    workspace = write_home(home, ports, content, dict(zip(METRICS_KEYS, free_ports(5), strict=True)), transport)
    py = sys.executable
    for name in ("file_api", "http"):
        children.start(f"{transport}_{name}", [py, "-m", "gateway_cli.cli", "serve", name, "--home", str(home)])
    bare = [py, str(BENCH_DIR / "bare_grpc_server.py"), "--port", str(ports.bare), "--content", str(workspace / FILENAME)]
    backend = f"127.0.0.1:{ports.bare}"
    if transport == "unix":
        socket = home / "bare.sock"
        bare += ["--unix", str(socket)]
        backend = f"unix:{socket}"
    children.start(f"{transport}_bare", bare)
    children.start(f"{transport}_bare_shim", [py, str(BENCH_DIR / "bare_shim.py"), "--port", str(ports.bare_shim),
                                              "--backend", backend])  # fmt: skip
    path = f"/api/v1/agents/{AGENT}/files/{FILENAME}"
    urls = {SUITE: f"http://127.0.0.1:{ports.http}{path}", FLOOR: f"http://127.0.0.1:{ports.bare_shim}{path}"}
    wait_until(children, lambda: file_api_healthy(f"http://127.0.0.1:{ports.http}/healthz"), f"{transport}: the shim")
    wait_until(children, lambda: http_request(urls[FLOOR])[0] == 200, f"{transport}: the bare shim")
    if http_request(urls[SUITE])[1] != http_request(urls[FLOOR])[1]:
        raise RuntimeError(f"{transport}: the bare shim's GET answer differs from the shim's: the floor would not be fair")
    return urls


def _median(runs: list[PathCase]) -> PathCase:
    return sorted(runs, key=lambda case: case.rps)[len(runs) // 2]


def run_paths(
    wrk: str, transports: Sequence[str] = TRANSPORTS, *, duration: int = 5, warmup: int = 1, rounds: int = 3,
    cases: Sequence[tuple[str, int]] = CASES, keep_home: bool = False,
) -> list[PathCase]:
    """Start both pairs on each of ``transports`` (``unix``, ``tcp``), run ``cases`` (method, clients)
    with ``wrk`` for ``duration`` seconds each after ``warmup`` seconds per server, ``rounds`` times
    over, and return each case's median round: the suite's and the floor's (the floor has no PUT).
    Stops every process it started; raises RuntimeError when a server dies or answers wrongly."""
    content = memory_content()
    with session("bench-rest-paths-", keep=keep_home) as (home, children):
        body = home / "put-body.json"
        body.write_bytes(json.dumps({"content": content}).encode())
        scripts = write_wrk_scripts(home, body)
        urls = {transport: _start(children, home / transport, transport, content) for transport in transports}
        for transport, pairs in urls.items():
            for pair, url in pairs.items():
                for method in ("GET", "PUT") if pair == SUITE else ("GET",):
                    run_wrk(wrk, url, scripts[method], max(c for _, c in cases), warmup)
        measured: dict[tuple[str, str, str, int], list[PathCase]] = {}
        for method, clients in cases:
            for _ in range(rounds):
                for transport, pairs in urls.items():
                    for pair, url in pairs.items():
                        if pair == FLOOR and method != "GET":
                            continue
                        case = _measure(children, wrk, transport, pair, url, scripts[method], method, clients, duration)
                        measured.setdefault((transport, pair, method, clients), []).append(case)
        return [_median(runs) for runs in measured.values()]


def _measure(children: Children, wrk: str, transport: str, pair: str, url: str, script: Path, method: str,
             clients: int, duration: int) -> PathCase:  # fmt: skip
    children.check_alive()
    pids = {name: children.procs[f"{transport}_{name}"].pid for name in PAIRS[pair]}
    result, cpu = measure_cpu(pids, lambda: wrk_case(wrk, pair, url, script, method, clients, duration))
    case = PathCase(transport, pair, method, clients, result.rps, result.p50_ms, result.p99_ms,
                    1e6 * sum(cpu.values()) / max(1, result.requests), result.errors)  # fmt: skip
    say(f"{transport:4} {pair:5} {method} c={clients:<3} {case.rps:8,.0f} req/s  p50 {case.p50_ms:6.2f} ms  "
        f"p99 {case.p99_ms:6.2f} ms  CPU {case.cpu_us_per_req:5.0f} us/req  errors {case.errors}")  # fmt: skip
    return case


def cell(case: PathCase | None, text: Callable[[PathCase], str]) -> str:
    return "n/a" if case is None else text(case)


def paths_markdown(figures: Sequence[PathCase]) -> tuple[str, list[str]]:
    """The table of ``run_paths``'s figures (one line per transport and pair) and the goals' verdicts."""
    by = {(c.transport, c.pair, c.method, c.clients): c for c in figures}
    md = [
        "## The read path by transport (4 KB MEMORY.md)", "",
        "| transport | pair | GET c1 p50 ms | CPU per GET c1 µs | GET c32 req/s | GET c32 p99 ms | CPU per GET c32 µs "
        "| PUT c32 req/s | PUT c32 p99 ms | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    verdicts = []
    for transport in dict.fromkeys(c.transport for c in figures):
        for pair, label in ((SUITE, "REST shim + file API"), (FLOOR, "floor: bare shim + bare gRPC")):
            g1, g32, p32 = (by.get((transport, pair, m, n)) for m, n in CASES)
            errors = sum(c.errors for c in (g1, g32, p32) if c is not None)
            md.append(
                f"| {transport} | {label} | {cell(g1, lambda c: f'{c.p50_ms:.2f}')} | {cell(g1, lambda c: f'{c.cpu_us_per_req:.0f}')} "
                f"| {cell(g32, lambda c: f'{c.rps:,.0f}')} | {cell(g32, lambda c: f'{c.p99_ms:.2f}')} "
                f"| {cell(g32, lambda c: f'{c.cpu_us_per_req:.0f}')} | {cell(p32, lambda c: f'{c.rps:,.0f}')} "
                f"| {cell(p32, lambda c: f'{c.p99_ms:.2f}')} | {errors} |"
            )  # fmt: skip
        suite, floor = by.get((transport, SUITE, "GET", 1)), by.get((transport, FLOOR, "GET", 1))
        if suite is None or floor is None:
            continue
        for what, mine, least, goal, unit in (("GET c1 p50", suite.p50_ms, floor.p50_ms, GOAL_P50_MS, "ms"),
                                              ("CPU per GET c1", suite.cpu_us_per_req, floor.cpu_us_per_req, GOAL_CPU_US, "µs")):  # fmt: skip
            ok = "PASS" if mine <= goal else "FAIL"
            verdicts.append(f"{ok} {transport}: {what} <= {goal:g} {unit}: the suite {mine:.2f} {unit}, the floor on the "
                            f"same transport {least:.2f} {unit}" + (" (the floor itself is above the goal)" if least > goal else ""))  # fmt: skip
    return "\n".join(md), verdicts
