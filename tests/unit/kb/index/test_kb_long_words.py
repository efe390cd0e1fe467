"""Long words: indexing, Search and the recall probe agree, so a word is found by its own text.

A query reads its words up to 1,000 characters and searches a longer word by its first
characters as a prefix; the indexer cuts a long line between words, so those characters are
whole in one chunk (docs/concepts/archive.md "Knowledge archive (KB)" › Long words). Searched as its first 1,000
characters as a whole token, a 1,200-character word would match no token of the index, and a word
across a cut made wherever a count fell would be in no chunk at all.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from kb_helpers import settings, write

from services.kb.archive.recall_probe import probe
from services.kb.index import chunking, meta, schema
from services.kb.index.indexer import refresh
from services.kb.index.search import search


def _lines_found(conn: apsw.Connection, workspace: Path, query: str, path: str = "memory/notes.md") -> set[int]:
    return {n for h in search(conn, workspace, query, 20).hits if h.path == path for n in range(h.start_line, h.end_line + 1)}


@pytest.mark.parametrize("char", ["k", "é", "🔑", "\U00020000"])  # one, two, four, four bytes; the last is CJK
@pytest.mark.parametrize("length", [999, 1000, 1001, 1200])
def test_a_word_is_found_by_its_own_text_at_the_cut(conn: apsw.Connection, workspace: Path, char: str, length: int) -> None:
    word = "z" + char * (length - 1)  # a letter first: a word of emoji alone holds nothing to search
    write(workspace, "memory/notes.md", f"# Notes\n\n- first entry\n- the key {word} rotates\n- last entry\n")
    refresh(conn, workspace, settings())
    assert 4 in _lines_found(conn, workspace, word)
    assert 4 in _lines_found(conn, workspace, f"key {word}")
    assert probe(conn, workspace, [("memory/notes.md", word, f"- the key {word} rotates")]) == [True]


def test_a_huge_query_word_is_a_prefix_not_an_error(conn: apsw.Connection, workspace: Path) -> None:
    blob = "QmFzZTY0" * 150
    write(workspace, "memory/notes.md", f"# Notes\n\n- blob {blob}\n")
    refresh(conn, workspace, settings())
    for query in (blob + "A" * 5_000_000, blob[:1000] + "different tail"):  # the same first 1,000: the same hit
        hits = search(conn, workspace, query).hits  # read no further than those 1,000
        assert [(h.path, h.end_line) for h in hits] == [("memory/notes.md", 3)]


@pytest.mark.parametrize("tokenizer", ["unicode61", "porter", "ascii", "trigram"])
def test_a_word_across_a_chunk_boundary_of_a_long_line_is_found(conn: apsw.Connection, workspace: Path, tokenizer: str) -> None:
    """A line longer than a chunk (64 characters here) is cut between words: cut every 64 characters,
    a word across a cut would be in no chunk whole."""
    line = "- " + " ".join(f"harbour{n:03d}" for n in range(40))  # 400 characters, no word at a multiple of 64 alone
    write(workspace, "memory/notes.md", f"# Notes\n\n{line}\n")
    archive = settings(tokenizer, chunk_tokens=16, chunk_overlap=4)
    refresh(conn, workspace, archive)
    for n in range(40):
        assert _lines_found(conn, workspace, f"harbour{n:03d}") == {3}, n
    assert probe(conn, workspace, [("memory/notes.md", "harbour005 harbour039", line)]) == [True]


@pytest.mark.parametrize("tokenizer", ["unicode61", "porter", "ascii", "trigram"])
def test_a_token_inside_a_word_longer_than_a_chunk_is_found(conn: apsw.Connection, workspace: Path, tokenizer: str) -> None:
    """Minified JSON: one word of 3,000 characters. Its segments overlap by half a chunk, so each of
    its tokens (shorter than that) is whole in one of them, and its first characters start one."""
    pairs = ",".join(f'"field{n:03d}":"value{n:03d}"' for n in range(110))
    blob = "{" + pairs + "}"
    write(workspace, "memory/notes.md", f"# Notes\n\n{blob}\n")
    refresh(conn, workspace, settings(tokenizer, chunk_tokens=64, chunk_overlap=8))
    for n in range(110):
        assert _lines_found(conn, workspace, f"value{n:03d}") == {3}, n
    assert _lines_found(conn, workspace, blob) == {3}  # the word itself: its first 256 characters, as a prefix
    assert probe(conn, workspace, [("memory/notes.md", blob, blob)]) == [True]


def test_an_entry_longer_than_a_chunk_is_found_by_each_of_its_words(conn: apsw.Connection, workspace: Path) -> None:
    """No chunk holds all the words of an entry spread over several chunks: the probe asks each word
    for a chunk of the entry's lines, as Search finds it by each. The neighbours do not count."""
    entry = "- start " + "filler " * 60 + "finish"
    write(workspace, "memory/notes.md", f"# Notes\n\n- start here\n{entry}\n- finish there\n")
    refresh(conn, workspace, settings(chunk_tokens=16, chunk_overlap=4))
    assert probe(conn, workspace, [("memory/notes.md", "start finish", entry)]) == [True]
    assert probe(conn, workspace, [("memory/notes.md", "start finish absent", entry)]) == [False]
    assert probe(conn, workspace, [("memory/notes.md", "start here", entry)]) == [False]  # "here" is a neighbour's


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_nul_in_a_note_hides_nothing_after_it(conn: apsw.Connection, workspace: Path, tokenizer: str) -> None:
    """SQLite's LIKE and substr read a text only up to its first NUL: a short word after one would not
    be found (LIKE), and a chunk carrying the overlap of one holding a NUL would read back other text. A NUL
    in a chunk's text is stored as a space."""
    lines = ["# Notes", "", "- the ferry\x00 zq leaves at nine", "- the harbour gauge reads low", "- tide tables"]
    write(workspace, "memory/notes.md", "\n".join(lines) + "\n")
    refresh(conn, workspace, settings(tokenizer, chunk_tokens=16, chunk_overlap=12))
    assert 3 in _lines_found(conn, workspace, "zq")  # two letters: a LIKE scan under trigram
    assert 4 in _lines_found(conn, workspace, "harbour gauge")
    file = [line.replace("\x00", " ") for line in lines]
    for start, end, text in conn.execute("SELECT start_line, end_line, text FROM kb_chunks"):
        assert text == "\n".join(file[start - 1 : end]), (start, end, text)
    assert probe(conn, workspace, [("memory/notes.md", "ferry leaves", lines[2])]) == [True]


