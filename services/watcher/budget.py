"""Soft memory budgets and the over-budget banners (docs/concepts/budgets.md "Budgets and banners").

MEMORY.md and USER.md have a soft budget in characters (Unicode code points,
``len(str)``); 0 disables it. A file strictly over its budget gets a loud,
actionable banner prepended to its CLAUDE.md section; a file at or under it
composes cleanly. The banner says how big the file is, what the budget is, by
how much it is over and what to do. Severity ``warn`` starts with ⚠️,
``error`` with 🛑 and stronger wording. Other files never get a banner.

The agent reads CLAUDE.md only at spawn, so the banner says the fix applies
on its next spawn and that no restart is needed (frozen-at-spawn).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import MemorySettings

MEMORY_FILES = ("MEMORY.md", "USER.md")


def budget_for(name: str, memory: MemorySettings) -> int | None:
    """The soft budget of ``name`` in chars, or None (not a memory file, or disabled by 0)."""
    if name == "MEMORY.md":
        budget = memory.memory_budget_chars
    elif name == "USER.md":
        budget = memory.user_budget_chars
    else:
        return None
    return budget if budget > 0 else None


def is_over(chars: int | None, budget: int | None) -> bool:
    """True when ``chars`` is strictly above an enabled ``budget`` (exactly at it is fine)."""
    return budget is not None and chars is not None and chars > budget


@dataclass(frozen=True)
class Overage:
    """One memory file over its budget, as the banners describe it.

    ``at_least`` means ``chars`` is a lower bound (the file was too large to
    read whole).
    """

    name: str
    chars: int
    budget: int
    level: str  # "warn" or "error"
    at_least: bool = False
    episodic_dir: str | None = None  # set when write routing is on

    @property
    def over_by(self) -> int:
        return self.chars - self.budget

    @property
    def size(self) -> str:
        prefix = "at least " if self.at_least else ""
        return f"{prefix}{self.chars:,} chars"

    @property
    def loud(self) -> str:
        """First words of every banner: emoji and an upper-case alarm."""
        label = self.name.removesuffix(".md")
        if self.level == "error":
            return f"🛑 {label} OVER BUDGET — consolidate before anything else."
        return f"⚠️ {label} OVER BUDGET."

    @property
    def facts(self) -> str:
        over = f"{'at least ' if self.at_least else ''}{self.over_by:,} char{'' if self.over_by == 1 else 's'}"
        return f"{self.name} is {self.size}; its budget is {self.budget:,} chars ({over} over)."

    @property
    def steps(self) -> str:
        """What consolidating means, as a list of actions."""
        steps = "merge duplicate entries, drop stale or superseded ones, shorten what stays"
        if self.episodic_dir is not None:
            steps += f", and move episodic task-log to `{self.episodic_dir}/<topic>.md` (searchable, not in the prompt)"
        return steps

    @property
    def how(self) -> str:
        if self.level == "error":
            return f"Before any other work, consolidate {self.name}: {self.steps}."
        return f"Consolidate {self.name} by editing it: {self.steps}."


_APPLIES = "The change applies on your next spawn; no restart is needed."


def banner(over: Overage) -> str:
    """The over-budget banner prepended to the file's section (several lines, no trailing newline)."""
    if over.level == "error":
        limit = f"Get it to {over.budget:,} chars or less. {_APPLIES}"
        return "\n".join((f"{over.loud} {over.facts}", over.how, limit))
    return "\n".join((f"{over.loud} {over.facts}", f"{over.how} {_APPLIES}"))


def shrink_banner(over: Overage) -> str:
    """The loud lines above a core-shrink index (no trailing newline)."""
    return "\n".join(
        (
            f"{over.loud} {over.facts} Its full text is left out of this prompt; "
            "below is an index of its sections.",
            f"{over.how} {_APPLIES}",
        )
    )
