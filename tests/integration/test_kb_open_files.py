"""A thousand agents under a small open-files limit: every search answered, WALs empty after a stop;
files running out anyway is a 503 naming them and a degraded health, which clears.

The KB and the shim are real processes started with their soft and hard ``RLIMIT_NOFILE`` set
(``prlimit`` on the child, as ``ulimit -n`` would); everything is asked over REST, as a client would.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from hardening_report import record
from suite_support import ADMIN_KEY, Suite, env_without_home, grpc_serving, make_home, poll_get, wait_until

from gateway.live_config import loader
from gateway_cli.health_cli import check

pytestmark = pytest.mark.integration

AGENTS = 1000
NOFILE = 256


def start(suite: Suite, nofile: int, *names: str) -> None:
    """``Suite.start`` with each child's soft and hard open-files limits set to ``nofile``."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    for name in names:
        with open(suite.log_path(name), "ab") as log:
            suite.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(suite.home)],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit,
            )
    backends = [name for name in names if name != "http"]
    for name in backends:
        wait_until(lambda n=name: grpc_serving(suite.address(n)), 60, f"{name} to be SERVING")  # type: ignore[misc]
    if "http" in names:
        wait_until(lambda: suite._http_up(backends), 60, "the REST shim to listen and reach its backends")


def agents_home(tmp_path: Path, count: int, **knowledge: Any) -> tuple[Suite, list[str]]:
    ids = [f"a{i:04d}" for i in range(count)]
    extra = {"knowledge": knowledge} if knowledge else {}
    home, ports, http_port = make_home(tmp_path, agents=[{"id": agent} for agent in ids], **extra)
    for agent in ids:
        workspace = home / "agents" / agent / "workspace"
        (workspace / "memory").mkdir(parents=True)
        (workspace / "MEMORY.md").write_text(f"# Memory\n\n- the lighthouse code of {agent} is kestrel-{agent}\n")
        (workspace / "memory" / "notes.md").write_text(f"# Notes\n\n- {agent} keeps the harbour log\n")
    vault = home / "shared" / "kb" / "global" / "notes"
    vault.mkdir(parents=True)
    (vault / "harbour.md").write_text("# Harbour\n\n- the harbour opens at dawn for every kestrel\n")
    return Suite(home, http_port, ports), ids


def search(client: httpx.Client, agent: str, corpus: str) -> httpx.Response:
    return client.get(f"/api/v1/agents/{agent}/memory:search", params={"query": f"kestrel {agent}", "corpus": corpus},
                      headers={"X-Api-Key": ADMIN_KEY}, timeout=60)


def metric(suite: Suite, name: str) -> float:
    for line in poll_get(suite.metrics_url("kb"), 10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the KB's metrics")


def test_a_thousand_agents_each_searched_under_256_open_files_and_no_wal_left(tmp_path: Path) -> None:
    suite, ids = agents_home(tmp_path, AGENTS)
    codes: Counter[int] = Counter()
    found = 0
    try:
        start(suite, NOFILE, "kb", "http")

        def one(agent: str) -> tuple[int, bool, float]:
            # corpus "all": the agent's archive and the shared vault, in one search
            began = time.perf_counter()
            reply = search(shared, agent, "all")
            took = time.perf_counter() - began
            hits = reply.json().get("hits", []) if reply.status_code == 200 else []
            mine = any(h["path"] == "MEMORY.md" and h["corpus"] == "memory" for h in hits)
            return reply.status_code, mine and any(h["corpus"] == "shared" for h in hits), took

        longest = 0.0
        with httpx.Client(base_url=suite.base_url) as shared, ThreadPoolExecutor(6) as pool:
            for status, hit, took in pool.map(one, ids):
                codes[status] += 1
                found += hit
                longest = max(longest, took)
        with httpx.Client(base_url=suite.base_url) as client:  # writes: notes indexed, a fold each
            for agent in ids[:3]:
                memory = suite.home / "agents" / agent / "workspace" / "memory"
                for n in range(30):
                    (memory / f"day{n:02d}.md").write_text(f"# Day {n}\n\n" + f"- {agent} logged tide {n} at the harbour\n" * 100)
                refreshed = client.post(f"/api/v1/agents/{agent}/memory:refresh", json={"wait": True},
                                        headers={"X-Api-Key": ADMIN_KEY}, timeout=60)
                folded = client.post(f"/api/v1/agents/{agent}/memory:fold-retrievals", json={},
                                     headers={"X-Api-Key": ADMIN_KEY}, timeout=60)
                assert (refreshed.status_code, folded.status_code) == (200, 200), (refreshed.text, folded.text)
        open_archives = metric(suite, "gateway_knowledge_open_archives")
        cap = metric(suite, "gateway_knowledge_open_archives_cap")
        assert metric(suite, "gateway_open_files_limit") == NOFILE
        assert metric(suite, "gateway_open_files") < NOFILE
        assert suite.stop("kb") == 0
    finally:
        suite.stop_all()
    assert codes == Counter({200: AGENTS}), codes
    assert found == AGENTS  # every agent's own note from its own archive, and the vault's note
    assert 0 < open_archives <= cap < AGENTS
    limits = [line["open_files_limit"] for line in suite.log_lines("kb") if line.get("event") == "listening"]
    assert limits == [NOFILE]
    # A clean stop checkpoints every WAL with TRUNCATE: none is left holding anything.
    wals = [p for p in suite.home.rglob("kb.sqlite-wal") if p.stat().st_size > 0]
    record("KB: 1,000 agents under 256 open files", inputs=AGENTS, errors_5xx=sum(n for c, n in codes.items() if c >= 500),
           longest_ms=round(longest * 1000, 1),
           notes=f"KB and shim at soft and hard limits of {NOFILE}; each agent searched (memory and shared vault, "
                 f"corpus all) over REST: {codes[200]} answered 200, {found} with the agent's own note and the vault's; "
                 f"{open_archives:.0f} archives open of a cap of {cap:.0f}; after writes, folds and a clean stop, "
                 f"{len(wals)} WAL not empty")
    assert wals == []
    assert len(list(suite.home.rglob("kb.sqlite"))) == AGENTS + 1  # every archive and the vault


def health(name: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "health", name, "--home", str(home)],
                          capture_output=True, text=True, timeout=60, env=env_without_home())


