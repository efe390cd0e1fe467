"""Benchmark: the shared vault on PostgreSQL against the same vault on SQLite, and creates from many hosts.

Run:  ``.venv/bin/python bench/vault_postgres.py [--notes 2000] [--rounds 10] [--creates 150]
[--queries 300] [--cjk-queries 60] [--level-seconds 10] [--hosts 1,2,4,8] [--ramp 0.25,0.5,1,...]
[--ramp-seconds 30] [--breakdown 60] [--seed 4] [--quick] [--keep-home] [--write-docs]``
(``--quick``: 300 notes, 4 rounds, 30 creates, 60 + 20 queries, 3 s a level, a ramp of 1 and 4 notes
a second, 5 s a step, 20 of each in the breakdown: a smoke run of about two minutes; the full run takes
about ten minutes on 2 cores.)

Method
------
0. **PostgreSQL**: two throwaway clusters from tests/pg_support.py (``start_cluster``), each with a
   database ``bench_vault``: *fast*, pg_support's test settings (``fsync``, ``synchronous_commit`` and
   ``full_page_writes`` off: a commit waits for no disk), and *durable*, the three on (PostgreSQL's
   defaults, what a production server runs). Both on this machine, over TCP to 127.0.0.1.
1. **Floor**: through one psycopg connection per cluster, 500 bare ``SELECT 1`` round trips and 500
   autocommitted one-row INSERTs of a 1.5 KB text (a commit each): what PostgreSQL itself costs here.
2. **One corpus**: ``--notes`` notes from bench/kb_shared_vault.py's generator (frontmatter, links,
   some malformed) written into a SQLite vault, 5% of them rewritten as Chinese or Japanese notes (the
   search's trigram path on both backends), indexed; then exported with ``gateway vault export``'s code
   and imported into each cluster's vault with ``gateway vault import``'s (timed, info).
3. **Three hosts, one KB each** (``gateway serve kb`` on a home of its own, the vault's graph off):
   SQLite, PostgreSQL *fast*, PostgreSQL *durable*. One sync ``KnowledgeStub`` each, over gRPC (no REST:
   the shim adds the same cost to both backends).
4. **Interleaved rounds**: after a warm-up (20 searches, 5 creates each), ``--rounds`` rounds; in each,
   every backend in turn (the order rotated each round) runs its share of the searches, then every
   backend in turn its share of the creates: the same queries and the same notes on each. Searches are
   ``Search(corpus=shared, limit=6)``: ``--queries`` bench/kb_archive_search.py queries (words, phrases,
   operators, prefixes, a few CJK) and ``--cjk-queries`` CJK ones. Creates: two thirds new notes, one
   third reworded near-duplicates of pre-filled notes; each is ``CreateSharedNote(confirm=false)``, and a
   nudged new note is sent again with ``confirm=true``; every call is timed. The CPU of each backend's KB
   process and of its cluster (postmaster and backends, /proc) during its own batches is added up.
5. **Hosts at once** (on *durable*): the durable backend's KB and seven more KB processes, each on a home
   of its own pointed at the same database: eight simulated hosts (separate processes with pools of their
   own, as separate machines would be; on 2 cores they also share the CPU with PostgreSQL, which real
   hosts would not). One client process per host (bench/vault_postgres_host.py) creates new notes through
   its own host's KB. At 1, 2, 4 and 8 hosts, back to back for ``--level-seconds`` (a closed loop: what
   the hosts can push). Then an open-loop ramp on all eight: ``--ramp`` offered rates in notes a second in
   all, ``--ramp-seconds`` each, each host's share as a Poisson process, each create timed from when it was due (so a queue shows;
   no coordinated omission), stopped after the first step whose p99 passes 1 s. Per step: notes written
   per second, p50 and p99, CPU per note (the KBs, the cluster). The offered rate at which p99 passes
   100 ms is read off the ramp.
6. **Where the time goes** (in-process, every KB stopped): straight on each backend's vault store (the
   SQLite vault and the durable one, as they are after the run), the near-duplicate check's calls on
   ``--breakdown`` create contents (``term_counts`` of the 40 leading stems, the OR ``recall``, a read per
   candidate, ``find_similar`` end to end) and ``search`` on as many word and CJK queries.

Goal: search p50 on PostgreSQL (*durable*) <= 2x SQLite's, in the same run. The script prints the tables
(also in ``bench/results/vault_postgres.md``, git-ignored) and exits 0 whatever the goal says; non-zero
only when the benchmark itself could not run. Percentiles are nearest-rank. Everything it started is
stopped on exit, Ctrl-C or failure; the temp folder is removed unless ``--keep-home``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness import page
from harness.home import session
from harness.report import fmt_ms, say, table
from harness.stats import percentile
from kb_shared_vault import PROJECT, VaultGen
from vault_postgres_phases import BREAKDOWN_PARTS, HostClients, Level, Side, breakdown, rounds
from vault_postgres_setup import (
    DATABASE,
    clusters,
    copy_to_postgres,
    fill,
    floor,
    make_home,
    postgres_size,
    sqlite_size,
    start,
)

TITLE = "Shared vault on PostgreSQL"
METHOD = """\
The same shared vault (generated notes, 5% Chinese or Japanese) on SQLite and on PostgreSQL, each behind
its own KB process, called over gRPC in interleaved rounds (the same searches and creates on each
backend, the order rotated each round); PostgreSQL both as the tests run it (fsync off) and with
production durability (fsync and synchronous_commit on). Then creates from 1, 2, 4 and 8 simulated hosts
at once (eight KB processes on one database, one client process each), back to back and as an
open-loop ramp, and where the time goes, straight on each backend's store. Beside it, the floor: a
bare round trip and a bare INSERT through psycopg."""
SEARCH_RATIO_GOAL = 2.0
P99_LIMIT_S = 0.100
RAMP_STOP_S = 1.0
SETTINGS = {"sqlite": "SQLite (apsw), note files fsynced",
            "pg-fast": "PostgreSQL, fsync off, synchronous_commit off (the tests' settings)",
            "pg": "PostgreSQL, fsync on, synchronous_commit on (production)"}  # fmt: skip


# =========================================================================== report


def _ms(values: list[float], q: float) -> str:
    return fmt_ms(percentile(values, q)) if values else "n/a"


def rounds_table(sides: dict[str, Side]) -> str:
    base = sides["sqlite"]
    rows = []
    for label, s in sides.items():
        every = s.search + s.search_cjk
        ratio = percentile(every, 50) / percentile(base.search + base.search_cjk, 50)
        c_ratio = percentile(s.create, 50) / percentile(base.create, 50)
        rows.append((SETTINGS[label], _ms(every, 50), _ms(every, 99), f"{ratio:.2f}x", _ms(s.search, 50), _ms(s.search_cjk, 50),
                     _ms(s.search_cjk, 99), _ms(s.create, 50), _ms(s.create, 99), f"{c_ratio:.2f}x"))  # fmt: skip
    return table(("backend", "search p50", "search p99", "p50 vs SQLite", "word queries p50", "CJK p50", "CJK p99",
                  "create p50", "create p99", "create p50 vs SQLite"), rows, "lrrrrrrrrr")  # fmt: skip


def cost_table(sides: dict[str, Side]) -> str:
    rows = []
    for label, s in sides.items():
        searches = max(1, len(s.search) + len(s.search_cjk))
        calls = max(1, len(s.create))
        pg = label != "sqlite"
        rows.append((SETTINGS[label], f"{1000 * s.kb_cpu['search'] / searches:.2f} ms",
                     f"{1000 * s.pg_cpu['search'] / searches:.2f} ms" if pg else "-",
                     f"{1000 * s.kb_cpu['create'] / calls:.2f} ms", f"{1000 * s.pg_cpu['create'] / calls:.2f} ms" if pg else "-",
                     f"{searches} / {calls}", f"{s.hits / searches:.1f}",
                     f"{s.written} written, {s.nudged} nudged; near-duplicates nudged {s.dups_nudged} of {s.dups}"))  # fmt: skip
    return table(("backend", "KB CPU per search", "PostgreSQL CPU per search", "KB CPU per create call",
                  "PostgreSQL CPU per create call", "searches / create calls", "hits per search", "creates"),
                 rows, "lrrrrrrl")  # fmt: skip


def floor_table(floors: dict[str, dict[str, list[float]]]) -> str:
    rows = [(SETTINGS[label], _ms(f["select"], 50), _ms(f["select"], 99), _ms(f["insert"], 50), _ms(f["insert"], 99))
            for label, f in floors.items()]  # fmt: skip
    return table(("cluster", "SELECT 1 p50", "SELECT 1 p99", "INSERT (a commit) p50", "INSERT p99"), rows, "lrrrr")


def levels_table(levels: list[Level]) -> str:
    rows = []
    for lv in levels:
        rows.append((lv.hosts, len(lv.ops), f"{lv.written / lv.seconds:.1f}", _ms(lv.ops, 50), _ms(lv.ops, 99),
                     "yes" if percentile(lv.ops, 99) <= P99_LIMIT_S else "no", f"{1000 * lv.kb_cpu_s / max(1, lv.written):.1f} ms",
                     f"{1000 * lv.pg_cpu_s / max(1, lv.written):.1f} ms"))  # fmt: skip
    return table(("hosts", "notes written", "notes/s", "p50", "p99", "p99 <= 100 ms", "KB CPU per note (all hosts)",
                  "PostgreSQL CPU per note"), rows, "rrrrrlrr")  # fmt: skip


def ramp_table(ramp: list[Level]) -> str:
    rows = []
    for lv in ramp:
        rows.append((f"{lv.offered:g}", f"{lv.written / lv.seconds:.1f}", len(lv.ops), lv.unsent, _ms(lv.ops, 50),
                     _ms(lv.ops, 99), "yes" if percentile(lv.ops, 99) <= P99_LIMIT_S else "no",
                     f"{1000 * lv.pg_cpu_s / max(1, lv.written):.1f} ms"))  # fmt: skip
    return table(("offered notes/s", "written notes/s", "notes written", "due but unsent at the end", "p50 (from due)",
                  "p99 (from due)", "p99 <= 100 ms", "PostgreSQL CPU per note"), rows, "rrrrrrlr")  # fmt: skip


def crossing(ramp: list[Level]) -> str:
    """Where p99 passes 100 ms on the ramp, in offered notes a second."""
    over = [lv for lv in ramp if percentile(lv.ops, 99) > P99_LIMIT_S]
    if not over:
        return f"not within the ramp: p99 stayed under 100 ms up to {ramp[-1].offered:g} notes/s offered"
    first = over[0]
    under = [lv for lv in ramp if lv.offered < first.offered and percentile(lv.ops, 99) <= P99_LIMIT_S]
    at = f"{first.offered:g} notes/s offered (p99 {_ms(first.ops, 99)})"
    if under:
        return f"between {under[-1].offered:g} notes/s offered (p99 {_ms(under[-1].ops, 99)}) and {at}"
    return f"already at the ramp's first step, {at}"


def breakdown_table(parts: dict[str, dict[str, list[float]]]) -> str:
    rows = []
    for part in BREAKDOWN_PARTS:
        lite, pg = parts["sqlite"][part], parts["pg"][part]
        ratio = percentile(pg, 50) / percentile(lite, 50) if lite and percentile(lite, 50) > 0 else float("nan")
        rows.append((part, _ms(lite, 50), _ms(lite, 99), _ms(pg, 50), _ms(pg, 99), f"{ratio:.1f}x", len(pg)))
    return table(("call", "SQLite p50", "SQLite p99", "PostgreSQL (durable) p50", "PostgreSQL p99", "p50 ratio", "calls"),
                 rows, "lrrrrrr")  # fmt: skip


def size_line(sizes: dict[str, dict[str, int]]) -> str:
    lite, pg, end = sizes["sqlite"], sizes["pg"], sizes["pg-end"]
    mb = 1e6
    return (f"SQLite: {lite['notes']:,} note files, {lite['text'] / mb:.1f} MB, and an index of {lite['index'] / mb:.1f} MB "
            f"({(lite['text'] + lite['index']) / max(1, lite['notes']) / 1e3:.1f} kB a note in all); PostgreSQL after the import: "
            f"{pg['notes']:,} notes, {pg['text'] / mb:.1f} MB of text, the notes table with its indexes {pg['table'] / mb:.1f} MB "
            f"(full-text GIN {pg['fts_index'] / mb:.1f} MB, trigram GIN {pg['trigram_index'] / mb:.1f} MB; "
            f"{pg['table'] / max(1, pg['notes']) / 1e3:.1f} kB a note), database {pg['database'] / mb:.1f} MB; at the end "
            f"{end['notes']:,} notes, table {end['table'] / mb:.1f} MB ({end['table'] / max(1, end['notes']) / 1e3:.1f} kB a note), "
            f"database {end['database'] / mb:.1f} MB")  # fmt: skip


def build_report(args: argparse.Namespace, meta: dict[str, str], floors: dict[str, dict[str, list[float]]],
                 sides: dict[str, Side], levels: list[Level], ramp: list[Level],
                 parts: dict[str, dict[str, list[float]]]) -> tuple[str, list[str]]:  # fmt: skip
    md = [f"## Shared vault: PostgreSQL and SQLite ({args.notes:,} notes)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", "## The floor: PostgreSQL itself, one psycopg connection", "", floor_table(floors)]
    md += ["", "## One host: the same calls on each backend, interleaved rounds", "", rounds_table(sides),
           "", "### What each call cost in CPU (sums over the rounds, per call)", "", cost_table(sides)]  # fmt: skip
    pg = sides["pg"].search + sides["pg"].search_cjk
    lite = sides["sqlite"].search + sides["sqlite"].search_cjk
    ratio = percentile(pg, 50) / percentile(lite, 50)
    verdicts = [f"{'PASS' if ratio <= SEARCH_RATIO_GOAL else 'FAIL'} search p50 on PostgreSQL (durable) <= 2x "
                f"SQLite's: {_ms(pg, 50)} vs {_ms(lite, 50)} ({ratio:.2f}x)"]  # fmt: skip
    md += ["", "## Where the time goes: the store's own calls, in-process (no KB, no gRPC)", "", breakdown_table(parts)]
    md += ["", "## Creates from several hosts at once, back to back (PostgreSQL, durable)", "", levels_table(levels)]
    md += ["", f"## Open-loop ramp: {max(args.levels)} hosts, creates at a growing offered rate (PostgreSQL, durable)", "",
           ramp_table(ramp), "", f"Where create p99 passes 100 ms: {crossing(ramp)}."]  # fmt: skip
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = page.parser(__doc__, quick="smoke run: 300 notes, 4 rounds, 30 creates, 60 + 20 queries, 3 s a level, a ramp of 4 and 12 notes/s",
                    keep_home="keep the temp folder (homes, logs; the clusters are deleted)")  # fmt: skip
    p.add_argument("--notes", type=int, default=2000, help="notes in the vault before the first call (default 2000)")
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    p.add_argument("--creates", type=int, default=150, help="create operations on each backend (default 150)")
    p.add_argument("--queries", type=int, default=300, help="mixed queries on each backend (default 300)")
    p.add_argument("--cjk-queries", type=int, default=60, help="CJK queries on each backend (default 60)")
    p.add_argument("--level-seconds", type=float, default=10.0, help="seconds each level of hosts creates (default 10)")
    p.add_argument("--hosts", default="1,2,4,8", help="the levels of hosts at once (default 1,2,4,8)")
    p.add_argument("--ramp", default="0.25,0.5,1,2,4,8,16", help="the open loop's offered rates, notes a second in all "
                   "(default 0.25,0.5,1,2,4,8,16)")
    p.add_argument("--breakdown", type=int, default=60, help="create contents and queries of each kind timed in-process (default 60)")
    p.add_argument("--ramp-seconds", type=float, default=30.0, help="seconds of each step of the ramp (default 30)")
    p.add_argument("--seed", type=int, default=4, help="corpus and query seed (default 4)")
    args = p.parse_args(argv)
    if args.quick:
        args.notes, args.rounds, args.creates, args.queries, args.cjk_queries, args.level_seconds = 300, 4, 30, 60, 20, 3.0
        args.ramp, args.ramp_seconds, args.breakdown = "1,4", 5.0, 20
    args.levels = sorted({int(x) for x in args.hosts.split(",") if x.strip()})
    args.ramp = sorted({float(x) for x in args.ramp.split(",") if x.strip()})
    return args


def measure(args: argparse.Namespace, root: Path, children: Any) -> tuple[dict[str, Any], dict[str, Side], list[Level], list[Level],
                                                                          dict[str, dict[str, list[float]]], dict[str, str]]:
    floors: dict[str, Any] = {}
    info: dict[str, str] = {}
    with clusters() as cl:
        for cluster in cl.values():
            cluster.create_database(DATABASE)
        for label, key in (("pg-fast", "fast"), ("pg", "durable")):
            floors[label] = floor(cl[key])
        say("floor measured")
        gen = VaultGen(args.seed)
        lite = make_home(root, "sqlite")
        vault_dir = lite.home / "shared" / "kb" / PROJECT
        vinfo, cjk = fill(gen, vault_dir, args.notes)
        info["corpus"] = (f"{vinfo.notes:,} notes ({cjk} Chinese or Japanese, {vinfo.frontmatter:,} with frontmatter, "
                          f"{vinfo.malformed} malformed, {vinfo.links:,} links), seed {args.seed}")  # fmt: skip
        fast, durable = (make_home(root, label, cl[key].dsn(DATABASE)) for label, key in (("pg-fast", "fast"), ("pg", "durable")))
        fast.cluster, durable.cluster = cl["fast"], cl["durable"]
        imported = copy_to_postgres(vault_dir, [fast.dsn, durable.dsn], root)
        info["import"] = ", ".join(f"{label} {imported[b.dsn]:.1f} s" for label, b in (("fast", fast), ("durable", durable)))
        say(f"corpus: {vinfo.notes} notes ({cjk} CJK); imported in {info['import']}")
        sizes = {"sqlite": sqlite_size(vault_dir), "pg": postgres_size(durable.dsn)}
        try:
            backends = [lite, fast, durable]
            for b in backends:
                start(b, children)
            sides = rounds(backends, gen, vault_dir / "notes", args.seed, args.rounds, args.creates, args.queries, args.cjk_queries)
            for b in (lite, fast):
                b.channel.close()
                children.stop(f"kb-{b.label}")
            hosts = [durable]
            for i in range(1, max(args.levels)):
                host = make_home(root, f"host{i}", durable.dsn)
                host.cluster = durable.cluster
                start(host, children)
                hosts.append(host)
            clients = HostClients(hosts, children, args.seed)
            try:
                levels, ramp = hosts_phase(clients, args)
            finally:
                clients.close()
            children.stop_all()
            parts = breakdown_phase(vault_dir, durable.dsn, gen, args)
        finally:
            children.stop_all()
        sizes["pg-end"] = postgres_size(durable.dsn)
    info["size"] = size_line(sizes)
    return floors, sides, levels, ramp, parts, info


def breakdown_phase(vault_dir: Path, dsn: str, gen: VaultGen, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Step 6 on the SQLite vault and the durable one, every KB stopped."""
    from gateway.config_model import VaultPostgresSettings
    from services.kb.vault import note_index
    from services.kb.vault.sqlite_store import SqliteVaultStore
    from services.kb.vault_pg import pool
    from services.kb.vault_pg.store import PostgresVaultStore

    conn = note_index.open_vault_index(vault_dir)
    conns = pool.open_pool(VaultPostgresSettings(dsn=dsn))
    try:
        conns.wait()
        stores = {"sqlite": SqliteVaultStore(vault_dir, conn), "pg": PostgresVaultStore(conns, PROJECT)}
        parts = breakdown(stores, gen, vault_dir / "notes", args.seed, args.breakdown)
    finally:
        pool.close_pools()
        conn.close()
    say("breakdown measured")
    return parts


