"""CPU at rest: what each process of the suite spends when there is nothing to do.

Run:  ``.venv/bin/python bench/footprint_cpu.py [--agents 10] [--seconds 300] [--settle 30] [--threads]``

Method
------
A temp home with ``--agents`` agents (bench/suite_up.py: identity files and two notes each, the
nightly dream slot 12 hours away, metrics on), ``gateway up --log-format json`` on free ports. Once
it is ready it is left alone for ``--settle`` seconds (the start-up's own work: the first index,
the first compose), then, over ``--seconds``, each process's CPU time (utime + stime of every
thread, /proc/PID/stat) and the time slices its threads ran (the third field of
/proc/PID/task/TID/schedstat: one slice per wake-up that got a CPU) are read at the start and at the
end. ``--threads`` also names each process's busiest threads by slices, to find what still wakes.

``cpu_at_rest`` is the measurement alone, for a bench that has its own suite (bench/footprint.py).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.procs import cpu_seconds
from harness.report import say, table

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class AtRest:
    """One process over one window: CPU seconds, percent of one core, time slices run (all its
    threads) and, by thread name, the slices of its busiest threads."""

    seconds: float
    cpu_s: float
    slices: int
    threads: tuple[tuple[str, int], ...]

    @property
    def percent(self) -> float:
        return 100 * self.cpu_s / self.seconds

    @property
    def slices_per_s(self) -> float:
        return self.slices / self.seconds


def task_slices(pid: int) -> dict[int, tuple[str, int]]:
    """Thread id → (thread name, time slices run so far) for every thread of ``pid``; {} when gone."""
    out: dict[int, tuple[str, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as handle:
                slices = int(handle.read().split()[2])
            with open(f"/proc/{pid}/task/{tid}/comm", "rb") as handle:
                name = handle.read().decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        out[int(tid)] = (name, slices)
    return out


def _ran(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> dict[int, tuple[str, int]]:
    """Slices each thread ran between the two readings (a thread born meanwhile: all of its own)."""
    return {tid: (name, slices - before.get(tid, (name, 0))[1]) for tid, (name, slices) in after.items()}


def cpu_at_rest(pids: Mapping[str, int], seconds: float) -> dict[str, AtRest]:
    """Name → ``AtRest`` of each of ``pids`` over the next ``seconds`` (it sleeps that long).
    A thread that exits within the window is not counted; a process that exits raises
    ``FileNotFoundError``."""
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    tasks0 = {name: task_slices(pid) for name, pid in pids.items()}
    start = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - start
    out = {}
    for name, pid in pids.items():
        cpu = cpu_seconds(pid) - cpu0[name]
        ran = _ran(tasks0[name], task_slices(pid))
        busiest = sorted(((f"{n}/{tid}", s) for tid, (n, s) in ran.items() if s), key=lambda t: -t[1])
        out[name] = AtRest(elapsed, cpu, sum(s for _, s in ran.values()), tuple(busiest))
    return out


def report(figures: Mapping[str, AtRest], threads: bool) -> str:
    """The table of ``figures``, a total row, and (``threads``) each process's eight busiest threads."""
    rows = [[name, f"{f.cpu_s:.2f}", f"{f.percent:.3f} %", f"{f.slices}", f"{f.slices_per_s:.1f}"] for name, f in figures.items()]
    total_cpu = sum(f.cpu_s for f in figures.values())
    window = max(f.seconds for f in figures.values())
    total_slices = sum(f.slices for f in figures.values())
    rows.append(["all", f"{total_cpu:.2f}", f"{100 * total_cpu / window:.3f} %", f"{total_slices}", f"{total_slices / window:.1f}"])
    text = table(["process", "CPU s", "of one core", "slices", "slices/s"], rows, "lrrrr")
    if threads:
        for name, f in figures.items():
            text += f"\n{name}: " + ", ".join(f"{t} {s}" for t, s in f.threads[:8])
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--settle", type=float, default=30.0)
    parser.add_argument("--threads", action="store_true")
    args = parser.parse_args()
    from suite_up import PROCESSES, GatewayUp, write_fleet_home

    with tempfile.TemporaryDirectory(prefix="footprint-cpu-") as tmp:
        home = Path(tmp) / "home"
        write_fleet_home(home, args.agents, seed=7)
        suite = GatewayUp(home, Path(tmp) / "suite.log", None)
        suite.start()
        try:
            say(f"ready after {suite.wait_ready(120):.1f}s; settling {args.settle:.0f}s")
            time.sleep(args.settle)
            pids = suite.pids()
            figures = cpu_at_rest({name: pids[name] for name in PROCESSES}, args.seconds)
            suite.check_alive()
            say(f"at rest over {args.seconds:.0f}s, {args.agents} agents:\n{report(figures, args.threads)}")
        finally:
            suite.stop()


if __name__ == "__main__":
    main()
