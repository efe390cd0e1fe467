"""Benchmark: the shared cross-agent vault (issue 5): create with the near-duplicate check, search, graph.

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

Goals (issue 5): create p99 <= 50 ms (every CreateSharedNote call, nudged or
written); graph build for 10,000 notes <= 5 s (cold and warm). Search has no
goal in issue 5 (the archive's issue 4 asked for p50 <= 5 ms; shown as
reference). Percentiles are nearest-rank. The script prints a markdown table
with PASS/FAIL (also written to ``bench/results/kb_shared.md``, git-ignored)
and exits 0 whatever the goals say; non-zero only when the benchmark itself
could not run. The KB child is stopped (SIGTERM, then SIGKILL) on exit,
Ctrl-C or failure; the temp home is removed unless ``--keep-home``. The
machine may be shared (2 cores): the load average before and after the run is
printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
for p in (str(REPO), str(BENCH_DIR)):
    if p not in sys.path:
        sys.path.insert(0, p)

import kb_archive as ka  # noqa: E402  (bench/kb_archive.py: corpus, vocabulary, children, percentiles)

RESULTS = BENCH_DIR / "results" / "kb_shared.md"
AGENT = ka.AGENT
PROJECT = "global"
DATA_NOW = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)  # the pre-fill's dates are relative to this; graph "now"
SEARCH_LIMIT = 6
CREATE_WARMUP = 10
SEARCH_WARMUP = 20
BREAKDOWN_OPS = 60
RPC_TIMEOUT_S = 30.0
CREATE_P99_GOAL_S = 0.050
GRAPH_GOAL_S = 5.0
say = ka.say
pct = ka.pct
fmt_ms = ka.fmt_ms


# =========================================================================== vault corpus

STATUSES = ("supported", "supported", "supported", "disputed", "open", "refuted")


@dataclass
class VaultGen:
    """Deterministic generator of shared notes (pre-fill, new notes, near-duplicates)."""

    seed: int
    rng: random.Random = field(init=False)
    vocab: ka.Vocabulary = field(init=False)
    writer: ka.NoteWriter = field(init=False)
    topic_pool: list[str] = field(init=False)
    claim_pool: int = 3000
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 1009 + 5)
        self.vocab = ka.build_vocabulary(self.seed)  # the archive corpus's and the queries' vocabulary
        self.writer = ka.NoteWriter(self.rng, self.vocab)
        content = self.vocab.words[self.vocab.content_start :]
        self.topic_pool = content[100:]  # skip the 100 most frequent content words: topics are specific

    # --- pieces ---------------------------------------------------------------

    def topic(self) -> tuple[str, str, str]:
        a, b, c = self.rng.sample(self.topic_pool, 3)
        return a, b, c

    def name_for(self, topic: tuple[str, ...], tag: str) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return "-".join(topic) + f"-{tag}"
        if roll < 0.85:
            return " ".join(topic).capitalize() + f" {tag}"
        return f"{topic[0].capitalize()} {topic[1]} ({tag})"

    def topical(self, topic: tuple[str, ...], k: int = 2) -> str:
        parts = self.writer.sentence().split(" ")
        for _ in range(k):
            parts[self.rng.randrange(len(parts))] = self.rng.choice(topic)
        text = " ".join(parts)
        return text[0].upper() + text[1:] + ("" if text[-1] in ".?!:" else ".")

    def claim(self, claim_id: int) -> tuple[str, str]:
        """The canonical (text, status) of a claim id (derived from the id alone)."""
        r = random.Random(self.seed * 7 + claim_id)
        words = r.choices(self.topic_pool, k=r.randint(4, 9))
        return " ".join(words).capitalize(), r.choice(STATUSES)

    def frontmatter(self, title: str) -> list[str]:
        rng = self.rng
        lines = ["---", f"title: {title}", f"tags: [{', '.join(self.writer.content_word() for _ in range(rng.randint(1, 3)))}]"]
        if rng.random() < 0.75:
            lines.append(f"confidence: {min(1.0, max(0.05, rng.gauss(0.75, 0.18))):.2f}")
        if rng.random() < 0.85:
            age = timedelta(days=rng.expovariate(1 / 120), hours=rng.randint(0, 23))
            lines.append(f"updatedAt: {(DATA_NOW - age).date().isoformat()}")
        if rng.random() < 0.6:
            lines.append("claims:")
            for _ in range(rng.randint(1, 4)):
                cid = int(rng.paretovariate(0.9)) % self.claim_pool if rng.random() < 0.5 else rng.randrange(self.claim_pool)
                text, status = self.claim(cid)
                if rng.random() < 0.08:  # a diverging copy: a contradiction
                    if rng.random() < 0.5:
                        text = "Not " + text[0].lower() + text[1:]
                    else:
                        status = "refuted" if status != "refuted" else "supported"
                lines += [f"  - id: claim-{cid:04d}", f"    text: {text}", f"    status: {status}"]
                if rng.random() < 0.5:
                    lines.append(f"    confidence: {rng.uniform(0.2, 1.0):.2f}")
        lines.append("---")
        return lines

    def link(self, missing_tag: str) -> str:
        rng = self.rng
        if not self.names or rng.random() < 0.03:
            target = f"missing {rng.choice(self.topic_pool)} {missing_tag}"
        elif rng.random() < 0.2:
            target = self.names[rng.randrange(min(200, len(self.names)))]
        else:
            target = rng.choice(self.names)
        roll = rng.random()
        if roll < 0.10:
            return f"[[{target}|{rng.choice(self.topic_pool)}]]"
        if roll < 0.15:
            return f"[[{target}#Overview]]"
        return f"[[{target}]]"

    def note(self, name: str, topic: tuple[str, ...], *, frontmatter: bool, links: int, malformed: bool = False) -> str:
        rng = self.rng
        title = " ".join(topic).capitalize()
        size = int(min(40_000, max(200, rng.lognormvariate(7.0, 0.8))))  # median ~1.1 KB, mean ~1.5 KB
        body = self.writer.note(title, size, False, False).split("\n")  # "# title", "", blocks...
        lead = " ".join(self.topical(topic) for _ in range(rng.randint(1, 3)))
        body[2:2] = [lead, ""]
        fence = False
        eligible = []
        for i, line in enumerate(body):
            if line.startswith("```"):
                fence = not fence
                continue
            if not fence and i > 3 and line and not line.startswith("#"):
                eligible.append(i)
        # the topic recurs: a few more lines get a topic word
        for i in rng.sample(eligible, min(len(eligible), rng.randint(1, 4))):
            body[i] += f" {rng.choice(topic).capitalize()} again."
        tags = [self.link(name) for _ in range(links)]
        for target in tags:
            if eligible and rng.random() < 0.7:
                i = rng.choice(eligible)
                body[i] += f" See {target}."
            else:
                body.append(f"See also {target}.")
        head: list[str] = []
        if malformed:
            head = ["---", f"title: [{title}", "confidence: high", "claims: not a list", "---"]
        elif frontmatter:
            head = self.frontmatter(title)
        return "\n".join(head + body).rstrip("\n") + "\n"

    def link_count(self) -> int:
        return min(6, int(self.rng.expovariate(1 / 2.2)))

    def new_note(self, tag: str) -> tuple[str, str]:
        topic = self.topic()
        name = self.name_for(topic, tag)
        return name, self.note(name, topic, frontmatter=self.rng.random() < 0.4, links=self.link_count())

    # --- near-duplicates ------------------------------------------------------------

    def reword(self, original: str, tag: str) -> str:
        """A reworded near-duplicate of ``original`` (same facts, other wording and order)."""
        rng = self.rng
        lines = original.split("\n")
        if lines and lines[0] == "---":
            with contextlib.suppress(ValueError):
                lines = lines[lines.index("---", 1) + 1 :]
        heading = next((ln for ln in lines if ln.startswith("# ")), "# note")
        words = heading[2:].split()
        rng.shuffle(words)
        content = [ln for ln in lines if ln.strip() and not ln.startswith("# ") and not ln.startswith("```")]
        keep = content[: max(3, int(len(content) * rng.uniform(0.5, 0.7)))]
        function = set(ka.FUNCTION_WORDS)
        out = []
        for line in keep:
            toks = line.split(" ")
            toks = [t for t in toks if not (t.lower() in function and rng.random() < 0.3)] or toks
            for i in range(len(toks) - 1):
                if rng.random() < 0.15:
                    toks[i], toks[i + 1] = toks[i + 1], toks[i]
            for i in range(len(toks)):
                if rng.random() < 0.10:
                    toks[i] = self.writer.content_word()
            out.append(" ".join(toks))
        for _ in range(max(1, len(out) // 4)):  # a few lines move
            i, j = rng.randrange(len(out)), rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        return "\n".join([f"# {' '.join(words).capitalize()} ({tag})", "", *out]) + "\n"


@dataclass
class VaultInfo:
    notes: int
    bytes: int
    frontmatter: int
    malformed: int
    links: int
    seconds: float


def prefill(gen: VaultGen, notes_dir: Path, count: int) -> VaultInfo:
    """Write ``count`` notes straight into ``notes_dir`` (names decided first, so links can point forward)."""
    rng = gen.rng
    started = time.perf_counter()
    topics = []
    used: set[str] = set()
    for i in range(count):
        topic = gen.topic()
        name = gen.name_for(topic, f"{i:05d}")
        assert name not in used
        used.add(name)
        topics.append(topic)
        gen.names.append(name)
    notes_dir.mkdir(parents=True, exist_ok=True)
    total = fm = bad = links = 0
    for i, (name, topic) in enumerate(zip(list(gen.names), topics)):
        malformed = rng.random() < 0.005
        has_fm = rng.random() < 0.4
        n_links = gen.link_count()
        text = gen.note(name, topic, frontmatter=has_fm, links=n_links, malformed=malformed)
        data = text.encode("utf-8")
        path = notes_dir / f"{name}.md"
        path.write_bytes(data)
        stamp = int((DATA_NOW - timedelta(days=rng.expovariate(1 / 150), seconds=i)).timestamp() * 1e9)
        os.utime(path, ns=(stamp, stamp))
        total += len(data)
        fm += has_fm and not malformed
        bad += malformed
        links += n_links
    return VaultInfo(count, total, fm, bad, links, time.perf_counter() - started)


# =========================================================================== home


def write_home(home: Path, kb_port: int) -> None:
    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    ports = ka.free_ports(4)
    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", "fileApi": ports[0], "watcher": ports[1], "kb": kb_port, "dreaming": ports[2]},
            "metrics": {"enabled": False},  # not the default ports: another run may hold them
            "api": {"host": "127.0.0.1", "port": ports[3], "keys": [{"key": ka.KEY, "agents": [AGENT], "write": True, "name": "bench"}]},
            "knowledge": {"shared": {"enabled": True, "project": PROJECT, "graph": False}},
        },
        "agents": [{"id": AGENT, "workspace": f"agents/{AGENT}/workspace", "transcriptsDir": f"agents/{AGENT}/sessions"}],
    }  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    ensure_home(home)


def rpc_ms(log: Path, method: str, skip: int) -> list[float]:
    """Seconds of the service's own ``rpc`` log lines for ``method`` after the first ``skip`` lines."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle):
            if n < skip or not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if row.get("event") == "rpc" and row.get("method") == method and "ms" in row:
                    out.append(float(row["ms"]) / 1000)
    return out


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
    log_mark = ka.rpc_log_lines(log)
    cpu0 = ka.cpu_seconds(pid)
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
    cpu = ka.cpu_seconds(pid) - cpu0
    time.sleep(0.3)  # let the log catch up
    server = rpc_ms(log, "CreateSharedNote", log_mark)
    return {
        "calls": calls, "dups": dup_count, "new": creates - dup_count, "dup_found": dup_found,
        "dup_found_original": dup_found_original, "new_nudged": new_nudged, "server": server,
        "cpu_ms": 1000 * cpu / max(1, len(calls)), "wall_s": wall,
    }  # fmt: skip


