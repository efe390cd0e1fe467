"""Every process sweeps the folders it writes to before it reports SERVING (gateway/temp_sweep.py).

Each folder gets the temp files a crash leaves (ours, abandoned: an hour old and one just
made; an earlier version's, two hours old), and what must stay: a live writer's temp file
(held open and locked by this test, and old), an earlier version's that is younger than an
hour, and foreign names. Each process is started on its own; once it is SERVING only what
must stay is left in its folders, and its log names what it removed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from suite_support import Suite, make_home, workspace

from gateway.atomic import open_temp, temp_name

pytestmark = pytest.mark.integration

HOUR = 3600.0


def plant(folder: Path) -> tuple[set[str], set[str], int]:
    """Temp files that must go and files that must stay in ``folder``; the live writer's descriptor."""
    folder.mkdir(parents=True, exist_ok=True)
    old, young, legacy_old = folder / temp_name("MEMORY.md"), folder / temp_name("USER.md"), folder / ".SOUL.md.k3j_9x0a.tmp"
    legacy_young, foreign = folder / ".MEMORY.md.ab12cd34.tmp", [folder / ".MEMORY.md.swp", folder / "notes.tmp"]
    for path, age in ((old, HOUR), (young, 0.0), (legacy_old, 2 * HOUR), (legacy_young, 60.0), *((f, 2 * HOUR) for f in foreign)):
        path.write_bytes(b"left by a crash")
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    fd, live = open_temp(folder, "MEMORY.md")
    os.write(fd, b"a live writer's")
    stamp = time.time() - HOUR
    os.utime(live, (stamp, stamp))
    return {old.name, young.name, legacy_old.name}, {live.name, legacy_young.name, *(f.name for f in foreign)}, fd


def removed_by(suite: Suite, name: str) -> set[str]:
    return {item["name"].rsplit("/", 1)[-1] for line in suite.log_lines(name) if line.get("event") == "temp_sweep" for item in line["removed"]}


def test_each_process_sweeps_its_folders_before_serving(tmp_path: Path) -> None:
    home, ports, http_port = make_home(tmp_path, [{"id": "alfred"}])
    suite = Suite(home, http_port, ports)
    ws = workspace(suite, "alfred")
    vault = home / "shared" / "kb" / "global"
    plan = {  # process -> the folders it sweeps (besides the home, which every serve sweeps)
        "file_api": [ws],
        "kb": [vault / "notes", vault / "reports"],
        "dreaming": [ws / "memory" / "topics", ws / ".dreaming" / "backups", home / "agents" / "alfred"],
        "watcher": [ws],
    }
    held: list[int] = []
    try:
        home_gone, home_kept, fd = plant(home)
        held.append(fd)
        for name, folders in plan.items():
            expected: dict[Path, tuple[set[str], set[str]]] = {}
            for folder in folders:
                gone, kept, fd = plant(folder)
                held.append(fd)
                expected[folder] = (gone, kept)
            suite.start(name)  # returns once it is SERVING
            for folder, (gone, kept) in expected.items():
                present = set(os.listdir(folder))
                assert not gone & present, f"{name} left {sorted(gone & present)} in {folder}"
                assert kept <= present, f"{name} removed {sorted(kept - present)} from {folder}"
                assert gone <= removed_by(suite, name)
            suite.stop(name)
        assert not home_gone & set(os.listdir(home)) and home_kept <= set(os.listdir(home))
    finally:
        for fd in held:
            os.close(fd)
        suite.stop_all()
