"""``gateway init`` writes a home's first config once; ``gateway serve`` never writes one."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from suite_support import env_without_home

pytestmark = pytest.mark.integration

HOME_FILES = ("config.json", ".internal-token", "admin-key.txt")


def gateway(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *args], capture_output=True, text=True, timeout=60,
                          env=env if env is not None else env_without_home())


def snapshot(home: Path) -> dict[str, tuple[bytes, int, int]]:
    """name → (bytes, mode, mtime in ns) of every file and folder under ``home``."""
    out = {}
    for path in sorted(home.rglob("*")):
        stat = path.stat()
        out[str(path.relative_to(home))] = (path.read_bytes() if path.is_file() else b"", stat.st_mode, stat.st_mtime_ns)
    return out


def test_init_writes_the_first_config_once_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    first = gateway("init", env={**env_without_home(), "GATEWAY_HOME": str(home)})  # the variable names the home
    assert first.returncode == 0, first.stderr
    header, key = first.stdout.splitlines()
    assert header.startswith(f"gateway: initialised {home}. The admin key, shown once")
    assert f"gateway keys confirm --home {home}" in header
    assert key.startswith("gw_") and first.stderr == ""

    raw = (home / "config.json").read_text()
    assert key not in raw
    config = json.loads(raw)
    assert [a["id"] for a in config["agents"]] == ["alfred"]
    [entry] = config["gateway"]["api"]["keys"]
    assert entry["keySha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert entry["agents"] == "*" and entry["write"] is True
    for name in HOME_FILES:
        assert (home / name).stat().st_mode & 0o777 == 0o600, name
    assert (home / "admin-key.txt").read_text().splitlines()[1] == key
    assert (home / "agents" / "alfred" / "workspace").is_dir()

    before = snapshot(home)
    second = gateway("init", "--home", str(home))
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"gateway: {home} is already initialised (config.json and .internal-token exist); nothing was changed\n"
    assert key not in second.stdout + second.stderr
    assert snapshot(home) == before  # byte-identical files, same modes and mtimes

    assert gateway("config", "check", "--home", str(home)).returncode == 0


def test_init_on_an_invalid_config_fails_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "broken"
    home.mkdir()
    (home / "config.json").write_text('{"configVersion": "1.0.26", "gateway": {"bogus": 1}, "agents": []}\n')
    before = snapshot(home)
    result = gateway("init", "--home", str(home))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"gateway: init: {home / 'config.json'} exists and is invalid: ")
    assert "bogus" in result.stderr and "nothing was written" in result.stderr
    assert snapshot(home) == before and not (home / ".internal-token").exists()


def test_init_on_a_valid_config_writes_only_the_missing_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert gateway("init", "--home", str(home)).returncode == 0
    (home / ".internal-token").unlink()
    config = (home / "config.json").read_bytes()
    result = gateway("init", "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"gateway: {home} already has a valid config.json; wrote the missing {home / '.internal-token'}\n"
    assert (home / "config.json").read_bytes() == config
    assert (home / ".internal-token").stat().st_mode & 0o777 == 0o600


def test_serve_on_a_home_that_was_not_initialised_refuses_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    for name in ("file_api", "http"):
        result = gateway("serve", name, "--home", str(home))
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr == (
            f"gateway: no config.json in {home} ({home / 'config.json'} not found); "
            f"run `gateway init --home {home}` first (compose: the init service does it)\n"
        )
    assert not home.exists()  # not even the folder: no config, no key in any log

    assert gateway("init", "--home", str(home)).returncode == 0
    os.unlink(home / ".internal-token")
    before = snapshot(home)
    result = gateway("serve", "kb", "--home", str(home))
    assert result.returncode == 2
    assert result.stderr.startswith(f"gateway: no internal token in {home} ({home / '.internal-token'} not found); run `gateway init")
    assert snapshot(home) == before
