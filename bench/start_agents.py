"""Benchmark: start-up with many agents: time to ready, CPU after ready, RSS at rest, per process.

Run:  ``.venv/bin/python bench/start_agents.py [--agents 1000] [--reach 0] [--settle 30] [--keep-home]``
(not part of ``make bench``; about a minute with 1,000 agents on 2 cores).

Method
------
A fresh temp home holds ``--agents`` agents (``a0000``, ``a0001``…), each with a workspace
holding a SOUL.md and a 2 KB MEMORY.md, and one read key for every agent. Nightly dreaming is
on (the default) at a slot 12 hours from now, so the scheduler plans every agent at start but
runs none. Every process of the suite (``file_api``, ``watcher``, ``kb``, ``dreaming``,
``http``) is started at once with ``python -m gateway_cli.cli serve NAME`` on free loopback
ports, as ``gateway up`` starts them. For each process:

- **ready**: from the spawn until its health check answers (gRPC health SERVING; ``/healthz``
  for the shim), polled every 20 ms;
- **CPU after ready**: the process's user+system CPU (``/proc/PID/stat``) from the moment it
  was ready until it is at rest: the first 3 s window after which it used less than 0.05 s
  of CPU, or ``--settle`` seconds, whichever comes first;
- **RSS at rest**: ``VmRSS`` at that moment.

With ``--reach K`` the first K agents are then each sent one MCP ``tools/list`` over the shim's
streamable HTTP endpoint, and the shim's RSS is read again once it is at rest, and once more
``--idle-wait`` seconds later (0 to skip).

Prints a markdown table; exits 0 whatever the figures are, non-zero only when the run itself
failed. Every child is stopped (SIGTERM, then SIGKILL) at the end.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness import page
from harness.home import session, write_suite_config
from harness.procs import cpu_seconds, rss_mib
from harness.report import say, table

TITLE = "Start-up with 1,000 agents"
METHOD = """\
A fresh home holds 1,000 agents (each a SOUL.md and a 2 KB MEMORY.md; nightly dreaming on, its slot
12 hours away). Each process of the suite is started with `gateway serve NAME` (with
`--one-at-a-time`, once the one before is at rest). **Ready** is from the spawn to its health check
answering, **CPU after ready** what it spends from then until at rest (a 3 s window under 0.05 s of
CPU), **RSS** is then. With `--reach N`, N agents are then each sent one MCP `tools/list` through
the shim and its memory is read again."""

KEY = "start-bench-key-0123456789"
SERVICES = ("file_api", "watcher", "kb", "dreaming", "http")
MEMORY = "# Memory\n\n" + "".join(f"- fact {n}: the lighthouse keeper logs the tide at dawn\n" for n in range(40))


def write_home(home: Path, agents: int) -> dict[str, int]:
    ids = [f"a{n:04d}" for n in range(agents)]
    ports = write_suite_config(home, ids, KEY, write=False)
    for agent_id in ids:
        ws = home / "agents" / agent_id / "workspace"
        ws.mkdir(parents=True)
        (home / "agents" / agent_id / "sessions").mkdir()
        (ws / "SOUL.md").write_text(f"# Soul\n\n{agent_id} is careful.\n")
        (ws / "MEMORY.md").write_text(MEMORY)
    return ports


def ready(name: str, port: int) -> bool:
    if name == "http":
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False
    from gateway_cli.health_cli import grpc_serving

    return grpc_serving(f"127.0.0.1:{port}")


def at_rest(pid: int, settle_s: float, window_s: float = 3.0, quiet_cpu_s: float = 0.05) -> None:
    """Return once ``pid`` used under ``quiet_cpu_s`` CPU in a ``window_s`` window, or after ``settle_s``."""
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - before < quiet_cpu_s:
            return


def mcp_list(port: int, agent_id: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp/agents/{agent_id}", data=body, method="POST",
        headers={"X-Api-Key": KEY, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return int(answer.status)


def main() -> int:
    parser = page.parser(__doc__, keep_home="keep the temp home after the run")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--reach", type=int, default=0, help="agents sent one MCP request after the start")
    parser.add_argument("--idle-wait", type=float, default=0, help="seconds to wait after --reach before a last RSS read")
    parser.add_argument("--settle", type=float, default=60.0, help="at most this long to wait for each process to rest")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="start each process only once the one before is at rest (figures without contention)")
    args = parser.parse_args()
    run = page.Run.begin("start_agents", TITLE, METHOD)

    with session("start-agents-", keep=args.keep_home, logs="") as (home, children):
        say(f"writing a home with {args.agents} agents in {home}")
        ports = write_home(home, args.agents)
        spawned: dict[str, float] = {}
        cpu_at_ready: dict[str, float] = {}
        ready_s: dict[str, float] = {}
        groups = [[name] for name in SERVICES] if args.one_at_a_time else [list(SERVICES)]
        for group in groups:
            for name in group:
                spawned[name] = time.monotonic()
                children.serve(name, home)
            deadline = time.monotonic() + 300
            while any(name not in ready_s for name in group):
                for name in group:
                    if name in ready_s:
                        continue
                    if not children.alive(name):
                        raise SystemExit(f"{name} exited:\n{children.tail(name)}")
                    if ready(name, ports[name]):
                        ready_s[name] = time.monotonic() - spawned[name]
                        cpu_at_ready[name] = cpu_seconds(children.procs[name].pid)
                if time.monotonic() > deadline:
                    raise SystemExit(f"not ready within 300 s: {sorted(set(group) - set(ready_s))}")
                time.sleep(0.02)
            if args.one_at_a_time:
                at_rest(children.procs[group[0]].pid, args.settle)
        rows = []
        for name in SERVICES:
            pid = children.procs[name].pid
            at_rest(pid, args.settle)
            rows.append((name, ready_s[name], cpu_seconds(pid) - cpu_at_ready[name], rss_mib(pid)))
        body = [f"{args.agents} agents", "", table(
            ("process", "ready", "CPU after ready", "RSS at rest"),
            [(name, f"{secs:.2f} s", f"{cpu:.2f} s", f"{rss:.0f} MB") for name, secs, cpu, rss in rows], "lrrr")]
        if args.reach:
            pid = children.procs["http"].pid
            started = time.monotonic()
            for n in range(args.reach):
                status = mcp_list(ports["http"], f"a{n:04d}")
                if status != 200:
                    raise SystemExit(f"MCP tools/list for a{n:04d} answered {status}")
            took = time.monotonic() - started
            at_rest(pid, args.settle)
            body += ["", f"shim after one MCP tools/list to each of {args.reach} agents ({took / args.reach * 1000:.1f} ms "
                     f"each, first request per agent): RSS {rss_mib(pid):.0f} MB"]
            if args.idle_wait:
                time.sleep(args.idle_wait)
                at_rest(pid, args.settle)
                body += ["", f"shim {args.idle_wait:.0f} s later: RSS {rss_mib(pid):.0f} MB"]
    run.finish("\n".join(body), [], write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
