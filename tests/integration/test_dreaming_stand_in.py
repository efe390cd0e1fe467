"""Dreaming out of the box: the first dream without Claude Code says how to fix it, ``gateway config
set`` fixes it in a running suite, and the shipped stand-in reviewer dreams end to end (auto, then
propose and accept), as the README's tour runs it, verbatim.

The suite's processes run with PATH=/usr/bin:/bin, where neither ``claude`` nor ``gateway`` is:
``["gateway", "reviewer", "stand-in"]`` must work without PATH, as under ``make up``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dreaming_support import far_slot
from suite_support import Suite, free_ports, make_home, wait_until

from gateway.home import ensure_home

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PATH = "/usr/bin:/bin"
STAND_IN = '["gateway","reviewer","stand-in"]'
CLI_TIMEOUT_S = 120
HARBOUR = '{"type":"user","message":{"role":"user","content":"A note.\\nREMEMBER: The harbour office opens at 7."}}\n'


@pytest.fixture
def bare_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The suite's processes (children of this test) get a PATH with neither claude nor gateway."""
    assert shutil.which("claude", path=SERVICE_PATH) is None and shutil.which("gateway", path=SERVICE_PATH) is None
    monkeypatch.setenv("PATH", SERVICE_PATH)
    yield


def gateway(home: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *words, "--home", str(home)],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def reloads(suite: Suite) -> int:
    """How many config reloads the dreaming process has logged."""
    return sum(1 for line in suite.log_lines("dreaming") if line.get("event") == "config_reloaded")


def memory(home: Path) -> str:
    try:
        return (home / "agents" / "alfred" / "workspace" / "MEMORY.md").read_text()
    except FileNotFoundError:
        return ""


def start(home: Path, http_port: int, ports: dict[str, int]) -> Suite:
    suite = Suite(home, http_port, ports)
    try:
        suite.start("file_api", "watcher", "kb", "dreaming", "http")
    except BaseException:
        suite.stop_all()
        raise
    return suite


def test_the_first_dream_says_how_to_fix_the_reviewer_and_config_set_fixes_it_live(tmp_path: Path, bare_path: None) -> None:
    # dreaming on (the test helpers turn it off), the default reviewer: claude, which is not installed
    home, ports, http_port = make_home(tmp_path, [{"id": "alfred"}], dreaming={"enabled": True, **far_slot()})
    sessions = home / "agents" / "alfred" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "today.jsonl").write_text(HARBOUR)
    suite = start(home, http_port, ports)
    try:
        first = gateway(home, "dream", "alfred")
        assert first.returncode == 0, first.stderr
        assert (f"cannot start the reviewer 'claude': not found on the reviewer's PATH ({SERVICE_PATH}); "
                "install Claude Code (npm install -g @anthropic-ai/claude-code) where that PATH finds it, "
                f"or try dreaming with the stand-in reviewer: gateway config set gateway.dreaming.reviewerCommand '{STAND_IN}'"
                ) in first.stdout, first.stdout
        assert memory(home) == ""

        seen = reloads(suite)
        done = gateway(home, "config", "set", "gateway.dreaming.reviewerCommand", STAND_IN)
        assert done.returncode == 0, done.stderr
        assert (home / "config.json").stat().st_mode & 0o777 == 0o600
        assert json.loads((home / "config.json").read_text())["gateway"]["dreaming"]["reviewerCommand"] == [
            "gateway", "reviewer", "stand-in"]
        wait_until(lambda: reloads(suite) > seen, 30, "the dreaming process to take the new config")

        second = gateway(home, "dream", "alfred")
        assert second.returncode == 0, second.stderr
        assert "reviewer: ok" in second.stdout and "applied" in second.stdout, second.stdout
        assert "- The harbour office opens at 7." in memory(home)
    finally:
        suite.stop_all()


