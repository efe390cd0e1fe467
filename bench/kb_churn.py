"""Measurement: the KB's memory under the soak's KB traffic, side by side for two or more trees (an A/B of a change).

Run:  ``.venv/bin/python bench/kb_churn.py [--agents 200] [--minutes 6] [--warmup 1.5] [--rate 49]
[--tree DIR ...] [--env LABEL:KEY=VALUE ...] [--seed 7] [--keep-home]``  (not part of ``make test``
nor ``make bench``; docs/capacity.md "Where the KB's memory goes" holds what it found).

Method
------
For each variant (``--tree DIR`` names a checkout to run the KB from, the default being this one;
the same tree may be given twice, for the noise of two runs of the same code; ``--env
LABEL:KEY=VALUE`` adds a variable to the variant whose label is ``LABEL``, ``a``, ``b``, ...), a home
of its own with ``--agents`` agents as the soak makes them (bench/suite_up.py: identity files, a 1 KB
MEMORY.md and two notes of 1.2 KB each), and the KB process alone (``gateway serve kb``) started
from that tree with its memory trace on (``KB_MEMORY_TRACE``, a line every 10 s). Every agent's
archive is built (``Refresh(wait)``) and 20 shared notes are made. Then, for ``--warmup`` +
``--minutes`` minutes, every variant gets the same traffic at the same moments (one asyncio loop,
one seeded generator per variant): the part of the soak's REST mix that reaches the KB, ``--rate``
requests a second over random agents (memory, shared and merged searches 22:8:4, memory get 4,
shared note create 3, get 8 and update 4, and identity files written to the workspace on disk 12,
which the KB's file watch refreshes), 4 notes a second written into agents' ``memory/``, a
session-start refresh (``Refresh``, no wait) twice a second, and every 10 s what a dream asks of
the KB (``Refresh(wait)``, ``FoldRetrievals``, ``ListArchiveEntries``). The variants run at the same
time on the same machine, so a load from other work weighs on all of them alike.

After the warm-up the script fits a least-squares line, in MB a minute, to each trace figure:
RSS, anonymous memory, glibc's arenas (bytes held, in use, free), SQLite's memory, Python's
allocator's arenas and allocated blocks; and to RSS at the top of each minute's swing (the
largest sample of each minute, the minute's release of page caches coming after it). Exits 0
whatever it finds; non-zero only when a KB could not start or died.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import REPO, page
from harness.report import say, table
from harness.stats import percentile

from kb_corpus import NoteWriter
from suite_up import NOTE_CHARS, USER_TEXT, write_fleet_home
from watcher_support import SOUL, memory_text

TITLE = "The KB's memory under churn, side by side"
METHOD = """\
The KB process alone, for each variant (a tree, or the same tree with other environment variables)
on a home of its own with the soak's agents, gets the part of the soak's traffic that reaches the
KB, the same requests at the same moments for every variant. Its memory trace (a line every 10 s)
gives the figures; after the warm-up each is fitted with a least-squares line, in MB a minute."""
START_TIMEOUT_S = 120.0
MIX = (("search", 22), ("shared_search", 8), ("all_search", 4), ("memory_get", 4), ("shared_create", 3),
       ("shared_get", 8), ("shared_update", 4), ("put_file", 12))
IDENTITY_PUTS = (("MEMORY.md", 6), ("USER.md", 2), ("SOUL.md", 1), ("HEARTBEAT.md", 1))
FIGURES = (("rss", "RSS"), ("anonymous", "anonymous"), ("heap_arena", "glibc arenas"), ("heap_used", "glibc in use"),
           ("heap_free", "glibc free"), ("heap_mapped", "glibc mappings"), ("sqlite", "SQLite"),
           ("py_arenas", "Python arenas"))


@dataclass
class Variant:
    label: str
    tree: Path
    env: dict[str, str]
    home: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    stub: Any = None
    metadata: tuple[tuple[str, str], ...] = ()
    rng: random.Random = field(default_factory=random.Random)
    writer: NoteWriter | None = None
    agents: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    created: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    ms: list[float] = field(default_factory=list)
    fixed: str = ""  # "files", "shared" or "all": no new note files, shared notes or either once the traffic starts
    started: float = 0.0  # monotonic, at the KB's spawn (its trace's clock starts about then)
    warm_at: float = 0.0  # the warm-up's end on the trace's clock, seconds

    @property
    def trace(self) -> Path:
        return self.home / "kb-memory.jsonl"


def parse_env(values: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for value in values:
        label, _, pair = value.partition(":")
        key, sep, val = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env {value!r}: expected LABEL:KEY=VALUE")
        out.setdefault(label, {})[key] = val
    return out


def parse_fixed(values: list[str]) -> dict[str, str]:
    """``--fixed-data`` values: label -> "files", "shared" or "all"."""
    out: dict[str, str] = {}
    for value in values:
        label, _, what = value.partition(":")
        if what not in ("", "files", "shared"):
            raise SystemExit(f"--fixed-data {value!r}: expected LABEL, LABEL:files or LABEL:shared")
        out[label] = what or "all"
    return out


def start(variant: Variant, agents: int, seed: int) -> None:
    """The variant's home (the soak's agents, the KB on a free port) and its KB, SERVING."""
    from gateway_cli.health_cli import grpc_serving

    fleet = write_fleet_home(variant.home, agents, seed=seed)
    variant.port = fleet.grpc_ports["kb"]
    variant.agents = fleet.agents
    variant.writer = NoteWriter(random.Random(seed + 1), fleet.vocab)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update({"PYTHONPATH": str(variant.tree), "PYTHONDONTWRITEBYTECODE": "1", "KB_MEMORY_TRACE": str(variant.trace),
                "KB_MEMORY_TRACE_S": "10", **variant.env})
    variant.started = time.monotonic()
    with open(variant.home / "kb.log", "ab") as log:
        variant.proc = subprocess.Popen([sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(variant.home)],
                                        cwd=variant.tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not grpc_serving(f"127.0.0.1:{variant.port}"):
        check_alive(variant)
        if time.monotonic() > deadline:
            raise SystemExit(f"KB {variant.label} not SERVING after {START_TIMEOUT_S:.0f}s")
        time.sleep(0.2)


def check_alive(variant: Variant) -> None:
    if variant.proc is None or variant.proc.poll() is not None:
        tail = (variant.home / "kb.log").read_text(errors="replace").splitlines()[-20:]
        raise SystemExit(f"KB {variant.label} exited:\n" + "\n".join(tail))


class Traffic:
    """The KB's share of the soak's traffic, for every variant at the same moments."""

    def __init__(self, variants: list[Variant], rate: float) -> None:
        from gateway.v1 import kb_pb2

        self.pb = kb_pb2
        self.variants = variants
        self.rate = rate
        self.tasks: set[asyncio.Task[None]] = set()

    async def rpc(self, v: Variant, method: str, request: Any, timeout: float = 60.0) -> Any:
        started = time.perf_counter()
        v.calls += 1
        try:
            reply = await getattr(v.stub, method)(request, metadata=v.metadata, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - counted, the run goes on
            key = f"{method}: {type(exc).__name__} {getattr(exc, 'code', lambda: '')()}"
            v.errors[key] = v.errors.get(key, 0) + 1
            return None
        v.ms.append((time.perf_counter() - started) * 1000)
        return reply

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def query(self, v: Variant) -> str:
        assert v.writer is not None
        return " ".join(v.writer.vocab.content(v.rng) for _ in range(v.rng.choice((1, 1, 2, 2, 3))))

    async def create_shared(self, v: Variant, agent: str) -> None:
        assert v.writer is not None
        v.created += 1
        name = f"churn note {v.created}"
        reply = await self.rpc(v, "CreateSharedNote", self.pb.CreateSharedNoteRequest(
            agent_id=agent, name=name, content=v.writer.note(name, 700, False, False), confirm=v.rng.random() < 0.5))
        if reply is not None and reply.created:
            v.shared.append(name)

    async def one(self, v: Variant, action: str) -> None:
        pb = self.pb
        agent = v.rng.choice(v.agents)
        if action in ("search", "shared_search", "all_search"):
            corpus = {"search": "memory", "shared_search": "shared", "all_search": "all"}[action]
            await self.rpc(v, "Search", pb.SearchRequest(agent_id=agent, query=self.query(v), corpus=corpus))
        elif action == "memory_get":
            await self.rpc(v, "Get", pb.GetRequest(agent_id=agent, path=f"memory/notes-{v.rng.randrange(2)}.md", lines=40))
        elif (action == "shared_create" and v.fixed not in ("shared", "all")) or not v.shared:
            await self.create_shared(v, agent)
        elif action == "shared_get":
            await self.rpc(v, "GetSharedNote", pb.GetSharedNoteRequest(agent_id=agent, name=v.rng.choice(v.shared)))
        elif action in ("shared_update", "shared_create"):
            assert v.writer is not None
            name = v.rng.choice(v.shared)
            await self.rpc(v, "UpdateSharedNote", pb.UpdateSharedNoteRequest(
                agent_id=agent, name=name, content=f"# {name}\n\n- {v.writer.sentence()}\n- {v.writer.sentence()}\n"))
        else:  # an identity file written as the file API writes it: the KB's file watch refreshes
            self.write_identity(v, agent)

    def write_identity(self, v: Variant, agent: str) -> None:
        name = v.rng.choices([n for n, _ in IDENTITY_PUTS], [w for _, w in IDENTITY_PUTS])[0]
        marker = f"{name.lower().split('.')[0]}-{v.rng.getrandbits(40):010x}"
        text = {"MEMORY.md": memory_text(agent, marker), "USER.md": f"{USER_TEXT}\n- latest: {marker}\n",
                "SOUL.md": SOUL.format(agent=agent) + f"\nVersion {marker}.\n"}.get(name, f"# Heartbeat\n\n- {marker}\n")
        (v.home / "agents" / agent / "workspace" / name).write_text(text, encoding="utf-8")

    def write_note(self, v: Variant, n: int) -> None:
        assert v.writer is not None
        agent = v.rng.choice(v.agents)
        rel = f"memory/notes-{n % 2}.md" if v.fixed in ("files", "all") else f"memory/churn-{n % 3000}.md"  # new, then rewrites
        body = v.writer.note(f"{agent} field note {n}", NOTE_CHARS, False, v.rng.random() < 0.3)
        (v.home / "agents" / agent / "workspace" / rel).write_text(f"{body}\n- reference churn{n}\n", encoding="utf-8")

    async def dream(self, v: Variant) -> None:
        agent = v.rng.choice(v.agents)
        await self.rpc(v, "Refresh", self.pb.RefreshRequest(agent_id=agent, wait=True), timeout=120)
        await self.rpc(v, "FoldRetrievals", self.pb.FoldRetrievalsRequest(agent_id=agent))
        await self.rpc(v, "ListArchiveEntries", self.pb.ListArchiveEntriesRequest(agent_id=agent))

    async def run(self, until: float) -> None:
        """Requests at ``rate`` a second, notes at 4, session refreshes at 2, a dream every 10 s, until ``until``."""
        actions, weights = [a for a, _ in MIX], [w for _, w in MIX]
        picker = random.Random(11)
        tick = 0
        step = 1 / self.rate
        next_at = time.monotonic()
        while time.monotonic() < until:
            tick += 1
            action = picker.choices(actions, weights)[0]
            for v in self.variants:
                if len(self.tasks) < 64 * len(self.variants):
                    self.spawn(self.one(v, action))
                if tick % max(1, round(self.rate / 4)) == 0:
                    self.write_note(v, tick)
                if tick % max(1, round(self.rate / 2)) == 0:
                    self.spawn(self.rpc(v, "Refresh", self.pb.RefreshRequest(agent_id=v.rng.choice(v.agents))))
                if tick % max(1, round(self.rate * 10)) == 0:
                    self.spawn(self.dream(v))
            if tick % round(self.rate * 10) == 0:
                for v in self.variants:
                    check_alive(v)
            next_at += step
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=120)


async def prepare(variants: list[Variant]) -> None:
    """Every archive built, 20 shared notes made, in every variant."""
    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2_grpc

    traffic = Traffic(variants, 1)
    for v in variants:
        v.stub = kb_pb2_grpc.KnowledgeStub(grpc.aio.insecure_channel(f"127.0.0.1:{v.port}"))
        v.metadata = (("x-gateway-internal-token", read_internal_token(v.home)),)
    started = time.perf_counter()
    for v in variants:
        for i in range(0, len(v.agents), 8):
            await asyncio.gather(*(traffic.rpc(v, "Refresh", traffic.pb.RefreshRequest(agent_id=a, wait=True), 300)
                                   for a in v.agents[i:i + 8]))
        for n in range(20):
            await traffic.create_shared(v, v.agents[n % len(v.agents)])
    say(f"{len(variants)} x {len(variants[0].agents)} archives built, 20 shared notes each: {time.perf_counter() - started:.0f} s")


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minutes, value) points, per minute."""
    n = len(points)
    if n < 3:
        return float("nan")
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / var if var else float("nan")


