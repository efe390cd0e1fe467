"""Get: bounded exact excerpts, confined to the workspace's memory scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kb_helpers import write

from gateway.errors import InvalidArgument, NotFound
from services.kb.index.entries import entry_hash
from services.kb.index.excerpt import get_excerpt


@pytest.fixture
def files(workspace: Path, tmp_path: Path) -> Path:
    write(workspace, "memory/long.md", "".join(f"line {n}\n" for n in range(1, 501)))
    write(workspace, "MEMORY.md", "# Core\n\n- fact one\n- fact two\n")
    write(workspace, "USER.md", "likes tea\n")
    write(workspace, "SOUL.md", "soul\n")
    (tmp_path / "outside.md").write_text("secret\n")
    os.symlink(tmp_path / "outside.md", workspace / "memory/out.md")
    os.symlink(workspace / "SOUL.md", workspace / "memory/soul.md")
    os.symlink("long.md", workspace / "memory/alias.md")
    os.symlink(tmp_path, workspace / "memory/outdir")
    (workspace / "memory/dir.md").mkdir()
    return workspace


def test_default_is_200_lines(files: Path) -> None:
    excerpt = get_excerpt(files, "memory/long.md")
    assert (excerpt.from_line, excerpt.to_line, excerpt.total_lines) == (1, 200, 500)
    assert excerpt.text.split("\n")[0] == "line 1" and excerpt.text.split("\n")[-1] == "line 200"
    assert not excerpt.truncated


def test_range_is_exact_and_one_based(files: Path) -> None:
    excerpt = get_excerpt(files, "memory/long.md", from_line=499, lines=10)
    assert (excerpt.text, excerpt.from_line, excerpt.to_line) == ("line 499\nline 500", 499, 500)
    past = get_excerpt(files, "memory/long.md", from_line=900)
    assert (past.text, past.to_line, past.total_lines) == ("", 899, 500)


def test_core_files_and_entries(files: Path) -> None:
    excerpt = get_excerpt(files, "MEMORY.md", from_line=3, lines=1)
    assert excerpt.text == "- fact one"
    assert [e.entry_hash for e in excerpt.entries] == [entry_hash("- fact one")]
    assert get_excerpt(files, "USER.md").text == "likes tea"


def test_symlink_inside_scope_is_followed(files: Path) -> None:
    assert get_excerpt(files, "memory/alias.md", lines=1).text == "line 1"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "required"),
        ("../SOUL.md", "'..'"),
        ("memory/../SOUL.md", "'..'"),
        ("memory/../../etc/passwd", "'..'"),
        ("/etc/passwd", "relative"),
        ("C:/x.md", "relative"),
        ("memory/a\x00.md", "NUL"),
        ("memory\\long.md", "separators"),
        ("memory//long.md", "empty"),
        ("./MEMORY.md", "'.'"),
        ("SOUL.md", "MEMORY.md, USER.md or under memory/"),
        (".dreaming/DREAMS.md", "under memory/"),
        ("memory", "under memory/"),
        ("memory/out.md", "outside the workspace"),
        ("memory/outdir/outside.md", "outside the workspace"),
        ("memory/soul.md", "outside the memory scope"),
        ("memory/dir.md", "not a file"),
    ],
)
def test_traversal_and_scope_are_rejected(files: Path, path: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace(".", r"\.").replace("(", r"\(")):
        get_excerpt(files, path)


def test_missing_file_is_not_found(files: Path) -> None:
    with pytest.raises(NotFound):
        get_excerpt(files, "memory/nope.md")


@pytest.mark.parametrize(("from_line", "lines"), [(0, 10), (-1, 10), (1, 0), (1, -5)])
def test_bad_ranges_are_rejected(files: Path, from_line: int, lines: int) -> None:
    with pytest.raises(InvalidArgument):
        get_excerpt(files, "memory/long.md", from_line=from_line, lines=lines)


def test_huge_lines_are_capped(workspace: Path) -> None:
    write(workspace, "memory/big.md", ("z" * 60_000 + "\n") * 3)
    excerpt = get_excerpt(workspace, "memory/big.md")
    assert excerpt.truncated and len(excerpt.text) == 100_000
    assert (excerpt.from_line, excerpt.to_line) == (1, 2)
