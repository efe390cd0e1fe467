"""The KB archive bench's queries and search phase: the query mix, the baseline MATCH, Search and Refresh via gRPC.

bench/kb_archive.py's docstring (step 4) says the method.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from harness import BENCH_DIR
from harness.ports import free_ports
from harness.procs import Children, cpu_seconds, rpc_seconds, wait_until
from kb_bench_support import AGENT, START_TIMEOUT_S, start_kb
from kb_corpus import CJK_JA, CJK_ZH, FUNCTION_WORDS, build_vocabulary

SEARCH_LIMIT = 6


# =========================================================================== queries

CJK_QUERY_WORDS = CJK_ZH + CJK_JA


def make_queries(seed: int, count: int) -> list[tuple[str, str]]:
    """``count`` deterministic mixed queries over the corpus vocabulary, as (kind, query)."""
    rng = random.Random(seed * 31 + 7)
    vocab = build_vocabulary(seed)
    content = vocab.words[vocab.content_start :]

    def w() -> str:
        # 70% by the corpus's own content-word frequencies, 30% uniform: common and rare words both occur.
        return vocab.content(rng) if rng.random() < 0.7 else rng.choice(content)

    def fn() -> str:
        return rng.choice(FUNCTION_WORDS[:60])

    kinds = (
        ("one word", 0.28, lambda: w()),
        ("two words", 0.18, lambda: f"{w()} {w()}"),
        ("three words", 0.12, lambda: f"{w()} {fn()} {w()}" if rng.random() < 0.3 else f"{w()} {w()} {w()}"),
        ("a AND b", 0.07, lambda: f"{w()} AND {w()}"),
        ('"quoted phrase"', 0.07, lambda: f'"{w()} {w()}"'),
        ("x-y", 0.06, lambda: f"{w()}-{w()}"),
        ("prefix*", 0.08, lambda: (lambda x: x[: max(3, len(x) - rng.randint(1, 3))] + "*")(w())),
        ("(a OR b) / a NOT b", 0.05, lambda: f"({w()} OR {w()})" if rng.random() < 0.6 else f"{w()} NOT {w()}"),
        ("punctuation", 0.03, lambda: rng.choice((f"{w()}: {w()}?", f"{w()}/{w()}", f"what about {w()}?", f"{w()}'s {w()}!!", f"#{w()} @{w()}"))),
        ("CJK", 0.03, lambda: rng.choice((rng.choice(CJK_QUERY_WORDS), rng.choice(CJK_QUERY_WORDS) + rng.choice(CJK_QUERY_WORDS),
                                          f"{rng.choice(CJK_QUERY_WORDS)} {rng.choice(CJK_QUERY_WORDS)}", f"{rng.choice(CJK_QUERY_WORDS)} {w()}"))),
        ("word + year", 0.03, lambda: f"{w()} {rng.randint(2019, 2026)}"),
    )  # fmt: skip
    weights = [k[1] for k in kinds]
    out = []
    for _ in range(count):
        name, _, make = rng.choices(kinds, weights=weights)[0]
        out.append((name, make()))
    return out


_WORD = re.compile(r"[^\W_]+")


def baseline_terms(query: str) -> list[str]:
    """Each whitespace piece's letters and digits as one quoted FTS5 phrase (``"x y"``; ``"w"*`` for ``w*``)."""
    terms = []
    for piece in query.split():
        tokens = _WORD.findall(piece)
        if tokens:
            terms.append('"' + " ".join(tokens) + '"' + ("*" if piece.endswith("*") else ""))
    return terms


def baseline_match(query: str) -> str:
    """The baseline's plain, safe FTS5 expression: the quoted pieces ANDed (implicit AND)."""
    return " ".join(baseline_terms(query))


def baseline_or(query: str) -> str:
    """The same quoted pieces ORed (the service's OR-fallback query; informational)."""
    return " OR ".join(baseline_terms(query))


