"""The shared vault's GC from scheduled dreaming, against real processes: two agents of one vault
dream the same night and the vault is collected once (one run notes what it retired, the other
that it ran already); an agent of another project collects its own vault.

Every agent's slot is the current UTC minute less one, with no stagger, so the dreaming process
runs tonight's night as a catch-up when it starts. staleDays is 1 and the notes' files are aged
by hand (the KB runs on the real clock).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from dreaming_support import audit, dreaming, dreams_entry, reviewer, slot_at, start_suite
from suite_support import ADMIN_KEY, Suite, wait_until

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

AGENTS = ("ada", "ben", "cal")  # ada and ben share the global vault; cal has the vault "solo"


def vault(suite: Suite, project: str) -> Path:
    return suite.home / "shared" / "kb" / project


def runs(suite: Suite, agent: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, agent) if r.get("kind") == "run"] if (
        suite.home / "agents" / agent / "workspace" / ".dreaming" / "audit.jsonl").exists() else []


def gc_note(run: dict[str, Any]) -> str:
    [note] = [n for n in run["notes"] if n.startswith("Shared vault GC")]
    return str(note)


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dvaultgc")
    due = slot_at((datetime.now(UTC) - timedelta(minutes=1)).replace(second=0, microsecond=0))
    command = reviewer("silent.py")  # never called: a quiet night (no transcripts, nothing over budget)
    agents: list[dict[str, Any]] = [{"id": a, "dreaming": dreaming(command, **due)} for a in AGENTS]
    agents[2]["knowledge"] = {"shared": {"project": "solo"}}
    running = start_suite(tmp, agents, services=("file_api", "watcher", "kb", "http"),
                          files={a: {"MEMORY.md": "# Memory\n\n- A fact.\n"} for a in AGENTS},
                          knowledge={"shared": {"gc": {"staleDays": 1}}})
    try:
        aged = time.time() - 3 * 86_400
        with grpc.insecure_channel(running.address("kb")) as channel:
            kb = kb_pb2_grpc.KnowledgeStub(channel)
            for agent, name, text in [("ada", "tide table", "The tide table hangs in the boathouse."),
                                      ("cal", "lamp oil", "Lamp oil is kept in the cellar.")]:
                made = kb.CreateSharedNote(kb_pb2.CreateSharedNoteRequest(agent_id=agent, name=name, content=text + "\n"),
                                           metadata=(("x-api-key", ADMIN_KEY),), timeout=30)
                assert made.created
        for path in [vault(running, "global") / "notes" / "tide table.md", vault(running, "solo") / "notes" / "lamp oil.md"]:
            os.utime(path, (aged, aged))
        running.start("dreaming")
        wait_until(lambda: all(runs(running, a) for a in AGENTS), 60, "every agent's scheduled run")
        yield running
    finally:
        running.stop_all()


def test_two_agents_of_one_vault_collect_it_once_in_a_night(night: Suite) -> None:
    first, second = sorted((runs(night, a)[0] for a in ("ada", "ben")), key=lambda r: "already ran" in gc_note(r))
    assert (first["trigger"], first["mode"]) == ("schedule", "auto")
    assert gc_note(first) == "Shared vault GC ('global'): retired 1 note(s) idle over 1 days ('tide table')."
    assert gc_note(second).startswith("Shared vault GC ('global'): already ran today (")
    assert f"for agent {first['agent']}): retired 1, restored 0" in gc_note(second)
    for run in (first, second):
        assert run["steps"][-2:] == ["vault-gc", "audit"]
        assert gc_note(run) in dreams_entry(night, run["agent"], run["run"])
    assert sorted(p.name for p in (vault(night, "global") / "notes").iterdir()) == ["stale__tide table.md"]


def test_an_agent_of_another_project_collects_its_own_vault(night: Suite) -> None:
    [run] = runs(night, "cal")
    assert gc_note(run) == "Shared vault GC ('solo'): retired 1 note(s) idle over 1 days ('lamp oil')."
    assert sorted(p.name for p in (vault(night, "solo") / "notes").iterdir()) == ["stale__lamp oil.md"]
