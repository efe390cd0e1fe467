"""``gateway.suite_lock``: shared holds by running processes, the restore's exclusive hold, records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.suite_lock import RUNNING_DIR, HomeBusy, exclusive_home, hold_home, holders, refuse_while_restoring

HOLDER = textwrap.dedent("""
    import sys, pathlib
    from gateway.suite_lock import hold_home
    hold_home(pathlib.Path(sys.argv[1]), sys.argv[2])
    print("held", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills us)
""")


def holder(home: Path, role: str) -> subprocess.Popen[str]:
    """Another process holding ``home`` shared as ``role``, once it has said so."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(home), role], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_restore_is_refused_while_a_process_holds_the_home_and_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kb = holder(home, "kb")
    up = holder(home, "gateway up")
    try:
        with pytest.raises(HomeBusy) as refused, exclusive_home(home):
            pytest.fail("the exclusive hold was granted while processes held the home")
        named = sorted([f"kb (pid {kb.pid})", f"gateway up (pid {up.pid})"], key=lambda text: int(text.split()[-1][:-1]))
        assert str(refused.value) == f"{home} is in use by {', '.join(named)}"
        assert {(h.role, h.pid) for h in holders(home)} == {("kb", kb.pid), ("gateway up", up.pid)}
    finally:
        for proc in (kb, up):
            proc.communicate("")
    with exclusive_home(home):  # both exited cleanly: their records are gone, the lock is free
        assert [h.role for h in holders(home)] == ["gateway restore"]
    assert holders(home) == []


def test_a_killed_holder_lets_go_and_its_record_is_swept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kb = holder(home, "kb")
    os.kill(kb.pid, signal.SIGKILL)
    kb.communicate()
    assert len(list((home / RUNNING_DIR).glob("kb-*.json"))) == 1  # left behind, unlocked
    assert holders(home) == []  # a record nobody holds names nobody
    with exclusive_home(home):
        assert not list((home / RUNNING_DIR).glob("kb-*.json"))


def test_while_a_restore_runs_nothing_can_take_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with exclusive_home(home):
        with pytest.raises(HomeBusy, match=rf"gateway restore \(pid {os.getpid()}\) is writing {home} and holds it exclusively"):
            hold_home(home, "kb")
        with pytest.raises(HomeBusy):
            refuse_while_restoring(home)
    hold = hold_home(home, "kb")
    refuse_while_restoring(home)
    hold.release()
    hold.release()  # twice is fine
    assert holders(home) == []


def test_refuse_while_restoring_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    refuse_while_restoring(home)
    assert list(home.iterdir()) == []
