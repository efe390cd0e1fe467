"""The KB archive bench's indexing phase: the in-process full index, the refreshes, the floor and its breakdown.

bench/kb_archive.py's docstring (steps 2 and 3) says the method.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import time
from pathlib import Path
from typing import Any

from harness.report import say
from kb_bench_support import AGENT, MB, settled_bytes


def read_sources(workspace: Path) -> list[tuple[str, bytes]]:
    from services.kb.index.sources import scan_sources

    scan = scan_sources(workspace)
    return [(rel, (workspace / rel).read_bytes()) for rel in sorted(scan.files)]


def chunk_corpus(sources: list[tuple[str, bytes]], settings: Any) -> list[str]:
    from services.kb.index.chunking import split_lines
    from services.kb.index.entries import parse_frontmatter
    from services.kb.index.indexer_parse import body_chunks

    texts: list[str] = []
    for _, data in sources:
        lines = split_lines(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))
        chunks = body_chunks(lines, parse_frontmatter(lines), settings.chunk_tokens, settings.chunk_overlap)
        texts.extend(c.text for c in chunks)
    return texts


def floor_insert(db: Path, chunks: list[str]) -> float:
    """Seconds for BEGIN + executemany INSERT + COMMIT into a plain unicode61 FTS5 table."""
    import apsw

    conn = apsw.Connection(os.fspath(db))
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61')")
    rows = [(c,) for c in chunks]
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t(text) VALUES (?)", rows)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def python_work(sources: list[tuple[str, bytes]], settings: Any) -> float:
    """Seconds of the indexer's per-file Python work, without SQLite."""
    from services.kb.index.chunking import split_lines
    from services.kb.index.entries import DEFAULT_IMPORTANCE, parse_entries, parse_frontmatter
    from services.kb.index.indexer_parse import attribute as _attribute
    from services.kb.index.indexer_parse import body_chunks
    from services.kb.index.provenance import classify
    from services.kb.index.query import has_unsegmented

    started = time.perf_counter()
    for rel, data in sources:
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        lines = split_lines(text)
        frontmatter = parse_frontmatter(lines)
        classify(rel, frontmatter.provenance)
        entries = parse_entries(lines, frontmatter)
        chunks = body_chunks(lines, frontmatter, settings.chunk_tokens, settings.chunk_overlap)
        default = frontmatter.importance if frontmatter.importance is not None else DEFAULT_IMPORTANCE
        _attribute(chunks, entries, default)
        for c in chunks:
            has_unsegmented(c.text)
    return time.perf_counter() - started


def index_phase(args: argparse.Namespace, home: Path, workspace: Path, corpus_bytes: int, tmp: Path) -> dict[str, Any]:
    from gateway.config import load_config
    from services.kb.index import indexer, schema
    from services.kb.index.sources import scan_sources

    agent = load_config(home).agent(AGENT)
    assert agent is not None
    settings = agent.knowledge.archive
    kb_path = agent.kb_path
    mb = corpus_bytes / MB
    out: dict[str, Any] = {"settings": settings, "kb_path": kb_path}

    # Full index (in-process).
    profiler = cProfile.Profile() if args.profile else None
    cpu0 = time.process_time()
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    conn = schema.open_index(kb_path, settings)
    report = indexer.refresh(conn, workspace, settings)
    if profiler:
        profiler.disable()
    full_s = time.perf_counter() - started
    full_cpu = time.process_time() - cpu0
    if report.errors:
        raise RuntimeError(f"full index reported errors: {report.errors[:5]}")
    counts = conn.execute("SELECT (SELECT count(*) FROM kb_chunks), (SELECT count(*) FROM kb_chunks WHERE has_cjk), "
                          "(SELECT count(*) FROM kb_entries)").fetchall()[0]  # fmt: skip
    out.update(full_s=full_s, full_mbps=mb / full_s, chunks=counts[0], cjk_chunks=counts[1], entries=counts[2])
    say(f"full index: {report.indexed} files, {counts[0]:,} chunks ({counts[1]:,} CJK), {counts[2]:,} entries, "
        f"{full_s:.2f} s wall, {full_cpu:.2f} s CPU")  # fmt: skip
    if profiler:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(18)
        say("profile of the full index (tottime):\n" + buf.getvalue())

    # No-change refreshes.
    nochange = []
    for _ in range(args.refreshes):
        r = indexer.refresh(conn, workspace, settings)
        if r.indexed or r.pruned:
            raise RuntimeError(f"no-change refresh indexed {r.indexed}, pruned {r.pruned}")
        nochange.append(r.seconds)
    out["nochange"] = nochange
    scan_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        scan_sources(workspace)
        scan_times.append(time.perf_counter() - t0)
    out["scan_s"] = min(scan_times)

    # One-file-change refreshes: a different note each time.
    notes = sorted(p for p in (workspace / "memory").rglob("*.md"))
    picks = [notes[(i * 2654435761) % len(notes)] for i in range(1, args.refreshes + 1)]
    onefile = []
    for i, path in enumerate(picks):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n- bench edit {i}: the {AGENT} run changed this note to time a one-file refresh.\n")
        r = indexer.refresh(conn, workspace, settings)
        if r.indexed != 1:
            raise RuntimeError(f"one-file refresh indexed {r.indexed} files, expected 1")
        onefile.append(r.seconds)
    out["onefile"] = onefile
    # Informational: the same kind of edit through indexer.reindex_paths (the targeted variant a caller
    # that knows which file changed can use), when the indexer has it.
    reindex = getattr(indexer, "reindex_paths", None)
    if reindex is not None:
        targeted = []
        for i, path in enumerate(notes[(i * 40503) % len(notes)] for i in range(1, args.refreshes + 1)):
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"\n- bench targeted edit {i}: one more line for reindex_paths.\n")
            t0 = time.perf_counter()
            r = reindex(conn, workspace, [path.relative_to(workspace).as_posix()], settings)
            targeted.append(time.perf_counter() - t0)
            if r.indexed != 1:
                raise RuntimeError(f"reindex_paths indexed {r.indexed} files, expected 1")
        out["targeted"] = targeted
    out["db_tables"] = {
        str(name): int(size) / MB
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6")
    }
    conn.close()
    db_mb = settled_bytes(kb_path) / MB  # the WAL checkpointed first: a bulk refresh does it on a thread of its own
    out["db_ratio"] = db_mb * MB / corpus_bytes

    # Floor and breakdown: same sources, chunked the same way.
    sources = read_sources(workspace)
    chunks = chunk_corpus(sources, settings)
    chunk_bytes = sum(len(c.encode()) for c in chunks)
    floor_s = floor_insert(tmp / "floor.sqlite", chunks)
    out.update(floor_s=floor_s, floor_mbps=mb / floor_s, floor_chunks=len(chunks), chunk_mb=chunk_bytes / MB)
    t0 = time.perf_counter()
    for _, data in read_sources(workspace):
        hashlib.sha256(data).hexdigest()
    out["read_hash_s"] = time.perf_counter() - t0
    out["python_s"] = python_work(sources, settings)
    out["full_cpu"] = full_cpu
    out["db_mb"] = db_mb
    return out
