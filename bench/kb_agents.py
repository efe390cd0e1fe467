"""Benchmark: many agents in one KB: open files, memory and disk per agent, and the cost of reopening.

Run:  ``.venv/bin/python bench/kb_agents.py [--agents 1000] [--notes 20] [--nofile N] [--max-open N]
[--concurrency 4] [--writes 50] [--idle 70] [--keep-home]``
(about two minutes for 1,000 agents; ``--quick`` = 200 agents, no idle wait.)

Method
------
1. **Home**: ``--agents`` agents (``a0000``…), each with a ``MEMORY.md`` and ``--notes`` notes of about
   1 KB under ``memory/`` (words from a fixed vocabulary, ``random.Random(7)``), the shared vault on
   (one project for all). ``--max-open`` sets ``gateway.knowledge.maxOpenArchives`` (unset: the KB
   derives it from its open-files limit).
2. **KB**: ``gateway serve kb`` alone, its soft and hard open-files limits set to ``--nofile`` when
   given (``prlimit`` on the child, as ``ulimit -n`` would).
3. **Every agent searched**: ``Search`` of the memory corpus and of the shared corpus for each agent in
   turn, ``--concurrency`` calls in flight. Every 10% of the agents: the KB's resident memory
   (``/proc/PID/smaps_rollup``: Rss and its anonymous part) and its open files (``/proc/PID/fd``).
   Reported: the growth per active agent (a least-squares slope over the samples after the first 10%),
   the largest open-file count, and the answers by gRPC code.
4. **Per request**: ``--rounds`` more rounds over every agent (memory corpus); the KB's memory
   before and after them, as growth per 1,000 searches.
5. **Reopening**: a warm search (the same agent again and again: its archive stays open) against a
   cold one (each search names an agent searched longest ago: with a cap below ``--agents`` its
   archive was closed and is opened again). p50 of each and their difference: the cost of a reopen.
6. **WAL at peak and at rest**: ``--writes`` agents get a note appended and a ``Refresh(wait)``
   (each refresh and each search's retrieval-log rows are writes); every ``kb.sqlite-wal`` and
   ``kb.sqlite`` is measured at once, again after ``--idle`` seconds without traffic, and after a
   clean stop (SIGTERM). The home's size is reported at each point.
7. **Python's share** (``--tracemalloc``, instead of all the above): the same agents in this
   process, through ``Archives`` and ``Vaults`` as the KB builds them, with tracemalloc snapshots
   after half the agents and after all of them were searched, and after ``--rounds`` more rounds;
   the Python bytes per agent and per 1,000 searches, and the lines that allocated most.

Numbers are of a shared 2-core machine: noisy. Nothing here is a pass/fail gate.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import REPO, page
from harness.home import api_key, write_config
from harness.report import say, table

TITLE = "Many agents in one KB: open files, memory, WAL, reopening"
METHOD = """\
One KB process serves 1,000 agents of 20 short notes each, with the shared vault on. Every agent is
searched in its archive and in the vault, then three more rounds go over all of them, while the
KB's memory (`smaps_rollup`) and open files are sampled as agents become active. A search of an
open archive is timed against one of an archive reopened; every WAL and database is measured after
50 agents are written and refreshed, after 70 s without traffic and after a clean stop. `--nofile N`
starts the KB under that open-files limit, `--max-open N` sets `maxOpenArchives`, `--tracemalloc`
measures Python's own allocations in process instead. No goal is checked: the figures show what an
agent costs the KB."""
START_TIMEOUT_S = 60.0
WORDS = (
    "harbour deploy kernel lantern meadow orbit pylon quartz raven saddle timber umbra velvet willow "
    "yonder zephyr amber beacon cedar delta ember fjord granite hollow indigo juniper kestrel lagoon "
    "marble nectar oasis pebble quiver ripple sierra thistle upland vessel walnut xenon yarrow zenith"
).split()


def agent_id(i: int) -> str:
    return f"a{i:04d}"


def write_home(home: Path, agents: int, notes: int, max_open: int | None) -> int:
    """The home with ``agents`` agents and their notes; returns the KB's port."""
    knowledge: dict[str, Any] = {} if max_open is None else {"maxOpenArchives": max_open}
    agent_ids = [{"id": agent_id(i)} for i in range(agents)]
    port = write_config(home, agent_ids, keys=[api_key(write=False)], gateway={"dreaming": {"enabled": False}, "knowledge": knowledge})["kb"]
    rng = random.Random(7)
    for i in range(agents):
        ws = home / "agents" / agent_id(i) / "workspace"
        (ws / "memory").mkdir(parents=True, exist_ok=True)
        (ws / "MEMORY.md").write_text(f"# Memory of {agent_id(i)}\n\n- marker{i} lives here\n", encoding="utf-8")
        for n in range(notes):
            lines = [f"# note {n}", ""] + [
                "- " + " ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(12)
            ]
            (ws / "memory" / f"note{n}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return port


def memory_of(pid: int) -> tuple[int, int]:
    """(Rss, Anonymous) bytes of ``pid``."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1]) * 1024
    return fields.get("Rss", 0), fields.get("Anonymous", 0)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares growth of y per x."""
    if len(points) < 2:
        return float("nan")
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else float("nan")


def disk(home: Path, agents: int) -> dict[str, int]:
    """Total bytes of the agents' kb.sqlite and kb.sqlite-wal, the largest WAL, and the home's size."""
    db = wal = largest = 0
    for i in range(agents):
        base = home / "agents" / agent_id(i) / "kb.sqlite"
        with contextlib.suppress(OSError):
            db += base.stat().st_size
        with contextlib.suppress(OSError):
            size = base.with_name("kb.sqlite-wal").stat().st_size
            wal += size
            largest = max(largest, size)
    total = sum(p.stat().st_size for p in home.rglob("*") if p.is_file() and not p.is_symlink())
    return {"db": db, "wal": wal, "largest_wal": largest, "home": total}


def mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


def main() -> int:
    parser = page.parser(__doc__, quick="smoke run: 200 agents, no idle wait", keep_home="keep the temp home after the run")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--notes", type=int, default=20)
    parser.add_argument("--nofile", type=int, default=None, help="the KB's soft and hard open-files limit")
    parser.add_argument("--max-open", type=int, default=None, help="gateway.knowledge.maxOpenArchives")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--idle", type=float, default=70.0, help="seconds without traffic before the at-rest figures")
    parser.add_argument("--rounds", type=int, default=3, help="more rounds over every agent (per-request growth)")
    parser.add_argument("--tracemalloc", action="store_true", help="measure Python's allocations in process instead")
    args = parser.parse_args()
    run = page.Run.begin("kb_agents", TITLE, METHOD)
    if args.quick:
        args.agents, args.idle = 200, 0.0

    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2, kb_pb2_grpc

    tmp = Path(tempfile.mkdtemp(prefix="kb-agents-"))
    home = tmp / "home"
    t0 = time.perf_counter()
    port = write_home(home, args.agents, args.notes, args.max_open)
    say(f"home with {args.agents} agents × {args.notes} notes in {time.perf_counter() - t0:.1f} s: {home}")
    if args.tracemalloc:
        try:
            run.finish(table(("figure", "value"), in_process(home, args.agents, args.rounds)), [], write_docs=args.write_docs)
            return 0
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def limit() -> None:
        if args.nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    log = open(tmp / "kb.log", "ab")  # noqa: SIM115 - the child's
    proc = subprocess.Popen([sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(home)],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit)
    log.close()
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    stub = kb_pb2_grpc.KnowledgeStub(channel)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    codes: Counter[str] = Counter()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"kb exited {proc.returncode}: {(tmp / 'kb.log').read_text()[-2000:]}")
            try:
                stub.GetIndexStatus(kb_pb2.GetIndexStatusRequest(agent_id=agent_id(0)), metadata=metadata, timeout=2)
                break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        rss0, anon0 = memory_of(proc.pid)
        say(f"kb up (pid {proc.pid}): Rss {mb(rss0)}, anonymous {mb(anon0)}, {open_files(proc.pid)} open files")

        def search(i: int, corpus: str = "memory") -> float:
            started = time.perf_counter()
            try:
                stub.Search(kb_pb2.SearchRequest(agent_id=agent_id(i), query=f"marker{i} harbour", corpus=corpus),
                            metadata=metadata, timeout=60)
                codes["OK"] += 1
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1
            return time.perf_counter() - started

        samples: list[tuple[int, int, int, int]] = []  # agents active, rss, anon, fds
        most_fds = 0
        step = max(1, args.agents // 10)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            for start in range(0, args.agents, step):
                batch = range(start, min(args.agents, start + step))
                list(pool.map(search, batch))
                list(pool.map(lambda i: search(i, "shared"), batch))
                rss, anon = memory_of(proc.pid)
                fds = open_files(proc.pid)
                most_fds = max(most_fds, fds)
                samples.append((batch[-1] + 1, rss, anon, fds))
                say(f"{batch[-1] + 1:5d} agents searched: Rss {mb(rss)}, anonymous {mb(anon)}, {fds} open files")
        first_round = time.perf_counter() - t0
        late = samples[1:] if len(samples) > 2 else samples
        per_rss = slope([(a, r) for a, r, _, _ in late])
        per_anon = slope([(a, n) for a, _, n, _ in late])
        say(f"every agent searched in {first_round:.1f} s; answers {dict(codes)}")

        before_rounds = memory_of(proc.pid)
        with ThreadPoolExecutor(args.concurrency) as pool:
            for _ in range(args.rounds):
                list(pool.map(search, range(args.agents)))
        after_rounds = memory_of(proc.pid)
        per_request = [(b - a) / max(1, args.rounds * args.agents) * 1000 for a, b in zip(before_rounds, after_rounds, strict=True)]

        # Reopening: warm (one agent, its archive open) against cold (the agent searched longest ago).
        warm = [search(args.agents - 1) for _ in range(50)]
        cold = [search(i) for i in range(0, min(50, args.agents))]
        warm_p50, cold_p50 = statistics.median(warm), statistics.median(cold)

        # WAL at peak, at rest, after a stop.
        for i in range(min(args.writes, args.agents)):
            note = home / "agents" / agent_id(i) / "workspace" / "memory" / "note0.md"
            with note.open("a", encoding="utf-8") as handle:
                handle.write(f"- appended {i} " + " ".join(WORDS[:20]) * 20 + "\n")
            stub.Refresh(kb_pb2.RefreshRequest(agent_id=agent_id(i), wait=True), metadata=metadata, timeout=60)
            search(i)
        peak = disk(home, args.agents)
        say(f"after {args.writes} writes: WAL {mb(peak['wal'])} (largest {mb(peak['largest_wal'])}), db {mb(peak['db'])}")
        if args.idle:
            say(f"idle for {args.idle:.0f} s")
            time.sleep(args.idle)
        rest = disk(home, args.agents)
        rest_rss, rest_anon = memory_of(proc.pid)
        rest_fds = open_files(proc.pid)
        proc.terminate()
        proc.wait(30)
        stopped = disk(home, args.agents)
    finally:
        channel.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    rss, anon = samples[-1][1], samples[-1][2]
    rows = [
        ("agents", f"{args.agents} ({args.notes} notes each); open-files limit {args.nofile or 'inherited'}; "
                   f"maxOpenArchives {args.max_open if args.max_open is not None else 'default'}"),
        ("answers", ", ".join(f"{k} {v}" for k, v in sorted(codes.items()))),
        ("KB at start", f"Rss {mb(rss0)}, anonymous {mb(anon0)}"),
        ("KB with every agent searched", f"Rss {mb(rss)}, anonymous {mb(anon)}, {samples[-1][3]} open files (most {most_fds})"),
        ("growth per active agent", f"Rss {per_rss / 1e3:.1f} KB, anonymous {per_anon / 1e3:.1f} KB"),
        (f"growth per 1,000 searches ({args.rounds} more rounds)", f"Rss {per_request[0] / 1e3:.1f} KB, anonymous {per_request[1] / 1e3:.1f} KB"),
        ("KB after the idle wait", f"Rss {mb(rest_rss)}, anonymous {mb(rest_anon)}, {rest_fds} open files"),
        ("search p50, archive open (warm)", f"{warm_p50 * 1000:.2f} ms"),
        ("search p50, archive reopened (cold)", f"{cold_p50 * 1000:.2f} ms (a reopen costs {1000 * (cold_p50 - warm_p50):.2f} ms)"),
        ("disk after the writes (peak)", f"WAL {mb(peak['wal'])} (largest {mb(peak['largest_wal'])}), db {mb(peak['db'])}, home {mb(peak['home'])}"),
        (f"disk after {args.idle:.0f} s idle", f"WAL {mb(rest['wal'])} (largest {mb(rest['largest_wal'])}), db {mb(rest['db'])}, home {mb(rest['home'])}"),
        ("disk after a clean stop", f"WAL {mb(stopped['wal'])} (largest {mb(stopped['largest_wal'])}), db {mb(stopped['db'])}, home {mb(stopped['home'])}"),
        ("per agent at rest", f"{mb(stopped['db'] / args.agents)} of kb.sqlite"),
    ]
    run.finish(table(("figure", "value"), rows), [], write_docs=args.write_docs)
    if args.keep_home:
        say(f"home kept: {home}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def in_process(home: Path, agents: int, rounds: int) -> list[tuple[str, str]]:
    """Step 7 of the method: Python's allocations per agent and per search, with tracemalloc."""
    import asyncio
    import logging
    import tracemalloc

    import structlog

    from gateway.config import load_config
    from services.kb.archive.archives import Archives
    from services.kb.vault.registry import Vaults

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    config = load_config(home)

    async def passing() -> bool:
        return True

    async def run() -> list[tuple[str, float]]:
        archives = Archives(config.agents, sync=passing)
        vaults = Vaults(config.agents, archives.executor, handles=archives.handles)

        async def round_(ids: range) -> None:
            for i in ids:
                await archives.search(agent_id(i), f"marker{i} harbour", 6, False)
                await vaults.search(agent_id(i), "harbour", 6, False)

        half = agents // 2
        await round_(range(half))
        tracemalloc.start(5)
        first = tracemalloc.take_snapshot()
        await round_(range(half, agents))
        second = tracemalloc.take_snapshot()
        for _ in range(rounds):
            await round_(range(agents))
        third = tracemalloc.take_snapshot()
        per_agent = sum(s.size_diff for s in second.compare_to(first, "filename")) / (agents - half)
        per_search = sum(s.size_diff for s in third.compare_to(second, "filename")) / (rounds * agents * 2) * 1000
        say(f"open archives {archives.handles.open_count()} (cap {archives.handles.cap})")
        for stat in second.compare_to(first, "lineno")[:8]:
            say(f"  per agent {stat.size_diff / (agents - half):8.0f} B  {stat.traceback[0]}")
        for stat in third.compare_to(second, "lineno")[:5]:
            say(f"  rounds     {stat.size_diff:8.0f} B  {stat.traceback[0]}")
        await vaults.settle()
        vaults.close()
        archives.close()
        archives.handles.close_all()
        return [("Python bytes per active agent", per_agent), ("Python bytes per 1,000 searches", per_search)]

    return [(name, f"{value / 1e3:.1f} KB") for name, value in asyncio.run(run())]


if __name__ == "__main__":
    raise SystemExit(main())
