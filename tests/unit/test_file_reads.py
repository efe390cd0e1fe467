"""services.file_api.files.read_file: the cheap read path, and every refusal it makes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.errors import FailedPrecondition
from services.file_api import files


def test_the_read_asks_for_the_file_size_not_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A read allocates what it asks for: asking for the 4 MB limit on every GetFile of a 4 KB file
    # would be most of the file API's own cost per call.
    (tmp_path / "MEMORY.md").write_text("x" * 4096, encoding="utf-8")
    asked: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", read)
    assert files.read_file(tmp_path, "MEMORY.md") == "x" * 4096
    assert asked == [4097]


def test_a_file_that_grows_between_fstat_and_read_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "MEMORY.md").write_text("y" * 10_000, encoding="utf-8")
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        return os.stat_result((info.st_mode, *info[1:6], 100, *info[7:]))  # st_size as it was earlier

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert files.read_file(tmp_path, "MEMORY.md") == "y" * 10_000


def test_missing_file_missing_workspace_and_a_file_as_workspace_read_empty(tmp_path: Path) -> None:
    assert files.read_file(tmp_path, "MEMORY.md") == ""
    assert files.read_file(tmp_path / "nowhere", "MEMORY.md") == ""
    (tmp_path / "plain").write_text("not a folder", encoding="utf-8")
    assert files.read_file(tmp_path / "plain", "MEMORY.md") == ""


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").mkdir()
    with pytest.raises(FailedPrecondition, match="folder"):
        files.read_file(tmp_path, "SOUL.md")
    (tmp_path / "USER.md").write_bytes(b"\xff\xfe")
    with pytest.raises(FailedPrecondition, match="UTF-8"):
        files.read_file(tmp_path, "USER.md")
    with open(tmp_path / "AGENTS.md", "wb") as handle:
        handle.truncate(files.MAX_READ_BYTES + 1)
    with pytest.raises(FailedPrecondition, match="larger than"):
        files.read_file(tmp_path, "AGENTS.md")


def test_links_are_followed_only_inside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "secret").write_text("outside", encoding="utf-8")
    (ws / "MEMORY.md").symlink_to(ws / "notes.txt")
    (ws / "SOUL.md").symlink_to(tmp_path / "secret")
    (ws / "USER.md").symlink_to(ws / "missing.txt")
    assert files.read_file(ws, "MEMORY.md") == "inside"
    with pytest.raises(FailedPrecondition, match="leaves the workspace"):
        files.read_file(ws, "SOUL.md")
    assert files.read_file(ws, "USER.md") == ""
