"""gateway.knowledge.shared.reflection (docs/concepts/vault.md "Schedule and commands"): its defaults, the
weekday by name, the mode from knowledge.shared.mode when unset, what the schema refuses, and each vault's
settings combined from its agents' (the most cautious wins, the first agent gives the slot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import VaultReflectionSettings, build, validate
from gateway.config_migrations import CURRENT_VERSION
from gateway.errors import ConfigError
from services.dreaming.reflect.vaults import vaults


def config(tmp_path: Path, shared: dict[str, Any] | None = None, agents: list[dict[str, Any]] | None = None) -> Any:
    raw = {"configVersion": CURRENT_VERSION, "gateway": {"knowledge": {"shared": shared or {}}},
           "agents": agents if agents is not None else [{"id": "alfred"}]}
    return build(raw, tmp_path)


def test_the_defaults_are_weekly_on_sunday_at_four_utc_auto_twenty_clusters(tmp_path: Path) -> None:
    r = config(tmp_path).knowledge.shared.reflection
    assert r == VaultReflectionSettings(enabled=True, weekday=6, hour=4, minute=0, timezone="UTC",
                                        max_clusters_per_run=20, mode="auto", max_drop_share=0.5)


def test_the_weekday_is_a_name_and_the_mode_follows_the_shared_mode_unless_set(tmp_path: Path) -> None:
    r = config(tmp_path, {"mode": "propose", "reflection": {"weekday": "wednesday", "hour": 22, "minute": 15,
                                                            "timezone": "Europe/Berlin", "maxDropShare": 0.25}}).knowledge.shared.reflection
    assert (r.weekday, r.hour, r.minute, r.timezone, r.mode, r.max_drop_share) == (2, 22, 15, "Europe/Berlin", "propose", 0.25)
    assert config(tmp_path, {"mode": "propose", "reflection": {"mode": "auto"}}).knowledge.shared.reflection.mode == "auto"


@pytest.mark.parametrize(("block", "words"), [
    ({"weekday": "sun"}, "weekday"),
    ({"weekday": 6}, "weekday"),
    ({"hour": 24}, "hour"),
    ({"minute": -1}, "minute"),
    ({"maxClustersPerRun": 0}, "maxClustersPerRun"),
    ({"maxDropShare": 1.5}, "maxDropShare"),
    ({"mode": "sometimes"}, "mode"),
    ({"timezone": ""}, "timezone"),
    ({"every": "week"}, "every"),
])
def test_the_schema_refuses_a_bad_value_naming_the_key(tmp_path: Path, block: dict[str, Any], words: str) -> None:
    raw = {"configVersion": CURRENT_VERSION, "gateway": {"knowledge": {"shared": {"reflection": block}}}, "agents": []}
    problems = validate(raw)
    assert problems and any("reflection" in p and words in p for p in problems), problems
    with pytest.raises(ConfigError):
        build(raw, tmp_path)


def test_a_vault_combines_its_agents_settings_the_most_cautious_winning(tmp_path: Path) -> None:
    agents = [
        {"id": "alfred", "knowledge": {"shared": {"project": "team", "reflection": {"weekday": "friday", "maxClustersPerRun": 30}}}},
        {"id": "bob", "knowledge": {"shared": {"project": "team", "reflection": {"mode": "propose", "maxDropShare": 0.2,
                                                                                  "maxClustersPerRun": 5, "weekday": "monday"}}}},
        {"id": "carol", "knowledge": {"shared": {"project": "solo", "reflection": {"enabled": False}}}},
        {"id": "dave", "knowledge": {"shared": {"project": "team", "enabled": False, "reflection": {"enabled": False}}}},
        {"id": "erin", "knowledge": {"shared": {"project": "solo"}}, "dreaming": {"reviewerCommand": ["x"]}},
    ]
    found = vaults(config(tmp_path, agents=agents))
    assert sorted(found) == ["solo", "team"]
    team = found["team"]
    assert team.agents == ("alfred", "bob")  # dave's shared KB is off: not of the vault
    assert (team.settings.weekday, team.settings.mode, team.settings.max_clusters_per_run, team.settings.max_drop_share) == (4, "propose", 5, 0.2)
    assert team.settings.enabled
    solo = found["solo"]
    assert not solo.settings.enabled and solo.first == "carol"
    assert solo.reviewer_command == ("claude", "-p", "--output-format", "json")  # the first agent's