def test_the_stand_in_proposes_and_an_accept_applies(tmp_path: Path, bare_path: None) -> None:
    home, ports, http_port = make_home(tmp_path, [{"id": "alfred"}], dreaming={
        "enabled": True, **far_slot(), "reviewerCommand": ["gateway", "reviewer", "stand-in"]})
    sessions = home / "agents" / "alfred" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "today.jsonl").write_text(HARBOUR)
    suite = start(home, http_port, ports)
    try:
        proposed = gateway(home, "dream", "alfred", "--mode", "propose")
        assert proposed.returncode == 0, proposed.stderr
        assert memory(home) == ""  # propose mode touches no memory file
        ids = re.findall(r"\[(p-[0-9a-f]{12})\]", proposed.stdout)
        assert len(ids) == 1, proposed.stdout
        status = gateway(home, "dream", "status", "alfred")
        assert ids[0] in status.stdout, status.stdout
        accepted = gateway(home, "dream", "accept", "alfred", ids[0])
        assert accepted.returncode == 0, accepted.stderr
        assert "applied" in accepted.stdout, accepted.stdout
        assert "- The harbour office opens at 7." in memory(home)
    finally:
        suite.stop_all()


def readme_dream_tour() -> str:
    """The README tour's shell block that dreams and accepts a proposal (the one holding ``gateway dream accept``)."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    [block] = [b for b in blocks if "gateway dream accept" in b]
    return block


def demo_home(repo: Path) -> tuple[Path, dict[str, int], int]:
    """``var/demo`` of a repo checkout as ``make demo`` seeds it (examples/demo-config.json, mode
    0600), on free ports so that it runs beside other suites."""
    home = repo / "var" / "demo"
    home.mkdir(parents=True)
    raw: dict[str, Any] = json.loads((ROOT / "examples" / "demo-config.json").read_text())
    picked = free_ports(10)
    grpc, http_port, metrics = picked[:4], picked[4], picked[5:]
    ports = dict(zip(("fileApi", "watcher", "kb", "dreaming"), grpc, strict=True))
    raw["gateway"]["grpc"] = {"host": "127.0.0.1", **ports}
    raw["gateway"]["api"]["port"] = http_port
    raw["gateway"]["metrics"] = {"host": "127.0.0.1", **dict(zip(("fileApi", "watcher", "kb", "dreaming", "http"), metrics, strict=True))}
    raw["gateway"]["dreaming"]["enabled"] = True
    raw["gateway"]["dreaming"].update(far_slot())  # no scheduled run while the test runs
    (home / "config.json").write_text(json.dumps(raw, indent=2))
    os.chmod(home / "config.json", 0o600)
    ensure_home(home)
    return home, ports, http_port


def test_the_readme_dream_tour_runs_as_written(tmp_path: Path, bare_path: None) -> None:
    repo = tmp_path / "repo"  # what the tour needs of a checkout: var/demo and .venv/bin/gateway
    home, ports, http_port = demo_home(repo)
    assert json.loads((home / "config.json").read_text())["gateway"]["dreaming"]["reviewerCommand"] == [
        "gateway", "reviewer", "stand-in"]
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "gateway").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gateway_cli.cli "$@"\n')
    (venv_bin / "gateway").chmod(0o755)
    suite = start(home, http_port, ports)
    try:
        tour = subprocess.run(["bash", "-e", "-c", readme_dream_tour()], cwd=repo, capture_output=True, text=True,
                              timeout=600, env={"PATH": SERVICE_PATH, "HOME": str(tmp_path), "LANG": "C.UTF-8"})
        assert tour.returncode == 0, (tour.stdout, tour.stderr)
        out = tour.stdout
        assert out.startswith('[\n  "gateway",\n  "reviewer",\n  "stand-in"\n]\n'), out
        assert "(auto, manual): applied" in out and "(propose, manual)" in out, out
        assert "p-410fe80f4270" in out
        assert memory(home).count("- The harbour office opens at 7.") == 1
        assert "- Jan prefers email over phone." in memory(home)
        assert out.rstrip().endswith("- Jan prefers email over phone."), out
    finally:
        suite.stop_all()
