"""Line-aligned chunking (docs/architecture.md "Limits and defaults": about 4 chars a token, overlap carried forward).

A chunk is a run of whole lines of at most ``chunk_tokens * 4`` characters
(newlines counted). The next chunk starts with the trailing lines of the previous
one that fit in ``chunk_overlap * 4`` characters, so context carries forward.
Overlap is clamped to ``[0, chunk_tokens - 1]`` and the start always advances,
so chunking terminates on any input. A single line longer than a chunk is split
into chunk-sized segments that keep its line number; each segment is a chunk of
its own (``start_line == end_line``), never joined to the lines around it nor
carried into the next chunk, so every other chunk is whole lines. Segments of
one line never overlap.
"""

from __future__ import annotations

from typing import Final, NamedTuple

CHARS_PER_TOKEN: Final = 4


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
        for start in range(0, len(line), max_chars):
            segments.add(len(pieces))
            pieces.append((number, line[start : start + max_chars]))
    return pieces, segments


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