def hosts_phase(clients: HostClients, args: argparse.Namespace) -> tuple[list[Level], list[Level]]:
    """The closed-loop levels, then the open-loop ramp on every host, stopped after the first step whose
    p99 passes ``RAMP_STOP_S`` (past saturation, a higher rate only makes the queue longer)."""
    levels = []
    for n in args.levels:
        levels.append(clients.run(n, args.level_seconds))
        say(f"{n} host(s) back to back: {levels[-1].written} notes in {levels[-1].seconds:.1f} s, p99 {_ms(levels[-1].ops, 99)}")
    ramp = []
    for rate in args.ramp:
        ramp.append(clients.run(max(args.levels), args.ramp_seconds, rate))
        say(f"{rate:g} notes/s offered: {ramp[-1].written} written, p99 {_ms(ramp[-1].ops, 99)}")
        if percentile(ramp[-1].ops, 99) > RAMP_STOP_S:
            break
    return levels, ramp


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("vault_postgres", TITLE, METHOD, argv)
    with session("bench-vault-pg-", keep=args.keep_home) as (root, children):
        import psycopg

        floors, sides, levels, ramp, parts, info = measure(args, root, children)
    meta = {
        "machine": page.machine(f", psycopg {psycopg.__version__}")
        + f"; load average before {run.load_before}, after {page.load_average()} (the machine is shared: numbers are noisy)",
        "PostgreSQL": "two clusters from tests/pg_support.py on this machine, over TCP to 127.0.0.1: *fast* (fsync, "
        "synchronous_commit, full_page_writes off) and *durable* (all three on); each KB's pool at its defaults (1 to 10)",
        **info,
        "one host": f"{args.rounds} interleaved rounds of {args.queries} + {args.cjk_queries} CJK searches (corpus=shared, "
        f"limit 6) and {args.creates} create operations (a third near-duplicates) per backend, over gRPC, one call at a time",
        "hosts at once": f"levels {', '.join(map(str, args.levels))}: each host a KB process of its own on the durable "
        f"database with one client process creating new notes back to back for {args.level_seconds:g} s; then an "
        f"open-loop ramp on all of them ({', '.join(f'{r:g}' for r in args.ramp)} notes/s offered in all, "
        f"{args.ramp_seconds:g} s a step, Poisson arrivals, each create timed from when it was due)",
    }
    markdown, verdicts = build_report(args, meta, floors, sides, levels, ramp, parts)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
