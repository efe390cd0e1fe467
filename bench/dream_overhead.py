"""Benchmark: the overhead of a nightly dream pass, with a reviewer that answers at once.

Run:  ``.venv/bin/python bench/dream_overhead.py [--agents 1000] [--grpc-agents 100] [--seed 11]
[--quick] [--keep-home]``
(``--quick`` = 100 agents, 20 over gRPC: a smoke run of about 20 s; the full
run takes about three minutes on 2 cores.)

Method
------
0. **Home** (a fresh temp dir): ``--agents`` agents plus ``WARMUP`` warm-up
   agents (run first, never counted). Each workspace holds an 8 KB MEMORY.md
   (``dream_common.memory_of_size``: a title, a pinned ``## User`` section, six
   durable sections with sub-headings, intro paragraphs and about 110 one-line
   facts; 8,000-8,192 chars), a 1 KB ``memory/notes.md`` and an empty
   ``memory/archive/`` folder; each agent has one session transcript of eight
   messages, an hour old (so the quiet window says go and the reviewer is
   called). ``gateway.memory.memoryBudgetChars`` is 12,000, so every file is
   under budget and the add is applied (at the default 8,000 the 8 KB file is
   over budget and the add is skipped). The dreaming schedule is put 12 hours
   away, with no stagger, so the dreaming process of step 4 never starts a
   scheduled run of its own.
   **The reply** of each agent (``<home>/bench/replies/<id>.json``, the
   reviewer protocol's JSON) has three ops on real lines of its MEMORY.md: a
   remove of one fact, a replace of another by a rewording, an add of a new
   fact. So every pass commits (pruned archive, backup, compare-and-swap write,
   journal), runs the recall check (one Refresh, two Searches) and audits.
1. **KB**: ``python -m gateway_cli.cli serve kb`` on a free port; after SERVING,
   ``Refresh(wait)`` of every agent (the first index; timed, info). The
   dreaming code reaches the KB only over gRPC (``peer_client.KbIndex``, the
   class the dreaming process uses); nothing here opens a kb.sqlite.
2. **In-process passes** (the bench process drives the real pipeline; RSS and
   CPU below are the bench process's). Per agent, what the scheduler does
   around a run, with the real objects: ``StateStore.lock(id).acquire()``,
   ``Dreamer.check`` (a quiet activity source stands in for the watcher; the
   transcripts' mtime is read for real), ``RunLock.claim_night``,
   ``Dreamer.run`` (= ``nightly.run``, trigger schedule, mode auto) and
   ``RunLock.record_run``. Agents one after the other; per-agent time is that
   whole sequence. Two variants of the reviewer, each a full pass over every
   agent:

   - **(a) real reviewer path**: ``reviewer.run_reviewer`` with the agent's
     ``reviewerCommand`` = ``/bin/cat <reply file>`` (a real subprocess in its
     own session, prompt on stdin, output parsed by ``parse_reply``), in the
     agent's folder of the home, the environment of ``reviewer_environment``;
     as ``services/dreaming/main.py`` does.
   - **(b) in-process stand-in** for ``Deps.review``: returns the reply parsed
     once beforehand; so (b) is our code only.

   Between the passes every workspace is put back as it was (MEMORY.md, no
   pruned.md, no .dreaming/) and pass (b) claims the next night. A breakdown
   of both passes times the pipeline's steps by wrapping the functions
   ``nightly.run`` calls by name (gather, build_prompt, select, plan, commit,
   the recall check, the audit) and the KB calls (info).
3. **The floor**, per agent, in the same run, before the passes (each agent's
   workspace put back and refreshed after):

   - *bare writes + KB*: the files a pass writes before its recall check, in
     the agent's own workspace so the KB's watch sees the same events (state
     claim, pruned.md with the two removed blocks, the backup, the new
     MEMORY.md: each a temp file, fsync, rename, fsync of the folder; the
     journal: append + fsync), then ``KbIndex.refresh`` (Refresh(wait): the
     KB reindexes MEMORY.md and pruned.md) and the recall check's two Searches
     at once, then the writes after it (DREAMS.md, audit.jsonl, state record),
     all by bare ``os`` calls, as one sequence;
   - *bare spawn*: ``asyncio.create_subprocess_exec('/bin/cat', reply)`` in
     its own session with three pipes, a prompt-sized stdin, stdout read to
     EOF, exit awaited: the reviewer subprocess alone;
   - (info) ``refresh`` + one ``search`` with nothing changed (the KB round
     trip alone), and one fsync'd append.

   The *floor sum* of an agent is its bare writes + KB sequence + bare spawn:
   what any implementation of the pass must wait for, given the KB's
   Refresh(wait) and the durability the pass promises.
4. **Service path**: ``python -m gateway_cli.cli serve dreaming`` on the same home;
   ``Dreaming.RunNow`` (sync gRPC client, internal token) for the first
   ``--grpc-agents`` agents, one at a time, mode auto: the real reviewer
   subprocess, the real recall check against the KB. Latency per call, the
   handler time from the service's own rpc log, its CPU per call and RSS.

Memory is *flat* when the RSS after the last agent of a pass is at most
``FLAT_MB`` (5 MB) above the RSS after its first 100 agents (a leak of one
8 KB MEMORY.md text per run would add 7 MB over 900 runs). Goal (tracker):
p99 per agent <= 20 ms and flat memory. Percentiles are nearest-rank. The
script prints a markdown table with PASS/FAIL (also written to
``bench/results/dream_overhead.md``, git-ignored) and exits 0 whatever the
goals say; non-zero only when the benchmark itself could not run. Children
are stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C or failure; the temp home
is removed unless ``--keep-home``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from harness import page
from harness.home import session
from harness.procs import Children, cpu_seconds, rpc_seconds, rss_mb, start_service
from harness.report import latency_cell, Figures, fmt_ms, say
from harness.stats import percentile
import dream_common as dc
from dream_overhead_setup import (
    WARMUP,
    BUDGET_CHARS,
    GOAL_P99_S,
    FLAT_MB,
    RPC_TIMEOUT_S,
    Agent,
    put_back,
    write_setup,
)
from dream_overhead_passes import (
    Floors,
    in_process,
)

TITLE = "Dream pass overhead: 1,000 agents, an 8 KB MEMORY.md each"
METHOD = """\
The bench process drives what the scheduler does around a dream for each of 1,000 agents (run lock,
quiet check, claim, `Dreamer.run`, record) with the real objects and a real KB process: once
through the real reviewer path (a `/bin/cat` subprocess returning a canned reply with a remove, a
replace and an add) and once with an in-process stand-in. The floor, measured per agent in the
same run, is the same writes made with bare `os` calls, the KB's refresh and searches and a bare
spawn. Last, `Dreaming.RunNow` over gRPC against a running dreaming process."""

def grpc_phase(home: Path, ports: dict[str, int], agents: list[Agent], children: Children) -> dict[str, Any]:
    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

    pid = start_service(children, "dreaming", home, ports["dreaming"], dc.START_TIMEOUT_S)
    channel = grpc.insecure_channel(f"127.0.0.1:{ports['dreaming']}")
    stub = dreaming_pb2_grpc.DreamingStub(channel)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    lat: list[float] = []
    problems: list[str] = []
    rss: dict[int, float] = {}
    try:
        warmup = agents[:3]  # put back after
        for agent in warmup:
            stub.RunNow(dreaming_pb2.RunNowRequest(agent_id=agent.id), metadata=metadata, timeout=RPC_TIMEOUT_S)
        for agent in warmup:
            put_back(home, agent)
        rss[0] = rss_mb(pid)
        cpu0 = cpu_seconds(pid)
        half = max(1, len(agents) // 2)
        for n, agent in enumerate(agents, 1):
            t0 = time.perf_counter()
            reply = stub.RunNow(dreaming_pb2.RunNowRequest(agent_id=agent.id), metadata=metadata, timeout=RPC_TIMEOUT_S)
            lat.append(time.perf_counter() - t0)
            applied = sum(1 for op in reply.ops if op.status == "applied")
            if reply.status != "applied" or applied != 3 or not any(x.startswith("Recall checked") for x in reply.notes):
                problems.append(f"{agent.id}: {reply.status} {reply.reason} {applied} applied {list(reply.notes)}")
            if n in (half, len(agents)):
                rss[n] = rss_mb(pid)
        cpu = cpu_seconds(pid) - cpu0
        server = rpc_seconds(children.logs["dreaming"], "RunNow", len(warmup), len(agents))
    finally:
        channel.close()
    return {"lat": lat, "server": server, "cpu_ms": 1000 * cpu / max(1, len(agents)), "rss": rss, "problems": problems, "pid": pid}


# =========================================================================== report


def rss_cell(rss: dict[int, float]) -> str:
    return ", ".join(("start" if k == 0 else f"after {k:,}") + f" {v:.1f} MB" for k, v in sorted(rss.items()))


def flat(rss: dict[int, float]) -> tuple[bool, str]:
    marks = sorted(k for k in rss if k)
    first = 100 if 100 in rss else marks[0]
    last = marks[-1]
    growth = rss[last] - rss[first]
    return growth <= FLAT_MB, f"{growth:+.1f} MB from {first:,} to {last:,} agents"


def build_report(args: argparse.Namespace, setup: dict[str, Any], res: dict[str, Any] | None, grpc_res: dict[str, Any] | None,
                 meta: dict[str, str], note: str) -> tuple[str, list[str]]:  # fmt: skip
    figs = Figures()
    figs.add("Setup", f"{setup['agents']:,} agents (+{WARMUP} warm-up), MEMORY.md {setup['mem_min']:,}-{setup['mem_max']:,} chars "
             f"(budget {BUDGET_CHARS:,}), written in {setup['write_s']:.1f} s; KB first index of every agent {setup['index_s']:.1f} s, "
             f"KB RSS then {setup.get('kb_rss', float('nan')):.0f} MB")  # fmt: skip
    if res is None:
        figs.add("In-process passes", f"n/a ({note})", "p99 <= 20 ms", None)
    else:
        fl: Floors = res["floors"]
        for p in (res["a"], res["b"]):
            p99 = percentile(p.seconds, 99)
            figs.add(f"Pass {p.label}: per agent (lock, quiet check, claim, run, record)", latency_cell(p.seconds), "p99 <= 20 ms", p99 <= GOAL_P99_S)
            figs.add("  of which Dreamer.run (nightly.run)", latency_cell(p.run_s))
            figs.add("  total wall time / CPU of the bench process", f"{p.wall_s:.1f} s for {len(p.seconds):,} agents / "
                     f"{p.cpu_s:.1f} s ({1000 * p.cpu_s / len(p.seconds):.1f} ms per agent)")  # fmt: skip
            ok, why = flat(p.rss)
            figs.add("  RSS of the bench process (VmRSS)", rss_cell(p.rss), f"flat: <= +{FLAT_MB:.0f} MB after the first 100",
                     ok)  # fmt: skip
            figs.add("  flat?", why)
            if p.problems:
                figs.add("  runs not as expected", f"{len(p.problems)}: {p.problems[0][:300]}")
        sums = fl.sums()
        figs.add("Floor sum per agent: bare writes + KB Refresh(wait) + 2 Searches + bare spawn", latency_cell(sums),
                 "below 20 ms, or the goal cannot be met", percentile(sums, 99) <= GOAL_P99_S)  # fmt: skip
        figs.add("  bare writes of one pass (6 atomic writes, 1 fsynced append, 1 append: 13 fsyncs)", latency_cell(fl.writes))
        figs.add("  KB Refresh(wait) after those writes + the recall check's 2 Searches at once", latency_cell(fl.kb_reindex))
        figs.add("    of which Refresh(wait) (reindexes MEMORY.md and pruned.md)", latency_cell(fl.kb_refresh))
        figs.add("  bare spawn of /bin/cat (own session, 3 pipes, prompt on stdin)", latency_cell(fl.spawn))
        figs.add("KB Refresh(wait) + 1 Search, nothing changed (info)", latency_cell(fl.kb_roundtrip))
        figs.add("One fsync'd 100-byte append (info)", latency_cell(fl.fsync_one))
        a, b = res["a"], res["b"]
        figs.add("Pass (a) - floor sum, per agent (our code's share)", latency_cell([x - y for x, y in zip(a.seconds, sums, strict=True)]))
        figs.add("Pass (b) - (floor sum - bare spawn), per agent (our code's share)",
                 latency_cell([x - y for x, y in zip(b.seconds, fl.sequence, strict=True)]))  # fmt: skip
        for key, p in (("a", a), ("b", b)):
            steps: list[dict[str, float]] = res["steps"][key]
            if not steps:
                continue
            names = sorted({k for s in steps for k in s}, key=lambda k: -sum(s.get(k, 0.0) for s in steps))
            parts = ", ".join(f"{k} {1000 * sum(s.get(k, 0.0) for s in steps) / len(steps):.2f}" for k in names)
            figs.add(f"Pass ({key}) breakdown of Dreamer.run, mean ms (info)",
                     f"{parts}; Dreamer.run {1000 * sum(p.run_s) / len(p.run_s):.2f} in all, the sequence around it "
                     f"{1000 * (sum(p.seconds) - sum(p.run_s)) / len(p.seconds):.2f} (lock, quiet check, claim, record)")  # fmt: skip
    if grpc_res is None:
        figs.add("Service path: RunNow over gRPC", f"n/a ({note})")
    else:
        lat = grpc_res["lat"]
        figs.add(f"Service path: Dreaming.RunNow over gRPC, {len(lat)} agents, sequential (info)", latency_cell(lat))
        figs.add("  RunNow handler time in the service, rpc log (info)", latency_cell(grpc_res["server"]))
        figs.add("  dreaming process CPU per RunNow / RSS (info)", f"{grpc_res['cpu_ms']:.1f} ms / {rss_cell(grpc_res['rss'])}")
        if grpc_res["problems"]:
            figs.add("  runs not as expected", f"{len(grpc_res['problems'])}: {grpc_res['problems'][0][:300]}")
    md = [f"## Dream pass overhead benchmark ({setup['agents']:,} agents)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", figs.table()]
    verdicts = figs.verdicts()
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, quick="smoke run: 100 agents, 20 over gRPC", keep_home="keep the temp home (workspaces, logs)")
    p.add_argument("--agents", type=int, default=1000, help="agents in each pass (default 1000)")
    p.add_argument("--grpc-agents", type=int, default=100, help="agents run through RunNow of a dreaming process (default 100)")
    p.add_argument("--seed", type=int, default=11, help="workspace seed (default 11)")
    args = p.parse_args(argv)
    if args.quick:
        args.agents, args.grpc_agents = 100, 20
    args.grpc_agents = min(args.grpc_agents, args.agents)
    return args


async def first_index(agents: list[Agent], address: str, token: str) -> None:
    from services.dreaming.peer_client import KbIndex

    kb = KbIndex(address, token)
    sem = asyncio.Semaphore(4)

    async def one(agent_id: str) -> None:
        async with sem:
            await kb.refresh(agent_id)

    try:
        await asyncio.gather(*(one(a.id) for a in agents))
    finally:
        await kb.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("dream_overhead", TITLE, METHOD, argv)
    started = time.perf_counter()
    res: dict[str, Any] | None = None
    grpc_res: dict[str, Any] | None = None
    note = ""
    setup: dict[str, Any] = {"agents": args.agents, "mem_min": 0, "mem_max": 0, "write_s": float("nan"), "index_s": float("nan")}
    with session("bench-dream-overhead-", keep=args.keep_home) as (home, children):
        import structlog

        from gateway.home import read_internal_token
        from gateway.logs import configure

        t0 = time.perf_counter()
        warm, agents, ports = write_setup(home, args.agents, args.seed)
        write_s = time.perf_counter() - t0
        sizes = [len(a.memory) for a in agents]
        say(f"{len(agents):,} agents written in {write_s:.1f} s (MEMORY.md {min(sizes):,}-{max(sizes):,} chars)")
        # The pipeline logs as the service does (JSON lines), into a file rather than the terminal.
        configure("dreaming")
        log_file = open(home / "bench" / "in-process.log", "w", encoding="utf-8")  # noqa: SIM115
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(log_file))
        kb_address = f"127.0.0.1:{ports['kb']}"
        token = read_internal_token(home)
        try:
            kb_pid = start_service(children, "kb", home, ports["kb"], dc.START_TIMEOUT_S)
        except RuntimeError as exc:
            note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(str(exc))
            index_s = kb_rss = float("nan")
        else:
            t0 = time.perf_counter()
            asyncio.run(first_index(warm + agents, kb_address, token))
            index_s = time.perf_counter() - t0
            kb_rss = rss_mb(kb_pid)
            say(f"KB (pid {kb_pid}) indexed {len(warm) + len(agents):,} agents in {index_s:.1f} s; RSS {kb_rss:.0f} MB")
            res = asyncio.run(in_process(home, warm, agents, kb_address, token))
            try:
                grpc_res = grpc_phase(home, ports, agents[: args.grpc_agents], children)
                say(f"RunNow over gRPC: p99 {fmt_ms(percentile(grpc_res['lat'], 99))}")
            except RuntimeError as exc:
                note = f"the dreaming service failed: {str(exc).splitlines()[0]}"
                say(str(exc))
        setup.update(agents=len(agents), mem_min=min(sizes), mem_max=max(sizes), write_s=write_s, index_s=index_s, kb_rss=kb_rss)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{page.machine()}; load average before {run.load_before}, after {page.load_average()} "
        "(the machine is shared: numbers are noisy)",
        "agents": f"{args.agents:,} (seed {args.seed}), one after the other; each MEMORY.md about 8 KB with a pinned ## User section; "
        "the reply: a remove, a replace, an add on real lines; mode auto",
        "driven": "passes (a) and (b) in the bench process (its RSS and CPU), against the real KB process over gRPC; "
        f"the service path through a real dreaming process ({args.grpc_agents} agents)",
        "bench run time": f"{time.perf_counter() - started:.0f} s",
    }
    markdown, verdicts = build_report(args, setup, res, grpc_res, meta, note)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
