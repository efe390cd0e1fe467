"""Archive *entries*: the unit whose identity and age the staleness GC tracks.

SPEC.md "Archive staleness GC" needs an identity that survives re-chunking, so an
entry is a markdown block, found from the file text alone (never from chunk
boundaries):

- a top-level list item (``-``, ``*``, ``+`` or ``1.``/``1)`` at column 0)
  together with its continuation lines and indented nested items;
- otherwise a paragraph: consecutive non-blank lines;
- a fenced code block (```` ``` ```` / ``~~~``) is atomic: blank lines inside it do
  not end the entry it belongs to.

A blank line ends an entry. Headings (``#`` … ``######``), thematic breaks
(``---``, ``***``, ``___``), the frontmatter and lines holding nothing but
metadata markers are boundaries, not entries.

``entry_hash`` is the SHA-256 (hex) of the entry text with metadata markers
removed and whitespace normalised (runs of whitespace → one space, trimmed). So
an entry keeps its identity when it is re-chunked, re-indented, moved to another
file or under another heading, or stamped by the GC. Metadata markers are HTML
comments of the form ``<!-- key: value -->`` (``importance``, ``invalid_at``,
``supersedes`` …) and ``[importance: N]``; the GC should stamp moved entries with
such a comment (e.g. ``<!-- invalid_at: 2025-01-01T00:00:00Z -->``).

Importance (1–10, default 5):

- file-wide from frontmatter ``importance: N`` (frontmatter = the file starts
  with a ``---`` line and ends at the next ``---``/``...`` line within 64 lines);
- per entry from ``<!-- importance: N -->`` or ``[importance: N]``: inside an
  entry it applies to that entry; on a line of its own it applies to the next
  entry. The last marker wins.

An integer outside 1–10 is clamped (``importance: 42`` → 10, ``0`` → 1); a
value that is not an integer (``high``, ``7.5``) is ignored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final, NamedTuple

DEFAULT_IMPORTANCE: Final = 5
MIN_IMPORTANCE: Final = 1
MAX_IMPORTANCE: Final = 10
_FRONTMATTER_MAX_LINES: Final = 64

_MARKER_COMMENT = re.compile(r"<!--\s*[A-Za-z_][\w-]*\s*:[^>]*?-->")
_IMPORTANCE_COMMENT = re.compile(r"<!--\s*importance\s*:\s*([^>]*?)\s*-->", re.IGNORECASE)
_IMPORTANCE_BRACKET = re.compile(r"\[\s*importance\s*:\s*([^\]]*?)\s*\]", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FM_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class Frontmatter:
    """What the indexer reads from a file's frontmatter. ``end_line`` is 0 without one."""

    end_line: int
    importance: int | None
    provenance: str | None


class Entry(NamedTuple):
    """One entry: 1-based inclusive line range, normalised text, hash and importance.

    (A NamedTuple: a full index builds about 40 of them per file.)"""

    start_line: int
    end_line: int
    text: str
    entry_hash: str
    importance: int


def parse_importance(value: str) -> int | None:
    """``value`` as an importance: an integer clamped to 1–10, or None when it is not one."""
    raw = value.strip().strip("\"'").strip()
    if not re.fullmatch(r"[+-]?\d{1,6}", raw):
        return None
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, int(raw)))


def parse_frontmatter(lines: list[str]) -> Frontmatter:
    """The frontmatter of a file split into lines (without newlines)."""
    if not lines or lines[0].strip() != "---":
        return Frontmatter(0, None, None)
    values: dict[str, str] = {}
    for index in range(1, min(len(lines), _FRONTMATTER_MAX_LINES + 1)):
        line = lines[index]
        if line.strip() in ("---", "..."):
            importance = parse_importance(values["importance"]) if "importance" in values else None
            return Frontmatter(index + 1, importance, values.get("provenance"))
        match = _FM_KEY.match(line)
        if match:
            values[match.group(1).lower()] = match.group(2).strip("\"'")
    return Frontmatter(0, None, None)


def normalise(text: str) -> str:
    """``text`` without metadata markers, whitespace runs collapsed to one space."""
    if "<!--" in text:
        text = _MARKER_COMMENT.sub(" ", text)
    if "[" in text:
        text = _IMPORTANCE_BRACKET.sub(" ", text)
    return " ".join(text.split())


def entry_hash(text: str) -> str:
    """The identity of an entry: SHA-256 hex of its normalised text."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def _marker_importance(line: str) -> int | None:
    found: int | None = None
    for pattern in (_IMPORTANCE_COMMENT, _IMPORTANCE_BRACKET):
        for match in pattern.finditer(line):
            value = parse_importance(match.group(1))
            if value is not None:
                found = value
    return found


def parse_entries(lines: list[str], frontmatter: Frontmatter | None = None) -> list[Entry]:
    """The entries of a file split into lines (rules in the module docstring)."""
    fm = frontmatter if frontmatter is not None else parse_frontmatter(lines)
    default = fm.importance if fm.importance is not None else DEFAULT_IMPORTANCE
    entries: list[Entry] = []
    append = entries.append
    sha256 = hashlib.sha256
    new = tuple.__new__  # Entry(...) without the generated __new__: a tenth of a second per 50 MB
    heading, thematic_break, list_item, fence_open = _HEADING.match, _BREAK.match, _LIST_ITEM.match, _FENCE.match
    # The open block is always the contiguous run of lines block_start..number-1 (any
    # line that is not part of it closes it first); 0 = no open block.
    block_start = 0
    block_importance: int | None = None
    block_markup = False  # a line of the block may hold a marker: the block needs the full normalise
    pending: int | None = None
    fence: str | None = None
    marker: int | None = None
    number = fm.end_line
    # The hot loop of a full index (700,000 lines for 50 MB): each regex runs only when
    # the line's first non-blank character could start what it matches.
    for line in lines[fm.end_line :] if fm.end_line else lines:
        number += 1
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if not stripped:
            boundary = True
            first = ""
        else:
            first = stripped[0]
            if first == "#":
                boundary = heading(line) is not None
            elif first in "-*_" and stripped[-1] == first:
                boundary = thematic_break(line) is not None
            else:
                boundary = False
        markup = not boundary and ("<!--" in line or "[" in line)
        if markup:
            marker = _marker_importance(line)
            if not normalise(line):
                boundary = True  # a marker-only line: it speaks for the next entry
                if marker is not None:
                    pending = marker
        if block_start and (
            boundary
            # a top-level list item (_LIST_ITEM, its bullet form spelled out)
            or (line[0] in "-*+" and (len(line) == 1 or line[1].isspace()))
            or (line[0].isdecimal() and list_item(line) is not None)
        ):
            # Close the open block (inlined: about 40 entries per file).
            end = number - 1
            if block_markup:
                text = normalise("\n".join(lines[block_start - 1 : end]))
            elif block_start == end:
                text = lines[end - 1]
                # Most entries are one line that is already normal: only " " as whitespace,
                # never two in a row, none at either end (isprintable is False for any
                # other whitespace character).
                if not (text.isprintable() and "  " not in text and text[0] != " " and text[-1] != " "):
                    text = " ".join(text.split())
            else:
                text = " ".join(" ".join(lines[block_start - 1 : end]).split())
            if text:
                importance = default if block_importance is None else block_importance
                append(new(Entry, (block_start, end, text, sha256(text.encode()).hexdigest(), importance)))
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
            fence_match = fence_open(line)
            if fence_match:
                fence = fence_match.group(1)[0] * len(fence_match.group(1))
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
