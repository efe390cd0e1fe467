"""Search the archive: ranked, snippeted hits that never break on user input.

``query.build_plan`` turns the user string into quoted terms. Candidates come
from ``kb_chunks_fts`` and ``kb_chunks_cjk`` (CJK/Thai runs), each the best
``POOL`` rows of one MATCH by bm25, and from LIKE scans (short runs), capped at
``POOL`` rows. Scoring (higher is better, in ``[0, 2)``):

- ``x`` = the sum over the tables that matched of ``-bm25`` (FTS5's bm25 is
  lower-is-better and negative), plus 1 per short-run substring found;
- ``relevance`` = ``x / (1 + x)`` (in ``[0, 1)``) times an importance factor
  ``0.8 + 0.02 * importance`` (importance 10 → ×1.0, 5 → ×0.9, 1 → ×0.82);
- ``score`` = ``relevance + 1`` when the chunk matched every term, else
  ``relevance``: "AND with OR fallback" as one ordering.

Evaluation is AND first: the AND of each table's terms (and every substring
scan) is run, and only when fewer than ``limit`` chunks matched every term are
the OR pools computed and the partial matches ranked after them. A chunk that
matched every term outranks any partial match, so when ``limit`` chunks match
every term the OR pools could not change the answer; skipping them is what
keeps a multi-word search about as cheap as one AND query (the OR of common
words matches most of the archive, and bm25 is computed for every match).
The OR fallback follows ``query``'s rules: operator words (``and``, ``or``,
``not``, ``near``) and terms in more than ``COMMON_CHUNKS`` chunks do not drive
it (``_or_terms``). With one FTS table and no substring (most queries) the AND
pool is ranked and joined to its chunks by one SQL statement (``_ranked_sql``),
and so is its OR pool when the fallback runs. A search reads in one
transaction, so the generation it reports and the rows it read belong to the
same snapshot.

Scores are bounded and dimension-free, so a caller merging two indexes (the
agent archive and the shared vault) can sort their hits together. FTS5's
bm25 floors the idf of a term found in half or more of the chunks at 1e-6, so
a partial match on such terms has an exact score near 0.000001; hits keep the
exact score, and a reply shows it rounded (``hits.shown_score``) once every
sort and merge is done.

The best chunks become hits in ``hits`` (snippets, and the entry each most
likely answers; text and entries are read for those chunks only). Every
SearchResult carries the generation that answered and
``stale``: whether any source changed since the last refresh (``is_stale``).

Each connection keeps a small memo per index generation (``_Memo``): the
entries of chunks it has shown and the term counts of the OR fallback. The
generation moves whenever a refresh changes the index, so a memo answers only
for the generation it was read at, and results are the same with or without it.

``exclude_paths`` drops every chunk of the named sources *before* the limit is
applied (the shared vault uses it to hide a retired twin beside its live note),
and ``profile`` says which files count as sources for the staleness check.
"""

from __future__ import annotations

import functools
import heapq
import json
import threading
import weakref
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import apsw
import structlog

from services.kb.index.hits import DETAIL_COLUMNS, ChunkRow, Entry, SearchHit, chunk_rows, make_hits, remember
from services.kb.index.query import QueryPlan, build_plan, fallback_terms, like_pattern, word_chars
from services.kb.index.sources import ARCHIVE_PROFILE, SourceProfile, stat_source

DEFAULT_LIMIT: Final = 6
MAX_LIMIT: Final = 20
POOL: Final = 200
COMMON_CHUNKS: Final = 2000  # a term in more chunks does not drive the OR fallback (see query)
# An archive's search connection: a page cache of this many pages (16 KiB each) and no memory map
# (docs/capacity.md "Where the KB's memory goes"). A search reads most pages once, each a ``pread``
# from the system's file cache, and a few again and again (the FTS5 index's structure record, the
# upper pages of its b-trees): 8 hold those, measured on archives of 1 to 54 MB (6 made a search on
# the largest 2x slower). SQLite gives a cache its first pages as one block of up to 20, filled a
# page at a time as reads need them, so a larger cache grew the KB's resident memory with the
# archives; a mapped database kept every page a search had touched.
READER_CACHE_PAGES: Final = 8
# The vault's search connection (one per vault, over all its agents' notes): bounded in KiB.
VAULT_READER_CACHE_KIB: Final = 32 * 1024

