"""The phases of one fleet size in bench/capacity.py: start, rest, write -> CLAUDE.md, searches.

Each phase returns plain figures; bench/capacity.py runs them for every size and renders the
table. Nothing here decides a verdict.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from harness.stats import settled
from suite_up import KEY, FleetHome, GatewayUp, open_files_limit, proc_figures
from watcher_support import memory_text, seen_after

COMPOSE_TIMEOUT_S = 900.0
SEARCH_CONCURRENCY = 8
SEARCH_TIMEOUT_S = 60.0


@dataclass
class SizeFigures:
    """Everything measured at one fleet size (seconds, MB, counts)."""

    agents: int
    started: bool = False
    failure: str = ""
    home_s: float = float("nan")
    ready_s: float = float("nan")
    composed_s: float = float("nan")
    cpu_to_ready: dict[str, float] = field(default_factory=dict)  # CPU s from the spawn to ready
    settle_s: float = float("nan")  # from ready until the six processes are idle (nan: not within the timeout)
    cpu_after_ready: dict[str, float] = field(default_factory=dict)  # CPU s from ready until settled
    idle_pct: dict[str, float] = field(default_factory=dict)  # CPU % of a core in the idle window after it
    rest: dict[str, dict[str, float]] = field(default_factory=dict)  # process -> rss_mb, anon_mb, fds, threads
    kb_limit: tuple[int, int] | None = None
    write_ms: list[float] = field(default_factory=list)
    write_errors: int = 0
    first_ms: list[float] = field(default_factory=list)
    warm_ms: list[float] = field(default_factory=list)
    all_ms: list[float] = field(default_factory=list)
    search_status: dict[int, int] = field(default_factory=dict)  # HTTP status -> count, every search of the size
    search_examples: list[str] = field(default_factory=list)
    active: dict[str, dict[str, float]] = field(default_factory=dict)  # after every agent searched once
    disk: dict[str, float] = field(default_factory=dict)  # home MB, databases MB, WAL MB, after every agent searched
    stop_s: float = float("nan")


def figures_of(up: GatewayUp) -> dict[str, dict[str, float]]:
    out = {}
    for name, pid in up.pids().items():
        fig = proc_figures(pid)
        if fig is not None:
            out[name] = dict(fig.__dict__)
    return out


def start(up: GatewayUp, fleet: FleetHome, fig: SizeFigures, ready_timeout: float) -> None:
    """Spawn ``gateway up``; time to its ready line and to every agent's CLAUDE.md."""
    up.start()
    fig.ready_s = up.wait_ready(ready_timeout)
    fig.cpu_to_ready = {n: f["cpu_s"] for n, f in figures_of(up).items()}
    fig.kb_limit = open_files_limit(up.pids()["kb"])
    claude = [fleet.workspaces[a] / "CLAUDE.md" for a in fleet.agents]
    while not (claude[-1].exists() and all(p.exists() for p in claude)):
        up.check_alive()
        if time.perf_counter() - up.spawned > COMPOSE_TIMEOUT_S:
            raise RuntimeError(f"not every CLAUDE.md was composed {COMPOSE_TIMEOUT_S:.0f} s after the spawn")
        time.sleep(0.1)
    fig.composed_s = time.perf_counter() - up.spawned
    fig.started = True


def rest(up: GatewayUp, fig: SizeFigures, min_s: float, idle_s: float, settle_timeout: float) -> None:
    """From ready until start-up is over (``harness.stats.settled``: the six processes together
    under 5% of a core over 5 s, and at least ``min_s`` after ready; at most ``settle_timeout``):
    the CPU each used meanwhile. Then the idle CPU over ``idle_s`` more, and RSS, open files and
    threads at the end (the highest RSS sampled each second)."""
    ready_at = up.spawned + fig.ready_s
    points: list[tuple[float, float]] = []
    while True:
        now = time.perf_counter()
        mid = figures_of(up)
        points.append((now, sum(f["cpu_s"] for f in mid.values())))
        if now - ready_at >= min_s and settled(points):
            fig.settle_s = now - ready_at
            break
        if now - ready_at > settle_timeout:
            break  # still busy: settle_s stays nan, and the idle window shows how busy
        up.check_alive()
        time.sleep(1.0)
    fig.cpu_after_ready = {n: f["cpu_s"] - fig.cpu_to_ready.get(n, 0.0) for n, f in mid.items()}
    t0 = time.perf_counter()
    peak: dict[str, float] = {}
    last = mid
    while time.perf_counter() - t0 < idle_s:
        time.sleep(1.0)
        up.check_alive()
        last = figures_of(up)
        for n, f in last.items():
            peak[n] = max(peak.get(n, 0.0), f["rss_mb"])
    span = time.perf_counter() - t0
    fig.idle_pct = {n: 100 * (last[n]["cpu_s"] - mid[n]["cpu_s"]) / span for n in last if n in mid}
    fig.rest = {n: {**f, "rss_mb": max(f["rss_mb"], peak.get(n, 0.0))} for n, f in last.items()}


