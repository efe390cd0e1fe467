"""A Dreamer on a temp home whose clock, reviewer answers and KB promotion replies the test sets
(imported by name: the test dir is on sys.path): for tests of runs and the status they leave."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreaming_helpers import NOW

from gateway.config import AgentConfig, Config, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.dreamer import Dreamer
from services.dreaming.history.digest import AuditDigests
from services.dreaming.model.values import Proposal, ReviewerOutcome, ReviewerReply
from services.dreaming.schedule.quiet import Activity
from services.dreaming.schedule.state import StateStore
from services.dreaming.vault.promotion import PromotionReply

MEMORY = "# Memory\n\n- The office opens at 7.\n"


@dataclass
class Stage:
    """The dreaming clock, the reviewer's next answer and the KB's promotion replies, all set by the test."""

    now: datetime = NOW
    outcome: ReviewerOutcome = field(default_factory=lambda: ReviewerOutcome(ReviewerReply(), ok=True))
    replies: list[PromotionReply] = field(default_factory=list)

    async def review(self, agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        return self.outcome

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        return None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str = "") -> PromotionReply:
        return self.replies.pop(0)


class NoWatcher:
    async def activity(self, agent_id: str) -> Activity:
        raise AssertionError("not called")


def config_in(home: Path, **dreaming: Any) -> Config:
    """Agent alfred under ``home`` with these dreaming settings (the staleness GC off)."""
    entry = {"id": "alfred", "dreaming": {"staleness": {"enabled": False}, **dreaming}}
    return build({"configVersion": CURRENT_VERSION, "agents": [entry]}, home)


def dreamer_on(config: Config, home: Path, stage: Stage, digests: AuditDigests | None = None) -> Dreamer:
    deps = nightly.Deps(index=stage, review=stage.review, now=lambda: stage.now, promoter=stage)
    return Dreamer(lambda: config, StateStore(home), deps, NoWatcher(), digests)


def dreamer_in(home: Path, **dreaming: Any) -> tuple[Dreamer, AgentConfig, Stage]:
    """A Dreamer of alfred (``config_in``) whose MEMORY.md is ``MEMORY``, and its stage."""
    config = config_in(home, **dreaming)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text(MEMORY)
    stage = Stage()
    return dreamer_on(config, home, stage), agent, stage


def dream(dreamer: Dreamer, agent: AgentConfig, stage: Stage, *proposals: Proposal, mode: str = "auto",
          failure: str = "") -> None:
    reply = ReviewerReply("scripted", tuple(proposals))
    stage.outcome = ReviewerOutcome(reply, ok=not failure, reason=failure)
    asyncio.run(dreamer.run_now(agent, mode))
