"""Fresh starts with searches already under way: no reader ever sees a half-made database.

Each start is a new home (no kb.sqlite yet) and a new KB process, forked from one that has imported
the KB already (``kb_fork_support``: an interpreter's start-up is no part of the race). Searches of every agent's
archive and of the shared vault are fired from before the process listens until well after it
does, several at once, through a channel that reconnects within milliseconds, so some land at
the moment it becomes ready, when the first refreshes are creating the databases. Every
answer is OK or, before the server listens, UNAVAILABLE; never INTERNAL, never a missing table
("no such table: kb_meta" for an archive, "no such table: kb_sources" for the vault).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from hardening_report import record
from kb_fork_support import ForkServer
from suite_support import free_ports

from gateway.config_migrations import CURRENT_VERSION
from gateway.home import ensure_home, read_internal_token
from gateway.resources import SHORTAGE_METADATA
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

STARTS = 50
AT_ONCE = 5  # starts run side by side (each its own home and port)
AGENTS = ("ada", "bo", "cy")
CORPORA = ("memory", "shared", "all")
OK_AFTER_READY = 2  # answers per agent and corpus once the KB answers, before the start is done
FAST_RECONNECT = [("grpc.initial_reconnect_backoff_ms", 10), ("grpc.min_reconnect_backoff_ms", 10),
                  ("grpc.max_reconnect_backoff_ms", 50)]


def fresh_home(root: Path) -> tuple[Path, int]:
    home = root / "home"
    home.mkdir(parents=True)
    ports = free_ports(7)
    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", "fileApi": ports[0], "watcher": ports[1], "kb": ports[2], "dreaming": ports[3]},
            "api": {"port": ports[4], "keys": [{"key": "fresh-start-key-1", "agents": "*", "write": False}]},
            "metrics": {"enabled": False},
            "dreaming": {"enabled": False},
        },
        "agents": [{"id": agent} for agent in AGENTS],
    }
    (home / "config.json").write_text(json.dumps(config))
    ensure_home(home)
    for agent in AGENTS:
        workspace = home / "agents" / agent / "workspace"
        (workspace / "memory").mkdir(parents=True)
        (workspace / "MEMORY.md").write_text(f"# Memory\n\n- {agent} tends the lighthouse\n")
        (workspace / "memory" / "log.md").write_text(f"# Log\n\n- {agent} saw the lighthouse beam\n")
    notes = home / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True)
    (notes / "lighthouse.md").write_text("# Lighthouse\n\n- the lighthouse beam turns every ten seconds\n")
    return home, ports[2]


def one_start(forks: ForkServer, root: Path) -> tuple[Counter[str], list[str]]:
    """Start a KB on a fresh home with searches in flight; (answers by code, problems)."""
    home, port = fresh_home(root)
    token = read_internal_token(home)
    codes: Counter[str] = Counter()
    problems: list[str] = []
    ok: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()
    done = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=FAST_RECONNECT)
    stub = kb_pb2_grpc.KnowledgeStub(channel)

    def fire(offset: int) -> None:
        turn = offset
        while not done.is_set():
            agent, corpus = AGENTS[turn % len(AGENTS)], CORPORA[(turn // len(AGENTS)) % len(CORPORA)]
            turn += 1
            request = kb_pb2.SearchRequest(agent_id=agent, query="lighthouse", corpus=corpus)
            try:
                stub.Search(request, metadata=(("x-gateway-internal-token", token),), timeout=10)
                code, details = "OK", ""
            except grpc.RpcError as exc:
                code, details = exc.code().name, exc.details() or ""
                trailing = dict(exc.trailing_metadata() or ())  # type: ignore[attr-defined]
                if code == "UNAVAILABLE" and SHORTAGE_METADATA in trailing:
                    code = "UNAVAILABLE_FROM_KB"  # the KB answered: only "not listening yet" is expected
            with lock:
                codes[code] += 1
                if code not in ("OK", "UNAVAILABLE") or "no such table" in details:
                    problems.append(f"{agent}/{corpus}: {code} {details}")
                if code == "OK":
                    ok[(agent, corpus)] += 1
                    if len(ok) == len(AGENTS) * len(CORPORA) and min(ok.values()) >= OK_AFTER_READY:
                        done.set()
            if code == "UNAVAILABLE":
                time.sleep(0.005)

    firing = [threading.Thread(target=fire, args=(n,)) for n in range(3)]
    for t in firing:
        t.start()
    time.sleep(0.05)  # searches are failing (nothing listens) before the process even starts
    proc = forks.start_kb(home, root / "kb.log")
    try:
        if not done.wait(90):
            problems.append(f"not every search answered within 90 s: {dict(ok)}")
    finally:
        done.set()
        for t in firing:
            t.join()
        channel.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = (root / "kb.log").read_text(errors="replace")
    problems += [f"log: {line[:300]}" for line in text.splitlines() if "no such table" in line or '"rpc_failed"' in line]
    return codes, problems


def test_fifty_fresh_starts_with_searches_before_and_at_readiness_never_fail(tmp_path: Path) -> None:
    forks = ForkServer()
    try:
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(pool.map(lambda n: one_start(forks, tmp_path / f"start{n:02d}"), range(STARTS)))
    finally:
        forks.close()
    codes: Counter[str] = Counter()
    problems = []
    for n, (start_codes, start_problems) in enumerate(results):
        codes.update(start_codes)
        problems += [f"start {n}: {p}" for p in start_problems]
    record("KB: 50 fresh starts, searches at readiness", rounds=STARTS, inputs=sum(codes.values()),
           errors_5xx=sum(n for code, n in codes.items() if code not in ("OK", "UNAVAILABLE")),
           notes=f"{AT_ONCE} starts at a time, each a new home; searches of {len(AGENTS)} archives and the vault "
                 f"from before the KB listened: {codes['OK']} OK, {codes['UNAVAILABLE']} UNAVAILABLE (not listening yet), "
                 f"{len(problems)} problems (INTERNAL or a missing table)")
    assert problems == [], problems[:20]
    assert set(codes) <= {"OK", "UNAVAILABLE"} and codes["OK"] >= STARTS * len(AGENTS) * len(CORPORA) * OK_AFTER_READY
