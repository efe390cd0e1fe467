"""The vaults to reflect on and each one's settings (docs/concepts/vault.md "Schedule and commands").

A vault is a project of the agents whose shared KB is on. Its reflection is one job, whichever
agents share it, so where their settings differ the most cautious one wins: it is scheduled only
when every agent leaves ``enabled`` on; ``propose`` when any agent says propose; the smallest
``maxClustersPerRun`` and ``maxDropShare``. The slot (weekday, hour, minute, timezone), the
reviewer command and its timeout and the stagger window are the vault's first agent's, in the
order of config.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gateway.config import AgentConfig, Config, VaultReflectionSettings
from services.dreaming.model.values import PROPOSE

PROJECT = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # the config schema's rule for knowledge.shared.project


@dataclass(frozen=True)
class Vault:
    project: str
    agents: tuple[str, ...]  # the agents sharing it, in config order
    settings: VaultReflectionSettings  # combined (module docstring)
    reviewer_command: tuple[str, ...]
    reviewer_timeout_seconds: int
    stagger_window_minutes: int

    @property
    def first(self) -> str:
        return self.agents[0]


def is_project(text: str) -> bool:
    return PROJECT.fullmatch(text) is not None and text not in (".", "..")


def combine(settings: list[VaultReflectionSettings]) -> VaultReflectionSettings:
    """The most cautious of the agents' settings (module docstring); the first gives the slot."""
    first = settings[0]
    return replace(
        first,
        enabled=all(s.enabled for s in settings),
        mode=PROPOSE if any(s.mode == PROPOSE for s in settings) else first.mode,
        max_clusters_per_run=min(s.max_clusters_per_run for s in settings),
        max_drop_share=min(s.max_drop_share for s in settings),
    )


def vaults(config: Config) -> dict[str, Vault]:
    """Every vault of ``config`` by project: the projects of the agents with the shared KB on."""
    members: dict[str, list[AgentConfig]] = {}
    for agent in config.agents:
        shared = agent.knowledge.shared
        if shared.enabled:
            members.setdefault(shared.project, []).append(agent)
    out = {}
    for project, agents in members.items():
        first = agents[0]
        out[project] = Vault(
            project=project, agents=tuple(a.id for a in agents),
            settings=combine([a.knowledge.shared.reflection for a in agents]),
            reviewer_command=first.dreaming.reviewer_command,
            reviewer_timeout_seconds=first.dreaming.reviewer_timeout_seconds,
            stagger_window_minutes=first.dreaming.stagger_window_minutes,
        )
    return out