BASELINE_SQL = (
    "SELECT c.id, s.path, c.start_line, c.end_line, c.text FROM "
    f"(SELECT rowid AS id FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ? ORDER BY rank LIMIT {SEARCH_LIMIT}) m "
    "JOIN kb_chunks c ON c.id = m.id JOIN kb_sources s ON s.id = c.source_id"
)


def service_refreshes(stub: Any, metadata: tuple[tuple[str, str], ...], workspace: Path, count: int) -> dict[str, Any]:
    """Refresh(wait=true) through the running service: ``count`` no-change calls, then ``count``
    one-file changes, each an append to a different note immediately followed by the call."""
    from gateway.v1 import kb_pb2

    def call() -> tuple[float, Any]:
        t0 = time.perf_counter()
        reply = stub.Refresh(kb_pb2.RefreshRequest(agent_id=AGENT, wait=True), metadata=metadata, timeout=120)
        return time.perf_counter() - t0, reply.report

    nochange = []
    for _ in range(count):
        seconds, report = call()
        if report.indexed or report.pruned:
            raise RuntimeError(f"no-change Refresh indexed {report.indexed}, pruned {report.pruned}")
        nochange.append(seconds)
    notes = sorted(workspace.glob("memory/**/*.md"))
    onefile = []
    watch_first = 0  # calls whose note the KB had indexed on its file event before the call's run began
    for i in range(count):
        path = notes[(i * 2246822519 + 7) % len(notes)]
        token = f"benchedit{i}q{os.getpid()}"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n- bench service edit {token}: one more line, refreshed at once through the RPC.\n")
        seconds, report = call()
        # The reply reports the run the call waited for (Read-your-writes in
        # docs/concepts/archive.md "Knowledge archive (KB)"): when the write's event reached the KB
        # first, the refresh it queued indexed the note and the call's run found nothing left (0).
        # Either way the line is searchable once the call returns.
        if report.indexed > 1:
            raise RuntimeError(f"one-file Refresh indexed {report.indexed} files, expected at most 1")
        hits = stub.Search(kb_pb2.SearchRequest(agent_id=AGENT, query=token, limit=1), metadata=metadata, timeout=30).hits
        if not hits:
            raise RuntimeError(f"the line written before Refresh(wait) is not found by Search ({token})")
        onefile.append(seconds)
        watch_first += report.indexed == 0
    return {"svc_nochange": nochange, "svc_onefile": onefile, "svc_watch_first": watch_first}


