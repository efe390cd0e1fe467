"""Many recall probes in one call: is each entry found through the index in the file it stands in?

Dreaming's deterministic passes move thousands of entries in one run (a 164 KB
MEMORY.md drained at once), and every one must be found again before the run
stands. A ``Search`` per entry costs milliseconds each (ranking, snippets, a
round trip); a probe costs a fraction of one. A probe is ``(path, query, text)``:
the query is built by Search's own rules (``query.build_plan``: quoted terms,
the trigram table for CJK runs, LIKE for short runs) and must match, with all
of its terms, one chunk of ``path``'s source; the entry is found when such a
chunk holds ``text`` (whitespace aside), or, for an entry that straddles two
chunks, when the file holds it and a chunk of it matched. An empty query (no
searchable word) is found by definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import apsw

from services.kb.index.query import build_plan, like_pattern

MAX_PROBES = 5000  # per call


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _matching_chunks(conn: apsw.Connection, source_id: int, query: str, tokenizer: str) -> list[str] | None:
    """Texts of the chunks of ``source_id`` matching every term of ``query``; None when it has no term."""
    plan = build_plan(query, tokenizer)
    if plan.empty:
        return None
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


def probe(conn: apsw.Connection, workspace: Path, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
    """For each ``(path, query, text)``: found (module docstring). ``conn`` may be read-only."""
    rows = conn.execute("SELECT value FROM kb_meta WHERE key = 'tokenizer'").fetchall()
    tokenizer = str(rows[0][0]) if rows else "unicode61"
    sources = {str(p): int(i) for i, p in conn.execute("SELECT id, path FROM kb_sources")}
    files: dict[str, str] = {}
    out = []
    for path, query, text in probes:
        source_id = sources.get(path)
        if source_id is None:
            out.append(False)
            continue
        chunks = _matching_chunks(conn, source_id, query, tokenizer)
        if chunks is None:
            out.append(True)
            continue
        wanted = _normalized(text)
        if any(wanted in _normalized(chunk) for chunk in chunks):
            out.append(True)
            continue
        if chunks and path not in files:
            try:
                files[path] = _normalized((workspace / path).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                files[path] = ""
        out.append(bool(chunks) and wanted in files.get(path, ""))
    return out
