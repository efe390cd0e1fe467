"""``gateway serve NAME …`` with tracemalloc on, for bench/memory_growth.py (a measurement tool, not a bench).

Run:  ``python bench/traced_serve.py DIR NAME --home H``. Each SIGUSR2 writes a snapshot of the
process's Python allocations (after a full collection) to ``DIR/NAME-<n>.snap``, n = 0, 1, …;
compare two with ``tracemalloc.Snapshot.load(...).compare_to(...)``. Tracing slows the process
down (about 2x) and costs memory of its own, which the snapshots leave out.
"""

from __future__ import annotations

import gc
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 12


def main() -> int:
    out, name, *rest = sys.argv[1:]
    tracemalloc.start(FRAMES)
    taken = 0

    def dump(_signum: int, _frame: FrameType | None) -> None:
        nonlocal taken
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        snapshot.dump(str(Path(out) / f"{name}-{taken}.snap"))
        taken += 1

    signal.signal(signal.SIGUSR2, dump)
    repo = str(Path(__file__).resolve().parents[1])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from gateway_cli.cli import main as gateway

    return gateway(["serve", name, *rest])


if __name__ == "__main__":
    sys.exit(main())
