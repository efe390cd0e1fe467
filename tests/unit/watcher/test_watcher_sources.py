"""Safe reading of workspace files (services/watcher/sources.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from services.watcher import sources
from services.watcher.sources import read_source


def test_missing_file_is_none_without_problem(tmp_path: Path) -> None:
    src = read_source(tmp_path, "SOUL.md")
    assert src.text is None
    assert src.problem is None
    assert src.missing
    assert src.chars is None


def test_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("héllo\n", encoding="utf-8")
    src = read_source(tmp_path, "SOUL.md")
    assert src.text == "héllo\n"
    assert src.chars == 6
    assert src.size_bytes == 7
    assert not src.too_large
    assert src.problem is None


def test_invalid_utf8_is_replaced_and_reported(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_bytes(b"ok\xffok")
    src = read_source(tmp_path, "SOUL.md")
    assert src.text == "ok\ufffdok"
    assert src.bad_utf8_at == 2
    assert src.problem == "SOUL.md is not valid UTF-8 (first bad byte at offset 2)"
    assert not src.unusable


def test_folder_is_unusable(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").mkdir()
    src = read_source(tmp_path, "SOUL.md")
    assert src.text is None
    assert src.unusable
    assert src.problem == "SOUL.md is a folder, not a file"


def test_link_leaving_workspace_is_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("TOP SECRET", encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "SOUL.md").symlink_to(outside / "secret.md")
    opened: list[str] = []
    real_open = sources._open_readonly

    def recording_open(path: str) -> int:
        opened.append(path)
        return real_open(path)

    monkeypatch.setattr(sources, "_open_readonly", recording_open)
    src = read_source(ws, "SOUL.md")
    assert src.text is None
    assert src.problem == "SOUL.md is a link whose real path leaves the workspace; not followed"
    assert opened == []


def test_link_through_a_linked_folder_leaving_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("TOP SECRET", encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sub").symlink_to(outside, target_is_directory=True)
    (ws / "SOUL.md").symlink_to("sub/x.md")
    src = read_source(ws, "SOUL.md")
    assert src.text is None
    assert src.problem is not None and "leaves the workspace" in src.problem


def test_link_inside_workspace_is_followed(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "soul.md").write_text("inner", encoding="utf-8")
    (tmp_path / "SOUL.md").symlink_to("notes/soul.md")
    assert read_source(tmp_path, "SOUL.md").text == "inner"


def test_workspace_reached_through_a_link(tmp_path: Path) -> None:
    real_ws = tmp_path / "real"
    real_ws.mkdir()
    (real_ws / "SOUL.md").write_text("via link", encoding="utf-8")
    (tmp_path / "ws").symlink_to(real_ws, target_is_directory=True)
    assert read_source(tmp_path / "ws", "SOUL.md").text == "via link"


def test_permission_error_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "SOUL.md").write_text("x", encoding="utf-8")

    def deny(path: str) -> int:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(sources, "_open_readonly", deny)
    src = read_source(tmp_path, "SOUL.md")
    assert src.text is None
    assert src.unusable
    assert src.problem == "SOUL.md cannot be read: permission denied"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file; the opener test above covers EACCES")
def test_chmod_000_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "SOUL.md"
    path.write_text("x", encoding="utf-8")
    path.chmod(0)
    try:
        assert read_source(tmp_path, "SOUL.md").problem == "SOUL.md cannot be read: permission denied"
    finally:
        path.chmod(0o644)


def test_fifo_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "SOUL.md")
    src = read_source(tmp_path, "SOUL.md")
    assert src.text is None
    assert src.problem == "SOUL.md is not a regular file"


def test_too_large_reads_only_the_limit(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(b"a" * 25)
    src = read_source(tmp_path, "MEMORY.md", max_bytes=10)
    assert src.text == "a" * 10
    assert src.too_large
    assert src.size_bytes == 25
    assert src.problem == "MEMORY.md is 25 bytes; only the first 10 bytes were read"


def test_prefix_cut_inside_a_character_is_not_bad_utf8(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes("abé!".encode())  # é is 2 bytes: a b \xc3 \xa9 !
    src = read_source(tmp_path, "MEMORY.md", max_bytes=3)
    assert src.text == "ab"
    assert src.bad_utf8_at is None
    assert src.too_large


def test_50_mb_file_is_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "MEMORY.md"
    with open(path, "wb") as handle:
        handle.write(b"# Notes\nfirst line\n")
        handle.truncate(50 * 1024 * 1024)  # sparse: cheap to create
    read_bytes = 0
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        nonlocal read_bytes
        data = real_read(fd, n)
        read_bytes += len(data)
        return data

    monkeypatch.setattr(sources.os, "read", counting_read)
    started = time.monotonic()
    src = read_source(tmp_path, "MEMORY.md")
    elapsed = time.monotonic() - started
    monkeypatch.undo()
    assert read_bytes <= sources.MAX_READ_BYTES + 1
    assert src.too_large
    assert src.size_bytes == 50 * 1024 * 1024
    assert src.chars == sources.MAX_READ_BYTES
    assert src.problem == "MEMORY.md is 52,428,800 bytes; only the first 4,194,304 bytes were read"
    assert elapsed < 5