def test_files_running_out_anyway_is_503_naming_them_and_degraded_until_it_recovers(tmp_path: Path) -> None:
    """A cap far above what the limit allows (the operator's mistake): the KB runs out of files.
    The call that hits it is 503 naming open files (never 500), /healthz and ``gateway health kb``
    say degraded; the KB keeps fewer archives open from then on, and every agent answers again."""
    suite, ids = agents_home(tmp_path, 60, maxOpenArchives=1000)
    statuses: list[int] = []
    short: dict[str, Any] = {}
    try:
        start(suite, 96, "kb")
        suite.start("file_api", "watcher", "dreaming", "http")
        with httpx.Client(base_url=suite.base_url) as client:
            for agent in ids:
                reply = search(client, agent, "memory")
                statuses.append(reply.status_code)
                if reply.status_code == 503:
                    short = reply.json()
                    break
            assert short, f"no search ran out of files: {Counter(statuses)}"
            healthz = client.get("/healthz").json()
            kb_health = health("kb", suite.home)
            http_health = check(loader(suite.home, {})(), "http")  # the line ``gateway health http`` prints
            # Recovered: every agent answers (a 503 says "try again shortly": a client retries, a few times).
            answered: Counter[int] = Counter()
            for agent in ids:
                for _ in range(5):
                    reply = search(client, agent, "memory")
                    statuses.append(reply.status_code)
                    if reply.status_code != 503:
                        break
                    time.sleep(0.2)
                answered[reply.status_code] += 1

            def healthy() -> bool:
                search(client, ids[-1], "memory")  # degraded clears with a call that succeeds after the hold
                return bool(client.get("/healthz").json()["status"] == "ok")

            wait_until(healthy, 60, "/healthz to say ok again")
            recovered = check(loader(suite.home, {})(), "kb")
    finally:
        suite.stop_all()
    record("KB: open files run out", inputs=len(statuses), errors_5xx=statuses.count(500),
           notes=f"maxOpenArchives 1000 under a limit of 96: the call that ran out answered 503 naming open files "
                 f"after {statuses.index(503)} agents; /healthz and gateway health kb said degraded; every agent then "
                 f"answered ({dict(answered)}; {statuses.count(503)} answers 503 in all, each retried) "
                 f"and /healthz said ok again")
    assert 500 not in statuses and 503 in statuses
    assert "ran out of open files" in short["message"] and "limit is 96" in short["message"], short
    assert healthz["status"] == "degraded" and healthz["backends"]["kb"] == "SERVING", healthz
    assert healthz["resources"] == {"kb": ["open files"]}, healthz
    assert kb_health.returncode == 1 and kb_health.stdout.startswith("kb DEGRADED at "), kb_health.stdout
    assert "ran out of open files" in kb_health.stdout
    assert not http_health[0] and "kb ran out of open files" in http_health[1], http_health
    assert answered == Counter({200: len(ids)}), answered
    assert (recovered[0], recovered[1].split(" at ")[0]) == (True, "kb SERVING")
    events = [line.get("event") for line in suite.log_lines("kb")]
    assert "kb_open_archives_over_limit" in events and "kb_open_archives_lowered" in events
    assert "rpc_failed" not in events  # no INTERNAL anywhere
    assert json.dumps(short).count("internal") == 0


def test_a_changed_cap_applies_without_a_restart(tmp_path: Path) -> None:
    """``gateway config set gateway.knowledge.maxOpenArchives`` while the KB runs: the extra archives
    close, and searches go on under the new cap."""
    suite, ids = agents_home(tmp_path, 30)
    try:
        suite.start("kb", "http")
        with httpx.Client(base_url=suite.base_url) as client:
            assert {search(client, agent, "memory").status_code for agent in ids} == {200}
            before = metric(suite, "gateway_knowledge_open_archives")
            subprocess.run([sys.executable, "-m", "gateway_cli.cli", "config", "set", "gateway.knowledge.maxOpenArchives",
                            "5", "--home", str(suite.home)], check=True, capture_output=True, env=env_without_home())
            wait_until(lambda: metric(suite, "gateway_knowledge_open_archives_cap") == 5, 15, "the new cap")
            wait_until(lambda: metric(suite, "gateway_knowledge_open_archives") <= 5, 15, "archives closed down to it")
            assert {search(client, agent, "memory").status_code for agent in ids} == {200}
            after = metric(suite, "gateway_knowledge_open_archives")
    finally:
        suite.stop_all()
    # every archive open (and the shared vault, which the KB reads at start for its tombstones: the metric
    # counts archives and vaults); then at most the cap
    assert len(ids) <= before <= len(ids) + 1 and after <= 5
