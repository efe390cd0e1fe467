"""Benchmark: the whole suite's footprint: memory and CPU at rest, and the REST read and write path.

Run:  ``make bench``  or  ``.venv/bin/python bench/footprint.py [--agents 10] [--rest-seconds 300]
[--settle-seconds 30] [--duration 5] [--rounds 3] [--workers 1,2 [--workers-only]] [--reference PATH
[--reference-command CMD]] [--keep-home] [--write-docs]``

Method
------
One run, on free loopback ports in temporary homes:

1. **At rest.** ``gateway up`` on a home of ``--agents`` agents (written as ``bench/suite_up.py``
   writes a fleet; ``gateway.api.workers`` left at its default), then ``--settle-seconds`` for the
   start-up's own work to end. Each process's RSS and PSS (``/proc/PID/smaps_rollup``), then its CPU
   (``/proc/PID/stat``, user + system) over ``--rest-seconds`` of no requests at all.
2. **Under load.** ``wrk`` (one thread, closed loop) GETs and PUTs one agent's 4 KB SOUL.md through
   the REST shim: GET at 1 and 32 connections, PUT at 32. Beside it, in the same rounds, the floor:
   ``bench/bare_shim.py`` in front of ``bench/bare_grpc_server.py`` (the least a Python shim and a
   Python gRPC server can do for a GET; they answer GET only). Each case runs ``--duration`` seconds,
   ``--rounds`` times alternating with the others, and reports its median round, with the CPU its
   processes used per request: the request path (shim and file API) and every process of the suite
   (the watcher recomposes CLAUDE.md after each PUT). Then each process's RSS and PSS again.
3. **Workers.** One suite per count in ``--workers`` (``gateway.api.workers``), up side by side; GET
   at 32 connections through each, in alternating rounds: req/s, latency and CPU per request of the
   shims and of the file API (docs/scale.md "Reads across cores").

With ``--reference PATH`` (a checkout of the reference system, built), ``--reference-command`` runs
in PATH (default ``node dist/index.js``) with ``HOME`` and ``GATEWAY_HOME`` set to a home of its own
whose ``config.json`` (SPEC's names: ``gateway.api.port``, ``gateway.api.keys``, ``agents``) holds
the same agent, key and SOUL.md, and ``PORT`` set to its port; it is measured beside the suite at
rest and in every load case (its CPU and memory: every process of its session). If it does not
answer the GET within 60 s, its cells say so and the run goes on.

The script prints the tables and PASS/FAIL lines against the goals of docs/benchmarks/footprint.md
(memory, CPU at rest, the read path, the workers); it exits 0 whatever they say, non-zero only when
it could not run. The markdown goes to ``bench/results/footprint.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import footprint_cpu
import footprint_memory
from footprint_report import Case, Measured, report
from harness import BENCH_DIR, page
from harness.home import session
from harness.ports import free_ports
from harness.procs import Children, cpu_seconds, wait_until
from harness.report import say
from rest_cases import KEY, ensure_tool, http_request, memory_content, run_wrk, tool_version, wrk_case, write_wrk_scripts
from suite_up import GatewayUp, write_fleet_home

TITLE = "Footprint: memory and CPU at rest, and the REST path"
METHOD = """\
The whole suite under `gateway up` with a few agents: each process's RSS and PSS at rest, its CPU
over minutes of no requests, then GET and PUT of a 4 KB SOUL.md through the REST shim (wrk, closed
loop) beside the floor of a bare shim over a bare gRPC server, in alternating rounds, with the CPU
every process spent per request; then the memory again; then GET at 32 connections through suites
with 1 and more REST shim workers (`gateway.api.workers`) side by side."""

FILENAME = "SOUL.md"
SEED = 7
READY_TIMEOUT_S = 120.0
WORKERS_SETTLE_S = 5.0
REFERENCE_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------- /proc


def rss_pss(pid: int) -> tuple[float, float] | None:
    """(RSS, PSS) of ``pid`` in MiB (``footprint_memory.rss_pss``); None when it is gone."""
    try:
        return footprint_memory.rss_pss(pid)
    except OSError:
        return None


def cpu_at_rest(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's CPU over ``seconds`` of wall time, in % of one core (``footprint_cpu.cpu_at_rest``)."""
    return {name: figures.percent for name, figures in footprint_cpu.cpu_at_rest(pids, seconds).items()}


