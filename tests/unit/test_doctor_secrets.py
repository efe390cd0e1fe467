"""``gateway doctor secrets``' scan (gateway_cli/doctor_cli.py) on a temp home: what it reads and what it passes over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from secret_samples import AWS_KEY, SECRETS

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from gateway_cli import doctor_cli


def agent(home: Path, gateway: dict[str, Any] | None = None, **shared: object) -> AgentConfig:
    raw = {"configVersion": CURRENT_VERSION, "gateway": gateway or {}, "agents": [{"id": "alfred", "knowledge": {"shared": shared}}]}
    config = build(raw, home)
    config.agents[0].workspace.mkdir(parents=True)
    return config.agents[0]


def test_links_are_not_followed_and_other_files_of_the_workspace_are_not_read(tmp_path: Path) -> None:
    a = agent(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text(f"- {AWS_KEY}\n")
    (a.workspace / "memory").mkdir()
    (a.workspace / "memory" / "link.md").symlink_to(outside)
    (a.workspace / "SOUL.md").symlink_to(outside)
    (a.workspace / "notes.txt").write_text(f"- {AWS_KEY}\n")  # not an identity file, not under memory/ or .dreaming/
    (a.workspace / ".dreaming").mkdir()
    (a.workspace / ".dreaming" / "audit.jsonl").write_text('{"kind": "op"}\n' + SECRETS["Slack Token"] + "\n")
    count, found, notes = doctor_cli.findings(a)
    assert (count, [(where, f.says()) for where, f in found], notes) == (1, [(".dreaming/audit.jsonl", "line 2: Slack Token")], [])


def test_a_vault_on_postgres_is_named_not_scanned_and_a_disabled_one_is_not_read(tmp_path: Path) -> None:
    postgres = {"backend": "postgres", "postgres": {"dsn": "postgresql://gw@localhost/gw"}}
    a = agent(tmp_path, {"knowledge": {"shared": postgres}})
    assert doctor_cli.findings(a)[2] == [
        "the shared vault 'global' is on postgres: not scanned here (`gateway vault export` it to a folder to look "
        "through its notes)"]
    off = agent(tmp_path / "off", enabled=False)
    notes = off.knowledge.shared.vault_dir / "notes"
    notes.mkdir(parents=True)
    (notes / "leak.md").write_text(f"- {AWS_KEY}\n")
    assert doctor_cli.findings(off) == (0, [], [])
