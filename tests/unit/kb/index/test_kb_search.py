"""Search: ranked hits, hostile queries, CJK/Thai, read-your-writes."""

from __future__ import annotations

import re
from pathlib import Path

import apsw
import pytest
from kb_helpers import OLD, settings, write

from services.kb.index.entries import entry_hash
from services.kb.index.hits import make_snippet
from services.kb.index.indexer import refresh
from services.kb.index.query import MAX_QUERY_CHARS, build_plan, like_pattern
from services.kb.index.schema import open_index, open_reader
from services.kb.index.search import POOL, forget_memos, is_stale, search

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
def test_hostile_queries_never_raise(conn: apsw.Connection, workspace: Path, query: str) -> None:
    # Besides the notes of ``indexed``, one note quotes the query verbatim (as far as a search reads
    # it: the first MAX_QUERY_CHARS). A query with a letter or digit in it must find that note; one
    # with none (punctuation, emoji, blanks) must find nothing rather than everything.
    write(workspace, "MEMORY.md", "# Core\n\n- We deploy with blue/green on Fridays.\n- Coffee is black.\n")
    write(workspace, "memory/ops.md", "# Ops\n\n- The deploy pipeline is well-known.\n")
    write(workspace, "memory/probe.md", f"# Probe\n\n- The probe note says: {query[:MAX_QUERY_CHARS]}\n")
    refresh(conn, workspace, settings())
    result = search(conn, workspace, query)
    assert isinstance(result.hits, list)
    assert result.generation == 1
    paths = {hit.path for hit in result.hits}
    if re.search(r"[^\W_]", query):
        assert "memory/probe.md" in paths, f"{query[:40]!r} did not find the note that quotes it"
    else:
        assert paths == set()


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


def test_frontmatter_is_kept_out_of_chunks_snippets_and_matches(conn: apsw.Connection, workspace: Path) -> None:
    """The frontmatter is metadata: it still sets importance and lowers provenance, but is never indexed or shown."""
    write(workspace, "memory/fm.md", "---\nimportance: 9\nprovenance: untrusted\ntitle: Quokka plan\n---\n# Plan\n\n- The quokka census starts in May.\n")
    write(workspace, "memory/only-fm.md", "---\ntitle: nothing else\n---\n")
    refresh(conn, workspace, settings())
    [hit] = search(conn, workspace, "quokka census").hits
    assert (hit.path, hit.start_line, hit.end_line) == ("memory/fm.md", 6, 8)  # line numbers stay the file's
    assert (hit.importance, hit.provenance) == (9, "untrusted")
    assert hit.snippet == "# Plan - The quokka census starts in May."
    assert hit.entry_hash == entry_hash("- The quokka census starts in May.")
    for frontmatter_only in ("importance", "provenance", "title", "nothing else"):
        assert search(conn, workspace, frontmatter_only).hits == []
    texts = [str(row[0]) for row in conn.execute("SELECT text FROM kb_chunks")]
    assert texts == ["# Plan\n\n- The quokka census starts in May."]  # the frontmatter-only file has no chunk


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
            reader.execute("DELETE FROM kb_chunk_rows")
    finally:
        reader.close()


def test_snippet_window() -> None:
    text = " ".join(f"word{n}" for n in range(200)) + " needle " + " ".join(f"tail{n}" for n in range(200))
    snippet = make_snippet(text, ("needle",))
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "needle" in snippet
    assert len(snippet) <= 202
    assert make_snippet("short text", ("absent",)) == "short text"


# --- AND first, OR fallback ---------------------------------------------------------

VOCAB = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp", "lumen")