def writes(fleet: FleetHome, fig: SizeFigures, count: int, agents: list[str]) -> None:
    """``count`` sequential PUTs of MEMORY.md over REST, each timed from the send until CLAUDE.md on
    disk holds its marker (``watcher_support.seen_after``: CLAUDE.md read every 0.2 ms)."""
    import httpx2

    with httpx2.Client(base_url=fleet.base_url, headers={"X-Api-Key": KEY}, timeout=30) as client:
        for i in range(count):
            agent = agents[i % len(agents)]
            marker = f"cap-{fig.agents}-{i:04d}-{time.time_ns() % 10**9:09d}"
            t0 = time.perf_counter()
            reply = client.put(f"/api/v1/agents/{agent}/files/MEMORY.md", json={"content": memory_text(agent, marker)})
            if reply.status_code != 200:
                fig.write_errors += 1
                continue
            try:
                fig.write_ms.append(1000 * seen_after(fleet.workspaces[agent] / "CLAUDE.md", marker.encode(), t0, timeout=30))
            except RuntimeError:
                fig.write_errors += 1
            time.sleep(0.01)


async def _search(client: Any, fig: SizeFigures, agent: str, sink: list[float]) -> None:
    import httpx2

    start = time.perf_counter()
    try:
        reply = await client.get(f"/api/v1/agents/{agent}/memory:search", params={"query": f"{agent} notes"})
    except httpx2.HTTPError as exc:
        fig.search_status[0] = fig.search_status.get(0, 0) + 1
        if len(fig.search_examples) < 5:
            fig.search_examples.append(f"{agent}: {type(exc).__name__}: {exc}")
        return
    ms = 1000 * (time.perf_counter() - start)
    fig.search_status[reply.status_code] = fig.search_status.get(reply.status_code, 0) + 1
    if reply.status_code == 200:
        sink.append(ms)
    elif len(fig.search_examples) < 5:
        fig.search_examples.append(f"{agent}: {reply.status_code} {reply.text[:200]}")


async def _searches(fleet: FleetHome, fig: SizeFigures, sampled: list[str]) -> None:
    import httpx2

    async with httpx2.AsyncClient(base_url=fleet.base_url, headers={"X-Api-Key": KEY}, timeout=SEARCH_TIMEOUT_S) as client:
        for agent in sampled:  # one at a time: an agent's first search ever, then the same again
            await _search(client, fig, agent, fig.first_ms)
            await _search(client, fig, agent, fig.warm_ms)
        done = set(sampled)
        rest_of = [a for a in fleet.agents if a not in done]
        gate = asyncio.Semaphore(SEARCH_CONCURRENCY)

        async def one(agent: str) -> None:
            async with gate:
                await _search(client, fig, agent, fig.all_ms)

        await asyncio.gather(*(one(a) for a in rest_of))


def searches(up: GatewayUp, fleet: FleetHome, fig: SizeFigures, sampled: list[str]) -> float:
    """The first and a warm search of each ``sampled`` agent (one at a time), then one search of
    every other agent (``SEARCH_CONCURRENCY`` at once), then the processes' figures with every
    agent active. Seconds the every-agent pass took."""
    t0 = time.perf_counter()
    asyncio.run(_searches(fleet, fig, sampled))
    took = time.perf_counter() - t0
    up.check_alive()
    fig.active = figures_of(up)
    return took


def spread(agents: list[str], count: int, offset: int = 0) -> list[str]:
    """``count`` agents spread evenly over the fleet (all of them when it is smaller), starting at ``offset``."""
    if count >= len(agents):
        return list(agents)
    step = len(agents) / count
    return [agents[(int(i * step) + offset) % len(agents)] for i in range(count)]

