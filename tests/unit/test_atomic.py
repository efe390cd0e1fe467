"""The one atomic, CAS-aware write path for workspace files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gateway.atomic import WriteConflict, is_temp_name, remove_atomic, write_atomic


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if is_temp_name(p.name)]


def test_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    write_atomic(target, b"one")
    assert target.read_bytes() == b"one"
    assert target.stat().st_mode & 0o777 == 0o644
    os.chmod(target, 0o600)
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert target.stat().st_mode & 0o777 == 0o600  # keeps the old file's bits
    assert leftovers(tmp_path) == []


def test_cas_refuses_when_the_file_changed(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    target.write_bytes(b"agent edit")
    with pytest.raises(WriteConflict, match="changed on disk"):
        write_atomic(target, b"dream", expected=b"old snapshot")
    assert target.read_bytes() == b"agent edit"
    write_atomic(target, b"dream", expected=b"agent edit")
    assert target.read_bytes() == b"dream"
    with pytest.raises(WriteConflict):
        write_atomic(tmp_path / "NEW.md", b"x", expected=b"something")
    write_atomic(tmp_path / "NEW.md", b"x", expected=None)
    assert leftovers(tmp_path) == []


def test_a_failure_keeps_the_old_content_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "SOUL.md"
    target.write_bytes(b"precious")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"precious"
    assert leftovers(tmp_path) == []


def test_a_failed_fsync_keeps_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "SOUL.md"
    target.write_bytes(b"precious")
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"precious"
    assert leftovers(tmp_path) == []


def test_remove_is_a_compare_and_swap_too(tmp_path: Path) -> None:
    target = tmp_path / "completed.md"
    target.write_bytes(b"ours")
    with pytest.raises(WriteConflict):
        remove_atomic(target, expected=b"what we wrote before")
    assert target.read_bytes() == b"ours"
    remove_atomic(target, expected=b"ours")
    assert not target.exists()
    with pytest.raises(WriteConflict):  # gone already: nothing to remove
        remove_atomic(target, expected=b"ours")


def test_concurrent_writers_never_mix(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    contents = [bytes([65 + i]) * 200_000 for i in range(10)]
    threads = [threading.Thread(target=write_atomic, args=(target, c)) for c in contents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_bytes() in contents
    assert leftovers(tmp_path) == []


def test_keep_mode_false_sets_the_given_mode_even_over_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_bytes(b"{}")
    os.chmod(target, 0o644)
    write_atomic(target, b"{ }", mode=0o600, keep_mode=False)
    assert target.read_bytes() == b"{ }"
    assert target.stat().st_mode & 0o777 == 0o600


def test_before_rename_runs_under_the_folder_lock_once_the_cas_passed(tmp_path: Path) -> None:
    import fcntl

    target = tmp_path / "MEMORY.md"
    target.write_bytes(b"old")
    seen: list[tuple[bytes, bool]] = []

    def hook() -> None:
        probe = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = False
        except BlockingIOError:
            locked = True
        finally:
            os.close(probe)
        seen.append((target.read_bytes(), locked))

    write_atomic(target, b"new", expected=b"old", before_rename=hook)
    assert seen == [(b"old", True)] and target.read_bytes() == b"new"
    with pytest.raises(WriteConflict):
        write_atomic(target, b"newer", expected=b"old", before_rename=hook)
    with pytest.raises(WriteConflict):
        write_atomic(target, b"created", expected=None, before_rename=hook)
    assert len(seen) == 1  # not called when the compare-and-swap fails


def test_an_exception_in_before_rename_aborts_the_write(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    target.write_bytes(b"old")

    def hook() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new", before_rename=hook)
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == []
