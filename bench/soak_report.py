"""The soak's samples, verdicts, markdown tables and PNG plot (bench/soak.py gathers, this renders).

A sample is a plain dict (so the whole run is also written as ``samples.json``):
``t`` (seconds after the traffic started), ``phase`` (``warm-up``, ``measured``, ``rest``,
``stopped``), ``procs`` (name -> rss_mb, anon_mb, fds, threads, cpu_s, or None), ``disk``
(used_bytes, files, databases, wals, dreaming), ``load`` (1-minute load average) and the
interval's judged requests: ``requests``, ``p50``, ``p99``, ``errors``, ``e5xx``, and the
generator's CPU over it, ``gen_cpu`` (% of one core).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.stats import (
    MB,
    Verdict,
    fitted_growth,
    flat_verdict,
    growth_verdict,
    p99_verdict,
    percentile,
    wal_verdict,
    zero_verdict,
)
from soak_traffic import Recorder, family, judged
from suite_up import MCP_SUFFIX, PROCESSES

Sample = dict[str, Any]


def measured(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s["phase"] == "measured"]


def mcp_children(samples: list[Sample]) -> list[str]:
    """The shims' MCP children seen in any sample (``http-mcp``…): each runs while agents use MCP and
    stops after ``gateway.api.mcpIdleSeconds`` without a request, so it is reported, not judged."""
    return sorted({name for s in samples for name in s["procs"] if name.endswith(MCP_SUFFIX)})


def suite_rss(s: Sample) -> float:
    """RSS MB of every process in the sample, the shims' MCP children included."""
    return sum(float(fig["rss_mb"]) for fig in s["procs"].values() if fig is not None)


def series(samples: list[Sample], proc: str, key: str) -> tuple[list[float], list[float]]:
    """(t, value) of one process's figure over the samples where the process answered."""
    ts, ys = [], []
    for s in samples:
        fig = s["procs"].get(proc)
        if fig is not None:
            ts.append(s["t"])
            ys.append(float(fig[key]))
    return ts, ys


def kb_memory_split(samples: list[Sample]) -> list[str]:
    """The KB's RSS growth split into anonymous memory (what the process allocated) and the rest
    (mostly the database files' pages its readers map, which grow with the databases and which the
    kernel may drop): one line, or none without samples after the warm-up."""
    after = measured(samples)
    ts, rss = series(after, "kb", "rss_mb")
    _, anon = series(after, "kb", "anon_mb")
    if len(ts) < 2 or len(anon) != len(ts):
        return []
    grown_anon = fitted_growth(ts, anon)
    grown_rest = fitted_growth(ts, [r - a for r, a in zip(rss, anon, strict=True)])
    return [f"kb RSS growth split: anonymous {grown_anon:+.1f} MB fitted (first {anon[0]:.1f} -> last {anon[-1]:.1f}), "
            f"file-backed and shared {grown_rest:+.1f} MB (first {rss[0] - anon[0]:.1f} -> last {rss[-1] - anon[-1]:.1f})"]


def verdicts(samples: list[Sample], rec: Recorder, warmup_s: float, stop_s: float) -> list[Verdict]:
    """Every goal of the soak, judged on the samples after the warm-up (and the at-rest sample)."""
    after = measured(samples)
    out = []
    if not after:
        out.append(Verdict(False, "RSS, open files and threads: no sample after the warm-up, nothing to judge"))
    else:
        for proc in PROCESSES:
            ts, ys = series(after, proc, "rss_mb")
            out.append(growth_verdict(proc, ts, ys))
        for key, what in (("fds", "open files"), ("threads", "threads")):
            for proc in PROCESSES:
                ts, ys = series(after, proc, key)
                out.append(flat_verdict(proc, what, ts, ys))
    rest = [s for s in samples if s["phase"] == "rest"]
    if rest:
        out.append(wal_verdict(rest[-1]["disk"]["wals"], when="at rest"))
    else:
        out.append(Verdict(False, "each WAL at rest: no at-rest sample"))
    points = [(r.t, r.ms) for r in rec.records if judged(r)]
    out.append(p99_verdict(points, warmup_s, stop_s))
    traffic = [r for r in rec.records if family(r.kind) != "check" and family(r.kind) != "setup"]
    bad = [r for r in traffic if not r.ok]
    in_warmup = sum(1 for r in bad if r.t < warmup_s)
    out.append(zero_verdict("errors (whole run, warm-up included)", len(bad),
                            f"{in_warmup:,} in the warm-up; {len(traffic):,} requests"))  # fmt: skip
    out.append(zero_verdict("5xx", sum(1 for r in traffic if r.status >= 500)))
    return out


