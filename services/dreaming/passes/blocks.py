"""The entries of a memory file as spans of whole lines a deterministic pass can move.

Shared by the compactor and the route-out; built on ``apply/sections.py`` (its line model, headings,
code fences and pinned sections), so a pass and the guards read a file the same way.

- **An entry** is a top-level list item (a line opening with ``-``, ``*``, ``+``, ``1.`` or
  ``1)`` and a blank) or a paragraph (any other non-blank line that is not a heading or in fenced
  code), with its continuation lines: the lines after it up to a blank line, a heading, a fence
  line or the next top-level list item (indented lines, nested items, a paragraph's next lines);
  then, across blank lines, each further run of indented lines (a loose item's later paragraphs
  and nested items, an indented paragraph or indented code under a paragraph: moving the entry
  without them would hand them to the entry above). Each list-item or paragraph entry of
  ``sections.entries`` lies in exactly one of these; one of these may hold several of those.
- **Never part of an entry:** headings, the blank lines between entries, fenced code (the fence
  lines and everything between them).
- **An entry stays where it is** (``Entry.movable`` is false) when it stands in a pinned section,
  or when the next non-blank line after it is an indented fence line: the fenced block under it
  never moves, and moving the entry alone would leave that code under the entry above.
- **Its span** is whole lines, the last one's line end included, and the blank lines right after
  it when the entry opens its block (the line above it is blank or a heading, or it is the first
  line of the file) or when they run to the end of the file. ``tidy`` applies the same rule to a
  run of moves that touch (each ends where the next starts): the blank lines after the run go
  with its last move when the run opens its block. So removing an entry, or a whole list, leaves
  one separation where there were two, and never joins the blocks around it. And when the moves
  end the file, the blank lines just above the run that ends it go too (unless another move or a
  pinned section holds them). No other blank line moves, and a blank line that moves is in the move's
  text, so the text a pass leaves and its moves' texts together hold every character of the
  original, exactly once.

These rules make a pass idempotent: removing entries joins no two blocks, so every entry that is
left keeps its first line, its heading path and whether it may move.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from services.dreaming.apply import sections
from services.dreaming.passes.moves import Move


class Kind(Enum):
    BLANK = "blank"
    HEADING = "heading"
    FENCED = "fenced"  # a fence line or a line between two
    ITEM = "item"  # a top-level list item's first line
    TEXT = "text"  # any other non-blank line


@dataclass(frozen=True)
class Layout:
    """A text read once: per line its offset, end (past its line end), text, kind, the chain of
    headings it stands under (outermost first, a heading line under itself) and whether it is in a
    pinned section."""

    text: str
    starts: list[int]
    ends: list[int]
    lines: list[str]
    kinds: list[Kind]
    chains: list[tuple[sections.Heading, ...]]
    pinned: list[bool]
    section_ends: dict[int, int]  # heading line -> the line after its section

    def section_end(self, heading_line: int) -> int:
        """The line after the section the heading on ``heading_line`` opens: the next heading of
        its level or a higher one (fewer ``#``), or the end of the text."""
        return self.section_ends[heading_line]

    def line_at(self, offset: int) -> int:
        """The number of the line that holds ``offset``."""
        return bisect.bisect_right(self.starts, offset) - 1


@dataclass(frozen=True)
class Entry:
    """One entry: lines ``first``..``last`` (``last`` is non-blank), their span ``start``..``end``,
    ``take_end`` past the blank lines that go with it; ``head`` is its first line without the list
    bullet, stripped; ``item`` whether it is a list item."""

    first: int
    last: int
    start: int
    end: int
    take_end: int
    head: str
    item: bool
    chain: tuple[sections.Heading, ...]
    movable: bool

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(h.text for h in self.chain)


def _indented(line: str) -> bool:
    return line[:1] in (" ", "\t")


def layout(text: str) -> Layout:
    """``text`` read once (a few linear passes, whatever its size)."""
    numbered = sections.lines(text)
    starts = [offset for offset, _ in numbered]
    ends = [*starts[1:], len(text)]
    lines = [line for _, line in numbered]
    fenced = sections.fenced_lines(text)
    found = sections.headings(text)
    heading_lines = {h.line for h in found}
    kinds = []
    for number, line in enumerate(lines):
        if fenced[number]:
            kinds.append(Kind.FENCED)
        elif number in heading_lines:
            kinds.append(Kind.HEADING)
        elif not line.strip():
            kinds.append(Kind.BLANK)
        elif sections.list_marker(line):
            kinds.append(Kind.ITEM)
        else:
            kinds.append(Kind.TEXT)
    chains: list[tuple[sections.Heading, ...]] = []
    current: tuple[sections.Heading, ...] = ()
    by_line = {chain[-1].line: chain for chain in sections.heading_chains(text)}
    for number in range(len(lines)):
        current = by_line.get(number, current)
        chains.append(current)
    pinned = [False] * len(lines)
    for span in sections.pinned_spans(text):
        for number in range(bisect.bisect_left(starts, span.start), bisect.bisect_left(starts, span.end)):
            pinned[number] = True
    section_ends: dict[int, int] = {}
    open_sections: list[sections.Heading] = []
    for heading in found:
        while open_sections and open_sections[-1].level >= heading.level:
            section_ends[open_sections.pop().line] = heading.line
        open_sections.append(heading)
    section_ends.update((heading.line, len(lines)) for heading in open_sections)
    return Layout(text, starts, ends, lines, kinds, chains, pinned, section_ends)


def _blank_run(lay: Layout, number: int) -> int:
    """The first line at or after ``number`` that is not blank (``len`` at the end)."""
    while number < len(lay.lines) and lay.kinds[number] is Kind.BLANK:
        number += 1
    return number


def entries(lay: Layout) -> list[Entry]:
    """Every entry of the text, in order (module docstring)."""
    out = []
    kinds, lines, total = lay.kinds, lay.lines, len(lay.lines)
    number = 0
    while number < total:
        if kinds[number] not in (Kind.ITEM, Kind.TEXT):
            number += 1
            continue
        first = number
        last = number
        while True:
            nxt = last + 1
            if nxt < total and kinds[nxt] is Kind.TEXT:
                last = nxt
                continue
            after = _blank_run(lay, nxt)
            if after > nxt and after < total and kinds[after] is Kind.TEXT and _indented(lines[after]):
                last = after
                continue
            break
        after = _blank_run(lay, last + 1)
        takes_blanks = after == total or _opens(lay, first)
        end_line = after if takes_blanks else last + 1
        held_code = after < total and kinds[after] is Kind.FENCED and _indented(lines[after])
        line = lines[first]
        item = kinds[first] is Kind.ITEM
        head = (line[len(sections.list_marker(line)) :] if item else line).strip()
        out.append(Entry(
            first=first, last=last, start=lay.starts[first], end=lay.ends[last],
            take_end=lay.ends[end_line - 1], head=head, item=item, chain=lay.chains[first],
            movable=not lay.pinned[first] and not held_code,
        ))
        number = last + 1
    return out


def _opens(lay: Layout, number: int) -> bool:
    """Whether line ``number`` opens a block: the first line, or one right under a blank line or a heading."""
    return number == 0 or lay.kinds[number - 1] in (Kind.BLANK, Kind.HEADING)


def tidy(lay: Layout, moves: Sequence[Move]) -> list[Move]:
    """``moves`` in file order, with the blank lines of the module docstring added: after a run
    of touching moves that opens its block, and above the run of moves that ends the text."""
    ordered = sorted(moves, key=lambda m: m.start)
    run_opens = False
    for index, move in enumerate(ordered):
        if index == 0 or ordered[index - 1].end != move.start:
            run_opens = _opens(lay, lay.line_at(move.start))
        if index + 1 < len(ordered) and ordered[index + 1].start == move.end:
            continue
        if run_opens and move.end < len(lay.text):
            after = _blank_run(lay, lay.line_at(move.end))
            end = lay.ends[after - 1] if after > lay.line_at(move.end) else move.end
            if end != move.end and not lay.pinned[after - 1]:
                ordered[index] = dataclasses.replace(move, end=end, text=lay.text[move.start : end])
    if not ordered or ordered[-1].end != len(lay.text):
        return ordered
    first = len(ordered) - 1  # the first move of the run that ends the text
    while first > 0 and ordered[first - 1].end == ordered[first].start:
        first -= 1
    head = ordered[first]
    floor = ordered[first - 1].end if first > 0 else 0
    number = lay.line_at(head.start)
    start = head.start
    while number > 0 and lay.kinds[number - 1] is Kind.BLANK and not lay.pinned[number - 1] and lay.starts[number - 1] >= floor:
        number -= 1
        start = lay.starts[number]
    if start != head.start:
        ordered[first] = dataclasses.replace(head, start=start, text=lay.text[start : head.end])
    return ordered
