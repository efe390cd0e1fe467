"""Many recall probes in one call: is each entry found through the index in the file it stands in?

Dreaming's deterministic passes move thousands of entries in one run (a 164 KB
MEMORY.md drained at once), and every one must be found again before the run
stands. A ``Search`` per entry costs milliseconds each (ranking, snippets, a
round trip); a probe costs a fraction of one. A probe is ``(path, query, text)``:
the query is built by Search's own rules (``query.build_plan`` with the index's
tokenizer and ``word_chars``: quoted terms, a long word as a prefix, the trigram
table for CJK stretches, LIKE for short ones). The entry is found when

- a chunk of ``path``'s source matches every term of the query and holds
  ``text`` (whitespace aside): the common case, one statement; or else
- ``path`` holds ``text`` (whitespace aside) and, at some place where it does,
  each term on its own matches a chunk of the source that covers some of those
  lines. That is an entry longer than a chunk (a long line is cut into segments:
  ``chunking``), or one that straddles two chunks: its words are spread over
  several chunks, so no single chunk matches them all, and Search finds it by
  each of them (docs/concepts/archive.md "Knowledge archive (KB)" › Long words).

An empty query (no searchable word) is found by definition.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

import apsw

from services.kb.index.chunking import split_lines
from services.kb.index.query import QueryPlan, build_plan, like_pattern, word_chars

MAX_PROBES = 5000  # per call
PLACES = 16  # places of one file where a text stands that a probe tries (a text repeated more often is rare)


def _normalized(text: str) -> str:
    """``text`` with its whitespace normalised, a NUL counted as a space (a chunk's text holds one so)."""
    return " ".join(text.replace("\x00", " ").split())


class _File:
    """A source's text with its whitespace normalised, and the line each part of it comes from
    (lines as the indexer numbers them: ``split_lines``)."""

    def __init__(self, text: str) -> None:
        parts: list[str] = []
        self.starts: list[int] = []  # offset in ``text`` where each non-blank line begins
        self.numbers: list[int] = []  # its line number
        at = 0
        for number, line in enumerate(split_lines(text), start=1):
            words = line.replace("\x00", " ").split()
            if not words:
                continue
            if parts:
                at += 1
            part = " ".join(words)
            self.starts.append(at)
            self.numbers.append(number)
            parts.append(part)
            at += len(part)
        self.text = " ".join(parts)

    def places(self, wanted: str) -> list[tuple[int, int]]:
        """The (first line, last line) of up to ``PLACES`` places where the file holds ``wanted``."""
        out: list[tuple[int, int]] = []
        at = self.text.find(wanted)
        while at >= 0 and len(out) < PLACES:
            first = self.numbers[bisect.bisect_right(self.starts, at) - 1]
            last = self.numbers[bisect.bisect_right(self.starts, at + len(wanted) - 1) - 1]
            out.append((first, last))
            at = self.text.find(wanted, at + 1)
        return out


def _read(workspace: Path, path: str) -> _File:
    try:
        data = (workspace / path).read_bytes()
    except OSError:
        return _File("")
    return _File(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))


def _matching_chunks(conn: apsw.Connection, source_id: int, plan: QueryPlan) -> list[str]:
    """Texts of the chunks of ``source_id`` matching every term of ``plan``."""
    conditions, params = ["c.source_id = ?"], [source_id]
    tables = ""
    if plan.fts_terms:
        tables += " JOIN kb_chunks_fts f ON f.rowid = c.id"
        conditions.append("kb_chunks_fts MATCH ?")
        params.append(" AND ".join(plan.fts_terms))  # type: ignore[arg-type]
    if plan.trigram_terms:
        tables += " JOIN kb_chunks_cjk t ON t.rowid = c.id"
        conditions.append("kb_chunks_cjk MATCH ?")
        params.append(" AND ".join(plan.trigram_terms))  # type: ignore[arg-type]
    for term in plan.substrings:
        conditions.append("c.text LIKE ? ESCAPE '\\'")
        params.append(like_pattern(term.text))  # type: ignore[arg-type]
    sql = f"SELECT c.text FROM kb_chunks c{tables} WHERE {' AND '.join(conditions)}"
    try:
        return [str(row[0]) for row in conn.execute(sql, params)]
    except apsw.SQLError:  # defensive: build_plan quotes everything
        return []


def _each_term_covers(conn: apsw.Connection, source_id: int, plan: QueryPlan, first: int, last: int) -> bool:
    """Whether each term of ``plan`` alone matches a chunk of ``source_id`` that covers some of lines
    ``first``–``last``. A source's chunks have consecutive ids in line order, so those chunks are one
    range of ids, which FTS5 reads by rowid."""
    span = conn.execute(
        "SELECT min(id), max(id) FROM kb_chunk_rows WHERE source_id = ? AND start_line <= ? AND end_line >= ?",
        (source_id, last, first),
    ).fetchone()
    if span is None or span[0] is None:
        return False
    low, high = int(span[0]), int(span[1])
    checks = [("SELECT 1 FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT 1", t)
              for t in plan.fts_terms]
    checks += [("SELECT 1 FROM kb_chunks_cjk WHERE kb_chunks_cjk MATCH ? AND rowid BETWEEN ? AND ? LIMIT 1", t)
               for t in plan.trigram_terms]
    for term in plan.substrings:
        cjk = " AND has_cjk = 1" if term.cjk_only else ""
        sql = f"SELECT 1 FROM kb_chunks WHERE text LIKE ? ESCAPE '\\' AND id BETWEEN ? AND ?{cjk} LIMIT 1"
        checks.append((sql, like_pattern(term.text)))
    try:
        return all(conn.execute(sql, (param, low, high)).fetchone() is not None for sql, param in checks)
    except apsw.SQLError:  # defensive: build_plan quotes everything
        return False


def probe(conn: apsw.Connection, workspace: Path, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
    """For each ``(path, query, text)``: found (module docstring). ``conn`` may be read-only."""
    meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM kb_meta WHERE key IN ('tokenizer', 'chunking')")}
    tokenizer = meta.get("tokenizer") or "unicode61"
    limit = word_chars(meta.get("chunking"))
    sources = {str(p): int(i) for i, p in conn.execute("SELECT id, path FROM kb_sources")}
    files: dict[str, _File] = {}
    out = []
    for path, query, text in probes:
        source_id = sources.get(path)
        if source_id is None:
            out.append(False)
            continue
        plan = build_plan(query, tokenizer, limit)
        if plan.empty:
            out.append(True)
            continue
        wanted = _normalized(text)
        if any(wanted in _normalized(chunk) for chunk in _matching_chunks(conn, source_id, plan)):
            out.append(True)
            continue
        if path not in files:
            files[path] = _read(workspace, path)
        places = files[path].places(wanted) if wanted else []
        out.append(any(_each_term_covers(conn, source_id, plan, first, last) for first, last in places))
    return out
