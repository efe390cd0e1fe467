"""The fast ``parse_entries`` gives exactly what the original line loop (``entries_reference``) gives:
on a corpus made by the benchmark's generator, and on random files made of the lines that matter
to the rules (fences, markers, list items, breaks, odd whitespace)."""

from __future__ import annotations

import random
from pathlib import Path

from bench_modules import bench
from entries_reference import parse_entries_reference

from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_entries, parse_frontmatter

PIECES = [
    "", " ", "\t", "  ", "\u00a0", "\x0c", "\x1c", "\u3000",
    "- a", "-", "- ", "-\tx", "* b", "+ c", "1. d", "10) e", "1.x", "-x", "1.", "1)", "٣) arabic digit", "１. wide digit",
    "  - nested", "    code", " continued  with  spaces ", "tab\tinside", "text\x0bvt", "trailing ", " leading",
    "# h", "#h", "####### seven", "   ### h3", "    # no", "#",
    "---", "***", "___", "- - -", " * * * ", "_ _", "--", "-- -", "* * x",
    "```", "```py", "````", "~~~", "  ```", "    ```", "\t```", "- ```", "x ```", "``", "~~~~ ", "``` <!-- importance: 3 -->",
    "text", "more text [importance: 7]", "<!-- importance: 2 -->", "[importance: 9]", "[ importance : 11 ]",
    "<!-- a: b --> [importance: 4]", "<!-- note -->", "[x] done", "- [ ] todo", "<!--", "-->", "<!-- invalid_at: x",
    "y -->", "<!-- importance: high -->", "[importance: 0]", "会議 <!-- importance: 99 -->", "a\r", "\r", "b]",
    "> quote", "emoji 👍🏽 text", "zero\u200bwidth", "soft\xadhyphen", "nul\x00byte",
]


def texts_agree(text: str) -> None:
    lines = split_lines(text)
    frontmatter = parse_frontmatter(lines)
    assert parse_entries(lines, frontmatter) == parse_entries_reference(lines, frontmatter), text


def test_generated_bench_corpus_agrees(tmp_path: Path) -> None:
    bench("kb_corpus").generate_corpus(tmp_path, 7, 400, 2.0)
    paths = sorted(tmp_path.rglob("*.md"))
    assert len(paths) > 400
    for path in paths:
        texts_agree(path.read_bytes().decode("utf-8", errors="replace").removeprefix("\ufeff"))


def test_random_files_of_tricky_lines_agree() -> None:
    rng = random.Random(20240601)
    for _ in range(20_000):
        lines = [rng.choice(PIECES) for _ in range(rng.randint(0, 14))]
        if rng.random() < 0.2:
            lines = ["---", rng.choice(["importance: 8", "x: y", "importance: high"]), rng.choice(["---", "...", "x"]), *lines]
        texts_agree("\n".join(lines) + rng.choice(["", "\n", "\n\n"]))


def test_lines_that_are_not_from_split_lines_agree() -> None:
    # parse_entries takes any list of strings: ones holding newlines or a trailing \r too.
    for lines in (["- a\n- b", "text"], ["a\r", "b\r\n", "- c"], ["```", "x\n```", "y"]):
        assert parse_entries(lines) == parse_entries_reference(lines)
