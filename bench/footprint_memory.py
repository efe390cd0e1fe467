"""Memory at rest: RSS and PSS of each process of the suite, from ``/proc/PID/smaps_rollup``.

Run:  ``.venv/bin/python bench/footprint_memory.py [--agents 10] [--rest-seconds 60] [--metrics]``

A fleet home of ``--agents`` agents (bench/suite_up.py) in a temp folder, ``gateway up`` on it,
then ``--rest-seconds`` of nothing after its ``ready`` line; then one line per process (the
launcher and its five children) with its RSS and PSS in MiB, and the sum. PSS divides each
shared page by the processes that map it, so the PSS column adds up to what the suite costs the
host; RSS counts a shared library once per process. Metrics are off (``gateway.metrics.enabled``
false: no metrics port) unless ``--metrics``. ``rss_pss`` is what bench/footprint.py calls for its own table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harness import report
from harness.procs import stop_on_signals
from suite_up import GatewayUp, write_fleet_home

KIB_PER_MIB = 1024
READY_TIMEOUT_S = 120.0


def rss_pss(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of ``pid`` in MiB, from ``/proc/PID/smaps_rollup``. Raises OSError when the
    process is gone (or the kernel has no smaps_rollup: Linux before 4.14)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss"):
                fields[key] = int(value.split()[0])
    return fields["Rss"] / KIB_PER_MIB, fields["Pss"] / KIB_PER_MIB


def at_rest(pids: dict[str, int]) -> dict[str, tuple[float, float]]:
    """Process name -> (RSS, PSS) in MiB, for every process still running."""
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = rss_pss(pid)
        except OSError:
            continue
    return out


def memory_table(figures: dict[str, tuple[float, float]]) -> str:
    """The markdown table: one row per process and the sum."""
    rows = [(name, f"{rss:.1f}", f"{pss:.1f}") for name, (rss, pss) in figures.items()]
    rows.append(("all", f"{sum(r for r, _ in figures.values()):.1f}", f"{sum(p for _, p in figures.values()):.1f}"))
    return report.table(("process", "RSS MiB", "PSS MiB"), rows, "lrr")


def measure(agents: int, rest_s: float, metrics: bool) -> dict[str, tuple[float, float]]:
    """Start the suite on a fresh fleet home, wait ``rest_s`` after ready, read every process."""
    tmp = Path(tempfile.mkdtemp(prefix="footprint-memory-"))
    try:
        fleet = write_fleet_home(tmp / "home", agents, seed=1)
        if not metrics:
            _metrics_off(fleet.home)
        suite = GatewayUp(fleet.home, tmp / "suite.log", None)
        suite.start()
        try:
            took = suite.wait_ready(READY_TIMEOUT_S)
            report.say(f"ready after {took:.1f} s; at rest for {rest_s:.0f} s")
            time.sleep(rest_s)
            suite.check_alive()
            pids = suite.pids()
            return at_rest(pids)  # the six, and a shim's MCP child should one run (suite_up.mcp_children)
        finally:
            suite.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _metrics_off(home: Path) -> None:
    path = home / "config.json"
    raw = json.loads(path.read_text())
    raw["gateway"]["metrics"]["enabled"] = False
    path.write_text(json.dumps(raw, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--rest-seconds", type=float, default=60.0)
    parser.add_argument("--metrics", action="store_true", help="gateway.metrics enabled (off by default)")
    args = parser.parse_args(argv)
    stop_on_signals()
    figures = measure(args.agents, args.rest_seconds, args.metrics)
    print(memory_table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
