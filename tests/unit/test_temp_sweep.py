"""The temp-file pattern of ``write_atomic`` and the start-up sweep (gateway/temp_sweep.py).

The sweep's clock and wait are injected: ``Clock`` is a wall clock that only
moves when the sweep sleeps, and file ages are set with ``os.utime``.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gateway import atomic
from gateway.atomic import (
    NAME_MAX_BYTES,
    is_legacy_temp_name,
    is_temp_name,
    open_temp,
    temp_name,
    write_atomic,
)
from gateway.temp_sweep import AGE_BOUND_S, LEGACY_AGE_BOUND_S, WAIT_MARGIN_S, Folder, SweepReport, sweep_at_start

T0 = 2_000_000_000.0  # the fake wall clock's start (2033)


class Clock:
    """A wall clock that moves only when the sweep sleeps; records the sleeps."""

    def __init__(self, now: float = T0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def sweep(clock: Clock, *folders: Folder) -> list[SweepReport]:
    return sweep_at_start(folders, clock=clock, sleep=clock.sleep)


def abandoned(folder: Path, target: str = "MEMORY.md", *, age: float, data: bytes = b"half a write") -> Path:
    """A temp file of ours whose writer is gone (created, written, never locked again), ``age`` s old."""
    path = folder / temp_name(target)
    path.write_bytes(data)
    os.utime(path, (T0 - age, T0 - age))
    return path


def aged(path: Path, age: float) -> Path:
    os.utime(path, (T0 - age, T0 - age), follow_symlinks=False)
    return path


# --- the pattern ------------------------------------------------------------------------------


def test_every_temp_name_is_a_dot_file_of_our_pattern_and_unique() -> None:
    names = {temp_name("MEMORY.md") for _ in range(200)}
    assert len(names) == 200
    for name in names:
        assert name.startswith(".MEMORY.md.") and name.endswith(".gwtmp")
        assert is_temp_name(name) and not is_legacy_temp_name(name)


def test_the_longest_names_still_fit_255_bytes() -> None:
    for target in ("stale__" + "é" * 100 + ".md", "x" * 255, "日本" * 42 + ".md"):
        name = temp_name(target)
        assert len(os.fsencode(name)) <= NAME_MAX_BYTES
        assert is_temp_name(name)


def test_a_target_near_the_limit_can_still_be_written(tmp_path: Path) -> None:
    target = tmp_path / ("n" * 250 + ".md")
    write_atomic(target, b"long name")
    assert target.read_bytes() == b"long name"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("name", [
    ".MEMORY.md.swp", "notes.tmp", "MEMORY.md", ".MEMORY.md.tmp", ".MEMORY.md.0123456789.tmp",
    ".MEMORY.md.012345678.gwtmp", ".MEMORY.md.0123456789ab.gwtmp", "MEMORY.md.0123456789.gwtmp",
    ".MEMORY.md.ABCDEF0123.gwtmp", "..0123456789.gwtmp",
])
def test_foreign_names_are_not_ours(name: str) -> None:
    assert not is_temp_name(name)


def test_earlier_versions_temp_names_are_recognised() -> None:
    assert is_legacy_temp_name(".MEMORY.md.a_b3z9k0.tmp")  # tempfile.mkstemp
    assert is_legacy_temp_name(".config.json.0123456789ab.tmp")  # home.py's own
    assert not is_legacy_temp_name(".MEMORY.md.swp")
    assert not is_legacy_temp_name("notes.tmp")


def test_write_atomic_holds_its_temp_file_locked_while_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real_fsync = os.fsync

    def probing_fsync(fd: int) -> None:
        for entry in tmp_path.iterdir():
            if is_temp_name(entry.name):
                probe = os.open(entry, os.O_RDONLY)
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    seen.append(False)
                except BlockingIOError:
                    seen.append(True)
                finally:
                    os.close(probe)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", probing_fsync)
    write_atomic(tmp_path / "MEMORY.md", b"x" * 100_000)
    assert seen == [True]


# --- the sweep --------------------------------------------------------------------------------


def test_an_unlocked_old_temp_file_goes_without_waiting(tmp_path: Path) -> None:
    left = abandoned(tmp_path, age=5, data=b"x" * 1234)
    clock = Clock()
    with capture_logs() as logs:
        reports = sweep(clock, Folder(tmp_path))
    assert not left.exists()
    assert clock.sleeps == []
    assert [(r.name, r.size) for r in reports[0].removed] == [(left.name, 1234)]
    events = [e for e in logs if e["event"] == "temp_sweep"]
    assert events == [{"event": "temp_sweep", "log_level": "info", "folder": str(tmp_path),
                       "removed": [{"name": left.name, "bytes": 1234}], "left": []}]


def test_an_unlocked_young_temp_file_waits_for_the_bound_then_goes(tmp_path: Path) -> None:
    young = abandoned(tmp_path, age=0.25)
    clock = Clock()
    reports = sweep(clock, Folder(tmp_path))
    assert clock.sleeps == [pytest.approx(AGE_BOUND_S - 0.25 + WAIT_MARGIN_S)]  # once, until it reaches the bound
    assert not young.exists()
    assert [r.name for r in reports[0].removed] == [young.name]


def test_the_wait_is_once_for_every_young_file_of_every_folder(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    files = [abandoned(a, age=0.5), abandoned(b, "USER.md", age=0.1), abandoned(b, age=0.9)]
    clock = Clock()
    sweep(clock, Folder(a), Folder(b))
    assert clock.sleeps == [pytest.approx(AGE_BOUND_S - 0.1 + WAIT_MARGIN_S)]
    assert not any(f.exists() for f in files)


def test_a_temp_file_from_the_future_goes_when_it_did_not_change_while_the_sweep_waited(tmp_path: Path) -> None:
    future = abandoned(tmp_path, age=-3600)  # the clock was stepped back after the crash
    clock = Clock()
    sweep(clock, Folder(tmp_path))
    assert clock.sleeps == [pytest.approx(AGE_BOUND_S + WAIT_MARGIN_S)]
    assert not future.exists()


def test_a_live_writers_locked_temp_file_is_never_removed_even_when_old(tmp_path: Path) -> None:
    fd, live = open_temp(tmp_path, "MEMORY.md")
    try:
        os.write(fd, b"a write in progress")
        aged(live, 10 * LEGACY_AGE_BOUND_S)
        clock = Clock()
        reports = sweep(clock, Folder(tmp_path))
        assert live.read_bytes() == b"a write in progress"
        assert clock.sleeps == []
        assert [(x.name, x.why) for x in reports[0].left] == [(live.name, "locked: a live writer's")]
    finally:
        os.close(fd)


def test_a_young_locked_temp_file_is_left_without_waiting(tmp_path: Path) -> None:
    fd, live = open_temp(tmp_path, "MEMORY.md")
    try:
        aged(live, 0.1)
        clock = Clock()
        sweep(clock, Folder(tmp_path))
        assert live.exists()
        assert clock.sleeps == []
    finally:
        os.close(fd)


HOLDER = r"""
import os, sys, time
from pathlib import Path
from gateway.atomic import open_temp
fd, path = open_temp(Path(sys.argv[1]), "MEMORY.md")
os.write(fd, b"held by a live process")
print(path, flush=True)
time.sleep(120)
"""


def test_the_lock_of_a_writer_killed_mid_write_is_gone_and_its_file_is_swept(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        live = Path(holder.stdout.readline().strip())
        aged(live, 60)
        sweep(Clock(), Folder(tmp_path))
        assert live.exists()  # another process's lock
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        sweep(Clock(), Folder(tmp_path))
        assert not live.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_sweep_between_a_writers_create_and_its_lock_makes_it_take_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "MEMORY.md"
    real_flock = fcntl.flock
    raced: list[list[SweepReport]] = []

    def sweep_first(fd: int, operation: int) -> None:
        if not raced and operation == fcntl.LOCK_EX:  # the writer created its file, not locked yet
            raced.append(sweep(Clock(T0 + 3600), Folder(tmp_path)))
        real_flock(fd, operation)

    monkeypatch.setattr(atomic.fcntl, "flock", sweep_first)
    write_atomic(target, b"the write survives the race")
    assert target.read_bytes() == b"the write survives the race"
    assert len(raced[0][0].removed) == 1  # the sweep did take the first temp file
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


def test_foreign_files_stay_whatever_their_age(tmp_path: Path) -> None:
    foreign = [".MEMORY.md.swp", "notes.tmp", ".MEMORY.md.tmp", "MEMORY.md", ".MEMORY.md.0123456789.tmp"]
    for name in foreign:
        (tmp_path / name).write_bytes(b"not ours")
        aged(tmp_path / name, 10 * LEGACY_AGE_BOUND_S)
    assert sweep(Clock(), Folder(tmp_path)) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(foreign)


def test_earlier_versions_temp_files_go_only_after_an_hour(tmp_path: Path) -> None:
    recent = tmp_path / ".MEMORY.md.a_b3z9k0.tmp"
    recent.write_bytes(b"maybe a live old-version writer")
    aged(recent, LEGACY_AGE_BOUND_S - 60)
    old = tmp_path / ".config.json.0123456789ab.tmp"
    old.write_bytes(b"abandoned long ago")
    aged(old, LEGACY_AGE_BOUND_S + 60)
    clock = Clock()
    reports = sweep(clock, Folder(tmp_path))
    assert recent.exists() and not old.exists()
    assert clock.sleeps == []
    assert [r.name for r in reports[0].removed] == [old.name]
    assert [x.name for x in reports[0].left] == [recent.name]


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    outside, folder = tmp_path / "outside", tmp_path / "workspace"
    outside.mkdir()
    folder.mkdir()
    victim = outside / "precious.md"
    victim.write_bytes(b"outside the folder")
    named_like_ours = folder / temp_name("MEMORY.md")
    named_like_ours.symlink_to(victim)
    aged(named_like_ours, 3600)
    hidden = abandoned(outside, age=3600)  # reachable only through a linked sub-folder
    (folder / "memory").symlink_to(outside)
    linked_root = tmp_path / "dreaming-link"
    linked_root.symlink_to(outside)
    assert sweep(Clock(), Folder(folder, recursive=True), Folder(linked_root, recursive=True, follow=False)) == []
    assert named_like_ours.is_symlink() and victim.read_bytes() == b"outside the folder"
    assert hidden.exists()


def test_a_recursive_sweep_reaches_every_real_sub_folder(tmp_path: Path) -> None:
    deep = tmp_path / "memory" / "projects" / "2026"
    deep.mkdir(parents=True)
    files = [abandoned(tmp_path / "memory", "index.md", age=9), abandoned(deep, "june.md", age=9)]
    top = abandoned(tmp_path, age=9)
    reports = sweep(Clock(), Folder(tmp_path / "memory", recursive=True))
    assert not any(f.exists() for f in files)
    assert top.exists()  # the folder above is not part of this sweep
    assert sorted(r.name for r in reports[0].removed) == sorted([files[0].name, f"projects/2026/{files[1].name}"])


def test_missing_folders_are_skipped(tmp_path: Path) -> None:
    assert sweep(Clock(), Folder(tmp_path / "nope"), Folder(tmp_path / "nope", recursive=True, follow=False)) == []


def test_many_writers_and_a_sweeper_lose_nothing(tmp_path: Path) -> None:
    """Writers in threads while sweeps run with a clock an hour ahead (every file is "old"): every
    write lands, and the only temp files removed are the abandoned ones."""
    stale = [abandoned(tmp_path, f"F{i}.md", age=0) for i in range(5)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(i: int) -> None:
        try:
            for n in range(40):
                write_atomic(tmp_path / f"W{i}.md", f"{i}:{n}".encode() * 5000)
        except BaseException as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    def sweeper() -> None:
        while not stop.is_set():
            sweep(Clock(T0 + 3600 * 24 * 365 * 10), Folder(tmp_path))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    background = threading.Thread(target=sweeper)
    background.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    background.join()
    assert errors == []
    for i in range(4):
        assert (tmp_path / f"W{i}.md").read_bytes() == f"{i}:39".encode() * 5000
    assert not any(f.exists() for f in stale)
    assert not [p.name for p in tmp_path.iterdir() if is_temp_name(p.name)]
