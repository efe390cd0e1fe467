"""Reviewers left behind by a dead dreaming process are killed at the next start; live owners' are not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services.dreaming.review.orphans import kill_orphans, owner_marker

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid  # gone (and reaped), so not alive


def test_orphans_of_a_dead_owner_are_killed_and_others_left(tmp_path: Path) -> None:
    home, other_home = tmp_path / "home", tmp_path / "other"
    orphan = subprocess.Popen(SLEEP, env={**os.environ, **owner_marker(home, dead_pid())}, start_new_session=True)
    owned = subprocess.Popen(SLEEP, env={**os.environ, **owner_marker(home)}, start_new_session=True)  # we are alive
    elsewhere = subprocess.Popen(SLEEP, env={**os.environ, **owner_marker(other_home, dead_pid())}, start_new_session=True)
    unmarked = subprocess.Popen(SLEEP, start_new_session=True)
    try:
        assert kill_orphans(home) == [orphan.pid]
        assert orphan.wait(timeout=10) == -9
        assert all(p.poll() is None for p in (owned, elsewhere, unmarked))
    finally:
        for p in (orphan, owned, elsewhere, unmarked):
            p.kill()
            p.wait()
