"""Benchmark: the shared cross-agent vault: create with the near-duplicate check, search, graph.

Run:  ``.venv/bin/python bench/kb_shared.py [--notes 10000] [--creates 300] [--queries 300]
[--archive-notes 500] [--seed 4] [--quick] [--keep-home]``
(``--quick`` = 1,000 vault notes, 100 creates, 100 queries: a smoke run of
about 15 s; the full run takes under a minute on 2 cores.)

Method
------
0. **Home** (a fresh temp dir): ``config.json`` with one agent ``bench``
   (workspace ``agents/bench/workspace``, default archive settings) and
   ``gateway.knowledge.shared`` = ``{enabled: true, project: "global", graph:
   false}`` at the default root, so the vault is ``<home>/shared/kb/global``.
   The graph layer is off on purpose: with ``graph: true`` the service would
   rebuild the reports after every write and the create figures would measure
   that; the graph build is timed on its own (step 5). The agent's archive is
   the ``bench/kb_archive.py`` corpus at ``--archive-notes`` notes (about 5 KB
   each, cached in ``/tmp/kb-bench-corpus``), so ``corpus=all`` has both sides.
1. **Vault pre-fill** (deterministic, ``random.Random(seed)``, the
   ``kb_archive`` vocabulary and sentence generator): ``--notes`` markdown
   notes written straight into ``notes/``. Each note has a topic of three
   words drawn uniformly from the content vocabulary (so a topic is rare) that
   its title, name and lead sentences use and that recur through the body;
   sizes are log-normal around 1.5 KB (sigma 0.8, 200 B to 40 KB); headings,
   paragraphs, bullets, some code fences. About 40% have YAML frontmatter:
   ``title``, ``tags``, page ``confidence`` (most 0.5-1, some lower),
   ``updatedAt`` (exponential age, mean 120 days before the data's fixed
   "now" of 2025-07-01, so about half are 90+ days old) and, on 60% of those,
   1-4 ``claims`` (``id`` from a shared pool so ids recur across notes; text
   and status derived from the id, with about 8% diverging: contradictions;
   optional claim confidence). Notes link to 0-6 others as ``[[name]]``,
   ``[[name|label]]`` or ``[[name#Section]]`` (20% of links go to 200 hub
   notes; 3% to notes that do not exist); 0.5% have malformed frontmatter.
   File mtimes are fixed past dates. Then one in-process full index
   (``vault_index.open_vault_index`` + ``refresh_vault``; timed, info).
2. **Service**: ``python -m gateway_cli.cli serve kb --home H`` on a free port;
   after grpc.health.v1 says SERVING, ``Knowledge.Refresh(wait=true)`` indexes
   the agent's archive (internal token in ``x-gateway-internal-token``). One
   sync ``KnowledgeStub`` on one channel, calls one at a time.
3. **Create**: ``--creates`` operations, after 10 unmeasured warm-up creates.
   Two thirds are new notes (a fresh topic, generated like the pre-fill notes,
   some with frontmatter and links); one third are near-duplicates of a random
   existing note, reworded: the first 50-70% of its body lines, words swapped,
   some function words dropped, about 10% of the words replaced, a few lines
   reordered, a new heading of its topic words in another order. Each
   operation first calls ``CreateSharedNote(confirm=false)``; when that returns
   related notes (a *nudge*: nothing written) a new note is confirmed at once
   (``confirm=true``: written with a ``Related:`` line), and every second
   nudged near-duplicate is confirmed too (the agent chose to keep both).
   Latencies are reported for every call, for the nudged calls, for the
   written calls (and those split into first-try writes and ``confirm=true``
   writes); also the detection rates (near-duplicates nudged; new notes
   nudged = false positives), the service's own handler time (its ``rpc`` log
   lines) and its CPU time per call (``/proc/<pid>/stat``).
4. **Search**: ``--queries`` queries from ``kb_archive.make_queries`` (same
   vocabulary as both corpora: single words, phrases, prefixes, operators,
   CJK...), after 20 warm-up queries; per query ``corpus=all``, then
   ``corpus=shared``, then ``corpus=memory`` (references), ``limit=6``, so
   machine noise hits the three alike. Retrieval recording stays on (default).
5. **Where create time goes** (informational, in-process, service stopped):
   60 more create contents (half near-duplicates) through the domain layer's
   pieces: ``seed_terms``, the recall query (``vault_similar._candidates``),
   reading and stemming the candidate files, ``write_atomic``, and
   ``reindex_notes``; plus ``vault.create`` end to end.
6. **Graph**: ``services.kb.graph.build.build_reports(notes/, reports/, now)``
   in-process over the final notes folder: *cold* (first build: the five
   reports are written) and *warm* (second build: nothing rewritten), then a
   third after one note changed (info). The note files are in the page cache
   (just written): "cold" means "no reports yet", not a cold disk. A breakdown
   times the load (list, read, parse every note) and the rendering on their
   own (private helpers ``graph._load`` and ``graph_reports.render_all``).

Goals: create p99 <= 50 ms (every CreateSharedNote call, nudged or
written); graph build for 10,000 notes <= 5 s (cold and warm). Search has no
goal of its own here (the archive's is p50 <= 5 ms; shown as reference). Percentiles are nearest-rank. The script prints a markdown table
with PASS/FAIL (also written to ``bench/results/kb_shared.md``, git-ignored)
and exits 0 whatever the goals say; non-zero only when the benchmark itself
could not run. The KB child is stopped (SIGTERM, then SIGKILL) on exit,
Ctrl-C or failure; the temp home is removed unless ``--keep-home``. The
machine may be shared (2 cores): the load average before and after the run is
printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from harness import page
from harness.home import session
from harness.report import Figures, fmt_ms, latency_cell, say
from harness.stats import percentile
from kb_bench_support import MB, start_kb
from kb_corpus import corpus
from kb_shared_phases import (
    CREATE_WARMUP,
    SEARCH_LIMIT,
    SEARCH_WARMUP,
    Call,
    breakdown_phase,
    create_phase,
    graph_phase,
    search_phase,
)
from kb_shared_vault import AGENT, DATA_NOW, PROJECT, VaultGen, VaultInfo, prefill, write_home

TITLE = "Shared vault: 10,000 shared notes"
METHOD = """\
A shared vault is pre-filled with 10,000 generated notes (frontmatter, links, some malformed) and an
agent's archive with 500. Through the KB service over gRPC the bench creates shared notes (a third
near-duplicates, which are nudged towards the existing note, some then confirmed), searches the
archive, the vault and both, and builds the vault's graph and reports cold and warm."""
BREAKDOWN_OPS = 60
CREATE_P99_GOAL_S = 0.050
GRAPH_GOAL_S = 5.0
NO_CALL = "n/a (no such call)"