def session_pids(leader: int) -> dict[str, int]:
    """Every live process of the session ``leader`` started (a reference system's npm and node)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
                if int(fields[3]) == leader and fields[0] != b"Z":
                    out[f"reference {entry.name}"] = int(entry.name)
    return out


# --------------------------------------------------------------------------- the suite


@dataclass
class Suite:
    """One ``gateway up`` of this run, on its own home."""

    up: GatewayUp
    url: str  # the SOUL.md of the first agent, through the REST shim
    workers: int

    def pids(self) -> dict[str, int]:
        return self.up.pids()

    def path_pids(self) -> dict[str, int]:
        """The request path of a GET: the shim workers and the file API."""
        return {n: p for n, p in self.pids().items() if n == "file_api" or n.startswith("http")}


def start_suite(home: Path, agents: int, workers: int | None) -> Suite:
    """A fleet home with ``agents`` agents, this bench's key and a 4 KB SOUL.md, under ``gateway up``
    (``workers``: ``gateway.api.workers``; None leaves the default). Returns once it says ready."""
    from gateway.config import load_config
    from gateway_cli.config_edit import write_config

    fleet = write_fleet_home(home, agents, seed=SEED, notes_per_agent=1)
    raw = json.loads((home / "config.json").read_text(encoding="utf-8"))
    raw["gateway"]["api"]["keys"].append({"name": "bench-rest", "key": KEY, "agents": "*", "write": True})
    if workers is not None:
        raw["gateway"]["api"]["workers"] = workers
        raw["gateway"]["metrics"]["http"] = free_run(workers)  # worker N serves metrics on http + N - 1
    write_config(home / "config.json", raw)
    agent = fleet.agents[0]
    (fleet.workspaces[agent] / FILENAME).write_text(memory_content(), encoding="utf-8")
    up = GatewayUp(home, home / "up.log", nofile=None)
    up.start()
    up.wait_ready(READY_TIMEOUT_S)
    count = load_config(home).api.workers
    say(f"suite up on {fleet.base_url} ({agents} agents, {count} REST shim worker{'s' if count > 1 else ''})")
    return Suite(up, f"{fleet.base_url}/api/v1/agents/{agent}/files/{FILENAME}", count)


def free_run(count: int) -> int:
    """A free port P such that P … P + count − 1 are all free."""
    import socket

    while True:
        first = free_ports(1)[0]
        with contextlib.ExitStack() as stack:
            try:
                for port in range(first, first + count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first


@contextlib.contextmanager
def suites(homes: list[tuple[Path, int | None]], agents: int) -> Iterator[list[Suite]]:
    """Suites up side by side, one per (home, workers); every one stopped on the way out."""
    started: list[Suite] = []
    try:
        for home, workers in homes:
            started.append(start_suite(home, agents, workers))
        yield started
    finally:
        for suite in started:
            suite.up.stop()


# --------------------------------------------------------------------------- floor and reference


def start_floor(children: Children, content: Path) -> str:
    """The bare gRPC server and the bare shim in front of it; the shim's URL of the same file."""
    grpc_port, shim_port = free_ports(2)
    py = sys.executable
    children.start("bare", [py, str(BENCH_DIR / "bare_grpc_server.py"), "--port", str(grpc_port), "--content", str(content)])
    children.start("bare_shim", [py, str(BENCH_DIR / "bare_shim.py"), "--port", str(shim_port),
                                 "--backend", f"127.0.0.1:{grpc_port}"])  # fmt: skip
    url = f"http://127.0.0.1:{shim_port}/api/v1/agents/a0000/files/{FILENAME}"
    wait_until(children, lambda: "bare gRPC server on" in children.tail("bare"), "bare gRPC server")
    wait_until(children, lambda: http_request(url)[0] == 200, "bare shim")
    return url


