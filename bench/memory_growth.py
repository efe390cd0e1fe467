"""Measurement: what the watcher, dreaming and the shim keep under steady traffic (tracemalloc diffs, RSS slope).

Run:  ``.venv/bin/python bench/memory_growth.py [--agents 50] [--rate 75] [--warmup 2] [--minutes 8]
[--keep-home]``  (not part of ``make test`` or ``make bench``; the long soak is bench/soak.py).

Method
------
A fresh temp home with ``--agents`` agents (each workspace: SOUL.md, MEMORY.md, a note under
memory/; dreaming's reviewer is the stand-in, ``gateway reviewer stand-in``; the nightly slot 12
hours away). The five processes start on free loopback ports; the watcher, dreaming and the shim
run under ``bench/traced_serve.py`` (tracemalloc, 12 frames), the file API and the KB as usual.
Then, for ``--warmup`` + ``--minutes`` minutes, at ``--rate`` requests a second over every agent in
turn, through the shim with a key for every agent:

- GET MEMORY.md; PUT USER.md (new content each time: a recomposition and directives);
- memory:search; an MCP ``tools/call`` of memory_search (``/mcp/agents/{id}``);
- sessions: register a new session (BUSY), report it IDLE, end it (``--left`` percent, 10 by default,
  are never ended, as a runtime that crashed leaves them); GET activity; GET claude-md;
- a WatchDirectives stream (gRPC, to the watcher) opened and closed every second for another agent;

plus 4 note files a second written straight into workspaces' ``memory/`` (new files), and a dream
(``dream:run``) every 10 s, each for the next agent. At the end of the warm-up and of the run
each traced process writes a snapshot (SIGUSR2); the script prints, per process, the RSS at both
moments, its slope over the run (least squares over samples every 10 s) in MB an hour, and the
15 lines of code whose allocations grew most between the two snapshots. Tracing inflates a traced
process's RSS and blurs its slope: ``--no-trace`` runs all five untraced, for the RSS figures.
Exits 0 whatever it finds.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

from harness import BENCH_DIR, REPO, page
from harness.home import session, write_suite_config
from harness.procs import Children, rss_mib
from harness.report import say, table

import grpc
import httpx
from start_agents import ready

from gateway.v1 import watcher_pb2, watcher_pb2_grpc

KEY = "growth-bench-key-0123456789"
SERVICES = ("file_api", "kb", "watcher", "dreaming", "http")
TRACED = ("watcher", "dreaming", "http")
TITLE = "Memory under steady traffic"
METHOD = """\
50 agents get steady traffic through the shim, 75 requests a second (file reads and writes,
searches, MCP tool calls, session register/report/end, activity, CLAUDE.md previews), a
WatchDirectives stream opened and closed every second, 4 note files a second written into
workspaces and a dream every 10 s with the stand-in reviewer. With `--left N`, N% of sessions are
never ended, as when runtimes die. Each process's RSS is sampled every 10 s; the slope is a least
squares line over the measured minutes. Without `--no-trace` the watcher, dreaming and the shim run
under tracemalloc and the lines whose allocations grew most are listed."""


def write_home(home: Path, agents: int) -> tuple[dict[str, int], list[str]]:
    ids = [f"g{n:03d}" for n in range(agents)]
    ports = write_suite_config(home, ids, KEY, write=True, reviewer=["gateway", "reviewer", "stand-in"])
    for agent_id in ids:
        ws = home / "agents" / agent_id / "workspace"
        (ws / "memory").mkdir(parents=True)
        (home / "agents" / agent_id / "sessions").mkdir()
        (ws / "SOUL.md").write_text(f"# Soul\n\n{agent_id} is careful.\n")
        (ws / "MEMORY.md").write_text("# Memory\n\n- the harbour opens at six\n")
        (ws / "memory" / "notes.md").write_text("# Notes\n\n- the pilot boat leaves at dawn\n")
    return ports, ids


class Load:
    """The traffic, as asyncio tasks: requests at a rate, note files, dreams, directive streams."""

    def __init__(self, home: Path, ports: dict[str, int], ids: list[str], rate: float, left: int) -> None:
        self.home, self.ports, self.ids, self.rate, self.left = home, ports, ids, rate, left
        self.statuses: dict[int, int] = {}
        self.counter = itertools.count()

    async def run(self, stop: asyncio.Event) -> None:
        headers = {"X-Api-Key": KEY}
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.ports['http']}", headers=headers,
                                     timeout=60, limits=limits) as client:
            await asyncio.gather(self._requests(client, stop), self._notes(stop), self._dreams(client, stop),
                                 self._streams(stop))

    async def _requests(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        pending: set[asyncio.Task[None]] = set()
        step = 1 / self.rate
        next_at = time.monotonic()
        while not stop.is_set():
            n = next(self.counter)
            task = asyncio.ensure_future(self._one(client, self.ids[n % len(self.ids)], n))
            pending.add(task)
            task.add_done_callback(pending.discard)
            next_at += step
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        await asyncio.gather(*pending, return_exceptions=True)

    async def _one(self, client: httpx.AsyncClient, agent: str, n: int) -> None:
        base = f"/api/v1/agents/{agent}"
        kind = n % 10
        try:
            if kind in (0, 1):
                answers = [await client.get(f"{base}/files/MEMORY.md")]
            elif kind == 2:
                answers = [await client.put(f"{base}/files/USER.md", json={"content": f"# User\n\nvisit {n}\n"})]
            elif kind in (3, 4):
                answers = [await client.get(f"{base}/memory:search", params={"query": "pilot boat"})]
            elif kind == 5:
                body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": "memory_search", "arguments": {"query": "harbour"}}}
                answers = [await client.post(f"/mcp/agents/{agent}", json=body,
                                             headers={"Accept": "application/json, text/event-stream"})]
            elif kind == 6:
                session = f"s{n}"
                answers = [await client.post(f"{base}/sessions", json={"sessionId": session, "state": "SESSION_STATE_BUSY"}),
                           await client.post(f"{base}/sessions/{session}/state", json={"state": "SESSION_STATE_IDLE"})]
                if (n // 10) % 100 >= self.left:  # the others are left, as a runtime that crashed leaves them
                    answers.append(await client.delete(f"{base}/sessions/{session}"))
            elif kind in (7, 8):
                answers = [await client.get(f"{base}/activity")]
            else:
                answers = [await client.get(f"{base}/claude-md")]
        except httpx.HTTPError:
            self.statuses[0] = self.statuses.get(0, 0) + 1
            return
        for answer in answers:
            self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1

    async def _notes(self, stop: asyncio.Event) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            agent = self.ids[n % len(self.ids)]
            path = self.home / "agents" / agent / "workspace" / "memory" / f"note-{n}.md"
            path.write_text(f"# Note {n}\n\n- the tide turned at {n % 24}:00 near buoy {n}\n")
            await asyncio.sleep(0.25)

    async def _dreams(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            try:
                answer = await client.post(f"/api/v1/agents/{self.ids[n % len(self.ids)]}/dream:run", json={})
                self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
            except httpx.HTTPError:
                self.statuses[0] = self.statuses.get(0, 0) + 1
            await asyncio.sleep(10)

    async def _streams(self, stop: asyncio.Event) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.ports['watcher']}") as channel:
            stub = watcher_pb2_grpc.SessionsStub(channel)
            for n in itertools.count():
                if stop.is_set():
                    return
                call = stub.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id=self.ids[n % len(self.ids)]),
                                            metadata=(("x-api-key", KEY),))
                await call.initial_metadata()
                await asyncio.sleep(1)
                call.cancel()


def snapshot(children: Children, home: Path, name: str, index: int) -> tracemalloc.Snapshot:
    path = home / "traces" / f"{name}-{index}.snap"
    os.kill(children.procs[name].pid, signal.SIGUSR2)
    deadline = time.monotonic() + 120
    while True:
        try:
            return tracemalloc.Snapshot.load(str(path))
        except (OSError, EOFError, ValueError):  # not there yet, or still being written
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} wrote no snapshot {path}") from None
            time.sleep(0.5)


def slope_mb_per_hour(samples: list[tuple[float, float]]) -> float:
    n = len(samples)
    if n < 2:
        return float("nan")
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    return sum((t - mt) * (r - mr) for t, r in samples) / var * 3600 if var else float("nan")


async def drive(load: Load, seconds: float, sample: dict[str, list[tuple[float, float]]], children: Children) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(load.run(stop))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(min(10.0, max(0.0, end - time.monotonic())))
        for name in SERVICES:
            if not children.alive(name):
                raise SystemExit(f"{name} exited:\n{children.tail(name)}")
            sample.setdefault(name, []).append((time.monotonic(), rss_mib(children.procs[name].pid)))
    stop.set()
    await task


def main() -> int:
    parser = page.parser(__doc__, keep_home="keep the temp home after the run")
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--rate", type=float, default=75.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes before the first snapshot")
    parser.add_argument("--minutes", type=float, default=8.0, help="minutes between the two snapshots")
    parser.add_argument("--left", type=int, default=10, help="percent of sessions never ended")
    parser.add_argument("--no-trace", action="store_true",
                        help="run every process untraced (tracemalloc's own memory and snapshots blur RSS): RSS only")
    args = parser.parse_args()
    bench_run = page.Run.begin("memory_growth", TITLE, METHOD)
    traced = () if args.no_trace else TRACED

    with session("memory-growth-", keep=args.keep_home, logs="") as (home, children):
        (home / "traces").mkdir()
        ports, ids = write_home(home, args.agents)
        for name in SERVICES:
            tool = [str(BENCH_DIR / "traced_serve.py"), str(home / "traces"), name] if name in traced else \
                ["-m", "gateway_cli.cli", "serve", name]
            children.start(name, [sys.executable, *tool, "--home", str(home)])
        deadline = time.monotonic() + 120
        while not all(ready(name, ports[name]) for name in SERVICES):
            if time.monotonic() > deadline or not all(children.alive(n) for n in SERVICES):
                raise SystemExit("the suite did not start:\n" + "\n".join(children.tail(n, 5) for n in SERVICES))
            time.sleep(0.2)
        load = Load(home, ports, ids, args.rate, args.left)
        at_ready = {name: rss_mib(children.procs[name].pid) for name in SERVICES}
        say(f"{args.agents} agents, {args.rate:.0f} requests/s; warm-up {args.warmup} min")
        warm: dict[str, list[tuple[float, float]]] = {}
        asyncio.run(drive(load, args.warmup * 60, warm, children))
        first = {name: snapshot(children, home, name, 0) for name in traced}
        rss0 = {name: rss_mib(children.procs[name].pid) for name in SERVICES}
        say(f"measuring for {args.minutes} min")
        run: dict[str, list[tuple[float, float]]] = {}
        asyncio.run(drive(load, args.minutes * 60, run, children))
        last = {name: snapshot(children, home, name, 1) for name in traced}
        rss1 = {name: rss_mib(children.procs[name].pid) for name in SERVICES}
        body = [f"{args.agents} agents, {args.rate:.0f} requests/s, {args.minutes} min after a {args.warmup} min warm-up; "
                f"answers by status: {dict(sorted(load.statuses.items()))}", "",
                table(("process", "RSS at ready", "after warm-up", "at the end", "slope over the run"),
                                [(name, f"{at_ready[name]:.1f} MB", f"{rss0[name]:.1f} MB", f"{rss1[name]:.1f} MB",
                                  f"{slope_mb_per_hour(run[name]):+.1f} MB/h") for name in SERVICES], "lrrrr")]  # fmt: skip
        for name in traced:
            stats = last[name].compare_to(first[name], "lineno")
            total = sum(s.size_diff for s in stats)
            body += ["", f"{name}: traced Python allocations {total / 1e6:+.2f} MB over the run; top lines:", "", "```text"]
            for stat in stats[:15]:
                frame = stat.traceback[0]
                body.append(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
                            f"{frame.filename.replace(str(REPO) + '/', '')}:{frame.lineno}")
            body.append("```")
    bench_run.finish("\n".join(body), [], write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
