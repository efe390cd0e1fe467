"""The soak's REST traffic, note files written to disk, and dreams (bench/soak.py drives them).

One asyncio loop, one ``httpx2`` client with a connection pool: the generator must not be the
bottleneck on a 2-core machine, so each request is a coroutine, never a thread. REST requests
are sent open-loop at a fixed rate (a request is not held back because the one before is slow);
past ``MAX_IN_FLIGHT`` outstanding requests a tick is counted as ``behind`` instead of sent, which
says the suite (or the generator) could not keep up.

Every answer is recorded with its latency (from the send to the whole body read) and status; an
error is any answer but the expected one (a 2xx, with the fields the route promises), a
transport failure counts as status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kb_corpus import NoteWriter
from suite_up import KEY, NOTE_CHARS, USER_TEXT, FleetHome
from watcher_support import SOUL, memory_text

MAX_IN_FLIGHT = 64
REQUEST_TIMEOUT_S = 30.0
DREAM_TIMEOUT_S = 300.0
EXAMPLES = 40  # error examples kept for the report

# The REST mix: (action, weight). About the outside run: identity files read and
# written, memory and shared search, shared notes created, read and updated.
MIX = (
    ("get_file", 22), ("put_file", 12), ("search", 22), ("shared_search", 8), ("all_search", 4),
    ("memory_get", 4), ("shared_create", 3), ("shared_get", 8), ("shared_update", 4),
)
IDENTITY_PUTS = (("MEMORY.md", 6), ("USER.md", 2), ("SOUL.md", 1), ("HEARTBEAT.md", 1))
IDENTITY_GETS = ("SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "IDENTITY.md", "HEARTBEAT.md")


@dataclass(frozen=True)
class Record:
    t: float  # the request's start, seconds after the traffic started
    kind: str
    ms: float
    status: int  # HTTP status (gRPC codes mapped as the shim maps them); 0: no answer
    ok: bool


@dataclass
class Recorder:
    """Every request's outcome, in order; the counters the report reads."""

    t0: float
    records: list[Record] = field(default_factory=list)
    errors: Counter[tuple[str, int]] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)  # what answers said (created, held back, ...)
    behind: int = 0
    lag_ms: list[float] = field(default_factory=list)  # how late the open-loop ticks fired

    def add(self, kind: str, start: float, status: int, ok: bool, detail: str = "") -> None:
        now = time.perf_counter()
        self.records.append(Record(start - self.t0, kind, (now - start) * 1000, status, ok))
        if not ok:
            self.errors[(kind, status)] += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(f"t={now - self.t0:.0f}s {kind} {status}: {detail[:300]}")

    def now(self) -> float:
        return time.perf_counter() - self.t0


def family(kind: str) -> str:
    """``rest:search`` -> ``rest``; the judged latencies are the short requests' families."""
    return kind.split(":", 1)[0]


JUDGED_FAMILIES = ("rest", "session", "mcp_http")  # dreams, MCP session set-ups and stdio spawns are reported apart


def judged(record: Record) -> bool:
    return family(record.kind) in JUDGED_FAMILIES and not record.kind.endswith(":ready")


@dataclass
class SharedNote:
    base: str
    revision: int = 0