def start_reference(children: Children, checkout: Path, command: str, home: Path, content: str) -> str | None:
    """The reference system on a home of its own (see the module's docstring); the URL of its SOUL.md,
    or None when it did not answer within ``REFERENCE_TIMEOUT_S``."""
    port = free_ports(1)[0]
    workspace = home / "agents" / "a0000" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / FILENAME).write_text(content, encoding="utf-8")
    config = {"gateway": {"api": {"port": port, "keys": [{"key": KEY, "agents": "*", "write": True}]}},
              "agents": [{"id": "a0000", "workspace": str(workspace)}]}  # fmt: skip
    for folder in (home, home / ".claude-gateway"):
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    saved = dict(children.env)
    children.env.update({"HOME": str(home), "GATEWAY_HOME": str(home), "PORT": str(port)})
    try:
        children.start("reference", shlex.split(command), cwd=checkout)
    finally:
        children.env = saved
    url = f"http://127.0.0.1:{port}/api/v1/agents/a0000/files/{FILENAME}"
    try:
        wait_until(children, lambda: http_request(url)[0] == 200, "the reference system", REFERENCE_TIMEOUT_S, name="reference")
    except RuntimeError as exc:
        say(f"the reference system did not answer; its cells say so: {str(exc).splitlines()[0]}")
        children.stop("reference")
        return None
    return url


# --------------------------------------------------------------------------- load


@dataclass
class Target:
    """Where a case's requests go and whose CPU they cost (``path``: the request path's processes)."""

    name: str
    url: str
    pids: Callable[[], dict[str, int]]
    path: Callable[[], dict[str, int]]
    methods: tuple[str, ...] = ("GET", "PUT")
    rounds: dict[tuple[str, int], list[Measured]] = field(default_factory=dict)


def measure(wrk: str, target: Target, scripts: dict[str, Path], method: str, conns: int, duration: int) -> Measured:
    """One wrk run against ``target`` with the CPU each of its processes used meanwhile."""
    pids = target.pids()
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    result = wrk_case(wrk, target.name, target.url, scripts[method], method, conns, duration)
    used = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            used[name] = cpu_seconds(pid) - before[name]
    path = set(target.path())
    served = max(1, result.requests)
    return Measured(result, 1e6 * sum(v for n, v in used.items() if n in path) / served, 1e6 * sum(used.values()) / served,
                    {n: 1e6 * v / served for n, v in used.items()})  # fmt: skip


