"""Mistakes ``gateway config check`` reports that start-up lets through.

Start-up accepts a key scoped to an agent that is not configured (it gets 403
for that agent at runtime, which lets an operator provision a key before its
agent), and an ``overBudget`` value that is neither ``warn`` nor ``error``
(it falls back to warn). Both are almost always typos, so ``config
check`` names them: the first as an error, the second as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.config import OVER_BUDGET_LEVELS

Raw = dict[str, Any]


@dataclass
class Lint:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> Raw:
    return value if isinstance(value, dict) else {}


def agent_ids(raw: Raw) -> list[str]:
    """The ids of the configured agents, in file order."""
    return [a["id"] for a in _list(raw.get("agents")) if isinstance(a, dict) and isinstance(a.get("id"), str)]


def unknown_agent_line(agent_id: str) -> str:
    """What to say about an agent id that is not configured, and how to add it."""
    return f"agent {agent_id!r} is not configured (add it with: gateway agents add {agent_id})"


def _over_budget(where: str, memory: Raw) -> str | None:
    level = memory.get("overBudget")
    if level is None or level in OVER_BUDGET_LEVELS:
        return None
    return f"{where}.overBudget: {level!r} is neither 'warn' nor 'error'; it acts as 'warn'"


def lint(raw: Raw) -> Lint:
    """Problems with a (migrated) config that start-up tolerates; never raises on a malformed one."""
    out = Lint()
    known = set(agent_ids(raw))
    gateway = _dict(raw.get("gateway"))
    for i, key in enumerate(_list(_dict(gateway.get("api")).get("keys"))):
        scope = _dict(key).get("agents")
        for agent_id in _list(scope):
            if isinstance(agent_id, str) and agent_id not in known:
                out.errors.append(f"gateway.api.keys[{i}].agents: {unknown_agent_line(agent_id)}")
    found = _over_budget("gateway.memory", _dict(gateway.get("memory")))
    if found:
        out.warnings.append(found)
    for i, agent in enumerate(_list(raw.get("agents"))):
        found = _over_budget(f"agents[{i}].memory", _dict(_dict(agent).get("memory")))
        if found:
            out.warnings.append(found)
    return out
