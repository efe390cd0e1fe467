"""Benchmark: ``kb.sqlite`` bytes per corpus byte, this layout against an older one, same run.

Run:  ``.venv/bin/python bench/kb_size.py [--notes 10000] [--mb 50] [--queries 1000] [--seed 4]
[--quick] [--baseline-ref main]`` (``bench/kb_archive.py`` runs it too, after its own table).

Method: the corpus and the 1,000 queries of ``bench/kb_archive.py`` (same seed: the
same files and queries). Two child processes each build a full index of a fresh
copy of the corpus in-process (``schema.open_index`` + ``indexer.refresh``,
default archive settings): one with this checkout's ``services``, one with the
``services`` and ``gateway`` of ``--baseline-ref`` (``git archive`` into a temp
dir; the old layout, built by its own code). Each then

- checkpoints the WAL into the file (``wal_checkpoint(TRUNCATE)`` until it is not
  busy: a bulk refresh checkpoints on a background thread) and measures the file,
  and every table and index by ``dbstat`` (pages, so free space inside pages counts);
- runs every query through ``search.search`` (limit 6, ``check_stale=False``) on a
  read-only connection tuned as the service's (``search.tune_reader``), after 50
  warm-up queries, and records each hit as a reply shows it: path, lines, snippet,
  score rounded to 4 decimals, provenance, importance, entry hash.

Search timing is taken interleaved, so the machine's noise falls on both layouts
alike: once both children have built and answered, they wait, and the parent has
them run the queries in blocks of ``BLOCK`` by turns (before, after; then after,
before on the next block), ``PASSES`` times over; a query's time is its fastest
of those passes (p50 shown, and the median of the per-query ratios). The full
index times are informational: the two builds run one after the other.

The parent compares the two result lists query by query (they must be identical)
and prints a markdown table (also ``bench/results/kb_size.md``, git-ignored).
Goal: ``kb.sqlite`` <= 2.5x the corpus bytes. Exits 0 whatever the goal says.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import REPO, page
from harness.report import verdict
from kb_archive_search import make_queries
from kb_bench_support import settled_bytes
from kb_corpus import corpus

TITLE = "KB size: kb.sqlite bytes per corpus byte"
METHOD = """\
The corpus and the 1,000 queries of the KB archive bench (10,000 notes, 50 MB, the same seed). Two
child processes each build a full index of a fresh copy in process, one with this checkout's code
and one with the code of a baseline git ref (`--baseline-ref`, default `main`), checkpoint the WAL
and measure the file and every table (`dbstat`). Each then runs the queries through
`search.search`, the two taking turns by blocks, and the answers are compared hit by hit."""
GOAL = 2.5
LIMIT = 6
BLOCK = 50  # queries one child runs before the other takes its turn
PASSES = 4


def table_bytes(db: Path) -> dict[str, int]:
    """Bytes of pages per table and index (``dbstat``), largest first."""
    import apsw

    conn = apsw.Connection(os.fspath(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()
    return {str(name): int(size) for name, size in rows}


def child(repo: Path, out: Path, seed: int, notes: int, mb: float, queries: int) -> None:
    """Build, measure and search with the ``services`` of ``repo`` (first on sys.path); write JSON to ``out``."""
    sys.path[:0] = [str(repo)]
    from gateway.config import ArchiveSettings
    from services.kb.index import indexer, schema, search

    # The parse workers a bulk refresh spawns get this sys.path: ``repo`` must stay first.
    sys.path[:] = [str(repo), *(p for p in sys.path if p not in (str(repo), str(REPO)))]

    home = Path(tempfile.mkdtemp(prefix="bench-kb-size-"))
    try:
        workspace = home / "workspace"
        info = corpus(seed, notes, mb, workspace)
        settings = ArchiveSettings(enabled=True, tokenizer="unicode61", chunk_tokens=400, chunk_overlap=80)
        db = home / "kb.sqlite"
        started = time.perf_counter()
        conn = schema.open_index(db, settings)
        report = indexer.refresh(conn, workspace, settings)
        index_s = time.perf_counter() - started
        conn.close()
        if report.errors:
            raise RuntimeError(f"full index reported errors: {report.errors[:3]}")
        size = settled_bytes(db)
        tables = table_bytes(db)
        reader = schema.open_reader(db)
        search.tune_reader(reader)  # as the service's search connections
        tagged = make_queries(seed, 50 + queries)
        for _, query in tagged[:50]:  # warm-up
            search.search(reader, workspace, query, LIMIT, check_stale=False)
        results = []
        measured = [query for _, query in tagged[50:]]
        for query in measured:
            hits = search.search(reader, workspace, query, LIMIT, check_stale=False).hits
            results.append([[h.path, h.start_line, h.end_line, h.snippet, round(h.score, 4), h.provenance, h.importance,
                             h.entry_hash] for h in hits])  # fmt: skip
        out.write_text(json.dumps({
            "corpus_bytes": info.bytes, "files": info.files, "bytes": size, "tables": tables, "index_s": index_s,
            "schema_version": schema.SCHEMA_VERSION, "results": results,
        }), encoding="utf-8")  # fmt: skip
        print("ready", flush=True)
        for line in sys.stdin:  # "first last": time those queries once each, answer their seconds as one JSON line
            first, last = map(int, line.split())
            took = []
            for query in measured[first:last]:
                t0 = time.perf_counter()
                search.search(reader, workspace, query, LIMIT, check_stale=False)
                took.append(time.perf_counter() - t0)
            print(json.dumps(took), flush=True)
        reader.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def export_ref(ref: str, dest: Path) -> None:
    """``services`` and ``gateway`` of git ``ref`` under ``dest``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "services", "gateway"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def start_child(repo: Path, args: argparse.Namespace, tmp: Path, name: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """A child that has built its index and answered every query once, now waiting for timing blocks."""
    out = tmp / f"{name}.json"
    cmd = [sys.executable, __file__, "--child", str(repo), str(out), "--seed", str(args.seed), "--notes", str(args.notes),
           "--mb", str(args.mb), "--queries", str(args.queries)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.wait()
        raise RuntimeError(f"the {name} child failed (exit {proc.returncode})")
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return proc, data


def interleaved(children: list[subprocess.Popen[str]], count: int) -> list[list[float]]:
    """Each child's fastest seconds per query over ``PASSES``, the children taking turns block by block."""
    best = [[float("inf")] * count for _ in children]
    turn = 0
    for _ in range(PASSES):
        for first in range(0, count, BLOCK):
            last = min(first + BLOCK, count)
            order = range(len(children)) if turn % 2 == 0 else reversed(range(len(children)))
            turn += 1
            for n in order:
                proc = children[n]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{first} {last}\n")
                proc.stdin.flush()
                for k, seconds in enumerate(json.loads(proc.stdout.readline())):
                    best[n][first + k] = min(best[n][first + k], seconds)
    return best


def p50_ms(values: list[float]) -> float:
    ordered = sorted(values)
    return 1000 * ordered[len(ordered) // 2]


def mb(value: int) -> str:
    return f"{value / 1e6:.1f}"


def report(old: dict[str, Any], new: dict[str, Any], ref: str) -> tuple[str, list[str]]:
    """(markdown, PASS/FAIL lines)."""
    corpus = new["corpus_bytes"]
    same = sum(a == b for a, b in zip(old["results"], new["results"], strict=True))
    count = len(new["results"])
    hits = sum(len(r) for r in new["results"])
    ratio_old, ratio_new = old["bytes"] / corpus, new["bytes"] / corpus
    ratio = sorted(b / a for a, b in zip(old["took"], new["took"], strict=True))[count // 2]
    lines = [
        f"## KB size ({new['files']:,} files, {mb(corpus)} MB; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
        "| figure | before (" + ref + f", schema {old['schema_version']}) | after (schema {new['schema_version']}) | goal | result |",
        "|---|---:|---:|---|---|",
        f"| kb.sqlite, MB | {mb(old['bytes'])} | {mb(new['bytes'])} |  |  |",
        f"| kb.sqlite bytes per corpus byte | {ratio_old:.2f}x | {ratio_new:.2f}x | <= {GOAL}x | {'PASS' if ratio_new <= GOAL else 'FAIL'} |",
        f"| identical Search results ({count:,} queries, {hits:,} hits after) | | {same:,} / {count:,} | all | "
        f"{'PASS' if same == count else 'FAIL'} |",
        f"| full index, in-process, s (info) | {old['index_s']:.2f} | {new['index_s']:.2f} |  |  |",
        f"| search.search p50, ms (interleaved, fastest of {PASSES} passes) | {p50_ms(old['took']):.2f} | "
        f"{p50_ms(new['took']):.2f} |  |  |",
        f"| search.search total of the {count:,} queries, s (the same passes) | {sum(old['took']):.2f} | "
        f"{sum(new['took']):.2f} |  |  |",
        f"| median per-query ratio after / before (info) | | {ratio:.3f} |  |  |",
        "", "Pages per table and index (MB; `dbstat`, 0.1 MB and up):", "",
        "| table or index | before | after |", "|---|---:|---:|",
    ]  # fmt: skip
    verdicts = [
        verdict(ratio_new <= GOAL, f"kb.sqlite <= {GOAL}x the corpus bytes: {ratio_new:.2f}x ({mb(new['bytes'])} MB)"),
        verdict(same == count, f"identical Search results before and after: {same:,} of {count:,} queries"),
    ]
    names = list(dict.fromkeys([*old["tables"], *new["tables"]]))
    for name in sorted(names, key=lambda n: -max(old["tables"].get(n, 0), new["tables"].get(n, 0))):
        a, b = old["tables"].get(name), new["tables"].get(name)
        if max(a or 0, b or 0) >= 100_000:
            lines.append(f"| {name} | {mb(a) if a is not None else '—'} | {mb(b) if b is not None else '—'} |")
    return "\n".join(lines), verdicts


def main(argv: list[str] | None = None) -> int:
    p = page.parser(__doc__, quick="1,000 notes / 5 MB")
    p.add_argument("--notes", type=int, default=10_000)
    p.add_argument("--mb", type=float, default=50.0)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--baseline-ref", default="main", help="git ref whose layout is 'before' (default main)")
    p.add_argument("--child", nargs=2, metavar=("REPO", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    run = page.Run.begin("kb_size", TITLE, METHOD, argv)
    if args.quick:
        args.notes, args.mb = 1000, 5.0
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), args.seed, args.notes, args.mb, args.queries)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-kb-size-") as name:
        tmp = Path(name)
        export_ref(args.baseline_ref, tmp / "baseline")
        procs: list[subprocess.Popen[str]] = []
        try:
            before, old = start_child(tmp / "baseline", args, tmp, "before")
            procs.append(before)
            after, new = start_child(REPO, args, tmp, "after")
            procs.append(after)
            old["took"], new["took"] = interleaved(procs, len(new["results"]))
        finally:
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait()
    markdown, verdicts = report(old, new, args.baseline_ref)
    differing = [i for i, (a, b) in enumerate(zip(old["results"], new["results"], strict=True)) if a != b]
    if differing:
        print(f"bench: first differing query #{differing[0]}: before {old['results'][differing[0]]!r}, "
              f"after {new['results'][differing[0]]!r}", file=sys.stderr)  # fmt: skip
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
