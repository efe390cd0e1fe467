"""A forget that dies at any step leaves each file as it was or scrubbed, never torn, and running the
same forget again finishes it: a crash raised before and after each file's write, and a real
``kill -9`` of a process mid-apply."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from forget_stage import FACT, TARGET, Planted, copy_of, leftovers, plant, snapshot

from gateway.atomic import is_temp_name, write_atomic
from services.dreaming.forget import apply, scan
from services.dreaming.forget.workspace import scrub_file

ID = "F-0123456789ab"
WRITES = 9  # files the planted forget rewrites: 8 in the workspace and the dreaming state


class Crash(Exception):
    """The process 'dies' here."""


def boom() -> None:
    raise Crash


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return plant(tmp_path_factory.mktemp("home"))


def forget(p: Planted, **kw: object) -> None:
    apply(p.workspace, TARGET, ID, by="ops-key", at="2026-12-07T02:00:00Z", state_dir=p.state_dir,
          transcripts_dir=p.transcripts, **kw)  # type: ignore[arg-type]


def assert_old_or_new(home: Path, before: dict[str, bytes]) -> int:
    """Every file under ``home`` is its old bytes or its scrubbed bytes (temp files aside); how many are new."""
    after = {rel: data for rel, data in snapshot(home).items() if not is_temp_name(Path(rel).name)}
    assert after.keys() == before.keys()
    new = 0
    for rel, data in after.items():
        scrubbed = scrub_file(Path(rel).name, before[rel], TARGET, ID)[0]
        assert data in (before[rel], scrubbed), rel
        new += data != before[rel]
    return new


def assert_finished(p: Planted, home: Path) -> None:
    forget(p)
    assert leftovers(home) == ["agents/alfred/sessions/s1.jsonl"]
    assert [x.path for x in scan(p.workspace, TARGET, state_dir=p.state_dir, transcripts_dir=p.transcripts).places] == ["s1.jsonl"]


def test_the_planted_forget_writes_this_many_files(planted: Planted, tmp_path: Path) -> None:
    p = copy_of(planted, tmp_path / "home")
    calls: list[Path] = []

    def counting(path: Path, data: bytes, *, expected: bytes) -> None:
        calls.append(path)
        write_atomic(path, data, expected=expected)

    forget(p, write=counting)
    assert len(calls) == WRITES == len(set(calls))


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("step", range(WRITES))
def test_a_crash_at_any_write_leaves_old_or_new_and_the_next_run_finishes(planted: Planted, tmp_path: Path, step: int,
                                                                          when: str) -> None:
    home = tmp_path / "home"
    p = copy_of(planted, home)
    before = snapshot(home)
    calls = 0

    def crashing(path: Path, data: bytes, *, expected: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls <= step:
            write_atomic(path, data, expected=expected)
            return
        if when == "before":  # inside the write: the temp file is made and synced, the rename never happens
            write_atomic(path, data, expected=expected, before_rename=boom)  # raises
        write_atomic(path, data, expected=expected)
        raise Crash

    with pytest.raises(Crash):
        forget(p, write=crashing)
    assert assert_old_or_new(home, before) == step + (when == "after")
    assert_finished(p, home)


CHILD = """
import os, signal, sys
from pathlib import Path
from gateway.atomic import write_atomic
from gateway.forgetting import Target
from services.dreaming.forget import apply

workspace, state, fact, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
calls = 0

def write(path, data, *, expected):
    global calls
    calls += 1
    die = (lambda: os.kill(os.getpid(), signal.SIGKILL)) if calls == kill_at else None
    write_atomic(path, data, expected=expected, before_rename=die)

apply(workspace, Target.parse(fact, None), "%s", by="ops-key", at="t", state_dir=state, write=write)
""" % ID


@pytest.mark.parametrize("kill_at", [1, 5, WRITES])
def test_kill_9_mid_apply_leaves_old_or_new_and_the_next_run_finishes(planted: Planted, tmp_path: Path, kill_at: int) -> None:
    home = tmp_path / "home"
    p = copy_of(planted, home)
    before = snapshot(home)
    child = subprocess.run([sys.executable, "-c", CHILD, str(p.workspace), str(p.state_dir), FACT, str(kill_at)],
                           env=os.environ.copy(), capture_output=True, timeout=120, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert assert_old_or_new(home, before) == kill_at - 1
    assert_finished(p, home)
