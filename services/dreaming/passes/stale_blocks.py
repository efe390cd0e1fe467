"""The stale files' blocks, and which lines move with an entry the staleness GC takes out.

**Where entries go.** ``memory/archive/stale.md``; an entry whose source is
``untrusted`` goes to ``memory/archive/stale-untrusted.md`` instead, a file that
opens with ``provenance: untrusted`` frontmatter, so that archiving never
raises an entry's trust (``memory/archive/**`` is otherwise ``system``).

**A block** (one per invalidated entry, appended to the stale file)::

    ## Stale · superseded by memory/decisions.md:14 (#42) · from memory/notes.md › Deploy · 2026-12-01 · run R op 7
    <!-- invalid_at: 2026-12-01T03:00:00.250000Z -->
    <!-- stale: {"rule": "superseded", "from": "memory/notes.md", "line": 12, ...} -->

    - #42: The deploy key is in vault A.

The heading says why for people (the rule; the superseding entry's path and
line and the key, or the idle days and retrieval count against the settings),
where the entry stood and the run and op that moved it; the ``invalid_at``
marker is the moment of invalidation (Unix time to the microsecond, in UTC);
the ``stale`` marker holds the same facts as JSON (``rule``, ``from``, ``line``,
``headingPath``, ``by``, ``byLine``, ``key``, ``idleDays``, ``retrievals``,
``lastRetrieved``, ``firstSeen``, ``entry`` (its hash), ``run``, ``op``,
``invalidAt``), with ``>`` escaped so the comment never ends early. Both
markers are metadata to the KB: they are not entries and change no hash. Then
the entry byte for byte, with the marker-only lines that stood right above it.

**What moves with an entry** (``entry_span``): its lines; the marker-only lines
(``<!-- key: value -->``, ``[importance: N]``) right above it, which speak for
it; and the blank lines after it when the line above it is blank, a heading or
the start of the file, or when they run to the end of the file (so a removal
leaves one separation where there were two). An entry whose importance comes
from a marker line standing apart from it (a blank line or a heading between)
is not moved: the marker left behind would speak for the next entry.

**A restore** takes a whole block out of its stale file (its heading to the
next block's heading or the end of the file) and appends its entry (with its
marker lines) to the file named in ``from``, after a blank line. A region that
holds anything but one entry (edited by hand, a note line) is not restored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from services.dreaming.model.archive import IndexedEntry
from services.dreaming.passes.staleness import AGED_OUT, Block, Invalidation

STALE: Final = "memory/archive/stale.md"
STALE_UNTRUSTED: Final = "memory/archive/stale-untrusted.md"
STALE_FILES: Final = (STALE, STALE_UNTRUSTED)
UNTRUSTED_FRONTMATTER: Final = "---\nprovenance: untrusted\n---\n"
HEADING_PREFIX: Final = "## Stale · "

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_MARKERS = re.compile(r"^\s*(?:(?:<!--\s*[A-Za-z_][\w-]*\s*:[^>]*?-->|\[\s*importance\s*:[^\]]*?\])\s*)+$", re.IGNORECASE)
_IMPORTANCE = re.compile(r"<!--\s*importance\s*:|\[\s*importance\s*:", re.IGNORECASE)
_INVALID_AT = re.compile(r"^<!-- invalid_at: (\S+) -->\r?\n?$")
_RECORD = re.compile(r"^<!-- stale: (\{.*\}) -->\r?\n?$")


def split_lines(text: str) -> list[str]:
    """``text`` as lines with their ``\\n`` kept, split at ``\\n`` only (the KB's line model)."""
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def blank(line: str) -> bool:
    return not line.strip()


def marker_only(line: str) -> bool:
    return bool(_MARKERS.match(line.rstrip("\r\n")))


def iso(moment: float | None) -> str | None:
    """Unix time as ISO 8601 UTC to the microsecond (``Z``); None stays None."""
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def target_for(provenance: str) -> str:
    """The stale file an entry of a source with ``provenance`` goes to."""
    return STALE_UNTRUSTED if provenance == "untrusted" else STALE


def entry_span(lines: Sequence[str], start_line: int, end_line: int, prev_end: int) -> tuple[int, int] | str:
    """``[first, end)`` line indexes of the entry at ``start_line..end_line`` (1-based) with the
    marker-only lines right above it, whose previous entry ends at line ``prev_end`` (0: none), or
    why it does not move (module docstring). The blank lines after it are ``with_blanks``'s."""
    first = start_line - 1
    while first > prev_end and marker_only(lines[first - 1]):
        first -= 1
    for line in lines[prev_end:first]:  # between the previous entry and what moves
        if marker_only(line) and _IMPORTANCE.search(line):
            return "an importance marker above it stands apart from it (it would speak for the next entry)"
    return first, end_line


def with_blanks(lines: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (sorted, not overlapping) with the blank lines after each run of adjacent spans
    given to its last span, when the line above the run is blank, a heading or the start of the
    file, or when the blanks run to the end of the file (module docstring)."""
    out = list(spans)
    i = 0
    while i < len(out):
        j = i
        while j + 1 < len(out) and out[j + 1][0] == out[j][1]:
            j += 1
        first, end = out[i][0], out[j][1]
        after = end
        while after < len(lines) and blank(lines[after]):
            after += 1
        if first == 0 or blank(lines[first - 1]) or _HEADING.match(lines[first - 1]) or after == len(lines):
            out[j] = (out[j][0], after)
        i = j + 1
    return out


def _body(text: str) -> str:
    """``text`` without its trailing blank lines, ending with one newline."""
    lines = split_lines(text)
    while lines and blank(lines[-1]):
        lines.pop()
    out = "".join(lines)
    return out if out.endswith("\n") else out + "\n"


def why_text(inv: Invalidation, settings_note: str) -> str:
    """The reason of an invalidation as the heading, the report and the audit say it."""
    if inv.rule == AGED_OUT:
        return f"aged out: idle {inv.idle_days} days, retrieved {inv.entry.retrieval_count} times ({settings_note})"
    by = inv.by
    assert by is not None
    return f"superseded by {by.path}:{by.start_line} ({inv.key})"


def block_text(inv: Invalidation, moved: str, heading_path: Sequence[str], run_id: str, op_id: str,
               invalid_at: float, settings_note: str) -> str:
    """The block appended to the stale file for ``inv`` (module docstring); ``moved`` is the text
    taken out of the source (``entry_span``)."""
    entry, by = inv.entry, inv.by
    where = " › ".join((entry.path, *heading_path))
    stamp = iso(invalid_at)
    assert stamp is not None
    heading = f"{HEADING_PREFIX}{why_text(inv, settings_note)} · from {where} · {stamp[:10]} · run {run_id} op {op_id.rsplit('/', 1)[-1]}"
    record: dict[str, Any] = {
        "rule": inv.rule, "from": entry.path, "line": entry.start_line, "headingPath": list(heading_path),
        "by": by.path if by else None, "byLine": by.start_line if by else None, "key": inv.key or None,
        "idleDays": inv.idle_days, "retrievals": entry.retrieval_count, "lastRetrieved": iso(entry.last_retrieved),
        "firstSeen": iso(entry.first_seen), "entry": entry.entry_hash, "run": run_id, "op": op_id, "invalidAt": stamp,
    }
    flat = json.dumps(record, ensure_ascii=False).replace(">", "\\u003e")
    return f"{heading}\n<!-- invalid_at: {stamp} -->\n<!-- stale: {flat} -->\n\n{_body(moved)}\n"


@dataclass(frozen=True)
class Found:
    """A block of a stale file: its entry and what it says (``block``), its span in the file's
    text (``start``/``end``, chars), the text a restore appends (``body``), and its record."""

    block: Block
    start: int
    end: int
    body: str
    record: dict[str, Any]


def parse(text: str, entries: Sequence[IndexedEntry]) -> list[Found]:
    """The restorable blocks of a stale file's ``text``; ``entries``: the KB's entries of that file."""
    lines = split_lines(text)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    heads = [i for i, line in enumerate(lines) if line.startswith(HEADING_PREFIX)]
    out = []
    for n, head in enumerate(heads):
        stop = heads[n + 1] if n + 1 < len(heads) else len(lines)
        inside = [e for e in entries if head < e.start_line - 1 < stop]
        if len(inside) != 1 or head + 3 > stop:
            continue
        stamp, raw = _INVALID_AT.match(lines[head + 1]), _RECORD.match(lines[head + 2])
        if stamp is None or raw is None:
            continue
        try:
            record = json.loads(raw.group(1))
        except ValueError:
            continue
        invalid_at = parse_iso(stamp.group(1))
        origin = record.get("from") if isinstance(record, dict) else None
        if invalid_at is None or not isinstance(origin, str):
            continue
        entry = inside[0]
        first = head + 3
        while first < entry.start_line - 1 and blank(lines[first]):
            first += 1
        if any(not marker_only(line) for line in lines[first : entry.start_line - 1]):
            continue
        body = _body("".join(lines[first : entry.end_line]))
        out.append(Found(Block(entry, origin, invalid_at), offsets[head], offsets[stop], body, record))
    return out