def all_or_reference(conn: apsw.Connection, query: str, limit: int) -> list[tuple[str, int, int, float]]:
    """The ranking before AND-first: every table's OR pool and AND pool scored together, all in one pass.

    (path, start_line, end_line, score) best first, exactly as ``search`` ranked before.
    """
    plan = build_plan(query, str(conn.execute("SELECT value FROM kb_meta WHERE key = 'tokenizer'").fetchall()[0][0]))

    def match(table: str, expression: str) -> dict[int, float]:
        sql = f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT {POOL}"
        return {int(r[0]): max(0.0, float(r[1])) for r in conn.execute(sql, (expression,))}

    raw: dict[int, float] = {}
    required: list[set[int]] = []
    for table, terms in (("kb_chunks_fts", plan.fts_terms), ("kb_chunks_cjk", plan.trigram_terms)):
        if not terms:
            continue
        scores = match(table, " OR ".join(terms))
        every = set(scores)
        if len(terms) > 1:
            both = match(table, " AND ".join(terms))
            for rowid, value in both.items():
                scores.setdefault(rowid, value)
            every = set(both)
        for rowid, value in scores.items():
            raw[rowid] = raw.get(rowid, 0.0) + value
        required.append(every)
    for term in plan.substrings:
        sql = "SELECT id FROM kb_chunks WHERE text LIKE ? ESCAPE '\\'" + (" AND has_cjk = 1" if term.cjk_only else "")
        found = {int(r[0]) for r in conn.execute(f"{sql} LIMIT {POOL}", (like_pattern(term.text),))}
        for rowid in found:
            raw[rowid] = raw.get(rowid, 0.0) + 1.0
        required.append(found)
    rows = {
        int(r[0]): (str(r[1]), int(r[2]), int(r[3]), int(r[4]))
        for r in conn.execute(
            "SELECT c.id, s.path, c.start_line, c.end_line, c.importance FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id"
        )
    }
    ranked = []
    for rowid, x in raw.items():
        relevance = x / (1.0 + x) * (0.8 + 0.02 * rows[rowid][3])
        ranked.append((relevance + (1.0 if all(rowid in ids for ids in required) else 0.0), rowid))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [(*rows[rowid][:3], score) for score, rowid in ranked[:limit]]


