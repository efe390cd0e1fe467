"""Benchmark: write -> CLAUDE.md latency of the watcher, its burst coalescing, and its idle cost.

Run:  ``.venv/bin/python bench/watcher_latency.py [--agents 50] [--writes 200] [--bursts 10]
[--fleet 1000] [--idle-seconds 20] [--seed 7] [--keep-home]``  (about a minute)

Method
------
Everything runs on this machine against the real watcher process
(``python -m gateway_cli.cli serve watcher --home H``, JSON log to a file in the
temp home), on free loopback ports, in a fresh temp home written like the
integration tests do (config.json first, then ``gateway.home.ensure_home``).
Only the watcher runs; no file API, no shim.

1. **inotify floor** (in this process, before any watcher starts): a thread
   runs ``watchfiles.watch(dir, debounce=1, step=1, rust_timeout=100)`` over a
   temp folder; the main thread writes a fresh file and times from the
   write's return to the moment the watch yields a change naming it (the
   timestamp is taken in the watching thread as the batch is yielded).
   Two rows: a bare write (open/write/close), and ``gateway.atomic.write_atomic``
   (temp file + rename, the file API's write), ``--floor-samples`` each. The
   second reads lower: the temp file's events start watchfiles' step loop
   before the write returns.
2. **write -> CLAUDE.md, sequential** (``--agents`` agents a00.., each with a
   small SOUL.md and MEMORY.md; default workspaces ``agents/<id>/workspace``):
   after the watcher is SERVING (grpc.health.v1) and every CLAUDE.md exists,
   and after a few unmeasured warm-up writes, ``--writes`` writes of MEMORY.md
   round robin over the agents, each with ``write_atomic`` and a unique marker
   line. The clock starts when ``write_atomic`` returns (its own fsyncs are
   not counted) and stops when the agent's CLAUDE.md on disk contains the
   marker. Detection is a **tight poll**: CLAUDE.md is read whole every
   0.2 ms (sleep 0.2 ms between reads; real resolution about 0.3 ms). Writes do
   not overlap: the next starts 2-20 ms (seeded random) after the previous
   one was seen, so each lands at a random phase of the watcher's loop.
   The watcher's own "composed" log lines give the compose+write time per
   pass and the number of passes (expected: one per write).
3. **burst**, two kinds, ``--bursts`` times each, a different agent each time;
   the clock starts when the LAST write returns and stops when CLAUDE.md
   holds the last content; after 0.3 s of quiet, the watcher's "composed"
   log lines for that agent since the burst began are counted.

   - *renames* (the goal's case): ten temp files are written and fsynced
     first, then renamed onto MEMORY.md back to back (write_atomic's last
     step), so the ten writes land within a fraction of a millisecond
     on a quiet disk (a busy one can delay each rename by milliseconds).
     Goal: at most 3 compositions, not 10, judged on the bursts whose ten
     renames landed within 5 ms (about two compose passes); a burst spread
     wider is a run of separate writes to the watcher and is shown, not judged.
   - *write_atomic calls*: ten whole ``write_atomic`` calls in a row. Their
     fsyncs pace them (about 1 ms each on an idle disk, 5-10 ms on a busy
     one), so when each write takes longer than a composition pass the
     watcher rightly composes after each; the row shows how long the ten
     writes took beside the count, without a goal.
4. **idle cost at fleet size**: a second watcher over ``--fleet`` agents
   (b0000.., each with a small SOUL.md and MEMORY.md). The initial composition
   is timed from the process spawn (and from SERVING) until every CLAUDE.md
   exists. After 2 s of settling, user+system CPU time of the process (all
   threads, /proc/<pid>/stat) is sampled over ``--idle-seconds`` s of
   idleness and shown as % of one core; RSS is VmRSS (and peak VmHWM) from
   /proc/<pid>/status. Then ``--fleet-writes`` (100) sequential writes, spread
   over the fleet, measure the latency at that fleet size (judged against the
   same p50/p99 goals, on their own lines).

Goals: p50 <= 10 ms, p99 <= 50 ms for write -> CLAUDE.md; the idle
watcher over 1,000 agents under 2% of a core and 150 MB RSS. Also judged: a
tight burst of 10 writes costs at most 3 compositions. PASS/FAIL lines
are printed; the script exits 0 whatever they say, non-zero only when the
benchmark itself could not run. The markdown table also goes to
``bench/results/watcher_latency.md`` (git-ignored). Every child process is
stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C or failure. The machine may be
shared with other work: the load average before the run is printed with the
results.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from harness import page
from harness.home import session
from harness.procs import cpu_seconds, status_kb
from harness.report import say, verdict
from harness.stats import percentile
from watcher_support import (
    BURST_WRITES,
    FLEET_WRITES,
    GOAL_BURST_PASSES,
    GOAL_IDLE_CPU_PCT,
    GOAL_P50_MS,
    GOAL_P99_MS,
    GOAL_RSS_MB,
    POLL_S,
    TIGHT_BURST_S,
    Burst,
    LogReader,
    bursts,
    inotify_floor,
    sequential,
    start_watcher,
    watch_is_live,
    write_and_see,
    write_home,
)

TITLE = "Watcher: write → CLAUDE.md on disk"
METHOD = """\
An agent's MEMORY.md is written with `gateway.atomic.write_atomic` (a unique marker in it) while a
real watcher process serves 50 agents; the clock starts when the write returns and stops when the
agent's CLAUDE.md on disk holds the marker. The floor is a bare watchfiles watch seeing the same
write. Bursts of back-to-back writes count how many compositions they cost, and a second watcher
over 1,000 agents gives the idle CPU, the memory and the same latency at that size."""

# --------------------------------------------------------------------------- report


def row(label: str, values: list[float], note: str = "") -> str:
    ms = sorted(v * 1000 for v in values)
    return (
        f"| {label} | {len(ms)} | {percentile(ms, 50):.2f} | {percentile(ms, 99):.2f} | {ms[-1]:.2f} | {note} |"
        if ms
        else f"| {label} | 0 | n/a | n/a | n/a | {note} |"
    )


def burst_note(runs: list[Burst]) -> str:
    spans = [1000 * b.span for b in runs]
    return (
        f"from the last write's return; compositions per burst: {', '.join(str(b.passes) for b in runs)}; "
        f"the {BURST_WRITES} writes took {min(spans):.2f}-{max(spans):.2f} ms"
    )


def burst_verdict(runs: list[Burst]) -> str:
    """The coalescing goal, judged on the bursts whose writes really landed together.

    A burst the disk spread over more than TIGHT_BURST_S is a run of separate
    writes to the watcher (each may rightly get its own pass), so it is shown in
    the table but not judged.
    """
    tight = [b for b in runs if b.span <= TIGHT_BURST_S]
    spread = len(runs) - len(tight)
    limit = f"{TIGHT_BURST_S * 1000:g} ms"
    if not tight:
        return (f"n/a  a burst of {BURST_WRITES} back-to-back writes costs <= {GOAL_BURST_PASSES} compositions: "
                f"no burst landed within {limit} (the disk paced the renames); rerun on a quieter machine")  # fmt: skip
    worst = max(b.passes for b in tight)
    note = f"; not judged: {spread} more whose renames the disk spread over more than {limit}" if spread else ""
    return verdict(
        worst <= GOAL_BURST_PASSES,
        f"a burst of {BURST_WRITES} back-to-back writes costs <= {GOAL_BURST_PASSES} compositions: at most {worst} "
        f"over {len(tight)} bursts whose renames landed within {limit}{note}",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, keep_home="keep the temp homes (logs, config) after the run")
    p.add_argument("--agents", type=int, default=50, help="agents of the latency watcher (default 50)")
    p.add_argument("--writes", type=int, default=200, help="sequential measured writes (default 200)")
    p.add_argument("--bursts", type=int, default=10, help=f"bursts of {BURST_WRITES} writes (default 10)")
    p.add_argument("--floor-samples", type=int, default=200, help="inotify floor samples per kind (default 200)")
    p.add_argument("--fleet", type=int, default=1000, help="agents of the idle-cost watcher (default 1000; 0 skips)")
    p.add_argument("--fleet-writes", type=int, default=FLEET_WRITES,
                   help=f"sequential writes measured on the fleet watcher (default {FLEET_WRITES})")  # fmt: skip
    p.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU sampling window (default 20)")
    p.add_argument("--seed", type=int, default=7, help="seed of the markers and gaps (default 7)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("watcher_latency", TITLE, METHOD, argv)
    import watchfiles

    rng = random.Random(args.seed)
    results: dict[str, Any] = {}
    with session("bench-watcher-", keep=args.keep_home, logs=None, unbuffered=True) as (tmp, children):
        say(f"inotify floor: {args.floor_samples} bare writes, {args.floor_samples} write_atomic (temp dir {tmp})")
        results["floor_bare"] = inotify_floor(tmp, args.floor_samples, atomic=False)
        results["floor_atomic"] = inotify_floor(tmp, args.floor_samples, atomic=True)

        home = tmp / "home50"
        ids = [f"a{i:02d}" for i in range(args.agents)]
        workspaces = write_home(home, ids)
        boot = start_watcher(children, "watcher", home, workspaces)
        say(f"watcher over {args.agents} agents: SERVING after {boot['serving']:.2f}s, "
            f"all CLAUDE.md after {boot['composed']:.2f}s")  # fmt: skip
        log = LogReader(children.logs["watcher"])
        watch_is_live(workspaces[0], children, "watcher")
        for i, ws in enumerate(workspaces[:10]):  # warm-up, not measured
            write_and_see(ws, ws.parent.name, f"warm-{i}-{rng.getrandbits(48):012x}")
        pid = children.procs["watcher"].pid
        cpu0 = cpu_seconds(pid)
        t_run = time.perf_counter()
        seq = sequential(workspaces, args.writes, rng, log, "w")
        seq_cpu = (cpu_seconds(pid) - cpu0) / (time.perf_counter() - t_run)
        children.check_alive("watcher")
        say(f"sequential: p50 {percentile(seq.latencies, 50) * 1000:.2f} ms, p99 "
            f"{percentile(seq.latencies, 99) * 1000:.2f} ms, {seq.note()}")  # fmt: skip
        burst = bursts(workspaces, args.bursts, rng, log, staged=True)
        paced = bursts(workspaces, args.bursts, rng, log, staged=False)
        children.check_alive("watcher")
        for name, runs in (("staged bursts", burst), ("write_atomic bursts", paced)):
            say(f"{name} (latency/compositions/span of the {BURST_WRITES} writes): "
                + ", ".join(f"{b.latency * 1000:.1f} ms/{b.passes}/{b.span * 1000:.1f} ms" for b in runs))
        time.sleep(1.0)
        c0, w0 = cpu_seconds(pid), time.perf_counter()
        time.sleep(5.0)
        idle50 = 100 * (cpu_seconds(pid) - c0) / (time.perf_counter() - w0)
        rss50 = status_kb(pid, "VmRSS") / 1024
        children.stop("watcher")
        results.update(seq=seq, burst=burst, paced=paced, boot50=boot, idle50=idle50, rss50=rss50, seq_cpu=seq_cpu)

        fleet: dict[str, Any] | None = None
        if args.fleet > 0:
            home = tmp / "fleet"
            ids = [f"b{i:04d}" for i in range(args.fleet)]
            t_setup = time.perf_counter()
            fleet_ws = write_home(home, ids)
            say(f"fleet home with {args.fleet} agents written in {time.perf_counter() - t_setup:.2f}s; starting watcher")
            fboot = start_watcher(children, "fleet", home, fleet_ws)
            flog = LogReader(children.logs["fleet"])
            first_pass = flog.events(0, "composed")
            say(f"fleet watcher: SERVING after {fboot['serving']:.2f}s, all {args.fleet} CLAUDE.md after "
                f"{fboot['composed']:.2f}s ({len(first_pass)} compositions logged)")  # fmt: skip
            fpid = children.procs["fleet"].pid
            time.sleep(2.0)
            c0, w0 = cpu_seconds(fpid), time.perf_counter()
            samples = []
            end = w0 + args.idle_seconds
            while time.perf_counter() < end:
                time.sleep(min(1.0, max(0.0, end - time.perf_counter())))
                samples.append(status_kb(fpid, "VmRSS"))
                children.check_alive("fleet")
            idle_s = time.perf_counter() - w0
            idle_cpu = 100 * (cpu_seconds(fpid) - c0) / idle_s
            rss = max(samples) / 1024
            hwm = status_kb(fpid, "VmHWM") / 1024
            say(f"fleet idle: {idle_cpu:.2f}% of a core over {idle_s:.1f}s, RSS {rss:.1f} MB (peak {hwm:.1f} MB)")
            watch_is_live(fleet_ws[0], children, "fleet")
            fseq = sequential(fleet_ws[:: max(1, len(fleet_ws) // args.fleet_writes)], args.fleet_writes, rng, flog, "f")
            say(f"fleet sequential: p50 {percentile(fseq.latencies, 50) * 1000:.2f} ms, p99 "
                f"{percentile(fseq.latencies, 99) * 1000:.2f} ms")  # fmt: skip
            children.stop("fleet")
            fleet = {"boot": fboot, "idle_cpu": idle_cpu, "idle_s": idle_s, "rss": rss, "hwm": hwm, "seq": fseq,
                     "startup_passes": len(first_pass)}  # fmt: skip

    seq, burst = results["seq"], results["burst"]
    p50 = percentile(seq.latencies, 50) * 1000
    p99 = percentile(seq.latencies, 99) * 1000
    burst_lat = sorted(b.latency for b in burst)
    md = ["## Watcher: write -> CLAUDE.md latency and idle cost", ""]
    md += [
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- machine: {page.machine(f', watchfiles {watchfiles.__version__}')}; load average before the run "
        f"{run.load_before} (other work on the machine skews the numbers)",
        "- write: `gateway.atomic.write_atomic` of MEMORY.md (about 1 KB) with a unique marker; the clock starts "
        "when it returns (its fsyncs are not counted)",
        f"- detection: tight poll, CLAUDE.md read whole every {POLL_S * 1000:.1f} ms until it holds the marker "
        "(resolution about 0.3 ms)",
        "- floor: `watchfiles.watch(debounce=1, step=1)` in a thread of the bench process; time from the write's "
        "return to the change batch naming the file",
        "",
        "| measurement | samples | p50 ms | p99 ms | max ms | notes |",
        "|---|---:|---:|---:|---:|---|",
        row("inotify floor: watchfiles event after a bare write", results["floor_bare"]),
        row("inotify floor: watchfiles event after write_atomic", results["floor_atomic"]),
        row(f"write -> CLAUDE.md, {args.agents} agents, sequential", seq.latencies,
            seq.note()),  # fmt: skip
        row("  of which the watcher's compose + write (its log)", [m / 1000 for m in seq.compose_ms],
            "per pass, read 6 files + write_atomic CLAUDE.md"),  # fmt: skip
        row(f"burst of {BURST_WRITES} renames -> CLAUDE.md with the last", burst_lat, burst_note(burst)),
        row(f"burst of {BURST_WRITES} write_atomic calls -> CLAUDE.md with the last",
            sorted(b.latency for b in results["paced"]), burst_note(results["paced"])),  # fmt: skip
    ]
    if fleet:
        md.append(row(f"write -> CLAUDE.md, {args.fleet:,} agents, sequential", fleet["seq"].latencies,
                      fleet["seq"].note()))  # fmt: skip
    md += [
        "",
        "| watcher | value | goal |",
        "|---|---:|---|",
        f"| {args.agents} agents: start to SERVING / to every CLAUDE.md | {results['boot50']['serving']:.2f} s / "
        f"{results['boot50']['composed']:.2f} s | |",
        f"| {args.agents} agents: idle CPU (5 s) / RSS | {results['idle50']:.2f}% / {results['rss50']:.1f} MB | |",
        f"| {args.agents} agents: CPU while writes are measured | {100 * results['seq_cpu']:.1f}% of a core | |",
    ]
    verdicts = [
        verdict(p50 <= GOAL_P50_MS, f"write -> CLAUDE.md p50 <= {GOAL_P50_MS:g} ms: {p50:.2f} ms"),
        verdict(p99 <= GOAL_P99_MS, f"write -> CLAUDE.md p99 <= {GOAL_P99_MS:g} ms: {p99:.2f} ms"),
        burst_verdict(burst),
    ]
    if fleet:
        md += [
            f"| {args.fleet:,} agents: initial composition (spawn to every CLAUDE.md) | {fleet['boot']['composed']:.2f} s "
            f"(SERVING after {fleet['boot']['serving']:.2f} s) | |",
            f"| {args.fleet:,} agents: idle CPU over {fleet['idle_s']:.0f} s | {fleet['idle_cpu']:.2f}% of a core "
            f"| < {GOAL_IDLE_CPU_PCT:g}% |",
            f"| {args.fleet:,} agents: RSS (VmRSS, max of 1 s samples) | {fleet['rss']:.1f} MB (peak VmHWM "
            f"{fleet['hwm']:.1f} MB) | < {GOAL_RSS_MB:g} MB |",
        ]
        fp50 = percentile(fleet["seq"].latencies, 50) * 1000
        fp99 = percentile(fleet["seq"].latencies, 99) * 1000
        verdicts += [
            verdict(fp50 <= GOAL_P50_MS, f"write -> CLAUDE.md p50 <= {GOAL_P50_MS:g} ms at {args.fleet:,} agents: {fp50:.2f} ms"),
            verdict(fp99 <= GOAL_P99_MS, f"write -> CLAUDE.md p99 <= {GOAL_P99_MS:g} ms at {args.fleet:,} agents: {fp99:.2f} ms"),
            verdict(fleet["idle_cpu"] < GOAL_IDLE_CPU_PCT,
                    f"idle watcher over {args.fleet:,} agents < {GOAL_IDLE_CPU_PCT:g}% of a core: "
                    f"{fleet['idle_cpu']:.2f}%"),  # fmt: skip
            verdict(fleet["rss"] < GOAL_RSS_MB,
                    f"idle watcher over {args.fleet:,} agents < {GOAL_RSS_MB:g} MB RSS: {fleet['rss']:.1f} MB"),  # fmt: skip
        ]
    markdown = "\n".join(md)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