def _old_segments(line: str, max_chars: int) -> list[tuple[int, int]]:
    """Version 6's cut of a long line: every ``max_chars`` characters, wherever that fell."""
    return [(start, min(start + max_chars, len(line))) for start in range(0, len(line), max_chars)]


def test_a_version_6_index_reads_again_only_the_sources_with_a_long_line(
    conn: apsw.Connection, workspace: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade keeps the index and its lifecycle rows; only a source that had a line cut into
    segments (or a NUL) is read again by the next refresh, and its words are then found."""
    word = "K" * 1200
    write(workspace, "memory/long.md", f"# Long\n\n- {'pad ' * 100}{word} rotates\n")  # the word across 1,024
    write(workspace, "memory/short.md", "# Short\n\n- the ferry leaves at nine\n")
    write(workspace, "MEMORY.md", "# Memory\n\n- coffee is black\n")
    write(workspace, "memory/nul.md", "# Nul\n\n- a\x00b\n")
    with monkeypatch.context() as patched:
        patched.setattr(chunking, "segment_spans", _old_segments)
        assert refresh(conn, workspace, settings(chunk_tokens=256)).indexed == 4
    nul = "SELECT id FROM kb_sources WHERE path = 'memory/nul.md'"
    conn.execute(f"UPDATE kb_chunk_rows SET text = replace(text, 'a b', ?) WHERE source_id = ({nul})", ("a\x00b",))  # as 6 stored it
    meta.set_meta(conn, "schema_version", "6")
    life = conn.execute("SELECT * FROM kb_lifecycle ORDER BY entry_hash").fetchall()
    short_rows = conn.execute("SELECT * FROM kb_chunk_rows WHERE source_id = (SELECT id FROM kb_sources WHERE path = 'memory/short.md')").fetchall()
    assert _lines_found(conn, workspace, word, "memory/long.md") == set()  # version 6: cut at 1,024, searched as 1,000
    conn.close()

    upgraded = schema.open_index(db_path, settings(chunk_tokens=256))
    try:
        assert meta.get_meta(upgraded, "schema_version") == str(schema.SCHEMA_VERSION) == "7"
        hashes = dict(upgraded.execute("SELECT path, content_hash FROM kb_sources").fetchall())
        assert hashes["memory/long.md"] == hashes["memory/nul.md"] == "" and hashes["memory/short.md"] and hashes["MEMORY.md"]
        report = refresh(upgraded, workspace, settings(chunk_tokens=256))
        assert (report.indexed, report.skipped) == (2, 2)
        assert _lines_found(upgraded, workspace, word, "memory/long.md") == {3}
        assert upgraded.execute("SELECT * FROM kb_lifecycle ORDER BY entry_hash").fetchall() == life
        same = upgraded.execute("SELECT * FROM kb_chunk_rows WHERE source_id = (SELECT id FROM kb_sources WHERE path = 'memory/short.md')")
        assert same.fetchall() == short_rows  # untouched, ids and all
    finally:
        upgraded.close()
