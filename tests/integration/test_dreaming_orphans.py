"""kill -9 of the dreaming process mid-run: its reviewer (and the reviewer's child) are not left
running for good; the next dreaming process of the home kills them, and memory is untouched."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest
from dreaming_support import dreaming, reviewer
from suite_support import ADMIN_KEY, Suite, make_home, wait_until, workspace

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The ferry to Inishmore leaves at nine.\n"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


def test_reviewers_of_a_killed_dreaming_process_are_killed_at_the_next_start(tmp_path: Path) -> None:
    pidfile = tmp_path / "reviewer.pids"
    command = reviewer("sleeper.py", "--pidfile", pidfile, "90")
    home, ports, http_port = make_home(tmp_path, agents=[{"id": "alfred", "dreaming": dreaming(command, reviewerTimeoutSeconds=120)}])
    suite = Suite(home, http_port, ports)
    workspace(suite, "alfred").mkdir(parents=True, exist_ok=True)
    (workspace(suite, "alfred") / "MEMORY.md").write_text(MEMORY)
    try:
        suite.start("file_api", "watcher", "kb", "dreaming", "http")
        with httpx.Client(base_url=suite.base_url, timeout=60) as http:
            caller = threading.Thread(target=lambda: http.post("/api/v1/agents/alfred/dream:run", headers={"X-Api-Key": ADMIN_KEY}, json={}),
                                      daemon=True)
            caller.start()
            wait_until(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, 30, "the reviewer to start")
            leader, child = (int(p) for p in pidfile.read_text().split())
            os.kill(suite.procs["dreaming"].pid, signal.SIGKILL)
            suite.procs.pop("dreaming").wait(timeout=10)
            assert alive(leader) and alive(child)  # the reviewer's own session outlived its parent
            suite.start("dreaming")
            wait_until(lambda: not alive(leader) and not alive(child), 20, "the orphaned reviewers to be killed")
            caller.join(timeout=60)
        assert (workspace(suite, "alfred") / "MEMORY.md").read_text() == MEMORY
        killed = [l for l in suite.log_lines("dreaming") if l.get("event") == "dream_orphan_reviewers_killed"]
        assert killed and set(killed[-1]["pids"]) >= {leader, child}
    finally:
        suite.stop_all()
