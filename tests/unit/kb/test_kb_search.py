"""Search: ranked hits, hostile queries, CJK/Thai, read-your-writes."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from kb_helpers import OLD, settings, write

from services.kb.entries import entry_hash
from services.kb.indexer import refresh
from services.kb.schema import open_index, open_reader
from services.kb.search import is_stale, make_snippet, search

HOSTILE = [
    '"',
    '"unbalanced',
    "a\"b'c",
    "AND",
    "OR OR",
    "NOT deploy",
    "deploy AND",
    "deploy OR NOT",
    "NEAR(deploy coffee)",
    "well-known",
    "-deploy",
    "--",
    "*",
    "deploy*",
    "*deploy",
    "(deploy",
    "deploy)",
    "((()))",
    "col:deploy",
    "text:deploy",
    ":",
    "^deploy",
    "{deploy}",
    "[deploy]",
    "deploy + coffee",
    "🙂",
    "deploy 🙂🚀",
    "",
    "   ",
    "\t\n",
    "\x00",
    "%_%",
    "\\",
    "'; DROP TABLE kb_chunks; --",
    "a" * 5000,
    "東京 AND (ภาษา",
]


@pytest.fixture
def indexed(conn: apsw.Connection, workspace: Path) -> apsw.Connection:
    write(workspace, "MEMORY.md", "# Core\n\n- We deploy with blue/green on Fridays.\n- Coffee is black.\n")
    write(workspace, "memory/ops.md", "---\nimportance: 9\n---\n# Ops\n\n- The deploy pipeline is well-known.\n")
    write(workspace, "memory/inbox/mail.md", "Please deploy my coffee machine firmware.\n")
    write(
        workspace,
        "memory/travel.md",
        "# 旅行\n\n"
        "- 我们明天去北京开会讨论预算。\n"  # Chinese, line 3
        "- 東京に行きました。とても楽しかったです。\n"  # Japanese, line 4
        "- ภาษาไทยเป็นภาษาที่สวยงามมาก\n",  # Thai, line 5
    )
    refresh(conn, workspace, settings())
    return conn


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(indexed: apsw.Connection, workspace: Path, query: str) -> None:
    result = search(indexed, workspace, query)
    assert isinstance(result.hits, list)
    assert result.generation == 1


def test_operators_are_plain_words(indexed: apsw.Connection, workspace: Path) -> None:
    assert search(indexed, workspace, "NOT").hits == []
    paths = {h.path for h in search(indexed, workspace, "NOT deploy").hits}
    assert paths == {"MEMORY.md", "memory/ops.md", "memory/inbox/mail.md"}
    assert [h.path for h in search(indexed, workspace, "well-known").hits] == ["memory/ops.md"]
    assert {h.path for h in search(indexed, workspace, "(deploy").hits} == paths
    assert {h.path for h in search(indexed, workspace, "deplo*").hits} == paths


def test_hit_fields(indexed: apsw.Connection, workspace: Path) -> None:
    hits = search(indexed, workspace, "blue green").hits
    assert len(hits) == 1
    hit = hits[0]
    assert (hit.path, hit.start_line, hit.end_line) == ("MEMORY.md", 1, 4)
    assert (hit.provenance, hit.importance) == ("owner", 5)
    assert hit.entry_hash == entry_hash("- We deploy with blue/green on Fridays.")
    assert "blue/green" in hit.snippet
    assert 1.0 <= hit.score < 2.0


def test_all_terms_rank_above_some_terms(indexed: apsw.Connection, workspace: Path) -> None:
    hits = search(indexed, workspace, "coffee machine").hits
    assert [h.path for h in hits] == ["memory/inbox/mail.md", "MEMORY.md"]
    assert hits[0].score >= 1.0 > hits[1].score > 0.0
    assert hits[0].provenance == "untrusted"


def test_entry_hash_names_the_matching_entry(indexed: apsw.Connection, workspace: Path) -> None:
    hit = search(indexed, workspace, "coffee black").hits[0]
    assert hit.entry_hash == entry_hash("- Coffee is black.")


def test_limit_is_clamped(conn: apsw.Connection, workspace: Path) -> None:
    for n in range(30):
        write(workspace, f"memory/n{n}.md", f"zebra {n}\n")
    refresh(conn, workspace, settings())
    assert len(search(conn, workspace, "zebra").hits) == 6
    assert len(search(conn, workspace, "zebra", 3).hits) == 3
    assert len(search(conn, workspace, "zebra", 100).hits) == 20
    assert len(search(conn, workspace, "zebra", 0).hits) == 6


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("北京", 3),  # 2 chars inside a longer run: unicode61 alone cannot find this
        ("预算", 3),
        ("北京开会", 3),
        ("東京", 4),
        ("楽しかった", 4),
        ("京", None),  # one char: both 北京 and 東京 contain it
        ("ภาษาไทย", 5),
        ("สวยงาม", 5),
        ("ไทย", 5),
    ],
)
def test_cjk_and_thai_found_under_unicode61(
    indexed: apsw.Connection, workspace: Path, query: str, line: int | None
) -> None:
    hits = search(indexed, workspace, query).hits
    assert [h.path for h in hits] == ["memory/travel.md"]
    assert query in hits[0].snippet
    if line is not None:
        assert hits[0].entry_hash == entry_hash(
            {3: "- 我们明天去北京开会讨论预算。", 4: "- 東京に行きました。とても楽しかったです。", 5: "- ภาษาไทยเป็นภาษาที่สวยงามมาก"}[line]
        )


def test_cjk_absent_text_is_not_found(indexed: apsw.Connection, workspace: Path) -> None:
    assert search(indexed, workspace, "上海").hits == []
    assert search(indexed, workspace, "大阪府").hits == []


def test_mixed_script_query(indexed: apsw.Connection, workspace: Path) -> None:
    write(workspace, "memory/mix.md", "deploy to 北京 region\n")
    refresh(indexed, workspace, settings())
    hits = search(indexed, workspace, "deploy 北京").hits
    assert hits[0].path == "memory/mix.md" and hits[0].score >= 1.0


@pytest.mark.parametrize("tokenizer", ["trigram", "porter", "ascii"])
def test_other_tokenizers(db_path: Path, workspace: Path, tokenizer: str) -> None:
    write(workspace, "memory/a.md", "The deploy pipeline is well-known.\n- 東京に行きました\n")
    conn = open_index(db_path, settings(tokenizer))
    refresh(conn, workspace, settings(tokenizer))
    for query in ("deploy", "well-known", "東京", "pipeline deploy"):
        assert [h.path for h in search(conn, workspace, query).hits] == ["memory/a.md"], query
    for query in HOSTILE:
        assert isinstance(search(conn, workspace, query).hits, list)


def test_trigram_short_terms_use_substring_scan(db_path: Path, workspace: Path) -> None:
    write(workspace, "memory/a.md", "go to QA now\n")
    conn = open_index(db_path, settings("trigram"))
    refresh(conn, workspace, settings("trigram"))
    assert [h.path for h in search(conn, workspace, "qa").hits] == ["memory/a.md"]


def test_stale_flag_after_edit_add_and_delete(indexed: apsw.Connection, workspace: Path) -> None:
    assert search(indexed, workspace, "coffee").stale is False
    assert is_stale(indexed, workspace) is False
    write(workspace, "memory/ops.md", "---\nimportance: 9\n---\n# Ops\n\n- edited\n", mtime=OLD + 3)
    result = search(indexed, workspace, "coffee")
    assert (result.stale, result.generation) == (True, 1)
    assert search(indexed, workspace, "coffee", check_stale=False).stale is False
    report = refresh(indexed, workspace, settings())
    after = search(indexed, workspace, "edited")
    assert (after.stale, after.generation, report.generation) == (False, 2, 2)
    write(workspace, "memory/new.md", "new\n")
    assert is_stale(indexed, workspace) is True
    refresh(indexed, workspace, settings())
    (workspace / "MEMORY.md").unlink()
    assert is_stale(indexed, workspace) is True


def test_read_only_connection_can_search(indexed: apsw.Connection, workspace: Path, db_path: Path) -> None:
    reader = open_reader(db_path)
    try:
        assert [h.path for h in search(reader, workspace, "black").hits] == ["MEMORY.md"]
        with pytest.raises(apsw.ReadOnlyError):
            reader.execute("DELETE FROM kb_chunks")
    finally:
        reader.close()


def test_snippet_window() -> None:
    text = " ".join(f"word{n}" for n in range(200)) + " needle " + " ".join(f"tail{n}" for n in range(200))
    snippet = make_snippet(text, ("needle",))
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "needle" in snippet
    assert len(snippet) <= 202
    assert make_snippet("short text", ("absent",)) == "short text"
