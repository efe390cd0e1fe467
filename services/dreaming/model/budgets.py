"""The soft budgets of MEMORY.md and USER.md an agent's run keeps to, and whether it may write
episodic notes: read by the applier, the prompt and the pending proposals alike."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import AgentConfig


@dataclass(frozen=True)
class Budgets:
    """Soft budgets per durable file (0: none) and whether episodic ops may be applied."""

    memory_chars: int
    user_chars: int
    write_routing: bool
    episodic_dir: str = "memory"

    def of(self, file: str) -> int:
        return self.memory_chars if file == "MEMORY.md" else self.user_chars


def over_budget(text: str, budget: int) -> bool:
    return budget > 0 and len(text) > budget


def budgets_of(agent: AgentConfig) -> Budgets:
    """The applier's budgets for ``agent``."""
    m = agent.memory
    return Budgets(m.memory_budget_chars, m.user_budget_chars, m.write_routing, m.episodic_archive_dir)