log = structlog.get_logger()

@dataclass(frozen=True)
class SearchResult:
    """Hits best first, the index generation that answered, and whether sources changed since."""

    hits: list[SearchHit]
    generation: int
    stale: bool


def clamp_limit(limit: int | None) -> int:
    """docs/architecture.md "Limits and defaults": 6 results by default, 20 at most, at least 1."""
    if limit is None or limit <= 0:
        return DEFAULT_LIMIT
    return min(limit, MAX_LIMIT)


def tune_reader(conn: apsw.Connection, cache_size: int = READER_CACHE_PAGES) -> None:
    """Read-path settings for a long-lived search connection: reads through SQLite's page cache,
    bounded by ``cache_size`` (as ``PRAGMA cache_size`` takes it: pages, or KiB when negative), and
    no memory map.

    The pages a search reads come from the system's file cache (a ``pread`` each) into the page
    cache, which another connection's commit empties: what the connection holds is at most the
    cache's bound, whatever the size of the database or how long the connection lives. The block
    of pages SQLite made when the connection read its schema, sized for its default cache, is
    handed back so that the next read makes one of the new size.
    """
    conn.execute("PRAGMA mmap_size=0").fetchall()
    conn.execute(f"PRAGMA cache_size={cache_size}")
    conn.execute("PRAGMA shrink_memory")


def search(
    conn: apsw.Connection,
    workspace: Path,
    query: str,
    limit: int | None = DEFAULT_LIMIT,
    *,
    check_stale: bool = True,
    profile: SourceProfile = ARCHIVE_PROFILE,
    exclude_paths: Collection[str] = (),
    hide: Callable[[str], bool] | None = None,
) -> SearchResult:
    """Ranked hits for ``query`` (any string; rules in ``query`` and this module's docstring).

    ``conn`` may be read-only. ``check_stale=False`` skips the stat walk and
    reports ``stale=False`` (for callers that track freshness themselves).
    Hits from the sources in ``exclude_paths`` are dropped before the limit;
    a hit whose chunk text ``hide`` is true for is dropped after it (so fewer
    than ``limit`` may be returned). Never raises for user input.
    """
    wanted = clamp_limit(limit)
    conn.execute("BEGIN")  # one snapshot: the generation and every row read below agree
    try:
        meta = {str(k): str(v) for k, v in conn.execute(_META_SQL)}
        gen = int(meta.get("generation", 0))
        plan = build_plan(query, meta.get("tokenizer") or "unicode61", word_chars(meta.get("chunking")))
        hits = [] if plan.empty else _run(conn, plan, wanted, exclude_paths, _memo(conn, gen), hide)
    finally:
        conn.execute("COMMIT")
    stale = is_stale(conn, workspace, profile) if check_stale else False
    return SearchResult(hits, gen, stale)


_META_SQL: Final = "SELECT key, value FROM kb_meta WHERE key IN ('generation', 'tokenizer', 'chunking')"
MEMO_TERMS: Final = 4096  # term counts one connection's memo keeps


class _Memo:
    """What one connection learnt about one generation of the index: each chunk's entries
    (``hits.make_hits``) and each term's capped chunk count (``_or_terms``).

    The generation counter moves whenever a refresh changes the index (``indexer``),
    so anything read at one generation holds for every snapshot of it: a search
    reads the generation in its own transaction and uses the memo of exactly that
    generation (a new one starts empty). Each map keeps its newest entries only.
    """

    __slots__ = ("counts", "entries", "generation")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.entries: dict[int, list[Entry]] = {}
        self.counts: dict[tuple[str, str, int], int] = {}


