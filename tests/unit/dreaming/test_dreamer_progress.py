"""DreamStatus.running: the step a run of the agent in progress is at, as Dreamer.status tells it
while the run goes on, and nothing once it ended."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dreaming_helpers import NOW, QuietIndex

from gateway.config import AgentConfig, Config, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming import nightly
from services.dreaming.dreamer import Dreamer
from services.dreaming.model.values import Proposal, ReviewerOutcome, ReviewerReply
from services.dreaming.schedule.quiet import Activity
from services.dreaming.schedule.state import StateStore
from services.dreaming.servicer import status_pb

MEMORY = "# Memory\n\n- the ferry leaves at noon\n"


class NoWatcher:
    async def activity(self, agent_id: str) -> Activity:
        raise AssertionError("not called")


class HeldReviewer:
    """A reviewer that answers one add when ``go`` is set, and says when it was asked."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.go = asyncio.Event()

    async def __call__(self, agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        self.asked.set()
        await self.go.wait()
        return ReviewerOutcome(ReviewerReply("one add", (Proposal(op="add", file="MEMORY.md", content="- Mara keeps the keys"),)), ok=True)


def config_in(home: Path) -> Config:
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred", "dreaming": {
        "enabled": True, "maxChangesPerRun": 5, "staleness": {"enabled": False}}}]}, home)
    config.agents[0].workspace.mkdir(parents=True)
    (config.agents[0].workspace / "MEMORY.md").write_text(MEMORY)
    return config


def test_status_names_the_step_of_the_run_in_progress_and_nothing_after(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    agent = config.agents[0]
    reviewer = HeldReviewer()
    deps = nightly.Deps(index=QuietIndex(), review=reviewer, now=lambda: NOW)
    dreamer = Dreamer(lambda: config, StateStore(tmp_path), deps, NoWatcher())

    async def main() -> tuple[str, str, str]:
        assert dreamer.status(agent).running == ""
        run = asyncio.ensure_future(dreamer.run_now(agent, "auto"))
        await asyncio.wait_for(reviewer.asked.wait(), 10)
        during = dreamer.status(agent).running
        in_pb = status_pb(dreamer.status(agent)).running
        reviewer.go.set()
        report = await asyncio.wait_for(run, 10)
        assert report.status == "applied"
        return during, in_pb, dreamer.status(agent).running

    during, in_pb, after = asyncio.run(main())
    assert (during, in_pb, after) == ("reviewer", "reviewer", "")
    assert "- Mara keeps the keys" in (agent.workspace / "MEMORY.md").read_text()


def test_every_step_is_told_in_the_nightly_order(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    reviewer = HeldReviewer()
    reviewer.go.set()
    told: list[str] = []
    deps = nightly.Deps(index=QuietIndex(), review=reviewer, now=lambda: NOW)
    asyncio.run(nightly.run(config.agents[0], deps, mode="auto", trigger="manual", on_step=told.append))
    assert told == ["deterministic-passes", "reviewer", "applier", "audit"]
