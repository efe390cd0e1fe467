"""Markdown's block structure as every service reads it: headings, code fences, frontmatter.

One definition, so the KB's entries and graph, the watcher's core-shrink index and dreaming's
sections and pinned rules cannot disagree on what a heading, a fence or a frontmatter header is.
The rules are CommonMark's; a line is given without its line end.

- **Heading**: up to three spaces, one to six ``#``, then a space or a tab or the end of the line.
  Its text is the rest, without a closing run of ``#`` that stands alone after a blank.
- **Fence**: up to three spaces, then three or more backticks or tildes, opens a fenced code block
  (a backtick fence's info string holds no backtick). A line of the same character, at least as
  many, indented up to three spaces and followed only by blanks, closes it; an unclosed block runs
  to the end of the text.
- **Frontmatter**: the text's first line (after a byte order mark) is ``---``, followed only by
  blanks; it ends at the next line that is ``---`` or ``...``, followed only by blanks. Both
  delimiter lines start at the first column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

HEADING: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")  # a prefix: ``HEADING.match(line)`` tells
_FENCE_OPEN: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
FRONTMATTER_OPEN: Final = re.compile(r"---[ \t]*")
FRONTMATTER_CLOSE: Final = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


def heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of the heading ``line`` is, or None when it is none."""
    match = HEADING.match(line)
    if match is None:
        return None
    return len(match.group(1)), _without_closing_hashes(line[match.end() :])


def _without_closing_hashes(text: str) -> str:
    """``text`` without its closing ``#`` run (linear: no regex scans a long run of blanks)."""
    stripped = text.rstrip(" \t")
    body = stripped.rstrip("#")
    if body != stripped and (not body or body[-1] in " \t"):
        return body.strip(" \t")
    return stripped.strip(" \t")


def opens_fence(line: str) -> str | None:
    """The run of backticks or tildes that ``line`` opens a fenced code block with, or None."""
    match = _FENCE_OPEN.match(line)
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None
    return match.group(1)


def closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes the block that ``fence`` (the opening run) opened."""
    match = _FENCE_CLOSE.match(line)
    return match is not None and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)


def fenced(lines: Iterable[str]) -> list[bool]:
    """For each line, whether it is inside a fenced code block or one of its fence lines."""
    flags = []
    fence: str | None = None
    for line in lines:
        if fence is None:
            fence = opens_fence(line)
            flags.append(fence is not None)
        else:
            flags.append(True)
            if closes_fence(line, fence):
                fence = None
    return flags


def frontmatter_end(lines: Iterable[str], max_lines: int | None = None) -> int | None:
    """The 0-based number of the line that closes the frontmatter of ``lines`` (the text's lines,
    a byte order mark already removed), or None when the text has none. ``max_lines``: the
    closing line must be among the first this many lines after the opening one."""
    numbered = enumerate(lines)
    first = next(numbered, None)
    if first is None or not FRONTMATTER_OPEN.fullmatch(first[1]):
        return None
    for number, line in numbered:
        if max_lines is not None and number > max_lines:
            return None
        if FRONTMATTER_CLOSE.fullmatch(line):
            return number
    return None
