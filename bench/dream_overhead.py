"""Benchmark: the overhead of a nightly dream pass, with a reviewer that answers at once.

Run:  ``.venv/bin/python bench/dream_overhead.py [--agents 1000] [--grpc-agents 100] [--seed 11]
[--quick] [--keep-home]``
(``--quick`` = 100 agents, 20 over gRPC: a smoke run of about 20 s; the full
run takes about three minutes on 2 cores.)

Method
------
0. **Home** (a fresh temp dir): ``--agents`` agents plus ``WARMUP`` warm-up
   agents (run first, never counted). Each workspace holds an 8 KB MEMORY.md
   (``dream_common.memory_of_size``: a title, a pinned ``## User`` section, six
   durable sections with sub-headings, intro paragraphs and about 110 one-line
   facts; 8,000-8,192 chars), a 1 KB ``memory/notes.md`` and an empty
   ``memory/archive/`` folder; each agent has one session transcript of eight
   messages, an hour old (so the quiet window says go and the reviewer is
   called). ``gateway.memory.memoryBudgetChars`` is 12,000, so every file is
   under budget and the add is applied (at the default 8,000 the 8 KB file is
   over budget and the add is skipped). The dreaming schedule is put 12 hours
   away, with no stagger, so the dreaming process of step 4 never starts a
   scheduled run of its own.
   **The reply** of each agent (``<home>/bench/replies/<id>.json``, the
   reviewer protocol's JSON) has three ops on real lines of its MEMORY.md: a
   remove of one fact, a replace of another by a rewording, an add of a new
   fact. So every pass commits (pruned archive, backup, compare-and-swap write,
   journal), runs the recall check (one Refresh, two Searches) and audits.
1. **KB**: ``python -m gateway_cli.cli serve kb`` on a free port; after SERVING,
   ``Refresh(wait)`` of every agent (the first index; timed, info). The
   dreaming code reaches the KB only over gRPC (``peer_client.KbIndex``, the
   class the dreaming process uses); nothing here opens a kb.sqlite.
2. **In-process passes** (the bench process drives the real pipeline; RSS and
   CPU below are the bench process's). Per agent, what the scheduler does
   around a run, with the real objects: ``StateStore.lock(id).acquire()``,
   ``Dreamer.check`` (a quiet activity source stands in for the watcher; the
   transcripts' mtime is read for real), ``RunLock.claim_night``,
   ``Dreamer.run`` (= ``nightly.run``, trigger schedule, mode auto) and
   ``RunLock.record_run``. Agents one after the other; per-agent time is that
   whole sequence. Two variants of the reviewer, each a full pass over every
   agent:

   - **(a) real reviewer path**: ``reviewer.run_reviewer`` with the agent's
     ``reviewerCommand`` = ``/bin/cat <reply file>`` (a real subprocess in its
     own session, prompt on stdin, output parsed by ``parse_reply``), in the
     agent's folder of the home, the environment of ``reviewer_environment``;
     as ``services/dreaming/main.py`` does.
   - **(b) in-process stand-in** for ``Deps.review``: returns the reply parsed
     once beforehand; so (b) is our code only.

   Between the passes every workspace is put back as it was (MEMORY.md, no
   pruned.md, no .dreaming/) and pass (b) claims the next night. A breakdown
   of both passes times the pipeline's steps by wrapping the functions
   ``nightly.run`` calls by name (gather, build_prompt, select, plan, commit,
   the recall check, the audit) and the KB calls (info).
3. **The floor**, per agent, in the same run, before the passes (each agent's
   workspace put back and refreshed after):

   - *bare writes + KB*: the files a pass writes before its recall check, in
     the agent's own workspace so the KB's watch sees the same events (state
     claim, pruned.md with the two removed blocks, the backup, the new
     MEMORY.md: each a temp file, fsync, rename, fsync of the folder; the
     journal: append + fsync), then ``KbIndex.refresh`` (Refresh(wait): the
     KB reindexes MEMORY.md and pruned.md) and the recall check's two Searches
     at once, then the writes after it (DREAMS.md, audit.jsonl, state record),
     all by bare ``os`` calls, as one sequence;
   - *bare spawn*: ``asyncio.create_subprocess_exec('/bin/cat', reply)`` in
     its own session with three pipes, a prompt-sized stdin, stdout read to
     EOF, exit awaited: the reviewer subprocess alone;
   - (info) ``refresh`` + one ``search`` with nothing changed (the KB round
     trip alone), and one fsync'd append.

   The *floor sum* of an agent is its bare writes + KB sequence + bare spawn:
   what any implementation of the pass must wait for, given the KB's
   Refresh(wait) and the durability the pass promises.
4. **Service path**: ``python -m gateway_cli.cli serve dreaming`` on the same home;
   ``Dreaming.RunNow`` (sync gRPC client, internal token) for the first
   ``--grpc-agents`` agents, one at a time, mode auto: the real reviewer
   subprocess, the real recall check against the KB. Latency per call, the
   handler time from the service's own rpc log, its CPU per call and RSS.

Memory is *flat* when the RSS after the last agent of a pass is at most
``FLAT_MB`` (5 MB) above the RSS after its first 100 agents (a leak of one
8 KB MEMORY.md text per run would add 7 MB over 900 runs). Goal (tracker):
p99 per agent <= 20 ms and flat memory. Percentiles are nearest-rank. The
script prints a markdown table with PASS/FAIL (also written to
``bench/results/dream_overhead.md``, git-ignored) and exits 0 whatever the
goals say; non-zero only when the benchmark itself could not run. Children
are stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C or failure; the temp home
is removed unless ``--keep-home``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
for _p in (str(REPO), str(BENCH_DIR)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import dream_common as dc  # noqa: E402
import kb_archive as ka  # noqa: E402

RESULTS = BENCH_DIR / "results" / "dream_overhead.md"
WARMUP = 10
MEMORY_CHARS = 8192
BUDGET_CHARS = 12_000
GOAL_P99_S = 0.020
FLAT_MB = 5.0
RSS_MARKS = (100, 500, 1000)
RPC_TIMEOUT_S = 60.0
CAT = "/bin/cat"
T = TypeVar("T")
say = dc.say
pct = dc.pct
fmt_ms = dc.fmt_ms


# =========================================================================== workspaces


@dataclass
class Agent:
    id: str
    memory: str  # MEMORY.md as written at setup
    notes: str
    reply_path: Path
    reply_text: str
    queries: list[str]  # the recall check's two queries (the removed and the replaced line)
    after: str  # MEMORY.md once the three ops are applied (for the floor's bare writes)
    pruned: str  # what the pass archives in pruned.md (same size and words)


def transcript(rng: random.Random, facts: Sequence[dc.Fact], when: datetime) -> str:
    """One Claude Code JSONL session: four user/assistant exchanges about the agent's facts."""
    lines = []
    for i in range(4):
        fact = rng.choice(facts).text
        at = (when + timedelta(minutes=3 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        lines.append({"type": "user", "timestamp": at, "message": {"role": "user", "content": f"Quick check: is this still right? {fact}"}})
        lines.append({"type": "assistant", "timestamp": at, "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"Yes. {fact} I will keep it in memory and update the notes if it changes."}]}})  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in lines)


def make_agent(home: Path, agent_id: str, seed: int) -> Agent:
    """Write one agent's workspace, transcript and reviewer reply."""
    from services.dreaming.recall import query_for

    rng = random.Random(seed)
    facts, memory = dc.memory_of_size(rng, MEMORY_CHARS)
    durable = [f for f in facts if f.section != "User"]
    removed, replaced = rng.sample(durable, 2)
    new_fact = dc.make_facts(random.Random(seed + 7), 30)[-1].text  # a fact of another agent's shape
    reply = {
        "summary": "one obsolete fact removed, one reworded, one learned",
        "proposals": [
            {"op": "remove", "file": "MEMORY.md", "target": f"- {removed.text}", "reason": "the session says it is obsolete",
             "score": 0.8, "recallCount": 1},
            {"op": "replace", "file": "MEMORY.md", "target": f"- {replaced.text}",
             "content": f"- {dc.reword(replaced.text, rng)}", "reason": "clearer wording", "score": 0.7, "recallCount": 2},
            {"op": "add", "file": "MEMORY.md", "content": f"- {new_fact}", "reason": "learned in the last session",
             "score": 0.9, "recallCount": 1, "topic": "new-fact"},
        ],
    }  # fmt: skip
    ws = home / "agents" / agent_id / "workspace"
    (ws / "memory" / "archive").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text(memory, encoding="utf-8")
    notes = "# Notes\n\n" + "".join(f"- {f.text}\n" for f in dc.make_facts(random.Random(seed + 13), 16)[2:])
    (ws / "memory" / "notes.md").write_text(notes, encoding="utf-8")
    sessions = home / "agents" / agent_id / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    when = datetime.now(UTC) - timedelta(hours=1, minutes=30)
    path = sessions / "session-1.jsonl"
    path.write_text(transcript(rng, facts, when), encoding="utf-8")
    stamp = (datetime.now(UTC) - timedelta(hours=1)).timestamp()
    os.utime(path, (stamp, stamp))
    replies = home / "bench" / "replies"
    replies.mkdir(parents=True, exist_ok=True)
    reply_path = replies / f"{agent_id}.json"
    reply_text = json.dumps(reply, indent=1) + "\n"
    reply_path.write_text(reply_text, encoding="utf-8")
    ops: list[dict[str, Any]] = reply["proposals"]  # type: ignore[assignment]
    after = memory.replace(f"{ops[0]['target']}\n", "", 1).replace(str(ops[1]["target"]), str(ops[1]["content"]), 1) + f"{ops[2]['content']}\n"
    pruned = "".join(f"\n## Removed from MEMORY.md \u203a {sec} \u00b7 2026-12-01 \u00b7 run 20261201T030000Z-000000 op {n} ({kind})\n\n{text}\n"
                     for n, (sec, kind, text) in enumerate(((removed.section, "remove", ops[0]["target"]),
                                                            (replaced.section, "replace", ops[1]["target"])), 1))  # fmt: skip
    queries = [query_for(f"- {removed.text}"), query_for(f"- {replaced.text}")]
    return Agent(agent_id, memory, notes, reply_path, reply_text, queries, after, pruned)


def put_back(home: Path, agent: Agent) -> None:
    """The workspace as set up: MEMORY.md, no pruned.md, no .dreaming/ (memory/archive/ stays)."""
    ws = home / "agents" / agent.id / "workspace"
    (ws / "MEMORY.md").write_text(agent.memory, encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        (ws / "memory" / "archive" / "pruned.md").unlink()
    shutil.rmtree(ws / ".dreaming", ignore_errors=True)


def write_setup(home: Path, count: int, seed: int) -> tuple[list[Agent], list[Agent], dict[str, int]]:
    ids = [f"w{i:03d}" for i in range(WARMUP)] + [f"a{i:04d}" for i in range(count)]
    hour = (datetime.now(UTC).hour + 12) % 24
    entries = [dc.agent_entry(i, dreaming={"reviewerCommand": [CAT, str(home / "bench" / "replies" / f"{i}.json")]}) for i in ids]
    ports = dc.write_home(home, entries, memory={"memoryBudgetChars": BUDGET_CHARS},
                          dreaming={"dreamHour": hour, "dreamMinute": 0, "staggerWindowMinutes": 0})  # fmt: skip
    agents = [make_agent(home, agent_id, seed * 1_000_003 + n) for n, agent_id in enumerate(ids)]
    return agents[:WARMUP], agents[WARMUP:], ports


# =========================================================================== timing helpers


@dataclass
class Steps:
    """Seconds per named step, accumulated over the current run (the breakdown)."""

    current: dict[str, float] = field(default_factory=dict)
    runs: list[dict[str, float]] = field(default_factory=list)
    active: bool = False

    def add(self, name: str, seconds: float) -> None:
        if self.active:
            self.current[name] = self.current.get(name, 0.0) + seconds

    def begin(self) -> None:
        self.current = {}
        self.active = True

    def end(self) -> None:
        self.runs.append(self.current)
        self.active = False


STEPS = Steps()


def timed_sync(name: str, fn: Callable[..., T]) -> Callable[..., T]:
    def wrapper(*args: Any, **kwargs: Any) -> T:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS.add(name, time.perf_counter() - t0)

    return wrapper


def timed_async(name: str, fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            STEPS.add(name, time.perf_counter() - t0)

    return wrapper


class TimedIndex:
    """``recall.Index`` over a KbIndex, timing its calls into STEPS (the other calls go straight through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # fold, entries, update_lifecycle, promote…: timed as "kb NAME"
        attr = getattr(self.inner, name)
        return timed_async(f"kb {name}", attr) if asyncio.iscoroutinefunction(attr) else attr

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        t0 = time.perf_counter()
        await self.inner.refresh(agent_id, paths)
        STEPS.add("kb refresh", time.perf_counter() - t0)

    async def probe(self, agent_id: str, probes: Any) -> Any:
        return await self.inner.probe(agent_id, probes)

    async def search(self, agent_id: str, query: str, limit: int) -> Any:
        t0 = time.perf_counter()
        hits = await self.inner.search(agent_id, query, limit)
        STEPS.add("kb searches (concurrent, summed)", time.perf_counter() - t0)
        return hits


def instrument() -> None:
    """Wrap what ``nightly.run`` calls by name, so the breakdown sees each step (info only)."""
    from services.dreaming import nightly

    for name in ("gather", "build_prompt", "select", "plan", "commit", "_finish"):
        setattr(nightly, name, timed_sync(name, getattr(nightly, name)))
    nightly._recall = timed_async("recall check", nightly._recall)  # type: ignore[assignment]
    nightly.run_passes = timed_async("passes (compactor, staleness GC, route-out)", nightly.run_passes)  # type: ignore[assignment]
    nightly.promotion.promote_applied = timed_async("promotion", nightly.promotion.promote_applied)  # type: ignore[assignment]


class Quiet:
    """The watcher's activity, standing in: nobody active, no session busy."""

    async def activity(self, agent_id: str) -> Any:
        from services.dreaming.peer_client import Activity

        return Activity(last_activity_ms=0, busy_sessions=0, live_sessions=0)


# =========================================================================== floors


def bare_atomic(folder: Path, name: str, data: bytes) -> None:
    tmp = folder / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, folder / name)
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def bare_append(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _paths(home: Path, agent: Agent) -> tuple[Path, Path, Path, Path, Path]:
    state = home / "agents" / agent.id
    ws = state / "workspace"
    return state, ws, ws / "memory" / "archive", ws / ".dreaming", ws / ".dreaming" / "backups"


def bare_writes_before(home: Path, agent: Agent) -> float:
    """The files a pass writes before its recall check, in the agent's own workspace (so the KB's
    watch sees the same events), same contents and sizes, same durability, bare os calls (floor):
    the claim (a scratch name beside the real state file), pruned.md, the backup, MEMORY.md, the
    journal."""
    state, ws, archive, dreaming, backups = _paths(home, agent)
    backups.mkdir(parents=True, exist_ok=True)
    memory, after = agent.memory.encode(), agent.after.encode()
    t0 = time.perf_counter()
    bare_atomic(state, "bench-floor.json", b"{" + b" " * 300 + b"}\n")
    bare_atomic(archive, "pruned.md", agent.pruned.encode())
    bare_atomic(backups, "MEMORY.md.floor", memory)
    bare_atomic(ws, "MEMORY.md", after)
    bare_append(dreaming / "journal.jsonl", b"x" * 2400 + b"\n", sync=True)
    return time.perf_counter() - t0


def bare_writes_after(home: Path, agent: Agent) -> float:
    """The files a pass writes after its recall check: DREAMS.md, audit.jsonl, the state record."""
    state, _ws, _archive, dreaming, _backups = _paths(home, agent)
    t0 = time.perf_counter()
    bare_atomic(dreaming, "DREAMS.md", b"x" * 1500)
    bare_append(dreaming / "audit.jsonl", b"x" * 3000 + b"\n", sync=False)
    bare_atomic(state, "bench-floor.json", b"{" + b" " * 400 + b"}\n")
    return time.perf_counter() - t0


async def bare_spawn(agent: Agent, prompt: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        CAT, str(agent.reply_path), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
    )  # fmt: skip
    out, _ = await proc.communicate(prompt)
    if proc.returncode != 0 or not out:
        raise RuntimeError(f"bare spawn of {CAT} failed: {proc.returncode}")
    return time.perf_counter() - t0


# =========================================================================== the in-process passes


@dataclass
class Pass:
    label: str
    seconds: list[float] = field(default_factory=list)  # per agent: the whole scheduler sequence
    run_s: list[float] = field(default_factory=list)  # of which Dreamer.run
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rss: dict[int, float] = field(default_factory=dict)  # agents done -> MB
    problems: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


async def scheduled_run(dreamer: Any, store: Any, agent_id: str, night: date) -> tuple[float, float, Any]:
    """What ``Scheduler._attempt`` does for one agent, with the real objects: lock, quiet check,
    claim, run, record. Returns (whole sequence s, Dreamer.run s, report)."""
    from services.dreaming.model import SCHEDULE
    from services.dreaming.scheduler import Verdict, new_run_id
    from services.dreaming.state import RUNNING, RunSummary

    t0 = time.perf_counter()
    lock = store.lock(agent_id)
    lock.acquire()
    try:
        ready = await dreamer.check(agent_id, night)
        if ready.verdict is not Verdict.GO:
            raise RuntimeError(f"{agent_id}: the quiet check said {ready.verdict.value}: {ready.reason}")
        now = datetime.now(UTC)
        run_id = new_run_id(now)
        started = RunSummary(run_id=run_id, trigger=SCHEDULE, mode="auto", status=RUNNING, started_at=now.isoformat(),
                             night=night.isoformat())  # fmt: skip
        if not lock.claim_night(night, started):
            raise RuntimeError(f"{agent_id}: night {night} was already claimed")
        t1 = time.perf_counter()
        report = await dreamer.run(agent_id, night, run_id)
        t2 = time.perf_counter()
        lock.record_run(RunSummary.from_report(report, night))
    finally:
        lock.release()
    return time.perf_counter() - t0, t2 - t1, report


def check_report(report: Any, problems: list[str]) -> None:
    applied = [r for r in report.ops if r.status == "applied"]
    recall = any(n.startswith("Recall checked") for n in report.notes)
    if report.status != "applied" or len(applied) != 3 or not recall:
        problems.append(f"{report.agent_id}: status {report.status} ({report.reason}), {len(applied)} of {len(report.ops)} ops "
                        f"applied, notes {list(report.notes)}, skipped: {[r.reason for r in report.ops if r.status != 'applied']}")  # fmt: skip


async def run_pass(label: str, agents: list[Agent], dreamer: Any, store: Any, night: date) -> Pass:
    out = Pass(label)
    out.rss[0] = dc.rss_mb()
    cpu0 = dc.cpu_seconds()
    wall0 = time.perf_counter()
    for n, agent in enumerate(agents, 1):
        STEPS.begin()
        whole, run_s, report = await scheduled_run(dreamer, store, agent.id, night)
        STEPS.end()
        out.seconds.append(whole)
        out.run_s.append(run_s)
        out.statuses[report.status] = out.statuses.get(report.status, 0) + 1
        check_report(report, out.problems)
        if n in RSS_MARKS or n == len(agents):
            out.rss[n] = dc.rss_mb()
    out.wall_s = time.perf_counter() - wall0
    out.cpu_s = dc.cpu_seconds() - cpu0
    return out


@dataclass
class Floors:
    kb_roundtrip: list[float] = field(default_factory=list)  # Refresh(wait) + 1 Search, nothing changed
    kb_reindex: list[float] = field(default_factory=list)  # Refresh(wait) + 2 Searches after the bare writes
    kb_refresh: list[float] = field(default_factory=list)  # of which the Refresh(wait)
    writes: list[float] = field(default_factory=list)  # all bare writes
    spawn: list[float] = field(default_factory=list)
    fsync_one: list[float] = field(default_factory=list)
    sequence: list[float] = field(default_factory=list)  # writes before the check + KB + writes after, as one sequence

    def sums(self) -> list[float]:
        return [a + b for a, b in zip(self.sequence, self.spawn, strict=True)]


async def in_process(home: Path, warm: list[Agent], agents: list[Agent], kb_address: str, token: str) -> dict[str, Any]:
    from gateway.config import load_config
    from services.dreaming import nightly
    from services.dreaming.dreamer import Dreamer
    from services.dreaming.model import ReviewerOutcome
    from services.dreaming.peer_client import KbIndex
    from services.dreaming.prompt import MemoryFile, build_prompt
    from services.dreaming.reviewer import parse_reply, reviewer_environment, run_reviewer
    from services.dreaming.state import StateStore
    from services.dreaming.transcripts import gather

    config = load_config(home)
    env = reviewer_environment(os.environ)
    kb = KbIndex(kb_address, token)
    index = TimedIndex(kb)
    store = StateStore(home)
    parsed = {a.id: parse_reply(a.reply_text) for a in warm + agents}

    async def real_review(agent: Any, prompt: str) -> ReviewerOutcome:  # services/dreaming/main.py's review
        folder = agent.home / "agents" / agent.id
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        try:
            return await run_reviewer(agent.dreaming.reviewer_command, prompt, agent.dreaming.reviewer_timeout_seconds,
                                      cwd=folder, env=env)  # fmt: skip
        finally:
            STEPS.add("review", time.perf_counter() - t0)

    async def instant_review(agent: Any, prompt: str) -> ReviewerOutcome:
        t0 = time.perf_counter()
        outcome = ReviewerOutcome(parsed[agent.id], True, "", 0.0, len(parsed[agent.id].summary))
        STEPS.add("review", time.perf_counter() - t0)
        return outcome

    def now() -> datetime:
        return datetime.now(UTC)

    dreamer_a = Dreamer(lambda: config, store, nightly.Deps(index=index, review=real_review, now=now), Quiet())
    dreamer_b = Dreamer(lambda: config, store, nightly.Deps(index=index, review=instant_review, now=now), Quiet())
    night_a = datetime.now(UTC).date() - timedelta(days=2)
    night_b = night_a + timedelta(days=1)
    floors = Floors()
    try:
        # Warm-up: both variants and every floor on agents that are not counted.
        for agent in warm:
            for dreamer, night in ((dreamer_a, night_a), (dreamer_b, night_b)):
                await scheduled_run(dreamer, store, agent.id, night)
                put_back(home, agent)
                await kb.refresh(agent.id)
        instrument()
        # A prompt the size of a real one, for the bare spawn.
        a0 = config.agent(agents[0].id)
        assert a0 is not None
        prompt = build_prompt(agent_id=a0.id, memory=MemoryFile("MEMORY.md", agents[0].memory, len(agents[0].memory), BUDGET_CHARS),
                              user=MemoryFile("USER.md", "", 0, 3000), write_routing=False, episodic_dir="memory",
                              max_changes=3, transcripts=gather(a0.transcripts_dir, now(), 3)).encode()  # fmt: skip
        say(f"floors over {len(agents)} agents (prompt {len(prompt):,} bytes)")
        for agent in warm[:3]:
            bare_writes_before(home, agent)
            bare_writes_after(home, agent)
            await bare_spawn(agent, prompt, env)
            put_back(home, agent)
            await kb.refresh(agent.id)
        for agent in agents:
            t0 = time.perf_counter()
            await kb.refresh(agent.id)
            await kb.search(agent.id, agent.queries[0], 20)
            floors.kb_roundtrip.append(time.perf_counter() - t0)
            floors.spawn.append(await bare_spawn(agent, prompt, env))
            t0 = time.perf_counter()
            before = bare_writes_before(home, agent)
            t1 = time.perf_counter()
            await kb.refresh(agent.id, ["MEMORY.md", "memory/archive/pruned.md"])  # as the pass names what it wrote
            t2 = time.perf_counter()
            hits = await asyncio.gather(*(kb.search(agent.id, q, 20) for q in agent.queries))
            t3 = time.perf_counter()
            after = bare_writes_after(home, agent)
            floors.sequence.append(time.perf_counter() - t0)
            floors.writes.append(before + after)
            floors.kb_refresh.append(t2 - t1)
            floors.kb_reindex.append(t3 - t1)
            if not all(any(h.path == "memory/archive/pruned.md" for h in hs) for hs in hits):
                raise RuntimeError(f"{agent.id}: the floor's searches did not find pruned.md")
            t0 = time.perf_counter()
            bare_append(home / "agents" / agent.id / "fsync-probe", b"x" * 100, sync=True)
            floors.fsync_one.append(time.perf_counter() - t0)
            put_back(home, agent)
            await kb.refresh(agent.id)
        say("pass (a): the real reviewer path, /bin/cat of the reply")
        pass_a = await run_pass("(a) real reviewer path: run_reviewer + /bin/cat", agents, dreamer_a, store, night_a)
        steps_a, STEPS.runs = STEPS.runs, []
        say(f"pass (a): {pass_a.wall_s:.1f} s, p99 {fmt_ms(pct(pass_a.seconds, 99))}; putting workspaces back")
        for agent in agents:
            put_back(home, agent)
            await kb.refresh(agent.id)
        say("pass (b): the in-process stand-in reviewer")
        pass_b = await run_pass("(b) in-process stand-in for Deps.review", agents, dreamer_b, store, night_b)
        say(f"pass (b): {pass_b.wall_s:.1f} s, p99 {fmt_ms(pct(pass_b.seconds, 99))}; putting workspaces back")
        for agent in agents:
            put_back(home, agent)
            await kb.refresh(agent.id)
    finally:
        await kb.close()
    return {"a": pass_a, "b": pass_b, "floors": floors, "steps": {"a": steps_a, "b": STEPS.runs}, "prompt_bytes": len(prompt)}


# =========================================================================== service path


def grpc_phase(home: Path, ports: dict[str, int], agents: list[Agent], children: ka.Children) -> dict[str, Any]:
    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

    pid = dc.start_service("dreaming", home, ports["dreaming"], children)
    channel = grpc.insecure_channel(f"127.0.0.1:{ports['dreaming']}")
    stub = dreaming_pb2_grpc.DreamingStub(channel)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    lat: list[float] = []
    problems: list[str] = []
    rss: dict[int, float] = {}
    try:
        for agent in agents[:3]:  # warm-up (put back after)
            stub.RunNow(dreaming_pb2.RunNowRequest(agent_id=agent.id), metadata=metadata, timeout=RPC_TIMEOUT_S)
        for agent in agents[:3]:
            put_back(home, agent)
        time.sleep(0.2)
        log_mark = ka.rpc_log_lines(children.logs["dreaming"])
        rss[0] = dc.rss_mb(pid)
        cpu0 = ka.cpu_seconds(pid)
        half = max(1, len(agents) // 2)
        for n, agent in enumerate(agents, 1):
            t0 = time.perf_counter()
            reply = stub.RunNow(dreaming_pb2.RunNowRequest(agent_id=agent.id), metadata=metadata, timeout=RPC_TIMEOUT_S)
            lat.append(time.perf_counter() - t0)
            applied = sum(1 for op in reply.ops if op.status == "applied")
            if reply.status != "applied" or applied != 3 or not any(x.startswith("Recall checked") for x in reply.notes):
                problems.append(f"{agent.id}: {reply.status} {reply.reason} {applied} applied {list(reply.notes)}")
            if n in (half, len(agents)):
                rss[n] = dc.rss_mb(pid)
        cpu = ka.cpu_seconds(pid) - cpu0
        time.sleep(0.3)
        server = [float(x) for x in rpc_ms(children.logs["dreaming"], "RunNow", log_mark)]
    finally:
        channel.close()
    return {"lat": lat, "server": server, "cpu_ms": 1000 * cpu / max(1, len(agents)), "rss": rss, "problems": problems, "pid": pid}


def rpc_ms(log: Path, method: str, skip: int) -> list[float]:
    """Seconds of the service's own rpc log lines for ``method`` after its first ``skip`` lines."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle):
            if n < skip or not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if row.get("event") == "rpc" and row.get("method") == method and "ms" in row:
                    out.append(float(row["ms"]) / 1000)
    return out


# =========================================================================== report


def cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    return f"p50 {fmt_ms(pct(list(values), 50))}, p99 {fmt_ms(pct(list(values), 99))}, max {fmt_ms(max(values))} (n={len(values)})"


def rss_cell(rss: dict[int, float]) -> str:
    return ", ".join(("start" if k == 0 else f"after {k:,}") + f" {v:.1f} MB" for k, v in sorted(rss.items()))


def flat(rss: dict[int, float]) -> tuple[bool, str]:
    marks = sorted(k for k in rss if k)
    first = 100 if 100 in rss else marks[0]
    last = marks[-1]
    growth = rss[last] - rss[first]
    return growth <= FLAT_MB, f"{growth:+.1f} MB from {first:,} to {last:,} agents"


def build_report(args: argparse.Namespace, setup: dict[str, Any], res: dict[str, Any] | None, grpc_res: dict[str, Any] | None,
                 meta: dict[str, str], note: str) -> tuple[str, list[str]]:  # fmt: skip
    figs = ka.Figures()
    figs.add("Setup", f"{setup['agents']:,} agents (+{WARMUP} warm-up), MEMORY.md {setup['mem_min']:,}-{setup['mem_max']:,} chars "
             f"(budget {BUDGET_CHARS:,}), written in {setup['write_s']:.1f} s; KB first index of every agent {setup['index_s']:.1f} s, "
             f"KB RSS then {setup.get('kb_rss', float('nan')):.0f} MB")  # fmt: skip
    if res is None:
        figs.add("In-process passes", f"n/a ({note})", "p99 <= 20 ms", None)
    else:
        fl: Floors = res["floors"]
        for p in (res["a"], res["b"]):
            p99 = pct(p.seconds, 99)
            figs.add(f"Pass {p.label}: per agent (lock, quiet check, claim, run, record)", cell(p.seconds), "p99 <= 20 ms", p99 <= GOAL_P99_S)
            figs.add("  of which Dreamer.run (nightly.run)", cell(p.run_s))
            figs.add("  total wall time / CPU of the bench process", f"{p.wall_s:.1f} s for {len(p.seconds):,} agents / "
                     f"{p.cpu_s:.1f} s ({1000 * p.cpu_s / len(p.seconds):.1f} ms per agent)")  # fmt: skip
            ok, why = flat(p.rss)
            figs.add("  RSS of the bench process (VmRSS)", rss_cell(p.rss), f"flat: <= +{FLAT_MB:.0f} MB after the first 100",
                     ok)  # fmt: skip
            figs.add("  flat?", why)
            if p.problems:
                figs.add("  runs not as expected", f"{len(p.problems)}: {p.problems[0][:300]}")
        sums = fl.sums()
        figs.add("Floor sum per agent: bare writes + KB Refresh(wait) + 2 Searches + bare spawn", cell(sums),
                 "below 20 ms, or the goal cannot be met", pct(sums, 99) <= GOAL_P99_S)  # fmt: skip
        figs.add("  bare writes of one pass (6 atomic writes, 1 fsynced append, 1 append: 13 fsyncs)", cell(fl.writes))
        figs.add("  KB Refresh(wait) after those writes + the recall check's 2 Searches at once", cell(fl.kb_reindex))
        figs.add("    of which Refresh(wait) (reindexes MEMORY.md and pruned.md)", cell(fl.kb_refresh))
        figs.add("  bare spawn of /bin/cat (own session, 3 pipes, prompt on stdin)", cell(fl.spawn))
        figs.add("KB Refresh(wait) + 1 Search, nothing changed (info)", cell(fl.kb_roundtrip))
        figs.add("One fsync'd 100-byte append (info)", cell(fl.fsync_one))
        a, b = res["a"], res["b"]
        figs.add("Pass (a) - floor sum, per agent (our code's share)", cell([x - y for x, y in zip(a.seconds, sums, strict=True)]))
        figs.add("Pass (b) - (floor sum - bare spawn), per agent (our code's share)",
                 cell([x - y for x, y in zip(b.seconds, fl.sequence, strict=True)]))  # fmt: skip
        for key, p in (("a", a), ("b", b)):
            steps: list[dict[str, float]] = res["steps"][key]
            if not steps:
                continue
            names = sorted({k for s in steps for k in s}, key=lambda k: -sum(s.get(k, 0.0) for s in steps))
            parts = ", ".join(f"{k} {1000 * sum(s.get(k, 0.0) for s in steps) / len(steps):.2f}" for k in names)
            figs.add(f"Pass ({key}) breakdown of Dreamer.run, mean ms (info)",
                     f"{parts}; Dreamer.run {1000 * sum(p.run_s) / len(p.run_s):.2f} in all, the sequence around it "
                     f"{1000 * (sum(p.seconds) - sum(p.run_s)) / len(p.seconds):.2f} (lock, quiet check, claim, record)")  # fmt: skip
    if grpc_res is None:
        figs.add("Service path: RunNow over gRPC", f"n/a ({note})")
    else:
        lat = grpc_res["lat"]
        figs.add(f"Service path: Dreaming.RunNow over gRPC, {len(lat)} agents, sequential (info)", cell(lat))
        figs.add("  RunNow handler time in the service, rpc log (info)", cell(grpc_res["server"]))
        figs.add("  dreaming process CPU per RunNow / RSS (info)", f"{grpc_res['cpu_ms']:.1f} ms / {rss_cell(grpc_res['rss'])}")
        if grpc_res["problems"]:
            figs.add("  runs not as expected", f"{len(grpc_res['problems'])}: {grpc_res['problems'][0][:300]}")
    md = [f"## Dream pass overhead benchmark ({setup['agents']:,} agents)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", "| figure | value | goal | result |", "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in figs.rows]
    verdicts = [f"{d}: {a} = {b} (goal {c})" for a, b, c, d in figs.rows if d]
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=1000, help="agents in each pass (default 1000)")
    p.add_argument("--grpc-agents", type=int, default=100, help="agents run through RunNow of a dreaming process (default 100)")
    p.add_argument("--seed", type=int, default=11, help="workspace seed (default 11)")
    p.add_argument("--quick", action="store_true", help="smoke run: 100 agents, 20 over gRPC")
    p.add_argument("--keep-home", action="store_true", help="keep the temp home (workspaces, logs)")
    args = p.parse_args(argv)
    if args.quick:
        args.agents, args.grpc_agents = 100, 20
    args.grpc_agents = min(args.grpc_agents, args.agents)
    return args


async def first_index(agents: list[Agent], address: str, token: str) -> None:
    from services.dreaming.peer_client import KbIndex

    kb = KbIndex(address, token)
    sem = asyncio.Semaphore(4)

    async def one(agent_id: str) -> None:
        async with sem:
            await kb.refresh(agent_id)

    try:
        await asyncio.gather(*(one(a.id) for a in agents))
    finally:
        await kb.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    load_before = dc.load_average()
    started = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="bench-dream-overhead-"))
    (home / "bench").mkdir()
    children = ka.Children(home / "bench")
    res: dict[str, Any] | None = None
    grpc_res: dict[str, Any] | None = None
    note = ""
    setup: dict[str, Any] = {"agents": args.agents, "mem_min": 0, "mem_max": 0, "write_s": float("nan"), "index_s": float("nan")}
    try:
        import structlog

        from gateway.home import read_internal_token
        from gateway.logs import configure

        t0 = time.perf_counter()
        warm, agents, ports = write_setup(home, args.agents, args.seed)
        write_s = time.perf_counter() - t0
        sizes = [len(a.memory) for a in agents]
        say(f"{len(agents):,} agents written in {write_s:.1f} s (MEMORY.md {min(sizes):,}-{max(sizes):,} chars)")
        # The pipeline logs as the service does (JSON lines), into a file rather than the terminal.
        configure("dreaming")
        log_file = open(home / "bench" / "in-process.log", "w", encoding="utf-8")  # noqa: SIM115
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(log_file))
        kb_address = f"127.0.0.1:{ports['kb']}"
        token = read_internal_token(home)
        try:
            kb_pid = dc.start_service("kb", home, ports["kb"], children)
        except RuntimeError as exc:
            note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(str(exc))
            index_s = kb_rss = float("nan")
        else:
            t0 = time.perf_counter()
            asyncio.run(first_index(warm + agents, kb_address, token))
            index_s = time.perf_counter() - t0
            kb_rss = dc.rss_mb(kb_pid)
            say(f"KB (pid {kb_pid}) indexed {len(warm) + len(agents):,} agents in {index_s:.1f} s; RSS {kb_rss:.0f} MB")
            res = asyncio.run(in_process(home, warm, agents, kb_address, token))
            try:
                grpc_res = grpc_phase(home, ports, agents[: args.grpc_agents], children)
                say(f"RunNow over gRPC: p99 {fmt_ms(pct(grpc_res['lat'], 99))}")
            except RuntimeError as exc:
                note = f"the dreaming service failed: {str(exc).splitlines()[0]}"
                say(str(exc))
        setup.update(agents=len(agents), mem_min=min(sizes), mem_max=max(sizes), write_s=write_s, index_s=index_s, kb_rss=kb_rss)
    except KeyboardInterrupt:
        say("interrupted; stopping the children")
        return 130
    finally:
        children.stop_all()
        if args.keep_home:
            say(f"home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}; "
        f"load average before {load_before}, after {dc.load_average()} (the machine is shared: numbers are noisy)",
        "agents": f"{args.agents:,} (seed {args.seed}), one after the other; each MEMORY.md about 8 KB with a pinned ## User section; "
        "the reply: a remove, a replace, an add on real lines; mode auto",
        "driven": "passes (a) and (b) in the bench process (its RSS and CPU), against the real KB process over gRPC; "
        f"the service path through a real dreaming process ({args.grpc_agents} agents)",
        "bench run time": f"{time.perf_counter() - started:.0f} s",
    }
    markdown, verdicts = build_report(args, setup, res, grpc_res, meta, note)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(markdown + "\n", encoding="utf-8")
    print()
    for line in verdicts:
        print(line)
    print()
    print(markdown)
    say(f"markdown written to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