# =========================================================================== report


def build_report(args: argparse.Namespace, vinfo: VaultInfo, index_s: float, index_report: Any, arch: dict[str, Any],
                 cr: dict[str, Any] | None, sr: dict[str, Any] | None, bd: dict[str, Any] | None,
                 gr: dict[str, Any] | None, note: str, meta: dict[str, str]) -> tuple[str, list[str]]:  # fmt: skip
    figs = Figures()
    figs.add("Vault pre-fill", f"{vinfo.notes:,} notes, {vinfo.bytes / MB:.1f} MB ({vinfo.frontmatter:,} with frontmatter, "
             f"{vinfo.malformed} malformed, {vinfo.links:,} links) written in {vinfo.seconds:.1f} s")  # fmt: skip
    figs.add("Vault full index, in-process (info)", f"{index_s:.2f} s ({index_report.indexed:,} notes, errors {len(index_report.errors)})")
    figs.add("Agent archive", f"{arch['files']:,} files, {arch['bytes'] / MB:.1f} MB; Refresh(wait) via gRPC {fmt_ms(arch['refresh_s'])}")
    if cr is not None:
        calls: list[Call] = cr["calls"]
        every = [c.seconds for c in calls]
        p99 = percentile(every, 99)
        figs.add("CreateSharedNote, every call", latency_cell(every, NO_CALL), "p99 <= 50 ms", p99 <= CREATE_P99_GOAL_S)
        figs.add("  nudged (related returned, nothing written)", latency_cell([c.seconds for c in calls if not c.created], NO_CALL))
        figs.add("  written (created=true)", latency_cell([c.seconds for c in calls if c.created], NO_CALL))
        figs.add("  written on the first try (no similar note)", latency_cell([c.seconds for c in calls if c.created and not c.confirm], NO_CALL))
        figs.add("  written with confirm=true (Related: links)", latency_cell([c.seconds for c in calls if c.created and c.confirm], NO_CALL))
        figs.add("  first calls of new notes / of near-duplicates (info)",
                 f"p99 {fmt_ms(percentile([c.seconds for c in calls if not c.confirm and not c.dup], 99))} / "
                 f"p99 {fmt_ms(percentile([c.seconds for c in calls if not c.confirm and c.dup], 99))}")  # fmt: skip
        figs.add("Near-duplicates nudged (info)", f"{cr['dup_found']} of {cr['dups']} ({100 * cr['dup_found'] / max(1, cr['dups']):.0f}%); "
                 f"the reworded note's original among the related: {cr['dup_found_original']}")  # fmt: skip
        figs.add("New notes nudged, false positives (info)", f"{cr['new_nudged']} of {cr['new']} ({100 * cr['new_nudged'] / max(1, cr['new']):.0f}%)")
        if cr["server"]:
            figs.add("CreateSharedNote handler time in the service, rpc log (info)", latency_cell(cr["server"], NO_CALL))
        figs.add("Service CPU per create call (info)", f"{cr['cpu_ms']:.2f} ms (mean); {len(calls)} calls in {cr['wall_s']:.1f} s")
        slow = sorted(calls, key=lambda c: c.seconds)[-max(1, len(calls) // 50) :]
        for label, group in (("every create call", calls), (f"the slowest {len(slow)} create calls (2%)", slow)):
            wall = statistics.fmean(c.seconds for c in group)
            run = statistics.fmean(c.run_s for c in group)
            wait = statistics.fmean(c.wait_s for c in group)
            figs.add(f"  where the time goes, {label}, mean (info)",
                     f"wall {fmt_ms(wall)} = service on CPU {fmt_ms(run)} + service runnable but waiting for a CPU "
                     f"{fmt_ms(wait)} + the rest (I/O, fsync, locks, transport; may overlap) {fmt_ms(max(0.0, wall - run - wait))}")  # fmt: skip
    else:
        figs.add("CreateSharedNote, every call", f"n/a ({note})", "p99 <= 50 ms", None)
    if sr is not None:
        lat = sr["lat"]
        n = sr["n"]
        figs.add("Search corpus=all (archive + vault)", latency_cell(lat["all"], NO_CALL) + f"; {sr['hits']['all'] / n:.1f} hits/query, "
                 f"{100 * sr['all_shared'] / max(1, sr['hits']['all']):.0f}% from the vault", "none of its own (the archive's: p50 <= 5 ms)")  # fmt: skip
        figs.add("Search corpus=shared (reference)", latency_cell(lat["shared"], NO_CALL) + f"; {sr['hits']['shared'] / n:.1f} hits/query")
        figs.add("Search corpus=memory (reference)", latency_cell(lat["memory"], NO_CALL) + f"; {sr['hits']['memory'] / n:.1f} hits/query")
        for c in ("all", "shared", "memory"):
            if sr["server"].get(c):
                figs.add(f"  Search handler time, corpus={c}, rpc log (info)", latency_cell(sr["server"][c], NO_CALL))
        figs.add("Service CPU per Search call (info)", f"{sr['cpu_ms']:.2f} ms (mean over the three corpora)")
    else:
        figs.add("Search corpus=all", f"n/a ({note})")
    if bd is not None:
        parts = bd["parts"]
        mean = {k: statistics.fmean(v) for k, v in parts.items()}
        figs.add(f"In-process create breakdown, mean (max) of {len(parts['total'])} (info)",
                 ", ".join(f"{k} {mean[k] * 1000:.2f} ({max(parts[k]) * 1000:.1f})" for k in ("seed", "recall", "read+stem", "write", "reindex"))
                 + f" ms; sum {mean['total'] * 1000:.2f} ms (p99 {fmt_ms(percentile(parts['total'], 99))})")  # fmt: skip
        figs.add("  recall query (vault_similar._candidates) (info)", latency_cell(parts["recall"], NO_CALL))
        figs.add("  write_atomic, durable (fsync file + dir) (info)", latency_cell(parts["write"], NO_CALL))
        figs.add("  reindex_notes (info)", latency_cell(parts["reindex"], NO_CALL))
        figs.add("  vault.create(confirm=true) end to end (info)", latency_cell(parts["create"], NO_CALL))
        figs.add("Vault index at the end (info)", f"{bd['sources']:,} notes, {bd['chunks']:,} chunks")
    if gr is not None:
        cold, warm, one = gr["cold"], gr["warm"], gr["one"]
        figs.add(f"Graph build, cold ({gr['nodes']:,} notes; writes the reports)",
                 f"{cold.seconds:.2f} s; {len(cold.edges):,} edges ({len(cold.dangling)} dangling), "
                 f"{len(cold.contradictions)} contradictions, {len(cold.stale):,} stale, {len(cold.low_confidence):,} low-confidence, "
                 f"{len(cold.problems)} problems; wrote {len(cold.written)}", "<= 5 s", cold.seconds <= GRAPH_GOAL_S)  # fmt: skip
        figs.add("Graph build, warm (nothing changed)", f"{warm.seconds:.2f} s; rewrote {len(warm.written)} report(s)",
                 "<= 5 s, rewrites nothing", warm.seconds <= GRAPH_GOAL_S and not warm.written)  # fmt: skip
        figs.add("Graph build, one note changed (info)", f"{one.seconds:.2f} s; rewrote {', '.join(one.written) or 'nothing'}")
        figs.add("  graph breakdown (info)", f"load (list + read + parse {gr['parsed']:,} notes) {gr['load_s']:.2f} s; "
                 f"render the five reports {gr['render_s']:.2f} s")  # fmt: skip
        figs.add("  report sizes (info)", ", ".join(f"{k} {v / 1000:.0f} kB" for k, v in gr["sizes"].items()))
    md = [f"## KB shared vault benchmark ({vinfo.notes:,} notes)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", figs.table()]
    verdicts = figs.verdicts()
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, quick="smoke run: 1,000 vault notes, 100 creates, 100 queries", keep_home="keep the temp home (vault, reports, logs)")
    p.add_argument("--notes", type=int, default=10_000, help="vault notes written before the service starts (default 10000)")
    p.add_argument("--creates", type=int, default=300, help="measured create operations (default 300; a third near-duplicates)")
    p.add_argument("--queries", type=int, default=300, help="measured queries, each on corpus all, shared and memory (default 300)")
    p.add_argument("--archive-notes", type=int, default=500, help="notes in the agent's archive (default 500)")
    p.add_argument("--seed", type=int, default=4, help="corpus and query seed (default 4)")
    args = p.parse_args(argv)
    if args.quick:
        args.notes, args.creates, args.queries = 1000, 100, 100
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("kb_shared", TITLE, METHOD, argv)
    cr = sr = bd = gr = None
    note = ""
    with session("bench-kb-shared-", keep=args.keep_home) as (home, children):
        import apsw

        from gateway.config import load_config
        from services.kb.vault import note_index as vault_index

        kb_port = write_home(home)
        agent = load_config(home).agent(AGENT)
        assert agent is not None
        vault_dir = agent.knowledge.shared.vault_dir
        assert vault_dir == home / "shared" / "kb" / PROJECT, vault_dir
        info = corpus(args.seed, args.archive_notes, args.archive_notes * 0.005, agent.workspace)
        arch: dict[str, Any] = {"files": info.files, "bytes": info.bytes}
        say(f"archive: {info.files:,} files, {info.bytes / MB:.1f} MB in {agent.workspace}")
        gen = VaultGen(args.seed)
        vinfo = prefill(gen, vault_dir / "notes", args.notes)
        say(f"vault: {vinfo.notes:,} notes, {vinfo.bytes / MB:.1f} MB written in {vinfo.seconds:.1f} s")
        t0 = time.perf_counter()
        conn = vault_index.open_vault_index(vault_dir)
        index_report = vault_index.refresh_vault(conn, vault_dir)
        conn.close()
        index_s = time.perf_counter() - t0
        say(f"vault index: {index_report.indexed:,} notes in {index_s:.2f} s")
        try:
            stub, channel, metadata, refresh_s, pid = start_kb(home, kb_port, children)
        except RuntimeError as exc:
            note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(str(exc))
        else:
            arch["refresh_s"] = refresh_s
            try:
                log = children.logs["kb"]
                cr = create_phase(stub, metadata, gen, vault_dir, args.creates, pid, log)
                say(f"creates: {len(cr['calls'])} calls, p99 {fmt_ms(percentile([c.seconds for c in cr['calls']], 99))}")
                sr = search_phase(stub, metadata, args.seed, args.queries, pid, log)
                say(f"search: corpus=all p50 {fmt_ms(percentile(sr['lat']['all'], 50))}")
            finally:
                channel.close()
                children.stop_all()
        arch.setdefault("refresh_s", float("nan"))
        bd = breakdown_phase(gen, vault_dir, BREAKDOWN_OPS if not args.quick else 20)
        say("breakdown done; building the graph reports")
        gr = graph_phase(vault_dir)
        say(f"graph: cold {gr['cold'].seconds:.2f} s, warm {gr['warm'].seconds:.2f} s")

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": page.machine(f", SQLite {apsw.sqlite_lib_version()} (apsw {apsw.apswversion()})")
        + f"; load average before {run.load_before}, after {page.load_average()} (the machine is shared: numbers are noisy)",
        "vault": f"seed {args.seed}, {args.notes:,} generated notes at <home>/shared/kb/{PROJECT}/notes, graph: false while "
        "measuring creates; the kb_archive vocabulary; frontmatter (title, tags, confidence, updatedAt, claims), [[links]]",
        "archive": f"kb_archive corpus, {args.archive_notes} notes (corpus=all searches both)",
        "creates": f"{args.creates} operations after {CREATE_WARMUP} warm-up, one third reworded near-duplicates; sync "
        "KnowledgeStub, sequential; confirm=true follows every nudge of a new note and every second nudged near-duplicate",
        "search": f"{args.queries} kb_archive.make_queries queries after {SEARCH_WARMUP} warm-up, each on corpus all, shared "
        f"and memory in turn, limit {SEARCH_LIMIT}",
        "graph": "services.kb.graph.build.build_reports in-process over the final notes folder (files in the page cache), "
        f"now = {DATA_NOW.date()}",
    }
    markdown, verdicts = build_report(args, vinfo, index_s, index_report, arch, cr, sr, bd, gr, note, meta)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
