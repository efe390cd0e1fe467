"""``gateway up`` at rest does nothing: no process of the suite wakes up on a timer of its own.

What is counted is time slices (the third field of /proc/PID/task/TID/schedstat: one per time a
thread was given a CPU), not wall time nor latency: a thread that sleeps until an event runs no
slice while nothing happens, however loaded the machine is, and a polling loop runs one per turn
whatever the load. docs/operations.md "At rest" has the figures and what each process waits for.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from bench_modules import bench
from suite_support import make_home, wait_until

pytestmark = pytest.mark.integration

footprint_cpu = bench("footprint_cpu")
suite_up = bench("suite_up")

# gRPC's own threads (its timer, its thread pool and the pool's lifeguard) wake about once a second
# each whatever the process does; they are counted in the total, not in our threads.
GRPC_THREADS = ("event_engine", "grpc_global_tim", "lifeguard")
WINDOW_S = 10.0
SETTLE_DEADLINE_S = 20.0
# Our threads (the event loop, which serves the metrics port too, and workers) at rest: today under 1 slice a second
# in every process (the KB's 2 s source-watch tick is the most). One polling loop adds 10 (a 0.1 s
# poll) to 200 (a 5 ms step) a second, so 2 a second is a bound with a margin of 2x over today and
# 5x under the slowest poll this suite ever had.
OURS_PER_S = 2.0
# All threads of a process, gRPC's included: today 7-15 a second. 30 leaves 2x, and still fails
# on a step loop or a health check between processes every 100 ms.
ALL_PER_S = 30.0


@dataclass
class Rest:
    pids: dict[str, int]
    base_url: str


def _our_slices(pids: dict[str, int]) -> int:
    """Slices run so far by the threads of ``pids`` that are not gRPC's."""
    return sum(s for pid in pids.values() for name, s in footprint_cpu.task_slices(pid).values() if name not in GRPC_THREADS)


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rest]:
    """``gateway up`` on a home with three agents, once its start-up work is over (or the deadline passed)."""
    home, _, http_port = make_home(tmp_path_factory.mktemp("rest"), agents=[{"id": "alfred"}, {"id": "bob"}, {"id": "carl"}])
    up = suite_up.GatewayUp(home, home / "up.log", None)
    up.start()
    try:
        up.wait_ready(60)
        wait_until(lambda: len(up.pids()) == len(suite_up.PROCESSES), 10, "the launcher's five children")
        pids = up.pids()
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        last = _our_slices(pids)
        while time.monotonic() < deadline:  # the first compose, index and checks run after ready
            time.sleep(2)
            now = _our_slices(pids)
            if now - last <= 2:
                break
            last = now
        yield Rest(pids, f"http://127.0.0.1:{http_port}")
    finally:
        up.stop()


def test_no_process_wakes_on_a_timer_at_rest(rest: Rest) -> None:
    """Over ``WINDOW_S`` with nothing to do, each process runs its own threads at most ``OURS_PER_S``
    times a second and all its threads at most ``ALL_PER_S`` (the bounds' reasons are beside them);
    the REST shim's first answer after the rest carries the current Date (it is stamped as a
    connection opens, not by a tick)."""
    window_start = time.time()
    figures = footprint_cpu.cpu_at_rest(rest.pids, WINDOW_S)
    ours = {name: sum(s for thread, s in f.threads if thread.split("/")[0] not in GRPC_THREADS) for name, f in figures.items()}
    busy = {name: (ours[name], f.slices, f.threads[:4]) for name, f in figures.items()
            if ours[name] > OURS_PER_S * f.seconds or f.slices > ALL_PER_S * f.seconds}  # fmt: skip
    assert not busy, f"woke at rest over {WINDOW_S:.0f}s (our slices, all slices, busiest threads): {busy}"
    reply = httpx.get(f"{rest.base_url}/healthz", timeout=10)
    assert email.utils.parsedate_to_datetime(reply.headers["date"]).timestamp() >= int(window_start)
