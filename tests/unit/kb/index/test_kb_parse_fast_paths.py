"""The fast paths of the per-file parse give what the plain rules give.

- ``parse_entries`` on clean files (ASCII, " " the only whitespace: the case its short
  paths serve), against the frozen line loop ``entries_reference``;
- ``chunk_lines``' search over the joined text against its general path (by pieces);
- ``parse_batches``' lifecycle rows against the same rows written with ``json.dumps``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from entries_reference import parse_entries_reference

from services.kb.index import chunking
from services.kb.index.chunking import Chunk, chunk_lines, split_lines
from services.kb.index.entries import parse_entries, parse_frontmatter
from services.kb.index.indexer_parse import SourceFile, parse_batches

CLEAN_LINES = [
    "", "- a", "* b", "+ c", "-", "- ", "1. d", "10) e", "1.x", "-x", "**bold** text", "- x -", "* y *", "- - -", "***",
    "___", "  - nested", "  * * *", "   - - -", "    code", "   text", "text", "a  b", "trailing ", " leading",
    "# h", "## h2", "#tag", "   ### h3", "    # no", "```", "```py", "~~~", "  ```", "<b>bold</b>", "a < b", "[x] done",
    "- [ ] todo", "[link](http://x)", "- item <!-- importance: 7 -->", "- v <!-- importance: 10 -->",
    "<!-- importance: 2 -->", "[importance: 9]", "k <!-- x: y --> <!-- importance: 2 -->", "[ ] m <!-- importance: 3 -->",
    "t [importance: 2] <!-- importance: 9 -->",
    "q  r <!-- importance: 3 -->", "- u <!-- importance: 1 --> ", "w<!-- importance: 7 -->", "x <!-<!-- importance: 3 -->",
    "<!-- invalid_at: 2025-01-01T00:00:00Z -->", "y -->", "<!--", "  [importance: 6] nested", "z <!-- Importance: 3 -->",
]


def test_clean_files_agree_with_the_line_loop() -> None:
    rng = random.Random(20250611)
    for _ in range(10_000):
        lines = [rng.choice(CLEAN_LINES) for _ in range(rng.randint(0, 16))]
        if rng.random() < 0.2:
            lines = ["---", rng.choice(["importance: 8", "x: y"]), "---", *lines]
        lines = split_lines("\n".join(lines) + rng.choice(["", "\n"]))
        frontmatter = parse_frontmatter(lines)
        assert parse_entries(lines, frontmatter) == parse_entries_reference(lines, frontmatter), lines


def random_lines(rng: random.Random, longest: int) -> list[str]:
    return ["x" * rng.randint(0, longest) for _ in range(rng.randint(1, 40))]


def test_chunking_by_search_agrees_with_chunking_by_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    cases = []
    for _ in range(3_000):
        tokens = rng.choice([1, 2, 3, 5, 10, 40])
        cases.append((random_lines(rng, tokens * 4), tokens, rng.choice([0, 1, 2, 3, 9, 100])))
    fast = [chunk_lines(lines, tokens, overlap) for lines, tokens, overlap in cases]
    monkeypatch.setattr(chunking, "_chunk_whole_lines", lambda *args: None)
    assert fast == [chunk_lines(lines, tokens, overlap) for lines, tokens, overlap in cases]
    assert all(type(chunk) is Chunk for chunks in fast for chunk in chunks)


def test_lines_holding_a_newline_take_the_general_path() -> None:
    assert chunk_lines(["a\nb", "c"], 1, 0) == [Chunk(1, 1, "a\nb"), Chunk(2, 2, "c")]


def test_lifecycle_rows_keep_their_format(tmp_path: Path) -> None:
    names = ["a.md", 'quo"te.md', "brace{x}%s.md", "会議.md", "back\\slash.md", "tab\tname.md"]
    for name in names:
        (tmp_path / name).write_text("- one\n- two <!-- importance: 3 -->\n")
    files: list[SourceFile] = [(name, None, 1_700_000_000_123_456_789 + n) for n, name in enumerate(names)]
    rows: list[tuple[str, str]] = []
    list(parse_batches(tmp_path, files, 400, 80, 1024, lifecycle=rows))
    expected = [
        (e.entry_hash, f'["{e.entry_hash}",{json.dumps(name, ensure_ascii=False)},{mtime}]')
        for name, _, mtime in files
        for e in parse_entries(split_lines((tmp_path / name).read_text()))
    ]
    assert rows == expected and len(rows) == 2 * len(names)
