"""Lines of fact: what a reflection merge must keep, or archive (docs/concepts/vault.md "Weekly reflection",
Lines of fact).

A note's lines of fact are the lines of its body (after the frontmatter) that say something:

- blank lines, fence delimiters (```` ``` ````, ``~~~``), horizontal rules (``---``, ``***``, ``___``)
  and lines that are only a ``<!-- … -->`` comment (the retirement, promotion and fold markers) are not;
- a heading whose text is the note's name or its title (frontmatter ``title``) is not: a merged note
  has one title of its own; any other heading is a line of fact;
- a line of links only (``Related: [[a]], [[b]]``, a bare ``[[a]]``) is navigation, not a fact;
- a line with no letter or digit says nothing a search could find, and is not one.

Each frontmatter claim (``claims`` with ``id`` and ``text``) is a line of fact too, written
``claim <id>: <text>``; it is kept when the merged note has a claim of that id with the same text.

A line is compared in its normal form: list, quote and heading markers (``-``, ``*``, ``+``, ``1.``,
``>``, ``#``, a task box) taken off its start, whitespace runs made one space, case folded. It is kept
when its normal form stands in the merged note's body (the normal forms of its lines joined by spaces,
so a reflowed line still counts) on word boundaries. The cluster's distinct lines are the distinct
normal forms over the notes a merge replaces; the dropped ones are those the merged note does not keep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from services.kb.graph.parse import parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter

_MARKERS: Final = re.compile(r"^(?:(?:[-*+]|\d{1,9}[.)]|>|#{1,6})\s+|\[[ xX]\]\s+)+")
_RULE: Final = re.compile(r"^(?:-{3,}|\*{3,}|_{3,})$")
_COMMENT: Final = re.compile(r"^<!--.*-->$")
_LINK: Final = re.compile(r"\[\[[^\[\]\n]*\]\]")
_LINKS_ONLY: Final = re.compile(r"^(?:related:)?[\s,;.·|-]*$")
_WORD: Final = re.compile(r"[^\W_]")


def normal(line: str) -> str:
    """``line`` in its normal form (module docstring)."""
    text = " ".join(line.split())
    text = _MARKERS.sub("", text)
    return text.casefold().strip()


@dataclass(frozen=True)
class FactLines:
    """A note's lines of fact: normal form → the line as written (the first one seen)."""

    lines: dict[str, str]


def _is_fact(raw: str, titles: set[str]) -> bool:
    text = raw.strip()
    if not text or text.startswith(("```", "~~~")) or _RULE.match(text) or _COMMENT.match(text):
        return False
    if text.startswith("#") and normal(text) in titles:
        return False
    if _LINKS_ONLY.match(_LINK.sub("", text).casefold()):
        return False
    return _WORD.search(text) is not None


def fact_lines(name: str, content: str) -> dict[str, str]:
    """The lines of fact of note ``name`` (module docstring): normal form → the line as written."""
    text = content.removeprefix("\ufeff")
    lines = split_lines(text)
    end = parse_frontmatter(lines).end_line
    parsed = parse_note(name, text)
    titles = {normal(name)} | ({normal(parsed.title)} if parsed.title else set())
    found: dict[str, str] = {}
    for raw in lines[end:]:
        if _is_fact(raw, titles):
            found.setdefault(normal(raw), raw.strip())
    for claim in parsed.claims:
        if claim.text:
            line = f"claim {claim.id}: {claim.text}"
            found.setdefault(normal(line), line)
    return found


def _body(content: str) -> str:
    """The merged note's body as one string of normal forms, and its claims as lines (module docstring)."""
    text = content.removeprefix("\ufeff")
    lines = split_lines(text)
    end = parse_frontmatter(lines).end_line
    parts = [normal(raw) for raw in lines[end:] if raw.strip()]
    parts += [normal(f"claim {c.id}: {c.text}") for c in parse_note("", text).claims if c.text]
    return " " + " ".join(parts) + " "


def _kept(form: str, body: str) -> bool:
    at = body.find(form)
    while at >= 0:
        before, after = body[at - 1], body[at + len(form): at + len(form) + 1]
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        at = body.find(form, at + 1)
    return False


@dataclass(frozen=True)
class Drop:
    """What a merge keeps of the notes it replaces: their distinct lines of fact, and the dropped ones
    as written (in the order of the notes, then of their lines)."""

    distinct: int
    dropped: tuple[str, ...]

    @property
    def share(self) -> float:
        return len(self.dropped) / self.distinct if self.distinct else 0.0


def dropped_lines(replaced: dict[str, str], merged: str) -> Drop:
    """The lines of fact of ``replaced`` (name → content) that ``merged`` does not keep."""
    distinct: dict[str, str] = {}
    for name, content in replaced.items():
        for form, raw in fact_lines(name, content).items():
            distinct.setdefault(form, raw)
    body = _body(merged)
    return Drop(len(distinct), tuple(raw for form, raw in distinct.items() if not _kept(form, body)))
