"""Benchmark: MCP ready: stdio cold start against streamable HTTP on the shim.

Run:  ``make bench``  or  ``.venv/bin/python bench/mcp_ready.py [--samples 30] [--searches 5]
[--notes 300] [--keep-home]``  (the default run takes about a minute on 2 cores, nearly all
of it the stdio spawns).

Method
------
One run starts, on free loopback ports in a fresh temp home (config.json with
one agent ``bench`` and one read key; the internal token from
``gateway.home.ensure_home``), ``python -m gateway_cli.cli serve kb`` and ``serve
http`` (their JSON logs go to files in the temp home). The agent's workspace
holds ``--notes`` small notes under ``memory/`` (deterministic words); one
``memory_search`` with ``refresh: true`` over HTTP indexes them before
anything is measured, and is not counted.

Then ``--samples`` rounds, each one stdio session then ``--http-per-round``
HTTP sessions (default 4: an HTTP session is cheap, and with more samples
its p99 is not the one slowest), so machine noise hits both alike. A session is what an agent runtime
does when a session starts, with the SDK's own client in this process:

- **stdio**: spawn ``python -m gateway_cli.cli mcp --agent bench --home H``
  (``stdio_client``), ``initialize``, ``tools/list``; ready is the time from
  the spawn to the ``tools/list`` answer (the process's start-up and imports
  included: the cold start every session pays).
- **streamable HTTP**: a new ``httpx2`` client (a new TCP connection) to
  ``http://127.0.0.1:PORT/mcp/agents/bench`` with the key in ``X-Api-Key``,
  ``streamable_http_client``, ``initialize`` (and its ``initialized``
  notification), ``tools/list``; ready is the time from opening the client to
  the ``tools/list`` answer. The clients share one TLS context made at the
  start, as a runtime's HTTP stack does: an ``httpx2`` client made with its
  default reads the CA bundle (20-45 ms here, although the URL is plain
  http), a cost of that client library. A third session per round makes
  its client that way and is reported on an info row (ready only).

Each session then makes ``--searches`` ``memory_search`` calls (different
two-word queries that hit the notes, limit 6, no refresh), timed from the
call to its result: the first of the session is reported on its own (the
stdio server's KB channel connects on it) and the others together. The
shim's CPU time (``/proc/<pid>/stat``) over the HTTP sessions is divided by
their number: the server-side cost of one session. The shim's own time per
MCP request (the ``ms`` of its ``http`` log lines, the warm-up session
included) shows how much of an HTTP figure is the server's. Both servers are the same
code (``gateway_mcp.server.build_server``); only the transport differs.

Goal: HTTP ready <= 50 ms. Shown against p50 and p99 separately.
Percentiles are nearest-rank. The script prints a markdown table with
PASS/FAIL (also written to ``bench/results/mcp_ready.md``, git-ignored) and
exits 0 whatever the goals say; non-zero only when the benchmark itself could
not run. Both children are stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C or
failure; the temp home is removed unless ``--keep-home``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import REPO, page
from harness.home import api_key, session, write_config
from harness.procs import cpu_seconds, wait_until
from harness.report import say
from harness.stats import percentile

TITLE = "MCP ready: stdio cold start vs streamable HTTP"
METHOD = """\
What a runtime waits for when a session starts: from connecting to the answer of `tools/list`,
with the MCP SDK's own client. Each round starts one stdio session (spawning `gateway mcp`) and
four streamable HTTP sessions against a running shim; each session then makes five
`memory_search` calls over 300 notes. The shim's own time per request comes from its log."""

KEY = "bench-mcp-key-123456"
AGENT = "bench"
GOAL_HTTP_READY_MS = 50.0
WORDS = (
    "deploy staging rollback migration checklist review oncall incident budget roadmap invoice "
    "customer backlog release hotfix benchmark latency cache index schema archive vault quorum "
    "lighthouse harbor glacier meadow orchard canyon prairie tundra lagoon summit"
).split()


