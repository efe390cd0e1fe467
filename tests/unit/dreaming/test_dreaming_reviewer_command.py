"""The reviewer command: ``gateway`` as this installation's command, the shipped stand-in reviewer, and
what a reviewer that cannot start says (docs/concepts/reviewer.md "The reviewer")."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

from gateway_cli.stand_in import reply, topic
from services.dreaming.model.values import ReviewerOutcome
from services.dreaming.review.reviewer import reviewer_environment, run_reviewer
from services.dreaming.review.reviewer_command import resolve_command

STAND_IN = ["gateway", "reviewer", "stand-in"]
SET_STAND_IN = """gateway config set gateway.dreaming.reviewerCommand '["gateway","reviewer","stand-in"]'"""
PROMPT = "Transcripts:\nuser: a note\nREMEMBER: The harbour office opens at 7.\nREMEMBER: Jan prefers email over phone.\n"


def run(command: list[str], prompt: str = PROMPT, env: dict[str, str] | None = None) -> ReviewerOutcome:
    return asyncio.run(run_reviewer(command, prompt, 60.0, env=env))


def test_gateway_first_is_this_installation_whatever_the_path(tmp_path: Path) -> None:
    assert resolve_command(STAND_IN) == [sys.executable, "-m", "gateway_cli.cli", "reviewer", "stand-in"]
    assert resolve_command(["claude", "-p"]) == ["claude", "-p"]
    assert resolve_command(["/opt/gateway", "x"]) == ["/opt/gateway", "x"]  # a path is taken as given
    empty = tmp_path / "bin"  # a PATH with no gateway on it, as under make up
    empty.mkdir()
    assert shutil.which("gateway", path=str(empty)) is None
    out = run(STAND_IN, env=reviewer_environment({"PATH": str(empty)}))
    assert out.ok, out.reason
    assert [p.content for p in out.reply.proposals] == ["- The harbour office opens at 7.", "- Jan prefers email over phone."]
    assert [p.topic for p in out.reply.proposals] == ["the-harbour-office-opens-at-7", "jan-prefers-email-over-phone"]
    assert out.reply.summary.startswith("stand-in reviewer (no model): 2 REMEMBER: lines proposed")


def test_a_missing_claude_says_how_to_install_it_or_set_the_stand_in(tmp_path: Path) -> None:
    out = run(["claude", "-p", "--output-format", "json"], env={"PATH": str(tmp_path)})
    assert not out.ok and "\n" not in out.reason
    assert out.reason == (
        f"cannot start the reviewer 'claude': not found on the reviewer's PATH ({tmp_path}); "
        "install Claude Code (npm install -g @anthropic-ai/claude-code) where that PATH finds it, "
        f"or try dreaming with the stand-in reviewer: {SET_STAND_IN}"
    )


def test_another_missing_command_says_which_key_to_set(tmp_path: Path) -> None:
    out = run(["my-reviewer"], env={"PATH": str(tmp_path)})
    assert not out.ok
    assert "cannot start the reviewer 'my-reviewer': not found on the reviewer's PATH" in out.reason
    assert "gateway config set gateway.dreaming.reviewerCommand" in out.reason and SET_STAND_IN in out.reason
    missing_path = run([str(tmp_path / "nope")])
    assert "No such file or directory" in missing_path.reason
    assert "gateway config get gateway.dreaming.reviewerCommand" in missing_path.reason


def test_the_stand_in_reply_is_one_add_per_remembered_line() -> None:
    lines = "\n".join(f"REMEMBER: fact number {n}" for n in range(12))
    answer = reply(f"REMEMBER:   \nnot REMEMBER: this\n{lines}\n".encode(), "USER.md")
    assert len(answer["proposals"]) == 10  # at most ten
    assert answer["proposals"][0] == {"op": "add", "file": "USER.md", "content": "- fact number 0",
                                      "reason": "a session said to remember it", "topic": "fact-number-0"}
    assert topic("Ça va? ...") == "a-va" and topic("¿?") == ""
    assert "topic" not in reply("REMEMBER: ¿?".encode())["proposals"][0]


def test_gateway_reviewer_stand_in_reads_stdin_and_answers_on_stdout() -> None:
    done = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "reviewer", "stand-in"], input=PROMPT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert [p["content"] for p in json.loads(done.stdout)["proposals"]] == [
        "- The harbour office opens at 7.", "- Jan prefers email over phone."]
