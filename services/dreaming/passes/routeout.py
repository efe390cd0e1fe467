"""The route-out: when MEMORY.md is over its budget, episodic blocks move to ``<episodicArchiveDir>/<topic>.md``.

Pure and deterministic (no model, no clock, no transcript): ``route_out(text, budget, dir)`` lists
the moves, oldest first chosen, until what is left fits. The caller runs it after the compactor,
on the text the compactor left, and before the reviewer; ``maxChangesPerRun`` does not limit it.

**Dates** (the only forms read; case-insensitive month and weekday names, English): ISO
``2026-11-30`` and ``2026/11/30`` (one or two digit month and day), ``30 Nov 2026``,
``30th November, 2026``, ``Nov 30, 2026``, ``November 30th 2026``, ``Nov. 30, 2026``, each
optionally after a weekday (``Mon``, ``Monday,``). A date must exist (``2026-02-30`` is not one).
Numeric day-month forms (``30/11/2026``, ``11/30/2026``, ``30.11.2026``) are ambiguous and never
read. A date *opens* a text when only ``[``, ``(``, ``*`` or ``_`` stand before it.

**Time words**, at the start of a text (after the same wrappers), whole words, any case:
``today``, ``yesterday``, ``tonight``, ``this morning``, ``this afternoon``, ``this evening``,
``this week``, ``last night``, ``last week``, ``earlier today``, ``this session``, ``last session``,
and ``session`` as a label: followed (after an optional number ``12``/``#12`` or a date) by a
colon, a parenthesis, an en or em dash, or a hyphen and a blank (``Session 12: …``), so that
``Session tokens expire hourly`` is no log.

**Headings.** A *date heading* opens with a date (``## 2026-11-30``, ``### Mon, Nov 30, 2026 —
deploy``). A *time heading* opens with a time word (``## Today``). A *log heading* ends with one of
these names, whole words, any case, once its dates, trailing bracketed groups and punctuation are
set aside: ``log``, ``logs``, ``worklog``, ``devlog``, ``changelog``, ``journal``, ``diary``,
``history``, ``timeline``, ``standup``, ``standups``, ``stand-up``, ``stand-ups``, ``session``,
``daily notes``, ``session notes``, ``meeting notes``, ``session summary``, ``session
summaries``, ``progress``, ``recent work``, ``recent activity`` (``## Session log``, ``## Work-log
(Kafka)``, ``## Standup 2026-11-30``; not ``## Log format``, ``## Backlog``). A *dated section* is
the section of a date heading, or of a time or log heading that holds a date.

**Blocks** (what moves, each whole or not at all):

1. *A dated section*: its heading and everything under it up to the next heading of its level or
   a higher one, sub-sections and fenced code included, when no line of it is pinned. An outer
   dated section holds the inner ones. A dated section with a pinned part is not a block: its
   heading stays and its entries outside the pinned part count as below.
2. *An episodic entry* (``blocks.py``: a top-level list item with its continuation, or a
   paragraph; fenced code is never one) outside those sections, when its first line (after a list
   bullet and a task box) opens with a date or a time word, or when it stands under a date, time
   or log heading (a sub-section inherits: ``## Session log`` › ``### Kafka`` › ``- restarted``).
   A list item with an open task box (``- [ ] 2026-12-01 call the bank``) is a task, not a note:
   its own first words are not read, though it still counts under such a heading.
   An entry with an indented fenced block right under it stays (fenced code never moves alone).

Nothing in a pinned section moves (``apply/sections.py``), nor a block that holds a secret
(``gateway.secrets_guard``, docs/concepts/secrets.md), nor one that brings back forgotten text
(``forgotten``: the tombstones, docs/concepts/forget.md): it stays where it is, for a forget to remove,
never copied into another file (``held`` collects why, for the run's report; also logged).
Headings stay, but for a dated section's, which moves with its section: a heading whose entries all moved stays behind, empty (a line), so
the sections around it keep their shape. Spans and blank lines follow ``blocks.py`` (the blank
lines after a block, or after a run of moved blocks that touch, go with it when it opens its
block or they end the file), so the text left and the moves' texts together are the original,
character for character. CRLF and lone CR line ends are kept as they are.

**Order.** A block's date is the first date on its first line (a dated section: its heading's),
else that of the nearest heading above it that holds one; blocks with a date come first, oldest
first, then the undated ones; ties and undated blocks in file order, top to bottom. Blocks are
taken in that order until the text left is at most ``budget`` characters (the first block that
makes it fit is the last one taken); when all of them do not make it fit, all move. The moves are
returned in file order.

**Topic** (the target is ``<episodic_dir>/<topic>.md``): from the nearest heading of the block
(a dated section's own heading first, then the headings above it, innermost first) that is not a
date or time heading and does not just name the file (its slug is ``memory``, ``memories``,
``memory-md`` or ``long-term-memory``), its text without its dates, slugified: NFKD, ASCII only,
lower case, each run of other characters one ``-``, trimmed, at most 64 characters; a heading
whose slug is empty (no ASCII letter or digit) is passed over. Else ``log-YYYY-MM`` from the
block's date, else ``log``. Always ``^[a-z0-9-]{1,64}$``: no ``/``, no ``..``, so the target stays
under ``episodic_dir`` (validated by the config; only joined here).
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from gateway import forget_guard
from gateway.forget_guard import Check, nothing_forgotten
from gateway.secrets_guard import Finding, find_secrets, skip_reason
from services.dreaming.apply import sections
from services.dreaming.apply.applier import episodic_path
from services.dreaming.passes import blocks
from services.dreaming.passes.moves import ROUTE, Move

log = structlog.get_logger()

_MONTH_NUMBERS = {name: number for number, names in enumerate(
    [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
     ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
     ("dec", "december")], start=1) for name in names}
_MONTH = "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))
_WEEKDAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|tues|thurs|thur|mon|tue|wed|thu|fri|sat|sun"
_DATE_CORE = (
    r"(?:(?<!\d)(?P<y>\d{4})(?P<sep>[-/])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})(?!\d)"
    rf"|(?<!\d)(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m2>{_MONTH})\.?,?\s+(?P<y2>\d{{4}})(?!\d)"
    rf"|\b(?P<m3>{_MONTH})\.?\s+(?P<d3>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y3>\d{{4}})(?!\d))"
)
_DATE = re.compile(rf"(?:\b(?:{_WEEKDAY})\.?,?\s+)?{_DATE_CORE}", re.IGNORECASE)
_WRAPPERS = "[(*_"
_TIME_WORDS = (
    r"today|yesterday|tonight|this\s+morning|this\s+afternoon|this\s+evening|this\s+week|last\s+night"
    r"|last\s+week|earlier\s+today|this\s+session|last\s+session"
)
_TIME = re.compile(
    rf"(?:(?:{_TIME_WORDS})\b|session(?:\s+(?:#?\d+|{_DATE_CORE}))?\s*(?:[:(\u2013\u2014]|-(?:\s|$)))",
    re.IGNORECASE,
)
LOG_NAMES = (
    "log", "logs", "worklog", "devlog", "changelog", "journal", "diary", "history", "timeline", "standup",
    "standups", "stand-up", "stand-ups", "session", "daily notes", "session notes", "meeting notes",
    "session summary", "session summaries", "progress", "recent work", "recent activity",
)
_LOG_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:" + "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in LOG_NAMES) + r")$"
)
_FILE_TITLES = frozenset({"memory", "memories", "memory-md", "long-term-memory"})
TOPIC = re.compile(r"^[a-z0-9-]{1,64}$")


def _valid(match: re.Match[str]) -> str | None:
    """The ISO date a ``_DATE`` match names, or None when no such day exists."""
    year, month, day = match.group("y", "m", "d")
    if year is None:
        if match.group("y2") is not None:
            year, month, day = match.group("y2", "m2", "d2")
        else:
            year, month, day = match.group("y3", "m3", "d3")
        month = str(_MONTH_NUMBERS[month.lower()])
    try:
        return datetime.date(int(year), int(month), int(day)).isoformat()
    except ValueError:
        return None


def leading_date(text: str) -> str | None:
    """The ISO date that opens ``text`` (module docstring), or None."""
    match = _DATE.match(text, len(text) - len(text.lstrip(_WRAPPERS)))
    return _valid(match) if match else None


def first_date(text: str) -> str | None:
    """The first date anywhere in ``text``, as ISO, or None."""
    for match in _DATE.finditer(text):
        if found := _valid(match):
            return found
    return None


def opens_with_time_word(text: str) -> bool:
    """Whether a time word (module docstring) opens ``text``."""
    return bool(_TIME.match(text, len(text) - len(text.lstrip(_WRAPPERS))))


def _without_trailing_groups(text: str) -> str:
    """``text`` without the bracketed groups, punctuation and symbols that end it; scanned from
    the end, so a long heading costs its length, not its square."""
    end = len(text)
    unopened: set[str] = set()  # closers with no opener left of them: none further left either
    while end and not text[end - 1].isalnum():
        closer = text[end - 1]
        opener = {")": "(", "]": "["}.get(closer)
        start = -1 if opener is None or closer in unopened else text.rfind(opener, 0, end - 1)
        if opener is not None and start < 0:
            unopened.add(closer)
        end = start if start > 0 else end - 1
    return text[:end]


def is_log_heading(text: str) -> bool:
    """Whether a heading's text names a log (module docstring)."""
    return bool(_LOG_NAME.search(_without_trailing_groups(_DATE.sub(" ", text)).lower()))


