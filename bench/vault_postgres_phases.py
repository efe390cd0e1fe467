"""The PostgreSQL vault bench's measured phases: the interleaved rounds of creates and searches on every
backend, and creates from 1, 2, 4 and 8 hosts at once.

bench/vault_postgres.py's docstring says the method; nothing here decides a verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from harness import BENCH_DIR
from harness.procs import Children, cpu_seconds
from harness.report import say
from kb_archive_search import make_queries
from kb_bench_support import AGENT
from kb_shared_vault import VaultGen
from vault_postgres_setup import Backend, cluster_cpu, cjk_queries

SEARCH_LIMIT = 6
SEARCH_WARMUP = 20
CREATE_WARMUP = 5
RPC_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 120.0


@dataclass
class Side:
    """What one backend answered over the rounds."""

    create: list[float] = field(default_factory=list)  # every CreateSharedNote call
    written: int = 0
    nudged: int = 0
    dups: int = 0
    dups_nudged: int = 0
    search: list[float] = field(default_factory=list)  # every Search call, corpus=shared
    search_cjk: list[float] = field(default_factory=list)
    hits: int = 0
    kb_cpu: dict[str, float] = field(default_factory=lambda: {"create": 0.0, "search": 0.0})
    pg_cpu: dict[str, float] = field(default_factory=lambda: {"create": 0.0, "search": 0.0})


@dataclass
class Op:
    dup: bool
    name: str
    content: str


def plan_creates(gen: VaultGen, notes_dir: Any, count: int) -> list[Op]:
    """``count`` create operations, one third reworded near-duplicates of pre-filled notes."""
    rng = gen.rng
    ops = []
    for i in range(count):
        if i % 3 == 2:
            original = rng.choice(gen.names)
            text = (notes_dir / f"{original}.md").read_text(encoding="utf-8")
            ops.append(Op(True, f"{original} reworded {i}", gen.reword(text, f"r{i}")))
        else:
            name, content = gen.new_note(f"new{i:04d}")
            ops.append(Op(False, name, content))
    return ops


def _create(backend: Backend, op: Op, side: Side | None) -> None:
    """One create operation: the call, and ``confirm=true`` after a nudge (a new note always, a
    near-duplicate never: the agent would update the note it duplicates)."""
    from gateway.v1 import kb_pb2

    confirm = False
    while True:
        request = kb_pb2.CreateSharedNoteRequest(agent_id=AGENT, name=op.name, content=op.content, confirm=confirm)
        t0 = time.perf_counter()
        reply = backend.stub.CreateSharedNote(request, metadata=backend.metadata, timeout=RPC_TIMEOUT_S)
        seconds = time.perf_counter() - t0
        if side is not None:
            side.create.append(seconds)
            side.written += reply.created
            if not reply.created and not confirm:
                side.nudged += 1
                side.dups_nudged += op.dup
        if reply.created or confirm or op.dup:
            return
        confirm = True


def _search(backend: Backend, query: str, side: Side | None, cjk: bool) -> None:
    from gateway.v1 import kb_pb2

    request = kb_pb2.SearchRequest(agent_id=AGENT, query=query, corpus="shared", limit=SEARCH_LIMIT)
    t0 = time.perf_counter()
    reply = backend.stub.Search(request, metadata=backend.metadata, timeout=RPC_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    if side is not None:
        (side.search_cjk if cjk else side.search).append(seconds)
        side.hits += len(reply.hits)


def rounds(backends: list[Backend], gen: VaultGen, notes_dir: Any, seed: int, count: int, creates: int,
           queries: int, cjk: int) -> dict[str, Side]:  # fmt: skip
    """``count`` rounds; in each, every backend in turn (the order rotated each round) runs its share of
    the searches, then every backend in turn its share of the creates: the same queries and the same notes
    on each, so a slow second on the machine lands on one backend's few calls, not on one backend."""
    sides = {b.label: Side() for b in backends}
    warm_queries = [q for _, q in make_queries(seed + 1, SEARCH_WARMUP)]
    warm_ops = plan_creates(gen, notes_dir, CREATE_WARMUP)
    for b in backends:
        for q in warm_queries:
            _search(b, q, None, False)
        for op in warm_ops:
            _create(b, Op(op.dup, f"{op.name} warm", op.content), None)
    tagged = [(q, False) for _, q in make_queries(seed, queries)] + [(q, True) for q in cjk_queries(gen, cjk)]
    gen.rng.shuffle(tagged)
    ops = plan_creates(gen, notes_dir, creates)
    for r in range(count):
        order = backends[r % len(backends):] + backends[: r % len(backends)]
        batch = tagged[r * len(tagged) // count:(r + 1) * len(tagged) // count]
        for b in order:
            _measured(b, sides[b.label], "search", lambda b=b: [_search(b, q, sides[b.label], c) for q, c in batch])
        batch_ops = ops[r * len(ops) // count:(r + 1) * len(ops) // count]
        for b in order:
            _measured(b, sides[b.label], "create", lambda b=b: [_create(b, op, sides[b.label]) for op in batch_ops])
        say(f"round {r + 1}/{count} done")
    for side in sides.values():
        side.dups = sum(op.dup for op in ops)
    return sides


def _measured(backend: Backend, side: Side, what: str, work: Any) -> None:
    """Run ``work`` and add the CPU the backend's KB process and its cluster spent meanwhile."""
    kb0, pg0 = cpu_seconds(backend.pid), cluster_cpu(backend.cluster)
    work()
    side.kb_cpu[what] += cpu_seconds(backend.pid) - kb0
    side.pg_cpu[what] += cluster_cpu(backend.cluster) - pg0


# =========================================================================== hosts at once


@dataclass
class Level:
    hosts: int
    seconds: float
    ops: list[float]  # every create's seconds (open loop: from when it was due)
    written: int
    unsent: int
    kb_cpu_s: float  # every host's KB
    pg_cpu_s: float
    offered: float = 0.0  # notes a second offered in all (open loop); 0: a closed loop


class HostClients:
    """One client process per host (bench/vault_postgres_host.py), started once and told what to do."""

    def __init__(self, hosts: list[Backend], children: Children, seed: int) -> None:
        self.hosts = hosts
        self.procs: list[subprocess.Popen[str]] = []
        for i, host in enumerate(hosts):
            cmd = [sys.executable, str(BENCH_DIR / "vault_postgres_host.py"), "--port", str(host.port), "--home",
                   str(host.home), "--tag", f"h{i}", "--seed", str(seed * 100 + i)]  # fmt: skip
            self.procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                               env=children.env, start_new_session=True))  # fmt: skip
        for proc in self.procs:
            line = _read_line(proc, READY_TIMEOUT_S)
            if line != "ready":
                raise RuntimeError(f"a host client said {line!r} instead of ready")

    def run(self, count: int, seconds: float, rate: float = 0.0) -> Level:
        """The first ``count`` hosts create at once for ``seconds``: back to back, or (``rate``: notes a second
        in all) in an open loop, each host ``rate / count`` a second."""
        hosts, procs = self.hosts[:count], self.procs[:count]
        kb0, pg0 = sum(cpu_seconds(h.pid) for h in hosts), cluster_cpu(hosts[0].cluster)
        t0 = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"go {seconds}" + (f" {rate / count}" if rate else "") + "\n")
            proc.stdin.flush()
        results = [json.loads(_read_line(proc, seconds + READY_TIMEOUT_S)) for proc in procs]
        wall = time.perf_counter() - t0
        kb_cpu, pg_cpu = sum(cpu_seconds(h.pid) for h in hosts) - kb0, cluster_cpu(hosts[0].cluster) - pg0
        ops = [op for r in results for op in r["ops"]]
        return Level(count, wall, [op[1] for op in ops], sum(1 for op in ops if op[2]), sum(r["unsent"] for r in results),
                     kb_cpu, pg_cpu, rate)  # fmt: skip

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """One line of the client's stdout within ``timeout`` (RuntimeError when it exits or stays silent)."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"a host client said nothing in {timeout:.0f} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a host client exited with code {proc.wait()}")
    return line.strip()


# =========================================================================== where the time goes

BREAKDOWN_PARTS = ("term_counts", "recall", "candidate reads", "find_similar", "search, word queries", "search, CJK queries")


def breakdown(stores: dict[str, Any], gen: VaultGen, notes_dir: Any, seed: int, ops: int) -> dict[str, dict[str, list[float]]]:
    """In-process, straight on each backend's store (no KB, no gRPC): the near-duplicate check's statements
    (``term_counts`` of the leading stems, the OR ``recall``, a read per candidate, then ``find_similar`` end
    to end) on ``ops`` create contents (a third near-duplicates), and ``search`` on the same word and CJK
    queries; seconds per call, by backend and part."""
    from services.kb.vault import similar

    contents = [op.content for op in plan_creates(gen, notes_dir, ops)]
    words = [q for _, q in make_queries(seed + 2, ops)]
    cjk = cjk_queries(gen, ops)
    out: dict[str, dict[str, list[float]]] = {}
    for label, store in stores.items():
        parts: dict[str, list[float]] = {k: [] for k in BREAKDOWN_PARTS}

        def timed(part: str, work: Any, parts: dict[str, list[float]] = parts) -> Any:
            t0 = time.perf_counter()
            result = work()
            parts[part].append(time.perf_counter() - t0)
            return result

        for content in contents:
            leading = similar.seed_terms(content, similar.LEADING_TERMS)
            timed("term_counts", lambda leading=leading: store.term_counts(leading))
            seed_terms = similar.choose_seed(store, content)
            found = timed("recall", lambda seed_terms=seed_terms: similar._candidates(store, seed_terms, set()))
            timed("candidate reads", lambda found=found: [store.read(name) for name, _ in found])
            timed("find_similar", lambda content=content: similar.find_similar(store, content))
        for q in words:
            timed("search, word queries", lambda q=q: store.search(q, SEARCH_LIMIT))
        for q in cjk:
            timed("search, CJK queries", lambda q=q: store.search(q, SEARCH_LIMIT))
        out[label] = parts
    return out
