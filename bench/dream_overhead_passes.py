"""The dreaming-overhead bench's passes and the floors they are measured against.

Kept apart from bench/dream_overhead.py (the entry script, whose docstring says the method) so each
file stays short; nothing here decides a verdict.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.procs import cpu_seconds, rss_mb
from harness.report import fmt_ms, say
from harness.stats import percentile
from dream_overhead_setup import (
    BUDGET_CHARS,
    RSS_MARKS,
    Agent,
    put_back,
    STEPS,
    TimedIndex,
    instrument,
    Quiet,
    bare_append,
    bare_writes_before,
    bare_writes_after,
    bare_spawn,
)


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
    from services.dreaming.model.values import SCHEDULE
    from services.dreaming.schedule.scheduler import Verdict
    from services.dreaming.model.values import new_run_id
    from services.dreaming.schedule.state import RUNNING, RunSummary

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
    out.rss[0] = rss_mb()
    cpu0 = cpu_seconds()
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
            out.rss[n] = rss_mb()
    out.wall_s = time.perf_counter() - wall0
    out.cpu_s = cpu_seconds() - cpu0
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
    from services.dreaming.model.values import ReviewerOutcome
    from services.dreaming.peer_client import KbIndex
    from services.dreaming.review.prompt import MemoryFile, build_prompt
    from services.dreaming.review.reviewer import reviewer_environment, run_reviewer
    from services.dreaming.review.reply import parse_reply
    from services.dreaming.schedule.state import StateStore
    from services.dreaming.review.transcripts import gather

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
        say(f"pass (a): {pass_a.wall_s:.1f} s, p99 {fmt_ms(percentile(pass_a.seconds, 99))}; putting workspaces back")
        for agent in agents:
            put_back(home, agent)
            await kb.refresh(agent.id)
        say("pass (b): the in-process stand-in reviewer")
        pass_b = await run_pass("(b) in-process stand-in for Deps.review", agents, dreamer_b, store, night_b)
        say(f"pass (b): {pass_b.wall_s:.1f} s, p99 {fmt_ms(percentile(pass_b.seconds, 99))}; putting workspaces back")
        for agent in agents:
            put_back(home, agent)
            await kb.refresh(agent.id)
    finally:
        await kb.close()
    return {"a": pass_a, "b": pass_b, "floors": floors, "steps": {"a": steps_a, "b": STEPS.runs}, "prompt_bytes": len(prompt)}


# =========================================================================== service path
