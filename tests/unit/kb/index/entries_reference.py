"""The plain line loop of ``services.kb.index.entries.parse_entries``, without its fast paths, kept
as the oracle of the differential test (test_kb_entries_differential.py)."""

from __future__ import annotations

import hashlib

from gateway.markdown import HEADING, closes_fence, opens_fence
from services.kb.index.entries import (
    _BREAK,
    _LIST_ITEM,
    DEFAULT_IMPORTANCE,
    Entry,
    Frontmatter,
    _marker_importance,
    normalise,
    parse_frontmatter,
)


def parse_entries_reference(lines: list[str], frontmatter: Frontmatter | None = None) -> list[Entry]:
    """The entries of a file split into lines (rules in the module docstring)."""
    fm = frontmatter if frontmatter is not None else parse_frontmatter(lines)
    default = fm.importance if fm.importance is not None else DEFAULT_IMPORTANCE
    entries: list[Entry] = []
    append = entries.append
    sha256 = hashlib.sha256
    heading, thematic_break, list_item = HEADING.match, _BREAK.match, _LIST_ITEM.match
    # The open block is always the contiguous run of lines block_start..number-1 (any
    # line that is not part of it closes it first); 0 = no open block.
    block_start = 0
    block_importance: int | None = None
    block_markup = False  # a line of the block may hold a marker: the block needs the full normalise
    pending: int | None = None
    fence: str | None = None
    number = fm.end_line
    # The hot loop of a full index (a million lines for 50 MB): each regex runs only when
    # the line's first non-blank character could start what it matches.
    for line in lines[fm.end_line :]:
        number += 1
        stripped = line.strip()
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
            continue
        first = stripped[:1]
        boundary = (
            not first
            or (first == "#" and heading(line) is not None)
            or (first in "-*_" and stripped[-1] == first and thematic_break(line) is not None)
        )
        marker: int | None = None
        markup = False
        if not boundary and ("<!--" in line or "[" in line):
            markup = True
            marker = _marker_importance(line)
            if not normalise(line):
                boundary = True  # a marker-only line: it speaks for the next entry
                if marker is not None:
                    pending = marker
        if block_start and (boundary or ((line[0] in "-*+" or line[0].isdecimal()) and list_item(line))):
            # Close the open block (inlined: about 40 entries per file).
            end = number - 1
            if block_markup:
                text = normalise("\n".join(lines[block_start - 1 : end]))
            elif block_start == end:
                text = " ".join(lines[end - 1].split())
            else:
                text = " ".join(" ".join(lines[block_start - 1 : end]).split())
            if text:
                importance = default if block_importance is None else block_importance
                append(Entry(block_start, end, text, sha256(text.encode()).hexdigest(), importance))
            block_start = 0
        if boundary:
            continue
        if not block_start:
            block_start = number
            block_importance = pending
            block_markup = False
            pending = None
        if markup:
            block_markup = True
        if marker is not None:
            block_importance = marker
        if first in "`~":
            fence = opens_fence(line)
            if fence is not None:
                block_markup = True  # the fenced lines are not checked one by one
    if block_start:
        _close(entries, lines, block_start, len(lines), block_importance, default, block_markup)
    return entries


def _close(
    entries: list[Entry], lines: list[str], start: int, end: int, importance: int | None, default: int, markup: bool
) -> None:
    """Append the entry of lines ``start..end`` (1-based, inclusive) unless it is empty."""
    if markup:
        text = normalise("\n".join(lines[start - 1 : end]))
    elif start == end:
        text = " ".join(lines[start - 1].split())
    else:
        text = " ".join(" ".join(lines[start - 1 : end]).split())
    if text:
        digest = hashlib.sha256(text.encode()).hexdigest()
        entries.append(Entry(start, end, text, digest, default if importance is None else importance))
