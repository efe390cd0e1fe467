"""The compactor: entries of MEMORY.md marked terminal move, verbatim, to ``memory/archive/completed.md``.

Pure and deterministic (no model, no clock, no transcript): ``compact(text)`` lists the moves;
``moves.take`` applies them and ``moves.archive_block`` renders what the archive gets. Running it
again on what it left moves nothing.

**What moves.** Entries as ``blocks.py`` defines them: a top-level list item with its
continuation lines (indented lines, nested items, and after blank lines the indented lines that
belong to it), or a paragraph. Headings, the blank lines between entries and fenced code never
move; a marker inside a fenced block never counts. Only the entry's *first line* is read: a marker
on a nested item or a later line moves nothing, and a marked item moves with all its nested items
(checked or not). An entry in a pinned section (``apply/sections.py``: ``User``, ``Feedback``,
``Preference(s)``, ``Profile``) never moves, nor one with an indented fenced block right under
it (``blocks.py``). A marked heading (``## Sprint 3 ✅``) is not an entry: it stays, and so do
the entries under it that carry no marker of their own.

**The first line read.** For a list item, the text after its bullet (``-``, ``*``, ``+``, ``1.``,
``1)``), with a task box ``[ ]``, ``[x]`` or ``[X]`` in front taken off; for a paragraph, its
first line; leading and trailing blanks aside. Call it the *head*. A list item is top-level only
when its bullet is at the start of the line (as ``apply/sections.py`` reads it): a list indented as a
whole is one paragraph whose head starts with a bullet, so no marker matches it.

**The markers** (an entry is terminal when one holds; the move's ``reason`` names it):

1. *Checked task box*: a list item whose text opens with ``[x]`` or ``[X]`` and then a blank or
   the end of the line (``- [x] Ship it``). An open box ``[ ]`` is not a marker and does not hold
   one back. A paragraph opening with ``[x]`` is not a task.
2. *Struck through*: the whole head is one strikethrough, ``~~…~~`` with no ``~~`` inside and
   something other than blanks in it (``- ~~Use the old API~~``). A partial strikethrough
   (``~~old~~ new``, ``~~a~~ and ~~b~~``) does not count, nor a single ``~``.
3. *A status tag* ``✅`` (with or without the emoji variation selector), ``DONE`` or ``MERGED``
   (in capitals: ``Done`` and ``done`` are words, not tags) standing as a tag at the *start* or at
   the *end* of the head, never in the middle:

   - a tag is the marker in brackets ``[DONE]`` ``(DONE)``, or emphasised ``**DONE**``
     ``__DONE__`` ``*DONE*`` ``_DONE_`` (a colon may stand inside: ``**DONE:**``), or the bare
     ``✅``; a bare ``DONE``/``MERGED`` is a tag only when set off: at the start, followed by the
     end of the head, a colon, a pipe, an en or em dash, or a hyphen and a blank (``DONE: ship``,
     ``DONE — ship``); at the end, preceded by one of those (``ship — DONE``, ``Status: MERGED``,
     ``PR #12 | MERGED``; a hyphen needs a blank before it);
   - at the end, the tag may be followed by ``.`` or ``!`` and then by one bracketed group or an
     ISO date (``ship ✅ (2026-11-30)``, ``ship — DONE [PR #12]``, ``ship: DONE 2026-11-30``).

   So ``The DONE column in Jira means shipped``, ``Move cards from REVIEW to DONE``, ``MERGED PRs
   deploy nightly``, ``HALF-DONE`` and ``Legend: ✅ passed, ❌ failed`` stay, while ``✅ Ship``,
   ``Ship ✅``, ``[DONE] Ship``, ``DONE: Ship``, ``Ship (MERGED)`` and ``Ship — DONE`` move.

**Spans and blank lines** (``blocks.py``): whole lines, the last one's line end included. The
blank lines after an entry, or after a run of moved entries that touch, go with it when the line
above it is blank or a heading (or it is the first line), and when they run to the end of the
file; moves that end the file also take the blank lines just above them. So a removal leaves one
separation where there were two and never joins two blocks. Blank lines that move are in the
move's text: the text left and the moves' texts together are the original, character for
character. Moves come in file order and never overlap; CRLF and lone CR line ends are kept as
they are.
"""

from __future__ import annotations

import re

from services.dreaming.apply import sections
from services.dreaming.passes import blocks
from services.dreaming.passes.moves import COMPACT, COMPLETED, Move

_CHECK = "\u2705\ufe0f?"
_WORD = "(?:DONE|MERGED)"
_SEP = "[:|\u2013\u2014]"  # colon, pipe, en dash, em dash
_EMPHASIS = ("**", "__", "*", "_")


def _tag(core: str) -> str:
    """``core`` in brackets or emphasised (a colon may stand inside the emphasis)."""
    forms = [rf"\[{core}\]", rf"\({core}\)"]
    forms += [rf"{re.escape(e)}{core}:?{re.escape(e)}" for e in _EMPHASIS]
    return "(?:" + "|".join(forms) + ")"


_TAG = f"(?:{_tag(_WORD)}|{_tag(_CHECK)}|{_CHECK})"
_LEAD = re.compile(rf"^(?:{_TAG}|{_WORD}(?=\s*(?:$|{_SEP}|-(?:\s|$))))")
_SUFFIX = r"(?:\s*[.!])?(?:\s*(?:\([^()]*\)|\[[^\[\]]*\]|\d{4}-\d{2}-\d{2}))?"
_TRAIL = re.compile(rf"(?:{_TAG}|(?:^|{_SEP}(?:\*\*|__)?|\s-)\s*{_WORD}){_SUFFIX}\s*$")
_BOX = re.compile(r"^\[([ xX])\](?=\s|$)")
_MARKER = re.compile(f"{_CHECK}|{_WORD}")


def _named(matched: str) -> str:
    """The marker a matched tag holds (✅ without its variation selector)."""
    found = _MARKER.search(matched)
    name = found.group(0) if found else matched
    return "✅" if name.startswith("\u2705") else name


def _struck(head: str) -> bool:
    """Whether ``head`` is one strikethrough as a whole (string tests: a regex would backtrack)."""
    inner = head[2:-2]
    return (len(head) > 4 and head.startswith("~~") and head.endswith("~~") and bool(inner.strip())
            and "~~" not in inner and not inner.startswith("~") and not inner.endswith("~"))


def terminal_reason(line: str) -> str | None:
    """Why the entry whose first line is ``line`` is terminal (module docstring), or None."""
    marker = sections.list_marker(line)
    head = line[len(marker) :].strip()
    if marker and (box := _BOX.match(head)):
        if box.group(1) in "xX":
            return f"checked task box [{box.group(1)}]"
        head = head[box.end() :].strip()
    if _struck(head):
        return "struck through"
    if lead := _LEAD.match(head):
        return f"{_named(lead.group(0))} at the start"
    if trail := _TRAIL.search(head):
        return f"{_named(trail.group(0))} at the end"
    return None


def compact(text: str) -> list[Move]:
    """The moves (kind ``COMPACT``, target ``COMPLETED``) of every terminal entry of ``text``, in
    file order: deterministic, and ``compact(take(text, compact(text)))`` is always ``[]``."""
    lay = blocks.layout(text)
    found = []
    for entry in blocks.entries(lay):
        if not entry.movable:
            continue
        reason = terminal_reason(lay.lines[entry.first])
        if reason:
            found.append(Move(
                kind=COMPACT, start=entry.start, end=entry.take_end, text=text[entry.start : entry.take_end],
                target=COMPLETED, heading_path=entry.path, reason=reason,
            ))
    return blocks.tidy(lay, found)
