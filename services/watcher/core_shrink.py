"""Core-shrink: a compact section index of an over-budget MEMORY.md.

docs/concepts/budgets.md "Core-shrink", Core-shrink: when the archive is enabled and
MEMORY.md is over its soft budget, CLAUDE.md carries a deterministic index of
the file (headings plus a brief per section) and a pointer to
``memory_search``/``memory_get`` instead of the banner and full text. No LLM,
no I/O: the index is a pure function of the text. MEMORY.md itself is never
modified here.

Rules (docs/architecture.md "Limits and defaults"):

- one entry per ``#`` or ``##`` ATX heading (``gateway.markdown`` defines
  headings and fences for every service); deeper headings are not entries;
- anything inside a fenced code block is ignored, headings included;
- an entry's brief is the first non-empty prose line under its heading
  (not a heading, fence, thematic break or HTML comment), with a leading list
  or quote marker removed and whitespace collapsed, at most 100 chars (cut
  with "…");
- the whole index, lead lines included, is at most 4,000 chars; entries that
  do not fit are counted in a last "… N more sections" line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway import markdown

INDEX_MAX_CHARS = 4_000
BRIEF_MAX_CHARS = 100

_MARKER = re.compile(r"^(?:>[ \t]*)*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?")
_THEMATIC_BREAK = re.compile(r"^(?:[-*_=][ \t]*){3,}$")


@dataclass(frozen=True)
class Section:
    """One ``#``/``##`` heading: its level, text, 1-based line and brief (may be empty)."""

    level: int
    title: str
    line: int
    brief: str


def clip(text: str, limit: int) -> str:
    """``text`` with whitespace collapsed, cut to at most ``limit`` chars ending in "…"."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def _prose(line: str) -> str:
    stripped = line.strip()
    if not stripped or markdown.HEADING.match(line) or _THEMATIC_BREAK.match(stripped):
        return ""
    if stripped.startswith("<!--"):
        return ""
    return _MARKER.sub("", stripped, count=1).strip()


def sections(text: str, brief_chars: int = BRIEF_MAX_CHARS) -> list[Section]:
    """Every ``#``/``##`` heading outside fenced code, in file order, with its brief.

    Lines are numbered as ``text.split("\\n")`` counts them (what ``memory_get``
    line ranges address); a trailing ``\\r`` is ignored.
    """
    found: list[Section] = []
    fence: str | None = None  # the opening fence run while inside a block
    pending: tuple[int, str, int] | None = None  # heading still looking for its brief
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if fence is not None:
            if markdown.closes_fence(line, fence):
                fence = None
            continue
        fence = markdown.opens_fence(line)
        if fence is not None:
            continue
        heading = markdown.heading(line)
        if heading and heading[0] <= 2:
            if pending is not None:
                found.append(Section(*pending, brief=""))
            pending = (heading[0], clip(heading[1], brief_chars) or "(untitled)", number)
            continue
        if pending is not None:
            brief = _prose(line)
            if brief:
                found.append(Section(*pending, brief=clip(brief, brief_chars)))
                pending = None
    if pending is not None:
        found.append(Section(*pending, brief=""))
    return found


def _entry(section: Section) -> str:
    head = f"- {'#' * section.level} {section.title} (line {section.line})"
    return f"{head}: {section.brief}" if section.brief else head


def _more(count: int) -> str:
    return f"… {count:,} more section{'s' if count != 1 else ''}"


def pointer(name: str) -> str:
    """The line telling the agent where the full file is."""
    return (
        f"The full {name} stays on disk and in your archive: find an entry with `memory_search`, "
        f'then read it exactly with `memory_get` (path "{name}", the line range below).'
    )


def build_index(
    text: str,
    *,
    name: str,
    lead: str,
    max_chars: int = INDEX_MAX_CHARS,
    brief_chars: int = BRIEF_MAX_CHARS,
) -> str | None:
    """The section index of ``text`` (no trailing newline), or None when it has no headings.

    ``lead`` (the over-budget lines) comes first, then ``pointer(name)``, then
    one entry per section while the whole stays within ``max_chars``.
    """
    found = sections(text, brief_chars)
    if not found:
        return None
    out = f"{lead}\n{pointer(name)}\n\nSections of {name}:"
    entries = [_entry(section) for section in found]
    full = out + "".join("\n" + entry for entry in entries)
    if len(full) <= max_chars:
        return full
    for shown, entry in enumerate(entries):
        candidate = f"{out}\n{entry}"
        if len(candidate) + 1 + len(_more(len(entries) - shown - 1)) > max_chars:
            return f"{out}\n{_more(len(entries) - shown)}"
        out = candidate
    return out  # unreachable: the full index did not fit
