"""Running the reviewer: every outcome with the scripted reviewers of tests/reviewers/."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import NOW, REVIEWERS, record, write_session

from services.dreaming.model.values import ReviewerOutcome
from services.dreaming.review import reviewer as reviewer_module
from services.dreaming.review.prompt import MemoryFile, build_prompt
from services.dreaming.review.reviewer import reviewer_environment, run_reviewer
from services.dreaming.review.transcripts import gather

REPLY = {"summary": "one fact", "proposals": [
    {"op": "add", "file": "MEMORY.md", "content": "- Bruce moved to Lisbon.", "reason": "session 2"},
]}


def script(name: str, *args: str) -> list[str]:
    return [sys.executable, str(REVIEWERS / name), *args]


def run(command: list[str], prompt: str = "the prompt", timeout: float = 30.0, **kwargs: object) -> ReviewerOutcome:
    return asyncio.run(run_reviewer(command, prompt, timeout, **kwargs))  # type: ignore[arg-type]


@pytest.fixture
def reply_file(tmp_path: Path) -> Path:
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(REPLY), encoding="utf-8")
    return path


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def wait_gone(pids: list[int], deadline_s: float = 10.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.02)  # polling a deadline: a kill is delivered, not instantaneous
    return all(gone(p) for p in pids)


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pids"
    yield path
    if path.exists():  # a failed test must not leave sleepers behind
        for pid in map(int, path.read_text().split()):
            if not gone(pid):
                os.kill(pid, 9)


# --- success -----------------------------------------------------------------------------


def test_a_reply_from_a_file_is_ok(reply_file: Path) -> None:
    out = run(script("reply.py", str(reply_file)))
    assert out.ok and out.reason == ""
    assert out.reply.summary == "one fact"
    assert [p.content for p in out.reply.proposals] == ["- Bruce moved to Lisbon."]
    assert out.stdout_bytes == len(json.dumps(REPLY)) and out.seconds >= 0


def test_a_reply_from_the_environment_reaches_only_when_passed() -> None:
    env = {**reviewer_environment({}), "DREAM_TEST_REPLY": json.dumps(REPLY)}
    assert run(script("reply.py"), env=env).reply.summary == "one fact"


def test_a_reviewer_that_never_reads_its_prompt_is_not_an_error(reply_file: Path) -> None:
    big = "p" * (4 << 20)  # far more than a pipe holds
    out = run(script("reply.py", "--ignore-stdin", str(reply_file)), prompt=big)
    assert out.ok, out.reason


def test_the_claude_envelope_is_unwrapped(reply_file: Path) -> None:
    out = run(script("envelope.py", str(reply_file)))
    assert out.ok and len(out.reply.proposals) == 1


def test_an_envelope_with_is_error_fails() -> None:
    out = run(script("envelope.py", "--error"))
    assert not out.ok and "reported an error: API Error: overloaded" in out.reason
    assert out.reply.proposals == ()


def test_a_flood_on_stderr_is_drained_and_its_tail_kept_short() -> None:
    out = run(script("noisy.py", "3"))
    assert out.ok and out.reply.summary == "noisy but fine"


def test_the_prompt_arrives_whole_on_stdin(tmp_path: Path) -> None:
    write_session(tmp_path / "sessions", "s.jsonl", [
        record("user", "REMEMBER: Bruce's sister is called Anna."),
        record("assistant", "Noted."),
    ])
    prompt = build_prompt(
        agent_id="alfred", memory=MemoryFile("MEMORY.md", "# Memory\n", 9), user=MemoryFile("USER.md", "", 0),
        write_routing=False, episodic_dir="memory", max_changes=3,
        transcripts=gather(tmp_path / "sessions", NOW, 3), boundary="fence-test-boundary-0001",
    ) + "é" * 200_000
    out = run(script("echo_prompt.py"), prompt=prompt)
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    assert out.ok and out.reply.summary == f"prompt {len(prompt)} chars sha256 {digest}"
    assert [p.content for p in out.reply.proposals] == ["- Bruce's sister is called Anna."]


def test_the_child_gets_exactly_the_environment_passed_and_the_folder(tmp_path: Path) -> None:
    bare = run(script("probe.py"), cwd=tmp_path)
    assert bare.ok and bare.reply.summary.startswith(f"cwd={tmp_path.resolve()} env=")
    names = set(bare.reply.summary.split(" env=", 1)[1].split(","))
    assert {"PATH", "LANG"} <= names <= {"PATH", "LANG", "LC_CTYPE"}
    env = reviewer_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GATEWAY_HOME": "/srv/gw"})
    chosen = set(run(script("probe.py"), env=env).reply.summary.split(" env=", 1)[1].split(","))
    assert "HOME" in chosen and "GATEWAY_HOME" not in chosen


def test_reviewer_environment_keeps_only_the_allowlist() -> None:
    source = {
        "PATH": "/opt/bin:/usr/bin", "HOME": "/home/gw", "LANG": "en_GB.UTF-8", "LC_ALL": "en_GB.UTF-8", "TZ": "UTC",
        "HTTPS_PROXY": "http://proxy:3128", "ANTHROPIC_API_KEY": "k", "CLAUDE_CONFIG_DIR": "/home/gw/.claude",
        "GATEWAY_HOME": "/srv/gw", "GATEWAY_BIND_HOST": "0.0.0.0", "AWS_SECRET_ACCESS_KEY": "s",
        "DATABASE_URL": "postgres://x", "PYTHONPATH": "/evil", "LD_PRELOAD": "/evil.so",
    }
    assert reviewer_environment(source) == {
        "PATH": "/opt/bin:/usr/bin", "HOME": "/home/gw", "LANG": "en_GB.UTF-8", "LC_ALL": "en_GB.UTF-8", "TZ": "UTC",
        "HTTPS_PROXY": "http://proxy:3128", "ANTHROPIC_API_KEY": "k", "CLAUDE_CONFIG_DIR": "/home/gw/.claude",
    }
    assert set(reviewer_environment({})) == {"PATH", "LANG"}


# --- failures ----------------------------------------------------------------------------


def test_a_missing_executable_or_empty_command_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    out = run([str(tmp_path / "no-such-reviewer")])
    assert not out.ok and "cannot start the reviewer" in out.reason
    not_executable = tmp_path / "plain.txt"
    not_executable.write_text("x")
    assert "cannot start" in run([str(not_executable)]).reason
    assert run([]).reason == "the reviewer command is empty"


def test_a_non_zero_exit_fails_with_the_stderr_tail() -> None:
    out = run(script("fail.py", "3"))
    assert not out.ok and out.reply.proposals == ()
    assert out.reason.startswith("exited with status 3: ")
    assert "credit balance is too low" in out.reason and "\n" not in out.reason


def test_garbage_is_no_json_object() -> None:
    out = run(script("garbage.py"))
    assert not out.ok and "no JSON object" in out.reason


def test_nothing_on_stdout_is_no_output() -> None:
    out = run(script("silent.py"))
    assert (out.ok, out.reason, out.stdout_bytes) == (False, "no output", 0)


def test_a_reply_of_the_wrong_shape_fails(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"summary": "no list", "proposals": "none"}')
    out = run(script("reply.py", str(path)))
    assert not out.ok and "no proposals list" in out.reason


def test_ten_megabytes_are_capped_at_one_mebibyte_and_the_group_killed() -> None:
    out = run(script("flood.py", "10"))
    assert not out.ok and out.reason.startswith("more than 1 MiB on stdout")
    assert (1 << 20) < out.stdout_bytes < 2 << 20


def test_a_smaller_stdout_cap_is_named_in_bytes(reply_file: Path) -> None:
    out = run(script("reply.py", str(reply_file)), max_stdout=10)
    assert not out.ok and out.reason.startswith("more than 10 bytes on stdout")


def test_a_timeout_kills_the_whole_process_group(pidfile: Path) -> None:
    out = run(script("sleeper.py", "--pidfile", str(pidfile), "120"), timeout=2.0)
    assert not out.ok and out.reason.startswith("timed out after 2 s")
    assert pidfile.exists(), "the sleeper did not start in time"
    leader, child = map(int, pidfile.read_text().split())
    assert wait_gone([leader, child]), "a reviewer process outlived the timeout"


def test_a_short_timeout_is_an_outcome() -> None:
    out = run(script("sleeper.py", "120"), timeout=0.5)
    assert not out.ok and "timed out after 0.5 s" in out.reason and out.reply.proposals == ()


def test_cancelling_the_call_kills_the_group(pidfile: Path) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(run_reviewer(script("sleeper.py", "--pidfile", str(pidfile), "120"), "", 60.0))
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # polling a deadline for the sleeper to report its pids
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    leader, child = map(int, pidfile.read_text().split())
    assert wait_gone([leader, child])


def test_a_cancel_that_comes_while_the_reviewer_is_being_spawned_still_kills_the_group(
    pidfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process runs before asyncio has connected its pipes: a cancel in between (a loaded
    machine) must not leave the group behind, nor wait for it to exit on its own."""
    real_spawn = asyncio.create_subprocess_exec
    connected = asyncio.Event()

    async def slow_spawn(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        proc = await real_spawn(*args, **kwargs)
        await connected.wait()  # the pipes are still being connected
        return proc

    monkeypatch.setattr(reviewer_module.asyncio, "create_subprocess_exec", slow_spawn)

    async def scenario() -> None:
        task = asyncio.create_task(run_reviewer(script("sleeper.py", "--pidfile", str(pidfile), "120"), "", 60.0))
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # polling a deadline for the sleeper to report its pids
        task.cancel()
        await asyncio.sleep(0)  # a yield: the cancellation reaches the spawn
        connected.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    leader, child = map(int, pidfile.read_text().split())
    assert wait_gone([leader, child])
