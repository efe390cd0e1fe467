"""Benchmark: the shim's memory and MCP latency as more distinct agents are reached over MCP.

Run:  ``.venv/bin/python bench/mcp_agents.py [--agents 1000] [--one 200] [LABEL=REPO ...]``
(not part of ``make bench``; about two minutes per checkout on 2 cores). Each ``LABEL=REPO``
is a checkout of this project (e.g. a ``git worktree`` of another commit) run in turn with this
interpreter, so two versions are compared in one run; by default only this checkout.

Method
------
A fresh temp home with ``--agents`` agents (``a0000``…), each with one note in ``memory/``, and
one read key for every agent. Only the KB and the shim are started (``gateway serve kb|http``).
Once the shim answers an MCP request, its RSS (``VmRSS``) is read: at rest; after ``--one``
``memory_search`` tool calls on one agent; after one call on each of the first 200 agents; after
one on each of all of them; after 1,000 more on agents picked at random. Each call is one POST
(the transport is stateless: no ``initialize`` first). Also printed: the shim's CPU per tool call
over all those calls, the p50 of the one-agent calls and of the random ones, and the p50 of 40
session set-ups (``initialize`` and ``tools/list`` with the SDK's client, a new connection each).

Prints a markdown table, one column per checkout; exits non-zero only when the run failed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from harness import REPO
from harness.home import session, write_suite_config
from harness.procs import cpu_seconds, rss_mib

KEY = "bench-key-0123456789abcdef"


def write_home(home: Path, agents: int) -> dict[str, int]:
    ids = [f"a{n:04d}" for n in range(agents)]
    ports = write_suite_config(home, ids, KEY, write=False)
    for i in ids:
        mem = home / "agents" / i / "workspace" / "memory"
        mem.mkdir(parents=True)
        (mem / "notes.md").write_text(f"# Notes\n\n- {i} keeps the lighthouse log at dawn\n")
    return ports


def post(client: httpx.Client, port: int, agent: str, method: str, params: dict[str, Any]) -> float:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    t = time.perf_counter()
    r = client.post(f"http://127.0.0.1:{port}/mcp/agents/{agent}", json=body,
                    headers={"X-Api-Key": KEY, "Accept": "application/json, text/event-stream"})
    dt = time.perf_counter() - t
    assert r.status_code == 200, (agent, r.status_code, r.text[:300])
    assert "error" not in r.json(), r.text[:300]
    return dt


def call(client: httpx.Client, port: int, agent: str) -> float:
    return post(client, port, agent, "tools/call", {"name": "memory_search", "arguments": {"query": "lighthouse log"}})


async def ready_once(port: int, agent: str) -> float:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    t = time.perf_counter()
    async with (
        httpx2.AsyncClient(headers={"X-Api-Key": KEY}, timeout=30) as client,
        streamable_http_client(f"http://127.0.0.1:{port}/mcp/agents/{agent}", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        return time.perf_counter() - t


def run(repo: str, agents: int, one_n: int) -> dict[str, str]:
    """The figures of one checkout, ``repo``."""
    with session("mcpbench", keep=False, logs="") as (tmp, children):
        home = tmp / "home"
        ports = write_home(home, agents)
        for name in ("kb", "http"):
            children.start(name, [sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(home)], cwd=Path(repo))
        port = ports["http"]
        shim = children.procs["http"].pid
        deadline = time.monotonic() + 120
        with httpx.Client(timeout=60) as client:
            while True:
                try:
                    post(client, port, "a0000", "tools/list", {})
                    break
                except (httpx.HTTPError, AssertionError):  # not serving yet
                    children.check_alive()
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            time.sleep(3)
            out = {"rest (SDK loaded, 1 request)": f"{rss_mib(shim):.1f} MB"}
            cpu0 = cpu_seconds(shim)
            one = [call(client, port, "a0000") for _ in range(one_n)]
            out[f"after {one_n} calls on 1 agent"] = f"{rss_mib(shim):.1f} MB"
            first = min(200, agents)
            for i in range(first):
                call(client, port, f"a{i:04d}")
            out[f"after 1 call each on {first} agents"] = f"{rss_mib(shim):.1f} MB"
            for i in range(first, agents):
                call(client, port, f"a{i:04d}")
            out[f"after 1 call each on {agents:,} agents"] = f"{rss_mib(shim):.1f} MB"
            rng = random.Random(7)
            warm = [call(client, port, f"a{rng.randrange(agents):04d}") for _ in range(1000)]
            out["after 1,000 more calls on random agents"] = f"{rss_mib(shim):.1f} MB"
            cpu1 = cpu_seconds(shim)
            total_calls = one_n + agents + 1000
            out["shim CPU per tool call (all)"] = f"{(cpu1 - cpu0) / total_calls * 1000:.2f} ms"
            out[f"tool-call p50, 1 agent (n={one_n})"] = f"{statistics.median(one) * 1000:.2f} ms"
            out[f"tool-call p50, random of {agents:,} (n=1000)"] = f"{statistics.median(warm) * 1000:.2f} ms"
        readies = [asyncio.run(ready_once(port, f"a{rng.randrange(agents):04d}")) for _ in range(40)]
        out["HTTP ready p50 (initialize+tools/list, n=40)"] = f"{statistics.median(readies) * 1000:.1f} ms"
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--one", type=int, default=200, help="tool calls on one agent first")
    parser.add_argument("checkouts", nargs="*", help="LABEL=REPO, run in turn (default: this checkout)")
    args = parser.parse_args()
    results: dict[str, dict[str, str]] = {}
    for arg in args.checkouts or [f"this={REPO}"]:
        label, repo = arg.split("=", 1)
        print(f"running {label} ({repo}) ...", file=sys.stderr, flush=True)
        results[label] = run(repo, args.agents, args.one)
    labels = list(results)
    print("| shim | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for key in results[labels[0]]:
        print(f"| {key} | " + " | ".join(results[label][key] for label in labels) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