class RestTraffic:
    """The REST mix, disk notes and dreams over one fleet."""

    def __init__(self, fleet: FleetHome, rec: Recorder, rng: random.Random, seed: int) -> None:
        import httpx2

        self.fleet = fleet
        self.rec = rec
        self.rng = rng
        self.seed = seed
        self.writer = NoteWriter(random.Random(seed + 1), fleet.vocab)
        self.client = httpx2.AsyncClient(
            base_url=fleet.base_url, headers={"X-Api-Key": KEY}, timeout=REQUEST_TIMEOUT_S,
            limits=httpx2.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=32),
        )
        self.actions = [a for a, _ in MIX]
        self.weights = [w for _, w in MIX]
        self.shared: dict[str, SharedNote] = {}
        self.created = 0
        self.disk_notes: dict[str, list[str]] = {a: [] for a in fleet.agents}  # soak notes per agent (relative paths)
        self.tokens: dict[str, str] = {}  # agent -> the token of the note it last had written to disk
        self.token_count = 0
        self.facts = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        await self.client.aclose()

    # ----------------------------------------------------------------- words

    def query(self) -> str:
        return " ".join(self.fleet.vocab.content(self.rng) for _ in range(self.rng.choice((1, 1, 2, 2, 3))))

    def agent(self) -> str:
        return self.rng.choice(self.fleet.agents)

    # ----------------------------------------------------------------- one request

    async def call(self, kind: str, method: str, url: str, *, body: Any = None, params: dict[str, Any] | None = None,
                   expect: str | None = None) -> dict[str, Any] | None:
        """One request; recorded. ``expect``: a field the 200 answer must carry. The answer's JSON, or None."""
        import httpx2

        start = time.perf_counter()
        try:
            reply = await self.client.request(method, url, json=body, params=params)
        except httpx2.HTTPError as exc:
            self.rec.add(kind, start, 0, False, f"{type(exc).__name__}: {exc} ({method} {url})")
            return None
        try:
            data = reply.json()
        except ValueError:
            data = None
        ok = 200 <= reply.status_code < 300 and isinstance(data, dict) and (expect is None or expect in data)
        self.rec.add(kind, start, reply.status_code, ok, f"{method} {url}: {reply.text[:300]}")
        return data if ok else None

    async def one(self, action: str) -> None:
        agent = self.agent()
        base = f"/api/v1/agents/{agent}"
        if action == "get_file":
            await self.call("rest:get_file", "GET", f"{base}/files/{self.rng.choice(IDENTITY_GETS)}", expect="content")
        elif action == "put_file":
            name = self.rng.choices([n for n, _ in IDENTITY_PUTS], [w for _, w in IDENTITY_PUTS])[0]
            await self.call("rest:put_file", "PUT", f"{base}/files/{name}", body={"content": self.identity(agent, name)},
                            expect="message")  # fmt: skip
        elif action in ("search", "shared_search", "all_search"):
            corpus = {"search": "memory", "shared_search": "shared", "all_search": "all"}[action]
            data = await self.call(f"rest:{action}", "GET", f"{base}/memory:search",
                                   params={"query": self.query(), "corpus": corpus}, expect="generation")  # fmt: skip
            if data is not None:
                self.rec.outcomes[f"{action} with hits" if data.get("hits") else f"{action} without hits"] += 1
        elif action == "memory_get":
            path = self.rng.choice(self.fleet.notes[agent])
            await self.call("rest:memory_get", "GET", f"{base}/memory:get", params={"path": path, "lines": 40},
                            expect="text")  # fmt: skip
        elif action == "shared_create" or not self.shared:
            await self.create_shared(base)
        elif action == "shared_get":
            name = self.rng.choice(list(self.shared))
            await self.call("rest:shared_get", "GET", f"{base}/shared/notes/{quote(name, safe='')}", expect="content")
        elif action == "shared_update":
            name = self.rng.choice(list(self.shared))
            note = self.shared[name]
            note.revision += 1
            content = f"{note.base}\n- revision {note.revision}: {self.writer.sentence()}\n"
            data = await self.call("rest:shared_update", "PUT", f"{base}/shared/notes/{quote(name, safe='')}",
                                   body={"content": content}, expect="name")  # fmt: skip
            if data is not None:
                self.rec.outcomes["shared update written" if data.get("updated") else "shared update held back"] += 1

    async def create_shared(self, base: str, kind: str = "rest:shared_create", confirm: bool | None = None) -> None:
        """A new shared note; half of them with ``confirm`` (written even when similar notes exist)."""
        self.created += 1
        name = f"soak {self.seed} note {self.created}"
        text = self.writer.note(name, 700, False, False)
        confirm = self.rng.random() < 0.5 if confirm is None else confirm
        data = await self.call(kind, "POST", f"{base}/shared/notes",
                               body={"name": name, "content": text, "confirm": confirm}, expect="name")  # fmt: skip
        if data is None:
            return
        if data.get("created"):
            self.shared[name] = SharedNote(text.rstrip("\n"))
            self.rec.outcomes["shared create written"] += 1
        else:
            self.rec.outcomes["shared create held back (similar notes)"] += 1

    def identity(self, agent: str, name: str) -> str:
        marker = f"{name.lower().split('.')[0]}-{self.rng.getrandbits(40):010x}"
        if name == "MEMORY.md":
            return memory_text(agent, marker)
        if name == "USER.md":
            return f"{USER_TEXT}\n- latest: {marker}\n"
        if name == "SOUL.md":
            return SOUL.format(agent=agent) + f"\nVersion {marker}.\n"
        return f"# Heartbeat\n\n- check the inbox ({marker})\n"

    # ----------------------------------------------------------------- loops

    async def rest_loop(self, stop: asyncio.Event, rate: float) -> None:
        """``rate`` requests a second, open-loop, until ``stop``."""
        interval = 1.0 / rate
        next_at = time.perf_counter()
        while not stop.is_set():
            next_at += interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                self.rec.lag_ms.append(-delay * 1000)
            if len(self.tasks) >= MAX_IN_FLIGHT:
                self.rec.behind += 1
                continue
            task = asyncio.create_task(self.one(self.rng.choices(self.actions, self.weights)[0]))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def drain(self, timeout: float = REQUEST_TIMEOUT_S + 5) -> None:
        """Wait for the requests still in flight."""
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)

    def note_text(self, agent: str) -> tuple[str, str]:
        self.token_count += 1
        token = f"soaktoken{self.seed}x{self.token_count}"
        body = self.writer.note(f"{agent} field note {self.token_count}", NOTE_CHARS, False, self.rng.random() < 0.3)
        return token, f"{body}\n- reference {token}\n"

    def write_disk_note(self) -> None:
        """One note written straight to an agent's memory/ (as its own tools would): a new file, or an
        existing soak note rewritten. Plain writes, no temp file: the watchers must cope."""
        agent = self.agent()
        notes = self.disk_notes[agent]
        if notes and self.rng.random() < 0.5:
            rel = self.rng.choice(notes)
            self.rec.outcomes["disk note rewritten"] += 1
        else:
            rel = f"memory/soak-{self.seed}-{self.token_count + 1}.md"
            notes.append(rel)
            self.rec.outcomes["disk note created"] += 1
        token, text = self.note_text(agent)
        self.tokens[f"{agent}/{rel}"] = token  # a rewrite replaces the token the file held
        (self.fleet.workspaces[agent] / rel).write_text(text, encoding="utf-8")

    async def disk_loop(self, stop: asyncio.Event, per_second: float) -> None:
        if per_second <= 0:  # --notes-per-second 0: no note written to disk
            await stop.wait()
            return
        interval = 1.0 / per_second
        next_at = time.perf_counter()
        while not stop.is_set():
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            try:
                self.write_disk_note()
            except OSError as exc:
                self.rec.add("disk:note", time.perf_counter(), 0, False, str(exc))

    async def dream_loop(self, stop: asyncio.Event, every_s: float) -> None:
        """A manual dream every ``every_s`` seconds, on the next agent of a shuffled round (a
        transcript with two new ``REMEMBER:`` lines first, so the stand-in reviewer proposes adds).
        A dream still running at the next tick is not doubled: the tick is counted as skipped."""
        order = list(self.fleet.agents)
        self.rng.shuffle(order)
        running: asyncio.Task[None] | None = None
        i = 0
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
            if stop.is_set():
                break
            if running is not None and not running.done():
                self.rec.outcomes["dream tick skipped (previous run still going)"] += 1
                continue
            agent = order[i % len(order)]
            i += 1
            running = asyncio.create_task(self.dream(agent))
            self.tasks.add(running)
            running.add_done_callback(self.tasks.discard)

    async def dream(self, agent: str) -> None:
        lines = []
        for _ in range(2):
            self.facts += 1
            lines.append(f"REMEMBER: {agent} fact {self.facts}: {self.writer.sentence()}")
        record = {"type": "user", "message": {"role": "user", "content": "Notes from today.\n" + "\n".join(lines)}}
        with open(self.fleet.transcripts[agent] / "soak.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        import httpx2

        start = time.perf_counter()
        try:
            reply = await self.client.post(f"/api/v1/agents/{agent}/dream:run", json={}, timeout=DREAM_TIMEOUT_S)
        except httpx2.HTTPError as exc:
            self.rec.add("dream:run", start, 0, False, f"{type(exc).__name__}: {exc}")
            return
        try:
            data = reply.json()
        except ValueError:
            data = {}
        ok = reply.status_code == 200 and data.get("status") in ("applied", "nothing", "proposed")
        self.rec.add("dream:run", start, reply.status_code, ok, reply.text[:300])
        if reply.status_code == 200:
            self.rec.outcomes[f"dream {data.get('status')}"] += 1


async def agreement(traffic: RestTraffic, fleet: FleetHome) -> tuple[int, int, list[str]]:
    """At rest: for each agent, CLAUDE.md holds MEMORY.md's text, and a search finds the token of
    every soak note on its disk. (checks, disagreements, examples)."""
    checks = bad = 0
    examples: list[str] = []
    for agent in fleet.agents:
        ws = fleet.workspaces[agent]
        memory = (ws / "MEMORY.md").read_text(encoding="utf-8").strip()
        claude = (ws / "CLAUDE.md").read_text(encoding="utf-8") if (ws / "CLAUDE.md").exists() else ""
        checks += 1
        if memory not in claude:
            bad += 1
            examples.append(f"{agent}: CLAUDE.md does not hold MEMORY.md's current text")
        for key, token in traffic.tokens.items():
            if not key.startswith(agent + "/"):
                continue
            rel = key.split("/", 1)[1]
            checks += 1
            data = await traffic.call("check:search", "GET", f"/api/v1/agents/{agent}/memory:search",
                                      params={"query": token}, expect="generation")  # fmt: skip
            if data is None or not any(hit.get("path") == rel for hit in data.get("hits", [])):
                bad += 1
                if len(examples) < 20:
                    examples.append(f"{agent}: search for {token} does not find {rel}")
    return checks, bad, examples
