"""gateway.lock_probe: a start refuses a file system where flock does not keep a second process out.

No network file system can be mounted here, so the faulty one is simulated at the probe's seam:
this process's lock does nothing (as on some network mounts), and the real second process then
takes it; or the whole probe is replaced by one that reports a fault.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from pg_support import free_port

from gateway.config import build, load_config, validate
from gateway.home import ensure_home
from gateway.lock_probe import OPT_OUT_KEY, PROBE_NAME, LockFault, folders, probe, refusal
from gateway.suite_lock import hold_home
from gateway_cli import launcher

ROOT = Path(__file__).resolve().parents[2]
PROC = Path("/proc")  # a file system of its own on every Linux machine, never the temp folder's


def no_lock(fd: int) -> None:
    """A file system that accepts flock and does nothing with it."""


def folder_lock_only(fd: int) -> None:
    """A file system whose folders lock and whose files do not."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        fcntl.flock(fd, fcntl.LOCK_EX)


def failing_lock(fd: int) -> None:
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))


class Faulty:
    """A probe reporting the first folder it is given as broken; it records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[Sequence[tuple[str, Path]]] = []

    def __call__(self, checked: Sequence[tuple[str, Path]]) -> list[LockFault]:
        self.asked.append(checked)
        role, folder = checked[0]
        return [LockFault(folder, role, "does not keep a second process out (one took the lock this one held on the folder)")]


def home_with(tmp_path: Path, **gateway: object) -> Path:
    """An initialised home whose config.json has ``gateway`` merged into its gateway block."""
    home = tmp_path / "home"
    ensure_home(home)
    raw = json.loads((home / "config.json").read_text(encoding="utf-8"))
    raw["gateway"].update(gateway)
    (home / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return home


def test_a_local_file_system_passes_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    assert probe([("the home", tmp_path), ("the workspace of b", tmp_path / "b")]) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["b"]


def test_a_lock_a_second_process_can_take_too_is_a_fault_naming_the_folder(tmp_path: Path) -> None:
    faults = probe([("the workspace of bob", tmp_path)], lock=no_lock)
    assert [(f.folder, f.role) for f in faults] == [(tmp_path, "the workspace of bob")]  # one per folder
    line = faults[0].line()
    assert line.startswith(f"flock on {tmp_path} (the workspace of bob) does not keep a second process out")
    assert OPT_OUT_KEY in line and "\n" not in line
    assert not any(PROBE_NAME in p.name for p in tmp_path.iterdir())


def test_the_lock_on_a_file_is_probed_as_well_as_the_folders(tmp_path: Path) -> None:
    faults = probe([("the home", tmp_path)], lock=folder_lock_only)
    assert [f.problem for f in faults] == ["does not keep a second process out (one took the lock this one held on a file in it)"]


def test_a_lock_that_fails_is_a_fault_saying_why(tmp_path: Path) -> None:
    faults = probe([("the home", tmp_path)], lock=failing_lock)
    assert [f.problem for f in faults] == [f"fails ({os.strerror(errno.ENOLCK)})"]


def test_a_folder_that_takes_no_new_file_is_probed_through_its_own_lock() -> None:
    assert probe([("the shared vault", PROC)]) == []  # no file can be made in /proc, even by root
    assert [f.folder for f in probe([("the shared vault", PROC)], lock=no_lock)] == [PROC]


def test_no_second_process_is_a_fault_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(os, "fork", no_fork)  # the process limit reached
    faults = probe([("the home", tmp_path)])
    assert [f.problem for f in faults] == [f"could not be checked: no second process ({os.strerror(errno.EAGAIN)})"]
    assert list(tmp_path.iterdir()) == []


def test_one_folder_per_file_system_the_home_first_a_missing_one_through_its_parent(tmp_path: Path) -> None:
    config = build({"agents": [{"id": "a"}, {"id": "b", "workspace": str(tmp_path / "elsewhere" / "b")},
                               {"id": "c", "workspace": str(PROC / "no-such-folder" / "c")}]}, tmp_path)
    assert folders(config) == [("the home", tmp_path), ("the workspace of c", PROC)]


def test_the_key_is_on_by_default_and_takes_a_boolean(tmp_path: Path) -> None:
    assert build({}, tmp_path).files.require_working_locks is True
    assert build({"gateway": {"files": {"requireWorkingLocks": False}}}, tmp_path).files.require_working_locks is False
    assert validate({"gateway": {"files": {"requireWorkingLocks": "no"}}})


def test_refusal_is_one_line_and_the_opt_out_does_not_probe(tmp_path: Path) -> None:
    faulty = Faulty()
    line = refusal(build({}, tmp_path), faulty)
    assert line is not None and line.startswith(f"flock on {tmp_path} (the home) does not keep a second process out")
    assert refusal(build({"gateway": {"files": {"requireWorkingLocks": False}}}, tmp_path), faulty) is None
    assert len(faulty.asked) == 1
    assert refusal(build({}, tmp_path)) is None  # the real probe, on this machine's temp folder


def test_gateway_up_refuses_with_one_line_before_it_checks_a_port_or_starts_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path)
    hold = hold_home(home, "gateway up")
    try:
        code = launcher.up(home, load_config(home), None, None, None, hold, probe=Faulty())
    finally:
        hold.release()
    assert code == 1  # returned: it did not exec the supervisor
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert err.startswith(f"gateway: cannot start: flock on {home} (the home) does not keep a second process out")


def test_gateway_up_with_the_opt_out_goes_on_to_the_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    free: set[int] = set()
    while len(free) < 4:
        free.add(free_port())
    ports = dict(zip(("fileApi", "watcher", "kb", "dreaming"), sorted(free), strict=True))
    home = home_with(tmp_path, files={"requireWorkingLocks": False}, grpc=ports, metrics={"enabled": False})
    hold = hold_home(home, "gateway up")
    with socket.socket() as squatter:  # the shim's port is taken: up stops at the port check, never execs
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        try:
            code = launcher.up(home, load_config(home), None, taken, None, hold, probe=Faulty())
        finally:
            hold.release()
    assert code == 1
    err = capsys.readouterr().err
    assert f"cannot start: http: 127.0.0.1:{taken} is already in use" in err
    assert "flock" not in err


SERVE = """
import sys
from pathlib import Path
from gateway.lock_probe import LockFault
from gateway_cli.command_errors import run_reporting
from gateway_cli.serve import serve

def faulty(checked):
    role, folder = checked[0]
    return [LockFault(folder, role, "does not keep a second process out (one took the lock this one held on the folder)")]

home = Path(sys.argv[1])
sys.exit(run_reporting(home, lambda: serve(sys.argv[2], home, 0, probe=faulty)))
"""


@pytest.mark.parametrize("name", ["file_api", "watcher", "kb", "dreaming"])
def test_gateway_serve_of_a_writer_refuses_with_one_line(tmp_path: Path, name: str) -> None:
    home = home_with(tmp_path, metrics={"enabled": False})  # had it started, on a port of the kernel's choice only
    done = subprocess.run([sys.executable, "-c", SERVE, str(home), name], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"gateway: flock on {home} (the home) does not keep a second process out (one took the lock this one held "
        f"on the folder): concurrent writes there are not safe; use a local file system, or set {OPT_OUT_KEY} "
        "to false to start anyway"]
