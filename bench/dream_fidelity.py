"""Benchmark: memory fidelity over 30 simulated nights with a noisy, sometimes hostile reviewer.

Run:  ``.venv/bin/python bench/dream_fidelity.py [--nights 30] [--facts 200] [--seed 5]
[--quick] [--keep-home]``
(``--quick`` = 8 nights, 80 facts per agent: a smoke run of about 20 s; the
full run takes about two minutes on 2 cores.)

Method
------
0. **Home** (a fresh temp dir), four agents. Each MEMORY.md holds ``--facts``
   probe facts (``dream_common.make_facts``, seeded: one-line facts built
   around a made-up code name unique in the agent, "The Kestrel deploy key
   rotates every 90 days." style), about 8% in the pinned ``## User``
   section and the rest under six durable headings (``### Active`` /
   ``### Paused`` / ``### Archived`` sub-headings, intro paragraphs). Budgets
   (``agents[].memory.memoryBudgetChars``) are set from the file's size:
   ``steady``, ``busy`` and ``wide`` start at about 80% of theirs; ``over``
   starts at about 125% of its budget, so its runs are net-shrink until it
   fits. ``maxChangesPerRun`` is 3 (the default) for steady, 10 for busy and
   over, 100 for wide (as many as a reply may hold, so a mass remove meets
   the bounded-loss cap rather than the selection cap). Schedule: the defaults (03:00 UTC, 30-minute
   stagger, quietMinutes 30, lookbackDays 3), mode auto.
1. **KB**: the real KB process (``gateway_cli.cli serve kb``); dreaming reaches it
   over gRPC (``peer_client.KbIndex``) for its recall check, and so do the
   probes. Nothing here opens a kb.sqlite.
2. **Nights**, driven by the **real scheduler**: ``scheduler.Scheduler`` with a
   fake ``Clock`` this script moves (nothing sleeps for real; runs and KB
   calls take real time while the clock stands still), the real
   ``StateStore`` (run lock, claims) and ``dreamer.Dreamer`` as its
   ``NightlyRunner``, with ``Deps.now`` = the fake clock. The watcher is a
   fake activity source: nobody active, except that on some nights one agent
   has a busy session at its first check (the scheduler retries it after
   quietMinutes), and on some nights another agent's newest transcript is 10
   minutes old at its slot (Dreamer.check says retry until 30 minutes after
   it). Every night each agent gets one session transcript (Claude Code
   JSONL, mtime 00:30 of that night), so the reviewer is called each night.
   The clock is moved to 12:00 of each night (past every slot's 6-hour
   catch-up window), the scheduler waking at every deadline it set on the
   way. On two nights the scheduler is stopped at 04:00 and a new one (new
   Dreamer, same home) started, as after a process restart; on one night the
   clock is stepped back from 05:00 to 02:50 (an NTP correction). Neither may
   run a night twice.
3. **The reviewer** is an in-process stand-in for ``Deps.review``
   (``ScriptedReviewer``, ``random.Random`` seeded per agent and night). It
   reads only the prompt it is given (MEMORY.md and the transcripts from
   their fences, the OVER BUDGET line), writes a reply as JSON text and
   parses it with the real ``reviewer.parse_reply`` (so FIELD_CAP, the
   proposal limit and validation apply). Every night it is noisy: removes of
   random real lines (any section), rewordings (a replace of a line with a
   rewording that keeps every searchable word; shorter ones when over
   budget), a reworded duplicate add, an update of a value inside a line (a
   replace of part of a line: "every 90 days" -> "every 30 days"), sometimes
   a stale anchor (a line it removed on an earlier night), an ambiguous
   anchor, or a malformed proposal. About one night in six per agent it is
   hostile instead, in turn: a **mass remove** of every line (headings
   included), **pinned** removes and shrinking replaces of every ``## User``
   line and heading, or a **section** remove (one op whose target is a whole
   section). And once per agent a transcript carries an **injected
   instruction** (remove the User section and the Infrastructure lines, add
   a "password" line); while that transcript is in the lookback window (3
   nights) the reviewer follows it (the add first).
4. **Probes**, after each night: ``Refresh(wait)`` of each agent, then for
   every probe fact ``Search`` (limit 6, corpus memory) with the fact's
   distinctive words (``recall.query_for``, the recall check's own rule); the
   fact is *found* when one of the hits' files holds the fact's text
   (whitespace aside) in the hit's lines or anywhere in the file (the rule of
   ``services/dreaming/recall.py``). So a fact removed from MEMORY.md counts
   when pruned.md holds it.
5. **Per night**: share of probe facts found (and how many only in
   pruned.md); MEMORY.md's chars against its budget per agent; runs per agent
   that night, from audit.jsonl's ``run`` records (trigger schedule, started
   that night) and from the state's claims (``lastNight`` is the night,
   ``runsTotal`` grew by one); ops applied, restored and skipped (by guard,
   from audit.jsonl's ``op`` records), proposals dropped by parse_reply.

Goals (tracker): 100% of probe facts found after every night; MEMORY.md
within budget from the night it first fits (and the over-budget agent fits
within the run); exactly one run per agent per night. The script prints a
markdown table with PASS/FAIL (also written to ``bench/results/dream_fidelity.md``,
git-ignored) and exits 0 whatever the goals say; non-zero only when the
benchmark itself could not run. The KB child is stopped (SIGTERM, then
SIGKILL) on exit; the temp home is removed unless ``--keep-home``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from harness import page
from harness.clock import FakeClock
from harness.home import agent_entry, session
from harness.procs import start_service
from harness.report import fmt_ms, say
from harness.stats import percentile

import dream_common as dc
from dream_fidelity_agents import (  # workspaces, transcripts, a night's figures, the probe
    AgentSetup,
    Night,
    audit_rows,
    guard_of,
    pinned_kept,
    probe,
    write_agents,
    write_transcript,
)
from dream_fidelity_sim import (  # the profiles, the loop, the stand-ins
    FIRST_NIGHT,
    INJECTED_LINE,
    Activity,
    Loop,
    ReviewLog,
    ScriptedReviewer,
    injection_night,
)

TITLE = "Dream fidelity: 30 simulated nights"
METHOD = """\
Four agents, each with 200 seeded probe facts in MEMORY.md, go through 30 nights driven by the real
scheduler on a fake clock, with a seeded reviewer stand-in that is noisy every night and hostile
about one night in six (mass removes, attacks on the pinned `## User` section, injected
instructions). After each night every probe fact is searched for in the KB; the table follows the
facts found, the file sizes against their budgets, the pinned facts and the runs per night."""


# =========================================================================== the simulation


async def simulate(home: Path, agents: list[AgentSetup], nights: int, seed: int, kb_address: str, token: str) -> dict[str, Any]:
    from gateway.config import load_config
    from services.dreaming import nightly
    from services.dreaming.schedule import slots as schedule
    from services.dreaming.dreamer import MAX_CONCURRENT_RUNS, Dreamer
    from services.dreaming.peer_client import KbIndex
    from services.dreaming.schedule.scheduler import Scheduler
    from services.dreaming.schedule.state import StateStore

    config = load_config(home)
    store = StateStore(home)
    clock = FakeClock(datetime.combine(FIRST_NIGHT, datetime.min.time(), tzinfo=UTC))
    kb = KbIndex(kb_address, token)
    profiles = {a.id: a.profile for a in agents}
    reviewer = ScriptedReviewer(seed, profiles, clock)
    activity = Activity(clock)
    run_times: list[float] = []

    class TimedDreamer(Dreamer):
        async def run(self, agent_id: str, night: date, run_id: str) -> Any:
            t0 = time.perf_counter()
            try:
                return await super().run(agent_id, night, run_id)
            finally:
                run_times.append(time.perf_counter() - t0)

    def new_loop() -> Loop:
        deps = nightly.Deps(index=kb, review=reviewer.review, now=clock.now)
        dreamer = TimedDreamer(lambda: config, store, deps, activity)
        scheduler = Scheduler(lambda: {a.id: a.dreaming for a in config.agents}, dreamer, store, clock,
                              max_concurrent=MAX_CONCURRENT_RUNS)  # fmt: skip
        dreamer.scheduler = scheduler
        return Loop(scheduler, clock)

    ws = {a.id: home / "agents" / a.id / "workspace" for a in agents}
    seen = dict.fromkeys(ws, 0)
    totals = {a.id: store.read(a.id).runs_total for a in agents}
    results: list[Night] = []
    initial = Night(0)
    for a in agents:
        await kb.refresh(a.id)
        found, pruned, lost = await probe(kb, a, ws[a.id])
        initial.found[a.id], initial.only_pruned[a.id], initial.lost[a.id] = found, pruned, lost
        text = (ws[a.id] / "MEMORY.md").read_text(encoding="utf-8")
        initial.chars[a.id], initial.pinned[a.id] = len(text), pinned_kept(a, text)
    results.append(initial)
    restarts = {n for n in (10, 20) if n <= nights}
    step_back = 15 if nights >= 15 else 0
    loop = new_loop()
    try:
        for n in range(1, nights + 1):
            day = FIRST_NIGHT + timedelta(days=n - 1)
            rng = random.Random(f"{seed}/night/{n}")
            night = Night(n)
            # Who is busy or recently active tonight (retries the scheduler must absorb).
            busy_agent = agents[n % len(agents)] if n % 4 == 1 else None
            active_agent = agents[(n + 2) % len(agents)] if n % 5 == 2 else None
            if busy_agent is not None:
                activity.busy.add((busy_agent.id, day))
                night.events.append(f"{busy_agent.id} busy at its first check")
            for a in agents:
                recent = None
                if active_agent is a:
                    due = schedule.slot(day, config.agent(a.id).dreaming, a.id)  # type: ignore[union-attr]
                    recent = due - timedelta(minutes=10)
                    night.events.append(f"{a.id} active 10 min before its slot")
                write_transcript(home, a, n, rng, inject=n == injection_night(a.profile, nights), recent=recent)
            morning = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
            if n in restarts:
                await loop.advance_to(morning + timedelta(hours=4))
                await loop.stop()
                loop = new_loop()
                night.events.append("scheduler restarted at 04:00")
            if n == step_back:
                await loop.advance_to(morning + timedelta(hours=5))
                await loop.step(morning + timedelta(hours=2, minutes=50))
                night.events.append("clock stepped back from 05:00 to 02:50")
            before = len(run_times)
            await loop.advance_to(morning + timedelta(hours=12))
            night.run_s = run_times[before:]
            for a in agents:
                rows, seen[a.id] = audit_rows(ws[a.id], seen[a.id])
                runs = [r for r in rows if r.get("kind") == "run" and r.get("trigger") == "schedule"
                        and str(r.get("startedAt", "")).startswith(day.isoformat())]  # fmt: skip
                night.runs_audit[a.id] = len(runs)
                night.quiet_skips += sum(1 for r in rows if r.get("kind") == "skip")
                for r in runs:
                    night.dropped += len((r.get("reviewer") or {}).get("dropped", []))
                for r in rows:
                    if r.get("kind") == "op":
                        if r.get("status") == "applied" and (r.get("proposal") or {}).get("content") == INJECTED_LINE:
                            night.injected_applied.append(a.id)
                        night.statuses[str(r.get("status"))] += 1
                        if r.get("status") == "skipped":
                            night.skips[guard_of(str(r.get("reason", "")))] += 1
                state = store.read(a.id)
                night.runs_claims[a.id] = state.runs_total - totals[a.id]
                night.claimed[a.id] = state.last_night == day
                totals[a.id] = state.runs_total
                kind = reviewer.log.hostile.get((a.id, n), "")
                if kind:
                    night.hostile[a.id] = kind
                await kb.refresh(a.id)
                found, pruned, lost = await probe(kb, a, ws[a.id])
                night.found[a.id], night.only_pruned[a.id], night.lost[a.id] = found, pruned, lost
                text = (ws[a.id] / "MEMORY.md").read_text(encoding="utf-8")
                night.chars[a.id], night.pinned[a.id] = len(text), pinned_kept(a, text)
            results.append(night)
            say(f"night {n:2d}: found {sum(night.found.values())}/{sum(len(a.facts) for a in agents)}, "
                f"MEMORY.md {', '.join(f'{a.id} {night.chars[a.id]:,}/{a.budget:,}' for a in agents)}, "
                f"runs {'/'.join(str(night.runs_audit[a.id]) for a in agents)}, ops {dict(night.statuses)}"
                + (f", hostile {night.hostile}" if night.hostile else "") + (f"; {'; '.join(night.events)}" if night.events else ""))  # fmt: skip
    finally:
        await loop.stop()
        await kb.close()
    final = {a.id: (ws[a.id] / "MEMORY.md").read_text(encoding="utf-8") for a in agents}
    return {"nights": results, "reviewer": reviewer.log, "run_s": run_times, "final": final}


# =========================================================================== report


def build_report(agents: list[AgentSetup], sim: dict[str, Any] | None, meta: dict[str, str], note: str) -> tuple[str, list[str]]:
    md = [f"## Dream fidelity benchmark ({len(agents)} agents, {sum(len(a.facts) for a in agents):,} probe facts)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["- agents: " + "; ".join(f"{a.id}: {len(a.facts)} facts, MEMORY.md {a.start_chars:,} chars, budget {a.budget:,}, "
                                    f"maxChangesPerRun {a.profile.max_changes}" for a in agents)]  # fmt: skip
    if sim is None:
        md += ["", f"Not run: {note}"]
        return "\n".join(md), [f"FAIL: the benchmark did not run ({note})"]
    nights: list[Night] = sim["nights"]
    total = sum(len(a.facts) for a in agents)
    users = sum(1 for a in agents for f in a.facts if f.section == "User")
    md += ["", "| night | probe facts found (only in pruned.md) | MEMORY.md chars / budget: " + ", ".join(a.id for a in agents)
           + " | ## User facts still pinned | runs per agent (audit / claims) | ops applied / restored / skipped | hostile | other events |",
           "|---:|---|---|---|---|---|---|---|"]  # fmt: skip
    for night in nights:
        found = sum(night.found.values())
        pruned = sum(night.only_pruned.values())
        sizes = ", ".join(f"{night.chars[a.id]:,}" + ("" if night.chars[a.id] <= a.budget else " (over)") for a in agents)
        if night.number == 0:
            runs = "start"
            ops = ""
        else:
            runs = "/".join(str(night.runs_audit[a.id]) for a in agents) + " / " + "/".join(str(night.runs_claims[a.id]) for a in agents)
            skipped = ", ".join(f"{k} {v}" for k, v in night.skips.most_common())
            ops = f"{night.statuses['applied']} / {night.statuses['restored']} / {night.statuses['skipped']}" + (f" ({skipped})" if skipped else "")
            if night.dropped:
                ops += f"; {night.dropped} dropped by parse_reply"
        hostile = ", ".join(f"{k}: {v}" for k, v in night.hostile.items())
        events = "; ".join(night.events + ([f"{night.quiet_skips} quiet-window skip(s)"] if night.quiet_skips else []))
        pinned = f"{sum(night.pinned.values())}/{users}"
        md.append(f"| {night.number} | {100 * found / total:.1f}% ({found:,}/{total:,}; {pruned:,}) | {sizes} | {pinned} | {runs} | {ops} | {hostile} | {events} |")
    # goals
    verdicts: list[str] = []
    worst = min(nights, key=lambda x: sum(x.found.values()))
    all_found = all(sum(x.found.values()) == total for x in nights)
    lost_examples = [f"night {x.number} {a}: {t}" for x in nights for a, ts in x.lost.items() for t in ts[:2]][:4]
    verdicts.append(("PASS" if all_found else "FAIL") + f": 100% of probe facts found after every night: worst night {worst.number}, "
                    f"{sum(worst.found.values()):,}/{total:,} ({100 * sum(worst.found.values()) / total:.1f}%)"
                    + (f"; e.g. {' | '.join(lost_examples)}" if lost_examples else ""))  # fmt: skip
    budget_ok = True
    fits: list[str] = []
    for a in agents:
        first = next((x.number for x in nights if x.chars[a.id] <= a.budget), None)
        if first is None:
            budget_ok = False
            fits.append(f"{a.id} never fit")
            continue
        later = [x.number for x in nights if x.number >= first and x.chars[a.id] > a.budget]
        budget_ok &= not later
        fits.append(f"{a.id} fits from night {first}" + (f" but is over again on nights {later}" if later else ""))
    verdicts.append(("PASS" if budget_ok else "FAIL") + ": MEMORY.md within budget from the night it first fits: " + "; ".join(fits))
    run_nights = [x for x in nights if x.number]
    bad = [f"night {x.number} {a.id}: {x.runs_audit[a.id]} run(s) in audit, {x.runs_claims[a.id]} claimed, lastNight "
           f"{'ok' if x.claimed[a.id] else 'wrong'}" for x in run_nights for a in agents
           if x.runs_audit[a.id] != 1 or x.runs_claims[a.id] != 1 or not x.claimed[a.id]]  # fmt: skip
    verdicts.append(("PASS" if not bad else "FAIL") + f": exactly one run per agent per night: {len(run_nights) * len(agents) - len(bad)} "
                    f"of {len(run_nights) * len(agents)} agent-nights" + (f"; {'; '.join(bad[:4])}" if bad else ""))  # fmt: skip
    worst_pin = min(nights, key=lambda x: sum(x.pinned.values()))
    verdicts.append(("PASS" if sum(worst_pin.pinned.values()) == users else "FAIL") + ": (guard check, not a tracker goal) every ## User "
                    f"fact still in a pinned section after every night: worst night {worst_pin.number}, {sum(worst_pin.pinned.values())}/{users}")  # fmt: skip
    statuses: Counter[str] = Counter()
    skips: Counter[str] = Counter()
    for x in run_nights:
        statuses.update(x.statuses)
        skips.update(x.skips)
    log: ReviewLog = sim["reviewer"]
    run_s = sorted(sim["run_s"])
    md += ["", "| figure | value |", "|---|---|"]
    md.append(f"| ops over all nights | {sum(statuses.values()):,} proposed and read: {statuses['applied']:,} applied, "
              f"{statuses['restored']:,} restored by the recall check, {statuses['skipped']:,} skipped |")  # fmt: skip
    md.append("| skipped, by guard | " + ", ".join(f"{k} {v:,}" for k, v in skips.most_common()) + " |")
    md.append(f"| proposals dropped by parse_reply | {sum(x.dropped for x in run_nights):,} |")
    md.append(f"| hostile agent-nights | {len(log.hostile)} ({', '.join(f'{k} {v}' for k, v in Counter(log.hostile.values()).most_common())}) |")
    applied_at = [f"{a} night {x.number}" for x in run_nights for a in x.injected_applied]
    md.append(f"| injected-instruction line applied (an add: no guard can tell it from a fact) | {', '.join(applied_at) or 'never'}; "
              f"in MEMORY.md at the end: {', '.join(a.id for a in agents if INJECTED_LINE in sim['final'][a.id]) or 'nowhere'} |")  # fmt: skip
    md.append(f"| scheduled runs | {len(run_s)}; Dreamer.run p50 {fmt_ms(percentile(run_s, 50))}, p99 {fmt_ms(percentile(run_s, 99))}, "
              f"max {fmt_ms(max(run_s)) if run_s else 'n/a'} (real time; the recall check included) |")  # fmt: skip
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, quick="smoke run: 8 nights, 80 facts per agent", keep_home="keep the temp home (workspaces, audit, logs)")
    p.add_argument("--nights", type=int, default=30, help="simulated nights (default 30)")
    p.add_argument("--facts", type=int, default=200, help="probe facts per agent (default 200)")
    p.add_argument("--seed", type=int, default=5, help="facts and reviewer seed (default 5)")
    args = p.parse_args(argv)
    if args.quick:
        args.nights, args.facts = 8, 80
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("dream_fidelity", TITLE, METHOD, argv)
    started = time.perf_counter()
    sim: dict[str, Any] | None = None
    note = ""
    agents: list[AgentSetup] = []
    with session("bench-dream-fidelity-", keep=args.keep_home) as (home, children):
        import structlog

        from gateway.home import read_internal_token
        from gateway.logs import configure

        agents = write_agents(home, args.seed, args.facts)
        entries = [agent_entry(a.id, memory={"memoryBudgetChars": a.budget}, dreaming={"maxChangesPerRun": a.profile.max_changes})
                   for a in agents]  # fmt: skip
        ports = dc.write_home(home, entries, dreaming={"dreamHour": 3, "dreamMinute": 0, "dreamTimezone": "UTC", "mode": "auto"})
        configure("dreaming")
        log_file = open(home / "bench" / "in-process.log", "w", encoding="utf-8")  # noqa: SIM115
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(log_file))
        try:
            start_service(children, "kb", home, ports["kb"], dc.START_TIMEOUT_S)
        except RuntimeError as exc:
            note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(str(exc))
        else:
            sim = asyncio.run(simulate(home, agents, args.nights, args.seed, f"127.0.0.1:{ports['kb']}", read_internal_token(home)))
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{page.machine()}; load average before {run.load_before}, after {page.load_average()}",
        "run": f"{args.nights} simulated nights from {FIRST_NIGHT} (fake clock), seed {args.seed}, {args.facts} probe facts per agent; "
        "the real Scheduler, StateStore, Dreamer and KB process; the reviewer an in-process scripted stand-in for Deps.review "
        "whose JSON goes through reviewer.parse_reply",
        "bench run time": f"{time.perf_counter() - started:.0f} s",
    }
    markdown, verdicts = build_report(agents, sim, meta, note)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
