"""config.json can hold plain keys: every write of it, and every copy, is mode 0600."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gateway_cli.cli import main


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_config_migrate_leaves_config_and_backup_at_0600_even_from_0644(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"configVersion": "1.0.19", "gateway": {"api": {"keys": [{"key": "plain-key-123", "agents": "*"}]}}}))
    os.chmod(config, 0o644)
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 0
    [backup] = tmp_path.glob("config.json.bak-*")
    assert mode_of(config) == 0o600
    assert mode_of(backup) == 0o600
    assert "plain-key-123" in backup.read_text()  # the backup is the old file, byte for byte


def test_two_migrations_in_one_second_keep_both_backups(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"configVersion": "1.0.19"}))
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 0
    config.write_text(json.dumps({"configVersion": "1.0.21"}))
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("config.json.bak-*"))) == 2
