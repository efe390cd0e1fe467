"""Archive *entries*: the unit whose identity and age the staleness GC tracks.

The staleness GC (docs/concepts/staleness.md "Staleness GC") needs an identity that survives re-chunking, so an
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
  with a ``---`` line and ends at the next ``---``/``...`` line within 64 lines,
  as ``gateway.markdown`` defines them);
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
from itertools import count, repeat
from operator import itemgetter
from typing import Final, NamedTuple

from gateway.markdown import HEADING, closes_fence, frontmatter_end, opens_fence
from services.kb.index.frontmatter import FrontmatterError, load_frontmatter

DEFAULT_IMPORTANCE: Final = 5
MIN_IMPORTANCE: Final = 1
MAX_IMPORTANCE: Final = 10
_FRONTMATTER_MAX_LINES: Final = 64

_MARKER_COMMENT = re.compile(r"<!--\s*[A-Za-z_][\w-]*\s*:[^>]*?-->")
_IMPORTANCE_COMMENT = re.compile(r"<!--\s*importance\s*:\s*([^>]*?)\s*-->", re.IGNORECASE)
_IMPORTANCE_BRACKET = re.compile(r"\[\s*importance\s*:\s*([^\]]*?)\s*\]", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_INTEGER = re.compile(r"[+-]?\d{1,6}")


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
    if value.isdecimal() and len(value) <= 6:  # the common case, "7": what the rest would find
        return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, int(value)))
    raw = value.strip().strip("\"'").strip()
    if not _INTEGER.fullmatch(raw):
        return None
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, int(raw)))


def parse_frontmatter(lines: list[str]) -> Frontmatter:
    """The frontmatter of a file split into lines (without newlines).

    Where it ends is found here (the closing line within 64 lines); its fields are read
    by ``frontmatter.load_frontmatter``, the one reader the graph layer uses too. A
    header that reader refuses still ends where it ends and gives no importance, and it
    makes the file untrusted: frontmatter can only lower a file's trust
    (``provenance.classify``), and a header nobody can read may be the one that says so."""
    index = frontmatter_end(lines, _FRONTMATTER_MAX_LINES)
    if index is None:
        return Frontmatter(0, None, None)
    try:
        fields = load_frontmatter("\n".join(lines[1:index]), first_line=2)
    except FrontmatterError:
        return Frontmatter(index + 1, None, "untrusted")  # fail closed (the docstring)
    values = {key.lower(): value for key, value in fields.items()}
    importance = values.get("importance")
    provenance = values.get("provenance")
    return Frontmatter(
        index + 1,
        parse_importance(str(importance)) if isinstance(importance, (int, str)) and not isinstance(importance, bool) else None,
        provenance if isinstance(provenance, str) else None,
    )


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
    """The importance the markers of ``line`` give: the last valid one (those in comments first)."""
    found: int | None = None
    for literal, pattern in (("<!--", _IMPORTANCE_COMMENT), ("[", _IMPORTANCE_BRACKET)):
        if literal in line:  # (each pattern starts with its literal)
            for match in pattern.finditer(line):
                value = parse_importance(match.group(1))
                if value is not None:
                    found = value
    return found


# What the first character of a line says about it (``_FIRST_KIND``, one dict look-up per
# line, made in C by ``map`` before the loop). Only ASCII characters are listed: a line
# starting with any other one, or with whitespace, is checked against every rule (_OTHER).
_PLAIN, _BULLET, _BLANK, _OTHER, _DIGIT, _HASH, _RULE, _TICK, _MARK = range(9)


def _first_kind(char: str) -> int:
    """What a line starting with ``char`` (ASCII) may be."""
    if char.isspace():
        return _OTHER  # the line must be stripped to tell what it is
    if char in "-*+":
        return _BULLET  # a list item, or a thematic break
    if char.isdecimal():
        return _DIGIT  # maybe a numbered list item
    kinds = {"#": _HASH, "_": _RULE, "`": _TICK, "~": _TICK, "<": _MARK, "[": _MARK}
    return kinds.get(char, _PLAIN)  # _PLAIN: the line starts nothing, it only continues a block


_FIRST_KIND: Final = {"": _BLANK} | {chr(code): _first_kind(chr(code)) for code in range(128)}
_FIRST_CHAR: Final = itemgetter(slice(0, 1))
# The last character of a thematic break: its rule character or whitespace. A line "- …"
# ending in any of _ITEM_LAST is a list item for sure.
_BREAK_LAST: Final = "-*_" + "".join(char for char in map(chr, range(128)) if char.isspace())
_ITEM_LAST: Final = frozenset(map(chr, range(128))) - frozenset(_BREAK_LAST)
# The usual marker, which most lines holding one end with: when the line holds no other
# "<!--" or "[", its importance is N and the rest of the line is the text.
_CANONICAL_MARKERS: Final = {f"<!-- importance: {n} -->": n for n in range(MIN_IMPORTANCE, MAX_IMPORTANCE + 1)}
_ASCII_WHITESPACE: Final = "".join(char for char in map(chr, range(128)) if char.isspace() and char != " ")

_Block = tuple[int, int, int | None]  # first and last line (1-based), importance pending when it opened


def parse_entries(lines: list[str], frontmatter: Frontmatter | None = None) -> list[Entry]:
    """The entries of a file split into lines (rules in the module docstring).

    The hot loop of a full index (700,000 lines, 380,000 entries for 50 MB), so it does
    as little as it can per line: the first character of a line says what it may be
    (``_FIRST_KIND``, looked up in C before the loop), the common lines (plain text, a
    list item, a blank line) take a short path of their own, fenced lines are skipped by
    an inner loop, and a block's text and markers are read only once it is closed.
    """
    fm = frontmatter if frontmatter is not None else parse_frontmatter(lines)
    default = fm.importance if fm.importance is not None else DEFAULT_IMPORTANCE
    heading, thematic_break, list_item = HEADING.match, _BREAK.match, _LIST_ITEM.match
    body = lines[fm.end_line :] if fm.end_line else lines
    rows = zip(count(fm.end_line + 1), body, map(_FIRST_KIND.get, map(_FIRST_CHAR, body), repeat(_OTHER)))
    blocks: list[_Block] = []
    close = blocks.append
    # The open block is always the contiguous run of lines block_start..number-1 (any
    # line that is not part of it closes it first); 0 = no open block.
    block_start = 0
    block_importance: int | None = None
    pending: int | None = None  # the importance of a marker-only line, for the next block
    for number, line, kind in rows:
        # The common lines first, each on a short path of its own.
        if (kind == _BULLET and line[1:2] == " " and line[-1] in _ITEM_LAST) or (
            kind == _DIGIT and list_item(line) is not None
        ):  # a list item, surely
            if block_start:
                close((block_start, number - 1, block_importance))
            block_start, block_importance, pending = number, pending, None
            continue
        if kind == _PLAIN:  # it continues the open block, or opens one
            if not block_start:
                block_start, block_importance, pending = number, pending, None
            continue
        if kind == _BLANK or (kind == _HASH and heading(line) is not None):  # a boundary
            if block_start:
                close((block_start, number - 1, block_importance))
                block_start = 0
            continue
        # Any other line: what it is, in full.
        boundary = item = marker_only = False
        fence: str | None = None  # the fence this line opens
        if kind == _BULLET:
            second = line[1:2]
            boundary = line[0] != "+" and thematic_break(line) is not None
            item = not boundary and (not second or second.isspace())  # _LIST_ITEM, spelled out
        elif kind == _OTHER:  # whitespace or a character that is not ASCII first: every rule
            stripped = line.strip()
            if not stripped:
                boundary = True
            else:
                first = stripped[0]
                if first == "#":
                    boundary = heading(line) is not None
                elif first in "-*_":
                    boundary = stripped[-1] == first and thematic_break(line) is not None
                elif first in "<[":
                    boundary = marker_only = _marker_only(line)
                elif first in "`~":
                    fence = opens_fence(line)
                else:  # (an item starts at column 0: only a digit that is not ASCII can start one here)
                    item = first.isdecimal() and list_item(line) is not None
        elif kind == _MARK:
            boundary = marker_only = _marker_only(line)
        elif kind == _TICK:
            fence = opens_fence(line)
        elif kind == _RULE:
            boundary = thematic_break(line) is not None
        # (_HASH and _DIGIT lines that get here are no heading and no list item: like a plain
        # line, they continue the open block or open one.)
        if marker_only and (marker := _marker_importance(line)) is not None:
            pending = marker  # a marker-only line speaks for the next entry
        if block_start and (boundary or item):
            close((block_start, number - 1, block_importance))
            block_start = 0
        if boundary:
            continue
        if not block_start:
            block_start, block_importance, pending = number, pending, None
        if fence is not None:
            for number, line, kind in rows:  # the fenced lines belong to the block, whatever they hold
                if closes_fence(line, fence):
                    break
    if block_start:
        close((block_start, len(lines), block_importance))
    return _entries(lines, blocks, default)


def _entries(lines: list[str], blocks: list[_Block], default: int) -> list[Entry]:
    """The entries of ``blocks`` (in order; a block whose text is empty has none)."""
    # A clean file (most) has no whitespace but " " within its lines, so an entry of one
    # line need not be checked for any other (isprintable, which looks up each character's
    # Unicode record, costs about 0.1 s per 50 MB); these scans run at memchr speed.
    flat = "".join(lines)
    clean = flat.isascii() and not any(char in flat for char in _ASCII_WHITESPACE)
    entries: list[Entry] = []
    append = entries.append
    sha256 = hashlib.sha256
    new = tuple.__new__  # Entry(...) without the generated __new__: a tenth of a second per 50 MB
    for start, end, importance in blocks:
        # Most entries are one line that is already normal (only " " as whitespace, never two
        # in a row, none at either end) and holds no marker: those are made here. isprintable
        # tells whether " " is the only whitespace of a line (it is False for any other).
        text = lines[end - 1]
        if (
            start == end
            and (clean or text.isprintable())
            and "  " not in text
            and text[0] != " "
            and text[-1] != " "
            and ("<" not in text and "[" not in text or ":" not in text)  # (a marker holds a ":")
        ):
            digest = sha256(text.encode()).hexdigest()
            append(new(Entry, (end, end, text, digest, default if importance is None else importance)))
        elif (entry := _block_entry(lines, start, end, importance, default, clean)) is not None:
            append(entry)
    return entries


def _marker_only(line: str) -> bool:
    """Whether ``line`` (not blank) holds nothing but metadata markers."""
    return ("<!--" in line or "[" in line) and not normalise(line)


def _block_entry(
    lines: list[str], start: int, end: int, importance: int | None, default: int, clean: bool
) -> Entry | None:
    """The entry of the block ``start..end`` (1-based, inclusive), or None when it is empty.
    ``importance`` is the one pending when it opened: a marker inside it overrides it.
    ``clean``: the only whitespace within the lines of the file is " ".

    Its text is ``normalise`` of its lines joined by newlines; what is skipped here only
    skips work that would change nothing: every marker holds a ":" and starts with
    "<!--" or "[", and without one normalise only collapses whitespace."""
    if start == end:
        text = lines[end - 1]
        if ":" in text and ("<!--" in text or "[" in text):  # it may hold a marker
            at = text.rfind("<!--")
            marker = _CANONICAL_MARKERS.get(text[at:]) if at >= 0 else None
            if marker is not None and "<!--" not in (head := text[:at]) and "[" not in head:
                text = " ".join(head.split())  # (what normalise would leave)
            else:
                marker = _marker_importance(text)
                text = normalise(text)
            if marker is not None:
                importance = marker
        else:
            text = " ".join(text.split())
    else:
        block = lines[start - 1 : end]
        # No line is blank, so in a clean file the normal text is the lines without their
        # indentation, joined by " ", unless one holds "  " or ends in " ".
        text = " ".join(map(str.lstrip, block)) if clean else " ".join(block)
        if ":" in text and ("<!--" in text or "[" in text):
            marker = _block_marker(block)
            if marker is not None:
                importance = marker
            text = normalise("\n".join(block))
        elif not clean or "  " in text or text[-1] == " ":
            text = " ".join(text.split())
    if not text:
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()
    return tuple.__new__(Entry, (start, end, text, digest, default if importance is None else importance))


def _block_marker(block: list[str]) -> int | None:
    """The importance the markers of the lines of a block give it: the last one outside
    its fences (the fenced lines are not read), or None."""
    found: int | None = None
    fence: str | None = None
    for line in block:
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
            continue
        if "<!--" in line or "[" in line:
            marker = _marker_importance(line)
            if marker is not None:
                found = marker
        fence = opens_fence(line)
    return found

