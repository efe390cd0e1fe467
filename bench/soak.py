"""Benchmark: the soak. The whole suite under steady mixed traffic for a long while: does what it holds stop growing?

Run:  ``.venv/bin/python bench/soak.py [--agents 200] [--minutes 20] [--warmup-minutes 2]
[--seed 7] [--out DIR] [--write-docs]``  (not in ``make test`` nor ``make bench``: it takes the
minutes it is given, plus about two for the start, the check at rest and the stop).
``.venv/bin/python bench/soak.py --from-run DIR`` runs nothing: it writes the page a finished
run would have written with ``--write-docs``, from the report and plot that run left in ``DIR``.

Method
------
A temp home with ``--agents`` agents (identity files, a 1 KB MEMORY.md and two notes each;
config.json written by the project's config writer, with one write key, metrics on free ports and
the stand-in reviewer, ``["gateway", "reviewer", "stand-in"]``). ``gateway up --log-format json``
starts the suite on free ports with the soft open-files limit ``--nofile`` (1,024 by default, the
common default of a login shell; the hard limit is inherited); its output, every child's log
lines, goes to ``DIR/suite.log``. Twenty shared notes are made first (not measured). Then, for
``--minutes``, from one asyncio process (bench/soak_traffic.py, bench/soak_clients.py):

- ``--rate`` (75) REST requests a second, open-loop, over random agents: GET and PUT of identity
  files, memory, shared and merged search, memory get, shared note create (half with ``confirm``),
  get and update;
- ``--notes-per-second`` (4) note files written straight into agents' ``memory/`` on disk (new
  files and rewrites, each with a unique token);
- a manual dream every ``--dream-every`` (10) s on the next agent, after two new ``REMEMBER:``
  lines in its transcript (the stand-in reviewer proposes them as adds);
- an MCP session over streamable HTTP every ``--mcp-every`` (3) s (SDK client: initialize,
  tools/list, two tool calls) and a ``gateway mcp --agent ID`` stdio process every
  ``--stdio-every`` (90) s, making eight tool calls 3 s apart before it is stopped;
- ``--runtimes`` (12) simulated runtimes registering sessions and reporting BUSY/IDLE every 3-8 s,
  half over REST, half over gRPC with a ``WatchDirectives`` stream.

Every ``--sample-seconds`` (30) s, and at the end: RSS (VmRSS, and the KB's RssAnon), open files
(/proc/PID/fd), threads and CPU time of the launcher and its five children; every SQLite database
and its ``-wal`` under the home; the home's size (allocated blocks); the dreaming files
(``audit.jsonl``, ``journal.jsonl``, ``DREAMS.md``, summed over agents); the load average; the
interval's judged requests (REST, session calls, MCP-over-HTTP tool calls: their count, p50,
p99, errors, 5xx) and the generator's own CPU. Then the traffic stops, the requests in flight
finish, every agent is checked (CLAUDE.md holds MEMORY.md's text; a search finds the token of
each soak note on its disk), the suite idles ``--rest-seconds`` (150: past the KB's idle close, 60 s,
and the shim's MCP child's idle stop, ``gateway.api.mcpIdleSeconds`` 120) and is sampled **at rest**,
then stopped with SIGTERM and the disk sampled once more **after the stop**.

Goals, judged after the warm-up (bench/harness/stats.py says how): RSS growth <= 10 MB per
process (least-squares slope x the measured span; first and last shown beside it), open files
and threads flat, each WAL <= 8 MB at rest, the p99 of the last 5 minutes within 1.5x the first 5
minutes after the warm-up, 0 errors and 0 5xx (the whole run, warm-up included). PASS/FAIL lines
are printed; the exit code is 0 whatever they say, non-zero only when the benchmark itself could
not run. ``DIR`` (default ``bench/results/soak``, git-ignored) gets ``soak.md`` (the report),
``soak.png`` (RSS, open files and latency over time), ``samples.json`` and ``suite.log``; with
``--write-docs`` the report also becomes ``docs/benchmarks/soak.md``, the plot beside it
(bench/harness/long_run_page.py). The machine may be shared: the load average is in every sample.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import BENCH_DIR, long_run_page, page
from harness.procs import stop_on_signals
from harness.report import say
from harness.stats import interval_summary, percentile

import soak_report as report
from soak_clients import McpTraffic, SessionTraffic
from soak_traffic import MAX_IN_FLIGHT, Recorder, RestTraffic, agreement, family, judged
from suite_up import GatewayUp, disk_figures, open_files_limit, proc_figures, write_fleet_home

READY_TIMEOUT_S = 600.0
STAND_IN = ["gateway", "reviewer", "stand-in"]
SETUP_SHARED_NOTES = 20
TITLE = "Soak: the whole suite under steady traffic"
METHOD = """\
The whole suite, started with `gateway up` in a temporary home of 200 agents, gets 20 minutes of
steady mixed traffic from one process: REST reads, writes and searches, shared notes, note files
written straight to disk, a dream every 10 s, MCP sessions over HTTP and stdio, and runtimes
reporting sessions over REST and gRPC. Every 30 s each of the six processes is sampled (memory,
open files, threads, CPU) with the disk and the requests of the interval. After a 2-minute
warm-up the goals are judged: memory that keeps growing, files or threads that leak, WAL files
left large, latency that drifts up, and any error. Then every agent's CLAUDE.md and search are
checked against its files. [Capacity and long runs](../capacity.md) says how to run it and what
each figure means."""


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def snapshot(up: GatewayUp, home: Path, t: float, phase: str) -> dict[str, Any]:
    """One sample of the processes and the disk (run in a thread: the walk takes a while)."""
    procs: dict[str, Any] = {}
    if phase != "stopped":
        for name, pid in up.pids().items():
            fig = proc_figures(pid)
            procs[name] = None if fig is None else fig.__dict__
    disk = disk_figures(home)
    return {"t": t, "phase": phase, "procs": procs, "disk": disk.__dict__, "load": os.getloadavg()[0]}


class Sampler:
    """Samples at fixed times after the traffic started; each with the requests completed since the last."""

    def __init__(self, up: GatewayUp, home: Path, rec: Recorder, warmup_s: float) -> None:
        self.up = up
        self.home = home
        self.rec = rec
        self.warmup_s = warmup_s
        self.samples: list[dict[str, Any]] = []
        self.seen = 0
        self.last_t = 0.0
        self.last_cpu = own_cpu()

    async def take(self, t: float, phase: str | None = None) -> dict[str, Any]:
        phase = phase or ("warm-up" if t < self.warmup_s else "measured")
        sample = await asyncio.to_thread(snapshot, self.up, self.home, t, phase)
        if phase in ("warm-up", "measured") and t > 0:
            fresh = self.rec.records[self.seen:]
            self.seen = len(self.rec.records)
            lat = [r.ms for r in fresh if judged(r)]
            p50, p99 = interval_summary(lat)
            cpu = own_cpu()
            span = max(1e-6, t - self.last_t)
            traffic = [r for r in fresh if family(r.kind) not in ("check", "setup")]
            sample.update(requests=len(lat), rate=len(lat) / span, p50=p50, p99=p99,
                          errors=sum(1 for r in traffic if not r.ok), e5xx=sum(1 for r in traffic if r.status >= 500),
                          gen_cpu=100 * (cpu - self.last_cpu) / span)  # fmt: skip
            self.last_t, self.last_cpu = t, cpu
        self.samples.append(sample)
        procs = sample["procs"]
        kb = procs.get("kb") or {}
        say(f"{t / 60:5.1f} min {phase:8s} RSS " + " ".join(f"{n} {p['rss_mb']:.0f}" for n, p in procs.items() if p)
            + f" | KB files {kb.get('fds', '?')} | WAL {sum(sample['disk']['wals'].values()) / 2**20:.0f} MB"
            + (f" | {sample['requests']} req p99 {sample['p99']:.0f} ms, {sample['errors']} errors, {sample['e5xx']} 5xx"
               if "requests" in sample else "") + f" | load {sample['load']:.2f}")  # fmt: skip
        return sample


def preload() -> None:
    """Import what the traffic loops use before the clock starts: the MCP SDK alone takes about a
    second of CPU, which would otherwise stall the event loop (and the open-loop ticks) mid-run."""
    import grpc.aio  # noqa: F401
    import httpx2  # noqa: F401
    from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: F401
    from mcp.client.streamable_http import streamable_http_client  # noqa: F401

    from gateway.v1 import watcher_pb2, watcher_pb2_grpc  # noqa: F401
    from gateway_http.errors import http_status  # noqa: F401


async def traffic_run(args: argparse.Namespace, fleet: Any, up: GatewayUp, out: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    rec = Recorder(time.perf_counter())
    rest = RestTraffic(fleet, rec, rng, args.seed)
    mcp = McpTraffic(fleet, rec, rng, rest, out)
    sessions = SessionTraffic(fleet, rec, rng, rest)
    try:
        for _ in range(SETUP_SHARED_NOTES):
            await rest.create_shared(f"/api/v1/agents/{rest.agent()}", kind="setup:shared_create", confirm=True)
        sampler = Sampler(up, fleet.home, rec, args.warmup_minutes * 60)
        sampler.seen = len(rec.records)  # the set-up's requests are not the first interval's
        duration = args.minutes * 60
        stop = asyncio.Event()
        rec.t0 = time.perf_counter()
        sampler.last_cpu = own_cpu()
        cpu0 = own_cpu()
        suite_cpu0 = suite_cpu(up)
        loops = [
            rest.rest_loop(stop, args.rate), rest.disk_loop(stop, args.notes_per_second),
            rest.dream_loop(stop, args.dream_every), mcp.http_loop(stop, args.mcp_every),
            mcp.stdio_loop(stop, args.stdio_every), sessions.run(stop, args.runtimes),
        ]
        tasks = [asyncio.create_task(job) for job in loops]
        watchdog = asyncio.create_task(watch_suite(up, stop))
        k = 0
        while True:
            t_next = min(k * args.sample_seconds, duration)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, t_next - rec.now()))
            for task in tasks:
                if task.done() and task.exception() is not None:
                    raise RuntimeError(f"a traffic loop failed: {task.exception()!r}") from task.exception()
            if stop.is_set():  # the suite went down: no more samples of its processes
                break
            await sampler.take(t_next)
            if t_next >= duration:
                break
            k += 1
        stop.set()
        watchdog.cancel()
        traffic_s = rec.now()
        gen_cpu = own_cpu() - cpu0
        suite_used = cpu_over(sampler.samples, suite_cpu0)
        say("traffic stopped; waiting for the requests in flight")
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, BaseException):
                raise RuntimeError(f"a traffic loop failed: {result!r}") from result
        await rest.drain()
        died = up.exit_line() if up.proc is not None and up.proc.poll() is not None else ""
        checks: tuple[int, int, list[str]] = (0, 0, [])
        if died:
            say(f"the suite went down {traffic_s / 60:.1f} min into the run: {died}; no check at rest")
        else:
            say(f"checking every agent's CLAUDE.md and search against its files ({len(fleet.agents)} agents)")
            checks = await agreement(rest, fleet)
            say(f"agreement: {checks[1]} of {checks[0]} checks disagree; idling {args.rest_seconds:.0f} s before the at-rest sample")
            await asyncio.sleep(args.rest_seconds)
            await sampler.take(rec.now(), "rest")
    finally:
        await rest.close()
    return {"rec": rec, "samples": sampler.samples, "traffic_s": traffic_s, "gen_cpu": gen_cpu, "suite_cpu": suite_used,
            "agreement": checks, "directives": sessions.directives, "shared_notes": len(rest.shared), "died": died}


async def watch_suite(up: GatewayUp, stop: asyncio.Event) -> None:
    """Stop the traffic as soon as ``gateway up`` exits (it stops the whole suite when one child dies)."""
    while not stop.is_set():
        if up.proc is None or up.proc.poll() is not None:
            stop.set()
            return
        await asyncio.sleep(0.5)


def cpu_over(samples: list[dict[str, Any]], start: dict[str, float]) -> dict[str, float]:
    """CPU seconds each process used from ``start`` to the last sample that saw it (nan: none did)."""
    out = {}
    for name, cpu0 in start.items():
        seen = [s["procs"][name]["cpu_s"] for s in samples if s["procs"].get(name)]
        out[name] = seen[-1] - cpu0 if seen else float("nan")
    return out


def suite_cpu(up: GatewayUp) -> dict[str, float]:
    """CPU seconds of each of the six processes so far (nan for one that is gone)."""
    out = {}
    for name, pid in up.pids().items():
        fig = proc_figures(pid)
        out[name] = float("nan") if fig is None else fig.cpu_s
    return out


def build_report(args: argparse.Namespace, argv: list[str], meta: dict[str, Any], run: dict[str, Any], out: Path) -> tuple[str, list[str]]:
    rec: Recorder = run["rec"]
    samples = run["samples"]
    warmup_s = args.warmup_minutes * 60
    found = report.verdicts(samples, rec, warmup_s, run["traffic_s"])
    checks, bad, examples = run["agreement"]
    if run["died"]:
        found.insert(0, report.Verdict(False, f"the suite stays up for the whole run: it went down "
                                              f"{run['traffic_s'] / 60:.1f} min in ({run['died']})"))  # fmt: skip
    else:
        found.insert(0, report.Verdict(True, f"the suite stays up for the whole run ({run['traffic_s'] / 60:.1f} min)"))
        found.append(report.Verdict(bad == 0, f"at rest every agent's CLAUDE.md and search agree with its files: "
                                              f"{bad} of {checks:,} checks disagree"))  # fmt: skip
    stopped = [s for s in samples if s["phase"] == "stopped"]
    after_stop = report.wal_verdict(stopped[-1]["disk"]["wals"], when="after the clean stop") if stopped else None
    cores = os.cpu_count() or 1
    gen_pct = 100 * run["gen_cpu"] / run["traffic_s"]
    suite_total = sum(run["suite_cpu"].values())
    lag = sorted(rec.lag_ms)
    verdict_lines = [v.line() for v in found]
    md = [f"## Soak: {args.agents} agents, {args.minutes:g} minutes", "",
          *long_run_page.about_lines("soak", argv, meta["commit"], meta["started"], meta["took_s"], meta["load_before"],
                                     meta["load_after"], after="the traffic"),
          f"- suite: `gateway up` with the soft open-files limit {meta['nofile']} (the KB's limits: soft {meta['kb_limit'][0]}, "
          f"hard {meta['kb_limit'][1]}); ready {meta['ready_s']:.1f} s after the spawn, every CLAUDE.md after "
          f"{meta['composed_s']:.1f} s",
          f"- traffic: {args.rate:g} REST requests/s, {args.notes_per_second:g} note files/s to disk, a dream every "
          f"{args.dream_every:g} s, an MCP HTTP session every {args.mcp_every:g} s, a stdio MCP process every "
          f"{args.stdio_every:g} s, {args.runtimes} session runtimes; warm-up {args.warmup_minutes:g} min; samples every "
          f"{args.sample_seconds:g} s; at rest after {args.rest_seconds:g} s idle",
          f"- load generator (this process): {run['gen_cpu']:.1f} CPU s over {run['traffic_s']:.0f} s = {gen_pct:.1f}% of "
          f"one core, {gen_pct / cores:.1f}% of the machine; open-loop ticks sent late: {len(lag):,} (p99 "
          f"{percentile(lag, 99) if lag else 0:.1f} ms late), not sent because {MAX_IN_FLIGHT} were in flight: "
          f"{rec.behind:,}",
          f"- the suite's six processes: {suite_total:.1f} CPU s over the traffic (to its last sample) = {100 * suite_total / run['traffic_s'] / cores:.1f}% "
          f"of the machine (" + ", ".join(f"{n} {c:.0f} s" for n, c in run["suite_cpu"].items()) + ")",
          f"- directives received on the gRPC sessions' streams: {run['directives']:,}; shared notes written: {run['shared_notes']:,}",
          "", "### Goals", "", *report.lines(verdict_lines)]
    if after_stop is not None:
        md.append(f"- info: {after_stop.text}")
    md += [f"- info: {line}" for line in report.kb_memory_split(samples)]
    md += ["", "### Per process (after the warm-up)", "", *report.process_summary(samples),
           "", "### Requests by kind (whole run)", "", *report.latency_table(rec),
           "", "### What the answers said", "", *report.lines(f"{k}: {v:,}" for k, v in sorted(rec.outcomes.items()))]
    if rec.examples or examples:
        md += ["", "### First errors", "", *report.lines(f"`{e}`" for e in rec.examples[:15] + examples[:10])]
    md += ["", "### The suite's log: lines at level warning or worse", "", *report.log_problems(out / "suite.log"),
           "", "### Samples", "", f"![RSS, open files and latency over the run]({args.plot_name})", "",
           *report.sample_tables(samples), ""]
    return "\n".join(md), verdict_lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, keep_home="keep the temp home after the run")
    p.add_argument("--agents", type=int, default=200, help="agents in the home (default 200)")
    p.add_argument("--minutes", type=float, default=20.0, help="minutes of traffic (default 20)")
    p.add_argument("--warmup-minutes", type=float, default=2.0, help="minutes not judged at the start (default 2)")
    p.add_argument("--seed", type=int, default=7, help="seed of the traffic and the notes (default 7)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "soak", help="where the report goes")
    p.add_argument("--rate", type=float, default=75.0, help="REST requests per second (default 75)")
    p.add_argument("--notes-per-second", type=float, default=4.0, help="note files written to disk per second (default 4)")
    p.add_argument("--dream-every", type=float, default=10.0, help="seconds between dreams (default 10)")
    p.add_argument("--mcp-every", type=float, default=3.0, help="seconds between MCP HTTP sessions (default 3)")
    p.add_argument("--stdio-every", type=float, default=90.0, help="seconds between stdio MCP processes (default 90)")
    p.add_argument("--runtimes", type=int, default=12, help="simulated runtimes with sessions (default 12)")
    p.add_argument("--sample-seconds", type=float, default=30.0, help="seconds between samples (default 30)")
    p.add_argument("--rest-seconds", type=float, default=150.0, help="idle seconds before the at-rest sample (default 150)")
    p.add_argument("--nofile", type=int, default=1024, help="soft open-files limit the suite starts with (default 1024; 0: inherit)")
    p.add_argument("--plot-name", default="soak.png", help="the plot's file name in --out (default soak.png)")
    p.add_argument("--from-run", type=Path, metavar="DIR",
                   help="run nothing: write docs/benchmarks/soak.md from the report (soak.md) and plot a finished run left in DIR")  # fmt: skip
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_run is not None:
        return long_run_page.from_run("soak", TITLE, METHOD, args.from_run.resolve())
    t0 = time.monotonic()
    stop_on_signals()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.log").unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    meta: dict[str, Any] = {"commit": page.commit(), "started": datetime.now(UTC), "load_before": page.load_average(),
                            "nofile": args.nofile or "inherited"}  # fmt: skip
    up: GatewayUp | None = None
    try:
        t = time.perf_counter()
        fleet = write_fleet_home(tmp / "home", args.agents, seed=args.seed, reviewer=STAND_IN)
        say(f"home with {args.agents} agents written in {time.perf_counter() - t:.1f} s ({tmp / 'home'}); starting gateway up")
        up = GatewayUp(fleet.home, out / "suite.log", args.nofile or None)
        up.start()
        meta["ready_s"] = up.wait_ready(READY_TIMEOUT_S)
        claude = [fleet.workspaces[a] / "CLAUDE.md" for a in fleet.agents]
        while not (claude[-1].exists() and all(p.exists() for p in claude)):
            up.check_alive()
            if time.perf_counter() - up.spawned > READY_TIMEOUT_S:
                raise RuntimeError("not every CLAUDE.md was composed")
            time.sleep(0.1)
        meta["composed_s"] = time.perf_counter() - up.spawned
        meta["kb_limit"] = open_files_limit(up.pids()["kb"]) or ("?", "?")
        say(f"ready after {meta['ready_s']:.1f} s, every CLAUDE.md after {meta['composed_s']:.1f} s; KB open-files limit "
            f"{meta['kb_limit']}; traffic for {args.minutes:g} min")  # fmt: skip
        preload()
        run = asyncio.run(traffic_run(args, fleet, up, out))
        meta["load_after"] = page.load_average()
        stop_s = up.stop()
        say(f"suite stopped in {stop_s:.1f} s; sampling the disk after the stop")
        run["samples"].append(snapshot(up, fleet.home, run["samples"][-1]["t"] + stop_s, "stopped"))
    except KeyboardInterrupt:
        say("interrupted; stopping the suite")
        return 130
    finally:
        if up is not None:
            up.stop()
        if args.keep_home:
            say(f"home kept under {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    meta["took_s"] = time.monotonic() - t0
    markdown, verdict_lines = build_report(args, argv, meta, run, out)
    report.dump(run["samples"], out / "samples.json")
    report.plot(run["samples"], args.warmup_minutes * 60, out / args.plot_name,
                f"soak: {args.agents} agents, {args.minutes:g} min, {meta['commit']}")  # fmt: skip
    long_run_page.publish("soak", TITLE, METHOD, markdown, verdict_lines, out, write_docs=args.write_docs)
    say(f"report, plot, samples and the suite's log in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
