"""Search the archive: ranked, snippeted hits that never break on user input.

``query.build_plan`` turns the user string into quoted terms. Candidates come
from ``kb_chunks_fts`` (OR of the terms, and AND when there are several),
``kb_chunks_cjk`` (CJK/Thai runs) and LIKE scans (short runs), each capped at
``POOL`` rows. Scoring (higher is better, in ``[0, 2)``):

- ``x`` = the sum over the tables that matched of ``-bm25`` (FTS5's bm25 is
  lower-is-better and negative), plus 1 per short-run substring found;
- ``relevance`` = ``x / (1 + x)`` (in ``[0, 1)``) times an importance factor
  ``0.8 + 0.02 * importance`` (importance 10 → ×1.0, 5 → ×0.9, 1 → ×0.82);
- ``score`` = ``relevance + 1`` when the chunk matched every term, else
  ``relevance``: "AND with OR fallback" as one ordering.

Scores are bounded and dimension-free, so a caller merging two indexes (the
agent archive and the shared vault) can sort their hits together.

Each hit names the entry it most likely answers: among the entries the chunk
touches, the one whose lines contain the most query words (the chunk's dominant
entry on a tie). Every SearchResult carries the generation that answered and
``stale``: whether any source changed since the last refresh (``is_stale``).

``exclude_paths`` drops every chunk of the named sources *before* the limit is
applied (the shared vault uses it to hide a retired twin beside its live note),
and ``profile`` says which files count as sources for the staleness check.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import apsw
import structlog

from services.kb.query import QueryPlan, build_plan, like_pattern
from services.kb.schema import generation, get_meta
from services.kb.sources import ARCHIVE_PROFILE, SourceProfile, stat_source

DEFAULT_LIMIT: Final = 6
MAX_LIMIT: Final = 20
POOL: Final = 200
SNIPPET_CHARS: Final = 200

log = structlog.get_logger()


@dataclass(frozen=True)
class SearchHit:
    """One ranked chunk. Lines are 1-based and inclusive; ``path`` is workspace-relative."""

    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    provenance: str
    importance: int
    entry_hash: str | None


@dataclass(frozen=True)
class SearchResult:
    """Hits best first, the index generation that answered, and whether sources changed since."""

    hits: list[SearchHit]
    generation: int
    stale: bool


def clamp_limit(limit: int | None) -> int:
    """DESIGN.md: 6 results by default, 20 at most, at least 1."""
    if limit is None or limit <= 0:
        return DEFAULT_LIMIT
    return min(limit, MAX_LIMIT)


def search(
    conn: apsw.Connection,
    workspace: Path,
    query: str,
    limit: int | None = DEFAULT_LIMIT,
    *,
    check_stale: bool = True,
    profile: SourceProfile = ARCHIVE_PROFILE,
    exclude_paths: Collection[str] = (),
) -> SearchResult:
    """Ranked hits for ``query`` (any string; rules in ``query`` and this module's docstring).

    ``conn`` may be read-only. ``check_stale=False`` skips the stat walk and
    reports ``stale=False`` (for callers that track freshness themselves).
    Hits from the sources in ``exclude_paths`` are dropped before the limit.
    Never raises for user input.
    """
    wanted = clamp_limit(limit)
    conn.execute("BEGIN")
    try:
        gen = generation(conn)
        plan = build_plan(query, get_meta(conn, "tokenizer") or "unicode61")
        hits = [] if plan.empty else _run(conn, plan, wanted, frozenset(exclude_paths))
    finally:
        conn.execute("COMMIT")
    stale = is_stale(conn, workspace, profile) if check_stale else False
    return SearchResult(hits, gen, stale)


def _match(conn: apsw.Connection, table: str, expression: str) -> dict[int, float]:
    sql = f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT {POOL}"
    try:
        return {int(row[0]): max(0.0, float(row[1])) for row in conn.execute(sql, (expression,))}
    except apsw.SQLError as exc:  # defensive: build_plan quotes everything
        log.warning("kb_match_failed", table=table, error=str(exc))
        return {}


def _like(conn: apsw.Connection, text: str, cjk_only: bool) -> set[int]:
    sql = "SELECT id FROM kb_chunks WHERE text LIKE ? ESCAPE '\\'"
    if cjk_only:
        sql += " AND has_cjk = 1"
    return {int(row[0]) for row in conn.execute(f"{sql} LIMIT {POOL}", (like_pattern(text),))}


def _group(conn: apsw.Connection, table: str, terms: tuple[str, ...]) -> tuple[dict[int, float], set[int]]:
    """OR-scores and the ids matching every term, for one FTS table."""
    scores = _match(conn, table, " OR ".join(terms))
    if len(terms) == 1:
        return scores, set(scores)
    every = _match(conn, table, " AND ".join(terms))
    for rowid, value in every.items():
        scores.setdefault(rowid, value)
    return scores, set(every)


def _run(conn: apsw.Connection, plan: QueryPlan, limit: int, exclude: frozenset[str]) -> list[SearchHit]:
    raw: dict[int, float] = {}
    required: list[set[int]] = []
    for table, terms in (("kb_chunks_fts", plan.fts_terms), ("kb_chunks_cjk", plan.trigram_terms)):
        if not terms:
            continue
        scores, every = _group(conn, table, terms)
        for rowid, value in scores.items():
            raw[rowid] = raw.get(rowid, 0.0) + value
        required.append(every)
    for term in plan.substrings:
        found = _like(conn, term.text, term.cjk_only)
        for rowid in found:
            raw[rowid] = raw.get(rowid, 0.0) + 1.0
        required.append(found)
    if not raw:
        return []
    rows = _chunk_rows(conn, list(raw))
    ranked: list[tuple[float, int]] = []
    for rowid, x in raw.items():
        if rowid not in rows or rows[rowid].path in exclude:
            continue
        importance = rows[rowid].importance
        relevance = x / (1.0 + x) * (0.8 + 0.02 * importance)
        matched_all = all(rowid in ids for ids in required)
        ranked.append((relevance + (1.0 if matched_all else 0.0), rowid))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [_hit(conn, rows[rowid], score, plan) for score, rowid in ranked[:limit]]


@dataclass(frozen=True)
class _Row:
    path: str
    start_line: int
    end_line: int
    provenance: str
    importance: int
    entry_hash: str | None
    text: str
    source_id: int


def _chunk_rows(conn: apsw.Connection, ids: list[int]) -> dict[int, _Row]:
    marks = ",".join("?" * len(ids))
    sql = (
        "SELECT c.id, s.path, c.start_line, c.end_line, c.provenance, c.importance, c.entry_hash, "
        f"c.text, c.source_id FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id WHERE c.id IN ({marks})"
    )
    return {int(row[0]): _Row(*row[1:]) for row in conn.execute(sql, ids)}


def _hit(conn: apsw.Connection, row: _Row, score: float, plan: QueryPlan) -> SearchHit:
    return SearchHit(
        path=row.path,
        start_line=row.start_line,
        end_line=row.end_line,
        snippet=make_snippet(row.text, plan.words),
        score=round(score, 6),
        provenance=row.provenance,
        importance=row.importance,
        entry_hash=_best_entry(conn, row, plan.words),
    )


def _best_entry(conn: apsw.Connection, row: _Row, words: tuple[str, ...]) -> str | None:
    start, end, text, fallback = row.start_line, row.end_line, row.text, row.entry_hash
    entries = conn.execute(
        "SELECT start_line, end_line, entry_hash FROM kb_entries "
        "WHERE source_id = ? AND start_line <= ? AND end_line >= ? ORDER BY start_line",
        (row.source_id, end, start),
    ).fetchall()
    lines = text.split("\n")
    if len(entries) <= 1 or len(lines) != end - start + 1:
        return str(entries[0][2]) if len(entries) == 1 else fallback
    best: tuple[int, str | None] = (0, fallback)
    for entry_row in entries:
        entry_start, entry_end, digest = int(str(entry_row[0])), int(str(entry_row[1])), str(entry_row[2])
        body = "\n".join(lines[max(entry_start, start) - start : min(entry_end, end) - start + 1]).casefold()
        hits = sum(1 for word in words if word in body)
        if hits > best[0] or (hits == best[0] and hits > 0 and digest == fallback):
            best = (hits, digest)
    return best[1]


def make_snippet(text: str, words: tuple[str, ...], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` chars of ``text`` around the first query word (the start if none occurs),
    with ``…`` where text was cut and whitespace runs collapsed."""
    folded = text.casefold()
    positions = [folded.find(word) for word in words if word]
    found = [p for p in positions if p >= 0]
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


def is_stale(conn: apsw.Connection, workspace: Path, profile: SourceProfile = ARCHIVE_PROFILE) -> bool:
    """Whether a refresh would see a change: a new, edited or deleted source.

    One stat per file, no reads. A source that only became unreadable is not a
    change (a refresh would keep it).
    """
    stored = {
        str(row[0]): (int(row[1]), int(row[2]))
        for row in conn.execute("SELECT path, size, mtime_ns FROM kb_sources")
    }
    scan = profile.scan(workspace)
    for rel, st in scan.files.items():
        if st is None:
            continue
        if stored.get(rel) != (st.size, st.mtime_ns):
            return True
    for rel in stored:
        if rel in scan.excluded:
            return True
        if rel not in scan.files:
            try:
                if stat_source(workspace, rel) is None:
                    return True
            except OSError:
                continue
    return False