_MEMOS: weakref.WeakKeyDictionary[apsw.Connection, _Memo] = weakref.WeakKeyDictionary()
_MEMOS_LOCK: Final = threading.Lock()


def _memo(conn: apsw.Connection, generation: int) -> _Memo:
    with _MEMOS_LOCK:
        memo = _MEMOS.get(conn)
        if memo is None or memo.generation != generation:
            memo = _MEMOS[conn] = _Memo(generation)
        return memo


def forget_memos() -> int:
    """Drop every connection's memo; how many there were. ``handles`` calls it at the minute's
    release, with the page caches: a memo otherwise lives until its index changes, and the
    chunks it holds follow what the searches of that whole time found, up to ``MEMO_CHUNKS``
    per connection. The next search of a generation starts a new one."""
    with _MEMOS_LOCK:
        count = len(_MEMOS)
        _MEMOS.clear()
        return count


_Cand = tuple[int, float, int, int]
"""A chunk as one table (or substring scan) found it: (id, its score ``x`` there, importance, source id)."""


def _pool_sql(table: str) -> str:
    """The best ``POOL`` chunks of one MATCH by bm25, as (id, x = -bm25 clamped at 0).

    ``ORDER BY`` the bm25 column (ties by rowid) rather than FTS5's ``rank``: the
    same order, but ``ORDER BY rank`` with a bm25 or rank column measured ~1.4x
    slower on the benchmark corpus (FTS5's rank sorter evaluates the expression
    again; SQLite's own top-N sorter computes bm25 once per row).
    """
    return (
        f"SELECT id, max(0.0, -b) AS x FROM (SELECT rowid AS id, bm25({table}) AS b FROM {table} "
        f"WHERE {table} MATCH ? ORDER BY b, rowid LIMIT {POOL})"
    )


def _match(conn: apsw.Connection, table: str, expression: str) -> dict[int, _Cand]:
    """One MATCH's pool with each chunk's importance and source."""
    sql = f"SELECT m.id, m.x, c.importance, c.source_id FROM ({_pool_sql(table)}) m JOIN kb_chunk_rows c ON c.id = m.id"
    try:
        return {row[0]: row for row in conn.execute(sql, (expression,))}
    except apsw.SQLError as exc:  # defensive: build_plan quotes everything
        log.warning("kb_match_failed", table=table, error=str(exc))
        return {}


def _like(conn: apsw.Connection, text: str, cjk_only: bool) -> dict[int, _Cand]:
    sql = "SELECT id, 1.0, importance, source_id FROM kb_chunks WHERE text LIKE ? ESCAPE '\\'"
    if cjk_only:
        sql += " AND has_cjk = 1"
    return {row[0]: row for row in conn.execute(f"{sql} LIMIT {POOL}", (like_pattern(text),))}


