"""Entries (the GC's identity unit), frontmatter and importance parsing."""

from __future__ import annotations

import hashlib

import pytest

from services.kb.index.chunking import split_lines
from services.kb.index.entries import Frontmatter, entry_hash, normalise, parse_entries, parse_frontmatter, parse_importance
from services.kb.index.provenance import classify


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("7", 7), (" 10 ", 10), ('"3"', 3), ("0", 1), ("-4", 1), ("42", 10), ("high", None), ("7.5", None), ("", None)],
)
def test_parse_importance_clamps_integers_and_ignores_the_rest(raw: str, expected: int | None) -> None:
    assert parse_importance(raw) == expected


def test_frontmatter() -> None:
    lines = ["---", "title: x", "importance: 9", "provenance: untrusted", "---", "body"]
    fm = parse_frontmatter(lines)
    assert (fm.end_line, fm.importance, fm.provenance) == (5, 9, "untrusted")


def test_unclosed_frontmatter_is_ignored() -> None:
    fm = parse_frontmatter(["---", "importance: 9", "body"])
    assert (fm.end_line, fm.importance, fm.provenance) == (0, None, None)


def test_frontmatter_is_read_by_the_one_yaml_reader() -> None:
    """The indexer reads the header as the graph layer does: a YAML comment is no part of a value,
    and nested or quoted keys are YAML's, not a line-by-line guess."""
    lines = ["---", "importance: 7  # high", "provenance: 'untrusted' # shared", "meta:", "  importance: 2", "---", "x"]
    assert parse_frontmatter(lines) == Frontmatter(6, 7, "untrusted")
    assert parse_frontmatter(["---", "Importance: 3", "---"]) == Frontmatter(3, 3, None)  # keys are case-blind


def test_a_header_the_reader_refuses_ends_where_it_ends_and_makes_the_file_untrusted() -> None:
    lines = ["---", "importance: 9", "title: [unclosed", "---", "body"]
    assert parse_frontmatter(lines) == Frontmatter(4, None, "untrusted")
    # the case that matters: a broken header that says untrusted never leaves the file its path's trust
    broken = ["---", "provenance: untrusted", "title: [unclosed", "---", "body"]
    assert classify("MEMORY.md", parse_frontmatter(broken).provenance) == "untrusted"


def test_entries_are_blocks_and_top_level_items() -> None:
    text = "\n".join(
        [
            "# Heading",  # 1
            "",  # 2
            "- first item",  # 3
            "  continued",  # 4
            "  - nested child",  # 5
            "- second item",  # 6
            "",  # 7
            "A paragraph",  # 8
            "over two lines.",  # 9
            "",  # 10
            "```",  # 11
            "code",  # 12
            "",  # 13
            "more code",  # 14
            "```",  # 15
            "---",  # 16
            "1. numbered",  # 17
        ]
    )
    entries = parse_entries(split_lines(text))
    assert [(e.start_line, e.end_line) for e in entries] == [(3, 5), (6, 6), (8, 9), (11, 15), (17, 17)]
    assert entries[0].text == "- first item continued - nested child"
    assert entries[0].entry_hash == sha("- first item continued - nested child")
    assert all(e.importance == 5 for e in entries)


def test_hash_ignores_whitespace_and_metadata_markers() -> None:
    base = entry_hash("- deploy with blue/green")
    assert entry_hash("-   deploy  with\n  blue/green ") == base
    assert entry_hash("- deploy with blue/green <!-- invalid_at: 2025-01-01T00:00:00Z -->") == base
    assert entry_hash("- deploy with blue/green [importance: 9]") == base
    assert entry_hash("- deploy with red/black") != base
    assert normalise("a <!-- note without colon --> b") == "a <!-- note without colon --> b"


def test_identity_survives_moving_under_another_heading_and_reindenting() -> None:
    one = parse_entries(split_lines("# A\n\n- keep the logs for 30 days\n"))
    two = parse_entries(split_lines("---\nimportance: 2\n---\n## Archive\n\n* x\n\n- keep the logs\n  for 30 days\n"))
    assert one[0].entry_hash in {e.entry_hash for e in two}


def test_importance_from_frontmatter_and_markers() -> None:
    text = "\n".join(
        [
            "---",
            "importance: 8",
            "---",
            "- file default",  # 4 → 8
            "<!-- importance: 2 -->",  # 5: applies to the next entry
            "- low",  # 6 → 2
            "- inline high [importance: 10]",  # 7 → 10
            "- clamped <!-- importance: 99 -->",  # 8 → 10
            "- invalid <!-- importance: high -->",  # 9 → 8
        ]
    )
    entries = parse_entries(split_lines(text))
    assert [(e.start_line, e.importance) for e in entries] == [(4, 8), (6, 2), (7, 10), (8, 10), (9, 8)]


def test_default_importance_is_five() -> None:
    assert [e.importance for e in parse_entries(["plain note"])] == [5]
