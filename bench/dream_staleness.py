"""Benchmark: one staleness GC pass over an archive of 20,000 entries with a year of retrievals.

Setup: one agent, 1,000 notes under ``memory/`` (20 one-line entries each; 1 in
50 notes under ``memory/pinned/``), each note's mtime drawn over the last year
(the KB's first index dates every entry's first sighting at its file's mtime,
as a backfill does), 200 notes with an own key ``#N`` that a later note
``replaces``. The real KB process indexes it; then a year of synthetic
retrievals goes into its ``kb_retrieval_log`` through the read path's own
writer (``retrieval_log.record_retrievals``, one batch per day, a third of the
entries retrieved 1–6 times at random moments).

Measured: one GC pass of the real dreaming code (``staleness_run.run_gc``)
against the real KB over gRPC, in auto mode with the default settings
(``staleTtlDays`` 90, ``minRetrievalKeep`` 1, ``keepImportance`` 7,
``maxInvalidationsPerRun`` 50): refresh, fold of the year of log rows, the
listing of every entry, reading the notes, the plan, 50 moves through
``relocate``, the recall check and the record. Then the same pass in propose
mode (it plans and writes nothing), and a second auto pass (the next night:
the next 50). Goal: the GC under 2 s.

Nothing here is a test: it prints PASS/FAIL and never fails the build.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from harness import page
from harness.home import agent_entry, session
from harness.procs import start_service
from harness.report import figures_table, say, verdict

import dream_common as dc

TITLE = "Staleness GC: 20,000 entries, a year of retrievals"
METHOD = """\
One agent's archive of 1,000 notes (20 one-line entries each, first seen over the last year, 200
of them superseded by a later note) is indexed by the real KB process, and a year of synthetic
retrievals goes into its retrieval log. One staleness GC pass of the real dreaming code runs
against the KB over gRPC in propose mode, then in auto mode with the default settings (at most 50
moves a night), then once more for the next night."""

NOTES = 1000
PER_NOTE = 20
YEAR_S = 365 * 86_400


def write_archive(workspace: Path, rng: random.Random, notes: int, now: float) -> list[tuple[str, str]]:
    """The notes (module docstring); returns (path, entry text) of every entry."""
    import os

    out: list[tuple[str, str]] = []
    keyed = 0
    for i in range(notes):
        folder = "memory/pinned" if i % 50 == 0 else f"memory/topic-{i % 40:02d}"
        rel = f"{folder}/note-{i:04d}.md"
        name = dc.code_name(rng, set())
        lines = []
        for j in range(PER_NOTE):
            if j == 0 and i % 5 == 1 and keyed < 200:
                keyed += 1
                lines.append(f"- #{keyed}: the {name} {rng.choice(dc._NOUNS)} runbook is owned by {rng.choice(dc._PEOPLE)}")
            elif j == 1 and i % 5 == 3 and 0 < keyed:
                lines.append(f"- replaces #{keyed}: the {name} runbook moved to {rng.choice(dc._CITIES)}")
            else:
                lines.append(f"- {name} step {j}: {rng.choice(dc._NOUNS)} with {rng.choice(dc._PEOPLE)} in {rng.choice(dc._CITIES)}")
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
        mtime = now - rng.uniform(0, YEAR_S)
        os.utime(path, (mtime, mtime))
        out += [(rel, line) for line in lines]
    return out


def write_retrievals(db: Path, entries: list[tuple[str, str]], rng: random.Random, now: float) -> int:
    """A year of retrievals through the read path's writer, one batch per day; the rows written."""
    from dataclasses import dataclass

    from services.kb.index.entries import entry_hash
    from services.kb.archive.retrieval_log import record_retrievals

    @dataclass(frozen=True)
    class Got:
        path: str
        entry_hash: str

    days: dict[int, list[Got]] = {}
    for rel, text in rng.sample(entries, len(entries) // 3):
        for _ in range(rng.randint(1, 6)):
            days.setdefault(rng.randrange(365), []).append(Got(rel, entry_hash(text)))
    written = 0
    for day, hits in sorted(days.items()):
        at = now - YEAR_S + day * 86_400 + 3600
        written += record_retrievals(db, hits, "search", clock=lambda at=at: at, busy_timeout_ms=10_000)
    return written


async def gc_pass(home: Path, kb_address: str, mode: str, run_id: str) -> tuple[float, object]:
    from gateway.config import load_config
    from gateway.home import read_internal_token
    from services.dreaming.peer_client import KbIndex
    from services.dreaming.passes.staleness_run import run_gc

    agent = load_config(home).agents[0]
    index = KbIndex(kb_address, read_internal_token(home))
    try:
        t0 = time.perf_counter()
        at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        out = await run_gc(agent, index, run_id, at, mode, 1, time.time)
        return time.perf_counter() - t0, out
    finally:
        await index.close()


async def listing_time(home: Path, kb_address: str) -> tuple[float, int]:
    """One ListArchiveEntries of every page (what the GC asks the KB for)."""
    from gateway.home import read_internal_token
    from services.dreaming.peer_client import KbIndex

    index = KbIndex(kb_address, read_internal_token(home))
    try:
        t0 = time.perf_counter()
        listing = await index.entries("big")
        return time.perf_counter() - t0, len(listing.entries)
    finally:
        await index.close()


async def first_index(home: Path, kb_address: str) -> float:
    from gateway.home import read_internal_token
    from services.dreaming.peer_client import KbIndex

    index = KbIndex(kb_address, read_internal_token(home))
    try:
        t0 = time.perf_counter()
        await index.refresh("big")
        return time.perf_counter() - t0
    finally:
        await index.close()


def main() -> int:
    parser = page.parser(__doc__, quick="100 notes (2,000 entries): a smoke run")
    args = parser.parse_args()
    run = page.Run.begin("dream_staleness", TITLE, METHOD)
    notes = 100 if args.quick else NOTES
    rng = random.Random(66)
    figures: list[tuple[str, str, str, str]] = []
    checks: list[tuple[bool, str]] = []
    now = time.time()
    with session("dream-staleness-", keep=False) as (tmp, children):
        home = tmp / "home"
        ports = dc.write_home(home, [agent_entry("big")])
        workspace = home / "agents" / "big" / "workspace"
        entries = write_archive(workspace, rng, notes, now)
        (workspace / "MEMORY.md").write_text("# Memory\n\n- The big agent keeps its notes under memory/.\n")
        say(f"{len(entries):,} entries in {notes:,} notes; starting the KB")
        start_service(children, "kb", home, ports["kb"], dc.START_TIMEOUT_S)
        kb_address = f"127.0.0.1:{ports['kb']}"
        index_s = asyncio.run(first_index(home, kb_address))
        rows = write_retrievals(home / "agents" / "big" / "kb.sqlite", entries, rng, now)
        figures.append(("Archive", f"{len(entries):,} entries in {notes:,} notes (first seen over a year); "
                        f"{rows:,} retrieval log rows over the year; KB first index {index_s:.1f} s (info)", "", ""))
        say(f"{rows:,} retrieval rows written; propose pass")
        list_s, listed = asyncio.run(listing_time(home, kb_address))
        figures.append(("ListArchiveEntries, every page (the KB's answer to the GC)", f"{list_s * 1000:.0f} ms for {listed:,} entries", "< 1 s",
                        "PASS" if list_s < 1 else "FAIL"))
        propose_s, planned = asyncio.run(gc_pass(home, kb_address, "propose", "20260101T000000Z-aaaa"))
        due = len(planned.results) + sum(int(n.split(" more entries")[0].rsplit(" ", 1)[-1]) for n in planned.notes if " more entries are due" in n)  # type: ignore[attr-defined]
        figures.append(("GC pass in propose mode (refresh, fold a year of log rows, list, read, plan)", f"{propose_s:.2f} s", "< 2 s",
                        "PASS" if propose_s < 2 else "FAIL"))
        checks.append((propose_s < 2, f"propose pass {propose_s:.2f} s"))
        auto_s, done = asyncio.run(gc_pass(home, kb_address, "auto", "20260101T000100Z-bbbb"))
        applied = [r for r in done.results if r.status == "applied"]  # type: ignore[attr-defined]
        superseded = sum(1 for r in applied if r.proposal.reason.startswith("superseded"))
        figures.append(("GC pass in auto mode (the above, 50 moves through relocate, recall check, record)", f"{auto_s:.2f} s", "< 2 s",
                        "PASS" if auto_s < 2 else "FAIL"))
        figures.append(("  entries moved / due (info)", f"{len(applied)} moved ({superseded} superseded, {len(applied) - superseded} aged out) "
                        f"of {due:,} due; the cap (maxInvalidationsPerRun 50) holds the rest", "", ""))
        checks.append((auto_s < 2 and len(applied) == min(50, due), f"auto pass {auto_s:.2f} s, {len(applied)} moved"))
        for note in done.notes:  # type: ignore[attr-defined]
            say(f"note: {note}")
        again_s, again = asyncio.run(gc_pass(home, kb_address, "auto", "20260102T000100Z-cccc"))
        moved_again = sum(1 for r in again.results if r.status == "applied")  # type: ignore[attr-defined]
        figures.append(("Next night's pass (info)", f"{again_s:.2f} s, {moved_again} more moved", "", ""))
    verdicts = [verdict(ok, text) for ok, text in checks]
    run.finish(figures_table(figures), verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
