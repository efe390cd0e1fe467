"""Dreamer.revert's answers for what it cannot revert: unknown runs and ops are NotFound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path

import pytest
from dreaming_helpers import NOW

from gateway.config import AgentConfig, Config, build
from gateway.config_migrations import CURRENT_VERSION
from gateway.errors import NotFound
from services.dreaming import nightly
from services.dreaming.apply.applier import plan
from services.dreaming.apply.commit import commit
from services.dreaming.apply.recall import Hit
from services.dreaming.dreamer import Dreamer
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import Proposal, ReviewerOutcome, ReviewerReply
from services.dreaming.schedule.quiet import Activity
from services.dreaming.schedule.state import StateStore

MEMORY = "# Memory\n\n" + "".join(f"- Fact number {n} stays.\n" for n in range(8))


class NoKb:
    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        raise AssertionError("not called")

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        raise AssertionError("not called")


class NoWatcher:
    async def activity(self, agent_id: str) -> Activity:
        raise AssertionError("not called")


async def no_review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
    return ReviewerOutcome(ReviewerReply(), ok=True)


def dreamer_with_one_run(home: Path) -> tuple[Dreamer, Config]:
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, home)
    ws = config.agents[0].workspace
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    add = Proposal(op="add", file="MEMORY.md", content="- A new fact.", reason="learned")
    commit(ws, plan({"MEMORY.md": MEMORY, "USER.md": ""}, [("r1/1", add)], Budgets(0, 0, False)), "r1", "2026-12-01T03:00:00Z")
    deps = nightly.Deps(index=NoKb(), review=no_review, now=lambda: NOW.astimezone(UTC))
    return Dreamer(lambda: config, StateStore(home), deps, NoWatcher()), config


@pytest.mark.parametrize(("run_id", "op_id", "named"), [("r0", None, "'r0'"), ("r1", "r1/9", "r1/9"), ("r1", "9", "r1/9")])
def test_an_unknown_run_or_op_is_not_found_and_nothing_changes(tmp_path: Path, run_id: str, op_id: str | None, named: str) -> None:
    dreamer, config = dreamer_with_one_run(tmp_path)
    agent = config.agents[0]
    before = (agent.workspace / "MEMORY.md").read_text()
    with pytest.raises(NotFound) as info:
        asyncio.run(dreamer.revert(agent, run_id, op_id))
    assert named in info.value.message
    assert (agent.workspace / "MEMORY.md").read_text() == before


def test_a_known_op_is_reverted(tmp_path: Path) -> None:
    dreamer, config = dreamer_with_one_run(tmp_path)
    agent = config.agents[0]
    result = asyncio.run(dreamer.revert(agent, "r1", "1"))
    assert result.reverted == ["r1/1"] and (agent.workspace / "MEMORY.md").read_text() == MEMORY
