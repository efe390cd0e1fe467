"""Benchmark: forget in a large home: 1,000 agents' archives and a 10,000-note shared vault.

Run:  ``.venv/bin/python bench/forget.py [--agents 1000] [--notes 10000] [--share 0.01] [--seed 5]
[--quick] [--keep-home] [--write-docs]``
(``--quick`` = 50 agents and 500 notes, about 15 s; the full run takes about 2 minutes on 2 cores.)

Method
------
A forget is per agent: ``gateway forget AGENT --text T [--shared]`` rewrites that agent's files and
reindexes and purges its archive, and with ``--shared`` the vault every agent reads. "Forget across a
home of 1,000 agents" is measured as what an operator does with a deletion request there: the text
sits in 1% of the agents (10) and in 1% of the vault's notes (100); the first agent's forget runs
with ``--shared`` (its files, its archive, the vault), then the other nine, one after the other,
each its own files and archive. The 990 other archives are the size of the home, not the work.

1. **Home** (bench/suite_up.py's fleet: config.json written by the project's config writer; per
   agent SOUL.md, USER.md, a 1 KB MEMORY.md, two notes of about 1.2 KB under memory/, and
   memory/archive/pruned.md with one fact only that agent holds). The shared vault ``global``:
   ``--notes`` generated notes (bench/kb_shared_vault.py's ``prefill``) indexed in-process. The home
   is grepped for every 8-character run of the text (invented words and a code): a run found there
   by chance is left out of the check after the forget (the page says how many). Then the text is planted in ``--share`` of the agents (MEMORY.md, memory/notes-1.md,
   pruned.md and a dream's backup of MEMORY.md under .dreaming/backups/) and of the notes; a
   control fact (a token of its own) goes into each planted note and as many other notes.
2. **Suite**: ``gateway serve kb`` and ``gateway serve dreaming`` on the home (the two a forget
   goes through); every agent's archive is built with ``Knowledge.Refresh(wait)`` over gRPC, four
   at a time. The databases' sizes (every agent's kb.sqlite and -wal, the vault's) are read, the
   files of every workspace and every vault note are hashed, and copies are taken for the floor.
3. **Dry run**: ``Dreaming.Forget`` (what ``gateway forget --dry-run`` calls, with the home's
   internal token) of the first planted agent with ``shared``, three times; the median.
4. **Apply**: the same with ``apply``: the agent's files, its archive, the vault's notes and index,
   each database purged (``secure_delete``, FTS5 ``optimize``, checkpoint, ``VACUUM``). Then the
   other planted agents, one after the other, without ``shared``.
5. **After**: the databases' sizes again; ``grep -a -r -l -i -F`` of the text over the whole home
   (databases, WALs, backups, logs) and of every 8-character run of it; the hashes again (only the
   planted files and the forgotten agents' audit.jsonl may differ); searches of the text's words
   in every planted agent's archive and the vault (nothing), and of every control fact: each planted
   agent's and 20 others' own fact, and every control note's (each still found where it was).

**Floor** (bench/forget_floor.py), on copies taken before the forget, outside the suite: for the
dry run, ``grep -r -l -i -F`` of the text over the agent's folder and the vault's folder (the places
the dry run reads; over the whole home as information); for an apply, each file known to hold the
text rewritten with ``str.replace`` (temp file, fsync, rename) and, with apsw on each database
copy, ``secure_delete``, the chunks holding the text updated in place with their FTS5 rows, FTS5
``optimize``, checkpoint, ``VACUUM``, checkpoint.

No time goal is checked (the issue sets none); the checks are PASS/FAIL lines. The machine is
shared (2 cores, other engineers' runs): the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import forget_floor
import forget_home as fh
from harness import page
from harness.home import session
from harness.procs import rpc_seconds, start_service
from harness.report import Figures, say

TITLE = "Forget: 1,000 agents and a 10,000-note vault"
METHOD = """\
A home holds 1,000 agents (each with a few memory files and its built archive) and a shared vault of
10,000 generated notes. A text is planted in 1% of the agents and 1% of the notes. Through the real
KB and dreaming processes the bench times a dry run and an apply of `gateway forget` for the first
agent with `--shared`, then the forget of each other agent holding it, one after the other; it reads
the size of every database before and after, greps the whole home for the text and every 8-character
run of it, checks that only the planted files changed and that facts beside the text are still
found. A floor does the same work bare on copies: `grep -r -l` for the dry run, `str.replace` and
SQLite `secure_delete` + `VACUUM` through apsw for the apply."""
RPC_TIMEOUT_S = 600.0
DRY_RUNS = 3
REFRESH_THREADS = 4
SAMPLE_AGENTS = 20
WORDS = ("Brindlemoor", "QX7PLMNB4RTYWE", "Zephyrinax")
MB = 1e6


def mb(value: float) -> str:
    return f"{value / MB:.1f} MB"


class Suite:
    """The KB and dreaming services on the home, and their stubs."""

    def __init__(self, home: fh.Home, children: Any) -> None:
        import grpc

        from gateway.auth import INTERNAL_TOKEN_HEADER
        from gateway.home import read_internal_token
        from gateway.v1 import dreaming_pb2_grpc, kb_pb2_grpc

        ports = home.fleet.grpc_ports
        start_service(children, "kb", home.home, ports["kb"], 120)
        start_service(children, "dreaming", home.home, ports["dreaming"], 120)
        self.channels = [grpc.insecure_channel(home.fleet.grpc_address(s)) for s in ("kb", "dreaming")]
        self.kb = kb_pb2_grpc.KnowledgeStub(self.channels[0])
        self.dreaming = dreaming_pb2_grpc.DreamingStub(self.channels[1])
        self.metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(home.home)),)

    def refresh(self, agent: str) -> None:
        from gateway.v1 import kb_pb2

        self.kb.Refresh(kb_pb2.RefreshRequest(agent_id=agent, wait=True), metadata=self.metadata, timeout=RPC_TIMEOUT_S)

    def forget(self, agent: str, *, shared: bool, apply: bool) -> tuple[float, Any]:
        from gateway.v1 import dreaming_pb2

        request = dreaming_pb2.ForgetRequest(agent_id=agent, text=fh.TEXT, shared=shared, apply=apply)
        t0 = time.perf_counter()
        report = self.dreaming.Forget(request, metadata=self.metadata, timeout=RPC_TIMEOUT_S)
        return time.perf_counter() - t0, report

    def found(self, agent: str, query: str, corpus: str) -> list[str]:
        from gateway.v1 import kb_pb2

        reply = self.kb.Search(kb_pb2.SearchRequest(agent_id=agent, query=query, corpus=corpus, limit=10),
                               metadata=self.metadata, timeout=60)
        return [hit.path for hit in reply.hits]

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def planted_files(home: fh.Home) -> set[Path]:
    out = {home.vault_dir / rel for rel in home.planted_notes}
    for agent in home.planted_agents:
        ws = home.fleet.workspaces[agent]
        out |= {ws / "MEMORY.md", ws / "memory" / "notes-1.md", ws / "memory" / "archive" / "pruned.md",
                ws / ".dreaming" / "backups" / f"MEMORY.md.{fh.STAMP}"}
    return out


def hashed(home: fh.Home) -> dict[Path, str]:
    found = fh.hashes(home.vault_dir / "notes", set())
    for agent in home.fleet.agents:
        found.update(fh.hashes(home.fleet.workspaces[agent], set()))
    return found


def by_store(report: Any) -> dict[str, tuple[int, int]]:
    """Places and matches per store of a ForgetReport."""
    out: dict[str, tuple[int, int]] = {}
    for place in report.places:
        store = place.store.split(":")[0]
        places, matches = out.get(store, (0, 0))
        out[store] = (places + 1, matches + int(place.count))
    return out


def stores_text(report: Any) -> str:
    return "; ".join(f"{store} {p} place(s), {m} match(es)" for store, (p, m) in sorted(by_store(report).items()))


def measure(args: argparse.Namespace, home: fh.Home, children: Any, floor_dir: Path) -> dict[str, Any]:
    """Steps 2 to 5 of the method; the figures."""
    out: dict[str, Any] = {}
    suite = Suite(home, children)
    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(REFRESH_THREADS) as pool:
            list(pool.map(suite.refresh, home.fleet.agents))
        out["build_archives_s"] = time.perf_counter() - t0
        say(f"{len(home.fleet.agents)} archives built through the KB in {out['build_archives_s']:.1f} s")
        out["before"] = fh.sizes(home)
        out["hashes"] = hashed(home)
        first, rest = home.planted_agents[0], home.planted_agents[1:]
        vault_db = home.vault_dir / "kb.sqlite"
        planted = planted_files(home)
        ws_files = {a: sorted(p for p in planted if p.is_relative_to(home.agent_dir(a))) for a in home.planted_agents}
        notes = sorted(p for p in planted if p.is_relative_to(home.vault_dir))
        shared_copy = forget_floor.copy(floor_dir / first, [home.agent_dir(first) / "kb.sqlite", vault_db], ws_files[first] + notes)
        agent_copies = [forget_floor.copy(floor_dir / a, [home.agent_dir(a) / "kb.sqlite"], ws_files[a]) for a in rest]

        dry = [suite.forget(first, shared=True, apply=False) for _ in range(DRY_RUNS)]
        out["dry_s"] = [s for s, _ in dry]
        out["dry_report"] = dry[-1][1]
        say(f"dry run of {first} (shared): median {statistics.median(out['dry_s']):.2f} s; {stores_text(dry[-1][1])}")
        out["floor_dry_s"] = [fh.grep([home.agent_dir(first), home.vault_dir], fixed=fh.TEXT)[1] for _ in range(DRY_RUNS)]
        listed, out["floor_home_grep_s"] = fh.grep([home.home], fixed=fh.TEXT)
        out["floor_home_grep_files"] = len(listed)

        out["apply_s"], out["apply_report"] = suite.forget(first, shared=True, apply=True)
        say(f"apply of {first} (shared): {out['apply_s']:.2f} s; {out['apply_report'].changed} places rewritten")
        out["each"] = [suite.forget(agent, shared=False, apply=True) for agent in rest]
        out["dry_after"] = suite.forget(first, shared=True, apply=False)[1]
        out["after"] = fh.sizes(home)
        try:  # the KB's share of each forget: its own rpc log lines of ForgetText, in call order
            kb = rpc_seconds(children.logs["kb"], "ForgetText", 0, DRY_RUNS + 2 + len(rest))
            out["kb_s"] = {"dry": kb[:DRY_RUNS], "apply": kb[DRY_RUNS], "each": kb[DRY_RUNS + 1 : -1]}
        except RuntimeError as exc:
            say(f"no KB rpc lines: {exc}")

        out["floor_shared"] = forget_floor.run(shared_copy, fh.TEXT)
        out["floor_each"] = [forget_floor.run(c, fh.TEXT) for c in agent_copies]

        logs = [children.log_dir] if children.log_dir is not None else []  # the services' logs, beside the home
        out["grep_text"], _ = fh.grep([home.home, *logs], fixed=fh.TEXT)
        out["grep_runs"] = fh.grep_runs([home.home, *logs], home.checked_runs)
        now = hashed(home)
        changed = {p for p, h in out["hashes"].items() if now.get(p) != h} | (now.keys() - out["hashes"].keys())
        audits = {home.fleet.workspaces[a] / ".dreaming" / "audit.jsonl" for a in home.planted_agents}
        out["unexpected"] = sorted(str(p.relative_to(home.home)) for p in changed - planted - audits)
        out["unchanged_planted"] = sorted(str(p.relative_to(home.home)) for p in planted - changed)
        out["hashed"] = len(out["hashes"])
        out["text_found"] = [f"{a}: {w}" for a in home.planted_agents for w in WORDS
                             for _ in suite.found(a, w, "all" if a == first else "memory")]
        step = max(1, len(home.fleet.agents) // SAMPLE_AGENTS)
        sample = sorted(set(home.planted_agents) | set(home.fleet.agents[::step]))
        missing = [a for a in sample if "memory/archive/pruned.md" not in
                   suite.found(a, fh.agent_fact(home.fleet.agents.index(a)), "memory")]
        missing += [rel for rel, fact in home.control_notes.items() if rel not in suite.found(first, fact, "shared")]
        out["facts_checked"] = len(sample) + len(home.control_notes)
        out["facts_missing"] = missing
    finally:
        suite.close()
    return out


def report(args: argparse.Namespace, home: fh.Home, m: dict[str, Any], load: str) -> tuple[str, list[str]]:
    figs = Figures()
    before, after = m["before"], m["after"]
    agents = len(home.fleet.agents)
    figs.add("Home", f"{agents:,} agents (5 files each), {home.notes:,} vault notes ({mb(home.vault_bytes)}); the text in "
             f"{len(home.planted_agents)} agents (4 files each) and {len(home.planted_notes)} notes")
    figs.add("Building it (info)", f"fleet {home.seconds['fleet']:.1f} s, vault notes {home.seconds['vault']:.1f} s, vault index "
             f"in-process {home.seconds['vault index']:.1f} s, {agents:,} archives through the KB {m['build_archives_s']:.1f} s")
    figs.add("Databases before", f"{before.archives:,} archives {mb(before.archives_db)} + WAL {mb(before.archives_wal)}; "
             f"vault {mb(before.vault_db)} + WAL {mb(before.vault_wal)}; total {mb(before.total)}")
    first = home.planted_agents[0]
    dry = statistics.median(m["dry_s"])
    floor_dry = statistics.median(m["floor_dry_s"])
    figs.add(f"Dry run, one agent + the vault (median of {DRY_RUNS})",
             f"{dry:.2f} s ({', '.join(f'{s:.2f}' for s in m['dry_s'])}); found: {stores_text(m['dry_report'])}")
    kb = m.get("kb_s")
    if kb:
        figs.add("  of which the KB's ForgetText (its rpc log; the rest is dreaming: the files, the calls) (info)",
                 f"median {statistics.median(kb['dry']):.2f} s")
    figs.add("  floor: grep -r -l -i -F over the agent's and the vault's folders",
             f"{floor_dry * 1000:.0f} ms (median); the dry run takes {dry / floor_dry:.1f}x")
    figs.add("  grep -r -l -i -F over the whole home (info)",
             f"{m['floor_home_grep_s']:.2f} s, {m['floor_home_grep_files']} files listed; the dry run takes "
             f"{dry / m['floor_home_grep_s']:.2f}x")
    rep = m["apply_report"]
    figs.add("Apply, one agent + the vault (--shared)",
             f"{m['apply_s']:.2f} s; {rep.changed} places rewritten, {rep.matches} matches; {stores_text(rep)}")
    if kb:
        figs.add("  of which the KB's ForgetText: reindex, the vault's notes and index, the purges (info)",
                 f"{kb['apply']:.2f} s; dreaming's part (the agent's files, the tombstone, the record, the calls) "
                 f"{m['apply_s'] - kb['apply']:.2f} s")
    for purge in rep.purges:
        figs.add(f"  purge of {purge.store}", f"{mb(purge.bytes_before)} -> {mb(purge.bytes_after)} in {purge.seconds:.2f} s")
    fs = m["floor_shared"]
    figs.add("  floor: str.replace of the files + apsw secure_delete/VACUUM of the same databases",
             f"{fs.seconds:.2f} s ({fs.files} files, {fs.chunks} chunks; {mb(fs.bytes_before)} -> {mb(fs.bytes_after)}); "
             f"the apply takes {m['apply_s'] / fs.seconds:.1f}x")
    each = [s for s, _ in m["each"]]
    if each:
        floor_each = [f.seconds for f in m["floor_each"]]
        figs.add(f"Apply, each of the {len(each)} other agents holding it, one after the other",
                 f"median {statistics.median(each):.2f} s, max {max(each):.2f} s, total {sum(each):.2f} s; "
                 f"{sum(r.changed for _, r in m['each'])} places rewritten")
        if kb:
            figs.add("  of which the KB's ForgetText (info)", f"median {statistics.median(kb['each']):.2f} s")
        figs.add("  floor, per agent (its files + its archive)",
                 f"median {statistics.median(floor_each) * 1000:.0f} ms; the apply takes "
                 f"{statistics.median(each) / statistics.median(floor_each):.1f}x")
    total = m["apply_s"] + sum(each)
    figs.add(f"The whole request: {len(home.planted_agents)} forgets", f"{total:.2f} s (dry run not counted)")
    figs.add("Databases after", f"archives {mb(after.archives_db)} + WAL {mb(after.archives_wal)}; vault {mb(after.vault_db)} + "
             f"WAL {mb(after.vault_wal)}; total {mb(after.total)} ({mb(after.total - before.total)})")
    figs.add("A dry run after the apply", f"{m['dry_after'].matches} matches ({stores_text(m['dry_after']) or 'nowhere'})",
             "0", m["dry_after"].matches == 0)
    figs.add("grep -a -r -l -i -F of the text over the home and the services' logs", f"{len(m['grep_text'])} files: {m['grep_text'][:3]}", "none",
             not m["grep_text"])
    natural = f" (of {len(fh.runs())}; {len(home.natural)} the generated corpora hold by chance are left out)" if home.natural else ""
    figs.add(f"grep -a -r -l -i -F of its {len(home.checked_runs)} 8-character runs{natural}, the same",
             f"{len(m['grep_runs'])} files: {m['grep_runs'][:3]}", "none", not m["grep_runs"])
    figs.add(f"Files changed among the {m['hashed']:,} hashed (workspaces, vault notes)",
             f"unexpected {len(m['unexpected'])} {m['unexpected'][:3]}; planted but unchanged {len(m['unchanged_planted'])} "
             f"{m['unchanged_planted'][:3]}", "only the planted files", not m["unexpected"] and not m["unchanged_planted"])
    figs.add("Searches for the text's words after the forgets", f"{len(m['text_found'])} hits", "none", not m["text_found"])
    figs.add("Facts beside it and elsewhere, searched after the forgets",
             f"{m['facts_checked'] - len(m['facts_missing'])} of {m['facts_checked']} found {m['facts_missing'][:3]}",
             "every one", not m["facts_missing"])
    md = [f"## Forget in a home of {agents:,} agents and {home.notes:,} vault notes", "",
          f"- the first forget: agent `{first}` with `--shared`; then {len(home.planted_agents) - 1} more agents without it",
          f"- load average {load}: the machine is shared with other engineers' runs, so times are noisy",
          "", figs.table()]
    return "\n".join(md), figs.verdicts()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, quick="smoke run: 50 agents, 500 vault notes", keep_home="keep the temp home")
    p.add_argument("--agents", type=int, default=1000, help="agents in the home (default 1000)")
    p.add_argument("--notes", type=int, default=10_000, help="notes in the shared vault (default 10000)")
    p.add_argument("--share", type=float, default=0.01, help="share of agents and of notes holding the text (default 0.01)")
    p.add_argument("--seed", type=int, default=5, help="corpus seed (default 5)")
    args = p.parse_args(argv)
    if args.quick:
        args.agents, args.notes = 50, 500
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("forget", TITLE, METHOD, argv)
    with session("bench-forget-", keep=args.keep_home) as (tmp, children):
        t0 = time.perf_counter()
        home = fh.build(tmp / "home", args.agents, args.notes, args.share, args.seed)
        say(f"home built in {time.perf_counter() - t0:.1f} s")
        m = measure(args, home, children, tmp / "floor")
        children.stop_all()
        body, verdicts = report(args, home, m, f"{run.load_before} before, {page.load_average()} after")
    run.finish(body, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