def _time_label(text: str) -> bool:
    """A date or time heading: it says when, not what (never a topic)."""
    return leading_date(text) is not None or opens_with_time_word(text)


def _episodic_heading(text: str) -> bool:
    return _time_label(text) or is_log_heading(text)


def _dated_section(text: str) -> bool:
    return leading_date(text) is not None or (_episodic_heading(text) and first_date(text) is not None)


def slugify(text: str) -> str:
    """``text`` as a topic slug (module docstring); "" when nothing of it is ASCII letters or digits."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:64].rstrip("-")


def topic(chain: Sequence[sections.Heading], date: str | None) -> str:
    """The topic of a block standing under ``chain`` (outermost first; a dated section's own
    heading last) with ``date``: always matches ``TOPIC``."""
    for heading in reversed(chain):
        if _time_label(heading.text):
            continue
        slug = slugify(_DATE.sub(" ", heading.text))
        if slug and slug not in _FILE_TITLES:
            return slug
    return f"log-{date[:7]}" if date else "log"


def _heading_date(chain: Sequence[sections.Heading]) -> str | None:
    for heading in reversed(chain):
        if found := first_date(heading.text):
            return found
    return None


@dataclass(frozen=True)
class _Block:
    start: int
    end: int
    chain: tuple[sections.Heading, ...]  # for the topic
    path: tuple[str, ...]  # where it stood
    date: str | None
    reason: str

    def key(self) -> tuple[int, str, int]:
        return (0, self.date, self.start) if self.date else (1, "", self.start)


def _dated_sections(lay: blocks.Layout) -> tuple[list[_Block], list[tuple[int, int]]]:
    """The dated sections that move whole, and the line ranges they cover."""
    found: list[_Block] = []
    covered: list[tuple[int, int]] = []
    for number, kind in enumerate(lay.kinds):
        if kind is not blocks.Kind.HEADING or (covered and number < covered[-1][1]):
            continue
        chain = lay.chains[number]
        if not _dated_section(chain[-1].text):
            continue
        end = lay.section_end(number)
        if any(lay.pinned[number:end]):
            continue
        date = first_date(chain[-1].text)
        found.append(_Block(lay.starts[number], lay.ends[end - 1], chain, tuple(h.text for h in chain[:-1]), date,
                            f"dated section {chain[-1].text!r}"))
        covered.append((number, end))
    return found, covered


def _why(entry: blocks.Entry) -> str | None:
    """Why ``entry`` is episodic, or None."""
    head = entry.head
    box = head[:3].lower() if entry.item else ""
    if box != "[ ]":  # an open task is a task, not a note, whatever its first words
        head = head[3:].lstrip() if box == "[x]" else head
        if found := leading_date(head):
            return f"dated entry ({found})"
        if opens_with_time_word(head):
            return "session note"
    for heading in reversed(entry.chain):
        if _episodic_heading(heading.text):
            return f"under {heading.text!r}"
    return None


def _entries(lay: blocks.Layout, covered: list[tuple[int, int]]) -> list[_Block]:
    found = []
    ranges = iter(covered)
    current = next(ranges, None)
    for entry in blocks.entries(lay):
        while current is not None and current[1] <= entry.first:
            current = next(ranges, None)
        if not entry.movable or (current is not None and current[0] <= entry.first):
            continue
        reason = _why(entry)
        if reason:
            date = first_date(lay.lines[entry.first]) or _heading_date(entry.chain)
            found.append(_Block(entry.start, entry.take_end, entry.chain, entry.path, date, reason))
    return found


def _secret_lines(text: str) -> list[tuple[int, int, Finding]]:
    """Each finding of the secret guard in ``text`` with the span of its line."""
    found = find_secrets(text)
    if not found:
        return []
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    ends = [*starts[1:], len(text)]
    return [(starts[f.line - 1], ends[f.line - 1], f) for f in found]


def _held(block: _Block, secrets: list[tuple[int, int, Finding]]) -> str:
    """Why ``block`` stays where it is (a line of ``secrets`` overlaps it: module docstring), "" when it may
    move; logged as ``dream_route_out_held`` with the detectors and MEMORY.md's lines, never the value."""
    hits = [f for start, end, f in secrets if start < block.end and block.start < end]
    if not hits:
        return ""
    why = skip_reason(hits)
    log.warning("dream_route_out_held", reason=why)
    return why


