"""Finding a forget's target in one file's text and replacing it (docs/concepts/forget.md "What a
forget matches in a workspace").

Three forms of text, each searched the way its writer stored it:

- **Plain text** (Markdown, backups, anything not JSON): every match of the target, and, for a text
  target, the **fragment cut by an ellipsis**: DREAMS.md and the run summaries shorten long quotes
  to ``…``, which can leave the start of the text (``Dana Whitlock's lock…``) without a whole match.
  A run of at least ``MIN_FRAGMENT`` characters just before a ``…`` that is how the text begins is
  replaced as well.
- **JSON** (a ``.json`` document, each line of a ``.jsonl`` file): the target is searched in each
  string *value*, decoded (the journal stores newlines as ``\\n`` and, with ``ensure_ascii``,
  non-ASCII as ``\\uXXXX``, so the raw bytes would miss them). Only the string literals that change
  are re-encoded (ASCII-escaped when they were); every other byte stays as it was. Keys are not
  searched: they are the record formats' own names, never remembered text. Text that is not JSON
  (a torn last line, a damaged copy kept aside) has its whole string literals searched decoded all
  the same, and the rest as plain text.
- **A journal edit** (``kind: "edit"``): its ``before``/``after`` context (48 characters each side)
  is cut from the file mid-text, so a match may straddle the context and the ``removed`` or
  ``inserted`` text, or be cut by the context's outer edge. Each of ``before + removed + after``
  and ``before + inserted + after`` is searched whole; every part of a field a match (or, for a
  text target, a cut fragment of ``MIN_FRAGMENT`` characters or more at an edge not at the file's
  start or end) covers is replaced by the marker.

A pattern target has no fragments: a regular expression's prefixes cannot be told in general.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.forgetting import Target, marker

MIN_FRAGMENT: Final = 8  # characters: a shorter cut piece names nothing
ELLIPSIS: Final = "…"
CONTEXT_FIELDS: Final = ("before", "removed", "inserted", "after")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?', re.DOTALL)  # a literal, and the colon that makes it a key

Span = tuple[int, int]


@dataclass(frozen=True)
class Scrubbed:
    """One text after a scrub: the new text, how many places were replaced, and the 1-based lines
    (of the original text) they started on."""

    text: str
    count: int
    lines: tuple[int, ...]


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _whole(target: Target) -> str | None:
    return None if target.text is None else _norm(target.text)


def _merge(spans: Iterable[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _head_fragment(text: str, end: int, whole: str) -> Span | None:
    """The longest run ending at ``end`` (at least MIN_FRAGMENT chars, not starting on a space)
    that is how ``whole`` (normalized) begins."""
    for start in range(max(0, end - 2 * len(whole)), end - MIN_FRAGMENT + 1):
        if not whole.startswith(text[start].casefold()):
            continue
        piece = text[start:end]
        if not piece[0].isspace() and whole.startswith(_norm(piece) + (" " if piece[-1].isspace() else "")):
            return start, end
    return None


def _tail_fragment(text: str, start: int, whole: str) -> Span | None:
    """The longest run starting at ``start`` (at least MIN_FRAGMENT chars, not ending on a space)
    that is how ``whole`` (normalized) ends."""
    for end in range(min(len(text), start + 2 * len(whole)), start + MIN_FRAGMENT - 1, -1):
        if not whole.endswith(text[end - 1].casefold()):
            continue
        piece = text[start:end]
        if not piece[-1].isspace() and whole.endswith((" " if piece[0].isspace() else "") + _norm(piece)):
            return start, end
    return None


def spans(text: str, target: Target, *, cut_start: bool = False, cut_end: bool = False) -> list[Span]:
    """Where ``text`` holds the target: its matches, the fragments before each ellipsis, and (when
    ``text`` was cut there) the fragment at its start or end; merged, in order."""
    found = [(m.start(), m.end()) for m in target.finditer(text)]
    whole = _whole(target)
    if whole is not None:
        cuts = [_head_fragment(text, m.start(), whole) for m in re.finditer(ELLIPSIS, text)]
        if cut_start:
            cuts.append(_tail_fragment(text, 0, whole))
        if cut_end:
            cuts.append(_head_fragment(text, len(text), whole))
        found += [c for c in cuts if c is not None]
    return _merge(found)


def _replace(text: str, where: Sequence[Span], tombstone_id: str) -> str:
    out, last = [], 0
    for start, end in where:
        out += [text[last:start], marker(tombstone_id)]
        last = end
    return "".join(out) + text[last:]


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def scrub_text(text: str, target: Target, tombstone_id: str) -> Scrubbed:
    """Plain text with every place of the target replaced by the marker (module docstring)."""
    where = spans(text, target)
    starts = _line_starts(text)
    lines = tuple(dict.fromkeys(bisect.bisect_right(starts, s) for s, _ in where))
    return Scrubbed(_replace(text, where, tombstone_id), len(where), lines)


def scrub_edit(fields: dict[str, str], target: Target, tombstone_id: str, *, at_start: bool, at_end: bool) -> tuple[dict[str, str], int]:
    """A journal edit's four text fields (``CONTEXT_FIELDS``) scrubbed together (module docstring):
    the new fields and how many places were replaced."""
    cover: dict[str, list[Span]] = {name: [] for name in CONTEXT_FIELDS}
    for middle in ("removed", "inserted"):
        parts = [("before", fields["before"]), (middle, fields[middle]), ("after", fields["after"])]
        joined = "".join(text for _, text in parts)
        for start, end in spans(joined, target, cut_start=not at_start, cut_end=not at_end):
            offset = 0
            for name, text in parts:
                lo, hi = max(start, offset), min(end, offset + len(text))
                if lo < hi:
                    cover[name].append((lo - offset, hi - offset))
                offset += len(text)
    out, count = {}, 0
    for name in CONTEXT_FIELDS:
        merged = _merge(cover[name])
        count += len(merged)
        out[name] = _replace(fields[name], merged, tombstone_id)
    return out, count


def _edit_fields(record: Any) -> dict[str, str] | None:
    if isinstance(record, dict) and record.get("kind") == "edit" and all(isinstance(record.get(k), str) for k in CONTEXT_FIELDS):
        return {k: record[k] for k in CONTEXT_FIELDS}
    return None


def scrub_json(raw: str, target: Target, tombstone_id: str) -> Scrubbed:
    """One JSON value's text (a document, or one line of JSON lines) with its string values
    scrubbed and only the changed literals re-encoded (module docstring); its lines are those of
    the literals that held the target.

    Text that is not JSON (a torn last line, a damaged copy kept aside) still has its whole string
    literals searched decoded, and then the rest as plain text (a literal cut short is there)."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        done = _scrub_literals(raw, target, tombstone_id, {})
        rest = scrub_text(done.text, target, tombstone_id)
        return Scrubbed(rest.text, done.count + rest.count, tuple(sorted({*done.lines, *rest.lines})))
    edit = _edit_fields(record)
    if edit is None:
        return _scrub_literals(raw, target, tombstone_id, {})
    replaced, count = scrub_edit(edit, target, tombstone_id, at_start=bool(record.get("atStart")),
                                 at_end=bool(record.get("atEnd")))
    done = _scrub_literals(raw, target, tombstone_id, replaced)
    return Scrubbed(done.text, done.count + count, done.lines)


def _scrub_literals(raw: str, target: Target, tombstone_id: str, replaced: dict[str, str]) -> Scrubbed:
    """``raw`` with each string value literal scrubbed decoded, or, for a value whose key is in
    ``replaced``, set to the value given there (the count is the caller's for those)."""
    out: list[str] = []
    at: list[int] = []
    last, key, count = 0, "", 0
    for m in _JSON_STRING.finditer(raw):
        literal = m.group(0)[: len(m.group(0)) - len(m.group(1) or "")]
        try:
            value = json.loads(literal)
        except json.JSONDecodeError:  # not a literal after all (text that is not JSON): the plain search has it
            continue
        if m.group(1):  # a key: kept, and remembered for the value after it
            key = value
            continue
        if key in replaced:
            new = replaced.pop(key)
        else:
            one = scrub_text(value, target, tombstone_id)
            new, count = one.text, count + one.count
        key = ""
        if new != value:
            at.append(m.start())
            out += [raw[last : m.start()], json.dumps(new, ensure_ascii=literal.isascii())]
            last = m.start() + len(literal)
    starts = _line_starts(raw)
    lines = tuple(dict.fromkeys(bisect.bisect_right(starts, s) for s in at))
    return Scrubbed("".join(out) + raw[last:], count, lines)