@functools.lru_cache(maxsize=64)
def _ranked_sql(table: str, excluded: bool, skipped: bool = False, bonus: bool = True) -> str:
    """One FTS table's pool ranked in SQLite: the top ``?`` chunks with everything a hit shows, in no set order.

    Columns: id, x, relevance, then ``ChunkRow``'s. ``x / (1 + x) * (0.8 + 0.02 *
    importance)`` is the relevance of the module docstring evaluated in the same
    order as ``_top`` does in Python (IEEE doubles both), and the top rows are
    chosen as ``_top`` chooses them: by ``relevance + 1`` (``bonus``: the AND
    pool, whose chunks matched every term) or by ``relevance`` (an OR pool),
    then id, so both paths score and choose identically (``_best`` puts them in
    that order; sorting the few rows in Python spares SQLite a sort of their
    text). ``excluded`` source ids and ``skipped`` chunk ids (each one JSON array
    parameter after the MATCH expression, in that order: the SQL does not vary
    with how many) are dropped after the pool is taken, as ``_top`` drops them. Importance and source come from ``kb_chunk_rows`` itself:
    joined through the ``kb_chunks`` view (``schema``) this statement measured
    about 9% slower; only the final rows' details need the view's whole texts.
    """
    conditions = []
    if excluded:
        conditions.append("k.source_id NOT IN (SELECT value FROM json_each(?))")
    if skipped:
        conditions.append("m.id NOT IN (SELECT value FROM json_each(?))")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    key = "rel + 1.0" if bonus else "rel"
    return (
        "SELECT r.id, r.x, r.rel, " + DETAIL_COLUMNS + " JOIN "
        "(SELECT m.id AS id, m.x AS x, m.x / (1.0 + m.x) * (0.8 + 0.02 * k.importance) AS rel "
        f"FROM ({_pool_sql(table)}) m JOIN kb_chunk_rows k ON k.id = m.id{where} ORDER BY {key} DESC, m.id LIMIT ?) r "
        "ON c.id = r.id"
    )


def _ranked(conn: apsw.Connection, table: str, sql: str, params: tuple[str | int, ...]) -> list[tuple]:  # type: ignore[type-arg]
    """The rows of one ``_ranked_sql`` statement; none if SQLite refuses the MATCH expression."""
    try:
        return list(conn.execute(sql, params))
    except apsw.SQLError as exc:  # defensive: build_plan quotes everything
        log.warning("kb_match_failed", table=table, error=str(exc))
        return []