def search_phase(stub: Any, metadata: Any, seed: int, queries: int, pid: int, log: Path) -> dict[str, Any]:
    from gateway.v1 import kb_pb2

    tagged = ka.make_queries(seed, SEARCH_WARMUP + queries)
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
    log_mark = ka.rpc_log_lines(log)
    cpu0 = ka.cpu_seconds(pid)
    for q in qs[SEARCH_WARMUP:]:
        for c in corpora:
            s, reply = call(q, c)
            lat[c].append(s)
            hits[c] += len(reply.hits)
            if c == "all":
                all_shared += sum(1 for h in reply.hits if h.corpus == "shared")
    cpu = ka.cpu_seconds(pid) - cpu0
    time.sleep(0.3)
    server = rpc_ms(log, "Search", log_mark)  # the three corpora interleaved, in call order
    return {"lat": lat, "hits": hits, "all_shared": all_shared, "n": queries,
            "server": {c: server[i :: 3] for i, c in enumerate(corpora)} if len(server) == 3 * queries else {},
            "cpu_ms": 1000 * cpu / (3 * queries)}  # fmt: skip


def breakdown_phase(gen: VaultGen, vault_dir: Path, ops: int) -> dict[str, Any]:
    """In-process: where a create's time goes (the service is stopped)."""
    from gateway.atomic import write_atomic
    from services.kb.vault import notes as vault, note_index as vault_index, similar as vault_similar

    rng = gen.rng
    notes_dir = vault_dir / "notes"
    conn = vault_index.open_vault_index(vault_dir)
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
            cands = vault_similar._candidates(conn, seed, {name}) if seed else []
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
            vault.delete(conn, vault_dir, name)  # then the real thing, end to end, under the same name
            t0 = time.perf_counter()
            vault.create(conn, vault_dir, name, content, confirm=True)
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
    parsed, nodes, problems = graph._load(notes, reports)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph_reports.render_all(warm)
    render_s = time.perf_counter() - t0
    return {"cold": cold, "warm": warm, "one": one, "sizes": sizes, "load_s": load_s, "render_s": render_s,
            "nodes": len(nodes), "parsed": len(parsed)}  # fmt: skip


