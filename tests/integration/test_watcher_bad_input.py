"""The watcher facing bad input: it logs, composes what it safely can, serves everyone else."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from suite_support import Suite, make_home, wait_claude, wait_until, workspace

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("bad"), [{"id": "alfred"}, {"id": "bob"}])
    for agent in ("alfred", "bob"):
        (home / "agents" / agent / "workspace").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("watcher")
        yield running
    finally:
        running.stop_all()



def still_serving_bob(suite: Suite, marker: str) -> None:
    (workspace(suite, "bob") / "SOUL.md").write_text(f"bob is fine {marker}\n")
    wait_claude(suite, "bob", f"bob is fine {marker}")
    assert suite.procs["watcher"].poll() is None


def logged(suite: Suite, event: str, fragment: str) -> bool:
    return any(l.get("event") == event and fragment in json.dumps(l) for l in suite.log_lines("watcher"))


def test_invalid_utf8_is_composed_with_replacements(bsuite: Suite) -> None:
    (workspace(bsuite, "alfred") / "SOUL.md").write_bytes(b"# Soul\n\nbad \xff\xfe bytes, good words\n")
    text = wait_claude(bsuite, "alfred", "good words")
    assert "\ufffd" in text and "not valid UTF-8" in text
    wait_until(lambda: logged(bsuite, "compose_problem", "not valid UTF-8"), 10, "a log line")
    still_serving_bob(bsuite, "utf8")


def test_a_50_mb_memory_file_is_capped(bsuite: Suite) -> None:
    big = workspace(bsuite, "alfred") / "MEMORY.md"
    with open(big, "wb") as handle:
        handle.write(b"# Memory\n\n## Big\nstart of the big file\n")
        handle.write((b"y" * 1023 + b"\n") * (50 * 1024))
    text = wait_claude(bsuite, "alfred", "start of the big file")
    assert len(text) <= 150_000
    assert "OVER BUDGET" in text
    assert big.stat().st_size > 50 * 1024 * 1024  # never modified
    still_serving_bob(bsuite, "big")
    big.write_text("# Memory\n\nsmall again\n")
    wait_claude(bsuite, "alfred", "small again")


def test_a_file_replaced_by_a_folder(bsuite: Suite) -> None:
    target = workspace(bsuite, "alfred") / "AGENTS.md"
    target.write_text("agents file\n")
    wait_claude(bsuite, "alfred", "agents file")
    target.unlink()
    target.mkdir()
    text = wait_claude(bsuite, "alfred", "AGENTS.md is a folder")
    assert "agents file" not in text
    still_serving_bob(bsuite, "folder")
    target.rmdir()


def test_a_symlink_out_of_the_workspace_is_never_followed(bsuite: Suite, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("TOP SECRET outside the workspace\n")
    link = workspace(bsuite, "alfred") / "IDENTITY.md"
    link.symlink_to(secret)
    text = wait_claude(bsuite, "alfred", "IDENTITY.md")
    assert "TOP SECRET" not in text
    still_serving_bob(bsuite, "link")
    link.unlink()


def test_a_workspace_deleted_and_recreated(bsuite: Suite) -> None:
    folder = workspace(bsuite, "alfred")
    # The watcher may recompose into the folder while it is being removed (the first deletions
    # reach it within a millisecond): remove what it wrote too, until the folder is gone.
    wait_until(lambda: not (shutil.rmtree(folder, ignore_errors=True) or folder.exists()), 15, "the workspace to be gone")
    wait_until(lambda: logged(bsuite, "compose_problem", "does not exist"), 15, "the missing-workspace log line")
    still_serving_bob(bsuite, "gone")
    folder.mkdir()
    (folder / "SOUL.md").write_text("reborn soul\n")
    wait_claude(bsuite, "alfred", "reborn soul")
    (folder / "SOUL.md").write_text("reborn soul, edited\n")  # the new folder is watched
    wait_claude(bsuite, "alfred", "reborn soul, edited")


def test_an_agent_added_to_config_is_picked_up_without_restart(bsuite: Suite) -> None:
    pid = bsuite.procs["watcher"].pid
    config_path = bsuite.home / "config.json"
    config = json.loads(config_path.read_text())
    config["agents"].append({"id": "cleo"})
    (bsuite.home / "agents" / "cleo" / "workspace").mkdir(parents=True)
    (bsuite.home / "agents" / "cleo" / "workspace" / "SOUL.md").write_text("cleo arrives\n")
    tmp = config_path.with_suffix(".new")
    tmp.write_text(json.dumps(config))
    os.replace(tmp, config_path)
    wait_claude(bsuite, "cleo", "cleo arrives")
    (bsuite.home / "agents" / "cleo" / "workspace" / "SOUL.md").write_text("cleo edited\n")
    wait_claude(bsuite, "cleo", "cleo edited")
    assert bsuite.procs["watcher"].pid == pid and bsuite.procs["watcher"].poll() is None


def test_a_broken_config_edit_keeps_the_running_config(bsuite: Suite) -> None:
    config_path = bsuite.home / "config.json"
    good = config_path.read_text()
    config_path.write_text('{"agents": [{"id": "../evil"}]}')
    try:
        wait_until(lambda: logged(bsuite, "config_reload_rejected", "agents[0].id"), 15, "the rejected reload log line")
        still_serving_bob(bsuite, "badconfig")
    finally:
        config_path.write_text(good)
