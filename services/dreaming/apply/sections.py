"""The structure of a memory file that dreaming must respect: headings, pinned sections, entries.

- **Headings** are ATX lines outside fenced code blocks, as ``gateway.markdown``
  defines both for every service.
- **Pinned sections** are never removed or shrunk by a dream: a heading whose
  text is ``User``, ``Feedback``, ``Preference``, ``Preferences`` or
  ``Profile`` (any level, any letter case, an optional trailing colon) and
  everything under it up to the next heading of the same or a higher level
  (fewer or as many ``#``), or the end of the file. A pinned heading nested
  inside another section pins only its own part. ``unpins`` tells whether an
  edit took a pinned line out of its section, directly or by adding a heading
  that ends the section early or a code fence that hides its heading.
- **Entries** (the unit the recall check searches for) are top-level list
  items with their continuation lines (nested items included), and
  paragraphs; a heading is an entry of its own, and so is the content of each
  fenced code block; blank lines and fence lines separate entries.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from gateway import markdown

PINNED_NAMES = ("user", "feedback", "preference", "preferences", "profile")

_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    start: int  # char offset of the heading line
    line: int  # 0-based line number


@dataclass(frozen=True)
class Span:
    start: int
    end: int  # exclusive

    def overlaps(self, start: int, end: int) -> bool:
        """Whether [start, end) touches this span (an empty range at a point inside counts)."""
        if start == end:
            return self.start <= start < self.end
        return start < self.end and self.start < end


def lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its line end) for each line of ``text``, split as ``str.splitlines``
    splits (``\\n``, ``\\r\\n``, ``\\r`` and the other Unicode line ends): the line model of every rule here."""
    return _lines(text)


def list_marker(line: str) -> str:
    """The bullet that opens a top-level list item (``-``, ``*``, ``+``, ``1.`` or ``1)`` at the
    start of the line) with the blank after it, or "" when ``line`` is not a list item."""
    match = _LIST_ITEM.match(line)
    return match.group(0) if match else ""


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its newline) for each line of ``text``."""
    out = []
    offset = 0
    for raw in text.splitlines(keepends=True):
        out.append((offset, raw.rstrip("\r\n")))
        offset += len(raw)
    return out


def fenced_lines(text: str) -> list[bool]:
    """For each line, whether it is inside (or opens/closes) a fenced code block."""
    return markdown.fenced(line for _, line in _lines(text))


def structural(text: str) -> bool:
    """Whether some line of ``text`` could be a heading or a fence line (either may change where
    sections begin and end; any other line cannot)."""
    return any(markdown.HEADING.match(line) or markdown.opens_fence(line) for line in text.splitlines())


def headings(text: str) -> list[Heading]:
    """Every heading outside fenced code, in order."""
    out = []
    fenced = fenced_lines(text)
    for number, (offset, line) in enumerate(_lines(text)):
        if fenced[number]:
            continue
        found = markdown.heading(line)
        if found:
            out.append(Heading(found[0], found[1], offset, number))
    return out


def is_pinned_heading(text: str) -> bool:
    return text.strip().rstrip(":").strip().casefold() in PINNED_NAMES


def pinned_spans(text: str) -> list[Span]:
    """The char spans of pinned sections (heading line included), in order."""
    found = headings(text)
    spans = []
    for i, heading in enumerate(found):
        if not is_pinned_heading(heading.text):
            continue
        end = len(text)
        for later in found[i + 1 :]:
            if later.level <= heading.level:
                end = later.start
                break
        spans.append(Span(heading.start, end))
    return spans


def pinned_lines(text: str) -> Counter[str]:
    """The non-blank lines inside pinned sections (headings included), counted."""
    out: Counter[str] = Counter()
    for span in pinned_spans(text):
        out.update(line for line in text[span.start : span.end].splitlines() if line.strip())
    return out


def unpins(before: str, after: str) -> bool:
    """Whether a line pinned in ``before`` is no longer in a pinned section of ``after`` (taken
    out, or left outside when a heading or a code fence splits or hides its section)."""
    return bool(pinned_lines(before) - pinned_lines(after))


def touches_pinned(text: str, start: int, end: int) -> bool:
    """Whether the range [start, end) of ``text`` overlaps a pinned section."""
    return any(span.overlaps(start, end) for span in pinned_spans(text))


def heading_chains(text: str) -> list[tuple[Heading, ...]]:
    """For each heading outside fenced code, in order: the headings whose sections hold it, then
    itself (outermost first). A line below a heading and above the next one stands under that chain."""
    chains = []
    path: list[Heading] = []
    for heading in headings(text):
        while path and path[-1].level >= heading.level:
            path.pop()
        path.append(heading)
        chains.append(tuple(path))
    return chains


def heading_path(text: str, offset: int) -> tuple[str, ...]:
    """The headings above ``offset`` (outermost first): where an entry stood."""
    path: tuple[Heading, ...] = ()
    for chain in heading_chains(text):
        if chain[-1].start > offset:
            break
        path = chain
    return tuple(h.text for h in path)


def entries(text: str) -> list[str]:
    """The entries of ``text`` (module docstring), each with its lines joined by newlines."""
    out: list[str] = []
    current: list[str] = []
    code: list[str] = []  # the lines inside one fenced block: a single entry
    fenced = fenced_lines(text)

    def flush() -> None:
        for block in (current, code):
            if any(line.strip() for line in block):
                out.append("\n".join(block))
            block.clear()

    for number, (_, line) in enumerate(_lines(text)):
        if fenced[number]:
            if current:
                flush()
            if markdown.opens_fence(line):
                flush()  # an opening or closing fence line ends the code entry
            else:
                code.append(line)
            continue
        if code:
            flush()
        stripped = line.strip()
        if not stripped:
            flush()
        elif markdown.HEADING.match(line):
            flush()
            out.append(stripped)
        elif _LIST_ITEM.match(line):  # a new top-level item starts a new entry
            flush()
            current.append(line)
        else:
            current.append(line)
    flush()
    return out
