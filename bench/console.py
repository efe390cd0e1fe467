"""Benchmark: the web console's Agents page with 200 agents, in headless Chromium.

Run:  ``make bench``  or  ``.venv/bin/python bench/console.py [--agents 200] [--rounds 20]
[--refreshes 12] [--calls 20] [--burst 50] [--quick] [--keep-home]``  (about three minutes on 2 cores; it needs
the playwright package and Debian's chromium at /usr/bin/chromium, which ``make bench`` installs).

Method
------
A fresh temp home holds ``--agents`` agents (``c000``, ``c001``…), each with SOUL.md, USER.md and
a MEMORY.md of varied size (one in ten over its budget), and one write key for every agent; the
nightly dream slot is 12 hours away. The file API, watcher, KB, dreaming and the REST shim are
started with ``gateway serve NAME`` on free loopback ports; a quarter of the agents then get one
or two live sessions (REST), so rows carry sessions as in a fleet. Before anything is measured
the processes are left to come to rest.

- **Baseline**: the call the page makes, ``GET /api/v1/agents``, with httpx alone (one client,
  keep-alive): ``--calls`` of them 2.5 s apart, as the page polls, then ``--burst`` back to back.
  The watcher keeps each agent's dreaming summary 2 s, so a paced call asks dreaming for all of
  them again and a back-to-back one mostly does not. Client latency, answer size, and the CPU
  (``/proc/PID/stat``) the shim, the watcher (which serves ``ListAgents``) and dreaming (one
  ``GetDreamSummaries`` for the agents not kept) spend per call, less what each spends at rest
  over the same time.
- **Page load**, ``--rounds`` times, 2.5 s apart (so the summaries are asked again, as when a
  person opens the page): a fresh browser context (no cache, the key put in
  ``sessionStorage`` before the page's scripts run, as after a sign-in) opens ``/ui/``. From the
  page's own clocks, relative to the navigation's start: first contentful paint, the list
  call's start and end (Resource Timing), and **data loaded**: when the page has rendered every row
  (it stamps ``#agents`` with ``data-refreshed``), checked to be ``--agents`` rows.
- **Polling**: one page left open for ``--refreshes`` refresh cycles (2.5 s each): the requests it
  makes to ``/api/`` per cycle (the goal is one call for the whole list, not one per agent), the
  CPU per cycle of the shim, the watcher and dreaming (less their rest), and the page's main-thread
  time per cycle (Chromium's own ``TaskDuration``, ``ScriptDuration`` and ``LayoutDuration``).

Goals: data loaded p50 <= 1 s; 1 REST call per refresh. Percentiles are nearest-rank. Prints the
tables (also ``bench/results/console.md``; ``--write-docs`` writes ``docs/benchmarks/console.md``)
and exits 0 whatever the goals say; non-zero only when the bench could not run. Every child is
stopped at the end and the temp home removed unless ``--keep-home``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import page
from harness.home import session, write_suite_config
from harness.procs import Children, cpu_seconds, start_service, wait_until
from harness.report import Figures, say, table
from harness.stats import percentile

import httpx
from start_agents import at_rest, ready

TITLE = "Console: the Agents page with 200 agents"
METHOD = """\
The web console's Agents page in headless Chromium (the system's, driven by Playwright) against the
whole suite with 200 agents, a quarter of them with live sessions. Each round opens the page in a
fresh browser context, signed in, and reads the page's own clocks: first paint and **data loaded**
(every row rendered). One page is then left polling: the REST calls it makes per refresh, the CPU
per refresh of the shim, the watcher (which serves the list) and dreaming (which gives it each
agent's dreaming summary, kept 2 s by the watcher), and the page's own main-thread time. The
baseline is the same `GET /api/v1/agents` made with httpx alone, 2.5 s apart as the page polls
(and back to back, where the kept summaries answer), so the browser's share is visible."""

KEY = "console-bench-key-0123456789"
SERVICES = ("file_api", "watcher", "kb", "dreaming", "http")
MEASURED = ("http", "watcher", "dreaming")  # the processes a refresh of the list costs
CHROMIUM = Path("/usr/bin/chromium")
KEY_ITEM = "gateway-console-key"  # the console's sessionStorage item (gateway_http/console/js/api.js)
REFRESH_S = 2.5  # the page's polling period (agents.js REFRESH_MS)
GOAL_LOADED_S = 1.0
GOAL_CALLS = 1.0
MISSING = "bench/console.py needs the playwright package and Debian's chromium at /usr/bin/chromium (make bench installs both)"


def write_home(home: Path, agents: int) -> tuple[dict[str, int], list[str]]:
    """A home with ``agents`` agents and their identity files; the ports by service, the ids."""
    ids = [f"c{n:03d}" for n in range(agents)]
    ports = write_suite_config(home, ids, KEY, write=True)
    for n, agent_id in enumerate(ids):
        ws = home / "agents" / agent_id / "workspace"
        ws.mkdir(parents=True)
        (home / "agents" / agent_id / "sessions").mkdir()
        facts = 700 if n % 10 == 0 else 20 + n % 60  # one in ten over the MEMORY.md budget
        (ws / "SOUL.md").write_text(f"# Soul\n\n{agent_id} is careful and brief.\n", encoding="utf-8")
        (ws / "USER.md").write_text("# User\n\nPrefers short answers.\n", encoding="utf-8")
        (ws / "MEMORY.md").write_text("# Memory\n\n" + "".join(f"- fact {i}: the ferry leaves at noon\n" for i in range(facts)),
                                      encoding="utf-8")  # fmt: skip
    return ports, ids


def start_suite(children: Children, home: Path, ports: dict[str, int]) -> None:
    for name in SERVICES[:-1]:
        start_service(children, name, home, ports[name])
    children.serve("http", home)
    wait_until(children, lambda: ready("http", ports["http"]), "the REST shim's /healthz", name="http")


def register_sessions(client: httpx.Client, ids: list[str]) -> int:
    """One or two live sessions for every fourth agent; how many were registered."""
    count = 0
    for n, agent_id in enumerate(ids[::4]):
        for s in range(1 + n % 2):
            state = "SESSION_STATE_BUSY" if s else "SESSION_STATE_IDLE"
            client.post(f"/api/v1/agents/{agent_id}/sessions", json={"sessionId": f"chat-{s}", "state": state}).raise_for_status()
            count += 1
    return count


class CpuMeter:
    """CPU seconds of the measured processes, over a window, less what each spends at rest."""

    def __init__(self, pids: dict[str, int], idle_per_s: dict[str, float]) -> None:
        self.pids = pids
        self.idle_per_s = idle_per_s
        self.start: dict[str, float] = {}
        self.began = 0.0

    @classmethod
    def at_rest(cls, pids: dict[str, int], window_s: float) -> CpuMeter:
        """A meter whose rest rates are measured now, over ``window_s`` with nothing asked of them."""
        meter = cls(pids, {name: 0.0 for name in pids})
        meter.begin()
        time.sleep(window_s)
        meter.idle_per_s = {name: max(0.0, spent / window_s) for name, spent in meter.end().items()}
        return meter

    def begin(self) -> None:
        self.began = time.monotonic()
        self.start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def end(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.began
        return {name: cpu_seconds(pid) - self.start[name] - self.idle_per_s[name] * elapsed for name, pid in self.pids.items()}


@dataclass
class Baseline:
    seconds: list[float] = field(default_factory=list)
    answer_bytes: int = 0
    agents: int = 0
    cpu_per_call: dict[str, float] = field(default_factory=dict)


def baseline(base_url: str, calls: int, meter: CpuMeter, pause_s: float) -> Baseline:
    """``calls`` GET /api/v1/agents with httpx alone (after one warm-up call), ``pause_s`` apart."""
    out = Baseline()
    with httpx.Client(base_url=base_url, headers={"X-Api-Key": KEY}, timeout=30) as client:
        client.get("/api/v1/agents").raise_for_status()
        meter.begin()
        for _ in range(calls):
            time.sleep(pause_s)
            start = time.perf_counter()
            answer = client.get("/api/v1/agents")
            out.seconds.append(time.perf_counter() - start)
            answer.raise_for_status()
        out.cpu_per_call = {name: spent / calls for name, spent in meter.end().items()}
    out.answer_bytes = len(answer.content)
    out.agents = len(answer.json().get("agents", []))
    return out


# The page's own clocks after a load, in ms from the navigation's start (performance.timeOrigin).
LOAD_TIMES = """() => {
  const paint = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
  const list = performance.getEntriesByType('resource').find(e => new URL(e.name).pathname === '/api/v1/agents');
  return {paint: paint ? paint.startTime : null, fetchStart: list ? list.startTime : null,
          fetchEnd: list ? list.responseEnd : null, loaded: Number(document.getElementById('agents').dataset.refreshed) - performance.timeOrigin,
          rows: document.querySelectorAll('#agents-rows tr').length};
}"""


def signed_in_context(browser: Any) -> Any:
    """A fresh context (its own cache and storage) whose pages start signed in with ``KEY``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(KEY)})")
    return context


def load_round(browser: Any, base_url: str, agents: int) -> dict[str, float]:
    """One page load in a fresh context: the page's clocks (ms), once every row is rendered."""
    time.sleep(REFRESH_S)  # the watcher's dreaming summaries (kept 2 s) have expired, as when a person opens the page
    context = signed_in_context(browser)
    try:
        tab = context.new_page()
        tab.goto(f"{base_url}/ui/")
        tab.wait_for_selector("#agents[data-refreshed]", timeout=60_000)
        times: dict[str, float] = tab.evaluate(LOAD_TIMES)
    finally:
        context.close()
    if times["rows"] != agents:
        raise RuntimeError(f"the page rendered {times['rows']} rows, not {agents}")
    return times


@dataclass
class Polling:
    refreshes: int = 0
    api_calls: int = 0
    other_paths: set[str] = field(default_factory=set)
    cpu_per_refresh: dict[str, float] = field(default_factory=dict)
    page_ms_per_refresh: dict[str, float] = field(default_factory=dict)


PAGE_METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def page_metrics(cdp: Any) -> dict[str, float]:
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return {m["name"]: float(m["value"]) for m in metrics if m["name"] in PAGE_METRICS}


def polling(browser: Any, base_url: str, cycles: int, meter: CpuMeter) -> Polling:
    """One open page over ``cycles`` refreshes: its /api/ requests, the servers' CPU and its own time per refresh."""
    out = Polling()
    context = signed_in_context(browser)
    try:
        tab = context.new_page()
        requests: list[str] = []
        tab.on("request", lambda r: requests.append(r.url))
        tab.goto(f"{base_url}/ui/")
        tab.wait_for_selector("#agents[data-refreshed]", timeout=60_000)
        cdp = context.new_cdp_session(tab)
        cdp.send("Performance.enable")
        stamp = tab.get_attribute("#agents", "data-refreshed")
        requests.clear()
        meter.begin()
        before = page_metrics(cdp)
        while out.refreshes < cycles:
            tab.wait_for_timeout(100)
            now = tab.get_attribute("#agents", "data-refreshed")
            if now != stamp:
                stamp, out.refreshes = now, out.refreshes + 1
        spent = meter.end()
        after = page_metrics(cdp)
    finally:
        context.close()
    api = [u for u in requests if "/api/" in u]
    out.api_calls = len(api)
    out.other_paths = {httpx.URL(u).path for u in api} - {"/api/v1/agents"}
    out.cpu_per_refresh = {name: s / cycles for name, s in spent.items()}
    out.page_ms_per_refresh = {name: (after[name] - before[name]) * 1000 / cycles for name in PAGE_METRICS}
    return out


def p50_p95(values: list[float], unit: float = 1.0) -> str:
    return f"p50 {percentile(values, 50) * unit:.0f} ms, p95 {percentile(values, 95) * unit:.0f} ms (n={len(values)})"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def cpu_rows(figures: Figures, poll: Polling, paced: Baseline, burst: Baseline) -> None:
    for name in MEASURED:
        figures.add(f"{name} CPU per refresh: page / httpx paced / httpx back to back",
                    f"{ms(poll.cpu_per_refresh[name])} / {ms(paced.cpu_per_call[name])} / {ms(burst.cpu_per_call[name])}")
    page_cpu, base_cpu = sum(poll.cpu_per_refresh.values()), sum(paced.cpu_per_call.values())
    figures.add("ratio: servers' CPU per page refresh / per paced httpx GET", f"{page_cpu / base_cpu:.2f}x" if base_cpu > 0 else "n/a")


def load_steps(rounds: list[dict[str, float]]) -> list[tuple[str, str]]:
    """Where a page load's time goes: each step's time from the navigation's start, then two spans."""
    steps = [(name, p50_p95([r[key] / 1000 for r in rounds if r[key] is not None], 1000))
             for name, key in (("first contentful paint", "paint"), ("the list call starts", "fetchStart"),
                               ("the list call's answer is in", "fetchEnd"), ("every row rendered", "loaded"))]  # fmt: skip
    fetch = [(r["fetchEnd"] - r["fetchStart"]) / 1000 for r in rounds if r["fetchEnd"] is not None]
    render = [(r["loaded"] - r["fetchEnd"]) / 1000 for r in rounds if r["fetchEnd"] is not None]
    return steps + [("span: the list call, in the browser", p50_p95(fetch, 1000)),
                    ("span: answer in → rows rendered", p50_p95(render, 1000))]  # fmt: skip


def report(agents: int, sessions: int, paced: Baseline, burst: Baseline, rounds: list[dict[str, float]],
           poll: Polling) -> tuple[str, list[str]]:  # fmt: skip
    loaded = [r["loaded"] / 1000 for r in rounds]
    paint = [r["paint"] / 1000 for r in rounds if r["paint"] is not None]
    calls = poll.api_calls / poll.refreshes
    figures = Figures()
    figures.add("first contentful paint", p50_p95(paint, 1000))
    figures.add(f"data loaded ({agents} rows rendered)", p50_p95(loaded, 1000), f"p50 <= {GOAL_LOADED_S:.0f} s",
                percentile(loaded, 50) <= GOAL_LOADED_S)
    figures.add("REST calls per refresh", f"{calls:.2f} ({poll.api_calls} calls over {poll.refreshes} refreshes)",
                f"{GOAL_CALLS:.0f} for the whole list", calls <= GOAL_CALLS and not poll.other_paths)
    figures.add(f"baseline: httpx GET /api/v1/agents every {REFRESH_S} s (as the page)", p50_p95(paced.seconds, 1000))
    figures.add("baseline: httpx GET back to back (summaries kept 2 s)", p50_p95(burst.seconds, 1000))
    figures.add("ratio: data loaded p50 / paced httpx GET p50", f"{percentile(loaded, 50) / percentile(paced.seconds, 50):.1f}x")
    cpu_rows(figures, poll, paced, burst)
    setup = (f"{agents} agents ({sessions} live sessions); one list answer is {paced.answer_bytes / 1024:.0f} KiB "
             f"for {paced.agents} agents; {len(rounds)} page loads, {poll.refreshes} refreshes of one open page, "
             f"{len(paced.seconds)} paced and {len(burst.seconds)} back-to-back httpx calls.")
    per_refresh = [(f"page main thread: {name}", f"{value:.1f} ms") for name, value in poll.page_ms_per_refresh.items()]
    body = "\n".join([
        setup, "", figures.table(), "",
        "### Where a page load's time goes (from the navigation's start)", "", table(("step", "time"), load_steps(rounds)), "",
        "### The open page's own work per refresh (Chromium's metrics)", "", table(("figure", "per refresh"), per_refresh),
    ])
    return body, figures.verdicts()


def browser_available() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return os.access(CHROMIUM, os.X_OK)


def measure(args: Any, home: Path, children: Children) -> tuple[str, list[str]]:
    from playwright.sync_api import sync_playwright

    ports, ids = write_home(home, args.agents)
    start_suite(children, home, ports)
    base_url = f"http://127.0.0.1:{ports['http']}"
    with httpx.Client(base_url=base_url, headers={"X-Api-Key": KEY}, timeout=30) as client:
        sessions = register_sessions(client, ids)
    pids = {name: children.procs[name].pid for name in MEASURED}
    say("waiting for the suite to come to rest")
    for name in SERVICES:
        at_rest(children.procs[name].pid, settle_s=60)
    meter = CpuMeter.at_rest(pids, window_s=10.0)
    say(f"baseline: {args.calls} GET /api/v1/agents with httpx, {REFRESH_S} s apart, then {args.burst} back to back")
    paced = baseline(base_url, args.calls, meter, REFRESH_S)
    burst = baseline(base_url, args.burst, meter, 0.0)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            load_round(browser, base_url, args.agents)  # warm-up: Chromium's own start-up is not the page's
            say(f"{args.rounds} page loads")
            rounds = [load_round(browser, base_url, args.agents) for _ in range(args.rounds)]
            say(f"one open page over {args.refreshes} refreshes (about {args.refreshes * REFRESH_S:.0f} s)")
            poll = polling(browser, base_url, args.refreshes, meter)
        finally:
            browser.close()
    return report(args.agents, sessions, paced, burst, rounds, poll)


def main() -> int:
    parser = page.parser(__doc__, quick="5 page loads, 4 refreshes, 6 + 20 httpx calls", keep_home="keep the temp home after the run")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20, help="page loads, each in a fresh browser context")
    parser.add_argument("--refreshes", type=int, default=12, help="refresh cycles of one open page")
    parser.add_argument("--calls", type=int, default=20, help=f"baseline GET /api/v1/agents with httpx, {REFRESH_S} s apart")
    parser.add_argument("--burst", type=int, default=50, help="baseline GET /api/v1/agents with httpx, back to back")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.refreshes, args.calls, args.burst = 5, 4, 6, 20
    if not browser_available():
        say(MISSING)
        return 1
    bench_run = page.Run.begin("console", TITLE, METHOD)
    with session("console-bench-", keep=args.keep_home) as (home, children):
        body, verdicts = measure(args, home, children)
    bench_run.finish(body, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
