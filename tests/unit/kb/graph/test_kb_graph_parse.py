"""Graph layer parsing: the frontmatter profile (checked against plain PyYAML) and wiki-link extraction."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from services.kb.graph.build import build_reports
from services.kb.graph.parse import Claim, extract_links, parse_note, parse_timestamp
from services.kb.index.frontmatter import MAX_DEPTH, FrontmatterError, load_frontmatter

# Documents where YAML 1.1 (plain PyYAML) and the profile (the 1.2 core schema) agree.
SUBSET = [
    "title: Plain title\nconfidence: 0.75\ncount: 3\nneg: -2\nflag: true\ndisabled: false\nnothing: ~\nempty:\n",
    "title: 'It''s quoted'  # comment\nother: \"tab\\there \\\"q\\\" \\u00e9\"\n",
    "# leading comment\n\nclaims:\n  - id: c1\n    text: First\n    status: supported\n    confidence: 0.4\n"
    "  - id: c2\n    text: Second\n\n  # comment between items\n  - id: c3\n",
    "claims:\n- id: same-indent\n  text: list at the key's indent\nnext: value\n",
    "tags: [a, 'b, c', \"d\", 1, 2.5]\nmeta: {k: v, 'q': [x, y], n: null}\nempty_list: []\nempty_map: {}\n",
    "multi: [one,\n  two,\n  three]  # trailing\nafter: yes-text\n",
    "literal: |\n  line one\n    indented\n  line three\nfolded: >\n  folded one\n  folded two\n\n  para\nstrip: |-\n  x\nkeep: |+\n  y\n\nlast: z\n",
    "nested:\n  deeper:\n    deepest: value\n  sibling: [1, 2]\nlist:\n  - - inner a\n    - inner b\n  - plain item\n  -\n    key: after dash\n",
    "url: http://example.com/a:b\ntime: '10:30'\nkey with spaces: v\n\"quoted key\": 1\n",
    "floats: [1.5, -0.25, .5, 2.5E-2]\n",
    "indented: |2\n    two more spaces\n  kept\n",
    "next_line:\n  value below\nquoted_below:\n  'q'\nflow_below:\n  [1, 2]\n"
    "title: A long title\n  wrapped onto\n\n  two lines  # comment\nlist:\n  - one\n    continued\n  - 2\n",
]


@pytest.mark.parametrize("document", SUBSET)
def test_subset_matches_pyyaml(document: str) -> None:
    assert load_frontmatter(document) == yaml.safe_load(document)


@pytest.mark.parametrize(("document", "line", "message"), [
    ("a: 1\n  b: 2\n", 3, "mapping values are not allowed"),
    ("a: 1\na: 2\n", 3, "duplicate key 'a'"),
    ("just text\n", 2, "frontmatter must be a mapping"),
    ("a: [1, 2\nb: 3\n", 3, "while parsing a flow sequence, did not find expected ',' or ']'"),
    ("a: \"open\n", 3, "while scanning a quoted scalar, found unexpected end of stream"),
    ("a: &anchor 1\n", 2, "anchors, aliases and tags are not supported"),
    ("a: !!python/object:os.system x\n", 2, "anchors, aliases and tags are not supported"),
    ("a: *alias\n", 2, "anchors, aliases and tags are not supported"),
    ("- a\n- b\n", 2, "frontmatter must be a mapping"),
    ("a:\n\t- b\n", 3, "found character that cannot start any token"),
    ("a: \"\\q\"\n", 2, "unknown escape character"),
    ("a: 1\n- b\n", 3, "while parsing a block mapping, did not find expected key"),
    ("a: b\n  c: d\n", 3, "mapping values are not allowed"),
    ("a: 1 # comment ends it\n  more\n", 3, "did not find expected key"),
    ("a: \"\\U00110000\"\n", 2, "invalid Unicode character escape code"),
    ("? [a]\n: b\n", 2, "a mapping key must be text"),
])
def test_outside_the_subset_is_an_error_with_a_line(document: str, line: int, message: str) -> None:
    with pytest.raises(FrontmatterError) as caught:
        load_frontmatter(document, first_line=2)
    assert caught.value.line == line
    assert message in str(caught.value)


def test_nesting_is_bounded() -> None:
    deep_block = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 5) + "v: 1\n"
    with pytest.raises(FrontmatterError, match="nesting deeper"):
        load_frontmatter(deep_block)
    with pytest.raises(FrontmatterError, match="nesting deeper"):
        load_frontmatter("a: " + "[" * 5000 + "]" * 5000 + "\n")


def test_yaml_1_2_core_scalars() -> None:
    # Where PyYAML (YAML 1.1) differs: no yes/no/on/off booleans, 1e3 is a float, no octal or dates;
    # a leading zero keeps an id as text.
    assert load_frontmatter("id: 007\nupdatedAt: 2024-01-02\nn: 7\nswitch: off\nbig: 1e3\n") == {
        "id": "007", "updatedAt": "2024-01-02", "n": 7, "switch": "off", "big": 1000.0}


def test_double_quoted_escapes_are_yaml_1_2s_and_always_valid_unicode(tmp_path: Path) -> None:
    """A JSON-style pair of escapes makes one character and a lone one becomes U+FFFD: a lone
    surrogate cannot be written as UTF-8, so one such title would make build_reports raise for the
    whole vault. \\f, \\b and the other YAML 1.2 escapes are read too."""
    document = 'a: "\\ud83d\\ude00"\nb: "\\ud800 lone"\nc: "\\f\\b\\a\\v\\N\\_\\L\\P"\nd: "\\U0000DC00"\n'
    assert load_frontmatter(document) == yaml.safe_load(document.replace("\\ud800", "\\ufffd").replace(
        "\\U0000DC00", "\\ufffd").replace("\\ud83d\\ude00", "\\U0001F600"))
    assert load_frontmatter(document)["a"] == "\U0001F600"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "odd.md").write_text('---\ntitle: "\\ud800 x"\n---\nbody\n', encoding="utf-8")
    report = build_reports(notes, tmp_path / "reports", datetime(2026, 1, 1))
    assert [node.title for node in report.nodes] == ["\ufffd x"]


def test_empty_frontmatter() -> None:
    assert load_frontmatter("") == {}
    assert parse_note("n", "---\n---\nbody [[x]]\n").links == ("x",)


def test_note_fields() -> None:
    note = parse_note("n", "\ufeff---\r\ntitle: 2024\r\nconfidence: 1\r\nupdatedAt: 2024-03-01T10:00:00+02:00\r\n"
                      "claims:\r\n  - id: 7\r\n    text: 12\r\n    confidence: 0\r\n---\r\n[[a]]\r\n")
    assert note.problems == ()
    assert (note.title, note.confidence) == ("2024", 1.0)
    assert note.updated_at == datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
    assert note.claims == (Claim("n", "7", "12", None, 0.0),)
    assert note.links == ("a",)


def test_bad_fields_are_problems_and_the_rest_counts() -> None:
    note = parse_note("n", "---\ntitle: [a]\nconfidence: 1.5\nclaims:\n  - just text\n  - {text: no id}\n"
                      "  - {id: ok, text: [x], confidence: true}\n---\n")
    assert note.problems == (
        "title: expected text, got a list (ignored)",
        "confidence: 1.5 is outside 0 to 1 (ignored)",
        "claims[1]: expected a mapping with id and text, got text (ignored)",
        "claims[2]: missing or invalid id (claim ignored)",
        "claims[3].text: expected text, got a list (ignored)",
        "claims[3].confidence: expected a number from 0 to 1, got a boolean (ignored)",
    )
    assert note.claims == (Claim("n", "ok", None, None, None),)


def test_frontmatter_only_at_the_very_start() -> None:
    note = parse_note("n", "intro\n---\ntitle: not frontmatter\n---\n")
    assert note.title is None and note.problems == ()


def test_timestamps() -> None:
    assert parse_timestamp("2024-01-02") == datetime(2024, 1, 2, tzinfo=UTC)
    assert parse_timestamp("2024-01-02T03:04:05Z") == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_timestamp("2024-01-02 03:04") == datetime(2024, 1, 2, 3, 4, tzinfo=UTC)
    assert parse_timestamp("2024-13-01") is None
    assert parse_timestamp("soon") is None


def test_link_forms() -> None:
    body = (
        "[[plain]] [[target|Label]] [[sectioned#Heading]] [[block#^abc]] [[both#h|label]] [[file.md]]\n"
        "[[ spaced ]] [[table\\|escaped pipe]] [[#own heading]] [[plain]] ![[embedded note]] ![[pic.png]]\n"
        "`[[inline-code]]` [[a [[nested]] ]] [[unclosed\n"
        "~~~\n[[tilde-fenced]]\n~~~\n````\n```\n[[still fenced]]\n````\n[[after]]\n"
    )
    assert extract_links(body) == (
        "plain", "target", "sectioned", "block", "both", "file", "spaced", "table", "embedded note", "nested", "after")


def test_link_scan_is_linear_on_hostile_input() -> None:
    # Many openers and no closers: a backtracking pattern would go quadratic or worse.
    hostile = "[[" * 100_000 + "a|" * 100_000 + "`" * 50_001
    assert extract_links(hostile) == ()
