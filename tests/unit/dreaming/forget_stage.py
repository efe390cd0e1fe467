"""A workspace the real dreaming runs have written, holding one planted fact everywhere dreaming
keeps text, for the forget tests (imported by name: the test dir is on sys.path).

Four manual runs of a Dreamer with a scripted reviewer: run 1 edits the line right after the fact
(so the journal's 48-character context holds the fact's tail), run 2 removes the fact from
MEMORY.md (pruned.md, a backup, the journal's removed text, DREAMS.md, audit.jsonl), adds an
episodic note quoting it and a long line that DREAMS.md shortens mid-fact, run 3 proposes it
again (a pending proposal in audit.jsonl), and run 4's reviewer fails with the fact in its reason
(the dreaming state's last run). A session transcript quotes it too.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from dreaming_helpers import NOW, record, write_session
from dreaming_stage import Stage, dream, dreamer_on

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from gateway.forgetting import Target
from services.dreaming.dreamer import Dreamer
from services.dreaming.model.values import Proposal

FACT = "Dana Whitlock's locker code is 7741-Ü"
BESIDE = "The loading dock opens at 6."
FACT_LINE = f"- {FACT} (facilities, March)"  # the next line's edit keeps only the fact's tail as context
OFFICE = "- The office opens at 7."
LONG = "- A long line about the building, its floors, its lifts and its lobby, until: " + FACT  # DREAMS.md cuts it mid-fact
MEMORY = ("# Memory\n\n## People\n\n"
          f"{FACT_LINE}\n{OFFICE}\n- {BESIDE}\n" + "".join(f"- Filler fact number {n} about the building stays.\n" for n in range(14)))
TARGET = Target.parse(FACT, None)


@dataclass
class Planted:
    """The agent, its dreamer and stage, the runs' ids (oldest first) and the folders a forget reads."""

    agent: AgentConfig
    dreamer: Dreamer
    stage: Stage
    runs: list[str]

    @property
    def workspace(self) -> Path:
        return self.agent.workspace

    @property
    def state_dir(self) -> Path:
        return self.agent.agent_dir

    @property
    def transcripts(self) -> Path:
        return self.agent.transcripts_dir


def plant(home: Path) -> Planted:
    """The workspace of the module docstring under ``home``."""
    entry = {"id": "alfred", "dreaming": {"staleness": {"enabled": False}},
             "knowledge": {"archive": {"enabled": False}, "shared": {"enabled": False}}}
    config = build({"configVersion": CURRENT_VERSION, "gateway": {"memory": {"writeRouting": True}}, "agents": [entry]}, home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text(MEMORY)
    stage = Stage()
    dreamer = dreamer_on(config, home, stage)
    dream(dreamer, agent, stage, Proposal(op="replace", file="MEMORY.md", target=OFFICE, content="- The office opens at 8.",
                                          reason="moved"))
    stage.now = NOW + timedelta(days=1)
    dream(dreamer, agent, stage,
          Proposal(op="remove", file="MEMORY.md", target=FACT_LINE, reason=f"stale: {FACT}"),
          Proposal(op="add", file="MEMORY.md", content=LONG, reason="learned"),
          Proposal(op="add", file="MEMORY.md", tier="episodic", topic="people", content=f"Met about {FACT} today.",
                   reason="episode"))
    stage.now = NOW + timedelta(days=2)
    dream(dreamer, agent, stage, Proposal(op="add", file="MEMORY.md", content=f"- Again: {FACT}", reason="again"),
          mode="propose")
    stage.now = NOW + timedelta(days=3)
    dream(dreamer, agent, stage, failure=f"the reviewer said: {FACT}")
    write_session(agent.transcripts_dir, "s1.jsonl", [record("user", f"remember {FACT}"), record("user", BESIDE)])
    runs = list(dict.fromkeys(r["run"] for r in map(json.loads, (agent.workspace / ".dreaming/journal.jsonl").read_text().splitlines())))
    return Planted(agent, dreamer, stage, runs)


def copy_of(planted: Planted, home: Path) -> Planted:
    """The same planted home copied to ``home`` (a cheap fresh one per crash case)."""
    shutil.copytree(planted.workspace.parents[2], home, symlinks=True)
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, home)
    return Planted(config.agents[0], planted.dreamer, planted.stage, planted.runs)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file's bytes under ``root``, by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def runs_of(text: str, size: int = 8) -> set[str]:
    return {text[i : i + size] for i in range(len(text) - size + 1)}


def leftovers(root: Path, text: str = FACT) -> list[str]:
    """``grep -a -r -l`` for any 8-character run of ``text`` under ``root``, as UTF-8 and as JSON
    escapes it (``\\u00dc``): the files (relative) that hold one."""
    forms = {form for run in runs_of(text) for form in (run.encode(), json.dumps(run)[1:-1].encode())}
    return [rel for rel, data in snapshot(root).items() if any(form in data for form in forms)]
