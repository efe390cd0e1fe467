"""Properties of FTS query building (``services/kb/index/query.py``) against real FTS5 tables.

For any text and every configured tokenizer:

- every MATCH expression the search can send (the terms alone, all of them AND-ed, all of
  them OR-ed, the OR fallback's terms) is accepted by FTS5: never a syntax error;
- a chunk that holds the query's text is found: by the AND of its terms in the main table
  (a CJK run glued to other characters, ``deploy東京``, included; a word cut at 1,000
  characters, as a prefix), by its trigram terms in the CJK table, and by LIKE for each
  substring term;
- the plan keeps its bounds (at most ``MAX_TERMS`` terms, every term quoted).
"""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.kb.index.query import MAX_TERMS, QueryPlan, build_plan, fallback_terms, like_pattern
from services.kb.index.schema import TOKENIZERS

# Pieces users type and the rules are about: FTS5 operators and syntax, prefixes, quotes,
# separators inside words, CJK and Thai runs of every length, combining marks, controls.
PIECES = st.sampled_from(
    ["AND", "or", "NOT", "near", "NEAR(", "deploy", "deploy*", "*", '"', '""', "'", "(", ")", "-", "--", "+", ":",
     "^", "{", "}", "col:x", "well-known", "foo:bar", "a_b", "x.y", "東", "東京", "北京市", "ภาษาไทย", "한국어", "café",
     "e\u0301", "ß", "İ", "\u00ad", "\x00", "\x01", "\x7f", "\t", "\n", "🙂", "1e5", "0x1f", "$", "%", "\\", "\u2028"]
)
QUERIES = st.one_of(
    st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=60),  # assigned characters
    st.lists(PIECES, max_size=12).map(" ".join),
    st.lists(PIECES, max_size=12).map("".join),
    st.lists(st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=8), max_size=40).map(" ".join),  # the cap
    # Words around and over the 1,000-character cut: a prefix of the cut word, in every script.
    st.lists(st.text(st.sampled_from("kq/-é\u0301東ไ🙂 "), min_size=1, max_size=700), min_size=1, max_size=3).map("".join),
)


@pytest.fixture(scope="module")
def db() -> Iterator[apsw.Connection]:
    """One in-memory database with a table per configured tokenizer and the trigram CJK table."""
    conn = apsw.Connection(":memory:")
    for name, tokenize in TOKENIZERS.items():
        conn.execute(f"CREATE VIRTUAL TABLE fts_{name} USING fts5(text, tokenize='{tokenize}')")
    conn.execute("CREATE VIRTUAL TABLE cjk USING fts5(text, tokenize='trigram')")
    conn.execute("CREATE TABLE plain(text)")
    yield conn
    conn.close()


def _matches(conn: apsw.Connection, table: str, expression: str) -> list[int]:
    return [row[0] for row in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (expression,))]


def _expressions(terms: tuple[str, ...]) -> list[str]:
    if not terms:
        return []
    return [*terms, " AND ".join(terms), " OR ".join(terms), " OR ".join(fallback_terms(terms))]


def _check_bounds(plan: QueryPlan) -> None:
    assert plan.term_count <= MAX_TERMS
    for term in (*plan.fts_terms, *plan.trigram_terms):
        body = term[:-1] if term.endswith("*") else term
        assert body.startswith('"') and body.endswith('"') and len(body) >= 2
        assert '"' not in body[1:-1].replace('""', "")  # every inner quote doubled


@settings(max_examples=500)
@given(query=QUERIES)
def test_every_expression_is_valid_fts5_and_finds_the_text_it_came_from(db: apsw.Connection, query: str) -> None:
    text = query.replace("\x00", " ")  # the chunk that holds the query (SQLite's LIKE stops at a NUL)
    with db:  # each example leaves the tables empty again
        document = db.execute("INSERT INTO plain(text) VALUES (?) RETURNING rowid", (text,)).fetchall()[0][0]
        db.execute("INSERT INTO cjk(rowid, text) VALUES (?, ?)", (document, text))
        for name in TOKENIZERS:
            db.execute(f"INSERT INTO fts_{name}(rowid, text) VALUES (?, ?)", (document, text))
        for name in TOKENIZERS:
            plan = build_plan(query, name)
            _check_bounds(plan)
            for expression in _expressions(plan.fts_terms):
                _matches(db, f"fts_{name}", expression)  # apsw.SQLError here is a syntax error
            for expression in _expressions(plan.trigram_terms):
                _matches(db, "cjk", expression)
            if plan.fts_terms:
                assert document in _matches(db, f"fts_{name}", " AND ".join(plan.fts_terms)), (name, plan)
            if plan.trigram_terms:
                assert document in _matches(db, "cjk", " AND ".join(plan.trigram_terms)), (name, plan)
            for term in plan.substrings:
                found = db.execute("SELECT rowid FROM plain WHERE text LIKE ? ESCAPE '\\'", (like_pattern(term.text),))
                assert document in [row[0] for row in found], (name, term)
        db.execute("DELETE FROM plain")
        db.execute("DELETE FROM cjk")
        for name in TOKENIZERS:
            db.execute(f"DELETE FROM fts_{name}")
