"""One run of the pipeline (nightly.run) with a stand-in KB and reviewer: what a run cut
short during its recall check leaves behind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dreaming_helpers import NOW, agent_with_memory

from gateway.config import AgentConfig
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.model.values import MANUAL, Proposal, ReviewerOutcome, ReviewerReply

MEMORY = "# Memory\n\n- The staging host is named hermes.\n" + "".join(f"- Fact number {n} stays.\n" for n in range(8))
GONE = "- The staging host is named hermes."


class StuckIndex:
    """A KB that never answers a refresh (a frozen process): the recall check waits."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        self.waiting.set()
        await asyncio.Event().wait()

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []


def agent_in(home: Path) -> AgentConfig:
    return agent_with_memory(home, MEMORY)


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_cancelled_during_the_recall_check_restores_and_is_audited(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    index = StuckIndex()

    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        proposals = (Proposal(op="remove", file="MEMORY.md", target=GONE), Proposal(op="add", file="USER.md", content="- Ada."))
        return ReviewerOutcome(ReviewerReply("two ops", proposals), ok=True)

    async def main() -> None:
        deps = nightly.Deps(index=index, review=review, now=lambda: NOW.astimezone(UTC))
        task = asyncio.ensure_future(nightly.run(agent, deps, mode="auto", trigger=MANUAL, run_id="r1"))
        await asyncio.wait_for(index.waiting.wait(), 10)
        assert GONE not in (agent.workspace / "MEMORY.md").read_text()  # written, not yet checked
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)

    asyncio.run(main())
    ws = agent.workspace
    assert (ws / "MEMORY.md").read_text() == MEMORY  # nothing removed goes unchecked
    assert (ws / "USER.md").read_text() == "- Ada.\n"  # an add removes nothing: it stays
    journal = records(ws / ".dreaming" / "journal.jsonl")
    assert [(r["kind"], r["op"]) for r in journal if r["kind"] in ("edit", "restore")] == [
        ("edit", "r1/1"), ("edit", "r1/2"), ("restore", "r1/1")]
    audit = records(ws / ".dreaming" / "audit.jsonl")
    run = audit[0]
    assert (run["kind"], run["run"], run["status"]) == ("run", "r1", "interrupted")
    assert "cancelled during the recall check" in str(run["reason"])
    assert [(r["op"], r["status"]) for r in audit[1:]] == [("r1/1", "restored"), ("r1/2", "applied")]
    assert "cancelled before the recall check finished" in str(audit[1]["reason"])
    assert "run r1 (auto, manual)" in (ws / ".dreaming" / "DREAMS.md").read_text()
    assert "(Run r1: MEMORY.md was restored" in (ws / "memory" / "archive" / "pruned.md").read_text()
    assert datetime.fromisoformat(str(run["finishedAt"]).replace("Z", "+00:00")) == NOW


def test_a_run_cancelled_while_the_reviewer_runs_changes_nothing_and_is_audited(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    asked = asyncio.Event()

    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        asked.set()
        await asyncio.Event().wait()  # a reviewer that is still thinking
        raise AssertionError("unreachable")

    async def main() -> None:
        deps = nightly.Deps(index=StuckIndex(), review=review, now=lambda: NOW.astimezone(UTC))
        task = asyncio.ensure_future(nightly.run(agent, deps, mode="auto", trigger=MANUAL))
        await asyncio.wait_for(asked.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert (agent.workspace / "MEMORY.md").read_text() == MEMORY
    [run] = [r for r in records(agent.workspace / ".dreaming" / "audit.jsonl") if r["kind"] == "run"]
    assert run["status"] == "interrupted" and "nothing was changed" in str(run["reason"])
    assert "interrupted" in (agent.workspace / ".dreaming" / "DREAMS.md").read_text()
