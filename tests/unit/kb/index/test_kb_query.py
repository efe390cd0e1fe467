"""User query → quoted FTS5 terms."""

from __future__ import annotations

import unicodedata

import apsw
import pytest

from services.kb.index.query import SubstringTerm, build_plan, has_unsegmented, like_pattern
from services.kb.index.schema import TOKENIZERS


def test_pieces_become_quoted_phrases() -> None:
    plan = build_plan('well-known "deploy AND foo:bar (x) NOT', "unicode61")
    assert plan.fts_terms == ('"well-known"', '"""deploy"', '"AND"', '"foo:bar"', '"(x)"', '"NOT"')


def test_prefix_and_dropped_pieces() -> None:
    plan = build_plan("deplo* * () 🙂 -- ^", "unicode61")
    assert plan.fts_terms == ('"deplo"*',)


def test_empty_and_whitespace_give_an_empty_plan() -> None:
    assert build_plan("", "unicode61").empty
    assert build_plan(" \t\n ", "unicode61").empty
    assert build_plan("\x00\x01", "unicode61").empty


def test_cjk_and_thai_runs_are_routed_to_trigram_or_substring() -> None:
    plan = build_plan("東京 北京市 ภาษาไทย 京 deploy東京", "unicode61")
    assert plan.fts_terms == ('"deploy"',)
    assert plan.trigram_terms == ('"北京市"', '"ภาษาไทย"')
    assert plan.substrings == (SubstringTerm("東京", True), SubstringTerm("京", True))


def test_trigram_tokenizer_splits_tokens_and_scans_short_ones() -> None:
    plan = build_plan("well-known ab", "trigram")
    assert plan.fts_terms == ('"well"', '"known"')
    assert plan.substrings == (SubstringTerm("ab", False),)


def test_term_count_is_capped() -> None:
    plan = build_plan(" ".join(f"w{n}" for n in range(100)), "unicode61")
    assert len(plan.fts_terms) == 32


def test_helpers() -> None:
    assert has_unsegmented("abc 東") and has_unsegmented("ไทย") and not has_unsegmented("café")
    assert like_pattern("50%_a\\") == "%50\\%\\_a\\\\%"


def _found(text: str, query: str, tokenizer: str) -> bool:
    """Whether the AND of the query's terms finds a chunk holding ``text`` in a real FTS5 table."""
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{TOKENIZERS[tokenizer]}')")
    conn.execute("INSERT INTO t(rowid, text) VALUES (1, ?)", (text,))
    terms = build_plan(query, tokenizer).fts_terms
    return bool(terms) and bool(list(conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (" AND ".join(terms),))))


@pytest.mark.parametrize(
    ("text", "tokenizer"),
    [
        (unicodedata.normalize("NFD", "Überprüfung der Server"), "unicode61"),  # was "U berpru fung": three tokens
        ("q\u0301x notes", "unicode61"),  # a combining mark inside a word
        ("hmm🤔 later", "unicode61"),  # unicode61 keeps characters newer than Unicode 6.1 in a token
        ("tag\ue000x", "porter"),  # private use
        ("foo-ぁ-bar", "unicode61"),  # was "foo bar": one phrase across the run cut out of it
        ("résumé—draft", "ascii"),  # ascii keeps every non-ASCII character in a token
        ("0\u00a0x", "ascii"),  # even a no-break space
    ],
)
def test_a_chunk_is_found_by_the_text_it_holds(text: str, tokenizer: str) -> None:
    """Issue 14 (property tests): a phrase built from words split here missed the chunk it was typed from."""
    assert _found(text, text, tokenizer)