def search_phase(home: Path, workspace: Path, kb_path: Path, warm: list[str], queries: list[str],
                 children: Children | None, kb_port: int, refreshes: int = 20) -> dict[str, Any]:  # fmt: skip
    from services.kb.index import schema, search

    out: dict[str, Any] = {}
    reader = schema.open_reader(kb_path)

    def inproc(q: str, build: Any = baseline_match) -> tuple[float, int]:
        expr = build(q)
        t0 = time.perf_counter()
        rows = reader.execute(BASELINE_SQL, (expr,)).fetchall() if expr else []
        return time.perf_counter() - t0, len(rows)

    # OR variant of the baseline (informational).
    for q in warm:
        inproc(q, baseline_or)
    out["base_or"] = [inproc(q, baseline_or)[0] for q in queries]

    # Domain-layer search in-process (informational), before any server exists.
    for q in warm:
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=False)
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=False)
        lat.append(time.perf_counter() - t0)
    out["domain"] = lat
    out["or_matches"] = [
        reader.execute("SELECT count(*) FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ?", (baseline_or(q),)).fetchall()[0][0]
        if baseline_or(q) else 0
        for q in queries
    ]
    lat = []
    for q in queries[:100]:
        t0 = time.perf_counter()
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=True)
        lat.append(time.perf_counter() - t0)
    out["domain_stale"] = lat

    stub = channel = bare = bare_channel = None
    metadata: tuple[tuple[str, str], ...] = ()
    if children is not None:
        stub, channel, metadata, refresh_s, kb_pid = start_kb(home, kb_port, children)
        out["grpc_refresh_s"] = refresh_s
        out["kb_pid"] = kb_pid
        bare, bare_channel = start_match_server(kb_path, children)
    try:
        from gateway.v1 import kb_pb2

        no_record = (*metadata, ("x-gateway-record-retrievals", "0"))

        def remote(q: str, md: tuple[tuple[str, str], ...] = metadata) -> tuple[float, int]:
            assert stub is not None
            t0 = time.perf_counter()
            reply = stub.Search(kb_pb2.SearchRequest(agent_id=AGENT, query=q, limit=SEARCH_LIMIT), metadata=md, timeout=30)
            return time.perf_counter() - t0, len(reply.hits)

        def served(q: str) -> float:
            assert bare is not None
            expr = baseline_match(q)
            t0 = time.perf_counter()
            bare(expr.encode(), timeout=30)
            return time.perf_counter() - t0

        for q in warm:
            inproc(q)
            if stub is not None:
                remote(q)
                served(q)
        base, grpc_lat, bare_lat, base_hits, grpc_hits = [], [], [], 0, 0
        out["grpc_hit_list"] = []
        cpu0 = cpu_seconds(out["kb_pid"]) if stub is not None else 0.0
        wall0 = time.perf_counter()
        for q in queries:
            s, n = inproc(q)
            base.append(s)
            base_hits += n
            if stub is not None:
                s, n = remote(q)
                grpc_lat.append(s)
                grpc_hits += n
                out["grpc_hit_list"].append(n)
                bare_lat.append(served(q))
        out["wall_s"] = time.perf_counter() - wall0
        out.update(base=base, base_hits=base_hits)
        if stub is not None:
            out.update(bare=bare_lat)
            out.update(grpc=grpc_lat, grpc_hits=grpc_hits, server_cpu_ms=1000 * (cpu_seconds(out["kb_pid"]) - cpu0) / len(queries))
            time.sleep(0.5)  # let the recorder thread write its batch before the next figures
            assert children is not None
            out["server_ms"] = rpc_seconds(children.logs["kb"], "Search", len(warm), len(queries))
            # Informational: the gRPC round-trip floor of this server (grpc.health.v1 Check, same channel).
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            health = health_pb2_grpc.HealthStub(channel)
            ping = []
            for _ in range(300):
                t0 = time.perf_counter()
                health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                ping.append(time.perf_counter() - t0)
            out["ping"] = ping[50:]
            # Informational: the same queries with retrieval recording switched off by metadata.
            cpu0 = cpu_seconds(out["kb_pid"])
            out["grpc_norecord"] = [remote(q, no_record)[0] for q in queries]
            out["server_cpu_norecord_ms"] = 1000 * (cpu_seconds(out["kb_pid"]) - cpu0) / len(queries)
            reply = stub.Search(kb_pb2.SearchRequest(agent_id=AGENT, query=queries[0], limit=SEARCH_LIMIT), metadata=metadata, timeout=30)
            out["stale_after"] = reply.stale
            out["generation"] = reply.generation
            out.update(service_refreshes(stub, metadata, workspace, refreshes))
    finally:
        for each in (channel, bare_channel):
            if each is not None:
                each.close()
        reader.close()
    return out


def start_match_server(kb_path: Path, children: Children) -> tuple[Any, Any]:
    """``bench/match_server.py`` on a free port: the baseline query behind a bare grpc.aio server."""
    import grpc

    port = free_ports(1)[0]
    children.start("match", [sys.executable, str(BENCH_DIR / "match_server.py"), str(port), str(kb_path), BASELINE_SQL])
    wait_until(children, lambda: "ready" in children.tail("match"), "bench/match_server.py", START_TIMEOUT_S, name="match", interval=0.05)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel.unary_unary("/bench.Match/Run"), channel
