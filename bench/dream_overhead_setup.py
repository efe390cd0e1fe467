"""The dreaming-overhead bench's agents, timed steps and bare-write floors.

Kept apart from bench/dream_overhead.py (the entry script, whose docstring says the method) so each
file stays short; nothing here decides a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import dream_common as dc
from harness.home import agent_entry

WARMUP = 10
MEMORY_CHARS = 8192
BUDGET_CHARS = 12_000
GOAL_P99_S = 0.020
FLAT_MB = 5.0
RSS_MARKS = (100, 500, 1000)
RPC_TIMEOUT_S = 60.0
CAT = "/bin/cat"
T = TypeVar("T")


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
    from services.dreaming.apply.recall import query_for

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
    entries = [agent_entry(i, dreaming={"reviewerCommand": [CAT, str(home / "bench" / "replies" / f"{i}.json")]}) for i in ids]
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
    """Wrap what ``nightly.run`` calls, where it looks them up (a wing module's attribute), so the
    breakdown sees each step (info only)."""
    from services.dreaming import nightly
    from services.dreaming.apply import applier, commit, restore, selection
    from services.dreaming.passes import deterministic
    from services.dreaming.review import ask, prompt, transcripts
    from services.dreaming.vault import promotion

    for module, name in ((transcripts, "gather"), (selection, "select"), (applier, "plan"), (commit, "commit"),
                         (nightly, "_finish")):
        setattr(module, name, timed_sync(name, getattr(module, name)))
    ask.build_prompt = timed_sync("build_prompt", prompt.build_prompt)  # type: ignore[attr-defined]
    restore.check_commit = timed_async("recall check", restore.check_commit)  # type: ignore[assignment]
    deterministic.run_passes = timed_async("passes (compactor, staleness GC, route-out)", deterministic.run_passes)  # type: ignore[assignment]
    promotion.promote_applied = timed_async("promotion", promotion.promote_applied)  # type: ignore[assignment]


class Quiet:
    """The watcher's activity, standing in: nobody active, no session busy."""

    async def activity(self, agent_id: str) -> Any:
        from services.dreaming.schedule.quiet import Activity

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
