"""Benchmark: capacity. What one more agent costs the suite on one host, at 100, 1,000 and 3,000 agents.

Run:  ``.venv/bin/python bench/capacity.py [--agents 100,1000,3000] [--out DIR] [--write-docs]``
(``make bench`` runs it at 100 and 1,000 agents, about four minutes on 2 cores; 3,000 adds about
five more). ``.venv/bin/python bench/capacity.py --from-run DIR`` runs nothing: it writes the page a
finished run would have written with ``--write-docs``, from the report that run left in ``DIR``.

Method
------
For each size, in a fresh temp home (bench/suite_up.py: config.json written in one write by the
project's config writer, as ``gateway agents add`` writes it; per agent SOUL.md, USER.md, a 1 KB
MEMORY.md and two notes of about 1.2 KB under memory/), ``gateway up --log-format json`` is
spawned with the soft open-files limit ``--nofile`` (1,024 by default: the common default of a
login shell; the hard limit is inherited), and then, one after the other:

- **time to ready**: from the spawn to ``gateway up``'s ``ready`` line (every child answering its
  health check), and to every agent's CLAUDE.md on disk;
- **at rest**: the CPU time each of the six processes (the launcher and its five children) used
  from the spawn to ready, and from ready until start-up is over (what it still does once it
  says it is ready): until the six together use under 5% of one core over 5 s, at least
  ``--rest-seconds`` (10) and at most ``--settle-timeout`` (300) after ready; then its CPU over
  ``--idle-seconds`` (10) more as % of one core, and its RSS (VmRSS; the highest of one-second
  samples), open files and threads at the end;
- **write -> CLAUDE.md**: ``--writes`` (100) sequential PUTs of MEMORY.md over REST, spread over the
  fleet, each timed from the send until CLAUDE.md on disk holds its marker (read every 0.2 ms, as
  bench/watcher_latency.py does); p50 and p99;
- **first and warm search**: for ``--search-sample`` (100) agents spread over the fleet (none of
  them written to), one at a time, the agent's first search ever (its archive opened, and built
  when it was never indexed) and the same search again; p50 and p99 of each;
- **every agent active**: one search of every other agent (8 at a time), then the KB's RSS
  (and anonymous RSS), open files and threads, and the home's size and its WAL files.

The suite is stopped (SIGTERM) and its home deleted before the next size. The table gives each
figure per size and its **growth per added agent**, the slope between two consecutive sizes.
Verdicts: every search answered (no 5xx, no error) at each size. PASS/FAIL lines are printed;
the exit code is 0 whatever they say. ``DIR`` (default ``bench/results/capacity``, git-ignored)
gets ``capacity.md``, ``figures.json`` and each size's suite output (``suite-N.log``); with
``--write-docs`` the report also becomes ``docs/benchmarks/capacity.md`` (bench/harness/long_run_page.py).
The machine may be shared: the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from harness import BENCH_DIR, long_run_page, page
from harness.procs import stop_on_signals
from harness.report import say
from harness.stats import MB, Verdict, per_agent_growth, percentile, zero_verdict

import capacity_phases as phases
from capacity_phases import SizeFigures
from suite_up import PROCESSES, GatewayUp, disk_figures, write_fleet_home

READY_TIMEOUT_S = 900.0
TITLE = "Capacity: what one more agent costs"
METHOD = """\
At each fleet size (100, 1,000 and 3,000 agents by default) the whole suite is started with
`gateway up` in a fresh temporary home, with the soft open-files limit of a login shell (1,024).
Measured, one after the other: the time to ready and to every agent's CLAUDE.md; the CPU and memory
of each of the six processes once start-up is over; 100 writes of MEMORY.md, each timed until
CLAUDE.md shows it; a sample of agents' first and second search; and a search of every agent, after
which the KB's memory and open files are read. Each figure is given per size and as its growth per
added agent between two sizes. [Capacity and long runs](../capacity.md) says how to run it and
what each figure means."""


def run_size(args: argparse.Namespace, n: int, tmp: Path, out: Path) -> SizeFigures:
    fig = SizeFigures(n)
    home = tmp / f"home{n}"
    up: GatewayUp | None = None
    try:
        t = time.perf_counter()
        fleet = write_fleet_home(home, n, seed=args.seed)
        fig.home_s = time.perf_counter() - t
        say(f"{n} agents: home written in {fig.home_s:.1f} s; starting gateway up (soft open-files limit {args.nofile or 'inherited'})")
        up = GatewayUp(home, out / f"suite-{n}.log", args.nofile or None)
        phases.start(up, fleet, fig, READY_TIMEOUT_S)
        say(f"{n} agents: ready after {fig.ready_s:.1f} s, every CLAUDE.md after {fig.composed_s:.1f} s; "
            f"waiting until start-up is over (at least {args.rest_seconds:g} s), then {args.idle_seconds:g} s idle")  # fmt: skip
        phases.rest(up, fig, args.rest_seconds, args.idle_seconds, args.settle_timeout)
        say(f"{n} agents: start-up over {fig.settle_s:.1f} s after ready")
        say(f"{n} agents: RSS at rest " + ", ".join(f"{p} {f['rss_mb']:.0f} MB" for p, f in fig.rest.items()))
        phases.writes(fleet, fig, args.writes, phases.spread(fleet.agents, min(args.writes, n), offset=0))
        say(f"{n} agents: write -> CLAUDE.md p50 {percentile(sorted(fig.write_ms), 50):.1f} ms ({fig.write_errors} failed)")
        sampled = phases.spread(fleet.agents, min(args.search_sample, n), offset=max(1, n // (2 * min(args.writes, n))))
        took = phases.searches(up, fleet, fig, sampled)
        kb = fig.active.get("kb", {})
        say(f"{n} agents: every agent searched in {took:.1f} s, statuses {fig.search_status}; KB RSS "
            f"{kb.get('rss_mb', float('nan')):.0f} MB, {kb.get('fds', '?')} open files")  # fmt: skip
        disk = disk_figures(home)
        fig.disk = {"home_mb": disk.used_bytes / MB, "db_mb": sum(disk.databases.values()) / MB,
                    "wal_mb": sum(disk.wals.values()) / MB}  # fmt: skip
    except RuntimeError as exc:
        fig.failure = str(exc)
        say(f"{n} agents: FAILED: {str(exc).splitlines()[0]}")
    finally:
        if up is not None:
            fig.stop_s = up.stop()
        if not args.keep_home:
            shutil.rmtree(home, ignore_errors=True)
    return fig


# --------------------------------------------------------------------------- the table

Getter = Callable[[SizeFigures], float]
NAN = float("nan")


def _p(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) if values else NAN


def _proc(fig: SizeFigures, where: str, proc: str, key: str) -> float:
    table = getattr(fig, where)
    return float(table.get(proc, {}).get(key, NAN)) if isinstance(table.get(proc), dict) else NAN


def _sum(table: dict[str, dict[str, float]], key: str) -> float:
    return sum(f[key] for f in table.values()) if table else NAN


def _failed(fig: SizeFigures) -> float:
    return float(sum(c for s, c in fig.search_status.items() if s != 200)) if fig.started else NAN


# label, unit of the value, getter, unit of the per-agent growth, factor from the value's unit to it
MAIN: list[tuple[str, str, Getter, str, float]] = [
    ("time to ready (`ready` line)", "s", lambda f: f.ready_s, "ms", 1000),
    ("time to every CLAUDE.md", "s", lambda f: f.composed_s, "ms", 1000),
    ("RSS at rest, six processes", "MB", lambda f: _sum(f.rest, "rss_mb"), "KB", 1024),
    ("CPU from the spawn to ready, six processes", "s", lambda f: sum(f.cpu_to_ready.values()) if f.cpu_to_ready else NAN, "ms", 1000),
    ("start-up over, after ready (under 5% of a core)", "s", lambda f: f.settle_s, "ms", 1000),
    ("CPU from ready until then, six processes", "s", lambda f: sum(f.cpu_after_ready.values()) if f.cpu_after_ready else NAN, "ms", 1000),
    ("idle CPU after that, six processes", "% of a core", lambda f: sum(f.idle_pct.values()) if f.idle_pct else NAN, "%", 1),
    ("write -> CLAUDE.md p50", "ms", lambda f: _p(f.write_ms, 50), "ms", 1),
    ("write -> CLAUDE.md p99", "ms", lambda f: _p(f.write_ms, 99), "ms", 1),
    ("first search p50", "ms", lambda f: _p(f.first_ms, 50), "ms", 1),
    ("first search p99", "ms", lambda f: _p(f.first_ms, 99), "ms", 1),
    ("warm search p50", "ms", lambda f: _p(f.warm_ms, 50), "ms", 1),
    ("warm search p99", "ms", lambda f: _p(f.warm_ms, 99), "ms", 1),
    ("search of every other agent p50 (8 at a time)", "ms", lambda f: _p(f.all_ms, 50), "ms", 1),
    ("searches not answered 200 (every agent searched)", "", _failed, "", 1),
    ("KB RSS, every agent active", "MB", lambda f: _proc(f, "active", "kb", "rss_mb"), "KB", 1024),
    ("KB anonymous RSS, every agent active", "MB", lambda f: _proc(f, "active", "kb", "anon_mb"), "KB", 1024),
    ("KB open files, every agent active", "", lambda f: _proc(f, "active", "kb", "fds"), "", 1),
    ("KB threads, every agent active", "", lambda f: _proc(f, "active", "kb", "threads"), "", 1),
    ("home on disk, every agent active", "MB", lambda f: f.disk.get("home_mb", NAN), "KB", 1024),
    ("of which WAL files", "MB", lambda f: f.disk.get("wal_mb", NAN), "KB", 1024),
    ("stop (SIGTERM to exit)", "s", lambda f: f.stop_s, "ms", 1000),
]

PER_PROCESS: list[tuple[str, str, str, str, str, float]] = [
    # label, unit, where, key, growth unit, factor
    ("RSS at rest", "MB", "rest", "rss_mb", "KB", 1024),
    ("CPU from the spawn to ready", "s", "cpu_to_ready", "", "ms", 1000),
    ("CPU from ready until start-up is over", "s", "cpu_after_ready", "", "ms", 1000),
    ("idle CPU", "% of a core", "idle_pct", "", "%", 1),
    ("open files at rest", "", "rest", "fds", "", 1),
    ("threads at rest", "", "rest", "threads", "", 1),
]


def _cell(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value == int(value) or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"


def _growth(value: float, unit: str) -> str:
    """A growth per agent to three significant digits (float noise below 1e-6 shown as 0)."""
    if math.isnan(value):
        return "n/a"
    value = round(value, 6)
    return f"{value:+.3g}{f' {unit}' if unit else ''}"


def table(figs: list[SizeFigures]) -> list[str]:
    sizes = [f.agents for f in figs]
    head = " | ".join(f"{n:,} agents" for n in sizes)
    steps = " | ".join(f"per agent {a:,} -> {b:,}" for a, b in zip(sizes, sizes[1:], strict=False))
    md = [f"| figure | unit | {head} | {steps} |", "|---|---|" + "---:|" * (len(sizes) * 2 - 1)]
    for label, unit, get, g_unit, factor in MAIN:
        values = [get(f) for f in figs]
        growth = per_agent_growth(sizes, values)
        md.append(f"| {label} | {unit} | " + " | ".join(_cell(v) for v in values) + " | "
                  + " | ".join(_growth(g * factor, g_unit) for g in growth) + " |")
    md += ["", f"| process | figure | unit | {head} | {steps} |", "|---|---|---|" + "---:|" * (len(sizes) * 2 - 1)]
    for proc in PROCESSES:
        for label, unit, where, key, g_unit, factor in PER_PROCESS:
            values = []
            for f in figs:
                table_ = getattr(f, where)
                v = table_.get(proc, NAN)
                values.append(float(v[key]) if isinstance(v, dict) else float(v))
            growth = per_agent_growth(sizes, values)
            md.append(f"| {proc} | {label} | {unit} | " + " | ".join(_cell(v) for v in values) + " | "
                      + " | ".join(_growth(g * factor, g_unit) for g in growth) + " |")
    return md


def verdicts(figs: list[SizeFigures]) -> list[Verdict]:
    out = []
    for f in figs:
        if not f.started:
            out.append(Verdict(False, f"the suite is ready at {f.agents:,} agents: {f.failure.splitlines()[0] if f.failure else 'no'}"))
            continue
        total = sum(f.search_status.values())
        e5xx = sum(c for s, c in f.search_status.items() if s >= 500)
        out.append(zero_verdict(f"searches not answered at {f.agents:,} agents (every agent searched)", int(_failed(f)),
                                f"{total:,} searches, {e5xx:,} of them 5xx; statuses {dict(sorted(f.search_status.items()))}"))  # fmt: skip
        if f.write_errors:
            out.append(zero_verdict(f"failed writes -> CLAUDE.md at {f.agents:,} agents", f.write_errors))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, keep_home="keep each size's temp home")
    p.add_argument("--agents", default="100,1000,3000", help="fleet sizes, comma-separated (default 100,1000,3000)")
    p.add_argument("--writes", type=int, default=100, help="PUTs of MEMORY.md timed to CLAUDE.md per size (default 100)")
    p.add_argument("--search-sample", type=int, default=100, help="agents whose first and warm search are timed (default 100)")
    p.add_argument("--rest-seconds", type=float, default=10.0,
                   help="start-up is over no sooner than this after ready (default 10)")  # fmt: skip
    p.add_argument("--settle-timeout", type=float, default=300.0,
                   help="start-up is given up waiting for after this many seconds after ready (default 300)")  # fmt: skip
    p.add_argument("--idle-seconds", type=float, default=10.0, help="seconds of idle CPU measured after that (default 10)")
    p.add_argument("--nofile", type=int, default=1024, help="soft open-files limit the suite starts with (default 1024; 0: inherit)")
    p.add_argument("--seed", type=int, default=7, help="seed of the notes (default 7)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "capacity", help="where the report goes")
    p.add_argument("--from-run", type=Path, metavar="DIR",
                   help="run nothing: write docs/benchmarks/capacity.md from the report (capacity.md) a finished run left in DIR")  # fmt: skip
    return p.parse_args(argv)


def report(args: argparse.Namespace, argv: list[str], figs: list[SizeFigures], started: datetime, took_s: float,
           load_before: str, load_after: str) -> tuple[str, list[str]]:  # fmt: skip
    """The report (``capacity.md``, and the page's text) and its PASS/FAIL lines."""
    found = verdicts(figs)
    limit = next((f.kb_limit for f in figs if f.kb_limit), None)
    md = [f"## Capacity: {', '.join(f'{f.agents:,}' for f in figs)} agents on one host", "",
          *long_run_page.about_lines("capacity", argv, page.commit(), started, took_s, load_before, load_after),
          f"- suite: `gateway up` with the soft open-files limit {args.nofile or 'inherited'} (the KB's limits: "
          f"{'soft %d, hard %d' % limit if limit else 'n/a'}); at rest: once the six processes use under 5% of a core "
          f"(at least {args.rest_seconds:g} s after ready), then {args.idle_seconds:g} s idle; {args.writes} writes and {args.search_sample} first/warm searches per size",
          "", *table(figs), "", *[f"- {v.line()}" for v in found]]
    for f in figs:
        if f.search_examples:
            md += ["", f"Searches not answered at {f.agents:,} agents, first ones:", "", *[f"- `{e}`" for e in f.search_examples]]
    return "\n".join(md), [v.line() for v in found]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_run is not None:
        return long_run_page.from_run("capacity", TITLE, METHOD, args.from_run.resolve())
    t0 = time.monotonic()
    started = datetime.now(UTC)
    sizes = sorted({int(x) for x in args.agents.split(",") if x.strip()})
    stop_on_signals()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    load_before = page.load_average()
    figs: list[SizeFigures] = []
    try:
        for n in sizes:
            (out / f"suite-{n}.log").unlink(missing_ok=True)
            figs.append(run_size(args, n, tmp, out))
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    markdown, verdict_lines = report(args, argv, figs, started, time.monotonic() - t0, load_before, page.load_average())
    (out / "figures.json").write_text(json.dumps([asdict(f) for f in figs], indent=1) + "\n", encoding="utf-8")
    long_run_page.publish("capacity", TITLE, METHOD, markdown, verdict_lines, out, write_docs=args.write_docs)
    say(f"report and figures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