def small_corpus(workspace: Path, seed: int = 7) -> None:
    """60 notes of random words from VOCAB (skewed, so some pairs co-occur often and some rarely),
    varied importance, entries of one to three lines, a few CJK lines."""
    import random

    rng = random.Random(seed)
    weights = [2 ** (len(VOCAB) - n) for n in range(len(VOCAB))]
    for n in range(60):
        lines = [f"---\nimportance: {rng.randint(1, 10)}\n---"] if n % 3 == 0 else []
        lines.append(f"# Note {n}")
        for _ in range(rng.randint(2, 8)):
            body = [" ".join(rng.choices(VOCAB, weights=weights, k=rng.randint(3, 12))) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.1:
                body.append(rng.choice(("东京的港口", "北京开会", "ภาษาไทย")))
            lines.append("\n- ".join(["", *body])[1:] if rng.random() < 0.5 else "\n".join(body))
            lines.append("")
        write(workspace, f"memory/n{n:02d}.md", "\n".join(lines) + "\n")


def reference_queries(seed: int = 11) -> list[str]:
    import random

    rng = random.Random(seed)
    queries = list(VOCAB)
    queries += [f"{a} {b}" for a, b in (rng.sample(VOCAB, 2) for _ in range(60))]
    queries += [" ".join(rng.sample(VOCAB, 3)) for _ in range(40)]
    queries += [" ".join(rng.sample(VOCAB, 4)) for _ in range(20)]
    queries += ["amb*", "lumen kel*", "harbor-kelp", "东京 amber", "北京", "京 lumen", "garnet 港口"]
    return queries


@pytest.mark.parametrize("limit", [1, 3, 6, 20])
def test_and_first_matches_the_all_or_ranking(conn: apsw.Connection, workspace: Path, limit: int) -> None:
    small_corpus(workspace)
    refresh(conn, workspace, settings())
    fallbacks = 0
    for query in reference_queries():
        got = [(h.path, h.start_line, h.end_line, h.score) for h in search(conn, workspace, query, limit, check_stale=False).hits]
        assert got == all_or_reference(conn, query, limit), query
        fallbacks += any(score < 1.0 for *_, score in got)
    assert fallbacks >= 10  # the corpus exercises the OR fallback, not only AND


def test_and_first_matches_the_all_or_ranking_with_trigram(db_path: Path, workspace: Path) -> None:
    small_corpus(workspace)
    conn = open_index(db_path, settings("trigram"))
    refresh(conn, workspace, settings("trigram"))
    for query in reference_queries()[:60] + ["ab amber", "jun kelp"]:
        got = [(h.path, h.start_line, h.end_line, h.score) for h in search(conn, workspace, query, 6, check_stale=False).hits]
        assert got == all_or_reference(conn, query, 6), query


def test_operator_words_do_not_drive_the_or_fallback(conn: apsw.Connection, workspace: Path) -> None:
    notes = {"z": "zebra crossing", "y": "yak shaving", "s": "salt and pepper", "b": "bread and butter",
             "o": "this or that", "n": "not now", "x": "near the sea"}  # fmt: skip
    for name, text in notes.items():
        write(workspace, f"memory/{name}.md", f"- {text}\n")
    refresh(conn, workspace, settings())
    # "and"/"or"/"not"/"near" are still words for AND matching ...
    hits = search(conn, workspace, "bread AND butter").hits
    assert [h.path for h in hits] == ["memory/b.md"] and hits[0].score >= 1.0
    # ... but never pull in chunks that only share the operator word.
    for query in ("zebra AND yak", "zebra OR yak", "zebra NOT yak", "(zebra OR yak)", "zebra NEAR yak"):
        assert sorted(h.path for h in search(conn, workspace, query).hits) == ["memory/y.md", "memory/z.md"], query
    assert [h.path for h in search(conn, workspace, "AND zebra OR").hits] == ["memory/z.md"]
    # A query of operator words only keeps them all (it would otherwise have no term left).
    assert sorted(h.path for h in search(conn, workspace, "and or").hits) == ["memory/b.md", "memory/o.md", "memory/s.md"]


def test_common_terms_do_not_drive_the_or_fallback(conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import services.kb.index.search as search_module

    for n in range(8):
        write(workspace, f"memory/c{n}.md", f"- common filler {n}\n")
    for n in range(3):
        write(workspace, f"memory/r{n}.md", f"- rare walrus {n}\n")
    refresh(conn, workspace, settings())
    monkeypatch.setattr(search_module, "COMMON_CHUNKS", 5)
    # "common" matches 8 chunks (> 5), "walrus" 3: at least the limit, so only walrus drives the fallback.
    assert sorted(h.path for h in search(conn, workspace, "walrus common", 3).hits) == [f"memory/r{n}.md" for n in range(3)]
    # With a limit the rare terms cannot fill, every term drives it (results up to the limit, as with no bound on common terms).
    paths = [h.path for h in search(conn, workspace, "walrus common", 6).hits]
    assert len(paths) == 6 and {f"memory/r{n}.md" for n in range(3)} <= set(paths)
    monkeypatch.setattr(search_module, "COMMON_CHUNKS", 2000)
    assert [h.path for h in search(conn, workspace, "walrus common", 6).hits] == paths


def test_exclude_paths_applies_before_the_limit_on_both_paths(conn: apsw.Connection, workspace: Path) -> None:
    for n in range(8):
        write(workspace, f"memory/z{n}.md", f"- zebra yak {n}\n" if n < 4 else f"- zebra {n}\n")
    refresh(conn, workspace, settings())
    hidden = {"memory/z0.md", "memory/z1.md"}
    for query in ("zebra", "zebra yak"):
        hits = search(conn, workspace, query, 4, exclude_paths=hidden).hits
        assert len(hits) == 4 and not hidden & {h.path for h in hits}, query
    assert {h.path for h in search(conn, workspace, "zebra yak", 2, exclude_paths=hidden).hits} == {"memory/z2.md", "memory/z3.md"}


# --- entry choice and the per-connection memo -------------------------------------------------


def reference_best_entry(text: str, start: int, end: int, fallback: str | None,
                         entries: list[tuple[int, int, str]], words: tuple[str, ...]) -> str | None:  # fmt: skip
    """The entry choice spelled out: join each entry's lines and count the query words in them."""
    if len(entries) <= 1:
        return entries[0][2] if entries else fallback
    folded = text.casefold()
    present = [word for word in words if word in folded]
    lines = folded.split("\n")
    if not present or len(lines) != end - start + 1:
        return fallback
    best: tuple[int, str | None] = (0, fallback)
    for entry_start, entry_end, digest in entries:
        body = "\n".join(lines[max(entry_start, start) - start : min(entry_end, end) - start + 1])
        hits = sum(1 for word in present if word in body)
        if hits > best[0] or (hits == best[0] and hits > 0 and digest == fallback):
            best = (hits, digest)
    return best[1]


def test_best_entry_matches_the_spelled_out_choice() -> None:
    import random

    from services.kb.index.hits import ChunkRow as _Row
    from services.kb.index.hits import best_entry as _best_entry

    rng = random.Random(5)
    vocab = ["alpha", "beta", "gamma", "al", "ph", "Ünï", "ß", "ss", "東京", "x", "and"]
    for _ in range(20_000):
        lines = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(1, 12))]
        text = "\n".join(lines)
        start = rng.randint(1, 50)
        end = start + len(lines) - 1 + (1 if rng.random() < 0.05 else 0)  # sometimes a line count that does not fit
        fallback = rng.choice([None, "h0", "h1", "h2"])
        entries = []
        for _ in range(rng.randint(0, 6)):
            entry_start = rng.randint(start - 3, end)
            entries.append((entry_start, rng.randint(max(entry_start, start), end + 3), rng.choice(["h0", "h1", "h2", "h3"])))
        entries.sort()
        words = tuple(dict.fromkeys(w.casefold() for w in rng.sample(vocab, rng.randint(1, 4))))
        row = _Row("p", start, end, "agent", 5, fallback, text, 1)
        expected = reference_best_entry(text, start, end, fallback, entries, words)
        assert _best_entry(row, entries, words) == expected
        assert _best_entry(row, entries, words, text.casefold()) == expected


