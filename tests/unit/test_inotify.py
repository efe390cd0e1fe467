"""gateway.inotify: the events of one instance as paths, its watches following the folders."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from gateway import inotify



def test_inotify_is_there_on_the_machines_the_suite_runs_on() -> None:
    """The suite runs on Linux (CI, the image, Kubernetes): the watch must be inotify there, not
    watchfiles' fallback; on a host without it this file fails instead of passing unchecked."""
    assert inotify.available()


def test_events_name_the_path_and_what_happened(tmp_path: Path) -> None:
    notify = inotify.Inotify()
    try:
        notify.add_root(str(tmp_path))
        (tmp_path / "a.md").write_text("x", encoding="utf-8")
        (tmp_path / "a.md").rename(tmp_path / "b.md")
        (tmp_path / "b.md").unlink()
        events = notify.read()
    finally:
        notify.close()
    kinds = [(e.path, e.mask & (inotify.ADDED | inotify.DELETED | inotify.MODIFIED)) for e in events]
    assert (str(tmp_path / "a.md"), inotify.IN_CREATE) in kinds
    assert (str(tmp_path / "a.md"), inotify.IN_MOVED_FROM) in kinds
    assert (str(tmp_path / "b.md"), inotify.IN_MOVED_TO) in kinds
    assert kinds[-1] == (str(tmp_path / "b.md"), inotify.IN_DELETE)


def test_a_missing_root_is_an_error_and_a_vanished_sub_folder_is_not(tmp_path: Path) -> None:
    notify = inotify.Inotify()
    try:
        with pytest.raises(FileNotFoundError):
            notify.add_root(str(tmp_path / "missing"))
        (tmp_path / "sub").mkdir()
        notify.add_root(str(tmp_path))
        (tmp_path / "sub").rmdir()
        assert [e.path for e in notify.read()] == [str(tmp_path / "sub")]
    finally:
        notify.close()


def test_an_overflowed_queue_is_an_error_events_were_lost() -> None:
    """The kernel says its queue overflowed with wd -1: the caller must hear it (it re-plans and rescans)."""
    notify = inotify.Inotify()
    own_fd = notify.fd
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.write(write_end, struct.pack("iIII", -1, inotify.IN_Q_OVERFLOW, 0, 0))
    notify.fd = read_end
    try:
        with pytest.raises(OSError) as raised:
            notify.read()
        assert raised.value.errno == errno.EOVERFLOW
    finally:
        for fd in (read_end, write_end, own_fd):
            os.close(fd)
