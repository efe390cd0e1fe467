"""What a search shows for its final chunks: hits with snippets and the entry each answers.

``search`` ranks chunk ids; this module turns the best few into ``SearchHit`` objects.
Text, entries and snippets are read for those chunks only (``chunk_rows``,
``entries_of``). Each hit names the entry it most likely answers: among the
entries the chunk touches, the one whose lines contain the most query words
(the chunk's dominant entry on a tie, or when no entry holds a query word).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import apsw

from services.kb.index.schema import PREFIX_BYTES, resolve_prefixes

SNIPPET_CHARS: Final = 200
SCORE_DECIMALS: Final = 4  # a hit's score as shown (``shown_score``)
MEMO_CHUNKS: Final = 4096  # chunks whose entries one connection's memo keeps

Entry = tuple[int, int, str]  # start_line, end_line, entry_hash

_K = TypeVar("_K")
_V = TypeVar("_V")

DETAIL_COLUMNS: Final = (
    "s.path, c.start_line, c.end_line, c.provenance, c.importance, c.entry_hash, c.text, c.source_id "
    "FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id"
)


def shown_score(score: float) -> float:
    """``score`` as a reply shows it: rounded to ``SCORE_DECIMALS`` (4) decimals.

    Rounding happens only here, after every sort and merge, so the order is
    that of the exact scores; a shown value is 0 or at least 0.0001, so it never
    prints in exponent notation (an exact partial-match score can be 0.000001,
    see ``search``).
    """
    return round(score, SCORE_DECIMALS)


@dataclass(frozen=True)
class SearchHit:
    """One ranked chunk. Lines are 1-based and inclusive; ``path`` is workspace-relative;
    ``score`` is exact (``shown_score`` rounds it for a reply)."""

    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    provenance: str
    importance: int
    entry_hash: str | None


@dataclass(frozen=True)
class ChunkRow:
    """The columns of one chunk a hit shows (``DETAIL_COLUMNS``, in order)."""

    path: str
    start_line: int
    end_line: int
    provenance: str
    importance: int
    entry_hash: str | None
    text: str
    source_id: int


def chunk_rows(conn: apsw.Connection, ids: list[int]) -> dict[int, ChunkRow]:
    """Everything a hit shows, for the final few chunks only (text is the costly column)."""
    rows = conn.execute(f"SELECT c.id, {DETAIL_COLUMNS} WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))
    return {int(row[0]): ChunkRow(*row[1:]) for row in rows}


def make_hits(
    conn: apsw.Connection,
    words: tuple[str, ...],
    ranked: list[tuple[float, int]],
    rows: dict[int, ChunkRow],
    known: dict[int, list[Entry]],
    hide: Callable[[str], bool] | None = None,
) -> list[SearchHit]:
    """``ranked`` (score, chunk id), best first, as hits for a query of ``words``; ``rows``
    holds each chunk's details. ``known`` (the caller's memo for this index generation,
    chunk id → entries) supplies entries; ``entries_of`` (one statement) reads the rest,
    which are added to it (at most ``MEMO_CHUNKS``, the oldest dropped first). A chunk whose
    text ``hide`` is true for is left out (the KB's tombstones: ``archive/forgotten.py``)."""
    shown = [(score, rowid, rows[rowid]) for score, rowid in ranked
             if rowid in rows and not (hide is not None and hide(rows[rowid].text))]
    if not shown:
        return []
    entries = {rowid: known[rowid] for _, rowid, _ in shown if rowid in known}
    missing = [(rowid, row) for _, rowid, row in shown if rowid not in entries]
    if missing:
        for (rowid, _), found in zip(missing, entries_of(conn, [row for _, row in missing]), strict=True):
            entries[rowid] = found
            remember(known, rowid, found, MEMO_CHUNKS)
    hits = []
    for score, rowid, row in shown:
        folded = row.text.casefold()
        hits.append(
            SearchHit(
                path=row.path,
                start_line=row.start_line,
                end_line=row.end_line,
                snippet=snippet(row.text, folded, words, SNIPPET_CHARS),
                score=score,
                provenance=row.provenance,
                importance=row.importance,
                entry_hash=best_entry(row, entries[rowid], words, folded),
            )
        )
    return hits


def entries_of(conn: apsw.Connection, rows: list[ChunkRow]) -> list[list[Entry]]:
    """For each row, the entries of its source that overlap its lines, by start line.

    A source's entries are one packed row in ``kb_source_entries`` (``schema``), found by
    its id: one statement fetches the rows of every source involved, unpacked in Python
    (``json.loads`` is several times cheaper than unpacking them with ``json_each``)."""
    ids = sorted({row.source_id for row in rows})
    sql = "SELECT source_id, lines, hashes FROM kb_source_entries WHERE source_id IN (SELECT value FROM json_each(?))"
    arrays = {int(source_id): (json.loads(lines), hashes) for source_id, lines, hashes in conn.execute(sql, (json.dumps(ids),))}
    found: list[list[tuple[int, int, bytes]]] = []
    for row in rows:
        first, last = row.start_line, row.end_line
        numbers, hashes = arrays.get(row.source_id, ((), b""))
        found.append([
            (numbers[k], numbers[k + 1], hashes[k // 3 * PREFIX_BYTES : k // 3 * PREFIX_BYTES + PREFIX_BYTES])
            for k in range(0, len(numbers), 3)
            if numbers[k] <= last and numbers[k + 1] >= first
        ])  # fmt: skip
    # The stored prefixes name lifecycle rows (one statement for all); an entry whose prefix
    # names no single row (``schema.RESOLVE_SQL``) is left out rather than given a guess.
    digests = resolve_prefixes(conn, [prefix for entries in found for _, _, prefix in entries])
    return [[(start, end, digests[prefix]) for start, end, prefix in entries if prefix in digests] for entries in found]


def best_entry(row: ChunkRow, entries: list[Entry], words: tuple[str, ...], folded: str | None = None) -> str | None:
    """The entry the hit most likely answers (module docstring): of the entries overlapping the chunk,
    the one whose lines hold the most query words; the chunk's dominant entry on a tie or when none does.

    ``folded`` is ``row.text.casefold()`` when the caller has it. A word never
    holds a newline, so it occurs in an entry's lines exactly when it occurs on
    one of them: the lines holding each word are found once (``str.find``), and
    an entry counts the words on those of its lines; an entry with none of them
    cannot change the choice and is passed over.
    """
    start, end, fallback = row.start_line, row.end_line, row.entry_hash
    if len(entries) <= 1:
        return entries[0][2] if entries else fallback
    if folded is None:
        folded = row.text.casefold()
    present = [word for word in words if word in folded]
    if not present or folded.count("\n") != end - start:  # casefold never adds or removes a newline
        return fallback
    if len(present) == 1:
        hot = lines_holding(folded, present[0])
        masks: dict[int, int] | None = None
    else:
        masks = {}
        for bit, word in enumerate(present):
            for line in lines_holding(folded, word):
                masks[line] = masks.get(line, 0) | 1 << bit
        hot = sorted(masks)
    count = len(hot)
    best_hits, best = 0, fallback
    for entry_start, entry_end, digest in entries:
        at = bisect.bisect_left(hot, entry_start - start if entry_start > start else 0)
        last = entry_end - start if entry_end < end else end - start
        if at == count or hot[at] > last:
            continue  # no query word on this entry's lines: a count of 0 never changes the choice
        if masks is None:
            hits = 1
        else:
            seen = 0
            while at < count and hot[at] <= last:
                seen |= masks[hot[at]]
                at += 1
            hits = seen.bit_count()
        if hits > best_hits or (hits == best_hits and digest == fallback):
            best_hits, best = hits, digest
    return best


def lines_holding(text: str, word: str) -> list[int]:
    """The 0-based numbers of the lines of ``text`` that contain ``word`` (which holds no newline), ascending."""
    found: list[int] = []
    line = 0
    line_start = 0
    at = text.find(word)
    while at >= 0:
        line += text.count("\n", line_start, at)
        found.append(line)
        line_start = text.find("\n", at)
        if line_start < 0:
            break
        at = text.find(word, line_start)
    return found


def make_snippet(text: str, words: tuple[str, ...], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` chars of ``text`` around the first query word (the start if none occurs),
    with ``…`` where text was cut and whitespace runs collapsed."""
    return snippet(text, text.casefold(), words, width)


def snippet(text: str, folded: str, words: tuple[str, ...], width: int) -> str:
    """``make_snippet`` given ``folded`` = ``text.casefold()``."""
    found = [p for p in (folded.find(word) for word in words if word) if p >= 0]
    if not found:
        # Stemmed matches (porter) do not occur verbatim: try a word's first 4 chars.
        found = [p for p in (folded.find(word[:4]) for word in words if len(word) >= 4) if p >= 0]
    at = min(found) if found and len(folded) == len(text) else 0
    start = max(0, at - width // 3)
    if start > 0:
        space = text.rfind(" ", max(0, start - 20), start)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.find(" ", end - 20, end)
        end = space if space > start else end
    body = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + body + ("…" if end < len(text) else "")


def remember(memory: dict[_K, _V], key: _K, value: _V, cap: int) -> None:
    """Store ``key`` in ``memory``, first dropping the oldest key when it holds ``cap``."""
    if len(memory) >= cap:
        del memory[next(iter(memory))]  # the oldest
    memory[key] = value