def _forgotten_in(block: _Block, text: str, forgotten: Check) -> str:
    """Why ``block`` of ``text`` stays because it brings back forgotten text (``forgotten: F-…``), ""
    when it does not; logged as ``dream_route_out_held`` with the forgets' ids, never the text."""
    ids = forgotten(text[block.start : block.end])
    if not ids:
        return ""
    why = forget_guard.skip_reason(ids)
    log.warning("dream_route_out_held", reason=why)
    return why


def route_out(text: str, budget: int, episodic_dir: str, held: list[str] | None = None,
              forgotten: Check = nothing_forgotten) -> list[Move]:
    """The moves (kind ``ROUTE``) that bring ``text`` within ``budget`` characters, oldest
    episodic blocks first (module docstring); ``[]`` when ``budget`` is 0 or less or the text fits.
    Deterministic; on the text they leave, the route-out moves nothing. ``held``, when given, gets
    why each block it passed over because it holds a secret (``secret: <detector> (line N)``) or
    forgotten text (``forgotten: F-…``; ``forgotten``: the agent's tombstone check) stays."""
    if budget <= 0 or len(text) <= budget:
        return []
    lay = blocks.layout(text)
    dated, covered = _dated_sections(lay)
    left = len(text)
    chosen = []
    candidates = sorted([*dated, *_entries(lay, covered)], key=_Block.key)
    secrets = _secret_lines(text) if candidates else []
    any_forgotten = bool(candidates) and bool(forgotten(text))  # one check of the whole text, then per block
    for block in candidates:
        if left <= budget:
            break
        why = _held(block, secrets) if secrets else ""
        why = why or (_forgotten_in(block, text, forgotten) if any_forgotten else "")
        if why:
            if held is not None:
                held.append(why)
            continue
        chosen.append(Move(
            kind=ROUTE, start=block.start, end=block.end, text=text[block.start : block.end],
            target=episodic_path(episodic_dir, topic(block.chain, block.date)),
            heading_path=block.path, reason=block.reason, date=block.date,
        ))
        left -= block.end - block.start
    return blocks.tidy(lay, chosen)
