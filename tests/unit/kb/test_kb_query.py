"""User query → quoted FTS5 terms."""

from __future__ import annotations

from services.kb.query import SubstringTerm, build_plan, has_unsegmented, like_pattern


def test_pieces_become_quoted_phrases() -> None:
    plan = build_plan('well-known "deploy AND foo:bar (x) NOT', "unicode61")
    assert plan.fts_terms == ('"well known"', '"deploy"', '"AND"', '"foo bar"', '"x"', '"NOT"')


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
