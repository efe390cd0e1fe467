"""The one definition of markdown's headings, fences and frontmatter, and the services reading it alike."""

from __future__ import annotations

import pytest

from gateway.markdown import closes_fence, fenced, frontmatter_end, heading, opens_fence
from services.dreaming.apply import sections
from services.kb.graph.parse import parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_entries, parse_frontmatter
from services.watcher.core_shrink import sections as core_sections


@pytest.mark.parametrize(("line", "expected"), [
    ("# User", (1, "User")),
    ("   ## Deploy ##", (2, "Deploy")),
    ("###### six", (6, "six")),
    ("#", (1, "")),
    ("#\tTabbed", (1, "Tabbed")),
    ("# C#", (1, "C#")),
    ("### ###", (3, "")),
    ("#hashtag", None),
    ("    # indented four", None),
    ("####### seven", None),
])
def test_a_heading_is_commonmark_s_atx_heading(line: str, expected: tuple[int, str] | None) -> None:
    assert heading(line) == expected


def test_a_long_heading_of_blanks_is_read_in_linear_time() -> None:
    assert heading("# a" + " \t" * 200_000 + "#") == (1, "a")


def test_a_fence_closes_with_its_own_character_at_least_as_long_and_nothing_after() -> None:
    assert opens_fence("```python") == "```" and opens_fence("  ~~~~") == "~~~~"
    assert opens_fence("``` a ` b") is None and opens_fence("    ```") is None
    assert closes_fence("````", "```") and closes_fence("```  ", "```")
    assert not closes_fence("~~~", "```") and not closes_fence("```python", "```") and not closes_fence("``", "```")
    assert fenced(["a", "```", "# x", "```py", "```", "# y"]) == [False, True, True, True, True, False]
    assert fenced(["~~~", "never closed", "# z"]) == [True, True, True]


def test_frontmatter_opens_on_the_first_line_and_closes_at_the_next_delimiter() -> None:
    assert frontmatter_end(["---", "a: 1", "..."]) == 2
    assert frontmatter_end(["--- ", "a: 1", "---\t", "---"]) == 2
    assert frontmatter_end([" ---", "a: 1", "---"]) is None
    assert frontmatter_end(["---", "a: 1", " ---"]) is None
    assert frontmatter_end(["---", "a", "b", "---"], max_lines=2) is None


TEXT_WITH_AN_INFO_STRING_INSIDE = "```\ncode\n```python\n# Inside\n```\n# Outside\n\nprose\n"


def test_dreaming_the_watcher_and_the_kb_agree_on_the_fenced_heading() -> None:
    assert [h.text for h in sections.headings(TEXT_WITH_AN_INFO_STRING_INSIDE)] == ["Outside"]
    assert [s.title for s in core_sections(TEXT_WITH_AN_INFO_STRING_INSIDE)] == ["Outside"]
    entries = parse_entries(split_lines(TEXT_WITH_AN_INFO_STRING_INSIDE))
    assert [(e.start_line, e.end_line) for e in entries] == [(1, 5), (8, 8)]


@pytest.mark.parametrize(("text", "has_frontmatter"), [
    ("---\nimportance: 9\ntitle: T\n---\nbody\n", True),
    ("--- \nimportance: 9\ntitle: T\n...\nbody\n", True),
    (" ---\nimportance: 9\ntitle: T\n---\nbody\n", False),  # the indexer took this one, the graph did not
    ("---\nimportance: 9\ntitle: T\n  ---\nbody\n", False),  # nor this one
])
def test_the_indexer_and_the_graph_see_the_same_frontmatter(text: str, has_frontmatter: bool) -> None:
    indexer = parse_frontmatter(split_lines(text))
    graph = parse_note("n", text)
    assert (indexer.end_line > 0, indexer.importance == 9) == (has_frontmatter, has_frontmatter)
    assert (graph.title == "T") == has_frontmatter