def _best(limit: int, ranked: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The ``limit`` best (score, chunk id) pairs, best first: higher score, then lower id (as ``_top``)."""
    return heapq.nsmallest(limit, ranked, key=lambda item: (-item[0], item[1]))


def _run(conn: apsw.Connection, plan: QueryPlan, limit: int, exclude_paths: Collection[str], memo: _Memo,
         hide: Callable[[str], bool] | None = None) -> list[SearchHit]:
    """AND first; the OR fallback only when fewer than ``limit`` chunks match every term.

    Every group (an FTS table's terms, or one substring) adds its score to the
    chunks it found; a chunk matched every term when every group's AND pool holds
    it. Such chunks score ``relevance + 1`` and so outrank every partial match:
    when there are ``limit`` of them the OR pools cannot change the top ``limit``
    and are never computed. The common case, one FTS table and nothing else, is
    ranked by a single statement (``_ranked_sql``), and so is its OR fallback:
    the OR pool's best ``limit`` chunks outside the AND pool, merged with the AND
    pool's chunks by score exactly as ``_top`` merges the pools.
    """
    excluded = _source_ids(conn, exclude_paths) if exclude_paths else ()
    tables = [(t, terms) for t, terms in (("kb_chunks_fts", plan.fts_terms), ("kb_chunks_cjk", plan.trigram_terms)) if terms]
    if len(tables) == 1 and not plan.substrings:
        table, terms = tables[0]
        exclusion = (json.dumps(list(excluded)),) if excluded else ()
        rows = _ranked(conn, table, _ranked_sql(table, bool(excluded)), (" AND ".join(terms), *exclusion, limit))
        ranked = [(row[2] + 1.0, row[0]) for row in rows]
        if len(rows) < limit and len(terms) > 1 and not excluded:
            # Fewer than limit rows: that was the whole AND pool. A chunk in it keeps its AND score.
            ids = tuple(ranked_id for _, ranked_id in ranked)
            expression = " OR ".join(_or_terms(conn, table, terms, limit, memo))
            partial = _ranked(conn, table, _ranked_sql(table, False, bool(ids), bonus=False),
                              (expression, *((json.dumps(ids),) if ids else ()), limit))
            ranked += [(row[2] + 0.0, row[0]) for row in partial]  # + 0.0 as in _top (-0.0 becomes 0.0)
            rows += partial
        if len(rows) >= limit or len(terms) == 1 or not excluded:
            return make_hits(conn, plan.words, _best(limit, ranked), {row[0]: ChunkRow(*row[3:]) for row in rows}, memo.entries,
                             hide)
    pools = [_match(conn, table, " AND ".join(terms)) for table, terms in tables]
    pools += [_like(conn, term.text, term.cjk_only) for term in plan.substrings]
    smallest = min(pools, key=len)
    every = [rowid for rowid in smallest if all(rowid in pool for pool in pools)]
    if sum(1 for rowid in every if smallest[rowid][3] not in excluded) >= limit:
        return _top(conn, plan, limit, every, pools, pools, excluded, memo, hide)
    # OR fallback: each multi-term table's OR pool; a chunk in its AND pool keeps the AND score.
    scored: list[dict[int, _Cand]] = []
    for (table, terms), pool in zip(tables, pools, strict=False):
        if len(terms) > 1:
            pool = {**_match(conn, table, " OR ".join(_or_terms(conn, table, terms, limit, memo))), **pool}
        scored.append(pool)
    scored += pools[len(tables) :]
    union: dict[int, None] = {}
    for pool in scored:
        union.update(dict.fromkeys(pool))
    return _top(conn, plan, limit, union, scored, pools, excluded, memo, hide)


def _or_terms(conn: apsw.Connection, table: str, terms: tuple[str, ...], limit: int, memo: _Memo) -> tuple[str, ...]:
    """The terms that drive one table's OR fallback (rules in ``query``): no operator words and,
    when the rarer terms alone match at least ``limit`` chunks, none matching over ``COMMON_CHUNKS``."""
    kept = fallback_terms(terms)
    if len(kept) < 2:
        return kept
    counts = {term: _count(conn, table, term, memo) for term in kept}
    rare = tuple(term for term in kept if counts[term] <= COMMON_CHUNKS)
    return rare if rare and max(counts[term] for term in rare) >= limit else kept


def _count(conn: apsw.Connection, table: str, term: str, memo: _Memo) -> int:
    """How many chunks ``term`` matches in ``table``, counted up to ``COMMON_CHUNKS + 1``."""
    key = (table, term, COMMON_CHUNKS)
    found = memo.counts.get(key)
    if found is None:
        sql = f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT {COMMON_CHUNKS + 1})"
        found = int(next(iter(conn.execute(sql, (term,))))[0])
        remember(memo.counts, key, found, MEMO_TERMS)
    return found


def _top(
    conn: apsw.Connection,
    plan: QueryPlan,
    limit: int,
    ids: Iterable[int],
    scored: list[dict[int, _Cand]],
    required: list[dict[int, _Cand]],
    excluded: Collection[int],
    memo: _Memo,
    hide: Callable[[str], bool] | None = None,
) -> list[SearchHit]:
    """Rank ``ids`` by the module docstring's score (``x`` summed over ``scored``) and make hits of the best."""
    ranked: list[tuple[float, int]] = []
    for rowid in ids:
        x = 0.0
        importance = source_id = -1
        for pool in scored:
            found = pool.get(rowid)
            if found is not None:
                x += found[1]
                importance, source_id = found[2], found[3]
        if source_id in excluded:
            continue
        relevance = x / (1.0 + x) * (0.8 + 0.02 * importance)
        matched_all = all(rowid in pool for pool in required)
        ranked.append((relevance + (1.0 if matched_all else 0.0), rowid))
    best = _best(limit, ranked)
    return make_hits(conn, plan.words, best, chunk_rows(conn, [rowid for _, rowid in best]) if best else {}, memo.entries, hide)


def _source_ids(conn: apsw.Connection, paths: Collection[str]) -> tuple[int, ...]:
    rows = conn.execute("SELECT id FROM kb_sources WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),))
    return tuple(int(r[0]) for r in rows)


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
