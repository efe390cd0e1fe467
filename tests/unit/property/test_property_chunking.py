"""Properties of line-aligned chunking (``services/kb/index/chunking.py``) and its line model.

For any lines and any chunk size and overlap:

- the chunks cover every line, in order, and each chunk's range is whole lines of the input;
  its text is exactly those lines joined by newlines, except a chunk of one over-long line,
  whose text is a segment of that line;
- chunking progresses: each chunk starts after the previous one (a later line, or a later
  segment of the same over-long line), so it ends on any input;
- no chunk is longer than ``chunk_tokens * 4`` characters; only a line that is longer
  than that alone is split, and its segments together are that line: they tile it, except
  inside a word longer than a chunk, where they overlap by half a chunk;
- a long line is cut so that Search finds every word of it by its own text: a word (text
  between spaces and ASCII controls) no longer than a chunk is whole in one segment, a longer
  one starts a segment that holds a chunk's length of it, and every stretch of a word of up to
  half a chunk is whole in one segment;
- the carried-forward overlap is whole lines that fit in ``chunk_overlap * 4`` characters;
- the fast path (no line needs splitting) gives what the general path gives;
- ``split_lines`` keeps every character but the line ends, and drops a trailing ``\\r``.
"""

from __future__ import annotations

import re
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from services.kb.index import chunking
from services.kb.index.chunking import CHARS_PER_TOKEN, Chunk, chunk_lines, segment_spans, split_lines

LINES = st.lists(
    st.one_of(
        st.text(st.sampled_from("ab \t#-*é東"), max_size=12),
        st.just(""),
        st.text(st.sampled_from("xy"), min_size=20, max_size=90),  # longer than the small chunk sizes
        st.text(st.sampled_from("xy \x01-"), min_size=20, max_size=90),  # long, with words of every length
    ),
    max_size=40,
)
BREAK = re.compile(r"[\x00-\x20\x7f]")
WORD = re.compile(r"[^\x00-\x20\x7f]+")
TOKENS = st.integers(min_value=-2, max_value=12)
OVERLAP = st.integers(min_value=-2, max_value=14)
FIRST = st.integers(min_value=1, max_value=5)


def _segments_of(chunks: list[Chunk], line: int) -> list[Chunk]:
    return [c for c in chunks if c.start_line == c.end_line == line]


def _check(lines: list[str], tokens: int, overlap: int, first: int, chunks: list[Chunk]) -> None:
    max_chars = max(1, tokens) * CHARS_PER_TOKEN
    if not lines:
        assert chunks == []
        return
    last_line = first + len(lines) - 1
    assert chunks[0].start_line == first and chunks[-1].end_line == last_line
    covered: set[int] = set()
    for chunk in chunks:
        assert first <= chunk.start_line <= chunk.end_line <= last_line
        assert len(chunk.text) <= max_chars, "a chunk is over its size"
        covered.update(range(chunk.start_line, chunk.end_line + 1))
        span = lines[chunk.start_line - first : chunk.end_line - first + 1]
        if len(lines[chunk.start_line - first]) <= max_chars or chunk.start_line != chunk.end_line:
            assert chunk.text == "\n".join(span), "a chunk is not whole lines"
        else:
            assert chunk.text in span[0], "a segment is not part of its line"
    assert covered == set(range(first, last_line + 1)), "a line is in no chunk"
    for before, after in zip(chunks, chunks[1:]):
        assert after.start_line >= before.start_line and after.end_line >= before.end_line
        same_line_segments = before.start_line == before.end_line == after.start_line == after.end_line
        assert after.start_line > before.start_line or same_line_segments, "no progress"
        assert after.start_line <= before.end_line + 1, "a gap between chunks"
        if after.start_line <= before.end_line and after.start_line != after.end_line:
            carried = "\n".join(lines[after.start_line - first : before.end_line - first + 1])
            assert len(carried) + 1 <= max(0, min(overlap, max(1, tokens) - 1)) * CHARS_PER_TOKEN + 1
    for number, line in enumerate(lines, start=first):
        if len(line) > max_chars:
            spans = segment_spans(line, max_chars)
            assert [c.text for c in _segments_of(chunks, number)] == [line[a:b] for a, b in spans]
            _check_spans(line, max_chars, spans)


def _check_spans(line: str, max_chars: int, spans: list[tuple[int, int]]) -> None:
    """The segments of one long line, by their offsets (module docstring)."""
    assert spans[0][0] == 0 and spans[-1][1] == len(line)
    for (start, end), (after, _) in zip(spans, spans[1:]):
        assert start < after <= end, "a gap between segments, or no progress"
        if after < end:  # an overlap: only inside one word longer than a chunk, by half a chunk
            assert after == end - max_chars // 2 and not BREAK.search(line, after - 1 if after else 0, end + 1)
    assert all(0 < end - start <= max_chars for start, end in spans)
    for word in WORD.finditer(line):
        a, b = word.span()
        if b - a <= max_chars:
            assert any(s <= a and b <= e for s, e in spans), f"the word at {a} is cut"
        else:
            assert (a, a + max_chars) in spans, f"the long word at {a} does not start a segment"
    half = max_chars // 2
    for a in range(len(line) - half + 1):
        if not BREAK.search(line, a, a + half):
            assert any(s <= a and a + half <= e for s, e in spans), f"the stretch at {a} is in no segment"


@given(lines=LINES, tokens=TOKENS, overlap=OVERLAP, first=FIRST)
def test_chunks_cover_every_line_whole_and_in_bounds(lines: list[str], tokens: int, overlap: int, first: int) -> None:
    _check(lines, tokens, overlap, first, chunk_lines(lines, tokens, overlap, first))


@given(lines=LINES, tokens=TOKENS, overlap=OVERLAP, first=FIRST)
def test_the_fast_path_gives_what_the_general_path_gives(lines: list[str], tokens: int, overlap: int, first: int) -> None:
    fast = chunk_lines(lines, tokens, overlap, first)
    with mock.patch.object(chunking, "_chunk_whole_lines", lambda *_: None):
        general = chunk_lines(lines, tokens, overlap, first)
    assert fast == general


@given(text=st.text(st.sampled_from("ab\r\n é"), max_size=60))
def test_split_lines_keeps_every_character_but_the_line_ends(text: str) -> None:
    lines = split_lines(text)
    assert all("\n" not in line for line in lines)
    rebuilt = "\n".join(lines)
    expected = "\n".join(line[:-1] if line.endswith("\r") else line for line in text.split("\n"))
    if text.endswith("\n"):
        expected = expected[:-1]  # a final newline starts no line
    assert rebuilt == expected
