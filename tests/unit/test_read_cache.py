"""services.file_api.read_cache: an unchanged file from memory, never a stale one."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gateway.config import build, validate
from gateway.errors import FailedPrecondition
from services.file_api import files
from services.file_api.read_cache import MAX_CACHED_BYTES, MIB, SETTLE_NS, ReadCache

LATER = lambda: time.time_ns() + 2 * SETTLE_NS  # noqa: E731 - a clock at which every file on disk has settled


def text_of(name: str, text: str) -> str:
    return text


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = os.open

    def counting(path: str | Path, flags: int, *args: int) -> int:
        opened.append(str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", counting)
    return opened


def rewrite_until_restamped(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` in place (same inode) until the file system stamps a new ctime."""
    before = os.lstat(path).st_ctime_ns
    deadline = time.monotonic() + 10
    while True:
        with open(path, "r+", encoding="utf-8") as handle:
            handle.write(text)
        if os.lstat(path).st_ctime_ns != before:
            return
        assert time.monotonic() < deadline, "the file system never stamped a new ctime"


def test_a_settled_file_is_answered_without_opening_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "MEMORY.md").write_text("remember the milk\n", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER)
    opened = count_opens(monkeypatch)
    assert cache.read(tmp_path, "MEMORY.md") == "remember the milk\n"
    assert cache.read(tmp_path, "MEMORY.md") == "remember the milk\n"
    assert len(opened) == 1 and len(cache) == 1


def test_the_built_value_is_made_once_per_read_from_disk_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("version A\n", encoding="utf-8")
    built: list[tuple[str, str]] = []

    def build(name: str, text: str) -> list[str]:
        built.append((name, text))
        return [name, text]

    cache = ReadCache(build, clock=LATER)
    first = cache.read(tmp_path, "MEMORY.md")
    assert cache.read(tmp_path, "MEMORY.md") is first
    assert built == [("MEMORY.md", "version A\n")]
    rewrite_until_restamped(path, "version B\n")
    assert cache.read(tmp_path, "MEMORY.md") == ["MEMORY.md", "version B\n"]
    assert cache.read(tmp_path, "AGENTS.md") == ["AGENTS.md", ""]  # absent: built from read_file's answer, not kept
    assert built[1:] == [("MEMORY.md", "version B\n"), ("AGENTS.md", "")] and len(cache) == 1


def test_a_file_written_moments_ago_is_read_from_disk_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Within the settle window a same-size write may keep every stamp equal: nothing is kept.
    path = tmp_path / "MEMORY.md"
    path.write_text("version A\n", encoding="utf-8")
    cache = ReadCache(text_of)
    assert cache.read(tmp_path, "MEMORY.md") == "version A\n"
    with open(path, "r+", encoding="utf-8") as handle:  # same size, same inode, likely the same tick
        handle.write("version B\n")
    assert cache.read(tmp_path, "MEMORY.md") == "version B\n"
    assert len(cache) == 0


def test_a_write_in_place_after_the_read_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("version A\n", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER)
    assert cache.read(tmp_path, "MEMORY.md") == "version A\n"
    rewrite_until_restamped(path, "version B\n")
    assert os.lstat(path).st_size == len("version A\n")
    assert cache.read(tmp_path, "MEMORY.md") == "version B\n"


def test_a_file_replaced_by_rename_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "SOUL.md"
    path.write_text("calm\n", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER)
    assert cache.read(tmp_path, "SOUL.md") == "calm\n"
    (tmp_path / "new").write_text("bold\n", encoding="utf-8")
    os.replace(tmp_path / "new", path)
    assert cache.read(tmp_path, "SOUL.md") == "bold\n"


def test_a_deleted_file_reads_empty(tmp_path: Path) -> None:
    path = tmp_path / "USER.md"
    path.write_text("Ada\n", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER)
    assert cache.read(tmp_path, "USER.md") == "Ada\n"
    path.unlink()
    assert cache.read(tmp_path, "USER.md") == ""


def test_a_cached_file_replaced_by_a_link_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("not yours\n", encoding="utf-8")
    path = workspace / "MEMORY.md"
    path.write_text("notes\n", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER)
    assert cache.read(workspace, "MEMORY.md") == "notes\n"
    path.unlink()
    path.symlink_to(tmp_path / "secret.txt")
    with pytest.raises(FailedPrecondition, match="leaves the workspace"):
        cache.read(workspace, "MEMORY.md")


def test_a_folder_is_refused_as_read_file_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    with pytest.raises(FailedPrecondition, match="folder"):
        ReadCache(text_of, clock=LATER).read(tmp_path, "AGENTS.md")


def test_entries_are_bounded_oldest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SOUL.md", "USER.md", "MEMORY.md"):
        (tmp_path / name).write_text(name * 100, encoding="utf-8")  # 700, 700 and 900 bytes
    cache = ReadCache(text_of, clock=LATER, max_bytes=1700)
    for name in ("SOUL.md", "USER.md", "MEMORY.md"):
        cache.read(tmp_path, name)
    assert len(cache) == 2
    opened = count_opens(monkeypatch)
    assert cache.read(tmp_path, "MEMORY.md") == "MEMORY.md" * 100  # kept
    assert cache.read(tmp_path, "SOUL.md") == "SOUL.md" * 100  # the oldest: evicted, read again
    assert [Path(p).name for p in opened] == ["SOUL.md"]


def test_the_bound_is_gateway_files_read_cache_mib_32_by_default(tmp_path: Path) -> None:
    assert build({}, tmp_path).files.read_cache_mib == 32
    assert MAX_CACHED_BYTES == 32 * MIB
    assert build({"gateway": {"files": {"readCacheMiB": 0}}}, tmp_path).files.read_cache_mib == 0
    assert validate({"gateway": {"files": {"readCacheMiB": -1}}})


def test_a_bound_of_zero_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "SOUL.md").write_text("soul", encoding="utf-8")
    cache = ReadCache(text_of, clock=LATER, max_bytes=0)
    assert cache.read(tmp_path, "SOUL.md") == "soul"
    assert len(cache) == 0


def test_answers_match_read_file_on_every_kind_of_path(tmp_path: Path) -> None:
    (tmp_path / "IDENTITY.md").write_text("é" * 10, encoding="utf-8")
    (tmp_path / "HEARTBEAT.md").write_bytes(b"\xff\xfe not utf-8")
    cache = ReadCache(text_of, clock=LATER)
    for name in ("IDENTITY.md", "HEARTBEAT.md", "MISSING.md"):
        for _ in range(2):
            try:
                expected: object = files.read_file(tmp_path, name)
            except FailedPrecondition as exc:
                expected = str(exc)
            try:
                got: object = cache.read(tmp_path, name)
            except FailedPrecondition as exc:
                got = str(exc)
            assert got == expected
