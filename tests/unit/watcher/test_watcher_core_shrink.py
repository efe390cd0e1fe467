"""Core-shrink index of an over-budget MEMORY.md (docs/concepts/budgets.md "Core-shrink")."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import MemorySettings
from services.watcher.compose import compose
from services.watcher.core_shrink import Section, build_index, clip, sections

MEMORY = MemorySettings(8000, 3000, "warn", False, "memory")


def section(text: str, name: str) -> str:
    start = text.index(f"--- {name} ---\n") + len(f"--- {name} ---\n")
    end = text.find("\n--- ", start)
    return text[start : end if end != -1 else len(text)]


def test_sections_headings_briefs_and_lines() -> None:
    text = "\n".join(
        [
            "# Title",  # 1
            "",  # 2
            "First   prose\tline.",  # 3
            "More prose.",  # 4
            "## Projects ##",  # 5
            "### Deep heading",  # 6
            "- gateway on port 10850",  # 7
            "#hashtag is prose, not a heading",  # 8
            "##",  # 9
            "---",  # 10
            "> quoted brief",  # 11
        ]
    )
    assert sections(text) == [
        Section(1, "Title", 1, "First prose line."),
        Section(2, "Projects", 5, "gateway on port 10850"),
        Section(2, "(untitled)", 9, "quoted brief"),
    ]


def test_fenced_code_is_ignored() -> None:
    text = "\n".join(
        [
            "# Real",
            "```python",
            "# not a heading",
            "## neither",
            "```",
            "brief after fence",
            "~~~",
            "# hidden",
            "```",  # a backtick line does not close a tilde fence
            "# still hidden",
            "~~~",
            "## Second",
            "````",
            "```",  # shorter fence does not close
            "# hidden too",
            "````",
            "text",
        ]
    )
    found = sections(text)
    assert [(s.title, s.brief) for s in found] == [("Real", "brief after fence"), ("Second", "text")]


def test_unclosed_fence_runs_to_the_end() -> None:
    assert [s.title for s in sections("# A\n```\n# B\n## C\n")] == ["A"]


def test_brief_is_cut_at_100_chars() -> None:
    found = sections("## Long\n" + "word " * 60)
    assert len(found[0].brief) == 100
    assert found[0].brief.endswith("…")
    assert clip("a  b\n c", 100) == "a b c"
    assert clip("x" * 101, 100) == "x" * 99 + "…"
    assert clip("x" * 100, 100) == "x" * 100


def test_no_headings_gives_no_index() -> None:
    assert build_index("just prose\n```\n# fenced\n```\n", name="MEMORY.md", lead="LEAD") is None


def test_index_stays_within_4000_chars() -> None:
    text = "".join(f"## Section {i}\n{'detail ' * 30}\n" for i in range(500))
    index = build_index(text, name="MEMORY.md", lead="LEAD")
    assert index is not None
    assert len(index) <= 4000
    lines = index.split("\n")
    entries = [line for line in lines if line.startswith("- ## Section ")]
    assert lines[-1] == f"… {500 - len(entries)} more sections"
    assert 10 < len(entries) < 500
    assert all(len(line.split(": ", 1)[1]) <= 100 for line in entries)


def test_index_lists_everything_when_it_fits() -> None:
    index = build_index("# A\nalpha\n## B\nbeta\n", name="MEMORY.md", lead="LEAD")
    assert index == (
        "LEAD\n"
        "The full MEMORY.md stays on disk and in your archive: find an entry with `memory_search`, "
        'then read it exactly with `memory_get` (path "MEMORY.md", the line range below).\n'
        "\n"
        "Sections of MEMORY.md:\n"
        "- # A (line 1): alpha\n"
        "- ## B (line 3): beta"
    )


def _big_memory(tmp_path: Path) -> bytes:
    body = "# Memory\nDurable facts about the gateway.\n```\n# fenced heading\n```\n"
    body += "".join(f"## Topic {i}\nbrief {i}: {'long ' * 30}\n{'SECRETBODY ' * 40}\n" for i in range(200))
    data = body.encode("utf-8")
    (tmp_path / "MEMORY.md").write_bytes(data)
    return data


@pytest.mark.parametrize("level", ["warn", "error"])
def test_shrink_replaces_the_full_text(tmp_path: Path, level: str) -> None:
    data = _big_memory(tmp_path)
    memory = MemorySettings(8000, 3000, level, False, "memory")
    result = compose(tmp_path, memory, archive_enabled=True)
    body = section(result.text, "MEMORY.md")
    report = result.report("MEMORY.md")
    assert report.shrunk and report.over_budget and not report.truncated
    loud = "⚠️ MEMORY OVER BUDGET." if level == "warn" else "🛑 MEMORY OVER BUDGET — consolidate"
    assert body.startswith(loud)
    assert "SECRETBODY" not in result.text
    assert "fenced heading" not in result.text
    assert "- # Memory (line 1): Durable facts about the gateway." in body
    entries = [line for line in body.split("\n") if line.startswith("- ## Topic ")]
    assert entries[0] == "- ## Topic 0 (line 6): brief 0: " + "long " * 17 + "long…"
    assert all(len(line.split(": ", 1)[1]) <= 100 and line.endswith("long…") for line in entries)
    assert "`memory_search`" in body and "`memory_get`" in body
    assert len(body.rstrip("\n")) <= 4000
    assert "more sections" in body
    assert (tmp_path / "MEMORY.md").read_bytes() == data
    assert "(shrunk)" in result.budget_report()


def test_no_shrink_when_archive_disabled(tmp_path: Path) -> None:
    _big_memory(tmp_path)
    result = compose(tmp_path, MEMORY, archive_enabled=False)
    body = section(result.text, "MEMORY.md")
    assert body.startswith("⚠️ MEMORY OVER BUDGET.")
    assert "SECRETBODY" in body
    assert "Sections of MEMORY.md" not in body
    assert not result.report("MEMORY.md").shrunk


def test_no_shrink_without_headings(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("plain line\n" * 900, encoding="utf-8")
    result = compose(tmp_path, MEMORY, archive_enabled=True)
    body = section(result.text, "MEMORY.md")
    assert body.startswith("⚠️ MEMORY OVER BUDGET.")
    assert body.count("plain line") == 900
    assert not result.report("MEMORY.md").shrunk


def test_no_shrink_under_budget(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# A\nshort\n", encoding="utf-8")
    result = compose(tmp_path, MEMORY, archive_enabled=True)
    assert section(result.text, "MEMORY.md") == "# A\nshort\n"


def test_user_md_is_never_shrunk(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_text("# User\n" + "u" * 4000, encoding="utf-8")
    result = compose(tmp_path, MEMORY, archive_enabled=True)
    assert not result.report("USER.md").shrunk
    assert "u" * 4000 in section(result.text, "USER.md")