# =========================================================================== report


def lat_cell(values: list[float]) -> str:
    if not values:
        return "n/a (no such call)"
    return (f"p50 {fmt_ms(pct(values, 50))}, p99 {fmt_ms(pct(values, 99))}, max {fmt_ms(max(values))} "
            f"(n={len(values)})")  # fmt: skip


def build_report(args: argparse.Namespace, vinfo: VaultInfo, index_s: float, index_report: Any, arch: dict[str, Any],
                 cr: dict[str, Any] | None, sr: dict[str, Any] | None, bd: dict[str, Any] | None,
                 gr: dict[str, Any] | None, note: str, meta: dict[str, str]) -> tuple[str, list[str]]:  # fmt: skip
    figs = ka.Figures()
    figs.add("Vault pre-fill", f"{vinfo.notes:,} notes, {vinfo.bytes / ka.MB:.1f} MB ({vinfo.frontmatter:,} with frontmatter, "
             f"{vinfo.malformed} malformed, {vinfo.links:,} links) written in {vinfo.seconds:.1f} s")  # fmt: skip
    figs.add("Vault full index, in-process (info)", f"{index_s:.2f} s ({index_report.indexed:,} notes, errors {len(index_report.errors)})")
    figs.add("Agent archive", f"{arch['files']:,} files, {arch['bytes'] / ka.MB:.1f} MB; Refresh(wait) via gRPC {fmt_ms(arch['refresh_s'])}")
    if cr is not None:
        calls: list[Call] = cr["calls"]
        every = [c.seconds for c in calls]
        p99 = pct(every, 99)
        figs.add("CreateSharedNote, every call", lat_cell(every), "p99 <= 50 ms", p99 <= CREATE_P99_GOAL_S)
        figs.add("  nudged (related returned, nothing written)", lat_cell([c.seconds for c in calls if not c.created]))
        figs.add("  written (created=true)", lat_cell([c.seconds for c in calls if c.created]))
        figs.add("  written on the first try (no similar note)", lat_cell([c.seconds for c in calls if c.created and not c.confirm]))
        figs.add("  written with confirm=true (Related: links)", lat_cell([c.seconds for c in calls if c.created and c.confirm]))
        figs.add("  first calls of new notes / of near-duplicates (info)",
                 f"p99 {fmt_ms(pct([c.seconds for c in calls if not c.confirm and not c.dup], 99))} / "
                 f"p99 {fmt_ms(pct([c.seconds for c in calls if not c.confirm and c.dup], 99))}")  # fmt: skip
        figs.add("Near-duplicates nudged (info)", f"{cr['dup_found']} of {cr['dups']} ({100 * cr['dup_found'] / max(1, cr['dups']):.0f}%); "
                 f"the reworded note's original among the related: {cr['dup_found_original']}")  # fmt: skip
        figs.add("New notes nudged, false positives (info)", f"{cr['new_nudged']} of {cr['new']} ({100 * cr['new_nudged'] / max(1, cr['new']):.0f}%)")
        if cr["server"]:
            figs.add("CreateSharedNote handler time in the service, rpc log (info)", lat_cell(cr["server"]))
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
        figs.add("Search corpus=all (archive + vault)", lat_cell(lat["all"]) + f"; {sr['hits']['all'] / n:.1f} hits/query, "
                 f"{100 * sr['all_shared'] / max(1, sr['hits']['all']):.0f}% from the vault", "none in issue 5 (issue 4: p50 <= 5 ms)")  # fmt: skip
        figs.add("Search corpus=shared (reference)", lat_cell(lat["shared"]) + f"; {sr['hits']['shared'] / n:.1f} hits/query")
        figs.add("Search corpus=memory (reference)", lat_cell(lat["memory"]) + f"; {sr['hits']['memory'] / n:.1f} hits/query")
        for c in ("all", "shared", "memory"):
            if sr["server"].get(c):
                figs.add(f"  Search handler time, corpus={c}, rpc log (info)", lat_cell(sr["server"][c]))
        figs.add("Service CPU per Search call (info)", f"{sr['cpu_ms']:.2f} ms (mean over the three corpora)")
    else:
        figs.add("Search corpus=all", f"n/a ({note})")
    if bd is not None:
        parts = bd["parts"]
        mean = {k: statistics.fmean(v) for k, v in parts.items()}
        figs.add(f"In-process create breakdown, mean (max) of {len(parts['total'])} (info)",
                 ", ".join(f"{k} {mean[k] * 1000:.2f} ({max(parts[k]) * 1000:.1f})" for k in ("seed", "recall", "read+stem", "write", "reindex"))
                 + f" ms; sum {mean['total'] * 1000:.2f} ms (p99 {fmt_ms(pct(parts['total'], 99))})")  # fmt: skip
        figs.add("  recall query (vault_similar._candidates) (info)", lat_cell(parts["recall"]))
        figs.add("  write_atomic, durable (fsync file + dir) (info)", lat_cell(parts["write"]))
        figs.add("  reindex_notes (info)", lat_cell(parts["reindex"]))
        figs.add("  vault.create(confirm=true) end to end (info)", lat_cell(parts["create"]))
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
    md += ["", "| figure | value | goal | result |", "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in figs.rows]
    verdicts = [f"{d}: {a} = {b} (goal {c})" for a, b, c, d in figs.rows if d]
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--notes", type=int, default=10_000, help="vault notes written before the service starts (default 10000)")
    p.add_argument("--creates", type=int, default=300, help="measured create operations (default 300; a third near-duplicates)")
    p.add_argument("--queries", type=int, default=300, help="measured queries, each on corpus all, shared and memory (default 300)")
    p.add_argument("--archive-notes", type=int, default=500, help="notes in the agent's archive (default 500)")
    p.add_argument("--seed", type=int, default=4, help="corpus and query seed (default 4)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1,000 vault notes, 100 creates, 100 queries")
    p.add_argument("--keep-home", action="store_true", help="keep the temp home (vault, reports, logs)")
    args = p.parse_args(argv)
    if args.quick:
        args.notes, args.creates, args.queries = 1000, 100, 100
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    load_before = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="bench-kb-shared-"))
    tmp = home / "bench"
    tmp.mkdir()
    children = ka.Children(tmp)
    cr = sr = bd = gr = None
    note = ""
    try:
        import apsw

        from gateway.config import load_config
        from services.kb.vault import note_index as vault_index

        kb_port = ka.free_ports(1)[0]
        write_home(home, kb_port)
        agent = load_config(home).agent(AGENT)
        assert agent is not None
        vault_dir = agent.knowledge.shared.vault_dir
        assert vault_dir == home / "shared" / "kb" / PROJECT, vault_dir
        info = ka.corpus(args.seed, args.archive_notes, args.archive_notes * 0.005, agent.workspace)
        arch: dict[str, Any] = {"files": info.files, "bytes": info.bytes}
        say(f"archive: {info.files:,} files, {info.bytes / ka.MB:.1f} MB in {agent.workspace}")
        gen = VaultGen(args.seed)
        vinfo = prefill(gen, vault_dir / "notes", args.notes)
        say(f"vault: {vinfo.notes:,} notes, {vinfo.bytes / ka.MB:.1f} MB written in {vinfo.seconds:.1f} s")
        t0 = time.perf_counter()
        conn = vault_index.open_vault_index(vault_dir)
        index_report = vault_index.refresh_vault(conn, vault_dir)
        conn.close()
        index_s = time.perf_counter() - t0
        say(f"vault index: {index_report.indexed:,} notes in {index_s:.2f} s")
        try:
            stub, channel, metadata, refresh_s, pid = ka.start_kb(home, kb_port, children)
        except RuntimeError as exc:
            note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(str(exc))
        else:
            arch["refresh_s"] = refresh_s
            try:
                log = children.logs["kb"]
                cr = create_phase(stub, metadata, gen, vault_dir, args.creates, pid, log)
                say(f"creates: {len(cr['calls'])} calls, p99 {fmt_ms(pct([c.seconds for c in cr['calls']], 99))}")
                sr = search_phase(stub, metadata, args.seed, args.queries, pid, log)
                say(f"search: corpus=all p50 {fmt_ms(pct(sr['lat']['all'], 50))}")
            finally:
                channel.close()
                children.stop_all()
        arch.setdefault("refresh_s", float("nan"))
        bd = breakdown_phase(gen, vault_dir, BREAKDOWN_OPS if not args.quick else 20)
        say("breakdown done; building the graph reports")
        gr = graph_phase(vault_dir)
        say(f"graph: cold {gr['cold'].seconds:.2f} s, warm {gr['warm'].seconds:.2f} s")
    except KeyboardInterrupt:
        say("interrupted; stopping the children")
        return 130
    finally:
        children.stop_all()
        if args.keep_home:
            say(f"home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"SQLite {apsw.sqlite_lib_version()} (apsw {apsw.apswversion()}); load average before {load_before}, after "
        "{:.2f} {:.2f} {:.2f} (the machine is shared: numbers are noisy)".format(*os.getloadavg()),
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
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(markdown + "\n", encoding="utf-8")
    print()
    for line in verdicts:
        print(line)
    print()
    print(markdown)
    say(f"markdown written to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
