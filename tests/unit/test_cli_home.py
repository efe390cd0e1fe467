"""Where the ``gateway`` command looks for its home, and what it says when there is no config there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.home import ensure_home
from gateway_cli.cli import main

ROOT = Path(__file__).resolve().parents[2]


def not_found_line(home: Path) -> str:
    return f"gateway: no config.json in {home} (not found); pass --home DIR or set GATEWAY_HOME (make up uses ./var/gateway)"


def test_the_default_home_without_a_config_is_not_found_not_invalid(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_HOME"}
    env["HOME"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "gateway_cli.cli", "compose", "alfred"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [not_found_line(tmp_path / ".claude-gateway")]
    assert "invalid" not in result.stderr
    assert not (tmp_path / ".claude-gateway").exists()  # looking creates nothing


@pytest.mark.parametrize(
    "argv",
    [["compose", "alfred"], ["config", "check"], ["config", "migrate"], ["mcp", "--agent", "alfred"]],
    ids=" ".join,
)
def test_every_command_that_reads_a_config_says_not_found(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "nowhere"
    assert main([*argv, "--home", str(home)]) == 2
    assert capsys.readouterr().err.splitlines() == [not_found_line(home)]


def test_an_invalid_config_is_still_called_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text('{"agents": [{"id": "../x"}]}')
    assert main(["compose", "alfred", "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"gateway: config.json in {tmp_path} is invalid:"
    assert err[1].startswith("  agents[0].id:")


def guide_block(containing: str) -> str:
    """The fenced ``sh`` block of docs/getting-started.md that contains ``containing``."""
    guide = ROOT / "docs" / "getting-started.md"
    blocks = re.findall(r"```sh\n(.*?)```", guide.read_text(encoding="utf-8"), flags=re.S)
    [block] = [b for b in blocks if containing in b]
    return block


def test_the_guide_commands_after_make_up_work_as_written(tmp_path: Path) -> None:
    """Run the getting-started guide's block verbatim from a copy of the repo root where ``make up`` has made ./var/gateway."""
    gateway_script = Path(sys.executable).parent / "gateway"
    if not gateway_script.exists():
        pytest.skip(f"no gateway console script beside {sys.executable} (not installed with pip install -e)")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    ensure_home(tmp_path / "var" / "gateway")  # what `make up` does first
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_HOME"}
    script = "set -eu\n" + guide_block("export GATEWAY_HOME=$PWD/var/gateway")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert "--- MEMORY RULE ---" in result.stdout  # gateway compose alfred printed alfred's CLAUDE.md
