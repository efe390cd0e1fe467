"""Step 5 of a run: the reviewer asked about the agent's memory files and transcripts.

The prompt shows MEMORY.md and USER.md as they stand after the deterministic passes (each read
again, bounded to ``PROMPT_FILE_CHARS``), with their budgets, and the transcripts the run gathered.
A scheduled run with no transcripts in its lookback window and no file over budget has nothing to
review: the reviewer is not called (``quiet_night``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping

from gateway.config import AgentConfig
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import MEMORY_FILES, ReviewerOutcome
from services.dreaming.review.prompt import MemoryFile, build_prompt
from services.dreaming.review.transcripts import Gathered, read_bounded

PROMPT_FILE_CHARS = 60_000  # of MEMORY.md / USER.md shown to the reviewer

Review = Callable[[AgentConfig, str], Awaitable[ReviewerOutcome]]


def quiet_night(agent: AgentConfig, gathered: Gathered, over: Collection[str]) -> str:
    """Why a scheduled run does not call the reviewer ("" when it does)."""
    if gathered.sessions or over:
        return ""
    days = agent.dreaming.lookback_days
    return f"no session transcripts in the last {days} days and nothing over budget; the reviewer was not called"


async def ask(agent: AgentConfig, review: Review, texts: Mapping[str, str], over: Collection[str], budgets: Budgets,
              gathered: Gathered) -> ReviewerOutcome:
    """The reviewer's answer for ``agent`` (``texts``: the memory files now, ``over``: those over
    budget). Never raises for the reviewer's trouble (``review`` answers with a failed outcome)."""
    memory, user = (
        MemoryFile(name, read_bounded(agent.workspace / name, PROMPT_FILE_CHARS), len(texts[name]), budgets.of(name), name in over)
        for name in MEMORY_FILES
    )
    prompt = build_prompt(
        agent_id=agent.id, memory=memory, user=user, write_routing=budgets.write_routing,
        episodic_dir=budgets.episodic_dir, max_changes=agent.dreaming.max_changes_per_run, transcripts=gathered,
    )
    return await review(agent, prompt)
