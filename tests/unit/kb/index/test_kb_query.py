"""User query → quoted FTS5 terms."""

from __future__ import annotations

import unicodedata

import apsw
import pytest

from services.kb.index.query import SubstringTerm, build_plan, has_unsegmented, like_pattern, query_words, word_chars
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
    plan = build_plan("東京 北京市 ภาษาไทย 京 foo-東京-bar", "unicode61")
    assert plan.fts_terms == ('"foo-"', '"-bar"')
    assert plan.trigram_terms == ('"北京市"', '"ภาษาไทย"')
    assert plan.substrings == (SubstringTerm("東京", True), SubstringTerm("京", True))


def test_a_run_glued_to_other_characters_is_searched_with_them() -> None:
    """``deploy東京`` is one unicode61 token: the phrase ``"deploy"`` never matches it, so a chunk
    holding it would be found only by the OR fallback, and the recall probe (every term) not at all. The
    stretch up to the nearest ASCII punctuation goes to the trigram table, which matches substrings."""
    plan = build_plan("deploy東京 x東 東京🙂/done", "unicode61")
    assert plan.fts_terms == ('"/done"',)
    assert plan.trigram_terms == ('"deploy東京"', '"東京🙂"')
    assert plan.substrings == (SubstringTerm("x東", True),)


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
        (unicodedata.normalize("NFD", "Überprüfung der Server"), "unicode61"),  # not "U berpru fung": three tokens
        ("q\u0301x notes", "unicode61"),  # a combining mark inside a word
        ("hmm🤔 later", "unicode61"),  # unicode61 keeps characters newer than Unicode 6.1 in a token
        ("tag\ue000x", "porter"),  # private use
        ("foo-ぁ-bar", "unicode61"),  # not "foo bar": one phrase across the run cut out of it
        ("résumé—draft", "ascii"),  # ascii keeps every non-ASCII character in a token
        ("0\u00a0x", "ascii"),  # even a no-break space
    ],
)
def test_a_chunk_is_found_by_the_text_it_holds(text: str, tokenizer: str) -> None:
    """A phrase built from words split here finds the chunk it was typed from."""
    assert _found(text, text, tokenizer)


# --- long words: the cut and the prefix -----------------------------------------------


@pytest.mark.parametrize("length", [999, 1000])
def test_a_word_up_to_the_limit_is_searched_whole(length: int) -> None:
    word = "k" * length
    assert query_words(word) == [(word, False)]
    assert build_plan(word, "unicode61").fts_terms == (f'"{word}"',)


def test_a_word_over_the_limit_is_its_first_characters_as_a_prefix() -> None:
    word = "k" * 1001
    assert query_words(word) == [(word[:1000], True)]
    assert build_plan(word, "unicode61").fts_terms == (f'"{word[:1000]}"*',)
    assert build_plan(word, "trigram").fts_terms == (f'"{word[:1000]}"',)  # a substring: no prefix needed
    assert build_plan(word + "*", "unicode61").fts_terms == (f'"{word[:1000]}"*',)


def test_the_limit_counts_characters_not_bytes() -> None:
    for char in ("é", "ß", "🔑", "\U00020000"):  # two, two, four and four bytes in UTF-8
        for length in (999, 1000, 1001):
            words = query_words(char * length)
            assert words == [(char * min(length, 1000), length > 1000)]
    han = "東" * 1001
    assert build_plan(han, "unicode61").trigram_terms == (f'"{han[:1000]}"',)


def test_the_word_limit_is_a_chunk_when_chunks_are_shorter() -> None:
    assert word_chars("400/80") == 1000
    assert word_chars("250/0") == 1000
    assert word_chars("249/0") == 996
    assert word_chars("16/4") == 64
    assert word_chars(None) == word_chars("") == word_chars("x/y") == 1000
    assert build_plan("k" * 100, "unicode61", 64).fts_terms == ('"' + "k" * 64 + '"*',)


def test_words_fill_the_query_and_the_one_that_ends_it_is_a_prefix() -> None:
    head = "a" * 990
    assert query_words(f"{head} tail moreover") == [(head, False), ("tail", False), ("more", True)]
    assert build_plan(f"{head} tail moreover", "unicode61").fts_terms == (f'"{head}"', '"tail"', '"more"*')
    assert query_words(f"{head} tail more") == [(head, False), ("tail", False), ("more", False)]  # 1,000 exactly
    assert query_words(f"{head} {'b' * 8} next") == [(head, False), ("b" * 8, False)]  # 999: no room for " n"
    assert query_words(f"{head}\x00\x1f{'c' * 20}") == [(head, False), ("c" * 9, True)]  # controls part words


def test_porter_never_stems_a_cut_token() -> None:
    head = "a" * 990
    # "relational" cut to "relationa" would be stemmed to a prefix of nothing: it goes back to the slash,
    # and a cut token with no separator before it and at most 64 bytes is left out.
    assert build_plan(f"{head} x/relational", "porter").fts_terms == (f'"{head}"', '"x/"*')
    assert build_plan(f"{head} relational", "porter").fts_terms == (f'"{head}"',)
    assert build_plan(f"{head} relational", "unicode61").fts_terms == (f'"{head}"', '"relationa"*')
    assert build_plan("r" * 1200, "porter").fts_terms == ('"' + "r" * 1000 + '"*',)  # over 64 bytes: not stemmed


def test_a_huge_query_is_read_no_further_than_it_keeps() -> None:
    plan = build_plan("z" * 5_000_000, "unicode61")
    assert plan.fts_terms == ('"' + "z" * 1000 + '"*',)
    assert build_plan(" " * 5_000_000 + "found", "unicode61").fts_terms == ('"found"',)