def _mb(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"


def _proc_cells(s: Sample, key: str, fmt: str) -> list[str]:
    out = []
    for proc in PROCESSES:
        fig = s["procs"].get(proc)
        out.append("" if fig is None else format(fig[key], fmt))
    return out


def sample_tables(samples: list[Sample]) -> list[str]:
    head = " | ".join(PROCESSES)
    md = ["#### Processes: RSS MB (KB anonymous MB), open files, threads", "",
          f"| min | phase | RSS: {head} | MCP child RSS | all RSS | KB anon | open files: {head} | threads: {head} | load |",
          "|---:|---|" + "---:|" * (len(PROCESSES) * 3 + 4)]
    for s in samples:
        if not s["procs"]:
            continue
        kb = s["procs"].get("kb")
        children = [fig["rss_mb"] for name, fig in s["procs"].items() if name.endswith(MCP_SUFFIX) and fig is not None]
        md.append(f"| {s['t'] / 60:.1f} | {s['phase']} | " + " | ".join(_proc_cells(s, "rss_mb", ".1f")) + " | "
                  + (f"{sum(children):.1f}" if children else "") + f" | {suite_rss(s):.1f} | "
                  + ("" if kb is None else f"{kb['anon_mb']:.1f}") + " | " + " | ".join(_proc_cells(s, "fds", "d"))
                  + " | " + " | ".join(_proc_cells(s, "threads", "d")) + f" | {s['load']:.2f} |")
    md += ["", "#### Disk and traffic", "",
           "| min | phase | DBs | DB MB | WAL MB (all) | WAL MB (largest) | home MB | audit MB | journal MB | DREAMS.md MB "
           "| requests | req/s | p50 ms | p99 ms | errors | 5xx | generator CPU % |",
           "|---:|---|" + "---:|" * 15]
    for s in samples:
        d = s["disk"]
        wals = d["wals"].values()
        traffic = (f"{s['requests']:,} | {s['rate']:.1f} | {_mb(s['p50'])} | {_mb(s['p99'])} | {s['errors']} | {s['e5xx']} | "
                   f"{s['gen_cpu']:.1f}" if "requests" in s else " | | | | | | ")
        md.append(f"| {s['t'] / 60:.1f} | {s['phase']} | {len(d['databases'])} | {sum(d['databases'].values()) / MB:.1f} | "
                  f"{sum(wals) / MB:.1f} | {max(wals, default=0) / MB:.1f} | {d['used_bytes'] / MB:.1f} | "
                  f"{d['dreaming']['audit.jsonl'] / MB:.2f} | {d['dreaming']['journal.jsonl'] / MB:.2f} | "
                  f"{d['dreaming']['DREAMS.md'] / MB:.2f} | {traffic} |")
    return md


def process_summary(samples: list[Sample]) -> list[str]:
    after = measured(samples)
    rest = [s for s in samples if s["phase"] == "rest"]
    md = ["| process | RSS first -> last MB | fitted growth MB | MB/h | open files first -> last (at rest) "
          "| threads first -> last (at rest) | CPU s over the run |", "|---|---:|---:|---:|---:|---:|---:|"]
    for proc in [*PROCESSES, *mcp_children(samples)]:
        ts, rss = series(after, proc, "rss_mb")
        if not rss:
            md.append(f"| {proc} | n/a | | | | | |")
            continue
        grown = fitted_growth(ts, rss)
        span_h = (ts[-1] - ts[0]) / 3600 if len(ts) > 1 else 0
        _, fds = series(after, proc, "fds")
        _, thr = series(after, proc, "threads")
        _, cpu = series([s for s in samples if s["phase"] != "stopped"], proc, "cpu_s")
        rfig = rest[-1]["procs"].get(proc) if rest else None
        md.append(f"| {proc} | {rss[0]:.1f} -> {rss[-1]:.1f} | {grown:+.1f} | {grown / span_h if span_h else 0:+.0f} | "
                  f"{fds[0]:.0f} -> {fds[-1]:.0f} ({'' if rfig is None else rfig['fds']}) | {thr[0]:.0f} -> {thr[-1]:.0f} "
                  f"({'' if rfig is None else rfig['threads']}) | {cpu[-1] - cpu[0]:.1f} |")
    return md


def latency_table(rec: Recorder) -> list[str]:
    kinds: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    for r in rec.records:
        kinds.setdefault(r.kind, []).append(r.ms)
        if not r.ok:
            errors[r.kind] += 1
    md = ["| kind | requests | p50 ms | p99 ms | max ms | errors |", "|---|---:|---:|---:|---:|---:|"]
    for kind in sorted(kinds):
        ms = sorted(kinds[kind])
        md.append(f"| {kind} | {len(ms):,} | {percentile(ms, 50):.1f} | {percentile(ms, 99):.1f} | {ms[-1]:.1f} | {errors[kind]:,} |")
    return md


def log_problems(log: Path) -> list[str]:
    """Lines of the suite's output at level warning or worse, counted by process and event."""
    counts: Counter[tuple[str, str, str]] = Counter()
    first: dict[tuple[str, str, str], str] = {}
    with open(log, "rb") as handle:
        for line in handle:
            if not line.startswith(b"{") or (b'"level":"warning"' not in line and b'"level":"error"' not in line
                                             and b'"level":"critical"' not in line):  # fmt: skip
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            key = (record.get("service", "?"), record.get("level", "?"), record.get("event", "?"))
            counts[key] += 1
            exception = str(record.get("exception", "")).strip().splitlines()
            said = exception[-1] if exception else str(record.get("error") or record.get("reason") or line.decode(errors="replace"))
            first.setdefault(key, said[:300])
    if not counts:
        return ["(no line at level warning or worse)"]
    md = ["| process | level | event | lines | the first one said |", "|---|---|---|---:|---|"]
    for key, n in counts.most_common(25):
        md.append(f"| {key[0]} | {key[1]} | {key[2]} | {n:,} | `{first[key].replace('|', '/')}` |")
    return md


def plot(samples: list[Sample], warmup_s: float, path: Path, title: str) -> None:
    """RSS per process, open files per process and the judged p50/p99 per interval, over time (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    live = [s for s in samples if s["procs"]]
    fig, axes = plt.subplots(3, 1, figsize=(11, 11), sharex=True)
    for proc in PROCESSES:
        ts, ys = series(live, proc, "rss_mb")
        axes[0].plot([t / 60 for t in ts], ys, marker=".", label=proc)
        ts, ys = series(live, proc, "fds")
        axes[1].plot([t / 60 for t in ts], ys, marker=".", label=proc)
    traffic = [s for s in samples if "p99" in s and not math.isnan(s["p99"])]
    axes[2].plot([s["t"] / 60 for s in traffic], [s["p99"] for s in traffic], marker=".", label="p99")
    axes[2].plot([s["t"] / 60 for s in traffic], [s["p50"] for s in traffic], marker=".", label="p50")
    load = axes[2].twinx()  # latency follows the machine's load: other work on a shared host shows here
    load.plot([s["t"] / 60 for s in live], [s["load"] for s in live], color="grey", linewidth=1, label="load average (right)")
    load.set_ylabel("1-minute load average")
    load.legend(loc="upper right", fontsize=8)
    axes[1].set_yscale("log")
    labels = ("RSS (MB)", "open files (log scale)", "latency per sample interval (ms)")
    for ax, label in zip(axes, labels, strict=True):
        ax.set_ylabel(label)
        ax.axvline(warmup_s / 60, color="grey", linestyle="--", linewidth=1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="center left", fontsize=8, ncol=3)
    axes[2].set_xlabel("minutes after the traffic started (dashed: end of the warm-up; last points: at rest)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def dump(samples: list[Sample], path: Path) -> None:
    path.write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")


def lines(items: Iterable[str]) -> list[str]:
    return [f"- {item}" for item in items]