def write_home(home: Path, notes: int, rng: random.Random) -> int:
    """config.json (one agent, one read key), the internal token, ``notes`` notes under memory/; the
    shim's port."""
    from gateway.config import load_config

    ports = write_config(home, [{"id": AGENT}], keys=[api_key([AGENT], write=False, key=KEY)], gateway={"dreaming": {"enabled": False}})
    memory = load_config(home).agents[0].workspace / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    for n in range(notes):
        lines = [f"# Note {n}", ""]
        lines += [f"- {' '.join(rng.choice(WORDS) for _ in range(8))}" for _ in range(rng.randint(3, 12))]
        (memory / f"note-{n:04d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ports["api"]


def kb_serving(url: str) -> bool:
    """The shim answers /healthz and reports the KB SERVING (the other backends are not started)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            body = reply.read()
    except urllib.error.HTTPError as err:
        body = err.read()
    except OSError:
        return False
    return bool(json.loads(body).get("backends", {}).get("kb") == "SERVING")


@dataclass
class Series:
    ready: list[float] = field(default_factory=list)
    first_search: list[float] = field(default_factory=list)
    later_searches: list[float] = field(default_factory=list)
    misses: int = 0  # searches that found nothing (the queries are built to hit)


async def searches(session: Any, queries: list[str], series: Series) -> None:
    from mcp.types import TextContent

    for i, query in enumerate(queries):
        start = time.perf_counter()
        result = await session.call_tool("memory_search", {"query": query})
        ms = (time.perf_counter() - start) * 1000
        if result.is_error:
            text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
            raise RuntimeError(f"memory_search failed: {text}")
        if not (result.structured_content or {}).get("hits"):
            series.misses += 1
        (series.first_search if i == 0 else series.later_searches).append(ms)


async def stdio_session(home: Path, queries: list[str], series: Series) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway_cli.cli", "mcp", "--agent", AGENT, "--home", str(home)], cwd=REPO
    )
    with open(home / "mcp-stdio.log", "a") as errlog:
        start = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            series.ready.append((time.perf_counter() - start) * 1000)
            if len(tools.tools) != 6:
                raise RuntimeError(f"stdio listed {len(tools.tools)} tools")
            await searches(session, queries, series)


async def http_session(
    url: str, queries: list[str], series: Series, *, tls: ssl.SSLContext | None, refresh: bool = False
) -> None:
    """One session over streamable HTTP; ``tls``: the TLS context the new client gets (None: httpx2's default,
    which loads the CA bundle each time a client is made, although the URL is plain http)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    start = time.perf_counter()
    async with (
        httpx2.AsyncClient(headers={"X-Api-Key": KEY}, timeout=60, verify=tls if tls is not None else True) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        series.ready.append((time.perf_counter() - start) * 1000)
        if len(tools.tools) != 6:
            raise RuntimeError(f"HTTP listed {len(tools.tools)} tools")
        if refresh:
            await session.call_tool("memory_search", {"query": queries[0], "refresh": True})
        elif queries:
            await searches(session, queries, series)


def shim_times(log: Path) -> dict[str, list[float]]:
    """The shim's own time (its ``http`` log lines' ``ms``) per MCP request, by answer: 200 (a request
    answered: initialize, tools/list, tools/call) and 202 (a notification)."""
    out: dict[str, list[float]] = {"200": [], "202": []}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"/mcp/agents/{agentId}"' in line:
            entry = json.loads(line)
            out.setdefault(str(entry["status"]), []).append(float(entry["ms"]))
    return out


def row(label: str, transport: str, values: list[float]) -> str:
    ms = sorted(values)
    if not ms:
        return f"| {label} | {transport} | 0 | | | |"
    return (f"| {label} | {transport} | {len(ms)} | {percentile(ms, 50):.1f} | {percentile(ms, 99):.1f} "
            f"| {ms[-1]:.1f} |")


def report(stdio: Series, http: Series, fresh: Series, own: dict[str, list[float]], meta: dict[str, str]) -> tuple[str, list[str]]:
    """(markdown, PASS/FAIL lines)."""
    md = ["## MCP ready: stdio cold start vs streamable HTTP", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += [
        "",
        "| measurement | transport | samples | p50 ms | p99 ms | max ms |",
        "|---|---|---:|---:|---:|---:|",
        row("ready: connect -> tools/list answered", "stdio (spawn `gateway mcp`)", stdio.ready),
        row("ready: connect -> tools/list answered", "streamable HTTP (shim)", http.ready),
        row("ready, the client also loading its CA bundle (info)", "streamable HTTP (shim)", fresh.ready),
        row("memory_search, first of the session", "stdio", stdio.first_search),
        row("memory_search, first of the session", "streamable HTTP", http.first_search),
        row("memory_search, later in the session", "stdio", stdio.later_searches),
        row("memory_search, later in the session", "streamable HTTP", http.later_searches),
        row("the shim's own time per request answered (its log, info)", "streamable HTTP", own.get("200", [])),
        row("the shim's own time per notification (its log, info)", "streamable HTTP", own.get("202", [])),
    ]
    ready = sorted(http.ready)
    p50, p99 = percentile(ready, 50), percentile(ready, 99)
    ratio = percentile(sorted(stdio.ready), 50) / p50 if p50 else float("nan")
    verdicts = [
        f"{'PASS' if p50 <= GOAL_HTTP_READY_MS else 'FAIL'}: HTTP ready p50 <= {GOAL_HTTP_READY_MS:g} ms: {p50:.1f} ms",
        f"{'PASS' if p99 <= GOAL_HTTP_READY_MS else 'FAIL'}: HTTP ready p99 <= {GOAL_HTTP_READY_MS:g} ms: {p99:.1f} ms",
        f"info: stdio ready p50 / HTTP ready p50 = {ratio:.0f}x",
    ]
    return "\n".join(md), verdicts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, keep_home="keep the temp home (logs) after the run")
    p.add_argument("--samples", type=int, default=30, help="sessions of each transport (default 30)")
    p.add_argument("--http-per-round", type=int, default=4,
                   help="HTTP sessions per round, each as measured (default 4: they are cheap; the p99 is then not one sample)")
    p.add_argument("--searches", type=int, default=5, help="memory_search calls per session (default 5)")
    p.add_argument("--notes", type=int, default=300, help="notes in the agent's memory/ (default 300)")
    p.add_argument("--seed", type=int, default=15)
    args = p.parse_args(argv)
    if min(args.samples, args.searches, args.notes, args.http_per_round) < 1:
        p.error("--samples, --http-per-round, --searches and --notes must be at least 1")
    return args


async def measure(
    home: Path, url: str, args: argparse.Namespace, rng: random.Random, shim_pid: int
) -> tuple[Series, Series, Series, float]:
    stdio, http, fresh = Series(), Series(), Series()
    tls = ssl.create_default_context()  # made once, as a runtime's HTTP stack would
    await http_session(url, ["deploy staging"], Series(), tls=tls, refresh=True)  # index the notes; not counted
    shim_cpu = 0.0
    for n in range(args.samples):
        queries = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(args.searches)]
        await stdio_session(home, queries, stdio)
        for _ in range(args.http_per_round):
            before = cpu_seconds(shim_pid)
            await http_session(url, queries, http, tls=tls)
            shim_cpu += cpu_seconds(shim_pid) - before
        await http_session(url, [], fresh, tls=None)
        say(f"round {n + 1}/{args.samples}: stdio ready {stdio.ready[-1]:.0f} ms, HTTP ready {http.ready[-1]:.1f} ms "
            f"({fresh.ready[-1]:.1f} ms with a fresh TLS context)")
    return stdio, http, fresh, shim_cpu * 1000 / len(http.ready)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("mcp_ready", TITLE, METHOD, argv)
    rng = random.Random(args.seed)
    with session("mcp-ready-", keep=args.keep_home, logs="") as (home, children):
        http_port = write_home(home, args.notes, rng)
        children.serve("kb", home)
        children.serve("http", home)
        wait_until(children, lambda: kb_serving(f"http://127.0.0.1:{http_port}/healthz"), "the shim and the KB")
        url = f"http://127.0.0.1:{http_port}/mcp/agents/{AGENT}"
        stdio, http, fresh, shim_cpu_ms = asyncio.run(measure(home, url, args, rng, children.procs["http"].pid))
        children.check_alive()
        own = shim_times(home / "http.log")

    import mcp  # noqa: F401 - for the version line only

    from importlib.metadata import version

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{page.machine()}; load average before the run {run.load_before} (other work on the machine skews the numbers)",
        "client": f"the mcp SDK's own ClientSession ({version('mcp')}) in the bench process; stdio_client spawning "
        "`python -m gateway_cli.cli mcp`, or streamable_http_client with a new httpx2 client (new TCP connection) per session",
        "servers": "gateway serve kb + gateway serve http (the MCP host), stateless JSON streamable HTTP",
        "sessions": f"{args.samples} rounds of 1 stdio session, {args.http_per_round} HTTP sessions and 1 HTTP session "
        f"with a fresh TLS context; {args.searches} memory_search per measured session "
        f"(two-word queries, limit 6) over {args.notes} notes; {stdio.misses + http.misses} searches found nothing",
        "shim CPU per HTTP session": f"{shim_cpu_ms:.1f} ms (initialize, initialized, tools/list, "
        f"{args.searches} memory_search)",
    }
    markdown, verdicts = report(stdio, http, fresh, own, meta)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