def test_a_changed_index_is_never_answered_from_the_memo(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    write(workspace, "memory/m.md", "- walrus one\n- penguin two\n")
    refresh(conn, workspace, settings())
    first = search(conn, workspace, "walrus", check_stale=False)
    assert first.hits[0].entry_hash == entry_hash("- walrus one")
    again = search(conn, workspace, "walrus", check_stale=False)  # answered with the memo's entries
    assert again == first
    write(workspace, "memory/m.md", "- walrus three\n- penguin two\n", mtime=OLD + 10)
    refresh(conn, workspace, settings())
    after = search(conn, workspace, "walrus", check_stale=False)
    assert after.generation == first.generation + 1
    assert after.hits[0].entry_hash == entry_hash("- walrus three")
    # a second connection keeps its own memo and agrees
    reader = open_reader(db_path)
    try:
        assert search(reader, workspace, "walrus", check_stale=False) == after
    finally:
        reader.close()


def test_forgotten_memos_are_rebuilt_by_the_next_search(conn: apsw.Connection, workspace: Path, db_path: Path) -> None:
    """The minute's release drops every connection's memo (handles.run): the same answers after it."""
    write(workspace, "memory/m.md", "- walrus one\n- penguin two\n")
    refresh(conn, workspace, settings())
    reader = open_reader(db_path)
    try:
        first = search(conn, workspace, "walrus", check_stale=False), search(reader, workspace, "walrus", check_stale=False)
        assert forget_memos() >= 2  # this connection's and the reader's (others of this process may have one too)
        assert forget_memos() == 0
        assert (search(conn, workspace, "walrus", check_stale=False), search(reader, workspace, "walrus", check_stale=False)) == first
        assert forget_memos() >= 2
    finally:
        reader.close()