def run_cases(wrk: str, targets: list[Target], cases: list[tuple[str, int]], scripts: dict[str, Path], args: argparse.Namespace,
              check: Callable[[], None]) -> list[Case]:  # fmt: skip
    """Every (method, connections) case on every target that answers that method, ``args.rounds``
    times alternating; each case's median round (by req/s)."""
    for target in targets:
        for method in target.methods:
            run_wrk(wrk, target.url, scripts[method], 32, args.warmup)
    for n in range(args.rounds):
        for method, conns in cases:
            for target in targets:
                if method in target.methods:
                    check()
                    m = measure(wrk, target, scripts, method, conns, args.duration)
                    target.rounds.setdefault((method, conns), []).append(m)
                    say(f"round {n + 1} {target.name:24} {method} c{conns:<3} {m.result.rps:8,.0f} req/s  "
                        f"p50 {m.result.p50_ms:6.2f} ms  p99 {m.result.p99_ms:7.2f} ms  CPU {m.path_us:6.0f} µs/req path")  # fmt: skip
    out = []
    for target in targets:
        for (method, conns), runs in target.rounds.items():
            out.append(Case(target.name, method, conns, sorted(runs, key=lambda m: m.result.rps)[len(runs) // 2]))
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, keep_home="keep the temporary homes (logs, config) after the run")
    p.add_argument("--agents", type=int, default=10, help="agents in the suite's home (default 10)")
    p.add_argument("--settle-seconds", type=float, default=30, help="wait after ready before measuring at rest (default 30)")
    p.add_argument("--rest-seconds", type=float, default=300, help="CPU at rest measured over this long (default 300)")
    p.add_argument("--duration", type=int, default=5, help="whole seconds per load case (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="whole seconds of warm-up per target and method (default 1)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds; each case's median is reported (default 3)")
    p.add_argument("--workers", default="1,2", help="gateway.api.workers of the suites compared at GET c32 (default 1,2)")
    p.add_argument("--workers-connections", type=int, default=32, help="connections of the workers comparison (default 32)")
    p.add_argument("--workers-only", action="store_true", help="run only the workers comparison (its page is then that table alone)")
    p.add_argument("--reference", type=Path, help="a checkout of the reference system, measured beside the suite")
    p.add_argument("--reference-command", default="node dist/index.js", help="how it starts, run in its checkout")
    args = p.parse_args(argv)
    args.worker_counts = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    if args.duration < 1 or args.warmup < 1 or not args.worker_counts or min(args.worker_counts) < 1:
        p.error("--duration and --warmup are whole seconds, at least 1; --workers is a list of counts from 1")
    return args


@dataclass
class Footprint:
    """What the first two phases found (empty with ``--workers-only``)."""

    at_rest: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    after: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    idle: dict[str, float] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)
    workers: int = 0  # the default's worker count on this host
    reference: bool = False


def footprint_phases(root: Path, children: Children, wrk: str, scripts: dict[str, Path], content: str,
                     args: argparse.Namespace) -> Footprint:  # fmt: skip
    """At rest, then under load, beside the floor (and the reference system, when given)."""
    with suites([(root / "suite", None)], args.agents) as (suite,):
        reference = None
        if args.reference is not None:
            reference = start_reference(children, args.reference.resolve(), args.reference_command, root / "reference", content)
        say(f"settling for {args.settle_seconds:g} s, then {args.rest_seconds:g} s at rest")
        time.sleep(args.settle_seconds)
        ref_pids = session_pids(children.procs["reference"].pid) if reference else {}
        found = Footprint(workers=suite.workers, reference=reference is not None)
        found.at_rest = {name: rss_pss(pid) for name, pid in {**suite.pids(), **ref_pids}.items()}
        found.idle = cpu_at_rest({**suite.pids(), **ref_pids}, args.rest_seconds)
        floor = start_floor(children, suite.up.home / "agents" / "a0000" / "workspace" / FILENAME)
        bare = lambda: {n: children.procs[n].pid for n in ("bare_shim", "bare")}  # noqa: E731
        targets = [Target("suite", suite.url, suite.pids, suite.path_pids),
                   Target("floor (bare shim + bare gRPC)", floor, bare, bare, ("GET",))]  # fmt: skip
        if reference:
            ref = lambda: session_pids(children.procs["reference"].pid)  # noqa: E731
            targets.append(Target("reference", reference, ref, ref))

        def check() -> None:
            suite.up.check_alive()
            children.check_alive()

        found.cases = run_cases(wrk, targets, [("GET", 1), ("GET", 32), ("PUT", 32)], scripts, args, check)
        found.after = {name: rss_pss(pid) for name, pid in {**suite.pids(), **ref_pids}.items()}
    children.stop_all()
    return found


def workers_phase(root: Path, wrk: str, scripts: dict[str, Path], args: argparse.Namespace) -> list[Case]:
    """GET through one suite per worker count, side by side, in alternating rounds."""
    with suites([(root / f"workers-{n}", n) for n in args.worker_counts], 1) as running:
        time.sleep(WORKERS_SETTLE_S)
        targets = [Target(f"{s.workers} worker{'s' if s.workers > 1 else ''}", s.url, s.pids, s.path_pids, ("GET",))
                   for s in running]  # fmt: skip

        def check() -> None:
            for s in running:
                s.up.check_alive()

        return run_cases(wrk, targets, [("GET", args.workers_connections)], scripts, args, check)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_run = page.Run.begin("footprint", TITLE, METHOD, argv)
    wrk = ensure_tool("wrk", "wrk")
    if wrk is None:
        say("wrk is required (Debian package wrk); cannot run")
        return 2
    content = memory_content()
    with session("bench-footprint-", keep=args.keep_home) as (root, children):
        body = root / "put-body.json"
        body.write_text(json.dumps({"content": content}), encoding="utf-8")
        scripts = write_wrk_scripts(root, body)
        found = Footprint() if args.workers_only else footprint_phases(root, children, wrk, scripts, content, args)
        worker_cases = workers_phase(root, wrk, scripts, args)
    meta = {
        "suite": f"gateway up, {args.agents} agents, {found.workers} REST shim worker(s) (gateway.api.workers default on this host)"
        if not args.workers_only else "not run (--workers-only)",
        "load tool": f"{tool_version([wrk, '--version'])}, one thread, closed loop; {args.duration} s a case, median of {args.rounds} alternating rounds",
        "file": f"{FILENAME}, {len(content.encode())} bytes",
        "at rest": f"{args.settle_seconds:g} s after ready, then CPU over {args.rest_seconds:g} s" if not args.workers_only else "not run",
        "reference": f"{args.reference} ({args.reference_command})" if args.reference else "not run (--reference PATH)",
    }
    markdown, verdicts = report(meta, found.at_rest, found.after, found.idle, args.rest_seconds, found.cases, worker_cases,
                                found.reference)  # fmt: skip
    bench_run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
