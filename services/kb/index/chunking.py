"""Line-aligned chunking (docs/architecture.md "Limits and defaults": about 4 chars a token, overlap carried forward).

A chunk is a run of whole lines of at most ``chunk_tokens * 4`` characters
(newlines counted). The next chunk starts with the trailing lines of the previous
one that fit in ``chunk_overlap * 4`` characters, so context carries forward.
Overlap is clamped to ``[0, chunk_tokens - 1]`` and the start always advances,
so chunking terminates on any input. A single line longer than a chunk is split
into segments of at most a chunk's length that keep its line number; each
segment is a chunk of its own (``start_line == end_line``), never joined to the
lines around it nor carried into the next chunk, so every other chunk is whole
lines.

**Where a long line is cut** (``segment_spans``; docs/concepts/archive.md "Knowledge archive (KB)" ›
Long words). A *word* here is a run of characters between ``BREAKS`` (space and
the ASCII control characters): a word boundary under every tokenizer, and where
Search splits a query into words (``query``). A segment ends at the last word
boundary within a chunk's length, so a word no longer than a chunk is never cut
and a longer word starts a segment of its own: that segment holds its first
chunk's length of characters. Inside such a word (no boundary within a chunk's
length) the segment is cut at the chunk's length and the next one starts half a
chunk earlier, so every stretch of the word of up to half a chunk (a token in a
minified JSON line) is whole in one segment. Those segments overlap by half a
chunk; all others tile the line. So Search finds every word of the line by its
own text (a long one by its first ``query.word_chars`` characters: a chunk's
length, or the query's 1,000).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

CHARS_PER_TOKEN: Final = 4
BREAKS: Final = r"\x00-\x20\x7f"  # a regex class body: space and the ASCII control characters
_BREAK: Final = re.compile(f"[{BREAKS}]")


class Chunk(NamedTuple):
    """A chunk: 1-based inclusive line range and its text."""

    start_line: int
    end_line: int
    text: str


def _pieces(lines: list[str], max_chars: int, first_line: int) -> tuple[list[tuple[int, str]], set[int]]:
    """The lines as pieces of at most ``max_chars`` (line number, text), and the indexes of the
    pieces that are segments of a longer line."""
    pieces: list[tuple[int, str]] = []
    segments: set[int] = set()
    for index, line in enumerate(lines):
        number = index + first_line
        if len(line) <= max_chars:
            pieces.append((number, line))
            continue
        for segment in segments_of(line, max_chars):
            segments.add(len(pieces))
            pieces.append((number, segment))
    return pieces, segments


def segments_of(line: str, max_chars: int) -> list[str]:
    """``line`` cut into segments of at most ``max_chars`` (``segment_spans``)."""
    return [line[start:end] for start, end in segment_spans(line, max_chars)]


def segment_spans(line: str, max_chars: int) -> list[tuple[int, int]]:
    """Where ``line`` is cut (module docstring, "Where a long line is cut"): ``(start, end)`` offsets.

    A segment ends before a break that stands right after a full chunk's length, else after the
    last break within it; with no break in it, at ``max_chars``, and the next one starts
    ``max_chars // 2`` earlier. ``max_chars`` is at least 2 (chunks are 4 characters a token), so
    every segment advances.
    """
    spans: list[tuple[int, int]] = []
    start, size, back = 0, len(line), max_chars // 2
    while size - start > max_chars:
        end = start + max_chars
        if _BREAK.match(line, end):
            cut = end
        else:
            found = None
            for found in _BREAK.finditer(line, start, end):
                pass
            cut = found.end() if found is not None else -1
        if cut > start:
            spans.append((start, cut))
            start = cut
        else:
            spans.append((start, end))
            start = end - back
    spans.append((start, size))
    return spans


def chunk_lines(lines: list[str], chunk_tokens: int, chunk_overlap: int, first_line: int = 1) -> list[Chunk]:
    """Split a file's lines (without newlines) into overlapping line-aligned chunks.

    ``lines[0]`` is line ``first_line`` of the file (the indexer passes the lines
    after the frontmatter). ``chunk_tokens`` below 1 is treated as 1. Returns no
    chunk for an empty file.
    """
    max_chars = max(1, chunk_tokens) * CHARS_PER_TOKEN
    overlap_chars = max(0, min(chunk_overlap, max(1, chunk_tokens) - 1)) * CHARS_PER_TOKEN
    if lines and (whole := _chunk_whole_lines(lines, max_chars, overlap_chars, first_line)) is not None:
        return whole
    pieces, segments = _pieces(lines, max_chars, first_line)
    chunks: list[Chunk] = []
    start = 0
    while start < len(pieces):
        end = start
        size = len(pieces[start][1])
        while (
            start not in segments and end + 1 < len(pieces) and end + 1 not in segments
            and size + 1 + len(pieces[end + 1][1]) <= max_chars
        ):
            end += 1
            size += 1 + len(pieces[end][1])
        chunks.append(_make_chunk(pieces[start : end + 1]))
        if end + 1 >= len(pieces):
            break
        if start in segments or end + 1 in segments:
            start = end + 1  # a segment is a chunk of its own: nothing is carried into or out of it
            continue
        # Carry forward the trailing whole lines that fit in the overlap budget.
        following = end + 1
        carried = 0
        back = end
        while back > start and pieces[back][0] != pieces[end + 1][0]:
            cost = len(pieces[back][1]) + 1
            if carried + cost > overlap_chars:
                break
            carried += cost
            back -= 1
        next_start = back + 1 if back < end else following
        start = max(next_start, start + 1)
    return chunks


def _chunk_whole_lines(lines: list[str], max_chars: int, overlap_chars: int, first_line: int) -> list[Chunk] | None:
    """``chunk_lines`` when no line needs splitting (the common case), or None when one does.

    It works on the text (the lines joined by newlines) with a few searches per chunk
    rather than a pass over the lines: a chunk starting at offset ``start`` ends at the
    last newline within ``max_chars`` of it (its text is the lines before that newline),
    and the next one starts at the first line (not its first) starting within
    ``overlap_chars`` of that newline's successor (the longest tail that fits). Line
    numbers come from counting newlines, each stretch of the text once (str.count is not
    memchr-fast).
    """
    text = "\n".join(lines)
    size = len(text)
    chunks: list[Chunk] = []
    new = tuple.__new__  # Chunk(...) without the generated __new__
    find, rfind, count = text.find, text.rfind, text.count
    start = 0  # offset of the chunk's first line
    number = first_line  # its line number
    counted = 0  # the newlines before this offset are counted: it starts line counted_line
    counted_line = first_line
    while size - start > max_chars:
        end = rfind("\n", start, start + max_chars + 1)  # the newline after the chunk's last line
        if end < 0:
            return None  # the line at start is longer than a chunk
        last = counted_line + count("\n", counted, end)
        chunks.append(new(Chunk, (number, last, text[start:end])))
        counted, counted_line = end + 1, last + 1
        start = find("\n", max(end - overlap_chars, start), end + 1) + 1
        number = counted_line - count("\n", start, counted)
    last = counted_line + count("\n", counted, size)  # the rest fits
    if last != len(lines) + first_line - 1:
        return None  # a "line" holding a newline (not from split_lines): the general path
    chunks.append(new(Chunk, (number, last, text[start:])))
    return chunks


def _make_chunk(pieces: list[tuple[int, str]]) -> Chunk:
    parts: list[str] = []
    previous = -1
    for number, text in pieces:
        if parts and number == previous:
            parts[-1] += text
        else:
            parts.append(text)
        previous = number
    return Chunk(pieces[0][0], pieces[-1][0], "\n".join(parts))


def split_lines(text: str) -> list[str]:
    """``text`` as lines without terminators: ``\\n`` only (a trailing ``\\r`` is dropped).

    The indexer and ``excerpt`` both use this, so line numbers always agree. A
    final newline does not start another line.
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" not in text:  # the common case: no line to trim
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]