def read_trace(path: Path, after_s: float) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return [r for r in rows if r["t"] >= after_s]


def figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {key: slope([(r["t"] / 60, float(r[key])) for r in rows if key in r]) for key, _ in FIGURES}
    out["rest"] = slope([(r["t"] / 60, r["anonymous"] - r["heap_arena"] - r["heap_mapped"] - r.get("py_arenas", 0))
                         for r in rows if "heap_arena" in r])
    out["py_blocks"] = slope([(r["t"] / 60, r["py_blocks"] / 1000) for r in rows])
    by_minute: dict[int, tuple[float, float]] = {}
    for r in rows:
        minute = int(r["t"] // 60)
        if minute not in by_minute or r["rss"] > by_minute[minute][1]:
            by_minute[minute] = (r["t"] / 60, float(r["rss"]))
    out["rss_tops"] = slope(sorted(by_minute.values()))
    return out


def report(variants: list[Variant], warmup_s: float, minutes: float) -> str:
    header = ["figure"] + [v.label for v in variants]
    fits, firsts, lasts = {}, {}, {}
    for v in variants:
        rows = read_trace(v.trace, v.warm_at)
        fits[v.label] = figures(rows)
        firsts[v.label], lasts[v.label] = (rows[0], rows[-1]) if rows else ({}, {})
    lines = []
    for key, name in (*FIGURES, ("rest", "anonymous outside glibc's and Python's figures"), ("py_blocks", "Python blocks (thousands)"), ("rss_tops", "RSS, top of each minute")):
        lines.append([f"{name}, MB/min" if key != "py_blocks" else f"{name}/min"]
                     + [f"{fits[v.label][key]:+.2f}" for v in variants])
    for key, name in (("rss", "RSS after warm-up, MB"), ("sqlite", "SQLite after warm-up, MB")):
        lines.append([name] + [f"{firsts[v.label].get(key, float('nan')):.1f} → {lasts[v.label].get(key, float('nan')):.1f}"
                               for v in variants])
    lines.append(["calls (errors)"] + [f"{v.calls} ({sum(v.errors.values())})" for v in variants])
    lines.append(["call p50 / p99, ms"] + [f"{percentile(v.ms, 50):.1f} / {percentile(v.ms, 99):.1f}" if v.ms else "-"
                                            for v in variants])
    body = [f"{minutes} min measured after a {warmup_s / 60:.1f} min warm-up; variants: "
            + "; ".join(f"{v.label} = {v.tree}{' ' + str(v.env) if v.env else ''}{f' (fixed: {v.fixed})' if v.fixed else ''}"
                        for v in variants), "",
            table(header, lines, "l" + "r" * len(variants))]
    for v in variants:
        if v.errors:
            body += ["", f"{v.label} errors: {v.errors}"]
    return "\n".join(body)


def main() -> int:
    parser = page.parser(__doc__, keep_home="keep the temp homes after the run")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=6.0, help="minutes measured after the warm-up")
    parser.add_argument("--warmup", type=float, default=1.5, help="minutes of traffic before the measured ones")
    parser.add_argument("--rate", type=float, default=49.0, help="KB requests a second (the soak's 75 x its KB share)")
    parser.add_argument("--tree", action="append", default=[], help="a checkout to run a KB from (repeatable)")
    parser.add_argument("--env", action="append", default=[], help="LABEL:KEY=VALUE for one variant (repeatable)")
    parser.add_argument("--fixed-data", action="append", default=[], metavar="LABEL[:files|shared]",
                        help="this variant makes no new note files (files), shared notes (shared) or either (no suffix) "
                             "once the traffic starts: it rewrites and updates instead (repeatable)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    bench_run = page.Run.begin("kb_churn", TITLE, METHOD)
    trees = [Path(t).resolve() for t in args.tree] or [REPO, REPO]
    envs = parse_env(args.env)
    fixed = parse_fixed(args.fixed_data)
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="kb-churn-"))
    variants = [Variant(chr(ord("a") + i), tree, envs.get(chr(ord("a") + i), {}), base / chr(ord("a") + i),
                        rng=random.Random(args.seed), fixed=fixed.get(chr(ord("a") + i), ""))
                for i, tree in enumerate(trees)]
    try:
        for v in variants:
            start(v, args.agents, args.seed)
        say("KBs SERVING: " + ", ".join(f"{v.label} pid {v.proc.pid if v.proc else 0}" for v in variants))

        async def drive() -> None:
            await prepare(variants)
            traffic = Traffic(variants, args.rate)
            began = time.monotonic()
            for v in variants:  # the trace's clock starts with the KB: the warm-up's end on it
                v.warm_at = began - v.started + args.warmup * 60
            say(f"traffic: {args.rate:.0f}/s, warm-up {args.warmup} min, then {args.minutes} min measured")
            await traffic.run(began + (args.warmup + args.minutes) * 60)

        asyncio.run(drive())
        body = report(variants, args.warmup * 60, args.minutes)
        for v in variants:  # the raw traces, beside the results page
            shutil.copyfile(v.trace, page.RESULTS_DIR / f"kb_churn-{v.label}.jsonl")
    finally:
        for v in variants:
            if v.proc is not None and v.proc.poll() is None:
                v.proc.terminate()
                try:
                    v.proc.wait(60)
                except subprocess.TimeoutExpired:
                    v.proc.kill()
        if args.keep_home:
            say(f"homes kept under {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    bench_run.finish(body, [], write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
