"""Each agent's identity-file sizes against their budgets, for the console's list (ListAgents).

The figures are the composer's own (``compose``: MEMORY.md and USER.md against their soft
budgets, CLAUDE.md against its total cap), so the list says what the agent's next spawn gets.
A refresh of many agents must stay cheap: an agent is composed again only when one of its
identity files or its settings changed since the last look (a ``stat`` of each file tells).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.config import AgentConfig
from services.watcher.budget import MEMORY_FILES
from services.watcher.compose import DEFAULT_LIMITS, IDENTITY_FILES, OUTPUT_NAME, Limits, compose

Signature = tuple[object, ...]


@dataclass(frozen=True)
class BudgetLine:
    """One file's size against its budget; ``chars`` None when the file is missing or unusable."""

    name: str
    chars: int | None
    budget: int | None
    over_budget: bool
    truncated: bool
    problem: str | None


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def signature(agent: AgentConfig) -> Signature:
    """What the budget lines of ``agent`` depend on: its settings and each identity file's stat."""
    files = tuple(_stat(os.path.join(agent.workspace, name)) for name in IDENTITY_FILES)
    return agent.workspace, agent.memory, agent.knowledge.archive.enabled, files


def budget_lines(agent: AgentConfig, limits: Limits = DEFAULT_LIMITS) -> tuple[BudgetLine, ...]:
    """MEMORY.md and USER.md as composed, then the CLAUDE.md total against ``limits.total_chars``."""
    result = compose(agent.workspace, agent.memory, agent.knowledge.archive.enabled, limits=limits)
    lines = [
        BudgetLine(f.name, f.chars, f.budget, f.over_budget, f.truncated, f.problem)
        for name in MEMORY_FILES
        for f in (result.report(name),)
    ]
    total = BudgetLine(OUTPUT_NAME, len(result.text), limits.total_chars, result.total_truncated, result.total_truncated, None)
    return (*lines, total)


class BudgetCache:
    """Budget lines by agent, composed again only when ``signature`` changed."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self._limits = limits
        self._seen: dict[str, tuple[Signature, tuple[BudgetLine, ...]]] = {}

    def lines(self, agents: Iterable[AgentConfig]) -> dict[str, tuple[BudgetLine, ...]]:
        """The budget lines of each of ``agents`` by id (blocking: run it off the event loop).
        What was kept of agents not in ``agents`` is dropped."""
        kept: dict[str, tuple[Signature, tuple[BudgetLine, ...]]] = {}
        for agent in agents:
            sig = signature(agent)
            seen = self._seen.get(agent.id)
            kept[agent.id] = seen if seen is not None and seen[0] == sig else (sig, budget_lines(agent, self._limits))
        self._seen = kept
        return {agent_id: lines for agent_id, (_, lines) in kept.items()}
