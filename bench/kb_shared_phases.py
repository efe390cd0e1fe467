"""The shared-vault bench's phases: creates and searches through the service, the in-process create
breakdown and the graph build.

bench/kb_shared.py's docstring (steps 3 to 6) says the method; nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.procs import cpu_seconds, rpc_seconds
from kb_archive_search import make_queries
from kb_shared_vault import AGENT, DATA_NOW, VaultGen

SEARCH_LIMIT = 6
CREATE_WARMUP = 10
SEARCH_WARMUP = 20
RPC_TIMEOUT_S = 30.0


# =========================================================================== phases


@dataclass
class Call:
    seconds: float
    dup: bool
    confirm: bool
    created: bool
    related: int
    run_s: float = 0.0  # the service's CPU time during the call (all threads, /proc schedstat)
    wait_s: float = 0.0  # the service's threads runnable but waiting for a CPU during the call


def schedstat(pid: int) -> tuple[float, float]:
    """(on-CPU seconds, runqueue-wait seconds) of every thread of ``pid`` (/proc/<pid>/task/*/schedstat)."""
    run = wait = 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    a, b, _ = handle.read().split()
                run += int(a)
                wait += int(b)
    return run / 1e9, wait / 1e9


def create_phase(stub: Any, metadata: Any, gen: VaultGen, vault_dir: Path, creates: int, pid: int,
                 log: Path) -> dict[str, Any]:  # fmt: skip
    from gateway.v1 import kb_pb2

    rng = gen.rng
    notes_dir = vault_dir / "notes"

    sched: list[tuple[float, float]] = []

    def call(name: str, content: str, confirm: bool) -> tuple[float, Any]:
        req = kb_pb2.CreateSharedNoteRequest(agent_id=AGENT, name=name, content=content, confirm=confirm)
        r0, w0 = schedstat(pid)  # read outside the clock
        t0 = time.perf_counter()
        reply = stub.CreateSharedNote(req, metadata=metadata, timeout=RPC_TIMEOUT_S)
        seconds = time.perf_counter() - t0
        r1, w1 = schedstat(pid)
        sched.append((r1 - r0, w1 - w0))
        return seconds, reply

    for i in range(CREATE_WARMUP):
        name, content = gen.new_note(f"warm{i}")
        call(name, content, True)
    # The operations, decided up front (contents generated outside the clock).
    ops: list[tuple[bool, str, str, str]] = []  # (dup, name, content, original)
    dup_count = creates // 3
    kinds = [True] * dup_count + [False] * (creates - dup_count)
    rng.shuffle(kinds)
    for i, dup in enumerate(kinds):
        if dup:
            original = rng.choice(gen.names)
            text = (notes_dir / f"{original}.md").read_text(encoding="utf-8")
            ops.append((True, f"{original} reworded {i}", gen.reword(text, f"r{i}"), original))
        else:
            name, content = gen.new_note(f"new{i:03d}")
            ops.append((False, name, content, ""))
    calls: list[Call] = []
    dup_found = dup_found_original = 0
    new_nudged = 0
    nudged_dups = 0
    cpu0 = cpu_seconds(pid)
    wall0 = time.perf_counter()
    for dup, name, content, original in ops:
        s, reply = call(name, content, False)
        calls.append(Call(s, dup, False, reply.created, len(reply.related), *sched[-1]))
        if reply.created:
            gen.names.append(name)
            continue
        if dup:
            dup_found += 1
            dup_found_original += any(r.name == original for r in reply.related)
            nudged_dups += 1
            if nudged_dups % 2:
                continue  # the agent updates the existing note instead (not measured here)
        else:
            new_nudged += 1
        s, reply = call(name, content, True)
        calls.append(Call(s, dup, True, reply.created, len(reply.linked), *sched[-1]))
        if reply.created:
            gen.names.append(name)
    wall = time.perf_counter() - wall0
    cpu = cpu_seconds(pid) - cpu0
    server = rpc_seconds(log, "CreateSharedNote", CREATE_WARMUP, len(calls))
    return {
        "calls": calls, "dups": dup_count, "new": creates - dup_count, "dup_found": dup_found,
        "dup_found_original": dup_found_original, "new_nudged": new_nudged, "server": server,
        "cpu_ms": 1000 * cpu / max(1, len(calls)), "wall_s": wall,
    }  # fmt: skip


def search_phase(stub: Any, metadata: Any, seed: int, queries: int, pid: int, log: Path) -> dict[str, Any]:
    from gateway.v1 import kb_pb2

    tagged = make_queries(seed, SEARCH_WARMUP + queries)
    qs = [q for _, q in tagged]

    def call(q: str, corpus: str) -> tuple[float, Any]:
        req = kb_pb2.SearchRequest(agent_id=AGENT, query=q, corpus=corpus, limit=SEARCH_LIMIT)
        t0 = time.perf_counter()
        reply = stub.Search(req, metadata=metadata, timeout=RPC_TIMEOUT_S)
        return time.perf_counter() - t0, reply

    corpora = ("all", "shared", "memory")
    for q in qs[:SEARCH_WARMUP]:
        for c in corpora:
            call(q, c)
    lat: dict[str, list[float]] = {c: [] for c in corpora}
    hits: dict[str, int] = dict.fromkeys(corpora, 0)
    all_shared = 0
    cpu0 = cpu_seconds(pid)
    for q in qs[SEARCH_WARMUP:]:
        for c in corpora:
            s, reply = call(q, c)
            lat[c].append(s)
            hits[c] += len(reply.hits)
            if c == "all":
                all_shared += sum(1 for h in reply.hits if h.corpus == "shared")
    cpu = cpu_seconds(pid) - cpu0
    # the three corpora interleaved, in call order
    server = rpc_seconds(log, "Search", len(corpora) * SEARCH_WARMUP, len(corpora) * queries)
    return {"lat": lat, "hits": hits, "all_shared": all_shared, "n": queries,
            "server": {c: server[i :: 3] for i, c in enumerate(corpora)},
            "cpu_ms": 1000 * cpu / (3 * queries)}  # fmt: skip


def breakdown_phase(gen: VaultGen, vault_dir: Path, ops: int) -> dict[str, Any]:
    """In-process: where a create's time goes (the service is stopped)."""
    from gateway.atomic import write_atomic
    from services.kb.vault import notes as vault, note_index as vault_index, similar as vault_similar
    from services.kb.vault.sqlite_store import SqliteVaultStore

    rng = gen.rng
    notes_dir = vault_dir / "notes"
    conn = vault_index.open_vault_index(vault_dir)
    store = SqliteVaultStore(vault_dir, conn)
    parts: dict[str, list[float]] = {k: [] for k in ("seed", "recall", "read+stem", "write", "reindex", "total", "create")}
    try:
        for i in range(ops):
            if i % 2:
                original = rng.choice(gen.names)
                name = f"{original} breakdown {i}"
                content = gen.reword((notes_dir / f"{original}.md").read_text(encoding="utf-8"), f"b{i}")
            else:
                name, content = gen.new_note(f"bd{i:03d}")
            t0 = time.perf_counter()
            seed = vault_similar.seed_terms(content)
            t1 = time.perf_counter()
            cands = vault_similar._candidates(store, seed, {name}) if seed else []
            t2 = time.perf_counter()
            for cand, _chunk in cands:
                with contextlib.suppress(OSError):
                    vault_similar.stems(vault_similar.body_text((notes_dir / f"{cand}.md").read_text(encoding="utf-8")))
            t3 = time.perf_counter()
            path = notes_dir / f"{name}.md"
            write_atomic(path, content.encode("utf-8"), expected=None)
            t4 = time.perf_counter()
            vault_index.reindex_notes(conn, vault_dir, [name])
            t5 = time.perf_counter()
            for k, v in zip(("seed", "recall", "read+stem", "write", "reindex", "total"),
                            (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):  # fmt: skip
                parts[k].append(v)
            vault.delete(store, name)  # then the real thing, end to end, under the same name
            t0 = time.perf_counter()
            vault.create(store, name, content, confirm=True)
            parts["create"].append(time.perf_counter() - t0)
            gen.names.append(name)
        rows = conn.execute("SELECT (SELECT count(*) FROM kb_sources), (SELECT count(*) FROM kb_chunks)").fetchall()[0]
    finally:
        conn.close()
    return {"parts": parts, "sources": rows[0], "chunks": rows[1]}


def graph_phase(vault_dir: Path) -> dict[str, Any]:
    from services.kb.graph import build as graph, reports as graph_reports

    notes, reports = vault_dir / "notes", vault_dir / "reports"
    shutil.rmtree(reports, ignore_errors=True)
    cold = graph.build_reports(notes, reports, DATA_NOW)
    warm = graph.build_reports(notes, reports, DATA_NOW)
    sizes = {p.name: p.stat().st_size for p in sorted(reports.iterdir())}
    # One note changed (info): a new link and a claim status flip would change the reports.
    victim = sorted(notes.glob("*.md"))[len(list(notes.glob("*.md"))) // 2]
    with open(victim, "a", encoding="utf-8") as handle:
        handle.write("\nBench edit: see [[a note that does not exist yet]].\n")
    one = graph.build_reports(notes, reports, DATA_NOW)
    t0 = time.perf_counter()
    parsed, nodes, problems = graph._load(notes)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph_reports.render_all(warm)
    render_s = time.perf_counter() - t0
    return {"cold": cold, "warm": warm, "one": one, "sizes": sizes, "load_s": load_s, "render_s": render_s,
            "nodes": len(nodes), "parsed": len(parsed)}  # fmt: skip
